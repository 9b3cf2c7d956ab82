"""GROUP BY and aggregates over columns that are not fast fields (``fastfields`` narrowed to ``id``)
answer as Spark does over the same rows, through classic and Connect sessions: with and without an
index query, grouping by and measuring numbers, floats with NaN and nulls (NaN above every number:
``max`` is NaN where a group has one), dates and timestamps; and the same over fast fields."""

from __future__ import annotations

import math
from typing import Any

import pytest

import connect_plugin
import executor_lib
from tests.splits.search.test_ordered_top_k import OPTIONS, rows, write_table

STATEMENTS = [
    "SELECT n, count(*) AS c, sum(id) AS s, max(ts) AS t, min(day) AS d FROM {t} GROUP BY n",
    "SELECT count(*) AS c, sum(n) AS s, avg(n) AS a, min(score) AS lo, max(score) AS hi, max(ts) AS t FROM {t} "
    "WHERE {match}",
    "SELECT day, avg(n) AS a, count(score) AS c FROM {t} WHERE {match} GROUP BY day ORDER BY day LIMIT 5",
    "SELECT n, max(score) AS hi, min(ts) AS t FROM {t} WHERE {match} AND day >= DATE'2024-01-10' GROUP BY n",
]


@pytest.fixture(scope="module", params=["not fast", "fast"])
def table(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> str:
    """The columns not fast fields (the split's rows answer), or by default fast (Tantivy's aggregations
    answer where they can): both as Spark answers."""
    path = str(tmp_path_factory.mktemp("notfast") / "t")
    options = {**OPTIONS, "spark.indextables.indexing.fastfields": "id"} if request.param == "not fast" else OPTIONS
    write_table(path, rows(), 4, options)
    mapping = executor_lib.mapping_for(rows().schema, options)
    fast = [getattr(mapping.field(c), "fast", None) for c in ("n", "score", "ts", "day")]
    assert fast == [request.param == "fast"] * 4
    return path


def same(value: Any) -> Any:
    return (
        "NaN"
        if isinstance(value, float) and math.isnan(value)
        else round(value, 9)
        if isinstance(value, float)
        else value
    )


@pytest.mark.parametrize("statement", STATEMENTS)
def test_aggregates_over_columns_that_are_not_fast_are_sparks(spark: Any, table: str, statement: str) -> None:
    got = connect_plugin.sql(
        spark, statement.format(t=f"indextables.`{table}`", match="message indexquery 'timeout'")
    ).collect()
    spark.read.format("indextables").load(table).createOrReplaceTempView("not_fast_reference")
    want = spark.sql(
        statement.format(t="not_fast_reference", match="array_contains(split(message, ' '), 'timeout')")
    ).collect()
    got_rows = [tuple(same(v) for v in r) for r in got]
    want_rows = [tuple(same(v) for v in r) for r in want]
    if "ORDER BY" not in statement:
        got_rows, want_rows = sorted(got_rows, key=repr), sorted(want_rows, key=repr)
    assert got_rows == want_rows
    assert got
