# Sourced by the scripts here: create .venv (with $PYTHON, default python3) and install the
# project into it with the extras given as "$1" (e.g. "s3" or "test,dev").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet --config-settings editable_mode=compat -e ".[$1]"
