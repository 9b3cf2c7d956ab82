#!/usr/bin/env bash
# Installs versitygw (an S3 server over a directory tree, Go, Apache-2.0), the second S3 backend of the
# tests beside moto: `go install github.com/versity/versitygw/cmd/versitygw@<harness.versitygw.VERSION>`
# through the Go module proxy into $INDEXTABLES_VERSITYGW_DIR/<version>/bin (default
# ~/.cache/indextables/versitygw), once (a few minutes with an empty Go module cache; later runs return at
# once), and prints the binary's path. The test suite starts it on 127.0.0.1 itself (tests/conftest.py,
# versitygw_server) and stops it by its pid.
# Exit status: 0 installed; 3 Go is not on the PATH (the versitygw tests then skip with one line, and
# fail in CI); anything else: the install failed (go's error is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
if ! command -v go >/dev/null; then
    echo "versitygw not installed (needs Go on the PATH): the versitygw tests will skip" >&2
    exit 3
fi
exec "$PY" -m harness.versitygw --install
