#!/usr/bin/env bash
# Brings up the e2e Kubernetes cluster on this machine (see docs/e2e.md):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy,
# CoreDNS, three nodes (one containerd + one kubelet each, labelled
# topology.kubernetes.io/zone=a|b|c), local PersistentVolumes per node, a
# Versity Gateway with one bucket per zone, and the strata/etcd/pause images
# loaded into every node. Idempotent: what runs already is left running.
# Every process is recorded by PID under bin/e2e/pids; hack/e2e/down.sh stops
# them. Prints the kubeconfig path last.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH=/usr/local/go/bin:$PATH

[[ $(id -u) -eq 0 ]] || die "needs root (containerd, kubelet, bridge, iptables)"
for b in "$ENVTEST_DIR/etcd" "$ENVTEST_DIR/kube-apiserver" "$E2E_TOOLS/kubelet" "$E2E_TOOLS/coredns" "$E2E_TOOLS/pause" "$VERSITYGW"; do
  [[ -x $b ]] || die "$b missing: run \`make e2e-tools\`"
done
command -v containerd >/dev/null && command -v podman >/dev/null && command -v iptables >/dev/null \
  || die "containerd/podman/iptables missing: run hack/e2e/deps.sh"
other=$(other_cluster)
if [[ -n $other ]]; then
  # E2E_TAKEOVER=1 (make e2e-ci) stops it with that checkout's own state;
  # otherwise two clusters would fight over the bridge and the ports.
  [[ ${E2E_TAKEOVER:-0} == 1 ]] || die "an e2e cluster started from $other is up: run \`make e2e-down\` there (or E2E_DIR=$other $(dirname "$0")/down.sh)"
  log "stopping the e2e cluster started from $other (E2E_TAKEOVER=1)"
  E2E_DIR=$other "$(dirname "$0")/down.sh"
fi
mkdir -p "$E2E_DIR" "$PIDS" "$LOGS"
echo "$E2E_DIR" > "$OWNER_FILE"
t_start=$SECONDS
# down.sh removes pod network namespaces the runtime left, never others.
[[ -f $E2E_DIR/netns.before ]] || { ip netns list 2>/dev/null | awk '{print $1}' > "$E2E_DIR/netns.before" || true; }

# --- network: one bridge for every node's pods, forwarding for Services ---
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link add "$BRIDGE" type bridge
  ip addr add "$HOST_IP/16" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  log "bridge $BRIDGE $HOST_IP/16"
fi
# kube-proxy's DNAT of ClusterIPs to pods of the same bridge needs forwarding
# and bridged traffic to pass iptables; the previous values are restored by
# down.sh.
if [[ ! -f $E2E_DIR/sysctl.orig ]]; then
  {
    echo "net.ipv4.ip_forward=$(sysctl -n net.ipv4.ip_forward)"
    echo "net.bridge.bridge-nf-call-iptables=$(sysctl -n net.bridge.bridge-nf-call-iptables)"
  } > "$E2E_DIR/sysctl.orig"
fi
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
mkdir -p "$E2E_DIR/cni/net.d" "$E2E_DIR/cni/ipam"
cat > "$E2E_DIR/cni/net.d/10-strata-e2e.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "strata-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$E2E_DIR/cni/ipam",
        "routes": [{ "dst": "0.0.0.0/0" }],
        "ranges": [[{ "subnet": "$POD_CIDR", "rangeStart": "10.244.1.1", "gateway": "$HOST_IP" }]]
      }
    },
    { "type": "loopback" }
  ]
}
JSON

# --- PKI: a CA, the API server's serving cert, the service-account key ---
pki=$E2E_DIR/pki
if [[ ! -f $pki/apiserver.crt ]]; then
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 -subj /CN=strata-e2e-ca 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj /CN=kube-apiserver 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,IP:%s,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n' "$HOST_IP" > san.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 30 -extfile san.ext 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    # One static token (system:masters) for the admin and every component.
    echo "$(openssl rand -hex 16),admin,admin,system:masters" > tokens.csv
  )
  log "PKI in $pki"
