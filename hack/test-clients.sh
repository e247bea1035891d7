#!/usr/bin/env bash
# test-clients.sh — the language clients' own checks and unit tests, from the repository root:
# - clients/go: gofmt, go vet, go test;
# - clients/python: ruff check, ruff format --check, mypy --strict, pytest, in the virtualenv of
#   hack/python-venv.sh (made on first use: pip install -e clients/python[dev]).
# - clients/java: mvn verify (javac -Xlint:all -Werror, the JUnit tests), with the Maven repository
#   under ${XDG_CACHE_HOME:-$HOME/.cache}/fencepost/m2 (CI caches it); offline when it is warm.
# All run the shared conformance vectors of clients/conformance. The guard outcome vectors need
# real servers and are skipped here, saying so; the integration tests
# test/integration/clients/{go,python,java}.test.ts run them (and the real-agent scenario).
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

echo "--- clients/java" >&2
cd "$root/clients/java"
for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "fencepost: $tool not found on PATH: clients/java needs a JDK >= 17 and Maven >= 3.8 (Debian: apt-get install default-jdk-headless maven)" >&2
    exit 1
  fi
done
m2="${XDG_CACHE_HOME:-$HOME/.cache}/fencepost/m2"
# Offline first (no network once the repository is warm); only a missing artifact sends it online.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! mvn -B -q -o -Dmaven.repo.local="$m2" verify >"$log" 2>&1; then
  if grep -q 'in offline mode' "$log"; then
    mvn -B -q -Dmaven.repo.local="$m2" verify
  else
    cat "$log" >&2
    exit 1
  fi
fi
# mvn -q prints nothing on success: say what ran, and what was skipped and why.
awk '/^Tests run:/ { gsub(",", ""); run += $3; failed += $5 + $7; skipped += $9 }
  END { printf "clients/java: %d tests passed, %d skipped\n", run - failed - skipped, skipped }' \
  target/surefire-reports/*.txt >&2
grep -ho 'skipped message="[^"]*"' target/surefire-reports/*.xml | sed 's/.*==&gt; //; s/"$//; s/^/clients\/java: skipped: /' >&2 || true
