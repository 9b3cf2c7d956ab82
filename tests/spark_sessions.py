"""Spark sessions for the data-source tests: a classic local session, and a Spark Connect
session on a local Connect server (``executor_lib.spark.connect_server``, a separate JVM with its own
Python workers, as on a cluster).

Both live in the test process: the Connect session is a pure gRPC client
(``pyspark.sql.connect.session.SparkSession``), so it does not clash with the classic one.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from harness.local_spark import get_or_create_retrying

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# The default split cache: one per test process (each pytest-xdist worker has its own), so one worker's
# FLUSH INDEXTABLES DISK CACHE or cache counts never meet another worker's splits. Workers inherit the
# controlling process's environment, so a worker does not keep the directory it finds there.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER or "INDEXTABLES_CACHE_DIR" not in os.environ:
    os.environ["INDEXTABLES_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"indextables-test-split-cache-{_WORKER or 'main'}-")

SESSION_KINDS = ["classic", "connect"]

_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.session.timeZone": "UTC",
}


@pytest.fixture(scope="session")
def classic_spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    import connect_plugin

    builder = SparkSession.builder.master("local[2]")
    for key, value in _CONF.items():
        builder = builder.config(key, value)
    spark = get_or_create_retrying(builder)
    connect_plugin.install(spark)
    yield spark
    spark.stop()


@pytest.fixture(scope="session")
def connect_spark() -> Iterator[Any]:
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    import connect_plugin
    from executor_lib.spark.connect_server import ConnectServer

    conf = {k: v for k, v in _CONF.items() if k != "spark.driver.memory"}
    with ConnectServer("local[2]", conf={**conf, "spark.driver.memory": "1g"}) as server:
        spark = RemoteSparkSession.builder.remote(server.url).getOrCreate()
        connect_plugin.install(spark)
        yield spark
        spark.stop()


@pytest.fixture(params=SESSION_KINDS)
def spark(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(f"{request.param}_spark")
