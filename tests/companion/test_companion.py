"""Companion indexes (BUILD INDEXTABLES COMPANION): built over Parquet directories and Delta tables,
searched through ``format("indextables")`` with answers equal to Spark (or deltalake) over the source,
synced incrementally after appends, deletes and overwrites, and a vanished source file named.

Classic and Spark Connect sessions (``spark`` is parametrized over both; the Connect runs are marked slow).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import executor_lib
from connect_plugin.sql import sql
from indextables_contract import commands as C

# The Connect variants (a second JVM and its Python workers) take minutes on a loaded 2-core machine.
SESSIONS = ["classic", pytest.param("connect", marks=pytest.mark.slow)]
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]


def _rows(start: int, n: int, day: str | None = None) -> pa.Table:
    ids = list(range(start, start + n))
    columns: dict[str, Any] = {
        "id": pa.array(ids, pa.int64()),
        "msg": [f"{WORDS[i % 6]} {WORDS[(i // 6) % 6]} event {'kraken' if i % 17 == 0 else 'plain'}" for i in ids],
        "level": ["ERROR" if i % 5 == 0 else "INFO" for i in ids],
        "latency": pa.array([float(i % 97) for i in ids], pa.float64()),
    }
    return pa.table(columns)


def _parquet_source(root: Path) -> Path:
    """A Hive-partitioned directory: 2 days, 2 files each (several row groups)."""
    src = root / "src"
    for d, day in enumerate(("2024-01-01", "2024-01-02")):
        (src / f"day={day}").mkdir(parents=True)
        for f in range(2):
            start = (d * 2 + f) * 250
            pq.write_table(_rows(start, 250), src / f"day={day}" / f"part-{f}.parquet", row_group_size=64)
    return src


def _build(spark: Any, statement: str) -> dict[str, Any]:
    df = sql(spark, statement)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        tuple(c.split()) if c.split()[1] != "long" else (c.split()[0], "bigint") for c in C.COMPANION_OUTPUT.split(", ")
    ]  # IndexTables4Spark's output columns and types
    rows = df.collect()
    assert len(rows) == 1
    return rows[0].asDict()


def _source(spark: Any, src: Path) -> Any:
    """Spark over the source directory (its partition column as the string the directory names hold)."""
    return spark.read.parquet(str(src)).selectExpr("id", "msg", "level", "latency", "CAST(day AS STRING) AS day")


def _ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.collect())


@pytest.fixture(params=SESSIONS)
def spark(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(f"{request.param}_spark")


def test_parquet_companion_build_search_aggregate_and_sync(spark: Any, tmp_path: Path) -> None:
    src, index = _parquet_source(tmp_path), str(tmp_path / "index")
    statement = f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' INDEXING MODES ('msg':'text') AT LOCATION '{index}'"
    out = _build(spark, statement)
    assert (
        out["status"],
        out["source_version"],
        out["splits_created"],
        out["splits_invalidated"],
        out["parquet_files_indexed"],
    ) == ("success", None, 2, 0, 4)
    assert out["table_path"] == index and out["source_path"] == str(src) and out["split_bytes_uploaded"] > 0

    # The log: the JVM's companion fields and metadata keys; the splits hold no row copies.
    snap = executor_lib.open_log(index).snapshot()
    conf = snap.metadata.configuration
    assert conf["indextables.companion.enabled"] == "true"
    assert (
        conf["indextables.companion.sourceFormat"],
        conf["indextables.companion.sourceTablePath"],
        conf["indextables.companion.lastSyncedVersion"],
        conf["indextables.companion.fastFieldMode"],
    ) == ("parquet", str(src), "-1", "HYBRID")
    assert json.loads(conf["indextables.companion.columnTypes"]) == {
        "id": "bigint",
        "msg": "string",
        "level": "string",
        "latency": "double",
        "day": "string",
    }
    assert json.loads(conf["indextables.companion.indexingModes"]) == {"msg": "text"}
    assert sorted(f for a in snap.files for f in a.companion_source_files or ()) == sorted(
        str(p.relative_to(src)) for p in src.rglob("*.parquet")
    )
    assert {a.companion_fast_field_mode for a in snap.files} == {"HYBRID"}
    assert {a.companion_delta_version for a in snap.files} == {-1}
    fields = [f for a in snap.files for f in json.loads(snap.doc_mapping(a))]
    assert len(fields) == 12 and not any(f["stored"] for f in fields)  # index-only: no row copies
    # tantivy4java's locator fast fields are in every companion split (see tests/format/test_parquet_manifest.py)
    assert {f["name"]: f["fast"] for f in fields} == {
        "id": True,
        "latency": True,
        "msg": False,
        "level": False,
        "__pq_file_hash": True,
        "__pq_row_in_file": True,
    }
    assert {a.partition_values["day"] for a in snap.files} == {"2024-01-01", "2024-01-02"}
    assert sum(a.num_records or 0 for a in snap.files) == 1000

    baseline = _source(spark, src)
    got = sql(spark, f"SELECT id, msg, level, day FROM indextables.`{index}` WHERE msg indexquery 'kraken'")
    expected = baseline.where("msg LIKE '%kraken%'").select("id", "msg", "level", "day")
    assert sorted(map(tuple, got.collect())) == sorted(map(tuple, expected.collect()))
    assert len(got.collect()) == len([i for i in range(1000) if i % 17 == 0])
    # an index query with an exact filter and a partition filter
    got = sql(
        spark,
        f"SELECT id FROM indextables.`{index}` WHERE msg indexquery 'alpha AND bravo' "
        "AND level = 'ERROR' AND day = '2024-01-02'",
    )
    want = baseline.where("msg LIKE '%alpha%' AND msg LIKE '%bravo%' AND level = 'ERROR' AND day = '2024-01-02'")
    assert _ids(got) == _ids(want) and _ids(want)
    # aggregates: count, sum and avg on fast fields, grouped by a partition column and by a string column
    agg = sql(
        spark,
        f"SELECT day, count(*) AS n, sum(id) AS s, avg(latency) AS a FROM indextables.`{index}` "
        "WHERE msg indexquery 'echo' GROUP BY day ORDER BY day",
    )
    baseline.createOrReplaceTempView("companion_source")
    want_agg = spark.sql(
        "SELECT day, count(*) AS n, sum(id) AS s, avg(latency) AS a FROM companion_source "
        "WHERE msg LIKE '%echo%' GROUP BY day ORDER BY day"
    )
    got_rows, want_rows = agg.collect(), want_agg.collect()
    assert [tuple(r)[:3] for r in got_rows] == [tuple(r)[:3] for r in want_rows]
    assert [r["a"] for r in got_rows] == pytest.approx([r["a"] for r in want_rows])
    by_level = sql(spark, f"SELECT level, count(*) AS n FROM indextables.`{index}` GROUP BY level ORDER BY level")
    assert [tuple(r) for r in by_level.collect()] == [("ERROR", 200), ("INFO", 800)]

    # Incremental sync: nothing new; then a new file; then a removed file (its split rebuilt from the rest).
    assert _build(spark, statement)["status"] == "no_action"
    pq.write_table(_rows(1000, 100), src / "day=2024-01-02" / "part-9.parquet")
    out = _build(spark, statement)
    assert (out["status"], out["splits_created"], out["splits_invalidated"], out["parquet_files_indexed"]) == (
        "success",
        1,
        0,
        1,
    )
    os.remove(src / "day=2024-01-01" / "part-0.parquet")
    out = _build(spark, statement)
    assert (out["splits_created"], out["splits_invalidated"], out["parquet_files_indexed"]) == (1, 1, 1)
    baseline = _source(spark, src)
    for query, like in (
        ("kraken", "msg LIKE '%kraken%'"),
        ("delta OR foxtrot", "msg LIKE '%delta%' OR msg LIKE '%foxtrot%'"),
    ):
        got = sql(spark, f"SELECT id FROM indextables.`{index}` WHERE msg indexquery '{query}'")
        assert _ids(got) == _ids(baseline.where(like))
    total = sql(spark, f"SELECT count(*) FROM indextables.`{index}`").collect()[0][0]
    assert total == baseline.count() == 850


def test_vanished_source_file_is_named(classic_spark: Any, tmp_path: Path) -> None:
    spark = classic_spark
    src, index = _parquet_source(tmp_path), str(tmp_path / "index")
    from connect_plugin import IndexTable

    built = IndexTable.for_path(spark, index).build_companion("parquet", str(src)).collect()[0]  # the API form
    assert (built["status"], built["splits_created"], built["parquet_files_indexed"]) == ("success", 2, 4)
    gone = src / "day=2024-01-01" / "part-1.parquet"
    gone.unlink()
    with pytest.raises(Exception, match=r"part-1\.parquet no longer exists.*BUILD INDEXTABLES COMPANION"):
        spark.read.format("indextables").load(index).where("day = '2024-01-01'").collect()
    # the other partition still reads; a rewritten file (another size and time than BUILD pinned) is refused too
    assert spark.read.format("indextables").load(index).where("day = '2024-01-02'").count() == 500
    pq.write_table(_rows(0, 10), src / "day=2024-01-02" / "part-0.parquet")
    with pytest.raises(Exception, match=r"part-0\.parquet was rewritten after the companion was built"):
        spark.read.format("indextables").load(index).where("day = '2024-01-02'").collect()


def test_a_rewrite_keeping_size_and_mtime_is_refused_and_rebuilt(classic_spark: Any, tmp_path: Path) -> None:
    """A source file rewritten in place with other rows but the same size and its modification time
    restored: a read refuses it (its Parquet footer's CRC32 differs from BUILD's), never answering the
    stale index's rows, and BUILD again re-indexes it (also after MERGE SPLITS combined its split)."""
    spark = classic_spark
    src, index = tmp_path / "src", str(tmp_path / "index")
    src.mkdir()
    plain = {"row_group_size": 64, "compression": "none", "use_dictionary": False}  # sizes depend on nothing else
    for f in range(2):
        pq.write_table(_rows(f * 250, 250), src / f"part-{f}.parquet", **plain)
    statement = f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' INDEXING MODES ('msg':'text') AT LOCATION '{index}'"
    assert _build(spark, statement.replace(" AT ", " TARGET INPUT SIZE 1K AT "))["splits_created"] == 2
    sql(spark, f"MERGE SPLITS '{index}' TARGET SIZE 100M").collect()  # the merged split keeps both files' pins
    assert [a.num_merge_ops for a in executor_lib.open_log(index).snapshot().files] == [1]
    victim = src / "part-1.parquet"
    before = os.stat(victim)
    rows = _rows(250, 250)
    moved = rows.set_column(0, "id", pa.array([i + 1000 for i in rows.column("id").to_pylist()], pa.int64()))
    pq.write_table(moved, victim, **plain)  # in place: the same inode, other ids
    os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(victim)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)

    def kraken() -> list[int]:
        return _ids(sql(spark, f"SELECT id FROM indextables.`{index}` WHERE msg indexquery 'kraken'"))

    with pytest.raises(Exception, match=r"part-1\.parquet was rewritten after the companion was built.*footer"):
        kraken()
    out = _build(spark, statement)  # the sync finds the rewrite (size and time alone would say no_action)
    assert (out["status"], out["parquet_files_indexed"]) == ("success", 2)  # the split's two files, again
    expected = [i for i in range(250) if i % 17 == 0] + [i + 1000 for i in range(250, 500) if i % 17 == 0]
    assert kraken() == expected
    assert _build(spark, statement)["status"] == "no_action"


