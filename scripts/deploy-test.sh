#!/usr/bin/env bash
# The heavier install checks of issue 25, too slow for `make test` (`make deploy-test` runs this):
#   deb    a fresh Debian bookworm root made with mmdebstrap from Debian's archive; the .deb of
#          scripts/mkdeb.sh installed with apt-get; the unit's ExecStart run in the root as the
#          strata user the package made; produce and consume with kcat; apt-get remove keeps
#          /var/lib/strata and the conffile, apt-get purge deletes both.
#   image  (only where podman is installed) deploy/Containerfile built from a base that mmdebstrap
#          makes from the archive (no registry is reachable); one broker produced to and consumed
#          from through a published port; the compose cluster; `strata cluster start --podman`
#          (3 containers of that image, produce/consume from the host, status, stop).
#   systemd (podman too) the .deb installed with apt-get in a container that runs systemd: the
#          unit started by systemd (READY=1), restarted after SIGKILL, stopped cleanly.
# Usage: scripts/deploy-test.sh [deb] [systemd] [image]   (default: all). BUILD: the release
# build (build).
# Needs root (chroot, mounts) and Debian's archive. Prints a closing "N passed, N failed" line.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$src/build}
[ "${build#/}" = "$build" ] && build=$src/$build
mirror=${STRATA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
parts=("$@"); [ ${#parts[@]} -eq 0 ] && parts=(deb systemd image)
work=$(mktemp -d /var/tmp/strata-deploy-test.XXXXXX)
passed=0 failed=0 skipped=0
cleanup() {
  [ -n "${srv_pid:-}" ] && kill "$srv_pid" 2>/dev/null
  [ -n "${ctr:-}" ] && podman rm -f -v "$ctr" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
say() { echo "deploy-test: $*"; }
ok() { say "ok: $*"; passed=$((passed + 1)); }
bad() { say "FAILED: $*"; failed=$((failed + 1)); }
need() { command -v "$1" >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
  --no-install-recommends "$2" >/dev/null; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() {  # url seconds
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
produce_consume() {  # bootstrap topic [total]: 50 records out, then all `total` (50) back
  local bs=$1 topic=$2 total=${3:-50} got
  seq 1 50 | kcat -P -b "$bs" -t "$topic" -X acks=all -X message.timeout.ms=30000 || return 1
  got=$(kcat -C -b "$bs" -t "$topic" -o beginning -c "$total" -e -q -X fetch.wait.max.ms=100 \
    -m 30 2>/dev/null | wc -l)
  [ "$got" -eq "$total" ] || { say "consumed $got of $total from $topic"; return 1; }
}

deb_part() {
  need mmdebstrap mmdebstrap; need kcat kcat; need curl curl
  local deb root t0 port aport
  deb=$("$src/scripts/mkdeb.sh" "$build" "$work/out") || { bad "mkdeb.sh"; return; }
  root=$work/root
  t0=$(date +%s)
  if ! mmdebstrap --quiet --mode=root --variant=apt bookworm "$root" \
      "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
      "deb $mirror bookworm-backports main" >"$work/mmdebstrap.log" 2>&1; then
    tail -20 "$work/mmdebstrap.log"; bad "mmdebstrap bookworm"; return
  fi
  say "fresh bookworm root in $(( $(date +%s) - t0 )) s"
  cp "$deb" "$root/tmp/"
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  # libraft 0.22 is in bookworm-backports (apt does not take backports unless told).
  t0=$(date +%s)
  if chroot "$root" sh -c 'export DEBIAN_FRONTEND=noninteractive; apt-get update -qq &&
      apt-get install -y -qq -t bookworm-backports libraft0 >/dev/null &&
      apt-get install -y -qq /tmp/'"$(basename "$deb")"' >/dev/null' >"$work/apt.log" 2>&1; then
    ok "apt-get install ./$(basename "$deb") into the fresh root ($(( $(date +%s) - t0 )) s)"
  else
    tail -20 "$work/apt.log"; bad "apt-get install"; return
  fi
  chroot "$root" getent passwd strata >/dev/null && ok "postinst made the strata user" ||
    bad "no strata user"
  [ "$(chroot "$root" stat -c %U:%a /var/lib/strata)" = strata:750 ] &&
    ok "/var/lib/strata owned by strata, 0750" || bad "/var/lib/strata: $(chroot "$root" stat -c %U:%a /var/lib/strata)"
  [ -L "$root/etc/systemd/system/multi-user.target.wants/strata.service" ] &&
    ok "strata.service enabled" || bad "strata.service not enabled"
  # The unit's ExecStart, as systemd would run it: the strata user, the packaged config (ports
  # moved to free ones so the test cannot clash with a broker of the machine).
  local exec_start
  exec_start=$(sed -n 's/^ExecStart=//p' "$root/lib/systemd/system/strata.service")
  port=$(free_port); aport=$(free_port)
  unshare --mount --propagation private sh -c 'r=$1; shift; mount -t proc proc "$r/proc" &&
      exec chroot --userspec=strata:strata "$r" "$@"' sh "$root" $exec_start \
    --set "listeners=PLAINTEXT://127.0.0.1:$port" --set "admin.listen=127.0.0.1:$aport" \
    >"$work/server.log" 2>&1 &
  srv_pid=$!
  if wait_http "http://127.0.0.1:$aport/v1/status/ready" 30; then
    ok "ExecStart as strata: ready"
    produce_consume "127.0.0.1:$port" deploy-test && ok "produce and consume through it" ||
      bad "produce/consume"
  else
    tail -20 "$work/server.log"; bad "broker not ready"
  fi
  kill -TERM "$srv_pid"; wait "$srv_pid"; local rc=$?; srv_pid=
  [ $rc -eq 0 ] && ok "SIGTERM: clean exit" || { tail -5 "$work/server.log"; bad "exit $rc"; }
  [ -d "$root/var/lib/strata/deploy-test-0" ] && ok "data in /var/lib/strata" || bad "no data"
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq strata >/dev/null 2>&1
  [ -d "$root/var/lib/strata/deploy-test-0" ] && [ -f "$root/etc/strata/strata.properties" ] &&
    [ ! -e "$root/usr/bin/strata-server" ] && ok "remove: binaries gone, data and conffile kept" ||
    bad "remove"
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq strata >/dev/null 2>&1
  [ ! -e "$root/var/lib/strata" ] && [ ! -e "$root/etc/strata" ] &&
    ! chroot "$root" dpkg -s strata >/dev/null 2>&1 && ok "purge: data and conffile gone" ||
    bad "purge"
}

for p in "${parts[@]}"; do
  case $p in
  deb) deb_part ;;
  image) . "$src/scripts/deploy-test-image.sh"; image_part ;;
  systemd) . "$src/scripts/deploy-test-image.sh"; systemd_part ;;
  *) echo "deploy-test: unknown part '$p'" >&2; exit 2 ;;
  esac
done
echo "$passed passed, $failed failed${skipped:+, $skipped skipped}"
[ "$failed" -eq 0 ]
