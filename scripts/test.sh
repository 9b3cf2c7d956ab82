#!/usr/bin/env bash
# Set up a virtualenv with the test dependencies and run the whole test suite
# (slow soak tests excluded; run them with: .venv/bin/python -m pytest -m slow; the tests that
# need a Docker engine are run by scripts/test-docker.sh, which CI runs after this; the jvm tests, beside
# IndexTables4Spark itself, run last in a pytest of their own).
set -euo pipefail
cd "$(dirname "$0")/.."
# The test servers and the JVM peer are installed in the background while the native engine builds
# (they mostly wait on the network and on Maven's JVM, the build on the CPU); each one's output goes to
# a log printed when it fails, and the tests start once all are done. Each is installed once into
# ~/.cache/indextables and returns at once afterwards:
# - Azurite (Azure Blob Storage API server, npm) for the Azure tests; without Node.js/npm they skip (and
#   fail in CI);
# - fake-gcs-server (Google Cloud Storage API server, Go; scripts/fake-gcs-server.sh) for the GCS tests
#   and versitygw (a real S3 server, posix backend, Go; scripts/versitygw.sh), the second S3 backend
#   beside moto; their exit 3 means no Go: their tests skip (and fail in CI);
# - the JVM peer for the jvm tests (tests/jvm): IndexTables4Spark's jars and a PySpark 3.5 venv
#   (scripts/jvm-peer.sh); its exit 3 means Maven Central does not serve the jars: it prints the command
#   and the error, and the jvm tests skip saying so.
_logs="$(mktemp -d)"
trap wait EXIT  # a step below that fails leaves no install running on behind it
_side() {  # name, then the command: run in the background, its output and exit status in $_logs
    local name="$1"
    shift
    (
        set +e
        "$@" >"$_logs/$name.log" 2>&1
        echo $? >"$_logs/$name.rc"
    ) &
}
_side azurite env PYTHON=python3 python3 -m harness.azurite --install
_side fake-gcs-server env PYTHON=python3 bash scripts/fake-gcs-server.sh
_side versitygw env PYTHON=python3 bash scripts/versitygw.sh
_side jvm-peer env PYTHON=python3 bash scripts/jvm-peer.sh
source scripts/_venv.sh "test,dev"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
wait
_failed=0
for _name in azurite fake-gcs-server versitygw jvm-peer; do
    _rc="$(cat "$_logs/$_name.rc")"
    [ "$_name" != jvm-peer ] || cat "$_logs/$_name.log" >&2
    case "$_name:$_rc" in
        *:0 | fake-gcs-server:3 | versitygw:3 | jvm-peer:3) ;;
        azurite:*) echo "Azurite not installed (needs Node.js and npm): the Azure tests will skip" >&2 ;;
        *)
            [ "$_name" = jvm-peer ] || cat "$_logs/$_name.log" >&2
            echo "installing $_name failed (exit $_rc)" >&2
            _failed=1
            ;;
    esac
    [ "$_rc" != 3 ] || [ "$_name" = jvm-peer ] || cat "$_logs/$_name.log" >&2
done
[ "$_failed" = 0 ] || exit 1
rm -rf "$_logs"
if [ $# -gt 0 ]; then
    exec .venv/bin/python -m pytest -n 2 --dist loadgroup -m "not slow and not docker" "$@"
fi
.venv/bin/python -m pytest -n 2 --dist loadgroup --durations=60 -m "not slow and not docker and not jvm"
# the jvm tests in one process: one JVM peer per release for the whole run
exec .venv/bin/python -m pytest -n 0 -m jvm tests/jvm
