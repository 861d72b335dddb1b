#!/bin/sh
# entrypoint.sh — starts strata-server in a container or a Kubernetes pod (deploy/Containerfile,
# deploy/k8s, deploy/helm/strata). POSIX sh; ends in `exec`, so strata-server is the process
# the runtime signals (SIGTERM: a clean stop) and its exit status is the container's.
#
# The command line it builds, in this order (a later --set wins):
#   1. --config $STRATA_CONFIG_FILE (default /etc/strata/strata.properties) when that file exists;
#   2. Kubernetes (STRATA_K8S_REPLICAS set): from the pod's name (a StatefulSet's <set>-<ordinal>,
#      $HOSTNAME) and the headless Service, node.id = ordinal + 1,
#      controller.quorum.voters = 1@<set>-0.<headless>.<ns>.svc.<domain>:<controller port>,...,
#      listeners, advertised.listeners (the pod's stable name), admin.listen, log.dirs;
#   3. every STRATA_<SETTING> variable as --set <setting>=<value>, named as the Kafka image names
#      KAFKA_*: lower case, `_` is `.`, `__` is `_`, `___` is `-` (STRATA_LOG_RETENTION_MS ->
#      log.retention.ms); the variables below, which steer this script, are not settings;
#   4. the script's own arguments (e.g. --smp 2), passed through.
#
# Variables this script reads (the pod spec sets the STRATA_K8S_* ones):
#   STRATA_CONFIG_FILE        properties file (default /etc/strata/strata.properties)
#   STRATA_SERVER_BIN         the broker (default strata-server on PATH)
#   STRATA_ENTRYPOINT_RESOLVE_WAIT  seconds to wait for every voter's name to resolve before
#                             starting the broker (default 120; 0: do not wait)
#   RES_OPTIONS               the resolver's options (default here: timeout:1 attempts:2)
#   STRATA_K8S_REPLICAS       voters: the StatefulSet's replicas (unset: not in Kubernetes)
#   STRATA_K8S_HEADLESS       the headless Service's name
#   STRATA_K8S_NAMESPACE      the pod's namespace (downward API: metadata.namespace)
#   STRATA_K8S_CLUSTER_DOMAIN cluster DNS domain (default cluster.local)
#   STRATA_K8S_POD_NAME       the pod's name (default $HOSTNAME)
#   STRATA_K8S_KAFKA_PORT, STRATA_K8S_CONTROLLER_PORT, STRATA_K8S_ADMIN_PORT  (9092, 9093, 9644)
#   STRATA_K8S_DATA_DIR       the volume's mount (default /var/lib/strata)
#   STRATA_K8S_LISTENER_PROTOCOL  security protocol of the Kafka listener (default PLAINTEXT;
#                             SASL_SSL, SSL, SASL_PLAINTEXT: the listener is named after it)
set -eu

fail() { echo "strata-entrypoint: $*" >&2; exit 2; }

args_file=$(mktemp)
trap 'rm -f "$args_file"' EXIT
# Arguments are gathered one per line in a file, then turned into "$@" (POSIX sh has no arrays).
add() { printf '%s\n' "$1" >>"$args_file"; }

conf=${STRATA_CONFIG_FILE:-/etc/strata/strata.properties}
if [ -f "$conf" ]; then add --config; add "$conf"; fi

