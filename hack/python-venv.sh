#!/usr/bin/env bash
# python-venv.sh — prints the path of a virtualenv with clients/python installed in it (editable,
# with its dev extra: pytest, ruff, mypy, redis, psycopg[binary]), creating it when missing.
# hack/test-clients.sh and test/integration/clients/python.test.ts both use it, so a fresh machine
# needs nothing but python3 (>= 3.11, with venv) and PyPI.
#
# The venv is ${FENCEPOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fencepost}/venv-python-<hash>,
# keyed by a hash of clients/python/pyproject.toml, python3's version and this checkout's path: a
# changed pyproject makes a new one (older ones stay: another branch may use them), and each
# checkout (a git worktree) has its own, since the editable install points at one checkout's
# sources and two worktrees testing at once must not repoint each other's. Progress goes to standard error; stdout is the path only.
set -euo pipefail
root=$(cd "${BASH_SOURCE[0]%/*}/.." && pwd)
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1 || ! "$py" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "fencepost: python3 >= 3.11 with the venv module not found: clients/python needs it (Debian: apt-get install python3-venv)" >&2
  exit 1
fi
cache=${FENCEPOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fencepost}
key=$({ cat "$root/clients/python/pyproject.toml"; "$py" -VV; echo "$root"; } | sha256sum | cut -c1-12)
venv="$cache/venv-python-$key"
if [[ ! -f $venv/.complete ]]; then
  mkdir -p "$cache"
  rm -rf "$venv" # an incomplete one
  started=$SECONDS
  echo "fencepost: creating $venv (pip install -e clients/python[dev])" >&2
  "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root/clients/python[dev]" >&2
  touch "$venv/.complete"
  echo "fencepost: venv ready in $((SECONDS - started)) s" >&2
fi
echo "$venv"
