#!/usr/bin/env bash
# check-loaders.sh — loads the archive hack/build-image.sh wrote into the three loaders users
# have: podman, docker (dockerd) and containerd (`ctr images import`, the way
# `kind load image-archive` calls it), checks the name and digest each shows, and runs
# `IMAGE version` in podman and docker. Not part of CI (it needs three more container engines);
# run it after changing how the archive is written (hack/image/oci-layout.ts).
#
# Usage: hack/image/check-loaders.sh [ARCHIVE] [EXPECTED_MANIFEST_DIGEST_FILE]
#   defaults: dist/image/fencepost-<version>.oci.tar (+ .digest)
# Env:  WORK=/tmp/loaders   throwaway state dir (removed at the end unless KEEP=1)
#       RUN=1               also `podman run` / `docker run` IMAGE version
#       IMAGE=fencepost:0.1.0  EXPECT_RUN="fencepost 0.1.0"
# Needs (Debian 12): apt-get install -y --no-install-recommends podman docker.io containerd runc conmon
# Never touches /var/lib/docker, /run/containerd or system services: podman,
# containerd and dockerd run in a private mount namespace (see `iso`) where
# /run is a fresh tmpfs and /var/lib/containers, /etc/docker are bind-mounted
# from $WORK, because even with --root/--data-root they write there:
# podman 4.3 -> /var/lib/containers/cache/blob-info-cache-v1.boltdb, /run/runc, /run/crun;
# dockerd 20.10 -> /etc/docker/key.json, /run/docker/plugins;
# containerd 1.6 shims -> /run/containerd/s/.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
VERSION=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' package.json | head -1)
SRC=${1:-dist/image/fencepost-$VERSION.oci.tar}
SRC_DIGEST=${2:-$SRC.digest}
WORK=${WORK:-/tmp/loaders}
IMAGE=${IMAGE:-fencepost:$VERSION}
EXPECT_RUN=${EXPECT_RUN:-fencepost $VERSION}
RUN=${RUN:-1}
KEEP=${KEEP:-0}

[ "$(id -u)" = 0 ] || { echo "must run as root" >&2; exit 2; }
for b in podman dockerd ctr containerd runc unshare; do
  command -v "$b" >/dev/null || { echo "missing $b" >&2; exit 2; }
done
DOCKER_CLI=/usr/bin/docker   # Debian's docker.io client (a different one may sit in /usr/local/bin)

mkdir -p "$WORK"/{podman,containerd,docker,iso/varlib-containers,iso/etc-docker}
# run "$*" (a shell command string) in a private mount namespace. It execs, so
# always call it in a subshell: (iso ...) or (iso ...) & -- then $! is the daemon's PID
iso() { exec unshare --mount --propagation private sh -c "mount -t tmpfs tmpfs /run && mount --bind $WORK/iso/varlib-containers /var/lib/containers && mount --bind $WORK/iso/etc-docker /etc/docker && exec $*"; }
ARCHIVE=$WORK/image.oci.tar
cp "$SRC" "$ARCHIVE" || exit 2
EXPECTED=$(cat "$SRC_DIGEST" 2>/dev/null | tr -d '[:space:]')
CONFIG=$(tar -xOf "$ARCHIVE" ./manifest.json 2>/dev/null || tar -xOf "$ARCHIVE" manifest.json)
CONFIG=$(printf '%s' "$CONFIG" | sed -n 's/.*"Config":"blobs\/sha256\/\([0-9a-f]*\)".*/sha256:\1/p')
echo "archive: $ARCHIVE  manifest digest (expected): ${EXPECTED:-?}  config digest: ${CONFIG:-?}"

CTRD_PID= ; DOCKERD_PID=
cleanup() {
  [ -n "$DOCKERD_PID" ] && kill "$DOCKERD_PID" 2>/dev/null && for _ in $(seq 30); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 1; done
  [ -n "$CTRD_PID" ] && kill "$CTRD_PID" 2>/dev/null && for _ in $(seq 30); do kill -0 "$CTRD_PID" 2>/dev/null || break; sleep 1; done
  if [ "$KEEP" != 1 ]; then
    # vfs/native leave read-only dirs sometimes; make writable then remove
    chmod -R u+w "$WORK" 2>/dev/null; rm -rf "$WORK"
  fi
}
trap cleanup EXIT

declare -a ROWS
row() { ROWS+=("$1"); }
waitsock() { for _ in $(seq 60); do [ -S "$1" ] && return 0; sleep 0.5; done; return 1; }

