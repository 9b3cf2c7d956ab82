"""A newcomer's mistakes, replayed through every entry point a first script uses (``connect_plugin.read``,
``write`` and ``sql``, ``IndexTable``, the DataFrame API), in classic and Spark Connect sessions (where a
read's errors come at its first action, through ``project_error_first`` as the docs say): each one is
the project's typed error, its message leads with its ``[INDEXTABLES_*]`` line and fits in 5
lines, names what is wrong, and its printed traceback holds the caller's frames only, none of Spark's
(no ``PYTHON_DATA_SOURCE_ERROR``, no JVM stack: Spark's exception is the error's ``spark_error``)."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import pytest

import connect_plugin
from connect_plugin.failures import project_error_first
from connect_plugin.table import IndexTable
from indextables_contract.errors import IndexTablesError
from tests.spark.test_datasource import make_df

TEXT = {"spark.indextables.indexing.typemap.msg": "text"}
Mistake = Callable[[Any, str], Any]


def _sql(text: str) -> Mistake:
    return lambda spark, t: connect_plugin.sql(spark, text.replace("<t>", t)).collect()


MISTAKES: dict[str, tuple[Mistake, str]] = {
    "read a path that is no table": (
        lambda spark, t: connect_plugin.read(spark, t + "-nosuch").collect(),
        "not an IndexTables table",
    ),
    "an unknown setting": (
        lambda spark, t: connect_plugin.read(spark, t, options={"spark.indextables.nosuch": "1"}).collect(),
        "unknown option 'spark.indextables.nosuch'",
    ),
    "a per-column key misspelt": (
        lambda spark, t: connect_plugin.write(
            make_df(spark, 2), t + "-2", options={"spark.indextables.indexing.typmap.msg": "text"}
        ),
        "did you mean spark.indextables.indexing.typemap.msg",
    ),
    "a type name misspelt": (
        lambda spark, t: connect_plugin.write(
            make_df(spark, 2), t + "-3", options={"spark.indextables.indexing.typemap.msg": "txt"}
        ),
        "typemap.msg='txt'",
    ),
    "a query on a column the table lacks": (
        lambda spark, t: spark.read.format("indextables").option("indexquery.nosuch", "x").load(t).collect(),
        "column 'nosuch' is not in the table",
    ),
    "a query that does not parse": (
        _sql("SELECT * FROM indextables.`<t>` WHERE msg indexquery 'timeout AND ('"),
        "does not parse",
    ),
    "a table in SQL that does not exist": (_sql("SELECT * FROM indextables.`<t>-none`"), "not an IndexTables table"),
    "a version past the latest": (
        lambda spark, t: connect_plugin.read(spark, t, options={"versionAsOf": "99"}).collect(),
        "99",
    ),
    "an append of another schema": (
        lambda spark, t: connect_plugin.write(
            spark.createDataFrame([(1, "x")], "other long, msg string"), t, mode="append", options=TEXT
        ),
        "does not match the table's",
    ),
    "a partition column the data lacks": (
        lambda spark, t: connect_plugin.write(make_df(spark, 2), t + "-4", partition_by=["region"]),
        "region",
    ),
    "an idempotent write without its version": (
        lambda spark, t: connect_plugin.write(make_df(spark, 2), t, mode="append", options={"txnAppId": "a"}),
        "txnAppId needs txnVersion",
    ),
    "a DELETE on a column the table lacks": (
        lambda spark, t: IndexTable.for_path(spark, t).delete("nosuch = 1").collect(),
        "nosuch",
    ),
    "an UPDATE of a column the table lacks": (
        lambda spark, t: IndexTable.for_path(spark, t).update("id = 1", set={"nosuch": "1"}).collect(),
        "nosuch",
    ),
    "a MERGE on a column the table lacks": (
        lambda spark, t: (
            IndexTable.for_path(spark, t).merge(make_df(spark, 2), "t.nosuch = s.id").when_matched_delete().execute()
        ),
        "nosuch",
    ),
    "MERGE SPLITS of a path that is no table": (_sql("MERGE SPLITS '<t>-none'"), "not an IndexTables table"),
    "PURGE with a retention below the minimum": (
        _sql("PURGE INDEXTABLE '<t>' OLDER THAN 1 HOURS"),
        "minimum",
    ),
    "DROP PARTITIONS on a column that is no partition column": (
        _sql("DROP INDEXTABLES PARTITIONS FROM '<t>' WHERE id = 1"),
        "id",
    ),
    "a size that is no size": (
        lambda spark, t: connect_plugin.write(
            make_df(spark, 2), t + "-5", options={"spark.indextables.indexWriter.heapSize": "lots"}
        ),
        "heapSize",
    ),
}


_TABLES: dict[int, str] = {}  # one table per session, written once (no mistake changes it)


@pytest.fixture
def table(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    if id(spark) not in _TABLES:
        path = str(tmp_path_factory.mktemp("mistakes") / "t")
        connect_plugin.write(make_df(spark, 10), path, mode="overwrite", partition_by=["day"], options=TEXT)
        _TABLES[id(spark)] = path
    return _TABLES[id(spark)]


# A Spark Connect read is analysed at its first action, where these raise Spark's exception: the docs'
# recipe (docs/log-and-splits.md) raises the project's error in its place.
AT_THE_ACTION_IN_CONNECT = {
    "a query on a column the table lacks",
    "a query that does not parse",
    "a table in SQL that does not exist",
}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_mistake_gets_a_short_typed_error(spark: Any, table: str, mistake: str) -> None:
    run, names = MISTAKES[mistake]
    connect = type(spark).__module__.startswith("pyspark.sql.connect")
    with pytest.raises(IndexTablesError) as raised:
        if connect and mistake in AT_THE_ACTION_IN_CONNECT:
            with project_error_first():
                run(spark, table)
        else:
            run(spark, table)
    message = str(raised.value)
    lines = message.splitlines()
    assert lines[0].startswith("[INDEXTABLES_"), message
    assert len(lines) <= 5, message
    assert names in message, message
    printed = "".join(traceback.format_exception(raised.value))
    assert "PYTHON_DATA_SOURCE_ERROR" not in printed and "at org.apache.spark" not in printed, printed
    assert "The above exception was the direct cause" not in printed, printed
