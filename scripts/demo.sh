#!/usr/bin/env bash
# Set up a virtualenv and run the main job on the embedded default (local filesystem table).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[s3]'
exec .venv/bin/indextables demo "$@"
