"""``ORDER BY <column> [ASC|DESC] LIMIT k`` pushed as a per-task top k (``ReadPlan.top_k_order``): the
order of ``order_positions`` is Spark's (nulls first ascending, last descending, NaN above every
number), a split reads the rows of its best k only, and a read task sends at most k rows, the best."""

from __future__ import annotations

import datetime
import math
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.splits.search.ranking import order_positions
from indextables_contract import filters as F
from indextables_contract.read import ReadPlan

WORDS = ["timeout", "upstream", "error", "disk", "retry", "cache"]
OPTIONS = {"spark.indextables.indexing.typemap.message": "text"}
N = 600


def rows(n: int = N, seed: int = 11) -> pa.Table:
    """Rows with ties (``n``: 7 values), nulls in every ordered column, NaN among the floats."""
    rng = random.Random(seed)
    start = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "message": [" ".join(rng.choices(WORDS, k=rng.randint(1, 6))) for _ in range(n)],
            "n": pa.array([None if i % 13 == 0 else i % 7 for i in range(n)], pa.int32()),
            "score": pa.array(
                [None if i % 11 == 0 else math.nan if i % 29 == 0 else rng.uniform(-50, 50) for i in range(n)],
                pa.float64(),
            ),
            "ts": pa.array(
                [None if i % 17 == 0 else start + datetime.timedelta(seconds=rng.randint(0, 10**7)) for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "day": pa.array(
                [
                    None if i % 19 == 0 else datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 40)
                    for i in range(n)
                ],
                pa.date32(),
            ),
        }
    )


