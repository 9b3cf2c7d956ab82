"""Columns from where they are cheapest (issue 51): a query's hits read numeric and boolean fast-field
columns from Tantivy's fast fields, the other columns from the rows; the values are exactly the
rows' (the doc store's), nulls, NaN, -0.0 and the extremes included; a projection of fast columns
only reads no doc-store block (counted by the read-path profiler)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from executor_lib import profiler
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.query.pushdown import FilterPlan
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.search.table_search import scan_split, scan_split_batches
from indextables_contract import filters as F

ROWS = 5_000


def _table() -> pa.Table:
    i = np.arange(ROWS)
    floats = np.where(i % 7 == 0, np.nan, (i - 2500) * 1.25e-3)
    floats[1], floats[2], floats[3] = -0.0, np.inf, -1.7976931348623157e308
    return pa.table(
        {
            "id": pa.array(i, pa.int64()),
            "small": pa.array(np.where(i % 5 == 0, None, (i % 200) - 100).tolist(), pa.int32()),
            "big": pa.array([2**63 - 1 - k if k % 3 else -(2**63) + k for k in range(ROWS)], pa.int64()),
            "unsigned": pa.array([2**64 - 1 - k for k in range(ROWS)], pa.uint64()),
            "ratio": pa.array(floats, pa.float64()),
            "single": pa.array(np.where(i % 4 == 0, None, i / 3).tolist(), pa.float32()),
            "flag": pa.array([None if k % 6 == 0 else k % 2 == 0 for k in range(ROWS)], pa.bool_()),
            "day": pa.array([None if k % 9 == 0 else k for k in range(ROWS)], pa.date32()),
            "ts": pa.array([k * 1_000_001 for k in range(ROWS)], pa.timestamp("us", tz="UTC")),
            "level": pa.array([["INFO", "WARN", None][k % 3] for k in range(ROWS)], pa.string()),
            "msg": pa.array([f"word{k % 10} common {k}" for k in range(ROWS)], pa.string()),
        }
    )


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory) -> SplitSearcher:
    from executor_lib.splits.write.writer import write_split

    table = _table()
    out = tmp_path_factory.mktemp("fast")
    mapping = mapping_for(table.schema, {"spark.indextables.indexing.typemap.msg": "text"}, [])
    written = write_split(table, mapping, out, threads=1)
    return SplitSearcher(written.path, out / "work", table.schema, mapping.to_json())


def _same(a: pa.ChunkedArray, b: pa.ChunkedArray) -> bool:
    """Equal values, NaN equal to NaN and -0.0 told from 0.0 (compared bit for bit)."""
    if a.type != b.type or len(a) != len(b):
        return False
    if pa.types.is_floating(a.type):
        x, y = a.to_pylist(), b.to_pylist()
        return all(
            (p is None and q is None)
            or (p is not None and q is not None and ((math.isnan(p) and math.isnan(q)) or repr(p) == repr(q)))
            for p, q in zip(x, y, strict=True)
        )
    return bool(a.equals(b))


def _blocks(directory: Path) -> int:
    caches = profiler.counters(directory).get("caches", {})
    return int(caches.get("doc_store_block_hit", 0) + caches.get("doc_store_block_miss", 0))


COLUMNS = ["id", "small", "big", "unsigned", "ratio", "single", "flag", "day", "ts", "level", "msg"]


def test_the_fast_columns_are_the_numeric_and_boolean_ones(searcher: SplitSearcher) -> None:
    assert searcher.fast_columns(COLUMNS) == ["id", "small", "big", "unsigned", "ratio", "single", "flag"]


@pytest.mark.parametrize("query", ["common", "word3", "word3 OR word4"])
@pytest.mark.parametrize("limit", [None, 7, 300])
def test_fast_values_equal_the_rows(searcher: SplitSearcher, query: str, limit: int | None) -> None:
    plan = FilterPlan(F.QueryString(query, "msg"), None)
    got = pa.concat_tables(list(scan_split_batches(searcher, plan, COLUMNS, limit=limit))).sort_by("id")
    every = scan_split(searcher, plan, COLUMNS)  # every column from the doc store, in row order
    want = every.filter(pc.is_in(every.column("id"), value_set=got.column("id").combine_chunks()))
    assert got.num_rows == (every.num_rows if limit is None else limit) and got.schema == want.schema
    assert got.schema == want.schema and got.num_rows == want.num_rows
    for name in COLUMNS:
        assert _same(got.column(name), want.column(name)), name


def test_a_fast_column_projection_reads_no_doc_store_block(searcher: SplitSearcher, tmp_path: Path) -> None:
    plan = FilterPlan(F.QueryString("common", "msg"), None)
    profiler.set_enabled(tmp_path, True)
    try:
        fast: Any = pa.concat_tables(list(scan_split_batches(searcher, plan, ["id", "ratio", "flag"])))
        assert fast.num_rows == ROWS and _blocks(tmp_path) == 0
        mixed = pa.concat_tables(list(scan_split_batches(searcher, plan, ["id", "msg"])))
        assert _blocks(tmp_path) > 0  # the text column from the doc store
    finally:
        profiler.set_enabled(tmp_path, False)
    assert sorted(fast.column("id").to_pylist()) == list(range(ROWS))
    assert mixed.sort_by("id").column("msg").to_pylist() == [f"word{k % 10} common {k}" for k in range(ROWS)]
