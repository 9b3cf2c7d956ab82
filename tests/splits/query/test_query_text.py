"""Malformed Tantivy queries: the error names the query and the position, checked on a real split."""

from __future__ import annotations

import pyarrow as pa
import pytest

from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.query.explain import locate
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.write.writer import write_split
from indextables_contract.errors import QueryError

ROWS = pa.table({"id": pa.array([1, 2], pa.int64()), "title": ["red fox", "blue fox"], "tag": ["a", "b"]})


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory) -> SplitSearcher:
    tmp = tmp_path_factory.mktemp("q")
    mapping = mapping_for(ROWS.schema, {"spark.indextables.indexing.typemap.title": "text"})
    return SplitSearcher(write_split(ROWS, mapping, tmp).path, tmp / "w", ROWS.schema, None)


@pytest.mark.parametrize(
    ("query", "position", "what"),
    [
        ("title:(red OR blue", 6, "unclosed '('"),
        ("title:red)", 9, "')' closes nothing"),
        ('title:"red fox', 6, "unclosed '\"'"),
        ("id:[1 TO 5", 3, "unclosed '['"),
        ("title:red AND", 10, "AND has nothing on its right"),
        ("(OR title:red)", 1, "OR has nothing on its left"),
        ("nope:x AND title:red", 0, "no such field 'nope'"),
        ("title:red AND colour:blue", 14, "no such field 'colour'"),
    ],
)
def test_the_error_names_the_query_and_the_position(
    searcher: SplitSearcher, query: str, position: int, what: str
) -> None:
    with pytest.raises(QueryError) as raised:
        searcher.search(query)
    message = raised.value.message
    assert message.startswith(f"query {query!r} does not parse at position {position}: {what}")
    caret_line = message.splitlines()[-1]
    assert caret_line.index("^") - 2 == position, message


def test_a_query_that_parses_raises_nothing(searcher: SplitSearcher) -> None:
    assert searcher.count("title:(red OR blue) AND id:[1 TO 5}") == 2
    assert searcher.count('title:"red fox"') == 1


def test_an_error_without_a_findable_place_keeps_tantivys_words() -> None:
    assert locate("title:red", "something else went wrong") is None


def test_a_column_query_with_a_bare_range_runs(searcher: SplitSearcher) -> None:
    from indextables_contract import filters

    assert searcher.count(filters.QueryString("[2 TO 9]", "id")) == 1
