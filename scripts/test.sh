#!/usr/bin/env bash
# Set up a virtualenv with the test dependencies and run the whole test suite
# (slow soak tests excluded; run them with: .venv/bin/python -m pytest -m slow; the tests that
# need a Docker engine are run by scripts/test-docker.sh, which CI runs after this).
source "$(dirname "$0")/_venv.sh" "test,dev"
.venv/bin/ruff check .
.venv/bin/mypy
exec .venv/bin/python -m pytest -n 2 -m "not slow and not docker" "$@"
