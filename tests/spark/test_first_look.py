"""The first look at a table (issue 55): ``limit(n)``, ``show()``, ``head()`` and ``LIMIT n`` read a
split's rows batch by batch, the first batch small, so that Spark stops the task after the rows it
needs; the answers stay exact (limits over filters, partitions, residual filters, match columns).

The doc-store blocks a read touches are counted by the read-path profiler (``doc_store_block`` hits
and misses, one per block a take reads), and the splits it opens by its ``searcher`` lookups."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import connect_plugin
import executor_lib
from connect_plugin.table import IndexTable
from executor_lib import profiler
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.query.pushdown import ROW_ID_COLUMN, FilterPlan
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.search.table_search import FIRST_BATCH_ROWS, scan_split, scan_split_batches
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage import open_store
from indextables_contract import filters as F

SCHEMA = pa.schema([("id", pa.int64()), ("level", pa.string()), ("msg", pa.string()), ("day", pa.string())])
SPLITS, ROWS = 4, 12_000  # rows of a split: several doc-store blocks of 64 KB each
LEVELS = ["INFO", "INFO", "WARN", "ERROR"]


def _rows(first: int) -> pa.Table:
    ids = range(first, first + ROWS)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "level": [LEVELS[i % 4] for i in ids],
            "msg": [f"request {i} word{i % 10} common " + "padding " * (i % 40) for i in ids],
        }
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("first_look") / "t"
    log = executor_lib.create_table(str(path), SCHEMA, ["day"])
    mapping = mapping_for(SCHEMA, {"spark.indextables.indexing.typemap.msg": "text"}, ["day"])
    store = open_store(str(path))
    adds = [write_and_upload(store, _rows(i * ROWS), mapping, {"day": f"d{i % 2}"}) for i in range(SPLITS)]
    log.commit(adds)
    return path


def _one_split(table: Path) -> SplitSearcher:
    snap = executor_lib.open_log(str(table)).snapshot()
    add = min(snap.files, key=lambda a: int((a.min_values or {})["id"]))  # the split of rows 0 .. ROWS - 1
    split = table / add.path
    work = table.parent / "work"
    return SplitSearcher(split, work, snap.arrow_schema(), snap.doc_mapping(add))


@contextlib.contextmanager
def _counting(directory: Path) -> Iterator[None]:
    profiler.set_enabled(directory, True)
    try:
        yield
    finally:
        profiler.set_enabled(directory, False)


def _blocks(counters: dict[str, Any]) -> int:
    caches = counters.get("caches", {})
    return int(caches.get("doc_store_block_hit", 0) + caches.get("doc_store_block_miss", 0))


def test_batches_grow_and_give_the_rows_of_scan_split(table: Path, tmp_path: Path) -> None:
    searcher = _one_split(table)
    everything = FilterPlan(None, None)
    with _counting(tmp_path):
        batches = scan_split_batches(searcher, everything, ["id", "msg"])
        first = next(batches)
        assert first.num_rows == FIRST_BATCH_ROWS == 32  # show() takes 21 rows: one small batch
        assert _blocks(profiler.counters(tmp_path)) == 1  # only the first rows' block was read
        rest = list(batches)
    growing = [32 * 4**k for k in range(1, 5)]  # 128 ... 8192, then what is left
    assert [b.num_rows for b in rest] == [*growing, ROWS - 32 - sum(growing)]
    whole = scan_split(searcher, everything, ["id", "msg"])
    assert pa.concat_tables([first, *rest]).equals(whole)
    limited = list(scan_split_batches(searcher, everything, ["id"], limit=300))
    assert [b.num_rows for b in limited] == [32, 128, 140]
    assert pa.concat_tables(limited).equals(scan_split(searcher, everything, ["id"], limit=300))


def test_batches_of_a_query_without_a_limit_give_every_hit_once(table: Path) -> None:
    searcher = _one_split(table)
    common = FilterPlan(F.QueryString("common", "msg"), None)  # every row: a first search of 32, then the rest
    batches = list(scan_split_batches(searcher, common, ["id"], row_ids=True))
    assert batches[0].num_rows == FIRST_BATCH_ROWS
    ids = pa.concat_tables(batches).column("id").to_pylist()
    assert sorted(ids) == list(range(ROWS)) and len(set(ids)) == ROWS
    word3 = FilterPlan(F.QueryString("word3", "msg"), None)  # 1,200 hits: a first search of 32, then the rest
    got = sorted(pa.concat_tables(list(scan_split_batches(searcher, word3, ["id"]))).column("id").to_pylist())
    assert got == sorted(scan_split(searcher, word3, ["id"]).column("id").to_pylist())
    assert got == [i for i in range(ROWS) if i % 10 == 3]
    residual = FilterPlan(F.QueryString("common", "msg"), F.Contains("msg", "word7 "))
    got = pa.concat_tables(list(scan_split_batches(searcher, residual, ["id", "day"], {"day": pa.scalar("d0")})))
    assert sorted(got.column("id").to_pylist()) == [i for i in range(ROWS) if i % 10 == 7]
    assert set(got.column("day").to_pylist()) == {"d0"}
    limited = pa.concat_tables(list(scan_split_batches(searcher, residual, ["id"], limit=5)))
    assert limited.num_rows == 5 and all(i % 10 == 7 for i in limited.column("id").to_pylist())


def test_a_split_read_after_the_first_rows_went_out_is_searched_once(
    table: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first search of 32 hits costs nearly a whole search (scoring visits every match), so only a
    task's first rows are probed for (``probe``): the reader's later splits are searched once."""
    searcher = _one_split(table)
    common = FilterPlan(F.QueryString("common", "msg"), None)
    limits: list[int | None] = []
    original = searcher.row_ids
    monkeypatch.setattr(searcher, "row_ids", lambda q, limit=None: limits.append(limit) or original(q, limit))
    probed = pa.concat_tables(list(scan_split_batches(searcher, common, ["msg"], row_ids=True)))
    assert limits == [FIRST_BATCH_ROWS, None]
    limits.clear()
    once = pa.concat_tables(list(scan_split_batches(searcher, common, ["msg"], row_ids=True, probe=False)))
    assert limits == [None]
    assert sorted(once.column(ROW_ID_COLUMN).to_pylist()) == sorted(probed.column(ROW_ID_COLUMN).to_pylist())
    assert once.num_rows == ROWS


