#!/usr/bin/env bash
# test-clients.sh — the language clients' own checks and unit tests, from the repository root:
# clients/go: gofmt, go vet, go test (with the shared conformance vectors of clients/conformance).
# The guard outcome vectors need real servers and are skipped here, saying so; the integration
# test test/integration/clients/go.test.ts runs them (and the real-agent scenario).
set -euo pipefail
cd "$(dirname "$0")/../clients/go"
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
