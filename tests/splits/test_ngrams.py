"""N-gram and edge n-gram tokenizers (issue 75, search-as-you-type): ``indexing.tokenizer.<col>`` takes
``ngram_<min>_<max>`` (every n-gram of each word) and ``edge_ngram_<min>_<max>`` (each word's prefixes), words
as ``default`` makes them. The native writer indexes the grams (native/src/lib.rs, NgramFilter); a query word
on such a column is not cut into grams but searched as one gram (``tokenizers.query_gram``), so ``erro`` finds
``error`` and ``errors`` on an edge n-gram column and not ``terror``, and ``rro`` finds all three on an n-gram
column. The compiled query of the ``tantivy`` package (``SplitSearcher.search``) and the native ranked search
(``SplitSearcher.scored``) agree. A bad spec is a ConfigError naming the column and what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from executor_lib.splits.doc_mapping import DocMapping, mapping_for
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.tokenizers import query_gram
from executor_lib.splits.write.writer import write_split
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError, QueryError

TOKENIZER = S.INDEXING_TOKENIZER.prefix
TEXTS = ["Error in module", "two ERRORS found", "terror strikes", "nothing here", "err"]


def _searcher(tmp_path: Path, options: dict[str, str] | None = None) -> SplitSearcher:
    rows = pa.table({"id": pa.array(range(len(TEXTS)), pa.int64()), "edge": TEXTS, "gram": TEXTS, "plain": TEXTS})
    opts = {
        **{S.INDEXING_TYPEMAP.prefix + c: "text" for c in ("edge", "gram", "plain")},
        TOKENIZER + "edge": "edge_ngram_2_10",
        TOKENIZER + "gram": "ngram_3_5",
        **(options or {}),
    }
    written = write_split(rows, mapping_for(rows.schema, opts), tmp_path / "split")
    return SplitSearcher(written.path, tmp_path / "work", rows.schema, None)


def _both(searcher: SplitSearcher, query: str) -> list[int]:
    """The rows the tantivy package's compiled query finds, checked equal to the native ranked search's."""
    found = sorted(searcher.search(query, ["id"]).column("id").to_pylist())
    ranked, scores = searcher.scored(query, 100)
    assert sorted(ranked.to_pylist()) == found, query
    assert np.all(scores > 0)
    return found


def test_an_edge_ngram_prefix_finds_the_longer_words_and_not_an_inner_gram(tmp_path: Path) -> None:
    searcher = _searcher(tmp_path)
    assert searcher.mapping.field("edge").tokenizer == "edge_ngram_2_10"  # recorded as named
    assert _both(searcher, "edge:erro") == [0, 1]  # error, errors: no wildcard
    assert _both(searcher, "edge:ERR") == [0, 1, 4]  # lowercased
    assert _both(searcher, "edge:errors") == [1]
    assert _both(searcher, "edge:rro") == []  # only an inner gram of "terror": not a prefix
    assert _both(searcher, "plain:erro") == []  # a default column: whole words only
    assert _both(searcher, "erro") == [0, 1, 2]  # the default fields: edge, gram (terror) and plain
    assert _both(searcher, "edge:'erro fou'") == [1]  # each word required
    assert _both(searcher, 'edge:"two erro"') == [1]  # a phrase of prefixes
    assert _both(searcher, 'edge:"erro two"') == []
    # a word longer than the grams: its first 10 characters, a prefix of the indexed word
    assert query_gram("edge_ngram_2_10", "moduleslongerword") == ["moduleslon"]
    assert _both(searcher, "edge:modulexxxxxxxx") == []
    ranked, scores = searcher.scored("edge:erro", 10)
    assert sorted(ranked.to_pylist()) == [0, 1] and scores[0] >= scores[1] > 0  # _score works


def test_an_ngram_column_finds_an_inner_substring(tmp_path: Path) -> None:
    searcher = _searcher(tmp_path)
    assert _both(searcher, "gram:rro") == [0, 1, 2]  # error, errors, terror
    assert _both(searcher, "gram:rror") == [0, 1, 2]
    assert _both(searcher, "gram:erro") == [0, 1, 2]
    assert _both(searcher, "gram:terror") == [2]  # longer than 5: every 5-gram of it required
    assert query_gram("ngram_3_5", "terror") == ["terro", "error"]
    assert _both(searcher, "gram:odul") == [0]
    assert _both(searcher, "edge:odul") == []
    # the word matching more of the query's grams ranks first
    ranked, scores = searcher.scored("gram:rror OR gram:rors", 10)
    assert ranked.to_pylist()[0] == 1 and scores[0] > scores[1]


def test_a_word_shorter_than_the_grams_and_a_long_word_in_a_phrase_are_refused(tmp_path: Path) -> None:
    searcher = _searcher(tmp_path)
    with pytest.raises(QueryError, match=r"shorter than the grams of column 'edge'"):
        searcher.search("edge:e", ["id"])
    with pytest.raises(QueryError, match=r"column 'gram'.*longer than its 5-character grams"):
        searcher.search('gram:"two errors"', ["id"])


@pytest.mark.parametrize(
    ("spec", "bad"),
    [
        ("edge_ngram_5_2", "max 2 is below min 5"),
        ("ngram_x", "'x' is not <min>_<max>"),
        ("ngram_0_3", "min 0 is below 1"),
        ("edge_ngram_2_33", "max 33 is above 32"),
        ("ngram_2", "'2' is not <min>_<max>"),
    ],
)
def test_a_bad_spec_is_a_config_error_naming_the_column_and_the_bad_part(spec: str, bad: str) -> None:
    rows = pa.table({"title": ["a"]})
    with pytest.raises(ConfigError) as caught:
        mapping_for(rows.schema, {S.INDEXING_TYPEMAP.prefix + "title": "text", TOKENIZER + "title": spec})
    said = str(caught.value)
    assert f"tokenizer.title={spec!r}" in said and "column 'title'" in said and bad in said, said


def test_the_spec_is_recorded_with_its_token_limit_and_the_jvm_is_warned() -> None:
    rows = pa.table({"title": ["a"]})
    options = {
        S.INDEXING_TYPEMAP.prefix + "title": "text",
        TOKENIZER + "title": "edge_ngram_2_10",
        S.INDEXING_TOKEN_LENGTH.prefix + "title": "40",
    }
    mapping = mapping_for(rows.schema, options)
    title = mapping.field("title")
    assert title is not None and (title.tokenizer, title.max_token_length) == ("edge_ngram_2_10", 40)
    assert json.loads(mapping.to_json())[0]["tokenizer"] == "edge_ngram_2_10"
    assert DocMapping.from_json(mapping.to_json()) == mapping
    said = S.jvm_tokenizer_warnings({**options, TOKENIZER + "ngram_3_4": "a, b"})  # and the list form
    assert len(said) == 3, said
    assert said[0].startswith("IndexTables4Spark does not know tokenizer edge_ngram_2_10 of column title")
    assert "edge n-gram tokenizer of 2..10 characters" in said[0]
    assert S.jvm_tokenizer_warnings({TOKENIZER + "t": "ngram_5_2"}) == []  # an error, not a warning
