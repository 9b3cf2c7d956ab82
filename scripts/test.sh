#!/usr/bin/env bash
# Set up a virtualenv with the test dependencies and run the whole test suite
# (slow soak tests excluded; run them with: .venv/bin/python -m pytest -m slow).
source "$(dirname "$0")/_venv.sh" "test,dev"
.venv/bin/ruff check .
.venv/bin/mypy
# --dist loadgroup: the classic and the Spark Connect session tests each stay on one worker
# (PySpark cannot hold both kinds of session in one process).
exec .venv/bin/python -m pytest -n 2 --dist loadgroup -m "not slow" "$@"