def test_a_delta_source_file_rewritten_to_the_same_size_and_mtime_is_refused_and_rebuilt(
    classic_spark: Any, tmp_path: Path
) -> None:
    """As above for a Delta source, whose log keeps listing the file's old size and time: the rewrite (other
    ids, padded to the same size in its footer's key-value metadata) is refused and BUILD again re-indexes it."""
    deltalake = pytest.importorskip("deltalake")
    spark = classic_spark
    src, index = tmp_path / "delta", str(tmp_path / "index")
    deltalake.write_deltalake(str(src), _rows(0, 300))
    statement = f"BUILD INDEXTABLES COMPANION FOR DELTA '{src}' INDEXING MODES ('msg':'text') AT LOCATION '{index}'"
    assert _build(spark, statement)["status"] == "success"
    (victim,) = src.glob("*.parquet")
    before = os.stat(victim)
    old = pq.read_table(victim)
    moved = old.set_column(0, "id", pa.array([i + 1000 for i in old.column("id").to_pylist()], pa.int64()))
    for pad in range(4096):  # the footer's metadata grows a byte per character
        with pq.ParquetWriter(victim, moved.schema, store_schema=False) as writer:
            writer.write_table(moved)
            writer.add_key_value_metadata({"pad": "x" * pad})
        if os.stat(victim).st_size >= before.st_size:
            break
    os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(victim)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    query = f"SELECT id FROM indextables.`{index}` WHERE msg indexquery 'kraken'"
    with pytest.raises(Exception, match=r"was rewritten after the companion was built.*footer"):
        _ids(sql(spark, query))
    out = _build(spark, statement)
    assert (out["status"], out["parquet_files_indexed"]) == ("success", 1)
    assert _ids(sql(spark, query)) == [i + 1000 for i in range(300) if i % 17 == 0]


