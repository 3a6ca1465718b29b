#!/usr/bin/env bash
# Builds the images the e2e nodes run, with podman and without a registry,
# into bin/e2e/images/<name>.tar (OCI archives; <name>.tar.id holds the
# image ID so up.sh loads a node only when it changed):
#   strata  $STRATA_IMAGE     the CGO_ENABLED=0 `strata` binary, FROM scratch, nonroot
#   etcd    DefaultEtcdImage  a static etcd of that tag's version (hack/e2e/tools.sh)
#   pause   registry.k8s.io/pause:3.10  every pod's sandbox (hack/e2e/tools.sh)
# The Dockerfile at the repository root stays the real build (it pulls
# golang and distroless images, which this machine cannot).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
export PATH=/usr/local/go/bin:$PATH
out=$E2E_DIR/images
mkdir -p "$out"

# image NAME TAG BINARY PATH-IN-IMAGE USER: builds TAG around BINARY unless
# the archive was made from this very binary.
image() {
  local name=$1 tag=$2 bin=$3 dest=$4 user=$5
  local ctx=$out/$name.ctx sum
  sum=$(sha256sum "$bin" | cut -c1-64)
  if [[ -f $out/$name.tar && -f $out/$name.sum && $(cat "$out/$name.sum") == "$sum $tag" ]]; then
    log "image $tag up to date"
    return
  fi
  local t0=$SECONDS
  rm -rf "$ctx" && mkdir -p "$ctx"
  cp "$bin" "$ctx/bin"
  cat > "$ctx/Containerfile" <<CF
FROM scratch
COPY bin $dest
ENV PATH=$(dirname "$dest")
USER $user
ENTRYPOINT ["$dest"]
CF
  podman build -q --no-cache -t "$tag" -f "$ctx/Containerfile" "$ctx" >/dev/null
  rm -f "$out/$name.tar"
  podman save -q --format oci-archive -o "$out/$name.tar" "$tag"
  podman image inspect --format '{{.Id}}' "$tag" > "$out/$name.tar.id"
  echo "$sum $tag" > "$out/$name.sum"
  rm -rf "$ctx"
  log "image $tag built in $((SECONDS - t0)) s"
}

t0=$SECONDS
(cd "$root" && CGO_ENABLED=0 nice -n 19 go build -trimpath -ldflags "-s -w" -o "$out/strata" .)
log "strata binary built in $((SECONDS - t0)) s"
image strata "$STRATA_IMAGE" "$out/strata" /strata 65532:65532
image etcd "$ETCD_IMAGE" "$E2E_TOOLS/etcd-image/etcd" /usr/local/bin/etcd 65532:65532
image pause "$PAUSE_IMAGE" "$E2E_TOOLS/pause" /pause 65535:65535
