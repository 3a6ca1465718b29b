#!/usr/bin/env bash
# Checks hack/lib/gomodules.sh the way its callers use it: kube_gomod's
# output redirected into ./go.mod of an empty directory must carry the
# staging replace lines (a fresh machine's `make envtest` / `make e2e-tools`
# build from it). Needs the Go module proxy (or k8s.io/kubernetes's go.mod
# in the module cache).
#   hack/lib/gomodules_test.sh [KUBE_VERSION]
set -euo pipefail
export PATH=/usr/local/go/bin:$PATH
version=${1:-v1.37.2}
source "$(dirname "$0")/gomodules.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
if ! kube_gomod strata.local/gomodules-test "$version" > go.mod; then
  echo "FAIL: kube_gomod failed" >&2
  exit 1
fi
want="k8s.io/client-go => k8s.io/client-go v0.${version#v1.}"
if ! grep -qF "$want" go.mod; then
  echo "FAIL: go.mod lacks \"$want\":" >&2
  cat go.mod >&2
  exit 1
fi
echo "ok: kube_gomod > go.mod has $(grep -c ' => ' go.mod) replace lines"