if [ -n "${STRATA_K8S_REPLICAS:-}" ]; then
    pod=${STRATA_K8S_POD_NAME:-${HOSTNAME:-$(hostname)}}
    set_name=${pod%-*}
    ordinal=${pod##*-}
    case $ordinal in '' | *[!0-9]*) fail "pod name '$pod' does not end in -<ordinal>" ;; esac
    [ "$set_name" != "$pod" ] || fail "pod name '$pod' does not end in -<ordinal>"
    case $STRATA_K8S_REPLICAS in '' | *[!0-9]*) fail "STRATA_K8S_REPLICAS='$STRATA_K8S_REPLICAS'" ;; esac
    [ "$STRATA_K8S_REPLICAS" -ge 1 ] || fail "STRATA_K8S_REPLICAS must be 1 or more"
    [ "$ordinal" -lt "$STRATA_K8S_REPLICAS" ] ||
        fail "pod $pod: ordinal $ordinal is not below STRATA_K8S_REPLICAS=$STRATA_K8S_REPLICAS"
    headless=${STRATA_K8S_HEADLESS:?STRATA_K8S_HEADLESS (the headless Service) is not set}
    ns=${STRATA_K8S_NAMESPACE:?STRATA_K8S_NAMESPACE (the pod namespace) is not set}
    domain=${STRATA_K8S_CLUSTER_DOMAIN:-cluster.local}
    kport=${STRATA_K8S_KAFKA_PORT:-9092}
    cport=${STRATA_K8S_CONTROLLER_PORT:-9093}
    aport=${STRATA_K8S_ADMIN_PORT:-9644}
    proto=${STRATA_K8S_LISTENER_PROTOCOL:-PLAINTEXT}
    fqdn() { echo "$set_name-$1.$headless.$ns.svc.$domain"; }
    voters="" i=0
    while [ "$i" -lt "$STRATA_K8S_REPLICAS" ]; do
        voters="$voters${voters:+,}$((i + 1))@$(fqdn "$i"):$cport"
        i=$((i + 1))
    done
    add --set; add "node.id=$((ordinal + 1))"
    add --set; add "controller.quorum.voters=$voters"
    add --set; add "listeners=$proto://:$kport,CONTROLLER://:$cport"
    add --set; add "advertised.listeners=$proto://$(fqdn "$ordinal"):$kport"
    add --set; add "inter.broker.listener.name=$proto"
    add --set; add "admin.listen=0.0.0.0:$aport"
    add --set; add "log.dirs=${STRATA_K8S_DATA_DIR:-/var/lib/strata}"
fi

# Wait for the voters' names to resolve: a pod's headless record, a compose service's name,
# appear only once that pod or container exists, and peers start together. The broker would
# start without them too (it looks them up again every second) but logs each failed lookup.
voters=${STRATA_CONTROLLER_QUORUM_VOTERS:-${voters:-}}
wait_s=${STRATA_ENTRYPOINT_RESOLVE_WAIT:-120}
case $wait_s in '' | *[!0-9]*) fail "STRATA_ENTRYPOINT_RESOLVE_WAIT='$wait_s' (seconds)" ;; esac
if [ -n "$voters" ] && [ "$wait_s" -gt 0 ]; then
    deadline=$(($(date +%s) + wait_s))
    for v in $(echo "$voters" | tr ',' ' '); do
        host=${v#*@}
        host=${host%:*}
        until getent ahostsv4 "$host" >/dev/null 2>&1; do
            if [ "$(date +%s)" -ge "$deadline" ]; then
                echo "strata-entrypoint: voter $host does not resolve after ${wait_s}s;" \
                    "starting anyway" >&2
                break 2
            fi
            sleep 1
        done
    done
fi

# STRATA_<SETTING> variables, sorted so the command line does not depend on the environment's
# order. Values may hold any character but a newline.
env | sed -n 's/^\(STRATA_[A-Z0-9_]*\)=.*/\1/p' | LC_ALL=C sort | while read -r var; do
    case $var in
    STRATA_CONFIG_FILE | STRATA_SERVER_BIN | STRATA_ENTRYPOINT_* | STRATA_K8S_*) continue ;;
    esac
    key=$(printf '%s' "${var#STRATA_}" | sed 's/___/-/g; s/__/\x01/g; s/_/./g; s/\x01/_/g' |
        tr 'A-Z' 'a-z')
    eval "val=\${$var}"
    printf -- '--set\n%s=%s\n' "$key" "$val"
done >>"$args_file"

bin=${STRATA_SERVER_BIN:-strata-server}
# "$@" becomes: the gathered arguments, then the script's own.
n=$#
while IFS= read -r a; do set -- "$@" "$a"; done <"$args_file"
# Rotate the script's own arguments (the first n) to the end.
while [ "$n" -gt 0 ]; do a=$1; shift; set -- "$@" "$a"; n=$((n - 1)); done
rm -f "$args_file"
trap - EXIT
# The resolver's waits, bounded (unless the environment set its own): a peer's name that stops
# answering (a stopped container on a podman network, a pod gone) must not hold the broker's
# lookups for glibc's 5 s x 2 tries per name and search domain. One second, two tries.
RES_OPTIONS=${RES_OPTIONS:-timeout:1 attempts:2}
export RES_OPTIONS
exec "$bin" "$@"
