"""Spark sessions for the data-source tests: a classic local session and a local Spark Connect
session (``remote("local[2]")``).

The two cannot live in one Python process (PySpark refuses a Connect session beside a classic
one), so each test is put in an xdist group by session kind and the suite runs with
``--dist loadgroup``: one worker holds the classic session, another the Connect session.
Without xdist, the kind that was not started first is skipped with that reason.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("INDEXTABLES_CACHE_DIR", tempfile.mkdtemp(prefix="indextables-test-split-cache-"))

SESSION_KINDS = [
    pytest.param("classic", marks=pytest.mark.xdist_group("spark-classic")),
    pytest.param("connect", marks=pytest.mark.xdist_group("spark-connect")),
]

_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
}

_sessions: dict[str, Any] = {}


def _start(kind: str) -> Any:
    from pyspark.sql import SparkSession

    import connect_plugin

    builder = SparkSession.builder.master("local[2]") if kind == "classic" else SparkSession.builder.remote("local[2]")
    for key, value in _CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    connect_plugin.install(spark)
    return spark


@pytest.fixture(scope="session", params=SESSION_KINDS)
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    kind = request.param
    other = next((k for k in _sessions if k != kind), None)
    if other is not None:
        pytest.skip(f"a {other} Spark session runs in this process; run with -n 2 --dist loadgroup")
    if kind not in _sessions:
        _sessions[kind] = _start(kind)
    yield _sessions[kind]
