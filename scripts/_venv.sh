# Sourced by the scripts here: create .venv (with $PYTHON, default python3) and install the
# project into it (editable) with the extras given as "$1" (e.g. "s3" or "test,dev").
# The install is skipped when .venv already has these extras installed from this checkout's
# current pyproject.toml (a stamp in .venv), so a rerun prints nothing and needs no network.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
_stamp_file=.venv/indextables-installed
_stamp="$1 $(.venv/bin/python -c 'import hashlib, os
print(os.getcwd(), hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest())')"
if ! grep -qxF "$_stamp" "$_stamp_file" 2>/dev/null; then
    echo "installing IndexTables into .venv (about 2 minutes the first time)..."
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[$1]"
    { [ ! -f "$_stamp_file" ] || awk -v extras="$1" '$1 != extras' "$_stamp_file"; echo "$_stamp"; } > "$_stamp_file.new"
    mv "$_stamp_file.new" "$_stamp_file"
fi
unset _stamp _stamp_file
