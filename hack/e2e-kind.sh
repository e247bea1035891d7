#!/usr/bin/env bash
# e2e-kind.sh — the end-to-end scenarios of test/e2e on a kind cluster, for people with Docker:
# build the image, install the chart with helm, then with the examples: exactly one holder of a
# 3-replica singleton Deployment, rollout restart (the lock moves to a new pod with a larger token,
# never two holder pods), delete the holder pod (fast handoff), scale to 0 (released), and a cron
# fleet run executed exactly once.
#
# Needs docker, kind, kubectl and helm on PATH. Not run by CI (there is no Docker engine there);
# `npm run test:e2e` runs the same scenarios on the testbed's cluster with kwok nodes.
#
#   hack/e2e-kind.sh            # creates (or reuses) the kind cluster "fencepost-e2e"
#   KEEP=1 hack/e2e-kind.sh     # leave the cluster running afterwards
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cluster=${KIND_CLUSTER:-fencepost-e2e}
image=fencepost:e2e
pause=registry.k8s.io/pause:3.10   # stands in for the examples' application images
redis=redis:7.2.5

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "e2e-kind.sh: $tool not found on PATH" >&2; exit 2; }
done
log() { printf '\n=== %s\n' "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
cleanup() { [[ -n ${KEEP:-} ]] || kind delete cluster --name "$cluster" >/dev/null 2>&1 || true; }
trap cleanup EXIT

log "kind cluster $cluster"
kind get clusters 2>/dev/null | grep -qx "$cluster" || kind create cluster --name "$cluster" --wait 120s
kubectl config use-context "kind-$cluster" >/dev/null

log "image $image (the Dockerfile)"
docker build -t "$image" .
kind load docker-image "$image" --name "$cluster"

log "Redis (test only) and helm install"
kubectl create namespace fencepost-system --dry-run=client -o yaml | kubectl apply -f -
kubectl -n fencepost-system create deployment redis --image="$redis" --dry-run=client -o yaml | kubectl apply -f -
kubectl -n fencepost-system expose deployment redis --port=6379 --dry-run=client -o yaml | kubectl apply -f -
kubectl -n fencepost-system rollout status deployment/redis --timeout=120s
helm upgrade --install fencepost charts/fencepost -n fencepost-system \
  --set image.repository=fencepost --set image.tag=e2e --set image.pullPolicy=Never \
  --set fencing.backend=Redis --set fencing.redisUrl=redis://redis.fencepost-system:6379 \
  --set 'agentRbac.namespaces={e2e-singleton,e2e-cron}' --wait --timeout 180s
helm test fencepost -n fencepost-system --timeout 120s

# the examples, with our image and a pause container for the application
example() { sed -e "s#ghcr.io/fencepost/fencepost:0.1.0#$image#" -e "s#registry.example.com/singleton-worker:1.0.0#$pause#" "examples/$1"; }
ns=e2e-singleton
holder() { kubectl -n $ns get dlock singleton -o jsonpath='{.status.holder.name}'; }
token() { kubectl -n $ns get dlock singleton -o jsonpath='{.status.fencingToken}'; }
holder_pods() { kubectl -n $ns get pods -l singleton.lock.fencepost.io/holder=true --no-headers 2>/dev/null | wc -l; }
wait_holder() { # wait_holder NOT_THIS_POD: until a holder other than $1 is recorded
  for _ in $(seq 1 120); do h=$(holder); [[ -n $h && $h != "${1:-}" ]] && { echo "$h"; return; }; sleep 0.5; done
  fail "no new holder (was ${1:-none})"
}

log "singleton: exactly one holder"
kubectl create namespace $ns --dry-run=client -o yaml | kubectl apply -f -
example singleton-deployment.yaml | kubectl -n $ns apply -f -
kubectl -n $ns rollout status deployment/singleton-worker --timeout=180s
h1=$(wait_holder); t1=$(token)
[[ $(holder_pods) -eq 1 ]] || fail "expected one pod labelled holder"
echo "holder $h1 token $t1"

log "singleton: rollout restart"
kubectl -n $ns rollout restart deployment/singleton-worker
max=0
while ! kubectl -n $ns rollout status deployment/singleton-worker --timeout=1s >/dev/null 2>&1; do
  n=$(holder_pods); (( n > max )) && max=$n
  sleep 0.3
done
[[ $max -le 1 ]] || fail "$max pods labelled holder at once during the rollout"
h2=$(wait_holder "$h1"); t2=$(token)
kubectl -n $ns get pod "$h2" >/dev/null || fail "holder $h2 is not a live pod"
(( t2 > t1 )) || fail "token did not grow: $t1 -> $t2"
echo "holder $h2 token $t2 (at most $max holder pod at a time)"

log "singleton: delete the holder pod"
start=$(date +%s%N)
kubectl -n $ns delete pod "$h2" --wait=false
h3=$(wait_holder "$h2"); t3=$(token)
ms=$(( ($(date +%s%N) - start) / 1000000 ))
(( t3 > t2 )) || fail "token did not grow: $t2 -> $t3"
(( ms < 15000 )) || fail "handoff took $ms ms, a lease duration"
echo "holder $h3 token $t3 after $ms ms"

log "singleton: scale to 0"
kubectl -n $ns scale deployment/singleton-worker --replicas=0
for _ in $(seq 1 240); do
  [[ -z $(kubectl -n $ns get pods -l app=singleton-worker -o name) ]] && break; sleep 0.5
done
[[ -z $(kubectl -n $ns get pods -l app=singleton-worker -o name) ]] || fail "pods still there after scale to 0"
[[ -z $(holder) ]] || fail "still held by $(holder)"
released=$(kubectl -n $ns get lease dlock-singleton -o jsonpath='{.metadata.annotations.fencepost\.io/release}')
[[ $released == Released ]] || fail "Lease release annotation is '$released', not Released"

log "cron fleet: one execution per run id"
ns=e2e-cron
kubectl create namespace $ns --dry-run=client -o yaml | kubectl apply -f -
example cron-fleet.yaml | kubectl -n $ns apply -f -
kubectl -n $ns create job nightly-report-kind-1 --from=cronjob/nightly-report
kubectl -n $ns wait job/nightly-report-kind-1 --for=condition=Complete --timeout=180s
runs=$(kubectl -n $ns logs -l batch.kubernetes.io/job-name=nightly-report-kind-1 --tail=-1 | grep -c 'nightly report nightly-report-kind-1 by' || true)
[[ $runs -eq 1 ]] || fail "the run executed $runs times"

log "PASS"
