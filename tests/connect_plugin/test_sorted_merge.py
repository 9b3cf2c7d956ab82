"""MERGE SPLITS sorted by a key, in real Spark sessions: overlapping fresh splits become level-1
splits with disjoint key ranges holding exactly the same rows, a range query on the key then
needs fewer splits, a later merge rewrites only the level-1 split the new rows overlap, and a
bad key is named before anything is written."""

from __future__ import annotations

import datetime
import itertools
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from connect_plugin.table import IndexTable
from executor_lib.log.files.pruning import prune_files
from executor_lib.log.tables import open_log
from executor_lib.splits.write.merge_plan import SORT_KEY_TAG
from indextables_contract import filters as F
from indextables_contract.errors import ConfigError, TableNotFoundError, error_class_in
from tests.spark.test_datasource import SCHEMA, TEXT_OPTS, log_rows

ROWS = 1200
INTERLEAVED = 6  # appends; append k holds ids = k (mod 6), so every append spans the whole time range


def interleaved_appends(spark: Any, path: str, start: int = 0) -> None:
    rows = log_rows(ROWS, start)
    for k in range(INTERLEAVED):
        df = spark.createDataFrame([r for r in rows if r[0] % INTERLEAVED == k], SCHEMA).coalesce(1)
        connect_plugin.write(df, path, options=TEXT_OPTS)


def all_rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.read.format("indextables").load(path).collect())


def ts_ranges(path: str) -> list[tuple[str, str]]:
    return sorted((a.min_values["ts"], a.max_values["ts"]) for a in open_log(path).snapshot().files)


def disjoint(ranges: list[tuple[str, str]]) -> bool:
    return all(high < next_low for (_, high), (next_low, _) in itertools.pairwise(ranges))


def splits_for_hour(path: str, hour: int) -> int:
    snap = open_log(path).snapshot()
    low = datetime.datetime(2024, 1, 1, hour, tzinfo=datetime.timezone.utc)
    window = F.Between("ts", low.isoformat(), (low + datetime.timedelta(hours=1)).isoformat())
    return len(prune_files(snap.files, [window], snap.metadata.schema_string, snap.partition_columns))