def test_dry_run_where_and_clause_errors(classic_spark: Any, tmp_path: Path) -> None:
    from indextables_contract.errors import IndexTablesSQLError

    spark = classic_spark
    src, index = _parquet_source(tmp_path), tmp_path / "index"
    out = _build(
        spark, f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' TARGET INPUT SIZE 1K AT LOCATION '{index}' DRY RUN"
    )
    assert (out["status"], out["splits_created"], out["parquet_files_indexed"]) == ("dry_run", 4, 4)
    assert out["message"] == "Would create 4 companion splits from 4 parquet files"
    assert not index.exists()  # a dry run writes nothing
    out = _build(
        spark,
        f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' SCHEMA SOURCE "
        f"'{src}/day=2024-01-01/part-0.parquet' INCLUDE COLUMNS ('MSG', 'level') "
        f"WHERE day = '2024-01-02' AT LOCATION '{index}'",
    )
    assert (out["splits_created"], out["parquet_files_indexed"]) == (1, 2)
    snap = executor_lib.open_log(str(index)).snapshot()
    assert [f["name"] for f in json.loads(snap.doc_mapping(snap.files[0]))] == [
        "msg",
        "level",
        "__pq_file_hash",
        "__pq_row_in_file",
    ]
    assert json.loads(snap.metadata.configuration["indextables.companion.includeColumns"]) == ["msg", "level"]
    assert snap.metadata.configuration["indextables.companion.whereClause"] == "day = '2024-01-02'"
    # a column not indexed is still read from the source (Spark evaluates the filter on the rows)
    got = spark.read.format("indextables").load(str(index)).where("latency = 3.0").select("id").collect()
    assert sorted(r["id"] for r in got) == [i for i in range(500, 1000) if i % 97 == 3]
    # a strip mode: the pattern's matches are not indexed, and the rows read back keep them
    stripped = tmp_path / "stripped"
    _build(
        spark,
        f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' INDEXING MODES ('msg':'text_custom_strip:krak[a-z]+') "
        f"AT LOCATION '{stripped}'",
    )
    assert sql(spark, f"SELECT id FROM indextables.`{stripped}` WHERE msg indexquery 'kraken'").count() == 0
    found = sql(spark, f"SELECT id, msg FROM indextables.`{stripped}` WHERE msg indexquery 'event' AND id = 17")
    assert [tuple(r) for r in found.collect()] == [(17, "foxtrot charlie event kraken")]
    # read-only, as the JVM's companions: writes are refused, naming what to do (merges: see below)
    some = spark.read.format("indextables").load(str(index)).limit(3)
    with pytest.raises(Exception, match="companion indexes are read-only: run BUILD INDEXTABLES COMPANION"):
        some.write.format("indextables").mode("append").save(str(index))
    for statement, message in (
        (
            f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' INCLUDE COLUMNS ('msg') EXCLUDE COLUMNS ('id') "
            f"AT LOCATION '{index}'",
            "mutually exclusive",
        ),
        (
            f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' INCLUDE COLUMNS ('nope') AT LOCATION '{index}-2'",
            "column 'nope' is not in the source",
        ),
        (
            f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' FROM VERSION 3 AT LOCATION '{index}-2'",
            "FROM VERSION applies to FOR DELTA only",
        ),
        (
            f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' FASTFIELDS MODE FAST AT LOCATION '{index}-2'",
            "expected HYBRID, DISABLED or PARQUET_ONLY",
        ),
    ):
        with pytest.raises(Exception, match=message):
            sql(spark, statement).collect()
    with pytest.raises(IndexTablesSQLError):
        sql(spark, f"BUILD INDEXTABLES COMPANION FOR CSV '{src}' AT LOCATION '{index}'")


