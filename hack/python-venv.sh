#!/usr/bin/env bash
# python-venv.sh — prints the path of a virtualenv with clients/python installed in it (editable,
# with its dev extra: pytest, ruff, mypy, redis, psycopg[binary]), creating it when missing.
# hack/test-clients.sh and test/integration/clients/python.test.ts both use it, so a fresh machine
# needs nothing but python3 (>= 3.11, with venv) and PyPI.
#
# The venv is ${FENCEPOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fencepost}/venv-python-<hash>,
# keyed by a hash of clients/python/pyproject.toml and python3's version: a changed pyproject makes
# a new one (older ones stay: another branch may use them). Progress goes to standard error; stdout is the path only.
set -euo pipefail
root=$(cd "${BASH_SOURCE[0]%/*}/.." && pwd)
py=${PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1 || ! "$py" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "fencepost: python3 >= 3.11 with the venv module not found: clients/python needs it (Debian: apt-get install python3-venv)" >&2
  exit 1
fi
cache=${FENCEPOST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fencepost}
key=$({ cat "$root/clients/python/pyproject.toml"; "$py" -VV; } | sha256sum | cut -c1-12)
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
elif ! "$venv/bin/python" -c 'import fencepost, sys; sys.exit(not fencepost.__file__.startswith(sys.argv[1]))' "$root/clients/python/src" 2>/dev/null; then
  # The same pyproject, another checkout (a worktree): point the editable install here.
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -e "$root/clients/python" >&2
fi
echo "$venv"