def test_a_read_task_sends_a_small_first_batch_then_larger_ones() -> None:
    from executor_lib.spark.batches import coalesced

    def batch(start: int, n: int) -> pa.RecordBatch:
        return pa.record_batch([pa.array(range(start, start + n), pa.int64())], names=["id"])

    sizes = [b.num_rows for b in coalesced(iter([batch(0, 256), batch(256, 1024), batch(1280, 4096)]), 65_536, 256)]
    assert sizes == [256, 1024, 4096]  # each sent as soon as it is read
    small = [batch(i * 10, 10) for i in range(100)]  # a selective search: a few rows a split
    out = list(coalesced(iter(small), 500, 32))
    assert [b.num_rows for b in out] == [40, 130, 500, 330]  # held until the target: 32, then 128, 512 (cap 500)
    assert [v for b in out for v in b.column(0).to_pylist()] == list(range(1000))


def _all_rows(spark: Any, table: Path) -> dict[int, tuple[Any, ...]]:
    rows = spark.read.format("indextables").load(str(table)).collect()
    return {r["id"]: tuple(r) for r in rows}


def test_a_bare_limit_reads_at_most_one_doc_store_block_per_split_it_opens(
    classic_spark: Any, table: Path, tmp_path: Path
) -> None:
    """A LIMIT the reader knows (SQL, the table API) ends each task by itself: its counts are whole.
    (Under a DataFrame's ``limit(1)`` or ``show()`` Spark ends the task when it has its rows, and the
    task's last counts may be lost with its worker: see the in-process test above for the blocks.)"""
    from tests.connect_plugin.test_jvm_sql import own_node_directory

    spark = classic_spark
    with own_node_directory(spark, tmp_path / "cache"):
        spark.read.format("indextables").load(str(table)).limit(1).collect()  # the splits cached
        connect_plugin.sql(spark, "ENABLE INDEXTABLES PROFILER").collect()
        try:
            for n, look in (
                (20, lambda: connect_plugin.sql(spark, f"SELECT * FROM indextables.`{table}` LIMIT 20").collect()),
                (1, lambda: connect_plugin.read(spark, str(table), limit=1).collect()),
                (5, lambda: IndexTable.for_path(spark, str(table)).to_df(columns=["id", "msg"], limit=5).collect()),
            ):
                connect_plugin.sql(spark, "RESET INDEXTABLES PROFILER CACHE").collect()
                assert len(look()) == n
                caches = {
                    r["cache"]: r["hits"] + r["misses"]
                    for r in connect_plugin.sql(spark, "DESCRIBE INDEXTABLES PROFILER CACHE").collect()
                }
                opened = caches.get("searcher", 0)
                assert opened == 1  # a bare LIMIT is one task, which opens the first split only
                assert 1 <= caches.get("doc_store_block", 0) <= opened
        finally:
            connect_plugin.sql(spark, "DISABLE INDEXTABLES PROFILER").collect()


