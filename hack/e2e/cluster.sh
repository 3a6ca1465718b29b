#!/usr/bin/env bash
# On the e2e cluster, as a user would: the operator from config/default
# (hack/e2e/operator: local image, never pulled), then the e2e KafkaCluster
# (3 zones x 1 broker, WAL on the zone buckets, managed etcd, namespace
# enforcing the restricted Pod Security Standard) until Ready, then a
# `strata bench` Job in zone a (acks=all) whose JSON report is printed.
# Re-runnable: the bench Job is replaced. Not the full e2e scenario of
# issue #13 (scaling, rolls, failover): that is `make e2e`, to come.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
[[ -f $KUBECONFIG_FILE ]] || die "no cluster: run \`make e2e-up\`"
t0=$SECONDS
kc apply -k "$here/operator" >/dev/null
kc -n strata-system rollout status deploy/strata-operator --timeout=180s >/dev/null
log "operator available in $((SECONDS - t0)) s"
# The CRDs come with the operator; the custom resources need them served.
kc wait --for=condition=Established crd/kafkaclusters.kafka.strata.dev crd/fastbuckets.kafka.strata.dev --timeout=60s >/dev/null
t1=$SECONDS
kc apply -f "$here/cluster/cluster.yaml" >/dev/null
if ! kc -n strata-e2e wait --for=condition=Ready kafkacluster/e2e --timeout=300s >/dev/null; then
  kc -n strata-e2e get kafkacluster,pods -o wide >&2
  kc -n strata-e2e get events --sort-by=.lastTimestamp >&2 | tail -30
  die "KafkaCluster e2e not Ready after 300 s"
fi
log "KafkaCluster Ready in $((SECONDS - t1)) s: $(kc -n strata-e2e get kafkacluster e2e -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}')"
t2=$SECONDS
kc -n strata-e2e delete job bench --ignore-not-found --wait=true >/dev/null
kc apply -f "$here/cluster/bench-job.yaml" >/dev/null
if ! kc -n strata-e2e wait --for=condition=Complete job/bench --timeout=300s >/dev/null; then
  kc -n strata-e2e logs job/bench >&2 || true
  die "bench Job did not complete"
fi
mkdir -p "$E2E_DIR/out"
# The log interleaves bench's progress lines (stderr, "external: ...")
# with the JSON report (stdout).
kc -n strata-e2e logs job/bench | grep -v '^external: ' | sed -n '/^{/,$p' > "$E2E_DIR/out/bench.json"
log "bench done in $((SECONDS - t2)) s: $E2E_DIR/out/bench.json"
python3 - "$E2E_DIR/out/bench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["modes"][0]
t = r.get("traffic") or {}
print(f"produced {r['records_produced']} consumed {r['records_consumed']} produce_errors {r['produce_errors']} "
      f"cross_zone_bytes_per_produced_byte {t.get('cross_zone_bytes_per_produced_byte')}")
PY
kc get pods -A -o wide
