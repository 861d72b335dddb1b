#!/usr/bin/env bash
# Runs a cluster of N strata-server brokers on this machine, each with its own ports and data
# directory (issue 12). `make cluster` builds the release binary and runs `start`.
#
#   scripts/cluster.sh start  [N]   start brokers 1..N (default 3) in the background
#   scripts/cluster.sh status [N]   which are running, their ports, the controller they see
#   scripts/cluster.sh stop   [N]   SIGTERM each, wait for a clean exit
#
# Broker i (1-based) listens for Kafka on 9092+100*(i-1) (9092, 9192, 9292, ...), for the
# metadata quorum (Raft over TCP, heartbeats over UDP) on the next port (9093, 9193, 9293, ...)
# and serves its admin API on 9644+(i-1). Brokers 1..3 (or 1..N when N < 3) are voters
# (process.roles=broker,controller); any beyond are brokers that follow the metadata log
# without a vote. Everything of broker i is under ./data-cluster/<i>/: data/ (log.dirs),
# server.log, server.pid.
#
# Environment: STRATA_SERVER (binary, default build/strata-server), STRATA_CLUSTER_DIR (default
# ./data-cluster), STRATA_ARGS (more arguments for every broker, e.g. "--smp 2 --set k=v").
set -euo pipefail

cmd=${1:-}
n=${2:-3}
bin=${STRATA_SERVER:-build/strata-server}
root=${STRATA_CLUSTER_DIR:-./data-cluster}
host=127.0.0.1
ready_timeout=30     # seconds for every broker to accept Kafka connections
stop_timeout=30      # seconds for a broker to exit after SIGTERM

usage() {
  echo "usage: $0 start|stop|status [N]   (N brokers, default 3)" >&2
  exit 2
}
case "$cmd" in start|stop|status) ;; *) usage ;; esac
[[ "$n" =~ ^[1-9][0-9]*$ ]] || usage
[ "$n" -le 99 ] || { echo "$0: at most 99 brokers (ports 9092 + 100*i)" >&2; exit 2; }

nvoters=$(( n < 3 ? n : 3 ))
kafka_port() { echo $(( 9092 + 100 * ($1 - 1) )); }
ctrl_port() { echo $(( 9093 + 100 * ($1 - 1) )); }
admin_port() { echo $(( 9644 + $1 - 1 )); }
dir_of() { echo "$root/$1"; }
pid_of() { cat "$(dir_of "$1")/server.pid" 2>/dev/null || true; }
running() { local p; p=$(pid_of "$1"); [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
port_open() { (exec 3<>"/dev/tcp/$host/$1") 2>/dev/null; }

voters=""
for i in $(seq 1 "$nvoters"); do
  voters+="${voters:+,}$i@$host:$(ctrl_port "$i")"
done
bootstrap=""
for i in $(seq 1 "$n"); do
  bootstrap+="${bootstrap:+,}$host:$(kafka_port "$i")"
done

start_one() {
  local i=$1 d roles
  d=$(dir_of "$i")
  if running "$i"; then
    echo "broker $i: already running (pid $(pid_of "$i"))"
    return
  fi
  roles=broker
  [ "$i" -le "$nvoters" ] && roles=broker,controller
  mkdir -p "$d/data"
  # shellcheck disable=SC2086  # STRATA_ARGS is split on purpose
  setsid "$bin" \
    --set node.id="$i" \
    --set process.roles="$roles" \
    --set controller.quorum.voters="$voters" \
    --set listeners="PLAINTEXT://$host:$(kafka_port "$i"),CONTROLLER://$host:$(ctrl_port "$i")" \
    --set advertised.listeners="PLAINTEXT://$host:$(kafka_port "$i")" \
    --set controller.listener.names=CONTROLLER \
    --set log.dirs="$d/data" \
    --set admin.listen="$host:$(admin_port "$i")" \
    ${STRATA_ARGS:-} </dev/null >>"$d/server.log" 2>&1 &
  echo $! >"$d/server.pid"
  echo "broker $i: started (pid $!, $roles), kafka $host:$(kafka_port "$i"), quorum" \
       "$host:$(ctrl_port "$i"), admin http://$host:$(admin_port "$i"), log $d/server.log"
}

do_start() {
  [ -x "$bin" ] || { echo "$0: $bin not found: build first (make release)" >&2; exit 1; }
  for i in $(seq 1 "$n"); do start_one "$i"; done
  # Every broker up and accepting Kafka connections, within a bound.
  local deadline=$(( SECONDS + ready_timeout )) i
  for i in $(seq 1 "$n"); do
    until port_open "$(kafka_port "$i")"; do
      if ! running "$i"; then
        echo "broker $i exited; the end of $(dir_of "$i")/server.log:" >&2
        tail -n 20 "$(dir_of "$i")/server.log" >&2
        exit 1
      fi
      if [ "$SECONDS" -ge "$deadline" ]; then
        echo "broker $i not accepting on $host:$(kafka_port "$i") after ${ready_timeout}s;" \
             "see $(dir_of "$i")/server.log" >&2
        exit 1
      fi
      sleep 0.2
    done
  done
  cat <<EOF

$n broker(s) running ($nvoters voting in the metadata quorum). Connect with:
    bootstrap servers   $bootstrap
    kcat -L -b $bootstrap
    $(dirname "$bin")/strata cluster info -b $bootstrap
    curl -s http://$host:$(admin_port 1)/v1/cluster
Status: $0 status $n     Stop: $0 stop $n     Logs: $root/<id>/server.log
EOF
}

do_stop() {
  local i p left=0
  for i in $(seq 1 "$n"); do
    if running "$i"; then kill -TERM "$(pid_of "$i")"; fi
  done
  for i in $(seq 1 "$n"); do
    p=$(pid_of "$i")
    [ -n "$p" ] || continue
    local deadline=$(( SECONDS + stop_timeout ))
    while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then
      echo "broker $i (pid $p) still running ${stop_timeout}s after SIGTERM; see" \
           "$(dir_of "$i")/server.log" >&2
      left=1
    else
      rm -f "$(dir_of "$i")/server.pid"
      echo "broker $i: stopped"
    fi
  done
  return "$left"
}

do_status() {
  local i any=0
  for i in $(seq 1 "$n"); do
    if running "$i"; then
      any=1
      echo "broker $i: running (pid $(pid_of "$i")), kafka $host:$(kafka_port "$i"), quorum" \
           "$host:$(ctrl_port "$i"), admin http://$host:$(admin_port "$i")"
    else
      echo "broker $i: not running"
    fi
  done
  if [ "$any" = 1 ] && command -v curl >/dev/null; then
    for i in $(seq 1 "$n"); do
      running "$i" || continue
      echo "cluster as broker $i sees it (admin /v1/cluster):"
      curl -s --max-time 3 "http://$host:$(admin_port "$i")/v1/cluster" || true
      echo
      break
    done
  fi
}

case "$cmd" in
  start) do_start ;;
  stop) do_stop ;;
  status) do_status ;;
esac
