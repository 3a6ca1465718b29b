#!/usr/bin/env bash
# Stops everything hack/e2e/up.sh started, by the PIDs recorded under
# bin/e2e/pids, unmounts what the nodes mounted under bin/e2e, removes the
# iptables rules of kube-proxy, the bridge, and the cluster's state
# (bin/e2e/images, the built images, stays as a cache). Idempotent.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# stop NAME: TERM, then KILL after 20 s, the process recorded as NAME.
stop() {
  local f=$PIDS/$1.pid pid
  [[ -f $f ]] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 20))
    while kill -0 "$pid" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
    log "stopped $1 (pid $pid)"
  fi
  rm -f "$f"
}

# Let the kubelets tear pods down while they still run (CNI teardown,
# volume unmounts): delete every workload, then every pod. Deployments go
# first, pods included (foreground), so an operator cannot re-create the
# StatefulSets deleted next.
if alive kube-apiserver && kc get --raw /readyz >/dev/null 2>&1; then
  kc delete deployments --all -A --cascade=foreground --timeout=60s >/dev/null 2>&1 || true
  kc delete statefulsets,daemonsets,replicasets,jobs --all -A --wait=false >/dev/null 2>&1 || true
  kc delete pods --all -A --grace-period=5 --wait=false >/dev/null 2>&1 || true
  deadline=$((SECONDS + 90))
  while [[ -n $(kc get pods -A --no-headers 2>/dev/null) ]] && (( SECONDS < deadline )); do sleep 1; done
  left=$(kc get pods -A --no-headers 2>/dev/null | wc -l)
  (( left == 0 )) || log "$left pods still there after 90 s; stopping anyway"
fi

for z in "${ZONES[@]}"; do stop "kubelet-$z"; done
for z in "${ZONES[@]}"; do
  sock=$(containerd_sock "$z")
  if alive "containerd-$z"; then
    # Containers left over (kubelet gone mid-teardown): kill their tasks.
    for t in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks kill -s SIGKILL "$t" >/dev/null 2>&1 || true
      ctr --address "$sock" -n k8s.io tasks delete -f "$t" >/dev/null 2>&1 || true
    done
  fi
  stop "containerd-$z"
  # The runc shims outlive containerd by design; ours are the ones started
  # with this node's socket address.
  for pid in $(pgrep -f -- "-address $sock" || true); do
    kill -9 "$pid" 2>/dev/null && log "stopped shim $pid of node $z" || true
  done
done
if [[ -x $E2E_TOOLS/kube-proxy ]] && alive kube-proxy; then
  stop kube-proxy
  "$E2E_TOOLS/kube-proxy" --cleanup --proxy-mode iptables >/dev/null 2>&1 || true
  log "kube-proxy rules removed"
fi
for p in coredns kube-scheduler kube-controller-manager kube-apiserver etcd versitygw; do stop "$p"; done

# What the kubelets and kube-proxy left in iptables (KUBE-FIREWALL,
# KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT, service chains), in every backend
# they write: the jumps to KUBE-* chains, then the chains. Nothing else on
# this machine uses KUBE-* chains.
for ipt in iptables ip6tables iptables-legacy ip6tables-legacy; do
  command -v "$ipt" >/dev/null 2>&1 || continue
  for table in filter nat mangle; do
    rules=$("$ipt" -t "$table" -S 2>/dev/null) || continue
    chains=$(awk '/^-N KUBE-/ {print $2}' <<< "$rules")
    [[ -n $chains ]] || continue
    jumps=$(grep -E -- '-j KUBE-' <<< "$rules" | grep -v -- '^-A KUBE-' | sed 's/^-A /-D /' || true)
    while read -r rule; do
      [[ -n $rule ]] && { eval "$ipt -t $table $rule" 2>/dev/null || true; }
    done <<< "$jumps"
    for c in $chains; do "$ipt" -t "$table" -F "$c" 2>/dev/null || true; done
    for c in $chains; do "$ipt" -t "$table" -X "$c" 2>/dev/null || true; done
    log "removed $(wc -w <<< "$chains") KUBE-* chains from $ipt $table"
  done
done

# Mounts under bin/e2e (pod volumes, overlay snapshots, shm), deepest first.
if [[ -d $E2E_DIR ]]; then
  findmnt -rn -o TARGET | grep -F "$E2E_DIR/" | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" && log "unmounted $m"
  done || true
fi
# Network namespaces of pods the runtime did not get to remove: the cni-*
# ones that were not there before up.sh ran.
if [[ -f $E2E_DIR/netns.before ]]; then
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^cni-' || true); do
    grep -qx "$ns" "$E2E_DIR/netns.before" || { ip netns delete "$ns" 2>/dev/null && log "removed netns $ns"; } || true
  done
fi
if ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link delete "$BRIDGE" && log "removed bridge $BRIDGE"
fi
# Host-side veth ends of pods on the bridge go with their netns; nothing left.
if [[ -f $E2E_DIR/sysctl.orig ]]; then
  while IFS= read -r kv; do sysctl -qw "$kv" || true; done < "$E2E_DIR/sysctl.orig"
  log "sysctls restored ($(tr '\n' ' ' < "$E2E_DIR/sysctl.orig"))"
fi
if [[ -d $E2E_DIR ]]; then
  # Kept: the images (rebuilt only when the binary changes) and the last
  # journey's results (`make e2e-ci` brings the cluster down after them).
  find "$E2E_DIR" -mindepth 1 -maxdepth 1 ! -name images ! -name report.json ! -name dump ! -name journey.log \
    -exec rm -rf --one-file-system {} +
fi
[[ -f $OWNER_FILE && "$(cat "$OWNER_FILE")" == "$E2E_DIR" ]] && rm -f "$OWNER_FILE"
log "e2e cluster down"
