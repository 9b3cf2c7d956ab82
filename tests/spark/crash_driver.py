"""The Spark side of ``tests/spark/test_commit_crashes.py``: run as ``python -m tests.spark.crash_driver
<work dir>`` with ``INDEXTABLES_FAILPOINTS_FILE`` set (before its Spark session starts, so the JVM and its
Python workers inherit it). Each scenario arms one failpoint, runs one job whose commit worker dies
there, then reads the table back; one JSON line per scenario on stdout."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import connect_plugin
import executor_lib
from connect_plugin.sql import sql
from executor_lib import failpoints
from harness.local_spark import get_or_create_retrying

SCHEMA = "id long, msg string"
ARMED = os.environ[failpoints.FILE_ENV]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def rows(spark: Any, start: int, n: int, splits: int = 2) -> Any:
    data = [(i, f"event {i} {'kraken' if i % 7 == 0 else 'plain'}") for i in range(start, start + n)]
    return spark.createDataFrame(data, SCHEMA).repartition(splits)


def ids(spark: Any, table: str) -> list[int]:
    return sorted(r["id"] for r in connect_plugin.read(spark, table, columns=["id"]).collect())


def live_missing(table: str) -> list[str]:
    """Live files of the table's latest version that are not on disk (a committed split deleted)."""
    snap = executor_lib.open_log(table).snapshot()
    return sorted(a.path for a in snap.files if not (Path(table) / a.path).exists())


def killed(job: Any) -> str | None:
    """Run ``job`` with its commit worker dying at the armed failpoint; the error it failed with (None:
    it did not fail)."""
    try:
        job()
    except Exception as e:  # the job's failure as Spark reports it (a Py4J or streaming error)
        return type(e).__name__
    return None


def append(spark: Any, table: str, start: int, n: int, mode: str = "append") -> None:
    connect_plugin.write(rows(spark, start, n), table, mode=mode)  # type: ignore[arg-type]


def scenario_write(spark: Any, work: Path, failpoint: str, mode: str) -> dict[str, Any]:
    table = str(work / f"{mode}-{failpoint}")
    append(spark, table, 0, 100)
    failpoints.arm(ARMED, failpoint)
    error = killed(lambda: append(spark, table, 1000, 100, mode=mode))
    result = {"error": error, "still_armed": failpoints.armed(ARMED), "missing": live_missing(table)}
    result["ids"] = ids(spark, table)
    append(spark, table, 5000, 10)  # the table takes writes after the crash
    result["ids_after_next_write"] = ids(spark, table)
    return result


def scenario_merge(spark: Any, work: Path, failpoint: str) -> dict[str, Any]:
    table = str(work / f"merge-{failpoint}")
    for k in range(3):
        append(spark, table, k * 100, 100)
    before = ids(spark, table)
    failpoints.arm(ARMED, failpoint)
    error = killed(lambda: sql(spark, f"MERGE SPLITS '{table}' TARGET SIZE 100M").collect())
    result = {"error": error, "still_armed": failpoints.armed(ARMED), "missing": live_missing(table)}
    result["ids_equal"] = ids(spark, table) == before
    result["splits"] = len(executor_lib.open_log(table).snapshot().files)
    sql(spark, f"MERGE SPLITS '{table}' TARGET SIZE 100M").collect()
    result["ids_equal_after_next_merge"] = ids(spark, table) == before
    return result


def scenario_companion(spark: Any, work: Path, failpoint: str) -> dict[str, Any]:
    src, index = work / f"src-{failpoint}", str(work / f"companion-{failpoint}")
    src.mkdir()
    for f in range(2):
        ids_ = list(range(f * 50, f * 50 + 50))
        pq.write_table(pa.table({"id": ids_, "msg": [f"event {i}" for i in ids_]}), src / f"part-{f}.parquet")
    build = f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' INDEXING MODES ('msg':'text') AT LOCATION '{index}'"
    failpoints.arm(ARMED, failpoint)
    error = killed(lambda: sql(spark, build).collect())
    result: dict[str, Any] = {"error": error, "still_armed": failpoints.armed(ARMED)}
    exists = (Path(index) / "_transaction_log").exists()
    result["missing"] = live_missing(index) if exists else []
    result["ids"] = ids(spark, index) if exists and executor_lib.open_log(index).snapshot().files else []
    result["rebuild_status"] = sql(spark, build).collect()[0]["status"]
    result["ids_after_rebuild"] = ids(spark, index)
    return result


def scenario_stream(spark: Any, work: Path, failpoint: str) -> dict[str, Any]:
    source, table, checkpoint = work / f"in-{failpoint}", str(work / f"stream-{failpoint}"), work / f"ck-{failpoint}"
    source.mkdir()
    for f in range(3):
        with open(source / f"f{f}.json", "w") as out:
            for k in range(30):
                out.write(json.dumps({"id": f * 1000 + k, "msg": f"line {k}"}) + "\n")

    def run() -> None:
        df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
        query = connect_plugin.write_stream(
            df, table, checkpoint_location=str(checkpoint), trigger={"availableNow": True}
        )
        query.awaitTermination()

    failpoints.arm(ARMED, failpoint)
    error = killed(run)
    result: dict[str, Any] = {"error": error, "still_armed": failpoints.armed(ARMED)}
    result["missing"] = live_missing(table) if (Path(table) / "_transaction_log").exists() else []
    run()  # the query restarted from its checkpoint
    result["ids_after_restart"] = ids(spark, table)
    return result


def main() -> None:
    work = Path(sys.argv[1])
    only = set(sys.argv[2:])
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]")
    for key, value in {
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "1g",
        "spark.sql.session.timeZone": "UTC",
    }.items():
        builder = builder.config(key, value)
    spark = get_or_create_retrying(builder)
    connect_plugin.install(spark)
    scenarios = {
        "append": lambda fp: scenario_write(spark, work, fp, "append"),
        "overwrite": lambda fp: scenario_write(spark, work, fp, "overwrite"),
        "merge": lambda fp: scenario_merge(spark, work, fp),
        "companion": lambda fp: scenario_companion(spark, work, fp),
        "stream": lambda fp: scenario_stream(spark, work, fp),
    }
    steps = {
        "append": ["spark.commit.before", "log.commit.landed", "spark.commit.after"],
        "overwrite": ["spark.commit.before", "log.commit.landed", "spark.commit.after"],
        "merge": ["spark.commit.before", "log.commit.landed"],
        "companion": ["spark.commit.before", "log.commit.landed"],
        "stream": ["spark.commit.before", "log.commit.landed"],
    }
    try:
        for name, run in scenarios.items():
            if only and name not in only:
                continue
            for failpoint in steps[name]:
                started = time.monotonic()
                try:
                    result = run(failpoint)
                except Exception as e:  # the table did not read back, or a job after the crash failed
                    result = {"crashed": f"{type(e).__name__}: {str(e)[:2000]}"}
                result.update(scenario=name, failpoint=failpoint, seconds=round(time.monotonic() - started, 1))
                print(json.dumps(result), flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
