#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver + etcd) from the Go module
# proxy into bin/k8s/, without downloading any prebuilt binary.
#
#   hack/setup-envtest.sh            build if missing or of another version
#   KUBE_VERSION=v1.37.2 ETCD_VERSION=v3.7.3 hack/setup-envtest.sh
#
# kube-apiserver comes from k8s.io/kubernetes, whose go.mod points every
# staging module (k8s.io/api, k8s.io/client-go, ...) at ./staging; as a
# dependency those replace lines must point at the matching v0.x releases,
# which this script derives from the kubernetes go.mod itself. The build runs
# in a throwaway module under bin/k8s/build so it never touches Strata's go.mod.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${ENVTEST_DIR:-$root/bin/k8s}
stamp="$out/.versions"
# Static (CGO_ENABLED=0), like Kubernetes' and etcd's own release builds:
# the e2e tools (hack/e2e/tools.sh) build the other kube commands the same
# way and so reuse every package compiled here from the Go build cache, and
# the e2e etcd image takes this etcd as it is. "static" in the stamp
# rebuilds what an older run built with cgo.
want="kube-apiserver=$KUBE_VERSION etcd=$ETCD_VERSION static"

if [[ -x $out/kube-apiserver && -x $out/etcd && -f $stamp && "$(cat "$stamp")" == "$want" ]]; then
  echo "envtest binaries present in $out ($want)"
  exit 0
fi
mkdir -p "$out"
export GOFLAGS=-mod=mod CGO_ENABLED=0
# shellcheck source=lib/gomodules.sh
source "$root/hack/lib/gomodules.sh"

build_apiserver() {
  local dir="$out/build/apiserver"
  rm -rf "$dir" && mkdir -p "$dir"
  cd "$dir"
  kube_gomod strata.local/envtest-apiserver "$KUBE_VERSION" > go.mod
  cat > tools.go <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
  go mod tidy -e >/dev/null 2>&1 || true
  go build -trimpath -o "$out/kube-apiserver" -ldflags "$(kube_ldflags "$KUBE_VERSION")" \
    k8s.io/kubernetes/cmd/kube-apiserver
}

build_etcd() {
  local dir="$out/build/etcd"
  rm -rf "$dir" && mkdir -p "$dir"
  cd "$dir"
  etcd_main_module strata.local/envtest-etcd "$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$out/etcd" .
}

echo "building etcd $ETCD_VERSION into $out"
build_etcd
echo "building kube-apiserver $KUBE_VERSION into $out (takes several minutes)"
build_apiserver
rm -rf "$out/build"
echo "$want" > "$stamp"
"$out/kube-apiserver" --version
"$out/etcd" --version | sed -n 1p # sed reads to the end: head -1 made etcd die of SIGPIPE (exit 141 under pipefail) on a fresh machine
