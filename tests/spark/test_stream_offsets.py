"""``IndexTablesStreamReader``'s offsets and file planning on real tables, driven the way Spark's driver
side calls it (initialOffset, latestOffset with a read limit, partitions, commit), without a query:
what each micro-batch would read, which versions are refused, and what the options accept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxFiles

import executor_lib
from executor_lib.protocol.actions import AddAction, removes_of
from executor_lib.spark.datasource import IndexTablesDataSource
from executor_lib.spark.streaming import IndexTablesStreamReader, IndexTablesStreamWriter
from indextables_contract.errors import ConfigError, StreamingReadError
from tests.log.helpers import add, make_table


def reader(path: Path, **options: Any) -> IndexTablesStreamReader:
    opts = {"path": str(path), **{k: str(v) for k, v in options.items()}}
    schema = IndexTablesDataSource(opts).schema()
    return IndexTablesStreamReader(opts, schema)  # type: ignore[arg-type]


def batches(r: IndexTablesStreamReader, start: dict[str, Any], limit: Any) -> list[list[str]]:
    """The split paths of each micro-batch until no new data, committing each."""
    out = []
    while True:
        end = r.latestOffset(start, limit)
        if end == start:
            return out
        out.append([ref.path for p in r.partitions(start, end) for ref in p.splits])
        r.commit(end)
        start = end


def test_snapshot_first_then_changes_in_bounded_batches(tmp_path: Path) -> None:
    log = make_table(str(tmp_path / "t"), {})
    first = [add(), add(), add()]
    log.commit(first)
    r = reader(tmp_path / "t", maxFilesPerTrigger=2)
    assert r.getDefaultReadLimit() == ReadMaxFiles(2)
    start = r.initialOffset()
    assert start == {"version": 1, "index": 0, "snapshot": True}
    second = [add(), add()]
    log.commit(second)
    got = batches(r, start, ReadMaxFiles(2))
    assert got == [
        sorted(a.path for a in first)[:2],
        [sorted(a.path for a in first)[2], second[0].path],
        [second[1].path],
    ]
    # everything available at once
    assert batches(reader(tmp_path / "t"), start, ReadAllAvailable()) == [
        sorted(a.path for a in first) + [a.path for a in second]
    ]


def test_a_merge_is_not_emitted_and_deletes_need_ignore_deletes(tmp_path: Path) -> None:
    log = make_table(str(tmp_path / "t"), {})
    log.commit([add(), add()])  # 1
    files = log.snapshot().files
    merged = AddAction(
        path="date=2024-01-01/splits/m.split",
        partition_values={"date": "2024-01-01"},
        size=9,
        modification_time=1,
        data_change=False,
        num_records=20,
        num_merge_ops=1,
    )
    log.commit([*removes_of(files, data_change=False), merged], operation="MERGE SPLITS")  # 2
    appended = add()
    log.commit([appended])  # 3
    log.commit(removes_of([merged], data_change=True), operation="DROP PARTITIONS")  # 4
    r = reader(tmp_path / "t", startingVersion=2)
    start = r.initialOffset()
    with pytest.raises(StreamingReadError, match=r"version 4 removed data .*ignoreDeletes=true"):
        r.latestOffset(start, ReadAllAvailable())
    r = reader(tmp_path / "t", startingVersion=2, ignoreDeletes="true")
    assert batches(r, start, ReadAllAvailable()) == [[appended.path]]
    assert r.latestOffset(start, ReadAllAvailable()) == {"version": 5, "index": 0, "snapshot": False}


def test_starting_version_and_bad_options_are_named(tmp_path: Path) -> None:
    log = make_table(str(tmp_path / "t"), {})
    log.commit([add()])
    assert reader(tmp_path / "t", startingVersion="latest").initialOffset()["version"] == 2
    with pytest.raises(ConfigError, match="startingVersion 7 is newer than the latest version 1"):
        reader(tmp_path / "t", startingVersion=7)
    with pytest.raises(ConfigError, match="startingVersion='x'"):
        reader(tmp_path / "t", startingVersion="x")
    with pytest.raises(ConfigError, match="maxFilesPerTrigger"):
        reader(tmp_path / "t", maxFilesPerTrigger=0)
    with pytest.raises(ConfigError, match="ignoreDeletes"):
        reader(tmp_path / "t", ignoreDeletes="maybe")
    with pytest.raises(ConfigError, match="versionAsOf is for batch reads"):
        reader(tmp_path / "t", versionAsOf=0)
    with pytest.raises(StreamingReadError, match="not an IndexTables offset"):
        reader(tmp_path / "t").latestOffset({"logOffset": 3}, ReadAllAvailable())


def test_stream_writes_refuse_overwrite_and_json_state_tables(tmp_path: Path) -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("id", LongType()), StructField("date", StringType())])
    with pytest.raises(ConfigError, match="append output mode"):
        IndexTablesStreamWriter({"path": str(tmp_path / "a")}, schema, overwrite=True)
    json_state = {"path": str(tmp_path / "b"), "spark.indextables.state.format": "json"}
    with pytest.raises(ConfigError, match="Avro state format"):
        IndexTablesStreamWriter(json_state, schema, overwrite=False)
    executor_lib.create_table(str(tmp_path / "c"), add_schema(), **{"spark.indextables.state.format": "json"})
    with pytest.raises(ConfigError, match="CHECKPOINT INDEXTABLES"):
        IndexTablesStreamWriter({"path": str(tmp_path / "c")}, schema, overwrite=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def add_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("id", pa.int64()), ("date", pa.string())])


def test_a_retried_commit_call_keeps_the_files_a_replay_deletes_its_own(tmp_path: Path) -> None:
    """Spark may call a batch's commit again with the same messages (its commit process died after the
    table commit): nothing is committed twice and the committed splits stay. A replayed batch (new
    tasks, new uploads) is skipped and only its own uploads are deleted."""
    import pyarrow as pa
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType([StructField("id", LongType()), StructField("msg", StringType())])
    path = tmp_path / "t"
    writer = IndexTablesStreamWriter({"path": str(path), "txnAppId": "q"}, schema, overwrite=False)

    def upload(n: int) -> Any:
        batch = pa.RecordBatch.from_pydict({"id": list(range(n)), "msg": [f"m{i}" for i in range(n)]})
        return writer.write(iter([batch]))

    first = upload(5)
    writer.commit([first], 0)
    writer.commit([first], 0)  # the same call again
    replay = upload(5)
    writer.commit([replay], 0)
    log = executor_lib.open_log(str(path))
    assert log.latest_version() == 1
    assert {a.path for a in log.snapshot().files} == {a.path for a in first.adds}
    assert {str(p.relative_to(path)) for p in path.rglob("*.split")} == {a.path for a in first.adds}