fi
token=$(cut -d, -f1 "$pki/tokens.csv")
kubectl config --kubeconfig "$KUBECONFIG_FILE" set-cluster e2e --server "https://$HOST_IP:$APISERVER_PORT" \
  --certificate-authority "$pki/ca.crt" --embed-certs >/dev/null
kubectl config --kubeconfig "$KUBECONFIG_FILE" set-credentials admin --token "$token" >/dev/null
kubectl config --kubeconfig "$KUBECONFIG_FILE" set-context e2e --cluster e2e --user admin >/dev/null
kubectl config --kubeconfig "$KUBECONFIG_FILE" use-context e2e >/dev/null

# --- control plane ---
start etcd "$ENVTEST_DIR/etcd" --name e2e --data-dir "$E2E_DIR/etcd" \
  --listen-client-urls "http://$ETCD_CLIENT" --advertise-client-urls "http://$ETCD_CLIENT" \
  --listen-peer-urls "http://$ETCD_PEER" --initial-advertise-peer-urls "http://$ETCD_PEER" \
  --initial-cluster "e2e=http://$ETCD_PEER" --unsafe-no-fsync --quota-backend-bytes 2147483648
wait_for etcd 60 curl -sf "http://$ETCD_CLIENT/health"

start kube-apiserver "$ENVTEST_DIR/kube-apiserver" \
  --etcd-servers "http://$ETCD_CLIENT" \
  --bind-address 0.0.0.0 --secure-port "$APISERVER_PORT" --advertise-address "$HOST_IP" \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
  --authorization-mode RBAC \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --allow-privileged=true \
  --kubelet-preferred-address-types InternalIP
wait_for kube-apiserver 120 kc get --raw /readyz

start kube-controller-manager "$E2E_TOOLS/kube-controller-manager" \
  --kubeconfig "$KUBECONFIG_FILE" --leader-elect=false \
  --bind-address 127.0.0.1 --secure-port 30257 \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --use-service-account-credentials=true --service-cluster-ip-range "$SERVICE_CIDR"
start kube-scheduler "$E2E_TOOLS/kube-scheduler" \
  --kubeconfig "$KUBECONFIG_FILE" --leader-elect=false --bind-address 127.0.0.1 --secure-port 30259
# CoreDNS on the host, on the bridge address the kubelets give pods as
# their nameserver. No upstream: the machine has no DNS beyond the cluster.
cat > "$E2E_DIR/Corefile" <<COREFILE
.:53 {
    bind $HOST_IP
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $KUBECONFIG_FILE
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
}
COREFILE
start coredns "$E2E_TOOLS/coredns" -conf "$E2E_DIR/Corefile"

# --- images (built once per strata binary) ---
"$(dirname "$0")/images.sh"

# --- nodes: one containerd + one kubelet per zone ---
: > "$E2E_DIR/resolv.conf"
i=0
for z in "${ZONES[@]}"; do
  n=$(node_dir "$z"); node=$NODE_PREFIX$z
  mkdir -p "$n/containerd" "$n/kubelet"
  cat > "$n/containerd/config.toml" <<TOML
version = 2
root = "$n/containerd/root"
state = "$n/containerd/state"
[grpc]
  address = "$n/containerd/containerd.sock"
[ttrpc]
  address = "$n/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # Lowering oom_score_adj needs CAP_SYS_RESOURCE, which this machine lacks.
  restrict_oom_score_adj = true
  # Pod network namespaces under the node's state dir: down.sh finds and
  # unmounts them with the rest of bin/e2e.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$E2E_DIR/cni/net.d"
