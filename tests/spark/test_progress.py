"""Progress of long writes and merges (executor_lib.spark.progress): lines a user can watch while a
task runs, through Spark's Python worker logs (classic and Spark Connect) or the worker's stderr."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from connect_plugin.table import IndexTable
from executor_lib.spark.progress import INTERVAL_OPTION, TaskProgress, interval_seconds
from indextables_contract.errors import ConfigError

LINE = re.compile(
    r"indextables (?P<what>write|merge) (?P<path>\S+): task \d+ \(stage \d+, attempt \d+\): "
    r"(?P<rows>[\d,]+) rows (?:indexed|merged) \([\d,]+ rows/s\), (?P<splits>\d+) splits? uploaded "
    r"\((?P<mb>[\d,.]+) MB\)(?:, \d+ splits? open)?, [\d,]+ s(?P<done>, done)?$"
)


def _progress_lines(spark: Any, table: Path) -> list[re.Match[str]]:
    rows = spark.tvf.python_worker_logs().where("logger = 'indextables.progress'").select("msg").collect()
    matches = [LINE.match(r.msg) for r in rows]
    return [m for m in matches if m is not None and m["path"] == str(table)]


def test_long_writes_and_merges_report_progress_while_they_run(spark: Any, tmp_path: Path) -> None:
    """With an interval shorter than a batch, every task reports its rows as they grow, then its
    totals: rows, splits and bytes uploaded. The lines reach the Python worker logs (queryable from
    the client, also over Connect) with Spark's worker logging on."""
    table = tmp_path / "t"
    rows = 60_000
    df = spark.range(0, rows, numPartitions=2).selectExpr("id", "concat('message number ', id) AS msg")
    options = {
        INTERVAL_OPTION: "0.000001",
        "spark.indextables.optimizeWrite.targetRecordsPerSplit": "12000",
        "spark.indextables.indexing.typemap.msg": "text",
    }
    spark.conf.set("spark.sql.pyspark.worker.logging.enabled", "true")
    try:
        connect_plugin.write(df, str(table), options=options)
        writes = [m for m in _progress_lines(spark, table) if m["what"] == "write"]
        split_files = list(table.rglob("*.split"))
        spark.conf.set(INTERVAL_OPTION, "0.000001")
        try:
            IndexTable.for_path(spark, str(table)).merge_splits(target_size="1G").collect()
        finally:
            spark.conf.unset(INTERVAL_OPTION)
        merges = [m for m in _progress_lines(spark, table) if m["what"] == "merge"]
    finally:
        spark.conf.unset("spark.sql.pyspark.worker.logging.enabled")

    finals = [m for m in writes if m["done"]]
    assert len(finals) == 2, [m.string for m in writes]  # one per task
    assert sum(int(m["rows"].replace(",", "")) for m in finals) == rows
    live = [m for m in writes if not m["done"]]
    assert len({m["rows"] for m in live}) > 2  # reported as the rows grew, before the tasks ended
    assert sum(int(m["splits"]) for m in finals) == len(split_files) >= 4
    uploaded_mb = sum(float(m["mb"].replace(",", "")) for m in finals)
    assert uploaded_mb == pytest.approx(sum(p.stat().st_size for p in split_files) / 1e6, abs=0.2)

    merged = [m for m in merges if m["done"]]
    assert merged and sum(int(m["rows"].replace(",", "")) for m in merged) == rows
    assert connect_plugin.read(spark, str(table), columns=["id"]).count() == rows


def test_short_tasks_say_nothing_and_bad_intervals_fail_before_writing(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "quiet"
    df = spark.range(0, 100, numPartitions=1).selectExpr("id")
    spark.conf.set("spark.sql.pyspark.worker.logging.enabled", "true")
    try:
        connect_plugin.write(df, str(table))  # default interval (30 s): a short task reports nothing
        assert _progress_lines(spark, table) == []
    finally:
        spark.conf.unset("spark.sql.pyspark.worker.logging.enabled")
    bad = tmp_path / "bad"
    with pytest.raises(Exception, match=f"option {re.escape(INTERVAL_OPTION)}='soon': expected seconds"):
        connect_plugin.write(df, str(bad), options={INTERVAL_OPTION: "soon"})
    assert not bad.exists() or not any(bad.rglob("*.split"))


def test_without_a_logging_handler_lines_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """A worker without Spark's worker logging has no handler: the line goes to its stderr (the
    executor's stderr log), not to logging's last-resort handler, which drops INFO."""
    now = [0.0]
    progress = TaskProgress("write /t", interval=10, clock=lambda: now[0])
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers.clear()
    try:
        progress.indexed(5_000, open_splits=1)
        assert capsys.readouterr().err == ""  # before the interval
        now[0] = 12.0
        progress.indexed(5_000, open_splits=1)
        progress.uploaded(3_000_000)
        now[0] = 13.0
        progress.done()
    finally:
        root.handlers[:] = saved
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "indextables write /t: outside a Spark task: 10,000 rows indexed (833 rows/s), 0 splits uploaded (0.0 MB), "
        "1 split open, 12 s",
        "indextables write /t: outside a Spark task: 10,000 rows indexed (769 rows/s), 1 split uploaded (3.0 MB), "
        "13 s, done",
    ]


@pytest.mark.parametrize("value", ["-1", "nan", "soon", ""])
def test_interval_must_be_seconds(value: str) -> None:
    with pytest.raises(ConfigError, match="expected seconds"):
        interval_seconds({INTERVAL_OPTION: value})
    assert interval_seconds({INTERVAL_OPTION: "0"}) == 0
    assert interval_seconds({}) == 30