def test_delta_companion_sync_after_append_delete_overwrite(spark: Any, tmp_path: Path) -> None:
    deltalake = pytest.importorskip("deltalake")
    src, index = str(tmp_path / "delta"), str(tmp_path / "index")

    def with_part(t: pa.Table, part: str) -> pa.Table:
        return t.append_column("part", pa.array([part] * t.num_rows))

    deltalake.write_deltalake(src, with_part(_rows(0, 300), "a"), partition_by=["part"])
    deltalake.write_deltalake(src, with_part(_rows(300, 300), "b"), partition_by=["part"], mode="append")
    statement = (
        f"BUILD INDEXTABLES COMPANION FOR DELTA '{src}' INDEXING MODES ('msg':'text') "
        f"FASTFIELDS MODE DISABLED AT LOCATION '{index}'"
    )

    def check(version: int) -> None:
        truth = deltalake.DeltaTable(src).to_pyarrow_table()
        want = sorted(
            i for i, m in zip(truth["id"].to_pylist(), truth["msg"].to_pylist(), strict=True) if "kraken" in m
        )
        got = sql(spark, f"SELECT id, part FROM indextables.`{index}` WHERE msg indexquery 'kraken'")
        assert _ids(got) == want
        n = sql(spark, f"SELECT count(*) AS n, sum(id) AS s FROM indextables.`{index}`").collect()[0]
        assert (n["n"], n["s"]) == (truth.num_rows, sum(truth["id"].to_pylist()))
        conf = executor_lib.open_log(index).snapshot().metadata.configuration
        assert conf["indextables.companion.lastSyncedVersion"] == str(version)

    out = _build(spark, statement)
    assert (out["status"], out["source_version"], out["splits_created"], out["parquet_files_indexed"]) == (
        "success",
        1,
        2,
        2,
    )
    check(1)
    deltalake.write_deltalake(src, with_part(_rows(600, 50), "a"), partition_by=["part"], mode="append")
    out = _build(spark, statement)
    assert (out["source_version"], out["splits_created"], out["splits_invalidated"], out["parquet_files_indexed"]) == (
        2,
        1,
        0,
        1,
    )
    check(2)
    assert {a.companion_delta_version for a in executor_lib.open_log(index).snapshot().files} == {1, 2}
    deltalake.DeltaTable(src).delete("part = 'b'")  # removes b's file: its split is invalidated
    out = _build(spark, statement)
    assert (out["source_version"], out["splits_created"], out["splits_invalidated"]) == (3, 0, 1)
    check(3)
    deltalake.DeltaTable(src).delete("id < 10")  # rewrites a's first file: invalidated and rebuilt
    out = _build(spark, statement)
    assert (out["splits_created"], out["splits_invalidated"]) == (1, 1)
    check(4)
    deltalake.write_deltalake(src, with_part(_rows(2000, 40), "c"), partition_by=["part"], mode="overwrite")
    out = _build(spark, statement)
    assert (out["splits_created"], out["splits_invalidated"], out["parquet_files_indexed"]) == (1, 2, 1)
    check(5)
    # FROM VERSION on a fresh companion: only files added after that version
    fresh = str(tmp_path / "fresh")
    deltalake.write_deltalake(src, with_part(_rows(3000, 20), "c"), partition_by=["part"], mode="append")
    out = _build(spark, f"BUILD INDEXTABLES COMPANION FOR DELTA '{src}' FROM VERSION 5 AT LOCATION '{fresh}'")
    assert (out["source_version"], out["parquet_files_indexed"]) == (6, 1)
    assert sql(spark, f"SELECT count(*) FROM indextables.`{fresh}`").collect()[0][0] == 20
    shutil.rmtree(fresh)


