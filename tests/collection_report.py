"""A pytest plugin for ``tests/test_collection.py``: after collection, writes every collected
test's file and marker names as JSON lines to the file named by ``INDEXTABLES_COLLECTION_REPORT``."""

from __future__ import annotations

import json
import os

import pytest

REPORT_ENV = "INDEXTABLES_COLLECTION_REPORT"


def pytest_collection_finish(session: pytest.Session) -> None:
    target = os.environ.get(REPORT_ENV)
    if not target:
        return
    with open(target, "w", encoding="utf-8") as out:
        for item in session.items:
            path = item.path.relative_to(session.config.rootpath).as_posix()
            markers = sorted({mark.name for mark in item.iter_markers()})
            out.write(json.dumps({"file": path, "markers": markers}) + "\n")
