#!/usr/bin/env bash
# test-clients.sh — the language clients' own checks and unit tests, from the repository root:
# - clients/go: gofmt, go vet, go test;
# - clients/python: ruff check, ruff format --check, mypy --strict, pytest, in the virtualenv of
#   hack/python-venv.sh (made on first use: pip install -e clients/python[dev]).
# Both run the shared conformance vectors of clients/conformance. The guard outcome vectors need
# real servers and are skipped here, saying so; the integration tests
# test/integration/clients/{go,python}.test.ts run them (and the real-agent scenario).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

echo "--- clients/go" >&2
cd "$root/clients/go"
if ! command -v go >/dev/null 2>&1; then
  echo "fencepost: go not found on PATH: clients/go needs Go >= 1.26 (https://go.dev/dl/)" >&2
  exit 1
fi
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "fencepost: gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...
go test -count=1 ./...

echo "--- clients/python" >&2
venv=$("$root/hack/python-venv.sh")
cd "$root/clients/python"
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/mypy" --strict
"$venv/bin/pytest" -q -p no:cacheprovider
