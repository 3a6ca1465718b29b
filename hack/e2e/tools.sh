#!/usr/bin/env bash
# Builds what the e2e cluster runs that envtest does not already build, from
# the Go module proxy, into $E2E_TOOLS (default $TOOLS_DIR/e2e), cached and
# version-stamped like hack/setup-envtest.sh:
#   kubelet, kube-controller-manager, kube-scheduler, kube-proxy, kubectl
#                                                               (k8s.io/kubernetes)
#   coredns                                                     (github.com/coredns/coredns)
#   pause                                                       (10-line static Go program)
#   etcd-image/etcd  a static etcd for the managed-etcd image, at the version
#                    of api/v1alpha1.DefaultEtcdImage's tag
# kube-apiserver and the control plane's etcd come from hack/setup-envtest.sh
# ($ENVTEST_DIR); that etcd is dynamically linked, useless in a FROM-scratch
# image ("exec /usr/local/bin/etcd: no such file or directory").
# Builds run under `nice -n 19`: the machine is shared. Each step's time is
# printed (docs/e2e.md records them).
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
root=$(cd "$(dirname "$0")/../.." && pwd)
TOOLS_DIR=${TOOLS_DIR:-$root/bin}
out=${E2E_TOOLS:-$TOOLS_DIR/e2e}
mkdir -p "$out"
export GOFLAGS=-mod=mod CGO_ENABLED=0
# shellcheck source=../lib/gomodules.sh
source "$root/hack/lib/gomodules.sh"
gover=$(go_version)

# step NAME STAMP-VALUE FUNCTION: runs FUNCTION unless $out/.NAME holds STAMP-VALUE.
step() {
  local name=$1 want=$2 fn=$3
  if [[ -f $out/.$name && "$(cat "$out/.$name")" == "$want" ]]; then
    echo "e2e-tools: $name present ($want)"
    return
  fi
  echo "e2e-tools: building $name ($want)"
  local t0=$SECONDS
  "$fn"
  echo "$want" > "$out/.$name"
  echo "e2e-tools: $name built in $((SECONDS - t0)) s"
}

# kube_cmds NAME CMD...: builds k8s.io/kubernetes/cmd/CMD... of KUBE_VERSION
# in a throwaway module (as hack/setup-envtest.sh builds kube-apiserver), in
# ONE go build: the commands share most packages, and one build schedules
# their compiles across every core (one build per command linked them one
# after the other, leaving cores idle between).
kube_cmds() {
  local dir="$out/build/$1"; shift
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  kube_gomod strata.local/e2e-kube "$KUBE_VERSION" > go.mod
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for cmd in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$cmd"; done
    printf ')\n'
  } > tools.go
  go mod tidy -e >/dev/null 2>&1 || true
  local ld pkgs=()
  ld=$(kube_ldflags "$KUBE_VERSION")
  for cmd in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$cmd"); done
  nice -n 19 go build -trimpath -ldflags "$ld" -o "$out/" "${pkgs[@]}"
  rm -rf "$dir"
}

# kubectl of the cluster's version too: the scripts use it, whatever kubectl
# the machine has (or not). Built with the others; its own stamp is kept so
# that a TOOLS_DIR from before (kubectl a step of its own) stays valid.
build_kube() {
  kube_cmds kube kubelet kube-controller-manager kube-scheduler kube-proxy kubectl
  echo "$KUBE_VERSION" > "$out/.kubectl"
}
build_kubectl() { kube_cmds kubectl kubectl; }

build_coredns() {
  local dir="$out/build/coredns"
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  cat > go.mod <<GOMOD
module strata.local/e2e-coredns

go $gover

require github.com/coredns/coredns $COREDNS_VERSION
GOMOD
  # CoreDNS's own main with only the plugins the e2e Corefile uses (the
  # default set pulls in every cloud SDK and triples the build time).
  cat > main.go <<'GO'
// Command coredns is CoreDNS's own main, built from the module proxy.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"

	"github.com/coredns/coredns/coremain"
)

func main() { coremain.Run() }
GO
  go mod tidy >/dev/null
  nice -n 19 go build -trimpath -ldflags "-s -w" -o "$out/coredns" .
  rm -rf "$dir"
}

build_pause() {
  local dir="$out/build/pause"
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  printf 'module strata.local/e2e-pause\n\ngo %s\n' "$gover" > go.mod
  # The sandbox process of every pod: sleeps until SIGTERM/SIGINT and reaps
  # the zombies it inherits as PID 1 of the pod.
  cat > main.go <<'GO'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			if pid, _ := syscall.Wait4(-1, nil, syscall.WNOHANG, nil); pid <= 0 {
				break
			}
		}
	}
}
GO
  nice -n 19 go build -trimpath -ldflags "-s -w" -o "$out/pause" .
  rm -rf "$dir"
}

build_etcd_image() {
  mkdir -p "$out/etcd-image"
  # hack/setup-envtest.sh builds a static etcd too: the same version is
  # copied, not built again.
  local envtest=${ENVTEST_DIR:-$TOOLS_DIR/k8s}
  if [[ -x $envtest/etcd ]] && grep -q "etcd=$ETCD_IMAGE_VERSION static" "$envtest/.versions" 2>/dev/null; then
    cp "$envtest/etcd" "$out/etcd-image/etcd"
    return
  fi
  local dir="$out/build/etcd"
  rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
  etcd_main_module strata.local/e2e-etcd "$ETCD_IMAGE_VERSION"
  mkdir -p "$out/etcd-image"
  nice -n 19 go build -trimpath -ldflags "-s -w" -o "$out/etcd-image/etcd" .
  rm -rf "$dir"
}

ETCD_IMAGE_VERSION=$(sed -n 's/^const DefaultEtcdImage = ".*:\(v[0-9.]*\)"$/\1/p' "$root/api/v1alpha1/kafkacluster_types.go")
[[ -n $ETCD_IMAGE_VERSION ]] || { echo "e2e-tools: no version in api/v1alpha1 DefaultEtcdImage" >&2; exit 1; }

step pause v1 build_pause
step etcd-image "$ETCD_IMAGE_VERSION static" build_etcd_image
# The stamp names the plugin set: change both together.
step coredns "$COREDNS_VERSION bind,cache,errors,health,hosts,kubernetes,log,ready" build_coredns
step kube "$KUBE_VERSION" build_kube
step kubectl "$KUBE_VERSION" build_kubectl
rmdir "$out/build" 2>/dev/null || true