def _iceberg_catalog(root: Path) -> tuple[Any, dict[str, str]]:
    """A pyiceberg SQL catalog on SQLite and the session options that name it (the JVM's setting keys)."""
    from pyiceberg.catalog.sql import SqlCatalog

    uri, warehouse = f"sqlite:///{root / 'catalog.db'}", f"file://{root / 'warehouse'}"
    catalog = SqlCatalog("local", uri=uri, warehouse=warehouse)
    options = {"spark.indextables.iceberg.uri": uri, "spark.indextables.iceberg.warehouse": warehouse}
    return catalog, options


def test_iceberg_companion_sync_after_append_delete_overwrite(classic_spark: Any, tmp_path: Path) -> None:
    pytest.importorskip("pyiceberg")
    spark = classic_spark
    catalog, options = _iceberg_catalog(tmp_path)
    catalog.create_namespace("analytics")
    table = catalog.create_table("analytics.web_events", schema=_rows(0, 1).schema)
    table.append(_rows(0, 300))
    table.append(_rows(300, 200))
    index = str(tmp_path / "index")
    statement = (
        f"BUILD INDEXTABLES COMPANION FOR ICEBERG 'analytics.web_events' CATALOG 'local' TYPE 'sql' "
        f"INCLUDE COLUMNS ('msg', 'level', 'latency') INDEXING MODES ('msg':'text') AT LOCATION '{index}'"
    )

    def check() -> None:
        truth = catalog.load_table("analytics.web_events").scan().to_arrow()
        want = sorted(
            i for i, m in zip(truth["id"].to_pylist(), truth["msg"].to_pylist(), strict=True) if "kraken" in m
        )
        got = sql(spark, f"SELECT id FROM indextables.`{index}` WHERE msg indexquery 'kraken'", options)
        assert _ids(got) == want
        row = sql(spark, f"SELECT count(*) AS n, sum(latency) AS s FROM indextables.`{index}`", options).collect()[0]
        assert (row["n"], row["s"]) == (truth.num_rows, pytest.approx(sum(truth["latency"].to_pylist())))

    out = sql(spark, statement, options).collect()[0]
    snapshot = catalog.load_table("analytics.web_events").current_snapshot()
    assert (out["status"], out["source_version"], out["splits_created"], out["parquet_files_indexed"]) == (
        "success",
        snapshot.snapshot_id,
        1,
        2,
    )
    conf = executor_lib.open_log(index).snapshot().metadata.configuration
    assert (
        conf["indextables.companion.sourceFormat"],
        conf["indextables.companion.icebergCatalog"],
        conf["indextables.companion.icebergCatalogType"],
    ) == ("iceberg", "local", "sql")
    check()
    first = snapshot.snapshot_id
    table = catalog.load_table("analytics.web_events")
    table.append(_rows(500, 50))
    out = sql(spark, statement, options).collect()[0]
    assert (out["splits_created"], out["splits_invalidated"], out["parquet_files_indexed"]) == (1, 0, 1)
    check()
    table = catalog.load_table("analytics.web_events")
    table.delete("id < 5")  # copy-on-write: the first file is rewritten
    out = sql(spark, statement, options).collect()[0]
    assert out["splits_invalidated"] == 1 and out["splits_created"] == 1
    check()
    table = catalog.load_table("analytics.web_events")
    table.overwrite(_rows(1000, 30))
    out = sql(spark, statement, options).collect()[0]
    assert (out["splits_created"], out["parquet_files_indexed"]) == (1, 1)
    check()
    # FROM SNAPSHOT: a fresh companion of the files added after the first snapshot... all were replaced since
    fresh = str(tmp_path / "fresh")
    out = sql(
        spark,
        f"BUILD INDEXTABLES COMPANION FOR ICEBERG 'analytics.web_events' CATALOG 'local' TYPE 'sql' "
        f"FROM SNAPSHOT {first} AT LOCATION '{fresh}'",
        options,
    ).collect()[0]
    assert out["parquet_files_indexed"] == 1