def test_a_bare_limit_is_one_task_whose_worker_spark_keeps(classic_spark: Any, table: Path) -> None:
    """``connect_plugin.sql``'s bare LIMIT n is one task of at most n rows under Spark's limit n + 1, so Spark
    reads the task's output to its end; a DataFrame built on it still filters after the limit."""
    spark = classic_spark
    df = connect_plugin.sql(spark, f"SELECT id, level FROM indextables.`{table}` LIMIT 30")
    rows = df.collect()
    assert len({r["id"] for r in rows}) == 30
    assert df.count() == 30
    errors = df.filter("level = 'ERROR'").collect()  # the first 30 rows, then the filter (not pushed below)
    assert sorted(r["id"] for r in errors) == sorted(r["id"] for r in rows if r["level"] == "ERROR")
    everything = connect_plugin.sql(spark, f"SELECT id FROM indextables.`{table}` LIMIT {SPLITS * ROWS + 5}")
    assert everything.count() == SPLITS * ROWS


def test_a_bare_select_is_the_read_itself(spark: Any, table: Path) -> None:
    """``SELECT * | col, ... FROM t [alias] [LIMIT n]`` (a first look; a search whose index query went
    into the read) runs as the table's read, without a view and a statement for Spark to analyze; its
    rows and columns are those Spark SQL would give."""
    every = _all_rows(spark, table)

    def views() -> list[str]:
        return sorted(t.name for t in spark.catalog.listTables() if t.name.startswith("indextables_"))

    before = views()
    got = connect_plugin.sql(spark, f"SELECT * FROM indextables.`{table}` LIMIT 25")
    assert got.columns == spark.read.format("indextables").load(str(table)).columns
    rows = got.collect()
    assert len({r["id"] for r in rows}) == 25 and all(every[r["id"]] == tuple(r) for r in rows)
    aliased = connect_plugin.sql(spark, f"select * from indextables.`{table}` as t")
    assert aliased.count() == SPLITS * ROWS
    searched = connect_plugin.sql(spark, f"SELECT id, level FROM indextables.`{table}` WHERE msg indexquery 'word3'")
    assert searched.columns == ["id", "level"]  # the index query went into the read: the rest is bare
    assert sorted(searched.collect()) == sorted((i, every[i][1]) for i in every if i % 10 == 3)
    assert views() == before  # no view registered for any of them
    with pytest.raises(Exception, match="did you mean 'level'"):  # not a column: Spark SQL, told in user terms
        connect_plugin.sql(spark, f"SELECT id, levl FROM indextables.`{table}` WHERE msg indexquery 'word3'").collect()
    where = connect_plugin.sql(spark, f"SELECT * FROM indextables.`{table}` t WHERE t.id < 7 LIMIT 5").collect()
    assert len(where) == 5 and all(r["id"] < 7 for r in where)  # not bare: Spark SQL over the read's view