def write_table(path: str, data: pa.Table, splits: int, options: dict[str, str] | None = None) -> Any:
    options = {**OPTIONS, **(options or {})}
    log = executor_lib.create_table(path, data.schema, **options)
    mapping = executor_lib.mapping_for(data.schema, options)
    step = -(-data.num_rows // splits)
    log.commit(
        [
            executor_lib.write_and_upload(log.store, data.slice(i, step), mapping, {})
            for i in range(0, data.num_rows, step)
        ]
    )
    return log


def key(value: Any) -> str:
    """A value comparable across results (NaN equals NaN)."""
    return repr(value)


def spark_order(values: list[Any], descending: bool, nulls_first: bool) -> list[Any]:
    """``values`` as Spark's ORDER BY sorts them (the reference ``order_positions`` must match)."""
    nulls = [v for v in values if v is None]
    nans = [v for v in values if isinstance(v, float) and math.isnan(v)]
    numbers = sorted(v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    ranked = numbers + nans
    if descending:
        ranked = ranked[::-1]
    return nulls + ranked if nulls_first else ranked + nulls


@pytest.mark.parametrize("column", ["n", "score", "ts", "day"])
@pytest.mark.parametrize(("descending", "nulls_first"), [(False, True), (True, False), (False, False), (True, True)])
def test_order_positions_is_sparks_order(column: str, descending: bool, nulls_first: bool) -> None:
    values = rows()[column]
    got = [values[int(i)].as_py() for i in order_positions(values, descending, nulls_first)]
    want = spark_order(values.to_pylist(), descending, nulls_first)
    assert [key(v) for v in got] == [key(v) for v in want]
    top = order_positions(values, descending, nulls_first, 9)
    assert [key(values[int(i)].as_py()) for i in top] == [key(v) for v in want[:9]]


def read_partitions(path: str, plan: ReadPlan, parallelism: int) -> list[pa.Table]:
    from pyspark.sql.pandas.types import to_arrow_schema

    from executor_lib.spark.datasource import IndexTablesDataSource

    options = {"path": path, "spark.indextables.read.parallelism": str(parallelism), **plan.to_options()}
    source = IndexTablesDataSource(options)
    schema = source.schema()
    reader = source.reader(schema)
    target = to_arrow_schema(schema, timezone="UTC")
    return [pa.Table.from_batches(list(reader.read(p)), target) for p in reader.partitions()]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize(("column", "descending"), [("ts", True), ("score", False), ("n", True), ("day", False)])
def test_a_read_task_sends_at_most_k_rows_the_best(tmp_path: Path, fast: bool, column: str, descending: bool) -> None:
    """The reader as Spark runs it: 12 splits in one task, then in two; each task sends at most k rows,
    and the best k of all tasks are the table's first k in Spark's order. ``fast``: the column's values
    come from its fast field, else from the rows (``fastfields`` narrowed to ``id``)."""
    data = rows()
    path = str(tmp_path / "t")
    write_table(path, data, 12, None if fast else {"spark.indextables.indexing.fastfields": "id"})
    query = F.QueryString("timeout", "message")
    matching = [r for r in data.to_pylist() if "timeout" in r["message"].split()]
    nulls_first = not descending
    k = 15
    for filter_ in (query, None):
        base = matching if filter_ is not None else data.to_pylist()
        want = spark_order([r[column] for r in base], descending, nulls_first)
        plan = ReadPlan(columns=("id", column), filter=filter_, top_k=k, top_k_order=(column, descending, nulls_first))
        for parallelism in (1, 2):
            parts = read_partitions(path, plan, parallelism)
            assert len(parts) == parallelism
            assert all(p.num_rows <= k for p in parts)
            got = pa.concat_tables(parts)
            got_values = spark_order(got[column].to_pylist(), descending, nulls_first)[:k]
            assert [key(v) for v in got_values] == [key(v) for v in want[:k]]
            by_id = {r["id"]: r[column] for r in base}
            assert all(
                key(by_id[i]) == key(v) for i, v in zip(got["id"].to_pylist(), got[column].to_pylist(), strict=True)
            )
        every = pa.concat_tables(read_partitions(path, ReadPlan(columns=("id", column), filter=filter_), 1))
        assert every.num_rows == len(base)  # without the top k, every row


def test_a_column_not_ordered_here_is_not_pushed(tmp_path: Path) -> None:
    """A string column's top k is left to Spark: every matching row is sent."""
    data = rows(100)
    path = str(tmp_path / "t")
    write_table(path, data, 3)
    plan = ReadPlan(columns=("id", "message"), top_k=5, top_k_order=("message", False, True))
    assert pa.concat_tables(read_partitions(path, plan, 1)).num_rows == 100


def test_the_option_reads_as_users_write_it() -> None:
    assert ReadPlan.from_options({"scoreTopK": "3", "topKOrderBy": "ts desc"}).top_k_order == ("ts", True, False)
    assert ReadPlan.from_options({"scoreTopK": "3", "topKOrderBy": "ts"}).top_k_order == ("ts", False, True)
    plan = ReadPlan(top_k=3, top_k_order=("ts", False, False))
    assert ReadPlan.from_options(plan.to_options()) == plan
    with pytest.raises(Exception, match="needs scoreTopK"):
        ReadPlan.from_options({"topKOrderBy": "ts"})


def test_a_filter_left_to_spark_turns_the_top_k_off(tmp_path: Path) -> None:
    """A DataFrame read's top k (options) holds while Spark's filters are answered on the executors; a
    filter Spark checks after the read (here equality on tokenized text) turns it off: every row is sent."""
    from pyspark.sql.datasource import EqualTo, GreaterThan

    from executor_lib.spark.datasource import IndexTablesDataSource

    path = str(tmp_path / "t")
    write_table(path, rows(50), 2)
    plan = ReadPlan(columns=("id", "ts"), top_k=3, top_k_order=("ts", True, False))
    for spark_filter, kept in ((GreaterThan(("n",), 3), True), (EqualTo(("message",), "retry cache"), False)):
        source = IndexTablesDataSource({"path": path, **plan.to_options()})
        reader = source.reader(source.schema())
        list(reader.pushFilters([spark_filter]))
        assert (reader.ordered is not None) is kept
