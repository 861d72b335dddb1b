#!/usr/bin/env bash
# Runs a cluster of N strata-server brokers on this machine, each with its own ports and data
# directory (issue 12): a thin wrapper over `strata cluster start|stop|status` (issue 25,
# src/cli/cluster_local.c), which does the work; kept for the scripts and habits that call it.
#
#   scripts/cluster.sh start  [N]   start brokers 1..N (default 3) in the background, wait until
#                                   every one is registered with the controller and unfenced
#   scripts/cluster.sh status [N]   which are running, their ports, fenced or not, the controller
#                                   (exit 0 only when all N run unfenced)
#   scripts/cluster.sh stop         SIGTERM each, wait for a clean exit (SIGKILL after 30 s)
#
# Broker i (1-based) listens for Kafka on 9092+100*(i-1) (9092, 9192, 9292, ...), for the
# metadata quorum (Raft over TCP, heartbeats over UDP) on the next port (9093, 9193, 9293, ...)
# and serves its admin API on 9644+(i-1). Brokers 1..3 (or 1..N when N < 3) are voters
# (process.roles=broker,controller); any beyond are brokers that follow the metadata log
# without a vote. Everything of broker i is under ./data-cluster/<i>/: data/ (log.dirs),
# server.log, server.pid. `strata cluster start --help` has the options (other ports, --set).
#
# Environment: STRATA_SERVER (binary, default build/strata-server), STRATA_CLI (the strata tool,
# default the one beside STRATA_SERVER), STRATA_CLUSTER_DIR (default ./data-cluster),
# STRATA_ARGS (more arguments for every broker, e.g. "--smp 2 --set k=v").
set -euo pipefail

cmd=${1:-}
n=${2:-}
bin=${STRATA_SERVER:-build/strata-server}
cli=${STRATA_CLI:-$(dirname "$bin")/strata}

usage() {
  echo "usage: $0 start|stop|status [N]   (N brokers, default 3)" >&2
  exit 2
}
case "$cmd" in start|stop|status) ;; *) usage ;; esac
[ -z "$n" ] || [[ "$n" =~ ^[1-9][0-9]*$ ]] || usage
[ -x "$cli" ] || { echo "$0: $cli not found: build first (make release)" >&2; exit 1; }

nopt=()
[ -z "$n" ] || nopt=(-n "$n")
case "$cmd" in
  # STRATA_ARGS and STRATA_CLUSTER_DIR are read by the tool itself.
  start) exec "$cli" cluster start --server "$bin" "${nopt[@]}" ;;
  status) exec "$cli" cluster status "${nopt[@]}" ;;
  stop) exec "$cli" cluster stop ;;
esac