# ---------------------------------------------------------------- podman
PODMAN="podman --root $WORK/podman/root --runroot $WORK/podman/run --tmpdir $WORK/podman/tmp --storage-driver vfs --events-backend none --cgroup-manager cgroupfs --runtime runc"
pns() { (iso "$PODMAN $*"); }
echo; echo "== podman: $PODMAN load -i $ARCHIVE"
pns load -i "$ARCHIVE"; rc=$?
pns images --digests --no-trunc
pinfo=$(pns image inspect "$IMAGE" --format "'{{.Id}} {{.Digest}} {{join .RepoTags \",\"}}'" 2>/dev/null)
read -r pid pdig pname <<<"$pinfo"
ok=no; [ "$rc" = 0 ] && [ "sha256:$pid" = "$CONFIG" ] && [ "$pdig" = "$EXPECTED" ] && ok=yes
row "podman load -i | $rc | ${pname:-?} | id sha256:${pid:-?} digest ${pdig:-?} | $ok"
if [ "$RUN" = 1 ] && [ "$rc" = 0 ]; then
  # crun 1.8 refuses this host's hybrid cgroup v1 layout; runc works. Raising
  # rlimits is not allowed here (no CAP_SYS_RESOURCE), so ask for low ones.
  out=$(pns run --rm --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 "$IMAGE" version 2>&1); rrc=$?
  echo "podman run -> rc=$rrc: $out"
  row "podman run --rm --network none $IMAGE version | $rrc | output: $out | | $([ "$out" = "$EXPECT_RUN" ] && echo yes || echo no)"
fi

# ---------------------------------------------------------------- containerd
CD=$WORK/containerd
cat > "$CD/config.toml" <<EOF
version = 2
root = "$CD/root"
state = "$CD/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$CD/containerd.sock"
[ttrpc]
  address = "$CD/containerd.sock.ttrpc"
[debug]
  address = "$CD/debug.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CD/opt"
EOF
(iso containerd --config "$CD/config.toml") >"$CD/containerd.log" 2>&1 &
CTRD_PID=$!
waitsock "$CD/containerd.sock" || { echo "containerd did not start"; tail "$CD/containerd.log"; exit 1; }
CTR="ctr --address $CD/containerd.sock"
# same argv as sigs.k8s.io/kind pkg/cluster/nodeutils.LoadImageArchive (snapshotter: native here)
echo; echo "== containerd: $CTR --namespace=k8s.io images import --all-platforms --digests --snapshotter=native - < $ARCHIVE"
$CTR --namespace=k8s.io images import --all-platforms --digests --snapshotter=native - < "$ARCHIVE"; rc=$?
$CTR -n k8s.io images ls
cname=$($CTR -n k8s.io images ls -q | grep -v '@' | paste -sd, -)
cdig=$($CTR -n k8s.io images ls | awk -v n="docker.io/library/$IMAGE" '$1==n{print $3}')
ok=no; [ "$rc" = 0 ] && [ "$cname" = "docker.io/library/$IMAGE" ] && [ "$cdig" = "$EXPECTED" ] && ok=yes
row "ctr -n k8s.io images import --all-platforms --digests --snapshotter=native - | $rc | ${cname:-?} | digest ${cdig:-?} | $ok"

# ---------------------------------------------------------------- dockerd
DK=$WORK/docker
echo '{}' > "$DK/daemon.json"
(iso dockerd --config-file "$DK/daemon.json" --data-root "$DK/data" --exec-root "$DK/exec" --pidfile "$DK/pid" \
  -H "unix://$DK/docker.sock" --storage-driver vfs --iptables=false --ip6tables=false --bridge=none \
  --containerd "$CD/containerd.sock") >"$DK/dockerd.log" 2>&1 &
DOCKERD_PID=$!
waitsock "$DK/docker.sock" || { echo "dockerd did not start"; tail "$DK/dockerd.log"; exit 1; }
DOCKER="$DOCKER_CLI -H unix://$DK/docker.sock"
for _ in $(seq 30); do $DOCKER version >/dev/null 2>&1 && break; sleep 1; done
echo; echo "== docker ($($DOCKER version --format '{{.Server.Version}}')): $DOCKER load -i $ARCHIVE"
$DOCKER load -i "$ARCHIVE"; rc=$?
$DOCKER images --digests --no-trunc
dinfo=$($DOCKER image inspect "$IMAGE" --format '{{.Id}} {{range $i, $t := .RepoTags}}{{if $i}},{{end}}{{$t}}{{end}} {{range $i, $t := .RepoDigests}}{{if $i}},{{end}}{{$t}}{{end}}')
read -r did dname drd <<<"$dinfo"
ok=no; [ "$rc" = 0 ] && [ "$did" = "$CONFIG" ] && [ "$dname" = "$IMAGE" ] && ok=yes
row "docker load -i | $rc | ${dname:-?} | id ${did:-?} repodigests [${drd:-}] | $ok"
if [ "$RUN" = 1 ] && [ "$rc" = 0 ]; then
  out=$(timeout 300 $DOCKER run --rm --network none "$IMAGE" version 2>&1); rrc=$?
  echo "docker run -> rc=$rrc: $out"
  row "docker run --rm --network none $IMAGE version | $rrc | output: $out | | $([ "$out" = "$EXPECT_RUN" ] && echo yes || echo no)"
fi

echo; echo "loader | exit | resulting name | id/digest | ok?"
fail=0
for r in "${ROWS[@]}"; do echo "$r"; case "$r" in *"| no") fail=1;; esac; done
echo "versions: $(podman --version) | $($DOCKER_CLI --version) / dockerd $(dockerd --version | awk '{print $3}' | tr -d ,) | $(containerd --version | awk '{print $3}') | $(runc --version | head -1)"
exit $fail
