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
GO_TEST_FLAGS=${GO_TEST_FLAGS:--count=1 -timeout 30m}
TEST_PKGS=${TEST_PKGS:-./...}
TEST_OUT=${TEST_OUT:-bin/test}
SLOWEST=${SLOWEST:-15}

mkdir -p "$TEST_OUT"
out=$(cd "$TEST_OUT" && pwd)
rm -f "$out"/go-test.json "$out"/olm.json "$out"/ginkgo.json "$out"/all.json
# The controllers' Ginkgo suite writes its JSON report here.
export STRATA_GINKGO_REPORT=$out/ginkgo.json

rc=0
# shellcheck disable=SC2086 # GO_TEST_FLAGS and TEST_PKGS are word lists
"$GOTESTSUM" --format pkgname --hide-summary=skipped --jsonfile "$out/go-test.json" -- $GO_TEST_FLAGS $TEST_PKGS || rc=1
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
go run ./hack/testreport -slowest "$SLOWEST" -ginkgo "$out/ginkgo.json" "${files[@]}" || rc=1
if [ $rc -eq 0 ]; then
  echo "== make test: PASS"
else
  echo "== make test: FAIL (go test -json output in $out)"
fi
exit $rc