TOML
  start "containerd-$z" containerd --config "$n/containerd/config.toml"
  wait_for "containerd-$z" 60 ctr --address "$(containerd_sock "$z")" version
  for tar in "$E2E_DIR"/images/*.tar; do
    name=$(basename "$tar" .tar)
    stamp="$n/containerd/.image-$name"
    if [[ -f $stamp && $(cat "$stamp") == "$(cat "$tar.id")" ]]; then continue; fi
    ctr --address "$(containerd_sock "$z")" -n k8s.io images import --all-platforms "$tar" >/dev/null
    cp "$tar.id" "$stamp"
    log "image $name loaded into node $z"
  done
  cat > "$n/kubelet/config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine: cgroup v1, no CAP_SYS_RESOURCE, no swap policy, shared disk.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
localStorageCapacityIsolation: false
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
port: $((KUBELET_PORT_BASE + i))
healthzBindAddress: 127.0.0.1
healthzPort: $((KUBELET_HEALTHZ_BASE + i))
readOnlyPort: 0
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
clusterDNS: ["$HOST_IP"]
resolvConf: "$E2E_DIR/resolv.conf"
containerRuntimeEndpoint: unix://$(containerd_sock "$z")
serializeImagePulls: false
# Container logs per node (the default /var/log/pods is the machine's).
podLogsDir: "$n/kubelet/logs"
YAML
  start "kubelet-$z" "$E2E_TOOLS/kubelet" --config "$n/kubelet/config.yaml" \
    --kubeconfig "$KUBECONFIG_FILE" --root-dir "$n/kubelet/root" \
    --hostname-override "$node" --node-ip "$HOST_IP" \
    --node-labels "topology.kubernetes.io/zone=$z"
  i=$((i + 1))
done
for z in "${ZONES[@]}"; do
  wait_for "node $NODE_PREFIX$z Ready" 180 kc wait --for=condition=Ready "node/$NODE_PREFIX$z" --timeout=5s
done

# One kube-proxy for the machine: all nodes share the host's network
# namespace, so one set of iptables rules serves them all. Started once its
# node is registered: a kube-proxy started before exits as soon as the node
# appears ("NodeIPs changed for the node", null -> 10.244.0.1; it expects a
# DaemonSet to restart it), and then no Service but `kubernetes` has rules
# (the operator's admin client timed out dialling the bootstrap Service).
start kube-proxy "$E2E_TOOLS/kube-proxy" \
  --kubeconfig "$KUBECONFIG_FILE" --hostname-override "${NODE_PREFIX}a" \
  --proxy-mode iptables --cluster-cidr "$POD_CIDR" --masquerade-all \
  --conntrack-max-per-core 0 \
  --metrics-bind-address 127.0.0.1:30249 --healthz-bind-address 127.0.0.1:30256

wait_for kube-proxy 60 curl -sf http://127.0.0.1:30256/healthz

# --- storage: local PersistentVolumes per node ---
"$(dirname "$0")/volumes.sh"

# --- S3: Versity Gateway, one bucket per zone ---
mkdir -p "$E2E_DIR/s3/meta"
for z in "${ZONES[@]}"; do mkdir -p "$E2E_DIR/s3/buckets/strata-e2e-$z"; done
start versitygw "$VERSITYGW" --port "$HOST_IP:$S3_PORT" --access "$S3_ACCESS_KEY" --secret "$S3_SECRET_KEY" \
  --region us-east-1 --quiet posix --sidecar "$E2E_DIR/s3/meta" "$E2E_DIR/s3/buckets"
wait_for versitygw 60 curl -s -o /dev/null "http://$HOST_IP:$S3_PORT/"

cat > "$E2E_DIR/env" <<ENV
# Source me: the e2e cluster's addresses (written by hack/e2e/up.sh).
export KUBECONFIG=$KUBECONFIG_FILE
export STRATA_E2E_IMAGE=$STRATA_IMAGE
export STRATA_E2E_S3_ENDPOINT=http://$HOST_IP:$S3_PORT
export STRATA_E2E_S3_ACCESS_KEY=$S3_ACCESS_KEY
export STRATA_E2E_S3_SECRET_KEY=$S3_SECRET_KEY
export STRATA_E2E_BUCKETS="$(printf 'strata-e2e-%s ' "${ZONES[@]}")"
ENV
log "cluster up in $((SECONDS - t_start)) s; source $E2E_DIR/env"
kc get nodes -L topology.kubernetes.io/zone >&2
echo "$KUBECONFIG_FILE"
