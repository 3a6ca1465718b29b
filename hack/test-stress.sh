#!/usr/bin/env bash
# `make test-stress N=3`: the test run of `make test` (hack/test.sh) N times
# with hack/cpuhog beside it, two busy threads per CPU, so that the tests
# get about a third of the machine. Prints "run i of N: pass/fail" and a
# count; fails if any run failed. The hog is stopped when this script ends
# (trap), and dies with it if the script is killed (parent-death signal).
set -uo pipefail
cd "$(dirname "$0")/.."

N=${N:-3}
HOG_PER_CORE=${HOG_PER_CORE:-2}
TEST_OUT=${TEST_OUT:-bin/test}
BIN=${BIN:-bin}

mkdir -p "$BIN"
go build -o "$BIN/cpuhog" ./hack/cpuhog || exit 1
"$BIN/cpuhog" -per-core "$HOG_PER_CORE" &
hog=$!
stop_hog() { kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null; }
trap stop_hog EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

passed=0
results=()
for i in $(seq 1 "$N"); do
  echo "== test-stress: run $i of $N (cpuhog pid $hog, $HOG_PER_CORE busy threads per CPU)"
  start=$(date +%s)
  if TEST_OUT=$TEST_OUT/stress-$i hack/test.sh; then
    r=pass
    passed=$((passed + 1))
  else
    r=fail
  fi
  results+=("run $i of $N: $r ($(( $(date +%s) - start ))s, output in $TEST_OUT/stress-$i)")
  echo "== ${results[-1]}"
done
echo "== test-stress summary"
printf '%s\n' "${results[@]}"
echo "test-stress: $passed of $N passed"
[ "$passed" -eq "$N" ]
