#!/usr/bin/env bash
# build.sh — builds the test control plane's binaries from the Go module proxy and caches them
# outside git, keyed by version, so that only the first run pays for the build.
#
# Usage: hack/testbed/build.sh [component ...]
#   components: kube-apiserver kubectl etcd helm kube-scheduler kube-controller-manager kwok
#               registry oras syft cosign   (the release tools: hack/release.sh and its test)
#   default:    kube-apiserver kubectl etcd helm
# Prints, as its last line, the KUBEBUILDER_ASSETS folder (kube-apiserver, etcd, kubectl, and
# whatever else was built, side by side) on standard output; progress goes to standard error.
#
# Environment:
#   FENCEPOST_CACHE   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/fencepost)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The pinned releases. Change a version here and in the matching wrapper go.mod together.
KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
HELM_VERSION=v3.22.0
KWOK_VERSION=v0.8.0
# The release tools: the CNCF distribution registry (the OCI registry the release is published
# to in tests), oras (pushes and lists referrers), syft (the SBOM) and cosign (the signature).
REGISTRY_VERSION=v3.1.2
ORAS_VERSION=v1.3.6
SYFT_VERSION=v1.57.2
COSIGN_VERSION=v3.1.3

cache=${FENCEPOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fencepost}
assets="$cache/assets/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
mkdir -p "$assets"

log() { printf '[build] %s\n' "$*" >&2; }

# stamp_kube prints -ldflags that make --version and /version report the release instead of
# v0.0.0-master. The same keys exist under component-base and client-go.
stamp_kube() {
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local f=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    f+=" -X $pkg.gitTreeState=clean -X $pkg.gitCommit=release-$KUBE_VERSION"
    f+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  printf '%s' "-s -w$f"
}

# build_one NAME DIR PKG VERSION LDFLAGS: go build PKG inside the wrapper module DIR into the
# version-keyed cache, unless it is already there, and link it into the assets folder.
build_one() {
  local name=$1 dir=$2 pkg=$3 version=$4 ldflags=$5
  local out="$cache/bin/$name-$version/$name"
  if [[ ! -x $out ]]; then
    log "building $name $version (first run only; kube-apiserver takes 10-25 minutes on 2 cores)"
    mkdir -p "$(dirname "$out")"
    local started=$SECONDS
    (cd "$here/$dir" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg")
    mv "$out.tmp" "$out"
    log "built $name in $((SECONDS - started)) s"
  else
    log "cached $name $version"
  fi
  ln -sfn "$out" "$assets/$name"
}

components=("$@")
[[ ${#components[@]} -gt 0 ]] || components=(kube-apiserver kubectl etcd helm)
for c in "${components[@]}"; do
  case $c in
    kube-apiserver|kubectl|kube-scheduler|kube-controller-manager)
      build_one "$c" kube "k8s.io/kubernetes/cmd/$c" "$KUBE_VERSION" "$(stamp_kube)" ;;
    etcd)
      build_one etcd etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" \
        "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=release-$ETCD_VERSION" ;;
    helm)
      build_one helm helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION" \
        "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean" ;;
    kwok)
      build_one kwok kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION" "-s -w" ;;
    registry)
      build_one registry registry github.com/distribution/distribution/v3/cmd/registry "$REGISTRY_VERSION" \
        "-s -w -X github.com/distribution/distribution/v3/version.version=$REGISTRY_VERSION" ;;
    oras)
      build_one oras oras oras.land/oras/cmd/oras "$ORAS_VERSION" \
        "-s -w -X oras.land/oras/internal/version.BuildMetadata= -X oras.land/oras/internal/version.GitTreeState=clean" ;;
    syft)
      build_one syft syft github.com/anchore/syft/cmd/syft "$SYFT_VERSION" "-s -w -X main.version=${SYFT_VERSION#v}" ;;
    cosign)
      build_one cosign cosign github.com/sigstore/cosign/v3/cmd/cosign "$COSIGN_VERSION" \
        "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$COSIGN_VERSION -X sigs.k8s.io/release-utils/version.gitTreeState=clean" ;;
    *) echo "build.sh: unknown component '$c' (known: kube-apiserver kubectl etcd helm kube-scheduler kube-controller-manager kwok registry oras syft cosign)" >&2; exit 2 ;;
  esac
done
echo "$assets"