def test_a_concurrent_build_of_the_same_files_conflicts(tmp_path: Path) -> None:
    """Two BUILDs planned at the same companion version: the second commit finds the first's splits
    indexing its files and refuses (no row would be indexed twice)."""
    import dataclasses

    from executor_lib.spark.companion import _check_no_concurrent_build
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.publish import write_and_upload
    from indextables_contract.errors import CommitConflictError

    rows = _rows(0, 10)
    log = executor_lib.create_table(str(tmp_path / "c"), rows.schema)
    add = write_and_upload(log.store, rows, mapping_for(rows.schema, {}))
    mine = dataclasses.replace(add, companion_source_files=("a.parquet", "b.parquet"))
    _check_no_concurrent_build(log, 0, [mine], set())  # nothing committed since version 0
    log.commit([dataclasses.replace(add, companion_source_files=("b.parquet",))])
    with pytest.raises(CommitConflictError, match=r"indexed the same source files \['b.parquet'\]"):
        _check_no_concurrent_build(log, 0, [mine], set())
    _check_no_concurrent_build(log, 0, [mine], {add.path})  # that split is being removed by this commit


def test_merge_splits_of_a_companion_keeps_every_row_address(classic_spark: Any, tmp_path: Path) -> None:
    spark = classic_spark
    from executor_lib.format.quickwit.bundle import read_footer, read_member
    from executor_lib.format.tantivy4java import parquet_manifest as PM

    src, index = _parquet_source(tmp_path), str(tmp_path / "index")
    out = _build(
        spark,
        f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' INDEXING MODES ('msg':'text') "
        f"TARGET INPUT SIZE 1K AT LOCATION '{index}'",
    )
    assert out["splits_created"] == 4  # one file per split
    query = "SELECT id, msg, level, latency, day FROM indextables.`{}` WHERE msg indexquery 'kraken OR bravo'"
    before = sorted(sql(spark, query.format(index)).collect())
    sql(spark, f"MERGE SPLITS '{index}' TARGET SIZE 100M").collect()
    snap = executor_lib.open_log(index).snapshot()
    assert len(snap.files) == 2 and {a.num_merge_ops for a in snap.files} == {1}  # one split per partition
    for add in snap.files:
        assert len(add.companion_source_files or ()) == 2 and add.companion_delta_version == -1
        assert add.companion_fast_field_mode == "HYBRID"
    after = sorted(sql(spark, query.format(index)).collect())
    assert after == before and len(after) > 100
    expected = _source(spark, src).where("msg LIKE '%kraken%' OR msg LIKE '%bravo%'")
    assert after == sorted(expected.collect())
    assert sql(spark, f"SELECT count(*) AS n, sum(latency) AS s FROM indextables.`{index}`").collect()[0] == tuple(
        _source(spark, src).selectExpr("count(*) AS n", "sum(latency) AS s").collect()[0]
    )

    # the merged split's manifest: both files, offsets shifted, one range per segment of the merged index
    split = Path(index) / snap.files[0].path
    footer = read_footer(split)
    manifest = PM.deserialize_manifest(read_member(split, footer, PM.MANIFEST_MEMBER) or b"", str(split))
    assert [f["row_offset"] for f in manifest["parquet_files"]] == [0, 250] and manifest["total_rows"] == 500
    assert [f["relative_path"] for f in manifest["parquet_files"]] == list(snap.files[0].companion_source_files or ())
    assert len(manifest["segment_row_ranges"]) >= 2
    # tantivy4java's resolution on the merged index: every document's (__pq_file_hash, __pq_row_in_file)
    # names the source row whose id its fast field holds
    import numpy as np
    import tantivy

    from executor_lib.format.quickwit.bundle import extract_bundle

    extract_bundle(split, footer, tmp_path / "merged")
    idx = tantivy.Index.open(str(tmp_path / "merged"))
    searcher = idx.searcher()
    addresses = [a for _, a in searcher.search(tantivy.Query.all_query(), 1000).hits]
    hashes = np.array(searcher.fast_field_values("__pq_file_hash", addresses), np.uint64)
    rows = searcher.fast_field_values("__pq_row_in_file", addresses)
    ids = searcher.fast_field_values("id", addresses)
    files = manifest["parquet_files"]
    tables = [pq.read_table(src / f["relative_path"]).column("id").to_pylist() for f in files]
    got = [tables[p][r] for p, r in zip(PM.file_index_of_hashes(manifest, hashes, "merged"), rows, strict=True)]
    assert len(addresses) == 500 and got == ids


