# Shared settings and helpers of the hack/e2e scripts (sourced, not run).
# Every address, port and path of the e2e cluster is defined here once.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TOOLS_DIR=${TOOLS_DIR:-$root/bin}
ENVTEST_DIR=${ENVTEST_DIR:-$TOOLS_DIR/k8s}
E2E_TOOLS=${E2E_TOOLS:-$TOOLS_DIR/e2e}
VERSITYGW=${VERSITYGW:-$TOOLS_DIR/versitygw-v1.8.0}
# Everything the cluster writes (state, logs, PID files, kubeconfig) lives
# under E2E_DIR; `make e2e-down` removes it.
E2E_DIR=${E2E_DIR:-$root/bin/e2e}

ZONES=(a b c)
NODE_PREFIX=strata-e2e-
# Pods of all nodes share one Linux bridge; its address is the host as seen
# from pods: the API server, CoreDNS and Versity listen there.
BRIDGE=strata-e2e0
HOST_IP=10.244.0.1
POD_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
APISERVER_PORT=16443
ETCD_CLIENT=127.0.0.1:32379
ETCD_PEER=127.0.0.1:32380
S3_PORT=17070
S3_ACCESS_KEY=strata-e2e
S3_SECRET_KEY=strata-e2e-secret
# Node i (0-based) uses kubelet port KUBELET_PORT_BASE+i and healthz
# KUBELET_HEALTHZ_BASE+i.
KUBELET_PORT_BASE=10250
KUBELET_HEALTHZ_BASE=10260
# Images every node gets; the broker image tag is what the e2e KafkaCluster
# and the operator overlay name, the etcd one is exactly
# api/v1alpha1.DefaultEtcdImage so the managed etcd pulls nothing.
STRATA_IMAGE=${STRATA_IMAGE:-ghcr.io/strata-dev/strata:e2e}
ETCD_IMAGE=$(sed -n 's/^const DefaultEtcdImage = "\(.*\)"$/\1/p' "$root/api/v1alpha1/kafkacluster_types.go")
PAUSE_IMAGE=registry.k8s.io/pause:3.10

KUBECONFIG_FILE=$E2E_DIR/kubeconfig
# The machine has one e2e cluster at a time (one bridge, fixed ports): the
# E2E_DIR of the checkout that started it is recorded here by up.sh and
# removed by down.sh.
OWNER_FILE=${E2E_OWNER_FILE:-/run/strata-e2e.owner}
PIDS=$E2E_DIR/pids
LOGS=$E2E_DIR/logs

# other_cluster: prints the E2E_DIR of a cluster started from another
# checkout that still has a running process, if any.
other_cluster() {
  [[ -f $OWNER_FILE ]] || return 0
  local other
  other=$(cat "$OWNER_FILE")
  [[ -n $other && $other != "$E2E_DIR" && -d $other/pids ]] || return 0
  local f
  for f in "$other"/pids/*.pid; do
    [[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null && { echo "$other"; return 0; }
  done
  return 0
}

log() { printf '%s e2e: %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# alive NAME: the process recorded as NAME runs.
alive() {
  local f=$PIDS/$1.pid
  [[ -f $f ]] && kill -0 "$(cat "$f")" 2>/dev/null
}

# start NAME CMD...: runs CMD in the background (own session, log under
# $LOGS) unless NAME already runs, and records its PID.
start() {
  local name=$1; shift
  if alive "$name"; then
    log "$name already running (pid $(cat "$PIDS/$name.pid"))"
    return
  fi
  mkdir -p "$PIDS" "$LOGS"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! > "$PIDS/$name.pid"
  log "started $name (pid $!)"
}

# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds or the deadline
# passes.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS >= deadline )); then
      die "timed out after ${secs}s waiting for $what"
    fi
    sleep 1
  done
}

# kubectl of the cluster's version (hack/e2e/tools.sh) when built, else the
# machine's.
KUBECTL=$E2E_TOOLS/kubectl
[[ -x $KUBECTL ]] || KUBECTL=kubectl
kubectl() { "$KUBECTL" "$@"; }
kc() { kubectl --kubeconfig "$KUBECONFIG_FILE" "$@"; }

node_dir() { echo "$E2E_DIR/nodes/$1"; }
containerd_sock() { echo "$(node_dir "$1")/containerd/containerd.sock"; }
