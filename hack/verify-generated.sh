#!/usr/bin/env bash
# Fails when the committed generated files are stale.
#
# Records checksums of every generated file (deepcopy, CRDs, RBAC role,
# OLM bundle; and the API key table of docs/broker.md, hack/apitable), regenerates them in place with `make generate manifests
# bundle`, and lists the files whose content changed. The regenerated files
# are left in the tree, so the fix is to review and commit them.
set -euo pipefail
cd "$(dirname "$0")/.."

generated() {
  {
    find api -name 'zz_generated.*.go'
    find config/crd/bases -name '*.yaml'
    echo config/rbac/role.yaml
    find bundle -type f
  } 2>/dev/null | LC_ALL=C sort -u
}

checksums() {
  local f
  for f in $(generated); do
    if [[ -f $f ]]; then sha256sum "$f"; fi
  done
}

before=$(checksums)
make --no-print-directory -s generate manifests bundle >/dev/null
after=$(checksums)

stale=$(diff <(echo "$before") <(echo "$after") | sed -n 's/^[<>] [0-9a-f]*  //p' | LC_ALL=C sort -u || true)
# The API key table of docs/broker.md (hack/apitable) follows the code.
if ! go run ./hack/apitable >/dev/null 2>&1; then
  go run ./hack/apitable -w
  stale=$(printf '%s\n%s' "$stale" docs/broker.md | sed '/^$/d')
fi
if [[ -n $stale ]]; then
  echo "generated files were stale; they have been regenerated — review and commit them:" >&2
  echo "$stale" | sed 's/^/  /' >&2
  exit 1
fi
echo "generated files are up to date"
