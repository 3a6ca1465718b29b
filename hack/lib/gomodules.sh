# Shared by hack/setup-envtest.sh and hack/e2e/tools.sh (source it): the
# throwaway Go modules that build Kubernetes and etcd binaries from the Go
# module proxy.

# go_version prints the Go language version of the toolchain (e.g. 1.26).
go_version() { go env GOVERSION | sed 's/^go\([0-9]*\.[0-9]*\).*/\1/'; }

# kube_gomod MODULE KUBE_VERSION prints a go.mod requiring
# k8s.io/kubernetes@KUBE_VERSION. k8s.io/kubernetes's own go.mod points
# every staging module (k8s.io/api, k8s.io/client-go, ...) at ./staging; as
# a dependency those replace lines must point at the matching v0.x
# releases, derived here from that go.mod.
#
# Callers write its output to ./go.mod (`kube_gomod ... > go.mod`): the
# shell has already truncated that file when this runs, and `go mod
# download` in a directory with an empty go.mod fails ("missing module
# declaration"), so the download runs in an empty directory of its own.
kube_gomod() {
  local module=$1 version=$2 gomod tmp
  tmp=$(mktemp -d)
  gomod=$(cd "$tmp" && go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  rmdir "$tmp"
  if [[ -z $gomod || ! -f $gomod ]]; then
    echo "kube_gomod: no go.mod of k8s.io/kubernetes@$version from the module proxy" >&2
    return 1
  fi
  echo "module $module"
  echo
  echo "go $(go_version)"
  echo
  echo "require k8s.io/kubernetes $version"
  echo
  echo "replace ("
  sed -n "s#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\t\1 => \1 v0.${version#v1.}#p" "$gomod"
  echo ")"
}

# kube_ldflags KUBE_VERSION prints the -ldflags that stamp the version
# into a Kubernetes binary (k8s.io/component-base/version).
kube_ldflags() {
  local version=$1 minor pkg=k8s.io/component-base/version
  minor=${version#v1.}; minor=${minor%%.*}
  echo "-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
}

# etcd_main_module MODULE ETCD_VERSION writes, in the current directory, a
# module whose main is etcd's own (go.etcd.io/etcd/server/v3/etcdmain).
etcd_main_module() {
  printf 'module %s\n\ngo %s\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$1" "$(go_version)" "$2" > go.mod
  cat > main.go <<'GO'
// Command etcd is etcd's own main, built from the module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  go mod tidy >/dev/null
}
