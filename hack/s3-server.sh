#!/usr/bin/env bash
# Runs Versity Gateway (the S3 test server) in the foreground for manual
# testing, with a POSIX backend in a temporary directory:
#
#   hack/s3-server.sh [bucket...]        (default bucket: strata-wal)
#
# Prints the endpoint and keys to use, e.g. for a FastBucket with
# endpoint http://127.0.0.1:7070 and forcePathStyle: true. Ctrl-C stops it
# and removes the data. Go tests use internal/testutil/s3server instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${STRATA_VERSITYGW:-$root/bin/versitygw-v1.8.0}
[[ -x $bin ]] || { echo "versitygw not found at $bin: run \`make s3-server\`" >&2; exit 1; }

addr=${S3_ADDR:-127.0.0.1:7070}
access=${S3_ACCESS_KEY:-strata}
secret=${S3_SECRET_KEY:-strata-secret}
dir=$(mktemp -d "${TMPDIR:-/tmp}/strata-s3.XXXXXX")
mkdir -p "$dir/buckets" "$dir/meta"
for b in "${@:-strata-wal}"; do mkdir -p "$dir/buckets/$b"; done

"$bin" --port "$addr" --access "$access" --secret "$secret" --region us-east-1 --quiet \
  posix --sidecar "$dir/meta" "$dir/buckets" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$dir"' EXIT INT TERM

cat <<INFO
Versity Gateway on http://$addr (pid $pid, data $dir)
  AWS_ACCESS_KEY_ID=$access AWS_SECRET_ACCESS_KEY=$secret AWS_REGION=us-east-1
  buckets: ${*:-strata-wal}
INFO
wait $pid