def test_sorted_merge_makes_disjoint_ranges_and_a_later_merge_rewrites_only_the_overlap(
    spark: Any, tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    interleaved_appends(spark, path)
    before = all_rows(spark, path)
    files = open_log(path).snapshot().files
    assert len(files) == INTERLEAVED and splits_for_hour(path, 10) == INTERLEAVED  # every split spans every hour
    target = sum(a.size for a in files) // 4

    merged = IndexTable.for_path(spark, path).merge_splits(target_size=target, sort_key="ts").collect()

    assert all_rows(spark, path) == before
    level1 = open_log(path).snapshot().files
    assert len(merged) == len(level1) >= 3
    assert all((a.tags or {}).get(SORT_KEY_TAG) == "ts" and not a.data_change for a in level1)
    ranges = ts_ranges(path)
    assert disjoint(ranges), ranges
    assert splits_for_hour(path, 10) <= 2
    hour = (
        spark.read.format("indextables").load(path).where("ts >= '2024-01-01 10:00:00' AND ts < '2024-01-01 11:00:00'")
    )
    assert hour.count() == sum(1 for r in before if r[4].hour == 10 and r[4].day == 1) > 0

    # New rows later in time overlap only the newest level-1 split(s) (ts grows with id): the others
    # are kept as they are.
    overlapped = {a.path for a in level1 if int(a.max_values["id"]) >= ROWS - 60}
    assert 1 <= len(overlapped) < len(level1)
    interleaved_appends(spark, path, start=ROWS - 60)
    IndexTable.for_path(spark, path).merge_splits(target_size=target, sort_key="ts").collect()
    after = open_log(path).snapshot().files
    kept = {a.path for a in level1} & {a.path for a in after}
    assert kept == {a.path for a in level1} - overlapped
    assert all((a.tags or {}).get(SORT_KEY_TAG) == "ts" for a in after)
    ranges = ts_ranges(path)
    assert disjoint(ranges), ranges
    assert len(all_rows(spark, path)) == ROWS + ROWS


def test_merge_sort_by_in_sql_and_from_the_session_setting(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    interleaved_appends(spark, path)
    merged = connect_plugin.sql(spark, f"MERGE SPLITS '{path}' TARGET SIZE 10M SORT BY `ts`").collect()
    assert len(merged) == 1 and merged[0]["numSourceSplits"] == INTERLEAVED
    assert [(a.tags or {}).get(SORT_KEY_TAG) for a in open_log(path).snapshot().files] == ["ts"]

    interleaved_appends(spark, path, start=ROWS)
    spark.conf.set("spark.indextables.merge.sortKey", "id")
    try:
        IndexTable.for_path(spark, path).merge_splits(target_size="10M").collect()
    finally:
        spark.conf.unset("spark.indextables.merge.sortKey")
    assert [(a.tags or {}).get(SORT_KEY_TAG) for a in open_log(path).snapshot().files] == ["id"]
    assert len(all_rows(spark, path)) == 2 * ROWS


@pytest.mark.parametrize(
    ("key", "named"),
    [("nope", "must name a data column"), ("day", "must name a data column"), ("level ", None)],
)
def test_a_bad_sort_key_is_named_before_anything_is_written(spark: Any, tmp_path: Path, key: str, named: str) -> None:
    path = str(tmp_path / "t")
    rows = spark.createDataFrame(log_rows(40), SCHEMA).repartition(2)
    connect_plugin.write(rows, path, partition_by=["day"], options=TEXT_OPTS)
    connect_plugin.write(rows, path, partition_by=["day"], options=TEXT_OPTS)
    version = open_log(path).snapshot().version
    table = IndexTable.for_path(spark, path)
    if named is None:  # a string key is fine, spaces around it too
        table.merge_splits(target_size="10M", sort_key=key).collect()
        assert open_log(path).snapshot().version == version + 1
        return
    with pytest.raises(Exception) as raised:
        table.merge_splits(target_size="10M", sort_key=key).collect()
    assert error_class_in(str(raised.value)) is ConfigError, str(raised.value)[:2000]
    assert named in str(raised.value) and f"sortKey={key!r}" in str(raised.value)
    assert open_log(path).snapshot().version == version


def test_merge_on_write_merges_once_enough_splits_wait(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    settings = {
        "spark.indextables.mergeOnWrite.enabled": "true",
        "spark.indextables.mergeOnWrite.minSplitsToMerge": "3",
        "spark.indextables.mergeOnWrite.targetSize": "10M",
    }
    rows = log_rows(ROWS)
    batches = [spark.createDataFrame(rows[k::3], SCHEMA).coalesce(1) for k in range(3)]
    for conf, value in {**settings, "spark.indextables.merge.sortKey": "ts"}.items():
        spark.conf.set(conf, value)
    try:
        connect_plugin.write(batches[0], path, options=TEXT_OPTS)
        connect_plugin.write(batches[1], path, options=TEXT_OPTS)
        assert len(open_log(path).snapshot().files) == 2  # fewer than 3 level-0 splits: no merge yet
        connect_plugin.write(batches[2], path, options=TEXT_OPTS)
    finally:
        for conf in (*settings, "spark.indextables.merge.sortKey"):
            spark.conf.unset(conf)
    files = open_log(path).snapshot().files
    assert [(a.tags or {}).get(SORT_KEY_TAG) for a in files] == ["ts"]
    assert [e.operation for e in open_log(path).history()][:2] == ["MERGE SPLITS", "WRITE"]
    assert all_rows(spark, path) == sorted(tuple(r) for r in spark.createDataFrame(rows, SCHEMA).collect())

    # As write options, without a sort key: a size-tiered merge.
    for batch in batches:
        connect_plugin.write(batch, path, options={**TEXT_OPTS, **settings})
    files = open_log(path).snapshot().files  # the second write made 3 small splits: merged; the third waits
    assert sorted(a.num_merge_ops or 0 for a in files) == [0, 2] and all(not a.tags for a in files)
    assert len(all_rows(spark, path)) == 2 * ROWS


def test_a_bad_merge_on_write_setting_is_refused_before_the_write(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    df = spark.createDataFrame(log_rows(10), SCHEMA)
    bad = {"spark.indextables.mergeOnWrite.enabled": "true", "spark.indextables.mergeOnWrite.minSplitsToMerge": "0"}
    with pytest.raises(ConfigError, match=r"mergeOnWrite\.minSplitsToMerge='0': expected a positive integer"):
        connect_plugin.write(df, str(path), options=bad)
    with pytest.raises(ConfigError, match=r"mergeOnWrite\.enabled='yes please': expected true or false"):
        connect_plugin.write(df, str(path), options={"spark.indextables.mergeOnWrite.enabled": "yes please"})
    assert not path.exists()


def merge_versions(path: str) -> list[int]:
    """Versions of the table made by MERGE SPLITS (none while the table does not exist yet)."""
    try:
        return [e.version for e in open_log(path).history() if e.operation == "MERGE SPLITS"]
    except TableNotFoundError:
        return []


def test_merge_on_write_merges_a_running_stream(spark: Any, tmp_path: Path) -> None:
    """A stream of one-file micro-batches with merge-on-write sorted by id: the client's merger
    thread merges while the query runs; every input row is in the table exactly once."""
    import time

    from tests.spark.test_streaming import INPUT_SCHEMA, expected_ids, put_file, table_ids

    source, table, checkpoint = tmp_path / "in", tmp_path / "t", tmp_path / "ck"
    for i in range(8):
        put_file(source, i)
    settings = {
        "spark.indextables.mergeOnWrite.enabled": "true",
        "spark.indextables.mergeOnWrite.minSplitsToMerge": "3",
        "spark.indextables.mergeOnWrite.streamIntervalSeconds": "1",
        "spark.indextables.merge.sortKey": "id",
    }
    df = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
    query = connect_plugin.write_stream(
        df, str(table), checkpoint_location=str(checkpoint), trigger={"processingTime": "0 seconds"}, options=settings
    )
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            progress = query.lastProgress
            merges = merge_versions(str(table))
            if progress and int(progress["batchId"]) >= 7 and merges:
                break
            time.sleep(0.5)
    finally:
        query.stop()
    assert merges, "no merge ran while the stream did"
    assert table_ids(spark, table) == expected_ids(range(8))
    assert any((a.tags or {}).get(SORT_KEY_TAG) == "id" for a in open_log(str(table)).snapshot().files)
