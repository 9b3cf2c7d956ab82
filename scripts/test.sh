#!/usr/bin/env bash
# Set up a virtualenv with the test dependencies and run the whole test suite
# (slow soak tests excluded; run them with: .venv/bin/python -m pytest -m slow; the tests that
# need a Docker engine are run by scripts/test-docker.sh, which CI runs after this; the jvm tests, beside
# IndexTables4Spark itself, run last in a pytest of their own).
source "$(dirname "$0")/_venv.sh" "test,dev"
# Azurite (Azure Blob Storage API server, npm) for the Azure tests, installed once into
# ~/.cache/indextables/azurite; without Node.js/npm the Azure tests skip (and fail in CI).
.venv/bin/python -m harness.azurite --install >/dev/null ||
    echo "Azurite not installed (needs Node.js and npm): the Azure tests will skip" >&2
# fake-gcs-server (Google Cloud Storage API server, Go) for the GCS tests, built once with go install into
# ~/.cache/indextables/fake-gcs-server (scripts/fake-gcs-server.sh); its exit 3 means no Go: the GCS tests
# skip (and fail in CI).
_rc=0
bash scripts/fake-gcs-server.sh >/dev/null || _rc=$?
[ "$_rc" = 0 ] || [ "$_rc" = 3 ] || { echo "scripts/fake-gcs-server.sh failed (exit $_rc)" >&2; exit "$_rc"; }
# versitygw (a real S3 server, posix backend, Go), the second S3 backend beside moto, built once with go
# install into ~/.cache/indextables/versitygw (scripts/versitygw.sh); exit 3 means no Go: its tests skip
# (and fail in CI).
_rc=0
bash scripts/versitygw.sh >/dev/null || _rc=$?
[ "$_rc" = 0 ] || [ "$_rc" = 3 ] || { echo "scripts/versitygw.sh failed (exit $_rc)" >&2; exit "$_rc"; }
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# The JVM peer for the jvm tests (tests/jvm): IndexTables4Spark's jars and a PySpark 3.5 venv in
# ~/.cache/indextables/jvm, installed once (scripts/jvm-peer.sh). Its exit 3 means Maven Central does not
# serve the jars: it prints the command and the error, and the jvm tests skip saying so.
_rc=0
bash scripts/jvm-peer.sh || _rc=$?
[ "$_rc" = 0 ] || [ "$_rc" = 3 ] || { echo "scripts/jvm-peer.sh failed (exit $_rc)" >&2; exit "$_rc"; }
if [ $# -gt 0 ]; then
    exec .venv/bin/python -m pytest -n 2 --dist loadgroup -m "not slow and not docker" "$@"
fi
.venv/bin/python -m pytest -n 2 --dist loadgroup --durations=25 -m "not slow and not docker and not jvm"
# the jvm tests in one process: one JVM peer per release for the whole run
exec .venv/bin/python -m pytest -n 0 -m jvm tests/jvm
