#!/usr/bin/env bash
# Installs the Debian packages the e2e cluster needs: a container runtime per
# node (containerd + runc), the CNI plugins (bridge, host-local, loopback,
# portmap), podman to build images without a registry, iptables + conntrack
# for kube-proxy and openssl for the cluster CA. Skips what is there;
# needs root (as on CI), otherwise says what to install.
set -euo pipefail
need=()
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v conntrack >/dev/null 2>&1 || need+=(conntrack)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing e2e packages: ${need[*]}; install them with: sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
echo "installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
