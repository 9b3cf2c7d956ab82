"""``ORDER BY <column> [ASC|DESC] LIMIT k`` through Spark (classic and Connect): pushed as each task's best
k by the column (explain says so), with the same rows as Spark's own ORDER BY ... LIMIT over the same
rows — ascending and descending, ties, nulls, NaN, 12 splits, with and without an index query."""

from __future__ import annotations

from typing import Any

import pytest

import connect_plugin
from tests.splits.search.test_ordered_top_k import key, rows, write_table

K = 17
MATCHES = "array_contains(split(message, ' '), 'timeout')"  # the index query, as Spark evaluates it


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("ordered") / "t")
    write_table(path, rows(), 12)
    return path


def spark_reference(spark: Any, path: str, where: str | None, order: str, k: int) -> list[tuple[str, Any]]:
    """Spark's own ORDER BY ... LIMIT over the table's rows (a plain read: nothing pushed)."""
    df = spark.read.format("indextables").load(path)
    df.createOrReplaceTempView("ordered_reference")
    text = "SELECT id, n, score, ts, day FROM ordered_reference"
    if where is not None:
        text += f" WHERE {where}"
    return [tuple(r) for r in spark.sql(f"{text} ORDER BY {order} LIMIT {k}").collect()]


@pytest.mark.parametrize(
    "order",
    ["ts DESC", "ts", "score DESC", "score ASC", "n DESC", "n", "day ASC NULLS LAST", "n DESC NULLS FIRST"],
)
@pytest.mark.parametrize("query", [True, False])
def test_sql_top_k_by_a_column_is_sparks_order_by_limit(spark: Any, table: str, order: str, query: bool) -> None:
    column = order.split()[0]
    where = "message indexquery 'timeout'" if query else None
    reference_where = MATCHES if query else None
    text = f"SELECT id, n, score, ts, day FROM indextables.`{table}`"
    if where is not None:
        text += f" WHERE {where}"
    text += f" ORDER BY {order} LIMIT {K}"
    shown = order.upper() if " " in order else f"{order.upper()} ASC"
    if "NULLS" not in shown:
        shown += " NULLS LAST" if "DESC" in shown else " NULLS FIRST"
    assert f"best rows by {column} {shown.split(' ', 1)[1]} per task: {K}" in connect_plugin.explain(spark, text)
    got = [tuple(r) for r in connect_plugin.sql(spark, text).collect()]
    want = spark_reference(spark, table, reference_where, order, K)
    position = ["id", "n", "score", "ts", "day"].index(column)
    assert len(got) == len(want) == K
    assert [key(r[position]) for r in got] == [key(r[position]) for r in want]  # ties may pick other rows
    everything = {r[0]: r for r in spark_reference(spark, table, reference_where, "id", 10**6)}
    assert all(key(everything[r[0]]) == key(r) for r in got)  # each row is a real row of the read


def test_dataframe_options_push_the_top_k(spark: Any, table: str) -> None:
    df = (
        spark.read.format("indextables")
        .option("indexquery.message", "timeout")
        .option("scoreTopK", str(K))
        .option("topKOrderBy", "ts desc")
        .option("spark.indextables.read.parallelism", "2")
        .load(table)
    )
    assert df.count() <= K * 2  # at most K rows from each of the (at most two) tasks of local[2]
    got = [r["ts"] for r in df.orderBy(df.ts.desc()).limit(K).collect()]
    want = [r[3] for r in spark_reference(spark, table, MATCHES, "ts DESC", K)]
    assert got == want


def test_an_order_by_an_alias_or_a_string_is_still_right(spark: Any, table: str) -> None:
    """``ORDER BY`` an alias naming another column is not pushed; a string column is sent whole."""
    text = f"SELECT id AS n, n AS id FROM indextables.`{table}` ORDER BY n DESC LIMIT 5"
    assert "best rows by" not in connect_plugin.explain(spark, text)
    assert [r[0] for r in connect_plugin.sql(spark, text).collect()] == [599, 598, 597, 596, 595]
    text = f"SELECT id, message FROM indextables.`{table}` ORDER BY message DESC LIMIT 3"
    got = connect_plugin.sql(spark, text).collect()
    assert [r["message"] for r in got] == sorted((r["message"] for r in rows().to_pylist()), reverse=True)[:3]
