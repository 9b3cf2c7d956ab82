# Sourced by the scripts here: create .venv (with $PYTHON, default python3) and install the
# project into it (editable) with the extras given as "$1" (e.g. "s3" or "test,dev"), after its
# native engine (native/: Rust, built by cargo through maturin; about 6 minutes the first time on
# 2 cores, again only when its sources change).
# The install is skipped when .venv already has these extras installed from this checkout's
# current pyproject.toml (a stamp in .venv), so a rerun prints nothing and needs no network.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
command -v cargo >/dev/null || {
    echo "IndexTables builds its native engine with Rust's cargo, which is not on PATH: install it (apt install cargo, or https://rustup.rs) and run this again" >&2
    exit 1
}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
_native_stamp_file=.venv/indextables-native-installed
_native_stamp="$(cat native/Cargo.toml native/Cargo.lock native/pyproject.toml native/src/*.rs | sha256sum | cut -d' ' -f1) $(pwd)"
if ! grep -qxF "$_native_stamp" "$_native_stamp_file" 2>/dev/null; then
    echo "building IndexTables' native engine (native/, cargo; about 6 minutes the first time)..."
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet ./native
    echo "$_native_stamp" > "$_native_stamp_file"
fi
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
unset _stamp _stamp_file _native_stamp _native_stamp_file
