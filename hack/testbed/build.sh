#!/usr/bin/env bash
# build.sh — builds the test control plane's binaries from the Go module proxy and caches them
# outside git, keyed by version, so that only the first run pays for the build.
#
# Usage: hack/testbed/build.sh [component ...]
#   components: kube-apiserver kubectl etcd helm kube-scheduler kube-controller-manager kwok
#               kubelet containerd runc cni crictl pause, or node (all six: a real node)
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
# The real node's pieces (kubelet is KUBE_VERSION, from the kube wrapper). These have no replace
# directives, so `go install pkg@version` builds them as released.
CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.5.3
CNI_PLUGINS_VERSION=v1.10.0
CRI_TOOLS_VERSION=v1.37.0
PAUSE_VERSION=3.10
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

# go_install NAME MODULE_PKG VERSION CGO TAGS LDFLAGS: `go install PKG@VERSION` into the
# version-keyed cache (GOBIN), unless it is already there, and link it into the assets folder.
go_install() {
  local name=$1 pkg=$2 version=$3 cgo=$4 tags=$5 ldflags=$6
  local dir="$cache/bin/$name-$version" out="$cache/bin/$name-$version/$name"
  if [[ ! -x $out ]]; then
    log "building $name $version (first run only)"
    mkdir -p "$dir/tmp"
    local started=$SECONDS
    GOBIN="$dir/tmp" CGO_ENABLED=$cgo go install -trimpath -tags "$tags" -ldflags "$ldflags" "$pkg@$version"
    mv "$dir/tmp/$(basename "$pkg")" "$out"
    rmdir "$dir/tmp"
    log "built $name in $((SECONDS - started)) s"
  else
    log "cached $name $version"
  fi
  ln -sfn "$out" "$assets/$name"
}

# build_cni: the four CNI plugins the node's network needs, in one folder (containerd's CNI
# bin_dir), linked as assets/cni.
build_cni() {
  local dir="$cache/bin/cni-plugins-$CNI_PLUGINS_VERSION" mod=github.com/containernetworking/plugins
  if [[ ! -x $dir/portmap ]]; then
    log "building CNI plugins $CNI_PLUGINS_VERSION (first run only)"
    mkdir -p "$dir"
    local started=$SECONDS
    GOBIN="$dir" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
      "$mod/plugins/main/bridge@$CNI_PLUGINS_VERSION" "$mod/plugins/ipam/host-local@$CNI_PLUGINS_VERSION" \
      "$mod/plugins/main/loopback@$CNI_PLUGINS_VERSION" "$mod/plugins/meta/portmap@$CNI_PLUGINS_VERSION"
    log "built CNI plugins in $((SECONDS - started)) s"
  else
    log "cached CNI plugins $CNI_PLUGINS_VERSION"
  fi
  ln -sfn "$dir" "$assets/cni"
}

# build_pause: the sandbox image's only binary, from pause.c in the kubernetes release module
# (no registry is reachable, so the node imports a pause image made here: test/support/node).
build_pause() {
  local out="$cache/bin/pause-$PAUSE_VERSION/pause"
  if [[ ! -x $out ]]; then
    local src
    src=$(cd "$here/kube" && go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')
    mkdir -p "$(dirname "$out")"
    gcc -Os -static -DVERSION="v$PAUSE_VERSION-fencepost" -o "$out.tmp" "$src/build/pause/linux/pause.c"
    mv "$out.tmp" "$out"
    log "built pause"
  else
    log "cached pause $PAUSE_VERSION"
  fi
  ln -sfn "$out" "$assets/pause"
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
    kubelet)
      build_one kubelet kube k8s.io/kubernetes/cmd/kubelet "$KUBE_VERSION" "$(stamp_kube)" ;;
    containerd)
      # the daemon, its runc shim and ctr (images import); btrfs needs cgo and headers: left out
      for b in containerd containerd-shim-runc-v2 ctr; do
        go_install "$b" "github.com/containerd/containerd/v2/cmd/$b" "$CONTAINERD_VERSION" 0 no_btrfs \
          "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION"
      done ;;
    runc)
      # cgo for runc's nsenter; the seccomp tag links Debian's libseccomp (libseccomp-dev)
      go_install runc github.com/opencontainers/runc "$RUNC_VERSION" 1 seccomp \
        "-s -w -X main.version=${RUNC_VERSION#v}" ;;
    cni) build_cni ;;
    crictl)
      go_install crictl sigs.k8s.io/cri-tools/cmd/crictl "$CRI_TOOLS_VERSION" 0 "" \
        "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRI_TOOLS_VERSION" ;;
    pause) build_pause ;;
    node)
      "${BASH_SOURCE[0]}" kubelet containerd runc cni crictl pause >/dev/null ;;
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
    *) echo "build.sh: unknown component '$c' (known: kube-apiserver kubectl etcd helm kube-scheduler kube-controller-manager kwok kubelet containerd runc cni crictl pause node registry oras syft cosign)" >&2; exit 2 ;;
  esac
done
echo "$assets"
