#!/usr/bin/env bash
# Smoke test of the e2e cluster: one `strata broker` StatefulSet per zone,
# hardened as the operator renders brokers (nonroot, read-only root,
# capabilities dropped, RuntimeDefault seccomp), each with a PVC on the
# zone's node-local volume and readiness on /readyz. Checks that every pod
# turns Ready on its zone's node, its claim is Bound, CoreDNS answers its
# headless-Service name with its IP, and a Kafka client on the host reaches
# the brokers through a ClusterIP Service (kube-proxy). KEEP=1 leaves the
# namespace for inspection; otherwise it is deleted and its volumes recycled.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ns=e2e-smoke
[[ -f $KUBECONFIG_FILE ]] || die "no cluster: run \`make e2e-up\`"
t0=$SECONDS

kc apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata:
  name: $ns
  labels:
    pod-security.kubernetes.io/enforce: restricted
---
apiVersion: v1
kind: Service
metadata: {name: smoke, namespace: $ns}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: smoke}
  ports: [{name: kafka, port: 9092}]
---
apiVersion: v1
kind: Service
metadata: {name: smoke-bootstrap, namespace: $ns}
spec:
  selector: {app: smoke}
  ports: [{name: kafka, port: 9092}]
YAML
i=0
for z in "${ZONES[@]}"; do
  kc apply -f - >/dev/null <<YAML
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: smoke-$z, namespace: $ns}
spec:
  serviceName: smoke
  replicas: 1
  selector: {matchLabels: {app: smoke, zone: "$z"}}
  template:
    metadata: {labels: {app: smoke, zone: "$z"}}
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions:
              - {key: topology.kubernetes.io/zone, operator: In, values: ["$z"]}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        fsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: broker
        image: $STRATA_IMAGE
        imagePullPolicy: IfNotPresent
        command: ["/strata", "broker", "--broker-id=$i", "--rack=$z", "--data-dir=/data",
                  "--advertised-address=\$(POD_NAME).smoke.$ns.svc.cluster.local:9092"]
        env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        ports: [{name: kafka, containerPort: 9092}, {name: http, containerPort: 9644}]
        readinessProbe:
          httpGet: {path: /readyz, port: http}
          periodSeconds: 2
        volumeMounts: [{name: data, mountPath: /data}]
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
YAML
  i=$((i + 1))
done

for z in "${ZONES[@]}"; do
  wait_for "pod smoke-$z-0 to exist" 60 kc -n $ns get pod "smoke-$z-0"
  kc -n $ns wait --for=condition=Ready "pod/smoke-$z-0" --timeout=180s >/dev/null \
    || { kc -n $ns describe pod "smoke-$z-0" >&2; die "smoke-$z-0 not Ready"; }
done
log "3 broker pods Ready in $((SECONDS - t0)) s"

for z in "${ZONES[@]}"; do
  node=$(kc -n $ns get pod "smoke-$z-0" -o jsonpath='{.spec.nodeName}')
  [[ $node == "$NODE_PREFIX$z" ]] || die "smoke-$z-0 runs on $node, want $NODE_PREFIX$z"
  phase=$(kc -n $ns get pvc "data-smoke-$z-0" -o jsonpath='{.status.phase}')
  [[ $phase == Bound ]] || die "claim data-smoke-$z-0 is $phase"
  ip=$(kc -n $ns get pod "smoke-$z-0" -o jsonpath='{.status.podIP}')
  name=smoke-$z-0.smoke.$ns.svc.cluster.local
  got=$(python3 - "$HOST_IP" "$name" <<'PY'
# One DNS A query over UDP (the host has no dig): prints the answers.
import random, socket, struct, sys
server, name = sys.argv[1], sys.argv[2]
qid = random.randrange(1 << 16)
q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)
s.sendto(q, (server, 53)); r, _ = s.recvfrom(4096)
an = struct.unpack(">H", r[6:8])[0]; i = len(q)
for _ in range(an):
    i += 2 if r[i] & 0xC0 == 0xC0 else r.index(b"\0", i) + 1 - i
    t, _, _, ln = struct.unpack(">HHIH", r[i:i + 10]); i += 10
    if t == 1: print(socket.inet_ntoa(r[i:i + 4]))
    i += ln
PY
)
  [[ $got == "$ip" ]] || die "CoreDNS: $name is '$got', want $ip"
  log "smoke-$z-0: node $node, claim Bound, DNS $name -> $ip"
done
cip=$(kc -n $ns get svc smoke-bootstrap -o jsonpath='{.spec.clusterIP}')
meta=$(kcat -L -b "$cip:9092" -m 10 2>&1) || die "kcat -L via ClusterIP $cip: $meta"
grep -q "smoke-.-0.smoke.$ns.svc.cluster.local:9092" <<< "$meta" || die "unexpected metadata via $cip: $meta"
log "Kafka metadata via ClusterIP $cip: $(grep -m1 'brokers:' <<< "$meta" | xargs)"
kc get nodes,pods -A -o wide
if [[ ${KEEP:-} != 1 ]]; then
  kc delete ns $ns --wait=true --timeout=120s >/dev/null
  "$(dirname "$0")/volumes.sh"
fi
log "smoke passed in $((SECONDS - t0)) s"
