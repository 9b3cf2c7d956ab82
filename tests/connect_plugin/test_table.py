"""``IndexTable`` in classic and Spark Connect sessions: every command runs as Spark work on the
cluster side, and the table stays correct (rows, counts, time travel) around it."""

from __future__ import annotations

import datetime
import json
import threading
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
import executor_lib
from connect_plugin.table import IndexTable
from indextables_contract.errors import CommitConflictError, error_class_in
from tests.spark.test_datasource import TEXT_OPTS, ids, make_df
from tests.test_readme import python_blocks


def small_appends(spark: Any, table: Path, n: int, per: int = 5, partition: bool = True) -> None:
    for i in range(n):
        connect_plugin.write(
            make_df(spark, per, start=i * per),
            str(table),
            partition_by=["day"] if partition else None,
            options=TEXT_OPTS,
        )


def _thread(spark: Any, target: Any) -> threading.Thread:
    """A thread for concurrent Spark jobs: classic sessions need PySpark's InheritableThread so the
    JVM thread carries the session (and its registered data sources)."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return threading.Thread(target=target)
    from pyspark import InheritableThread

    def with_session() -> None:  # the data-source lookup of a write resolves against the thread's active session
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        target()

    return InheritableThread(target=with_session)


def test_history_describe_checkpoint(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "h"
    small_appends(spark, table, 3, partition=False)
    t = IndexTable.for_path(spark, str(table))
    history = t.history().collect()
    assert [r["version"] for r in history] == [3, 2, 1, 0]
    assert history[0]["operation"] == "WRITE" and history[0]["numAddedRecords"] == 5
    state = {r["property"]: r["value"] for r in t.describe_state().collect()}
    assert state["version"] == "3" and state["numRecords"] == "15"
    row = t.checkpoint().collect()[0]
    assert row["version"] == 3 and row["numFiles"] == len(executor_lib.open_log(str(table)).snapshot().files)
    assert t.count() == 15 and t.count("msg:timeout") == 3


def test_merge_keeps_every_row_then_purge_frees_the_sources(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "m"
    small_appends(spark, table, 4)
    t = IndexTable.for_path(spark, str(table))
    before = sorted(tuple(r) for r in t.to_df().collect())
    log = executor_lib.open_log(str(table))
    files_before = len(log.snapshot().files)
    per_partition = Counter(json.dumps(a.partition_values, sort_keys=True) for a in log.snapshot().files)
    merged = t.merge_splits(target_size="1G").collect()
    # each row counts its own merged split's sources (the commit's 12 are 4 per day partition)
    assert {r["partitionValues"]: r["numSourceSplits"] for r in merged} == per_partition
    assert len(merged) == 3 and sum(per_partition.values()) == files_before
    snap = log.snapshot()
    assert len(snap.files) < files_before and len(snap.files) == 3  # one split per day partition
    assert sorted(tuple(r) for r in t.to_df().collect()) == before
    assert all(a.num_merge_ops == 1 for a in snap.files)
    merge_version = snap.version
    # purge: nothing is old enough yet (retention >= 24h), and it must refuse a shorter one
    assert t.purge(dry_run=True).filter("kind = 'split'").count() == 0
    with pytest.raises(Exception, match="below the minimum of 24h"):
        t.purge(older_than_hours=1)
    # two more commits, then purge as if 8 days had passed: the merged-away sources go, the
    # table and every version that stays readable keep their files
    small_appends(spark, table, 2)
    import time

    from executor_lib.log.maintenance.purge import purge_table

    now_ms = int((time.time() + 8 * 24 * 3600) * 1000)
    report = purge_table(log, 168, tx_log_retention_hours=24, now_ms=now_ms)
    deleted = {k for k, _ in report.deleted_splits}
    assert deleted and not deleted & {a.path for a in log.snapshot().files}
    assert all(not (table / k).exists() for k in deleted)
    assert len(deleted) == files_before  # exactly the merge's sources
    assert ids(t.to_df()) == sorted([*range(20), *range(10)])  # the 20 merged rows + 10 appended
    latest = log.latest_version()
    readable = 0
    for v in range(merge_version, latest + 1):
        try:
            files = executor_lib.open_log(str(table)).snapshot(version=v).files
        except executor_lib.IndexTablesError:
            continue
        readable += 1
        assert all((table / a.path).exists() for a in files), v
    assert readable >= 2


def test_merge_vs_concurrent_append_keeps_every_row(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "c"
    small_appends(spark, table, 4, partition=False)
    t = IndexTable.for_path(spark, str(table))
    errors: list[BaseException] = []

    def append() -> None:
        try:
            connect_plugin.write(make_df(spark, 5, start=100), str(table))
        except BaseException as e:
            errors.append(e)

    writer = _thread(spark, append)
    writer.start()
    t.merge_splits(target_size="1G")
    writer.join()
    assert not errors
    assert ids(t.to_df()) == list(range(20)) + list(range(100, 105))


def test_drop_partitions_prewarm_and_cache(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "d"
    small_appends(spark, table, 2)
    # a cache of its own: the node's default one is shared with the other test processes' reads
    t = IndexTable.for_path(spark, str(table), {"spark.indextables.cache.directoryPath": str(tmp_path / "cache")})
    dropped = t.drop_partitions({"op": "term", "column": "day", "value": "2024-01-02"}).collect()
    assert dropped and all('"2024-01-02"' in r["partitionValues"] for r in dropped)
    assert ids(t.to_df()) == [i for i in range(10) if i % 3 != 1]
    warmed = t.prewarm().collect()
    assert len(warmed) == len(executor_lib.open_log(str(table)).snapshot().files)
    described = t.describe_cache().collect()
    assert described and described[0]["splitsCached"] >= 1
    flushed = t.flush_cache().collect()
    assert flushed[0]["splitsCached"] == 0
    assert ids(t.to_df()) == [i for i in range(10) if i % 3 != 1]  # reads fill the cache again


def test_truncate_time_travel(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "tt"
    small_appends(spark, table, 3, partition=False)
    t = IndexTable.for_path(spark, str(table))
    dry = t.truncate_time_travel(dry_run=True).collect()
    assert dry and all(r["dryRun"] for r in dry)
    assert ids(t.to_df(version_as_of=1)) == list(range(5))
    t.truncate_time_travel()
    assert ids(t.to_df()) == list(range(15))
    with pytest.raises(Exception):  # noqa: B017 - the old version is gone
        t.to_df(version_as_of=1).collect()


def test_unknown_command_and_missing_table(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="unknown command 'explode'"):
        spark.read.format("indextables").option("command", "explode").load(str(tmp_path)).collect()
    with pytest.raises(Exception, match="not"):
        IndexTable.for_path(spark, str(tmp_path / "none")).history().collect()


_LOOKUP_RACE_RETRIES = 5  # Spark 4.3 classic: concurrent Python data-source lookups sometimes miss


def test_two_merges_racing_on_the_same_splits(spark: Any, tmp_path: Path) -> None:
    """One merge wins; the other fails with a conflict (no double merge, no lost or doubled rows).

    Classic sessions only: two Python threads saving to a Python data source at the same moment sometimes get
    DATA_SOURCE_NOT_FOUND from Spark 4.3's data-source lookup (Spark Connect is not affected). That lookup fails
    before the merge plans or writes anything, so the merge is retried (a bounded number of times); only if
    that specific error persists is the test marked xfail. Any other error fails it.
    """
    table = tmp_path / "race"
    small_appends(spark, table, 4, partition=False)
    t = IndexTable.for_path(spark, str(table))
    barrier = threading.Barrier(2)
    outcomes: list[str] = []
    lookup_race: list[str] = []

    def merge() -> None:
        barrier.wait()
        for _attempt in range(_LOOKUP_RACE_RETRIES):
            try:
                t.merge_splits(target_size="1G")
                outcomes.append("merged")
                return
            except Exception as e:
                if "DATA_SOURCE_NOT_FOUND" not in str(e):
                    outcomes.append("conflict" if error_class_in(str(e)) is CommitConflictError else f"error: {e}")
                    return
                lookup_race.append(str(e).splitlines()[0])
        outcomes.append("lookup race persisted")

    threads = [_thread(spark, merge) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if "lookup race persisted" in outcomes:
        pytest.xfail(
            f"Spark's DATA_SOURCE_NOT_FOUND lookup race persisted over {_LOOKUP_RACE_RETRIES} tries: {lookup_race[-1]}"
        )
    assert sorted(outcomes) in (["conflict", "merged"], ["merged", "merged"]), outcomes
    log = executor_lib.open_log(str(table))
    merges = [e for e in log.history() if e.operation == "MERGE SPLITS"]
    if outcomes == ["merged", "merged"]:  # the second planned after the first committed
        assert len(merges) <= 2
    else:
        assert len(merges) == 1
    assert ids(t.to_df()) == list(range(20))
    assert sum(a.num_records or 0 for a in log.snapshot().files) == 20


def test_aggregations_computed_by_tantivy_on_executors(spark: Any, tmp_path: Path) -> None:
    from tests.spark.test_datasource import log_rows

    table = tmp_path / "agg"
    for i in range(3):  # several splits, so per-split results must merge
        connect_plugin.write(make_df(spark, 20, start=i * 20), str(table), options=TEXT_OPTS)
    t = IndexTable.for_path(spark, str(table))
    rows = log_rows(60)
    result = t.aggregate(
        {
            "n": {"value_count": {"field": "id"}},
            "total": {"sum": {"field": "id"}},
            "mean": {"avg": {"field": "score"}},
            "lo": {"min": {"field": "score"}},
            "hi": {"max": {"field": "id"}},
            "levels": {"terms": {"field": "level", "size": 2}, "aggs": {"top": {"max": {"field": "id"}}}},
            "hist": {"histogram": {"field": "id", "interval": 25}},
        }
    )
    assert result["n"]["value"] == 60 and result["total"]["value"] == sum(range(60))
    assert result["mean"]["value"] == pytest.approx(sum(r[3] for r in rows) / 60)
    assert result["lo"]["value"] == 0 and result["hi"]["value"] == 59
    levels = [(b["key"], b["doc_count"], b["top"]["value"]) for b in result["levels"]["buckets"]]
    assert levels == [("ERROR", 15, 58), ("INFO", 15, 56)]  # 15 each; ties ordered by key
    assert [(b["key"], b["doc_count"]) for b in result["hist"]["buckets"]] == [(0, 25), (25, 25), (50, 10)]
    timeouts = t.aggregate({"n": {"value_count": {"field": "id"}}}, query="msg:timeout")
    assert timeouts["n"]["value"] == sum(1 for r in rows if "timeout" in r[2])


def test_bad_command_input_is_named(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "bad"
    small_appends(spark, table, 1)
    t = IndexTable.for_path(spark, str(table))
    with pytest.raises(Exception, match=r"may name partition columns only \['day'\], not \['level'\]"):
        t.drop_partitions("level = 'INFO'")
    with pytest.raises(Exception, match="option aggregations"):
        spark.read.format("indextables").option("command", "aggregate").load(str(table)).collect()
    with pytest.raises(Exception, match="not answered exactly by the index"):
        t.aggregate({"n": {"value_count": {"field": "id"}}}, where={"op": "contains", "column": "msg", "value": "x"})
    assert executor_lib.open_log(str(table)).latest_version() == 1  # nothing was committed


def test_merge_and_reads_from_a_plain_thread(spark: Any, tmp_path: Path) -> None:
    """A Python thread other than the session's (a scheduler's worker, merge-on-write's merger) runs
    MERGE SPLITS and reads: in a classic session its JVM thread had no active session, so Spark did not
    find the data source (DATA_SOURCE_NOT_FOUND)."""
    path = str(tmp_path / "t")
    for i in range(3):
        connect_plugin.write(make_df(spark, 10, i * 10).coalesce(1), path, options=TEXT_OPTS)
    out: dict[str, Any] = {}

    def merge_and_count() -> None:
        try:
            out["merged"] = IndexTable.for_path(spark, path).merge_splits(target_size="100M").collect()
            out["ids"] = ids(spark.read.format("indextables").load(path))
        except Exception as e:  # reported below, with its message
            out["error"] = e

    worker = threading.Thread(target=merge_and_count)
    worker.start()
    worker.join()
    assert "error" not in out, out.get("error")
    assert len(out["merged"]) == 1 and out["merged"][0]["numSourceSplits"] == 3
    assert out["ids"] == list(range(30))
    assert len(executor_lib.open_log(path).snapshot().files) == 1


def test_side_effects_run_at_once_and_reads_stay_lazy(spark: Any, tmp_path: Path) -> None:
    """As in deltalake's DeltaTable: ``checkpoint()`` checkpoints when called (its result need not be
    collected); ``history()`` is a lazy DataFrame that sees commits made after it was built."""
    table = tmp_path / "eager"
    json_state = {"spark.indextables.state.format": "json"}  # a checkpoint is then a file of its own
    connect_plugin.write(make_df(spark, 5), str(table), options={**TEXT_OPTS, **json_state})
    connect_plugin.write(make_df(spark, 5, start=5), str(table), options={**TEXT_OPTS, **json_state})
    t = IndexTable.for_path(spark, str(table), json_state)
    checkpoints = table / "_transaction_log"
    assert not list(checkpoints.glob("*.checkpoint.json"))
    latest = executor_lib.open_log(str(table)).latest_version()
    history = t.history()
    result = t.checkpoint()  # not collected
    assert [p.name for p in checkpoints.glob("*.checkpoint.json")] == [f"{latest:020d}.checkpoint.json"]
    assert result.collect()[0]["version"] == latest == result.collect()[0]["version"]  # rows, not a re-run
    connect_plugin.write(make_df(spark, 5, start=10), str(table), options={**TEXT_OPTS, **json_state})
    assert [r["version"] for r in history.collect()] == list(range(latest + 1, -1, -1))


def test_one_name_for_a_row_condition(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "where"
    small_appends(spark, table, 2)
    t = IndexTable.for_path(spark, str(table))
    assert ids(t.to_df(where="id < 3")) == [0, 1, 2]
    with pytest.warns(DeprecationWarning, match=r"to_df\(filter=...\) is deprecated"):
        assert ids(t.to_df(filter="id < 3")) == [0, 1, 2]
    with pytest.raises(Exception, match="not also as filter"):
        t.to_df(where="id < 3", filter="id < 2")
    assert t.count(where="id < 3") == 3 and t.count("msg:timeout", where="id > 0") == 1  # ids 0 and 5 time out
    n = {"n": {"value_count": {"field": "id"}}}
    assert t.aggregate(n, where={"op": "in", "column": "id", "values": [1, 2]})["n"]["value"] == 2
    with pytest.warns(DeprecationWarning, match="aggregate"):
        assert t.aggregate(n, query={"op": "in", "column": "id", "values": [1, 2]})["n"]["value"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names warn about nothing
        assert t.aggregate(n, query="msg:timeout")["n"]["value"] == 2


README_SECTION = "# Client plugin: table API and SQL (Spark Connect or classic)"


def test_the_readme_table_api_example_runs_as_written(spark: Any, tmp_path: Path) -> None:
    """The README's IndexTable block, on a local table with the columns it names (only the path swapped)."""
    (block,) = [b for b in python_blocks(README_SECTION) if "IndexTable.for_path" in b]
    path = str(tmp_path / "logs")
    utc = datetime.timezone.utc
    for day in ("2023-12-31", "2024-05-01", "2024-05-01"):
        rows = [
            (
                datetime.datetime(2024, 5, 1, tzinfo=utc) + datetime.timedelta(minutes=i),
                f"needle timeout {i}" if i % 3 else f"request {i} served",
                ["INFO", "ERROR"][i % 2],
                i * 100,
                day,
            )
            for i in range(12)
        ]
        df = spark.createDataFrame(rows, "ts timestamp, message string, level string, latency_ms long, day string")
        connect_plugin.write(
            df, path, partition_by=["day"], options={"spark.indextables.indexing.typemap.message": "text"}
        )
    assert block.count("s3://bucket/logs") >= 4
    env: dict[str, Any] = {"spark": spark}
    exec(compile(block.replace("s3://bucket/logs", path), "README: table API", "exec"), env)
    t = env["t"]
    assert t.to_df(where="day < '2024-01-01'").count() == 0  # drop_partitions ran, without .show()
    assert t.count() == 24 and t.count("needle") == 16
    merges = [e.operation for e in executor_lib.open_log(path).history()]
    assert merges.count("MERGE SPLITS") >= 1 and "DROP PARTITIONS" in " ".join(merges).upper().replace("_", " ")


def test_describe_state_says_when_the_next_write_rewrites_manifests_for_tombstones(
    classic_spark: Any, tmp_path: Path
) -> None:
    """One of 20 files removed: a tombstone below the share that rewrites its manifest (10%), so the state
    keeps it, and DESCRIBE says no rewrite is due, until the session allows no tombstone at all."""
    from executor_lib.protocol.actions import RemoveAction
    from tests.log.helpers import add, make_table

    log = make_table(str(tmp_path / "t"), {})
    adds = [add() for _ in range(20)]
    log.commit(adds)
    log.commit([RemoveAction(adds[0].path, 1, partition_values=adds[0].partition_values, size=adds[0].size)])
    key = "spark.indextables.state.compaction.maxTombstones"

    def described() -> Any:
        return connect_plugin.sql(classic_spark, f"DESCRIBE INDEXTABLES STATE '{tmp_path / 't'}'").collect()[0]

    row = described()
    assert (row["format"], row["num_files"], row["num_tombstones"], row["needs_compaction"]) == (
        "avro-state",
        19,
        1,
        False,
    )
    classic_spark.conf.set(key, "0")
    try:
        assert described()["needs_compaction"] is True
    finally:
        classic_spark.conf.unset(key)
