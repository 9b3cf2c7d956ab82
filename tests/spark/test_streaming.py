"""Structured Streaming into and out of IndexTables in real classic and Spark Connect sessions:
``writeStream`` commits every input row exactly once across failures and restarts, and ``readStream``
emits every appended row exactly once across appends, merges and restarts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
import executor_lib
from connect_plugin.table import IndexTable
from tests.jvm_reader import jvm_read

INPUT_SCHEMA = "id long, msg string, day string"
PER_FILE = 40
AVAILABLE_NOW = {"availableNow": True}
# Both session kinds; the Connect run of the longer tests (minutes each on 2 cores) is marked slow.
BOTH_CONNECT_SLOW = pytest.mark.parametrize(
    "spark", ["classic", pytest.param("connect", marks=pytest.mark.slow)], indirect=True
)


def put_file(directory: Path, index: int, n: int = PER_FILE) -> None:
    """One JSON input file of ``n`` rows, ids ``index*1000 ...``, renamed into place whole."""
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".f{index}.tmp"
    with open(tmp, "w") as f:
        for k in range(n):
            row = {"id": index * 1000 + k, "msg": f"request {k} of file {index} " + ("failed" if k % 4 else "ok")}
            f.write(json.dumps({**row, "day": f"2024-01-0{1 + k % 2}"}) + "\n")
    os.rename(tmp, directory / f"f{index}.json")


def expected_ids(files: range) -> list[int]:
    return sorted(i * 1000 + k for i in files for k in range(PER_FILE))


def stream_files(spark: Any, source: Path, table: Path, checkpoint: Path, transform: Any = None) -> None:
    """One availableNow run of the file source (one file per micro-batch) into ``table``."""
    df = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    if transform is not None:
        df = transform(df)
    query = connect_plugin.write_stream(
        df,
        str(table),
        checkpoint_location=str(checkpoint),
        trigger=AVAILABLE_NOW,
        partition_by=["day"],
        options={"spark.indextables.indexing.typemap.msg": "text"},
    )
    query.awaitTermination()


def table_ids(spark: Any, table: Path) -> list[int]:
    return sorted(r["id"] for r in connect_plugin.read(spark, str(table), columns=["id"]).collect())


def split_files_on_disk(table: Path) -> set[str]:
    return {str(p.relative_to(table)) for p in table.rglob("*.split")}


def live_files(table: Path) -> set[str]:
    return {a.path for a in executor_lib.open_log(str(table)).snapshot().files}


def forget_batch_commit(checkpoint: Path, batch: int) -> None:
    """What a driver killed after the table commit but before Spark recorded the batch as done leaves:
    the batch's offsets are logged, its commit is not, so a restart replays it."""
    (checkpoint / "commits" / str(batch)).unlink()
    (checkpoint / "commits" / f".{batch}.crc").unlink(missing_ok=True)


def test_stream_write_is_exactly_once_across_restarts(spark: Any, tmp_path: Path) -> None:
    source, table, checkpoint = tmp_path / "in", tmp_path / "t", tmp_path / "ck"
    for i in range(3):
        put_file(source, i)
    stream_files(spark, source, table, checkpoint)
    log = executor_lib.open_log(str(table))
    assert log.latest_version() == 3  # version 0 creates the table, then one version per micro-batch
    assert table_ids(spark, table) == expected_ids(range(3))
    ((app_id, record),) = log.streaming_txns().items()
    assert record.batch_id == 2 and record.version == 3
    assert log.history(1)[0].operation == "STREAMING UPDATE"

    # the driver died after committing batch 2 to the table: the restart replays it, and it is skipped
    forget_batch_commit(checkpoint, 2)
    stream_files(spark, source, table, checkpoint)
    assert (checkpoint / "commits" / "2").exists()  # the replayed batch ran
    assert log.latest_version() == 3
    assert table_ids(spark, table) == expected_ids(range(3))
    assert split_files_on_disk(table) == live_files(table)  # the replay's uploads were deleted

    # nothing new: nothing committed
    stream_files(spark, source, table, checkpoint)
    assert log.latest_version() == 3

    # a new file: one more version, its rows once, same query id
    put_file(source, 3)
    stream_files(spark, source, table, checkpoint)
    assert log.latest_version() == 4
    assert table_ids(spark, table) == expected_ids(range(4))
    assert log.streaming_txns()[app_id].batch_id == 3
    jvm = jvm_read(str(table))
    assert jvm.version == 4 and set(jvm.files) == live_files(table)


@BOTH_CONNECT_SLOW
def test_a_write_task_dying_mid_batch_then_a_restart_commit_every_row_once(spark: Any, tmp_path: Path) -> None:
    """A task fails in the middle of batch 1 (as when its executor dies): the batch is aborted (no split
    of it stays), the query stops with the error; the restart commits every row exactly once."""
    from pyspark.sql.types import StringType

    source, table, checkpoint, marker = tmp_path / "in", tmp_path / "t", tmp_path / "ck", tmp_path / "kill"
    for i in range(3):
        put_file(source, i)
    marker.touch()
    marker_path = str(marker)

    def die_on_row_1020(row_id: int, msg: str) -> str:
        if row_id == 1020 and os.path.exists(marker_path):
            raise RuntimeError("executor lost in the middle of the batch")
        return msg

    udf = session_functions(spark).udf(die_on_row_1020, StringType())

    def transform(df: Any) -> Any:
        return df.withColumn("msg", udf("id", "msg"))

    with pytest.raises(Exception, match="executor lost in the middle of the batch"):
        stream_files(spark, source, table, checkpoint, transform)
    assert table_ids(spark, table) == expected_ids(range(1))
    assert split_files_on_disk(table) == live_files(table)  # the aborted batch's uploads were deleted
    marker.unlink()
    stream_files(spark, source, table, checkpoint, transform)
    assert table_ids(spark, table) == expected_ids(range(3))
    assert executor_lib.open_log(str(table)).latest_version() == 3