def test_limits_give_exact_rows(classic_spark: Any, table: Path) -> None:
    spark = classic_spark
    every = _all_rows(spark, table)
    assert len(every) == SPLITS * ROWS

    def load() -> Any:
        return spark.read.format("indextables").load(str(table))

    for n in (1, 20, 300, 5000, SPLITS * ROWS + 10):
        got = load().limit(n).collect()
        assert len(got) == min(n, SPLITS * ROWS) and len({r["id"] for r in got}) == len(got)
        assert all(every[r["id"]] == tuple(r) for r in got)
    shown = load().head(21)
    assert len(shown) == 21 and all(every[r["id"]] == tuple(r) for r in shown)
    errors = load().filter("level = 'ERROR'").limit(700).collect()
    assert len({r["id"] for r in errors}) == 700 and all(r["level"] == "ERROR" and r["id"] % 4 == 3 for r in errors)
    day1 = load().filter("day = 'd1'").limit(ROWS + 5).collect()  # a partition: two splits
    assert len({r["id"] for r in day1}) == ROWS + 5 and all(r["day"] == "d1" for r in day1)
    query = connect_plugin.sql(
        spark, f"SELECT id, msg FROM indextables.`{table}` WHERE msg indexquery 'word3' AND level = 'ERROR' LIMIT 50"
    ).collect()
    assert len({r["id"] for r in query}) == 50 and all(r["id"] % 10 == 3 and r["id"] % 4 == 3 for r in query)
    tree = F.And((F.QueryString("common", "msg"), F.Contains("msg", "word7 ")))  # the Contains on the rows
    residual = connect_plugin.read(spark, str(table), columns=["id"], filter=tree, limit=30).collect()
    assert len({r["id"] for r in residual}) == 30 and all(r["id"] % 10 == 7 for r in residual)
    unlimited = connect_plugin.read(spark, str(table), columns=["id"], filter=tree).limit(2000).collect()
    assert len({r["id"] for r in unlimited}) == 2000 and all(r["id"] % 10 == 7 for r in unlimited)
    match = connect_plugin.sql(  # the indexquery under OR with a function call: a match column of the read
        spark,
        f"SELECT id, level FROM indextables.`{table}` WHERE msg indexquery 'word1' OR lower(level) = 'error' LIMIT 400",
    ).collect()
    assert len({r["id"] for r in match}) == 400
    assert all(r["id"] % 10 == 1 or r["level"] == "ERROR" for r in match)


def test_a_read_task_finds_the_stream_it_flushes(classic_spark: Any) -> None:
    """``read`` flushes the worker's output itself after each batch (``_SparkOutput``): the stream is
    found from ``read``'s caller frames in a real PySpark worker."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Probe(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(0)]

        def read(self, partition: Any) -> Iterator[Any]:
            import sys

            from executor_lib.spark.batches import dump_stream_output

            stream = dump_stream_output(sys._getframe(1))
            yield pa.record_batch([pa.array([type(stream).__name__])], names=["stream"])

    class ProbeSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "indextables_test_stream_probe"

        def schema(self) -> str:
            return "stream string"

        def reader(self, schema: Any) -> DataSourceReader:
            return Probe()

    classic_spark.dataSource.register(ProbeSource)
    found = classic_spark.read.format("indextables_test_stream_probe").load().collect()
    assert [r["stream"] for r in found] == ["BufferedWriter"]
