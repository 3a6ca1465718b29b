#!/usr/bin/env bash
# Local storage of the e2e cluster: a default StorageClass "e2e-local"
# (no provisioner, WaitForFirstConsumer) and PV_PER_NODE local
# PersistentVolumes per node, directories under bin/e2e/pv/<zone>/.
# Also the tiny "recycler": a Released volume (its claim was deleted) is
# wiped and made Available again, so scenarios can run again on one cluster.
# Idempotent; run by up.sh, safe to re-run.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
PV_PER_NODE=${PV_PER_NODE:-8}
PV_SIZE=${PV_SIZE:-10Gi}

kc apply -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: e2e-local
  annotations:
    storageclass.kubernetes.io/is-default-class: "true"
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
YAML

{
  for z in "${ZONES[@]}"; do
    for i in $(seq 0 $((PV_PER_NODE - 1))); do
      dir=$E2E_DIR/pv/$z/pv-$i
      mkdir -p "$dir"
      # Pods run as 65532 (nonroot): local volumes get no ownership change.
      chmod 0777 "$dir"
      cat <<YAML
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: e2e-$z-$i
  labels:
    strata.dev/e2e: "true"
    topology.kubernetes.io/zone: $z
spec:
  capacity:
    storage: $PV_SIZE
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: e2e-local
  local:
    path: $dir
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - key: kubernetes.io/hostname
          operator: In
          values: [$NODE_PREFIX$z]
YAML
    done
  done
} | kc apply -f - >/dev/null

released=$(kc get pv -l strata.dev/e2e=true -o jsonpath='{range .items[?(@.status.phase=="Released")]}{.metadata.name} {.spec.local.path}{"\n"}{end}')
while read -r pv path; do
  [[ -n $pv ]] || continue
  find "$path" -mindepth 1 -delete
  kc patch pv "$pv" --type json -p '[{"op":"remove","path":"/spec/claimRef"}]' >/dev/null
  log "recycled $pv"
done <<< "$released"
log "$(kc get pv -l strata.dev/e2e=true --no-headers | wc -l) local volumes"