@BOTH_CONNECT_SLOW
def test_a_query_stopped_mid_batch_then_restarted_commits_every_row_once(spark: Any, tmp_path: Path) -> None:
    """``stop()`` lands while a micro-batch is being written (rows are slowed down so batches take
    seconds); wherever it lands, the restart commits every input row exactly once."""
    import time

    from pyspark.sql.types import StringType

    source, table, checkpoint = tmp_path / "in", tmp_path / "t", tmp_path / "ck"
    for i in range(4):
        put_file(source, i)

    def slow(msg: str) -> str:
        time.sleep(0.05)
        return msg

    udf = session_functions(spark).udf(slow, StringType())
    df = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    query = connect_plugin.write_stream(
        df.withColumn("msg", udf("msg")),
        str(table),
        checkpoint_location=str(checkpoint),
        trigger={"processingTime": "0 seconds"},
        partition_by=["day"],
    )
    deadline = time.time() + 300
    while not query.recentProgress and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)  # into the next batch
    query.stop()
    stopped_at = executor_lib.open_log(str(table)).latest_version()
    assert 1 <= stopped_at < 4  # stopped after the first batch, before the last
    stream_files(spark, source, table, checkpoint)
    assert table_ids(spark, table) == expected_ids(range(4))
    # (a task killed by the stop may leave its upload behind: an uncommitted orphan that PURGE collects)


def session_functions(spark: Any) -> Any:
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect import functions as connect_functions

        return connect_functions
    from pyspark.sql import functions

    return functions


def batch_write(spark: Any, table: Path, start: int, n: int = 20) -> None:
    rows = [(start + i, f"row {start + i}", f"2024-01-0{1 + i % 2}") for i in range(n)]
    connect_plugin.write(spark.createDataFrame(rows, INPUT_SCHEMA), str(table), partition_by=["day"])


def copy_stream(spark: Any, source: Path, target: Path, checkpoint: Path, **read_options: Any) -> None:
    """One availableNow run of ``readStream`` on ``source`` into the table ``target`` (exactly-once sink)."""
    df = connect_plugin.read_stream(spark, str(source), **read_options)
    query = connect_plugin.write_stream(df, str(target), checkpoint_location=str(checkpoint), trigger=AVAILABLE_NOW)
    query.awaitTermination()


@BOTH_CONNECT_SLOW
def test_stream_read_emits_appended_rows_once_across_a_merge_and_a_restart(spark: Any, tmp_path: Path) -> None:
    source, target, checkpoint = tmp_path / "src", tmp_path / "dst", tmp_path / "ck"
    batch_write(spark, source, 0)
    batch_write(spark, source, 100)
    copy_stream(spark, source, target, checkpoint, max_files_per_trigger=3)
    assert table_ids(spark, target) == table_ids(spark, source)
    # at most three splits per micro-batch
    assert executor_lib.open_log(str(target)).latest_version() == -(-len(live_files(source)) // 3)

    batch_write(spark, source, 200)
    merged = IndexTable.for_path(spark, str(source)).merge_splits(target_size="1G").collect()
    assert merged  # the merge rewrote the splits (dataChange=false): not emitted again
    batch_write(spark, source, 300)
    copy_stream(spark, source, target, checkpoint, max_files_per_trigger=3)  # a restart of the same query
    assert (
        table_ids(spark, target)
        == table_ids(spark, source)
        == sorted(b + i for b in (0, 100, 200, 300) for i in range(20))
    )
    # a new query from the latest version sees nothing until the next append
    latest_target, latest_ck = tmp_path / "latest", tmp_path / "ck-latest"
    copy_stream(spark, source, latest_target, latest_ck, starting_version="latest")
    batch_write(spark, source, 400)
    copy_stream(spark, source, latest_target, latest_ck, starting_version="latest")
    assert table_ids(spark, latest_target) == list(range(400, 420))


def test_stream_read_refuses_an_overwrite_unless_told(classic_spark: Any, tmp_path: Path) -> None:
    spark = classic_spark
    source, target = tmp_path / "src", tmp_path / "dst"
    batch_write(spark, source, 0)
    copy_stream(spark, source, target, tmp_path / "ck")
    rows = [(500, "new", "2024-01-01")]
    connect_plugin.write(spark.createDataFrame(rows, INPUT_SCHEMA), str(source), mode="overwrite")
    with pytest.raises(Exception, match=r"version 2 rewrote data .*ignoreChanges=true"):
        copy_stream(spark, source, target, tmp_path / "ck")
    copy_stream(spark, source, target, tmp_path / "ck", ignore_changes=True)
    assert table_ids(spark, target) == [*range(20), 500]
