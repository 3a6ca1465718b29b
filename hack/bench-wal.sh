#!/usr/bin/env bash
# The strata bench runs behind every figure issues #18 (WAL performance)
# and #15 (cost at 0.5 and 10 MB/s) ask for, one run per line of their
# "must show" lists, each run with its modes side by side and pinning on
# (docs/bench.md "WAL performance and cost figures"). Writes
# $OUT/<run>.json, $OUT/<run>.txt and $OUT/acks-all-2000.png, then prints
# the text reports. Meant for a quiet machine: absolute figures of a
# loaded one measure CPU contention.
#
#   make bench-wal [BENCH_DURATION=20s] [BENCH_FLAGS=...]
set -euo pipefail
BIN=${BIN:-bin/strata}
OUT=${OUT:-bin/bench-wal}
DURATION=${BENCH_DURATION:-20s}
read -r -a EXTRA <<<"${BENCH_FLAGS:-}"
mkdir -p "$OUT"
common=(--record-size 1024 --partitions 12 --pin=true "${EXTRA[@]}")

run() {
	local name=$1
	shift
	echo "== $name: strata bench ${common[*]} $*" >&2
	"$BIN" bench --json "${common[@]}" "$@" >"$OUT/$name.json"
	"$BIN" bench --from-json "$OUT/$name.json" >"$OUT/$name.txt"
}

# #18: acks=all at 2,000 rec/s with the per-stage breakdown (wal+latency
# is the latency target's policy; plain wal is the default, auto).
run acks-all-2000 --modes classic,wal+latency,wal --acks all --rate 2000 --duration "$DURATION"
"$BIN" bench --from-json "$OUT/acks-all-2000.json" --plot "$OUT/acks-all-2000.png" >/dev/null
# #18: acks=1 at 2,000 rec/s: produce p99 vs classic, e2e vs acks=all.
run acks-1-2000 --modes classic,wal+latency --acks 1 --rate 2000 --duration "$DURATION"
# #18: saturation throughput, acks=all (30 s, as the issue's figures).
run saturation --modes classic,wal+latency --acks all --rate 0 --duration 30s
# The same two with the load generator on the brokers' CPU, so that the
# object store's CPU (WAL mode only) does not delay the clients either
# (docs/bench.md "Fair pinning").
run acks-1-2000-lgb --modes classic,wal+latency --acks 1 --rate 2000 --duration "$DURATION" --pin-load-generator=brokers
run saturation-lgb --modes classic,wal+latency --acks all --rate 0 --duration 30s --pin-load-generator=brokers
# #18 CPU and cross-zone at 10,000 rec/s; #15: cost <= 10 % of classic
# with auto (wal) and its p99 against wal+latency in the same run.
run rate-10000 --modes classic,wal,wal+latency --acks all --rate 10000 --duration 30s
# #15: cost at 0.5 MB/s <= classic.
run rate-500 --modes classic,wal --acks all --rate 500 --duration 30s

for f in "$OUT"/*.txt; do
	echo "### $(basename "$f" .txt)"
	cat "$f"
	echo
done
