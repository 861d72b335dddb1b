# deploy-test-image.sh — the image part of scripts/deploy-test.sh (sourced by it; uses its
# helpers ok, bad, say, free_port, wait_http, produce_consume and $work, $src).
# podman here needs runc and a containers.conf with ulimits the sandbox allows (its hard
# nofile/nproc limits cannot be raised): both are set for this test only, in $work.
# Images live in /var/tmp/strata-podman (kept, so a rerun reuses the base and the layers).

# podman's configuration for this test ($work) and the base image, made once.
base_img=localhost/strata-base:bookworm
podman_setup() {
  need mmdebstrap mmdebstrap; need kcat kcat; need curl curl
  export CONTAINERS_CONF=$work/containers.conf CONTAINERS_STORAGE_CONF=$work/storage.conf
  local lim=16384
  cat >"$CONTAINERS_CONF" <<CONF
[containers]
default_ulimits = ["nofile=$lim:$lim", "nproc=$lim:$lim"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
  cat >"$CONTAINERS_STORAGE_CONF" <<CONF
[storage]
driver = "overlay"
graphroot = "/var/tmp/strata-podman/root"
runroot = "/var/tmp/strata-podman/run"
CONF
  local base=$base_img t0
  # The base: bookworm minbase from Debian's archive, trimmed as bookworm-slim is (no docs, man
  # pages, locales), with the sources the official image has (backports added by the build).
  if ! podman image exists "$base"; then
    t0=$(date +%s)
    if ! mmdebstrap --quiet --mode=root --variant=minbase --format=tar \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
        bookworm "$work/base.tar" "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
        >"$work/base.log" 2>&1 || ! podman import "$work/base.tar" "$base" >/dev/null; then
      tail -5 "$work/base.log"; bad "base image"; return 1
    fi
    rm -f "$work/base.tar"
    say "base image from mmdebstrap in $(( $(date +%s) - t0 )) s"
  fi
}

image_part() {
  if ! command -v podman >/dev/null; then
    say "skipped image: podman is not installed (apt-get install podman runc podman-compose)"
    skipped=$((skipped + 1)); return
  fi
  podman_setup || return
  local img=localhost/strata:deploy-test t0 base=$base_img
  t0=$(date +%s)
  if ! nice podman build --format docker --build-arg "BASE=$base" -f "$src/deploy/Containerfile" \
      -t "$img" "$src" >"$work/build.log" 2>&1; then
    tail -20 "$work/build.log"; bad "podman build"; return
  fi
  local size
  size=$(podman image inspect --format '{{.Size}}' "$img")
  ok "podman build in $(( $(date +%s) - t0 )) s; image $((size / 1000000)) MB"
  [ "$(podman image inspect --format '{{.Config.User}}' "$img")" = 999:999 ] &&
    ok "image runs as 999:999" || bad "image user"

  # One broker, its Kafka port published on the host.
  local port aport ctr_rc
  port=$(free_port); aport=$(free_port)
  ctr=strata-deploy-test-$$
  podman run -d --name "$ctr" -p "127.0.0.1:$port:9092" -p "127.0.0.1:$aport:9644" \
    -e "STRATA_ADVERTISED_LISTENERS=PLAINTEXT://127.0.0.1:$port" -e STRATA_NUM_PARTITIONS=2 \
    "$img" --smp 1 >/dev/null || { bad "podman run"; return; }
  if wait_http "http://127.0.0.1:$aport/v1/status/ready" 60; then
    ok "container ready (published admin port)"
    podman healthcheck run "$ctr" >/dev/null 2>&1 && ok "HEALTHCHECK passes" ||
      bad "HEALTHCHECK"
    produce_consume "127.0.0.1:$port" image-test && ok "produce and consume through the published port" ||
      bad "produce/consume through the container"
  else
    podman logs "$ctr" 2>&1 | tail -10; bad "container not ready"
  fi
  podman stop -t 30 "$ctr" >/dev/null
  ctr_rc=$(podman inspect --format '{{.State.ExitCode}}' "$ctr")
  if [ "$ctr_rc" = 0 ] && podman logs "$ctr" 2>&1 | grep -q "stopped cleanly"; then
    ok "podman stop: SIGTERM reached the broker, clean exit"
  else
    podman logs "$ctr" 2>&1 | tail -5; bad "stop: exit $ctr_rc"
  fi
  podman rm -f -v "$ctr" >/dev/null; ctr=

  compose_part "$img"
  cluster_cli_part "$img"
  # Drop the previous builds' stages (the base and the last image stay for the next run).
  podman image prune -f >/dev/null 2>&1 || true
}

compose_part() {
  local img=$1 proj=strata-dt$$ i p
  if ! command -v podman-compose >/dev/null; then
    say "skipped compose: podman-compose is not installed"; skipped=$((skipped + 1)); return
  fi
  local -a ports aports
  for i in 1 2 3; do
    ports[$i]=$(free_port); aports[$i]=$(free_port)
    export "STRATA_PORT_$i=${ports[$i]}" "STRATA_ADMIN_PORT_$i=${aports[$i]}"
  done
  export STRATA_IMAGE=$img
  compose() { podman-compose -p "$proj" -f "$src/deploy/compose.yaml" "$@"; }
  # podman-compose 1.0.3 exits 0 when a container fails to start: the readiness below tells.
  if ! compose up -d >"$work/compose.log" 2>&1; then
    tail -20 "$work/compose.log"; bad "podman-compose up"; compose down -v >/dev/null 2>&1
    podman network rm "${proj}_default" >/dev/null 2>&1; return
  fi
  local up=1
  for i in 1 2 3; do
    wait_http "http://127.0.0.1:${aports[$i]}/v1/status/ready" 90 || up=0
  done
  # Clients run in the brokers' containers (the image's strata tool): the brokers name each
  # other strata-N, which only the compose network resolves.
  cname() { podman ps -a --filter "label=io.podman.compose.project=$proj" --format '{{.Names}}' |
    grep "strata-$1" | head -1; }
  local bs="strata-1:${ports[1]},strata-2:${ports[2]},strata-3:${ports[3]}"
  in_pc() {  # container total: produce 50 through it, then all `total` back
    local got
    seq 1 50 | podman exec -i -e "STRATA_BROKERS=$bs" "$1" strata produce compose-test \
      --timeout 30s >/dev/null || return 1
    got=$(podman exec -e "STRATA_BROKERS=$bs" "$1" strata consume compose-test -n "$2" \
      --timeout 30s | wc -l)
    [ "$got" -eq "$2" ] || { say "consumed $got of $2 in $1"; return 1; }
  }
  # Ready is per broker; a topic of 3 replicas needs all 3 registered and unfenced.
  unfenced() {
    curl -fsS "http://127.0.0.1:${aports[1]}/v1/cluster" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
sys.exit(0 if sum(not b["fenced"] for b in d["brokers"]) == 3 else 1)'
  }
  if [ $up = 1 ]; then
    for ((i = 0; i < 300; i++)); do unfenced && break; sleep 0.1; done
    unfenced || up=0
  fi
  if [ $up = 1 ]; then
    ok "compose: 3 brokers ready and unfenced"
    podman exec -e "STRATA_BROKERS=$bs" "$(cname 3)" strata topic create compose-test -p 1 \
      -r 3 >/dev/null || bad "compose: topic create"
    in_pc "$(cname 3)" 50 && ok "compose: produce and consume (replication factor 3)" ||
      bad "compose: produce/consume"
    # Kill the partition's leader outright; the other two keep a quorum, elect a new leader
    # from the ISR and still meet min.insync.replicas=2.
    local lead victim rest=() alive
    for ((i = 0; i < 50; i++)); do  # the admin API's view may trail the metadata a moment
      lead=$(curl -fsS "http://127.0.0.1:${aports[1]}/v1/partitions?topic=compose-test" |
        python3 -c '
import json, sys
d = json.load(sys.stdin)
parts = d if isinstance(d, list) else next(v for v in d.values() if isinstance(v, list))
print(next(p["leader"] for p in parts if p["topic"] == "compose-test"))' 2>/dev/null)
      case $lead in 1 | 2 | 3) break ;; esac
      sleep 0.1
    done
    case $lead in 1 | 2 | 3) ;; *) say "leader of compose-test unknown ('$lead'): killing 1"; lead=1 ;; esac
    victim=$(cname "$lead")
    podman kill "$victim" >/dev/null
    # Bootstrap from the two left (a killed container's address stops answering at all, and
    # the tool's first metadata request may wait on it until its timeout).
    for i in 1 2 3; do [ "$i" = "$lead" ] || rest+=("strata-$i:${ports[$i]}"); done
    bs=$(IFS=,; echo "${rest[*]}")
    alive=$(( lead % 3 + 1 ))
    if in_pc "$(cname "$alive")" 100; then
      ok "compose: killed $victim (the partition's leader), produce and consume on the other two"
    else
      for i in 1 2 3; do curl -s "http://127.0.0.1:${aports[$i]}/v1/cluster"; echo; done
      bad "compose: serving after a kill"
    fi
  else
    for c in $(podman ps -a --filter "label=io.podman.compose.project=$proj" --format '{{.Names}}'); do
      echo "== $c"; podman logs "$c" 2>&1 | tail -8
    done
    tail -5 "$work/compose.log"; bad "compose: brokers not ready"
  fi
  compose down -v >/dev/null 2>&1
  # podman-compose 1.0.3's down leaves the project's network
  podman network rm "${proj}_default" >/dev/null 2>&1 || true
}