def test_exact_only_and_text_uuid_exactonly_modes(classic_spark: Any, tmp_path: Path) -> None:
    """tantivy4java's hashed modes: exact_only indexes xxHash64 of the value (u64 field); text_uuid_exactonly
    indexes the text without its UUIDs, and their hashes in <column>__uuids; rows keep the source's values."""
    import uuid

    from executor_lib.format.quickwit.bundle import read_footer, read_member
    from executor_lib.format.tantivy4java import parquet_manifest as PM

    spark = classic_spark
    src, index = tmp_path / "src", str(tmp_path / "index")
    src.mkdir()
    ids = list(range(300))
    uuids = [str(uuid.UUID(int=(i * 7919) << 64 | i)) for i in ids]
    pq.write_table(
        pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "trace": [f"trace-{i % 40}" for i in ids],
                "msg": [f"request {u} {WORDS[i % 6]} done" for i, u in zip(ids, uuids, strict=True)],
            }
        ),
        src / "part-0.parquet",
        row_group_size=100,
    )
    _build(
        spark,
        f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' INDEXING MODES ('trace':'exact_only', "
        f"'msg':'text_uuid_exactonly') AT LOCATION '{index}'",
    )
    t = f"indextables.`{index}`"
    source = spark.read.parquet(str(src))
    assert _ids(sql(spark, f"SELECT id FROM {t} WHERE trace = 'trace-7'")) == [i for i in ids if i % 40 == 7]
    assert _ids(sql(spark, f"SELECT id FROM {t} WHERE trace IN ('trace-1', 'trace-2')")) == [
        i for i in ids if i % 40 in (1, 2)
    ]
    assert _ids(sql(spark, f"SELECT id FROM {t} WHERE trace indexquery 'trace-9'")) == [i for i in ids if i % 40 == 9]
    # a range cannot use hashes: Spark compares the rows (read from the source), as the JVM refuses the pushdown
    assert _ids(sql(spark, f"SELECT id FROM {t} WHERE trace > 'trace-38'")) == [
        i for i in ids if f"trace-{i % 40}" > "trace-38"
    ]
    assert _ids(sql(spark, f"SELECT id FROM {t} WHERE msg indexquery '{uuids[123]}'")) == [123]
    assert _ids(sql(spark, f"SELECT id FROM {t} WHERE msg indexquery 'bravo'")) == [i for i in ids if i % 6 == 1]
    row = sql(spark, f"SELECT trace, msg FROM {t} WHERE id = 5").collect()[0]
    assert (row["trace"], row["msg"]) == ("trace-5", f"request {uuids[5]} foxtrot done")  # the source's values
    grouped = sql(spark, f"SELECT trace, count(*) AS n FROM {t} GROUP BY trace").collect()
    assert sorted(map(tuple, grouped)) == sorted(map(tuple, source.groupBy("trace").count().collect()))

    snap = executor_lib.open_log(index).snapshot()
    add = snap.files[0]
    assert "trace" not in (add.min_values or {})  # the hashes' range says nothing of the strings
    fields = {f["name"]: f for f in json.loads(snap.doc_mapping(add))}
    assert (fields["trace"]["type"], fields["msg__uuids"]["type"], fields["msg"]["type"]) == ("u64", "u64", "text")
    split = Path(index) / add.path
    manifest = PM.deserialize_manifest(read_member(split, read_footer(split), PM.MANIFEST_MEMBER) or b"", "s")
    assert manifest["string_indexing_modes"] == {
        "trace": {"mode": "exact_only"},
        "msg": {"mode": "text_uuid_exactonly"},
    }
    assert manifest["companion_hash_fields"] == {
        "msg__uuids": {"original_field_name": "msg", "regex_pattern": PM.UUID_REGEX}
    }
    assert manifest["string_hash_fields"] == {"trace": "trace", "msg__uuids": "msg__uuids"}
    by_name = {c["tantivy_field_name"]: c for c in manifest["column_mapping"]}
    assert (by_name["trace"]["tantivy_type"], by_name["msg"]["fast_field_tokenizer"]) == ("U64", "text_uuid_exactonly")


