#!/usr/bin/env bash
# The test run of `make test` (and of each `make test-stress` round): every
# package through gotestsum (go test -json; one line per package while it
# runs, failures summarised at the end), then test/olm (its own module),
# then the slowest tests and specs and, last, every failure with its
# message (hack/testreport).
#
# Environment (the Makefile sets it): GOTESTSUM, GO_TEST_FLAGS,
# TEST_PKGS (default ./...; test/olm runs only with ./...), TEST_OUT (where
# the go test -json files and the Ginkgo report go), SLOWEST (how many).
set -uo pipefail
cd "$(dirname "$0")/.."

: "${GOTESTSUM:?GOTESTSUM names the gotestsum binary (make test sets it)}"
GO_TEST_FLAGS=${GO_TEST_FLAGS:--count=1 -timeout 30m -p 3}
TEST_PKGS=${TEST_PKGS:-./...}
TEST_OUT=${TEST_OUT:-bin/test}
SLOWEST=${SLOWEST:-15}

mkdir -p "$TEST_OUT"
out=$(cd "$TEST_OUT" && pwd)
rm -f "$out"/go-test.json "$out"/olm.json "$out"/ginkgo.json "$out"/ginkgo-2.json "$out"/all.json
# The controllers' Ginkgo suite writes its JSON report here (and its
# second process ginkgo-2.json).
export STRATA_GINKGO_REPORT=$out/ginkgo.json
# The controllers' envtest runs as two processes, half the specs each
# (controllers/suite_test.go): in one it was the run's critical path.
export STRATA_ENVTEST_SHARDS=${STRATA_ENVTEST_SHARDS:-2}

# go test starts packages in the order it is given them, -p at a time (3, the
# Makefile's): in alphabetical order the longest (the controllers' envtest,
# the client compat and replication suites) started last and the run
# ended with one of them alone. The slow ones (their seconds in a make
# test of 2026-12-05 in the comment) go first; the rest follow.
SLOW_FIRST=(
  ./controllers            # 483 in one process; two now (STRATA_ENVTEST_SHARDS)
  ./test/compat            # 244
  ./test/replication       # 176
  ./internal/chaos         # 174
  ./broker/protocol        # 107
  ./broker/server          # 82
  ./internal/verify        # 80
  ./internal/bench         # 59
  ./test/integration       # 54
  ./broker/meta            # 53
  ./test/hostile           # 46
)
pkgs=$TEST_PKGS
if [ "$TEST_PKGS" = "./..." ]; then
  mod=$(go list -m)
  pkgs="${SLOW_FIRST[*]}"
  while read -r p; do
    rel=.${p#"$mod"} # ./broker/log; the module's root package is "."
    case " ${SLOW_FIRST[*]} " in *" $rel "*) ;; *) pkgs="$pkgs $rel" ;; esac
  done < <(go list ./...)
fi

rc=0
# shellcheck disable=SC2086 # GO_TEST_FLAGS and pkgs are word lists
"$GOTESTSUM" --format pkgname --hide-summary=skipped --jsonfile "$out/go-test.json" -- $GO_TEST_FLAGS $pkgs || rc=1
files=("$out/go-test.json")
if [ "$TEST_PKGS" = "./..." ]; then
  # shellcheck disable=SC2086
  (cd test/olm && go vet ./... && "$GOTESTSUM" --format pkgname --hide-summary=skipped --jsonfile "$out/olm.json" -- $GO_TEST_FLAGS ./...) || rc=1
  files+=("$out/olm.json")
fi

cat "${files[@]}" > "$out/all.json" 2>/dev/null
echo
echo "== Slowest tests (top $SLOWEST of those over 100ms)"
"$GOTESTSUM" tool slowest --jsonfile "$out/all.json" | sed -n "1,${SLOWEST}p" # not head: SIGPIPE under pipefail
go run ./hack/testreport -slowest "$SLOWEST" -ginkgo "$out/ginkgo.json,$out/ginkgo-2.json" "${files[@]}" || rc=1
if [ $rc -eq 0 ]; then
  echo "== make test: PASS"
else
  echo "== make test: FAIL (go test -json output in $out)"
fi
exit $rc
