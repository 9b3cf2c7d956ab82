"""A word search never silently finds nothing (issue 76, item 1): ``indexquery`` with a word, a phrase or a
wildcard against an exact-string column (a string column written without ``typemap.<col>=text``) gives one
``QueryWarning`` per query naming the column, its type and the option that makes it text; the same read
with ``spark.indextables.read.strictQueries=true`` is a ``QueryError`` before any job. A text column, a
``fieldmatch``, ``=`` and a one-character term are never warned about. Classic and Spark Connect sessions:
SQL reads, pushed aggregates, ``connect_plugin.read`` and ``spark.read.format("indextables")``.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from executor_lib.splits.query.exact_words import word_in
from indextables_contract import filters as F
from indextables_contract.errors import QueryError, QueryWarning

TYPEMAP = "spark.indextables.indexing.typemap.message"
STRICT = "spark.indextables.read.strictQueries"


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory, classic_spark: Any) -> tuple[str, str]:
    """The same 30 rows twice: ``message`` exact (the default for strings) and ``message`` as text."""
    root = tmp_path_factory.mktemp("query-warnings")
    rows = [
        (i, "connection timeout" if i % 3 == 0 else f"all good {i}", "ERROR" if i % 3 == 0 else "INFO")
        for i in range(30)
    ]
    df = classic_spark.createDataFrame(rows, "id long, message string, level string")
    exact, text = str(root / "exact"), str(root / "text")
    connect_plugin.write(df, exact)
    connect_plugin.write(df, text, options={TYPEMAP: "text"})
    return exact, text


@pytest.fixture
def caught() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        yield found


def _query_warnings(found: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in found if issubclass(w.category, QueryWarning)]


def _unique(query: str) -> str:
    """``query`` OR a term no row holds: a filter no earlier test ran (each is told once per session)."""
    return f"{query} OR zz{uuid.uuid4().hex[:8]}"


def test_which_query_texts_search_words() -> None:
    assert word_in("timeout") == "the word 'timeout'"
    assert word_in('"connection reset"') == 'the phrase "connection reset"'
    assert word_in("time*") == "the wildcard 'time*'"
    assert word_in("+timeout^2") == "the word 'timeout'"
    assert word_in("a OR b") is None and word_in("*") is None and word_in("[a TO z]") is None
    assert word_in('"x"') is None


def test_a_word_on_an_exact_column_warns_once_naming_column_type_and_option(
    spark: Any, tables: tuple[str, str], caught: list[warnings.WarningMessage]
) -> None:
    exact, _ = tables
    query = _unique("timeout")
    rows = connect_plugin.sql(
        spark, f"SELECT id FROM indextables.`{exact}` WHERE message indexquery '{query}'"
    ).collect()
    assert rows == []  # what IndexTables4Spark answers too: whole values only
    (said,) = _query_warnings(caught)
    assert "column 'message'" in said and "string, indexed as one exact value per row" in said, said
    assert f"{TYPEMAP}=text" in said and STRICT in said and "the word 'timeout'" in said, said


def test_phrases_wildcards_aggregates_and_read_warn_too(
    spark: Any, tables: tuple[str, str], caught: list[warnings.WarningMessage]
) -> None:
    exact, _ = tables
    phrase = _unique('"connection timeout"')
    count = connect_plugin.sql(
        spark, f"SELECT count(*) AS n FROM indextables.`{exact}` WHERE message indexquery '{phrase}'"
    )
    assert count.collect()[0]["n"] == 10  # the phrase is the whole value of 10 rows
    wildcard = _unique("conn*")
    connect_plugin.sql(
        spark, f"SELECT level, count(*) FROM indextables.`{exact}` WHERE message indexquery '{wildcard}' GROUP BY level"
    ).collect()
    word = _unique("timeout")
    connect_plugin.read(spark, exact, filter=F.QueryString(word, "message")).collect()
    said = _query_warnings(caught)
    assert len(said) == 3, said
    assert 'the phrase "connection timeout"' in said[0] and "the wildcard 'conn*'" in said[1], said
    assert "the word 'timeout'" in said[2], said


def test_the_dataframe_api_read_warns(
    spark: Any, tables: tuple[str, str], caught: list[warnings.WarningMessage]
) -> None:
    exact, _ = tables
    connect_plugin.install(spark)
    df = spark.read.format("indextables").option("indexquery.message", _unique("timeout")).load(exact)
    assert df.count() == 0
    (said,) = _query_warnings(caught)
    assert "column 'message'" in said and f"{TYPEMAP}=text" in said, said


def test_no_warning_where_the_query_means_what_it_says(
    spark: Any, tables: tuple[str, str], caught: list[warnings.WarningMessage]
) -> None:
    exact, text = tables
    assert (
        connect_plugin.sql(spark, f"SELECT id FROM indextables.`{text}` WHERE message indexquery 'timeout'").count()
        == 10
    )
    sql = f"SELECT id FROM indextables.`{exact}` WHERE message fieldmatch '\"connection timeout\"'"
    assert connect_plugin.sql(spark, sql).count() == 10
    assert (
        connect_plugin.sql(spark, f"SELECT id FROM indextables.`{exact}` WHERE message = 'connection timeout'").count()
        == 10
    )
    assert (
        connect_plugin.sql(spark, f"SELECT id FROM indextables.`{exact}` WHERE level indexquery 'x OR y'").count() == 0
    )
    assert _query_warnings(caught) == []


def test_strict_queries_make_it_an_error_before_any_job(spark: Any, tables: tuple[str, str], tmp_path: Path) -> None:
    exact, text = tables
    spark.conf.set(STRICT, "true")
    try:
        with pytest.raises(QueryError) as failure:
            connect_plugin.sql(
                spark, f"SELECT id FROM indextables.`{exact}` WHERE message indexquery 'timeout'"
            ).collect()
        first = str(failure.value).splitlines()[0]
        assert first.startswith("[INDEXTABLES_QUERY] ") and f"{TYPEMAP}=text" in first and f"{STRICT}=true" in first
        assert len(str(failure.value).splitlines()) <= 5
        with pytest.raises(QueryError):
            connect_plugin.sql(
                spark, f"SELECT count(*) FROM indextables.`{exact}` WHERE message indexquery 'timeout'"
            ).collect()
        assert (
            connect_plugin.sql(spark, f"SELECT id FROM indextables.`{text}` WHERE message indexquery 'timeout'").count()
            == 10
        )
    finally:
        spark.conf.unset(STRICT)
