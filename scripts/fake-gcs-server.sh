#!/usr/bin/env bash
# Installs fake-gcs-server (a Google Cloud Storage API server, Go, Apache-2.0) for the GCS tests:
# `go install github.com/fsouza/fake-gcs-server@<harness.fake_gcs.VERSION>` through the Go module proxy
# into $INDEXTABLES_FAKE_GCS_DIR/<version>/bin (default ~/.cache/indextables/fake-gcs-server), once
# (about 1.5 minutes with an empty Go module cache; later runs return at once). The test suite starts
# it on 127.0.0.1 itself (tests/conftest.py, gcs_server) and stops it by its pid.
# Exit status: 0 installed; 3 Go is not on the PATH (the GCS tests then skip with one line, and fail in
# CI); anything else: the install failed (go's error is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if ! command -v go >/dev/null; then
    echo "fake-gcs-server not installed (needs Go on the PATH): the GCS tests will skip" >&2
    exit 3
fi
exec "$PY" -m harness.fake_gcs --install