def test_hashed_fastfields_are_tantivy4java_string_fingerprints(classic_spark: Any, tmp_path: Path) -> None:
    import numpy as np
    import tantivy

    from executor_lib.format.quickwit.bundle import extract_bundle, read_footer, read_member
    from executor_lib.format.tantivy4java import parquet_manifest as PM

    spark = classic_spark
    src, index = _parquet_source(tmp_path), str(tmp_path / "index")
    with pytest.raises(Exception, match=r"HASHED FASTFIELDS: 'latency' is not a plain string column"):
        _build(
            spark,
            f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' HASHED FASTFIELDS INCLUDE ('latency') "
            f"AT LOCATION '{index}'",
        )
    _build(
        spark,
        f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' INDEXING MODES ('msg':'text') "
        f"HASHED FASTFIELDS INCLUDE ('LEVEL') AT LOCATION '{index}'",
    )
    snap = executor_lib.open_log(index).snapshot()
    # stored as written, as SyncToExternalCommand.buildCompanionMetadata does
    assert snap.metadata.configuration["indextables.companion.hashedFastfieldsInclude"] == "LEVEL"
    add = snap.files[0]
    assert {f["name"] for f in json.loads(snap.doc_mapping(add))} >= {"_phash_level", "level", "__pq_file_hash"}
    split = Path(index) / add.path
    footer = read_footer(split)
    manifest = PM.deserialize_manifest(read_member(split, footer, PM.MANIFEST_MEMBER) or b"", str(split))
    assert manifest["string_hash_fields"] == {"level": "_phash_level"}
    extract_bundle(split, footer, tmp_path / "x")
    searcher = tantivy.Index.open(str(tmp_path / "x")).searcher()
    addresses = [a for _, a in searcher.search(tantivy.Query.all_query(), 1000).hits]
    hashes = searcher.fast_field_values("_phash_level", addresses)
    files = PM.file_index_of_hashes(
        manifest, np.array(searcher.fast_field_values("__pq_file_hash", addresses), np.uint64), "x"
    )
    rows = searcher.fast_field_values("__pq_row_in_file", addresses)
    levels = [
        pq.read_table(src / manifest["parquet_files"][f]["relative_path"]).column("level")[r].as_py()
        for f, r in zip(files, rows, strict=True)
    ]
    assert hashes == [PM.hash_string_value(v) for v in levels] and len(levels) == 500
    # the fingerprints change nothing a query sees; a sync keeps the stored choice
    assert _ids(sql(spark, f"SELECT id FROM indextables.`{index}` WHERE level = 'ERROR'")) == _ids(
        _source(spark, src).where("level = 'ERROR'")
    )
    pq.write_table(_rows(5000, 10), src / "day=2024-01-02" / "part-9.parquet")
    _build(spark, f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' AT LOCATION '{index}'")
    snap = executor_lib.open_log(index).snapshot()
    new = [a for a in snap.files if "day=2024-01-02/part-9.parquet" in (a.companion_source_files or ())]
    assert len(new) == 1 and "_phash_level" in {f["name"] for f in json.loads(snap.doc_mapping(new[0]))}


def test_splits_in_the_jvm_layout_read_through_spark_with_a_relocated_source(
    classic_spark: Any, tmp_path: Path
) -> None:
    """A companion whose splits hold only tantivy4java's layout (index + _parquet_manifest.json, as
    IndexTables4Spark writes them) reads through the source root; spark.indextables.companion.parquetTableRoot
    points it at a moved source, as the JVM's reader option does."""
    import dataclasses

    from executor_lib.format.quickwit.bundle import read_footer
    from executor_lib.protocol.actions import RemoveAction
    from tests.format.test_parquet_manifest import _as_jvm_layout

    spark = classic_spark
    src, index = _parquet_source(tmp_path), str(tmp_path / "index")
    _build(
        spark, f"BUILD INDEXTABLES COMPANION FOR PARQUET '{src}' INDEXING MODES ('msg':'text') AT LOCATION '{index}'"
    )
    log = executor_lib.open_log(index)
    actions: list[Any] = []
    for add in log.snapshot().files:
        old = Path(index) / add.path
        new = _as_jvm_layout(old, old.with_name("jvm-" + old.name))
        footer = read_footer(new)
        actions += [
            RemoveAction(path=add.path, deletion_timestamp=1, data_change=False),
            dataclasses.replace(
                add,
                path=str(new.relative_to(index)),
                size=new.stat().st_size,
                footer_start_offset=footer.footer_start,
                footer_end_offset=footer.footer_end,
            ),
        ]
    log.commit(actions)
    query = f"SELECT id, msg, level, day FROM indextables.`{index}` WHERE msg indexquery 'kraken' AND level = 'ERROR'"
    expected = sorted(_source(spark, src).where("msg LIKE '%kraken%' AND level = 'ERROR'").drop("latency").collect())
    assert sorted(sql(spark, query).collect()) == expected and len(expected) > 5
    moved = tmp_path / "moved"
    src.rename(moved)
    with pytest.raises(Exception, match=r"no longer exists"):
        sql(spark, query).collect()
    reader = spark.read.format("indextables").option("spark.indextables.companion.parquetTableRoot", str(moved))
    got = reader.load(index).where("level = 'ERROR'").selectExpr("id", "msg", "level", "day")
    assert sorted(got.filter("msg LIKE '%kraken%'").collect()) == expected
