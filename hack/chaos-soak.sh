#!/usr/bin/env bash
# chaos-soak.sh: `strata chaos` runs one after the other, over successive
# seeds, until DURATION of soak has passed; each run's JSON result is
# appended as one line to OUT. Replication alternates wal / classic
# (REPLICATION=wal or classic pins it). Exits non-zero if any run failed.
#
#   DURATION=30m RUN_DURATION=120s SEED=1 OUT=bin/chaos-soak.jsonl hack/chaos-soak.sh
set -u
: "${STRATA:=bin/strata}"
: "${DURATION:=30m}"
: "${RUN_DURATION:=120s}"
: "${SEED:=1}"
: "${OUT:=bin/chaos-soak.jsonl}"
: "${REPLICATION:=}"
: "${CHAOS_FLAGS:=}"

seconds() { # 30m, 90s, 2h, 45 -> seconds
	case "$1" in
	*h) echo $((${1%h} * 3600)) ;;
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*) echo "$1" ;;
	esac
}

end=$(($(date +%s) + $(seconds "$DURATION")))
seed=$SEED
runs=0
failed=0
mkdir -p "$(dirname "$OUT")"
while [ "$(date +%s)" -lt "$end" ]; do
	repl=$REPLICATION
	if [ -z "$repl" ]; then
		if [ $((seed % 2)) -eq 1 ]; then repl=wal; else repl=classic; fi
	fi
	echo "== soak run $((runs + 1)): strata chaos --seed $seed --duration $RUN_DURATION --replication $repl $CHAOS_FLAGS" >&2
	line=$("$STRATA" chaos --seed "$seed" --duration "$RUN_DURATION" --replication "$repl" --json $CHAOS_FLAGS)
	rc=$?
	if [ -z "$line" ]; then
		# The harness itself failed (no result): still one line per run.
		line=$(printf '{"seed":%d,"replication":"%s","ok":false,"reason":"harness error, exit status %d (see stderr)"}' "$seed" "$repl" "$rc")
	fi
	echo "$line" >>"$OUT"
	[ "$rc" -eq 0 ] || failed=$((failed + 1))
	runs=$((runs + 1))
	seed=$((seed + 1))
done
echo "chaos soak: $runs runs, $failed failed, results appended to $OUT" >&2
[ "$failed" -eq 0 ]
