"""``spark.indextables.query.fuzzyTranspositions`` through Spark (classic and Connect): ``hte`` is within
``the~1`` by default (a transposition one edit), not with the setting false (two edits), for rows and
for a pushed ``count(*)``; the DataFrame read option says the same."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import connect_plugin
from indextables_contract import settings as S
from tests.splits.search.test_ordered_top_k import write_table

KEY = S.QUERY_FUZZY_TRANSPOSITIONS.key
DATA = pa.table({"id": pa.array(range(5), pa.int64()), "message": ["the cat", "hte cat", "teh", "tha", "dog"]})


@pytest.fixture
def table(tmp_path: Path, spark: Any) -> Iterator[str]:
    path = str(tmp_path / "t")
    write_table(path, DATA, 2)
    yield path
    spark.conf.unset(KEY)


def test_a_transposition_counts_as_the_setting_says(spark: Any, table: str) -> None:
    rows = f"SELECT id FROM indextables.`{table}` WHERE message fuzzyquery 'the~1' ORDER BY id"
    count = f"SELECT count(*) FROM indextables.`{table}` WHERE message fuzzyquery 'the~1'"
    assert [r[0] for r in connect_plugin.sql(spark, rows).collect()] == [0, 1, 2, 3]
    assert connect_plugin.sql(spark, count).collect()[0][0] == 4
    spark.conf.set(KEY, "false")
    assert [r[0] for r in connect_plugin.sql(spark, rows).collect()] == [0, 3]
    assert connect_plugin.sql(spark, count).collect()[0][0] == 2
    two = f"SELECT id FROM indextables.`{table}` WHERE message fuzzyquery 'the~2' ORDER BY id"
    assert [r[0] for r in connect_plugin.sql(spark, two).collect()] == [0, 1, 2, 3]
    spark.conf.set(KEY, "true")
    assert [r[0] for r in connect_plugin.sql(spark, rows).collect()] == [0, 1, 2, 3]


def test_the_read_option(spark: Any, table: str) -> None:
    for value, want in (("false", [0, 3]), ("true", [0, 1, 2, 3])):
        read = connect_plugin.read(
            spark, table, columns=["id"], filter="message fuzzyquery 'the~1'", options={KEY: value}
        )
        assert sorted(r["id"] for r in read.collect()) == want
