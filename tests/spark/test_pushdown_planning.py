"""Which of Spark's pushed filters the reader answers itself (no Spark session needed: the
reader's planning runs in a plain Python process, as on the driver side)."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    In,
    IsNull,
    Not,
    StringContains,
    StringStartsWith,
)
from pyspark.sql.types import StructType

import executor_lib
from executor_lib.spark.reader import IndexTablesReader
from executor_lib.spark.writer import IndexTablesWriter
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage import open_store
from indextables_contract import filters as F

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("level", pa.string()),
        ("msg", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("f", pa.float32()),
        ("day", pa.string()),
    ]
)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "t"
    log = executor_lib.create_table(str(path), SCHEMA, ["day"])
    rows = pa.table(
        {
            "id": [1, 2],
            "level": ["INFO", None],
            "msg": ["a b", "c d"],
            "ts": pa.array([datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)] * 2, SCHEMA.field("ts").type),
            "f": pa.array([1.5, 2.5], pa.float32()),
        }
    )
    mapping = mapping_for(SCHEMA, {"spark.indextables.indexing.typemap.msg": "text"}, ["day"])
    log.commit([write_and_upload(open_store(str(path)), rows, mapping, {"day": "d1"})])
    return path


def reader(path: Path, **options: str) -> IndexTablesReader:
    snap = executor_lib.open_log(str(path)).snapshot()
    return IndexTablesReader(
        {"path": str(path), **options}, StructType.fromJson(__import__("json").loads(snap.metadata.schema_string))
    )


def test_exact_filters_are_consumed_and_others_returned(table: Path) -> None:
    r = reader(table)
    ts = datetime.datetime(2024, 1, 1, 0, 0, 0, 500000, tzinfo=datetime.timezone.utc)
    given = [
        EqualTo(("level",), "INFO"),  # exact string: answered by the index
        In(("id",), [1, 3]),  # exact
        IsNull(("level",)),  # exact (fast field)
        Not(EqualTo(("level",), "INFO")),  # exact with an existence guard
        StringStartsWith(("level",), "IN"),  # exact
        EqualTo(("msg",), "a b"),  # tokenized text: Spark keeps it
        StringContains(("msg",), "a"),  # tokenized text: Spark keeps it
        GreaterThan(("ts",), ts),  # timestamp: pushed as a superset, Spark re-checks
        EqualTo(("f",), 1.5),  # float32: Spark keeps it
        EqualTo(("day",), "d1"),  # partition column: pruning, Spark keeps it
    ]
    returned = list(r.pushFilters(given))
    assert returned == given[5:]
    assert len(r.pushed) == 6  # five exact + the timestamp superset
    assert len(r.pruning) == 9  # every filter but the timestamp one (temporal statistics are not compared)
    assert [len(p.splits) for p in r.partitions()] == [1]


def test_partition_and_stats_pruning(table: Path) -> None:
    r = reader(table)
    list(r.pushFilters([EqualTo(("day",), "d2")]))
    assert r.partitions() == []
    r = reader(table)
    list(r.pushFilters([GreaterThan(("id",), 5)]))
    assert r.partitions() == []


def test_writer_validates_before_any_task(table: Path) -> None:
    schema = StructType.fromJson(
        __import__("json").loads(executor_lib.open_log(str(table)).snapshot().metadata.schema_string)
    )
    w = IndexTablesWriter({"path": str(table)}, schema, overwrite=False)
    assert w.partition_columns == ["day"]
    assert '"tokenizer":"default"' in w.mapping_json  # inherited from the table's splits
    with pytest.raises(executor_lib.IndexTablesError, match="differs from the table's partition columns"):
        IndexTablesWriter({"path": str(table), "partitionby": "level"}, schema, overwrite=False)


def test_null_safe_equality_keeps_sql_semantics(table: Path) -> None:
    r = reader(table)
    given = [Not(EqualNullSafe(("level",), "INFO")), EqualTo(("level",), None), EqualNullSafe(("level",), None)]
    returned = list(r.pushFilters(given))
    # NOT(level <=> 'INFO') keeps NULL levels and level = NULL matches nothing: Spark keeps both;
    # level <=> NULL is IS NULL, answered exactly by the index
    assert returned == given[:2]
    assert r.pushed == [F.Not(F.Exists("level"))]
