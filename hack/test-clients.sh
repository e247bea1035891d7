#!/usr/bin/env bash
# test-clients.sh — the language clients' own checks and unit tests, from the repository root:
# - clients/go: gofmt, go vet, go test;
# - clients/python: ruff check, ruff format --check, mypy --strict, pytest, in the virtualenv of
#   hack/python-venv.sh (made on first use: pip install -e clients/python[dev]); then the sdist
#   and the wheel (python -m build), each pip-installed into a fresh venv and checked there by
#   tests/installed_check.py.
# - clients/java: mvn verify (javac -Xlint:all -Werror, the JUnit tests, the jar with its sources
#   and javadoc jars), with the Maven repository under ${XDG_CACHE_HOME:-$HOME/.cache}/fencepost/m2
#   (CI caches it); offline when it is warm. Then a modular application (src/it/consumer) is
#   compiled and run against the jar alone, requiring it by its Automatic-Module-Name.
# All run the shared conformance vectors of clients/conformance. The three clients' store tests
# start redis-servers of their own and skip without one, so a redis-server is required here: this
# is the one run of them (test/integration/clients/stores.test.ts runs the cross-language matrix,
# not these again). The guard outcome vectors need real servers and are skipped here, saying so;
# the integration tests test/integration/clients/{go,python,java}.test.ts run them (and the
# real-agent scenario).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# Scratch space for the artifacts and the consumers that install them; removed however this ends.
pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT

if [[ -z ${REDIS_SERVER:-} ]] && ! command -v redis-server >/dev/null 2>&1; then
  echo "fencepost: redis-server not found on PATH (nor REDIS_SERVER): the clients' store tests need one and would skip (hack/prereqs.sh installs it)" >&2
  exit 1
fi
export FENCEPOST_TEST_REQUIRE_REDIS=1 # clients/go: fail rather than skip without one

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
go vet ./... # its stdversion check refuses a standard-library API newer than the go directive
go test -count=1 ./... # with the runnable Example functions, whose output it compares
# The go directive is no newer than it needs: the newest that a dependency declares (the code
# itself is held to the directive by the compiler and go vet).
have=$(go list -m -f '{{.GoVersion}}')
need=$(go list -m -f '{{if not .Main}}{{.GoVersion}}{{end}}' all | sort -V | tail -1)
if [[ $have != "$need" ]]; then
  echo "fencepost: clients/go/go.mod says go $have, its dependencies need go $need: set the go directive to $need" >&2
  exit 1
fi
# Used as a user does, from a module of its own outside the checkout (replace points at this one).
consumer="$pkg/go-consumer"
mkdir "$consumer"
cat >"$consumer/go.mod" <<EOF
module example.com/app

go $have

require github.com/fencepost/fencepost/clients/go v0.1.0

replace github.com/fencepost/fencepost/clients/go => $root/clients/go
EOF
cat >"$consumer/main.go" <<'EOF'
package main

import (
	"fmt"

	"github.com/fencepost/fencepost/clients/go/fencepost"
	"github.com/fencepost/fencepost/clients/go/guard"
)

func main() {
	t, err := fencepost.ParseToken("215")
	ddl, _ := guard.FenceTableSQL(guard.FenceTableSpec{})
	fmt.Println("token", t, err, ddl)
}
EOF
cp go.sum "$consumer/go.sum"
(cd "$consumer" && GOFLAGS=-mod=mod go run . | sed 's|^|clients/go: consumer: |' >&2)

echo "--- clients/python" >&2
venv=$("$root/hack/python-venv.sh")
cd "$root/clients/python"
"$venv/bin/ruff" check .
"$venv/bin/ruff" format --check .
"$venv/bin/mypy" --strict
"$venv/bin/pytest" -q -p no:cacheprovider

echo "--- clients/python: the sdist and the wheel, each installed into a fresh venv" >&2
# python -m build makes the sdist, then the wheel from it (so the sdist is proven to build), with
# the dev venv's hatchling; installing the sdist has pip fetch hatchling into an isolated
# environment, as it does for a user (from pip's cache when warm).
"$venv/bin/python" -m build --no-isolation --outdir "$pkg/dist" . >"$pkg/build.log" 2>&1 || {
  cat "$pkg/build.log" >&2
  exit 1
}
for artifact in "$pkg"/dist/fencepost-*.whl "$pkg"/dist/fencepost-*.tar.gz; do
  fresh="$pkg/venv-${artifact##*.}"
  # Without its own pip (ensurepip is most of a venv's set-up time): the dev venv's pip installs
  # into it (pip --python).
  python3 -m venv --without-pip "$fresh"
  "$venv/bin/pip" --python "$fresh/bin/python" install --quiet --disable-pip-version-check "$artifact"
  # From a folder outside the checkout: only the installed package can be imported.
  (cd "$pkg" && "$fresh/bin/python" "$root/clients/python/tests/installed_check.py" | sed "s|^|clients/python: ${artifact##*/}: |" >&2)
done

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
log="$pkg/mvn.log"
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

echo "--- clients/java: the jar on a modular application's module path" >&2
# The consumer (src/it/consumer) requires the jar by its Automatic-Module-Name, compiled and run
# against the built jar alone; the jar must also carry the LICENSE and sources beside it.
jar=$(ls target/fencepost-client-*.jar | grep -v -- '-sources\|-javadoc')
for part in sources javadoc; do
  [[ -f ${jar%.jar}-$part.jar ]] || { echo "fencepost: ${jar%.jar}-$part.jar missing (Maven Central requires it)" >&2; exit 1; }
done
unzip -l "$jar" META-INF/LICENSE >/dev/null || { echo "fencepost: $jar has no META-INF/LICENSE" >&2; exit 1; }
javac -Xlint:all,-requires-automatic -Werror --module-path "$jar" -d "$pkg/consumer" $(find src/it/consumer -name '*.java')
java --module-path "$jar:$pkg/consumer" -m consumer/consumer.Main | sed 's|^|clients/java: consumer: |' >&2