# `strata cluster start --podman` (src/cli/cluster_local.c) with the image just built: 3 brokers
# in containers on free host ports, the command's own readiness wait (every broker registered
# and unfenced), produce and consume from the host through the published EXTERNAL ports (a
# topic of 3 replicas), `status` exit 0, `stop` exit 0 with every container's exit status 0, and
# the containers and network gone.
cluster_cli_part() {
  local img=$1 proj=strata-dt$$-cli cdir=$work/cluster cli=$build/strata base kport aport t0 out
  if [ ! -x "$cli" ]; then
    bad "cluster --podman: no $cli (make release)"; return
  fi
  # Kafka base K (K, K+100, K+200 free) and admin base A (A..A+2 free)
  base=$(python3 -c '
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
for _ in range(500):
    k, a = random.randrange(20000, 31000), random.randrange(20000, 31000)
    ps = [k, k + 100, k + 200, a, a + 1, a + 2]
    if len(set(ps)) == 6 and all(free(p) for p in ps):
        print(k, a); break')
  read -r kport aport <<<"$base"
  t0=$(date +%s)
  if out=$("$cli" cluster start --podman -n 3 -d "$cdir" --image "$img" --project "$proj" \
      --kafka-port "$kport" --admin-port "$aport" --smp 1 --timeout 120s 2>&1); then
    ok "cluster start --podman: 3 containers registered and unfenced in $(( $(date +%s) - t0 )) s"
    echo "$out" | sed 's/^/    /'
  else
    echo "$out" | tail -30; bad "cluster start --podman"
    "$cli" cluster stop -d "$cdir" >/dev/null 2>&1
    podman volume rm -f "$proj-1" "$proj-2" "$proj-3" >/dev/null 2>&1
    return
  fi
  local bs="127.0.0.1:$kport,127.0.0.1:$((kport + 100)),127.0.0.1:$((kport + 200))"
  "$cli" topic create podman-test -b "$bs" -p 1 -r 3 >/dev/null &&
    produce_consume "$bs" podman-test &&
    ok "cluster --podman: produce and consume from the host (replication factor 3)" ||
    bad "cluster --podman: produce/consume"
  if out=$("$cli" cluster status -d "$cdir" 2>&1); then
    ok "cluster status (mode from cluster.conf): exit 0"
    echo "$out" | sed 's/^/    /'
  else
    echo "$out"; bad "cluster status: exit $?"
  fi
  t0=$(date +%s)
  if out=$("$cli" cluster stop -d "$cdir" 2>&1); then
    ok "cluster stop: exit 0 in $(( $(date +%s) - t0 )) s"
    echo "$out" | sed 's/^/    /'
  else
    echo "$out"; bad "cluster stop"
  fi
  [ -z "$(podman ps -a -q --filter "label=strata.cluster=$proj")" ] &&
    ! podman network exists "$proj" && ok "cluster stop: containers and network gone" ||
    bad "cluster stop left containers or the network"
  podman volume rm -f "$proj-1" "$proj-2" "$proj-3" >/dev/null 2>&1
}

# The unit under a real systemd: a container (podman --systemd=always) of the mmdebstrap base
# with systemd and the .deb installed by apt-get; systemd must start strata.service from
# postinst's enablement, see READY=1 (ActiveState active, StatusText "serving"), restart it
# after a SIGKILL (Restart=on-failure), and stop it cleanly.
systemd_part() {
  if ! command -v podman >/dev/null; then
    say "skipped systemd: podman is not installed"; skipped=$((skipped + 1)); return
  fi
  podman_setup || return
  local deb img=localhost/strata-systemd:deploy-test i st
  deb=$("$src/scripts/mkdeb.sh" "$build" "$work/sd") || { bad "mkdeb.sh"; return; }
  cat >"$work/sd/Containerfile" <<CF
FROM $base_img
COPY $(basename "$deb") /tmp/
RUN echo 'deb $mirror bookworm-backports main' >/etc/apt/sources.list.d/bp.list && \\
    apt-get update -qq && export DEBIAN_FRONTEND=noninteractive && \\
    apt-get install -y -qq --no-install-recommends systemd systemd-sysv >/dev/null && \\
    apt-get install -y -qq -t bookworm-backports libraft0 >/dev/null && \\
    apt-get install -y -qq /tmp/$(basename "$deb") >/dev/null && rm -rf /var/lib/apt/lists/*
CMD ["/sbin/init"]
CF
  if ! podman build -t "$img" "$work/sd" >"$work/sd.log" 2>&1; then
    tail -10 "$work/sd.log"; bad "systemd image"; return
  fi
  ctr=strata-systemd-test-$$
  podman run -d --name "$ctr" --systemd=always "$img" >/dev/null || { bad "run systemd"; return; }
  prop() { podman exec "$ctr" systemctl show -p "$1" --value strata 2>/dev/null; }
  for ((i = 0; i < 300; i++)); do
    st=$(prop ActiveState); [ "$st" = active ] || [ "$st" = failed ] && break; sleep 0.1
  done
  if [ "$(prop ActiveState)" = active ] && [ "$(prop StatusText)" = serving ]; then
    ok "systemd started strata.service (Type=notify: READY=1, status \"serving\")"
    podman exec "$ctr" sh -c 'strata topic create sd-test >/dev/null &&
        seq 1 50 | strata produce sd-test >/dev/null &&
        [ "$(strata consume sd-test -n 50 | wc -l)" -eq 50 ]' &&
      ok "produce and consume through the unit's broker" || bad "produce/consume under systemd"
    local pid1 pid2
    pid1=$(prop MainPID)
    podman exec "$ctr" systemctl kill -s KILL strata
    for ((i = 0; i < 100; i++)); do
      pid2=$(prop MainPID)
      [ "$(prop NRestarts)" -ge 1 ] 2>/dev/null && [ "$(prop ActiveState)" = active ] &&
        [ "$pid2" != "$pid1" ] && [ "$pid2" != 0 ] && break
      sleep 0.1
    done
    [ "$(prop NRestarts)" = 1 ] && [ "$(prop ActiveState)" = active ] &&
      ok "SIGKILL: Restart=on-failure brought it back" || bad "no restart after SIGKILL"
    podman exec "$ctr" systemctl stop strata
    [ "$(prop ActiveState)" = inactive ] && [ "$(prop Result)" = success ] &&
      podman exec "$ctr" journalctl -u strata --no-pager | grep -q "stopped cleanly" &&
      ok "systemctl stop: clean stop, logged to the journal" || bad "systemctl stop"
  else
    podman exec "$ctr" systemctl status strata --no-pager 2>&1 | tail -15
    bad "strata.service not active under systemd ($(prop ActiveState))"
  fi
  podman rm -f -v "$ctr" >/dev/null; ctr=
}
