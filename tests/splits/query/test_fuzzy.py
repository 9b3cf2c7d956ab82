"""Fuzzy terms, this project's query extension (``QueryString.fuzzy``, SQL ``fuzzyquery``): ``word~1``,
``word~2`` and ``word~N*`` match what tantivy-py's own fuzzy term queries match on an independent index;
without the extension the same text keeps IndexTables4Spark's meaning (refused, as before)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import tantivy

from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.write.writer import write_split
from indextables_contract import filters as F
from indextables_contract.errors import QueryError

WORDS = [
    "timeout",
    "timeuot",
    "timout",
    "tmeout",
    "time",
    "timeouts",
    "tineaut",
    "upstream",
    "upstraem",
    "gateway",
    "gate",
]
DATA = pa.table(
    {
        "id": pa.array(range(200), pa.int64()),
        "message": [f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]} req{i}" for i in range(200)],
    }
)


@pytest.fixture(scope="module")
def split(tmp_path_factory: pytest.TempPathFactory) -> SplitSearcher:
    tmp = tmp_path_factory.mktemp("fuzzy")
    written = write_split(DATA, mapping_for(DATA.schema, {"spark.indextables.indexing.typemap.message": "text"}), tmp)
    return SplitSearcher(written.path, Path(tmp) / "work", DATA.schema, None)


@pytest.fixture(scope="module")
def reference() -> tuple[tantivy.Index, tantivy.Searcher]:
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("id", stored=True, indexed=True)
    builder.add_text_field("message")
    index = tantivy.Index(builder.build())
    writer = index.writer(15_000_000, 1)
    for i, m in zip(DATA["id"].to_pylist(), DATA["message"].to_pylist(), strict=True):
        writer.add_document(tantivy.Document(id=i, message=m))
    writer.commit()
    index.reload()
    return index, index.searcher()


def ids_of(index: tantivy.Index, searcher: tantivy.Searcher, query: tantivy.Query) -> list[int]:
    return sorted(searcher.doc(a)["id"][0] for _, a in searcher.search(query, 1000).hits)


@pytest.mark.parametrize(
    ("text", "word", "distance", "prefix"),
    [("timeout~1", "timeout", 1, False), ("timeout~2", "timeout", 2, False), ("upstrem~1*", "upstrem", 1, True)],
)
def test_fuzzy_terms_match_tantivys_fuzzy_queries(
    split: SplitSearcher,
    reference: tuple[tantivy.Index, tantivy.Searcher],
    text: str,
    word: str,
    distance: int,
    prefix: bool,
) -> None:
    index, searcher = reference
    want = ids_of(
        index, searcher, tantivy.Query.fuzzy_term_query(index.schema, "message", word, distance, True, prefix)
    )
    got = split.row_ids(F.QueryString(text, "message", fuzzy=True))
    assert sorted(DATA["id"].take(got).to_pylist()) == want and want


def test_distance_two_reaches_further_than_one(split: SplitSearcher) -> None:
    one = set(split.row_ids(F.QueryString("timeout~1", "message", fuzzy=True)).to_pylist())
    two = set(split.row_ids(F.QueryString("timeout~2", "message", fuzzy=True)).to_pylist())
    assert one < two  # 'tmeout' is one deletion away, 'timout' one, 'timeuot' a transposition; 'tineaut' two edits


def test_fuzzy_terms_score_with_phrases_and_boosts_as_tantivy(
    split: SplitSearcher, reference: tuple[tantivy.Index, tantivy.Searcher]
) -> None:
    index, searcher = reference
    want_query = tantivy.Query.boolean_query(
        [
            (tantivy.Occur.Should, tantivy.Query.fuzzy_term_query(index.schema, "message", "gateway", 1, True, False)),
            (tantivy.Occur.Should, index.parse_query('"timeout upstream"~1^2', ["message"])),
        ]
    )
    want = {searcher.doc(a)["id"][0]: s for s, a in searcher.search(want_query, 1000).hits}
    ids, scores = split.scored(F.QueryString('gateway~1 OR "timeout upstream"~1^2', "message", fuzzy=True))
    got = dict(zip(DATA["id"].take(ids).to_pylist(), scores.tolist(), strict=True))
    assert got.keys() == want.keys()
    np.testing.assert_allclose([got[k] for k in want], list(want.values()), atol=1e-5)


def test_without_the_extension_the_jvm_meaning_stands(split: SplitSearcher) -> None:
    with pytest.raises(QueryError, match="looks like a fuzzy term"):
        split.row_ids(F.QueryString("timeout~1", "message"))
    with pytest.raises(QueryError, match="a fuzzy term matches one token"):
        split.row_ids(F.QueryString("time-out~1", "message", fuzzy=True))


def test_the_flag_travels_in_the_filter_json() -> None:
    f = F.QueryString("timeout~1", "message", fuzzy=True)
    assert F.from_text(F.to_text(f)) == f
    assert "fuzzy" not in F.to_text(F.QueryString("timeout", "message"))


def test_sql_reads_fuzzyquery_as_the_extension() -> None:
    from connect_plugin.grammar import parse_predicate

    assert parse_predicate("message fuzzyquery 'timout~1'") == F.QueryString("timout~1", "message", fuzzy=True)
    assert parse_predicate("_indexall fuzzyquery 'timout~2'") == F.QueryString("timout~2", fuzzy=True)
    assert parse_predicate("message indexquery 'timout~1'") == F.QueryString("timout~1", "message")


def test_a_transposition_is_one_edit_or_two(tmp_path: Path) -> None:
    """``hte`` is one transposition from ``the``: within ``the~1`` by default (Tantivy's, Lucene's), not
    with transpositions off (two edits: ``the~2`` then reaches it); each as tantivy-py's own query."""
    data = pa.table({"id": pa.array(range(5), pa.int64()), "message": ["the cat", "hte cat", "teh", "tha", "dog"]})
    written = write_split(
        data, mapping_for(data.schema, {"spark.indextables.indexing.typemap.message": "text"}), tmp_path
    )
    searcher = SplitSearcher(written.path, tmp_path / "work", data.schema, None)

    def ids(text: str, transpositions: bool) -> list[int]:
        q = F.QueryString(text, "message", fuzzy=True, transpositions=transpositions)
        return sorted(data["id"].take(searcher.row_ids(q)).to_pylist())

    assert ids("the~1", True) == [0, 1, 2, 3]
    assert ids("the~1", False) == [0, 3]
    assert ids("the~2", False) == [0, 1, 2, 3]
    assert ids("hte~1", True) == [0, 1] and ids("hte~1", False) == [1]
    off = F.fuzzy_transpositions(F.And((F.QueryString("hte~1", "message", fuzzy=True), F.Term("id", 1))), False)
    assert F.from_text(F.to_text(off)) == off and '"transpositions":false' in F.to_text(off)
    assert "transpositions" not in F.to_text(F.QueryString("hte~1", "message", fuzzy=True))
