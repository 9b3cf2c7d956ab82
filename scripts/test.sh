#!/usr/bin/env bash
# Set up a virtualenv with the test dependencies and run the whole test suite
# (slow soak tests excluded; run them with: .venv/bin/python -m pytest -m slow; the tests that
# need a Docker engine are run by scripts/test-docker.sh, which CI runs after this).
source "$(dirname "$0")/_venv.sh" "test,dev"
# Azurite (Azure Blob Storage API server, npm) for the Azure tests, installed once into
# ~/.cache/indextables/azurite; without Node.js/npm the Azure tests skip (and fail in CI).
.venv/bin/python -m harness.azurite --install >/dev/null ||
    echo "Azurite not installed (needs Node.js and npm): the Azure tests will skip" >&2
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
exec .venv/bin/python -m pytest -n 2 -m "not slow and not docker" "$@"
