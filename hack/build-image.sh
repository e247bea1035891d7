#!/usr/bin/env bash
# build-image.sh — builds the fencepost container image from ./Dockerfile without a Docker engine
# (buildah, no daemon) and writes one OCI archive that `docker load`, `podman load` and
# `kind load image-archive` accept, with its digest beside it:
#
#   dist/image/fencepost-<version>.oci.tar          the image (OCI layout + docker-archive manifest)
#   dist/image/fencepost-<version>.oci.tar.digest   its manifest digest (sha256:…)
#
# Its SBOM is syft's (hack/release.sh attaches it in the registry; locally: syft scan oci-dir:…).
#
# Where Docker Hub cannot be reached, the Dockerfile's base (node:<version>-bookworm-slim) is first
# built locally from Debian's archive (mmdebstrap) and the npm registry (node, npm), once. Builds are
# reproducible and cached by their inputs: a second run with nothing changed takes about a second.
# The work is in hack/image/build.ts; this script brings the tools and Node 24 first.
#
# Usage: hack/build-image.sh [--out DIR] [--rebuild] [--json]
#   prints the archive's path (or, with --json, the result: archive, digest, imageId, bytes…)
#
# Needs: buildah, skopeo, mmdebstrap, umoci and crun (the tests run the image with crun),
# slirp4netns and uidmap (the tests' rootless containers). Installed with apt-get when this runs
# as root on a machine with apt-get; otherwise one line says what to install. Storage is under
# ${FENCEPOST_CACHE:-~/.cache/fencepost}/image (vfs), never /var/lib/containers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tools=(buildah skopeo mmdebstrap umoci crun slirp4netns newuidmap)
packages=(buildah skopeo mmdebstrap umoci crun slirp4netns uidmap)
missing=()
for i in "${!tools[@]}"; do command -v "${tools[$i]}" >/dev/null || missing+=("${packages[$i]}"); done
if ((${#missing[@]} > 0)); then
  if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "[build-image] installing ${missing[*]} (Debian packages; first run only)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
      || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; }
  else
    echo "fencepost: hack/build-image.sh needs ${missing[*]}; install with: $( [[ $EUID -eq 0 ]] || printf 'sudo ')apt-get install --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi
if [[ $EUID -ne 0 ]]; then
  # mmdebstrap --mode=root and buildah's chroot isolation with vfs storage need root here.
  echo "fencepost: hack/build-image.sh runs as root (buildah with chroot isolation, mmdebstrap); try: sudo $0 $*" >&2
  exit 1
fi
node_bin=$(hack/bootstrap-node.sh)
exec "$node_bin/node" hack/image/build.ts "$@"
