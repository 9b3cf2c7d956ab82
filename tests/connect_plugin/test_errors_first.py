"""A newcomer's mistakes (issue 34): a query that does not parse, an option with a typo and a column
the table lacks each fail before any Spark job, and the first line of the error is the project's
``[INDEXTABLES_*]`` line in the user's terms — no Spark wrapper line, no internal command or view name.

Classic sessions count the jobs of a job group. Over Spark Connect the client cannot see the server's
jobs; there the table's split files are deleted first, so a task that ran would have failed with another
error (a missing split) than the one checked.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import connect_plugin
from indextables_contract.errors import ConfigError, IndexTablesError, QueryError, StatementError

SCHEMA = "id long, message string, level string"
COLUMNS = "id, message, level"


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory, classic_spark: Any) -> Iterator[str]:
    """A table of 3 splits (written in the classic session) whose split files are then deleted."""
    path = tmp_path_factory.mktemp("errors-first") / "logs"
    rows = [(i, f"disk error {i}" if i % 3 else "all good", "INFO" if i % 2 else "ERROR") for i in range(60)]
    df = classic_spark.createDataFrame(rows, SCHEMA).repartition(3)
    connect_plugin.write(df, str(path), options={"spark.indextables.indexing.typemap.message": "text"})
    for split in path.rglob("*.split"):
        split.unlink()  # the log alone plans every read; a task would need a split
    yield str(path)
    shutil.rmtree(path, ignore_errors=True)


def _failure(spark: Any, call: Callable[[], Any]) -> IndexTablesError:
    """The error ``call`` raises, checked to come before any job (classic: the job group stays empty)."""
    context = None if type(spark).__module__.startswith("pyspark.sql.connect") else spark.sparkContext
    group = f"errors-first-{id(call)}"
    if context is not None:
        context.setJobGroup(group, "a mistake")
    try:
        with pytest.raises(IndexTablesError) as failure:
            call()
    finally:
        if context is not None:
            jobs = list(context.statusTracker().getJobIdsForGroup(group))
            context.setJobGroup("other", "other")
    if context is not None:
        assert jobs == [], f"jobs ran before the error: {jobs}"
    text = str(failure.value)
    assert text.splitlines()[0].startswith(f"[{failure.value.code}] "), text
    assert "group_aggregate" not in text and not re.search(r"indextables_[0-9a-f]{12}", text), text
    assert "does not exist" not in text and "No such file" not in text  # no task went for a split
    return failure.value


def test_a_query_that_does_not_parse(spark: Any, table: str) -> None:
    target = f"indextables.`{table}`"
    statements = [
        f"SELECT count(*) FROM {target} WHERE message indexquery '(error'",  # a pushed aggregate
        f"SELECT id FROM {target} WHERE message indexquery '(error'",  # rows
        f"SELECT level, count(*) FROM {target} WHERE message indexquery '(error' GROUP BY level",
        f"SELECT id FROM {target} WHERE message indexquery '(error' OR level = 'ERROR'",  # a match column
    ]
    for statement in statements:
        error = _failure(spark, lambda s=statement: connect_plugin.sql(spark, s).collect())
        assert isinstance(error, QueryError)
        assert str(error).startswith("[INDEXTABLES_QUERY] query '(error' does not parse at position 0"), statement
    for options in ({"indexquery.message": "message:(error"}, {"indexqueryall": "message:(error"}):
        error = _failure(spark, lambda o=options: connect_plugin.read(spark, table, options=o).collect())
        assert str(error).startswith("[INDEXTABLES_QUERY] query 'message:(error' does not parse at position 8")


def test_an_option_with_a_typo(spark: Any, table: str) -> None:
    df = spark.createDataFrame([(1, "x", "INFO")], SCHEMA)
    typo = {"spark.indextables.indexing.typemap.mesage": "text"}
    error = _failure(spark, lambda: connect_plugin.write(df, table, options=typo))
    assert isinstance(error, ConfigError)
    assert str(error) == (
        "[INDEXTABLES_CONFIG] write option spark.indextables.indexing.typemap.mesage: column 'mesage' is not in "
        "the table (did you mean spark.indextables.indexing.typemap.message?; its columns: id, level, message)"
    )
    setting = {"spark.indextables.read.maxSplitsPerPartiton": "3"}
    error = _failure(spark, lambda: connect_plugin.read(spark, table, options=setting).collect())
    assert "did you mean spark.indextables.read.maxSplitsPerPartition?" in str(error).splitlines()[0]


def test_a_column_the_table_lacks(spark: Any, table: str) -> None:
    target = f"indextables.`{table}`"
    for statement in (
        f"SELECT count(*) FROM {target} WHERE nosuchcol = 1",
        f"SELECT nosuchcol, count(*) FROM {target} GROUP BY nosuchcol",
    ):
        error = _failure(spark, lambda s=statement: connect_plugin.sql(spark, s).collect())
        assert (
            str(error)
            == f"[INDEXTABLES_CONFIG] read {table}: column 'nosuchcol' is not in the table (its columns: {COLUMNS})"
        )
    error = _failure(spark, lambda: connect_plugin.sql(spark, f"SELECT mesage FROM {target}").collect())
    assert isinstance(error, StatementError)
    assert str(error) == (
        f"[INDEXTABLES_SQL_STATEMENT] column 'mesage' is not in the table {table} "
        f"(did you mean 'message'?; its columns: {COLUMNS})"
    )
    error = _failure(spark, lambda: connect_plugin.read(spark, table, filter="nosuchcol = 1").collect())
    assert (
        str(error)
        == f"[INDEXTABLES_CONFIG] read {table}: column 'nosuchcol' is not in the table (its columns: {COLUMNS})"
    )


def test_the_table_api_leads_with_the_project_line(spark: Any, table: str) -> None:
    from connect_plugin.table import IndexTable

    t = IndexTable.for_path(spark, table)
    for call in (
        lambda: t.count("message:(error"),
        lambda: t.aggregate({"n": {"count": {}}}, query="message:(error"),
        lambda: t.search("message:(error").collect(),
    ):
        error = _failure(spark, call)
        assert str(error).startswith("[INDEXTABLES_QUERY] query 'message:(error' does not parse at position 8"), error
