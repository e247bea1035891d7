#!/usr/bin/env bash
# bootstrap-node.sh — prints the folder of a Node.js >= 22.19 binary (fencepost targets Node 24 LTS),
# installing Node 24 from the npm registry (the `node` package ships the binary) into the user
# cache when the machine's own node is older. @kubernetes/client-node 2.x crashes at import on
# Node 20, so the machine's default is not good enough there.
#
# Environment:
#   FENCEPOST_CACHE   cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/fencepost)
#   FENCEPOST_NODE    force a specific node binary (skips detection and installation)
set -euo pipefail

NODE_VERSION=24.21.0   # the pinned Node 24 LTS release installed when the machine's node is too old
cache=${FENCEPOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fencepost}

# new_enough BIN: true when BIN runs and reports >= 22.19.
new_enough() {
  local v; v=$("$1" -p 'process.versions.node' 2>/dev/null) || return 1
  local major=${v%%.*} rest=${v#*.}; local minor=${rest%%.*}
  (( major > 22 || (major == 22 && minor >= 19) ))
}

if [[ -n ${FENCEPOST_NODE:-} ]]; then dirname "$FENCEPOST_NODE"; exit 0; fi
if sys=$(command -v node) && new_enough "$sys"; then dirname "$sys"; exit 0; fi

dir="$cache/node-v$NODE_VERSION"
bin="$dir/node_modules/node/bin"
if ! new_enough "$bin/node"; then
  # Any npm can fetch Node 24; without one, Debian's npm (with its Node 18) is the way in.
  if ! command -v npm >/dev/null; then
    if [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
      echo "[bootstrap] installing Debian's npm to fetch Node $NODE_VERSION with (first run only)" >&2
      apt-get update -qq >&2 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null || true
      hash -r
    fi
    if ! command -v npm >/dev/null; then
      echo "fencepost: missing Node.js >= 22.19 (or any npm to fetch Node $NODE_VERSION with); install with: $( [[ $EUID -eq 0 ]] || printf 'sudo ')apt-get install --no-install-recommends npm, or Node 24 from https://nodejs.org on PATH" >&2
      exit 1
    fi
  fi
  echo "[bootstrap] installing Node $NODE_VERSION from the npm registry into $dir" >&2
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  # The `node` package's preinstall step pulls in the platform package that carries the binary.
  npm install --no-audit --no-fund --loglevel=error --prefix "$dir.tmp" "node@$NODE_VERSION" >&2
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  new_enough "$bin/node" || { echo "[bootstrap] $bin/node does not run as Node >= 22.19" >&2; exit 1; }
fi
# npm and npx come from the same folder so that `npm run` scripts get Node 24 too.
if [[ ! -e $bin/npm ]]; then
  npm_cli=$(dirname "$(readlink -f "$(command -v npm)")")/npm-cli.js
  printf '#!/bin/sh\nexec "%s/node" "%s" "$@"\n' "$bin" "$npm_cli" > "$bin/npm"
  printf '#!/bin/sh\nexec "%s/node" "%s" "$@"\n' "$bin" "${npm_cli%npm-cli.js}npx-cli.js" > "$bin/npx"
  chmod +x "$bin/npm" "$bin/npx"
fi
echo "$bin"
