#!/usr/bin/env bash
# A local Kubernetes cluster (k3d: k3s in containers) running Strata from the Helm chart.
#   scripts/k3d.sh up      create cluster "strata" (3 agents: the chart's anti-affinity puts one
#                          broker per node), build and import the image, install the chart, wait
#                          for the 3 brokers to be ready
#   scripts/k3d.sh test    produce and consume through the client Service (the image's strata tool)
#   scripts/k3d.sh down    delete the cluster
# Needs k3d, kubectl, helm and docker or podman on the machine (not on this project's build
# machines, which have no container registry: there it is documented, not run).
# Environment: STRATA_IMAGE (default strata:dev), STRATA_REPLICAS (3), K3D_CLUSTER (strata).
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
cluster=${K3D_CLUSTER:-strata}
image=${STRATA_IMAGE:-strata:dev}
replicas=${STRATA_REPLICAS:-3}
engine=$(command -v podman || command -v docker || true)
for t in k3d kubectl helm; do
  command -v "$t" >/dev/null || { echo "k3d.sh: $t is not installed" >&2; exit 1; }
done

case ${1:-} in
up)
  [ -n "$engine" ] || { echo "k3d.sh: neither podman nor docker is installed" >&2; exit 1; }
  k3d cluster list "$cluster" >/dev/null 2>&1 ||
    k3d cluster create "$cluster" --agents "$replicas" --wait
  "$engine" build -t "$image" -f "$src/deploy/Containerfile" "$src"
  k3d image import -c "$cluster" "$image"
  helm upgrade --install strata "$src/deploy/helm/strata" --wait --timeout 5m \
    --set replicas="$replicas" --set image.repository="${image%:*}" --set image.tag="${image##*:}" \
    --set image.pullPolicy=Never
  kubectl rollout status statefulset/strata --timeout=5m
  kubectl get pods -l app.kubernetes.io/name=strata -o wide
  ;;
test)
  kubectl exec strata-0 -- env STRATA_BROKERS=strata:9092 strata cluster health
  seq 1 100 | kubectl exec -i strata-0 -- env STRATA_BROKERS=strata:9092 strata produce k3d-test >/dev/null
  n=$(kubectl exec strata-1 -- env STRATA_BROKERS=strata:9092 strata consume k3d-test -n 100 | wc -l)
  [ "$n" -eq 100 ] && echo "k3d.sh: 100 produced, 100 consumed" ||
    { echo "k3d.sh: consumed $n of 100" >&2; exit 1; }
  ;;
down)
  k3d cluster delete "$cluster"
  ;;
*)
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
