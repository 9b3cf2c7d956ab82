"""Tantivy's stemmers for every language it ships (issue 75, first part): ``indexing.tokenizer.<col>`` takes
``de_stem``, ``fr_stem``, ``es_stem``, ``ru_stem`` ... (``settings.STEMMERS``), built as ``en_stem`` is. The
name is recorded in the doc mapping as is, the native writer indexes with it, and every reader (the query
compiler, the native ranked search, Tantivy's query parser, a merge that indexes the rows again) analyzes
queries with it: one inflected form finds a row holding another form of the same word, which the same
query on a ``default`` column does not. An unknown name is a ConfigError naming the column, the name and
the known ones; IndexTables4Spark, which knows only ``en_stem``, is warned about at write time.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import tantivy

from executor_lib.splits.doc_mapping import TOKENIZERS, DocMapping, mapping_for
from executor_lib.splits.query.check import tantivy_schema
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.tokenizers import analyzer
from executor_lib.splits.write.index_schema import schema_fields
from executor_lib.splits.write.merge import MergeSource, merge_sources
from executor_lib.splits.write.writer import write_split
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError

TOKENIZER = S.INDEXING_TOKENIZER.prefix
# (tokenizer, the form a row holds, another form of the same word a query names): pairs the Snowball
# stemmer of the language conflates (checked below), which ``default`` keeps apart.
PAIRS = [
    ("de_stem", "Haus", "Häuser"),
    ("fr_stem", "cheval", "chevaux"),
    ("es_stem", "libro", "libros"),
    ("ru_stem", "город", "городов"),
]
FILLER = {"de_stem": "und", "fr_stem": "et", "es_stem": "y", "ru_stem": "и"}


def _rows(word: str, other: str, filler: str) -> pa.Table:
    """Row 0 holds the queried form, row 1 the other form, row 2 neither; ``body`` and ``plain`` alike."""
    texts = [f"{other} {filler}", f"{word} {filler}", f"{filler} {filler}"]
    return pa.table({"id": pa.array([0, 1, 2], pa.int64()), "body": texts, "plain": texts})


def _options(tokenizer: str) -> dict[str, str]:
    return {
        S.INDEXING_TYPEMAP.prefix + "body": "text",
        S.INDEXING_TYPEMAP.prefix + "plain": "text",
        TOKENIZER + "body": tokenizer,
    }


def _searcher(tmp_path: Path, rows: pa.Table, tokenizer: str) -> SplitSearcher:
    written = write_split(rows, mapping_for(rows.schema, _options(tokenizer)), tmp_path / "split")
    return SplitSearcher(written.path, tmp_path / "work", rows.schema, None)


def _ids(searcher: SplitSearcher, query: str) -> list[int]:
    return sorted(searcher.search(query, ["id"]).column("id").to_pylist())


def test_every_language_of_tantivy_and_of_the_tantivy_package_is_a_tokenizer() -> None:
    assert set(TOKENIZERS) == {"default", "whitespace", "raw", *S.STEMMERS}
    assert len(S.STEMMERS) == 18 and S.STEMMERS["en_stem"] == "english"
    for name, language in S.STEMMERS.items():
        assert name.endswith("_stem")
        tantivy.Filter.stemmer(language)  # the read side knows the language (an unknown one is a ValueError)
    # built as en_stem is: simple tokenizer, lowercase, then the language's stemmer
    assert analyzer("de_stem").analyze("Die HÄUSER") == ["die", "haus"]
    assert analyzer("en_stem").analyze("Running dogs") == ["run", "dog"]


@pytest.mark.parametrize(("tokenizer", "word", "other"), PAIRS)
def test_a_form_finds_another_form_of_the_word_and_default_does_not(
    tokenizer: str, word: str, other: str, tmp_path: Path
) -> None:
    stemmed = analyzer(tokenizer)
    assert stemmed.analyze(word) == stemmed.analyze(other)  # the stemmer really conflates them
    assert analyzer("default").analyze(word) != analyzer("default").analyze(other)
    rows = _rows(word, other, FILLER[tokenizer])
    searcher = _searcher(tmp_path, rows, tokenizer)
    assert searcher.mapping.field("body").tokenizer == tokenizer  # recorded as named
    assert _ids(searcher, f"body:{word}") == [0, 1]  # the compiled query (the tantivy package)
    assert _ids(searcher, f"body:{other}") == [0, 1]
    assert _ids(searcher, f"{other}") == [0, 1]  # Tantivy's query parser over the default fields
    assert _ids(searcher, f"plain:{word}") == [1]
    assert _ids(searcher, f"plain:{other}") == [0]
    assert _ids(searcher, f'body:"{other} {FILLER[tokenizer]}"') == [0, 1]  # a phrase, stemmed too
    found, scores = searcher.scored(f"body:{word}", 10)  # the native engine's ranked search
    assert sorted(found.to_pylist()) == [0, 1] and np.all(scores > 0)
    # the exact form first: the stemmed column and a default copy of the text, queried together
    found, scores = searcher.scored(f"body:{word} OR plain:{word}", 10)
    assert found.to_pylist() == [1, 0] and scores[0] > scores[1]


def test_the_schema_names_the_stemmer_and_is_the_one_the_tantivy_package_builds(tmp_path: Path) -> None:
    rows = _rows("Haus", "Häuser", "und")
    mapping = mapping_for(rows.schema, {**_options("de_stem"), S.INDEXING_TOKEN_LENGTH.prefix + "body": "40"})
    body = mapping.field("body")
    assert body is not None and (body.tokenizer, body.max_token_length) == ("de_stem", 40)
    recorded = {f["name"]: f for f in json.loads(mapping.to_json())}
    assert recorded["body"]["tokenizer"] == "de_stem"
    assert DocMapping.from_json(mapping.to_json()) == mapping
    # tantivy4java's name of a token limit reads back as the stemmer and its limit
    foreign = json.dumps([{**recorded["body"], "tokenizer": "de_stem_limit_40", "max_token_length": None}])
    assert DocMapping.from_json(foreign).fields[0].max_token_length == 40
    tantivy.Index(tantivy_schema(mapping, row_field=True), path=str(tmp_path))
    theirs = json.loads((tmp_path / "meta.json").read_text())["schema"]
    assert schema_fields(mapping, True) == theirs
    assert next(f for f in theirs if f["name"] == "body")["options"]["indexing"]["tokenizer"] == "de_stem_max40"


def test_a_merge_that_indexes_the_rows_again_stems_them(tmp_path: Path) -> None:
    rows = _rows("Häuser", "Haus", "und")
    mapping = mapping_for(rows.schema, _options("de_stem"))
    part = write_split(rows, mapping, tmp_path / "p").path
    combined = merge_sources([MergeSource.from_bundle(part), MergeSource.from_bundle(part)], mapping, tmp_path / "c")
    # a segment in both sources cannot be combined: the rows are indexed again
    twice = MergeSource.from_bundle(combined.path)
    again = merge_sources([twice, MergeSource.from_bundle(part)], mapping, tmp_path / "again")  # type: ignore[list-item]
    searcher = SplitSearcher(again.path, tmp_path / "work", rows.schema, None)
    assert searcher.num_docs == 9
    assert len(_ids(searcher, "body:Haus")) == 6 and len(_ids(searcher, "plain:Haus")) == 3


@pytest.mark.parametrize("name", ["xx_stem", "german", "De_stem", "stem"])
def test_an_unknown_tokenizer_names_the_column_the_name_and_the_known_ones(name: str) -> None:
    rows = _rows("Haus", "Häuser", "und")
    with pytest.raises(ConfigError) as caught:
        mapping_for(rows.schema, _options(name))
    said = str(caught.value)
    assert f"tokenizer.body={name!r}" in said and "'de_stem'" in said and "'tr_stem'" in said, said


def test_the_jvm_is_warned_about_for_each_column_with_a_stemmer_it_does_not_know() -> None:
    said = S.jvm_tokenizer_warnings(
        {
            TOKENIZER + "body": "de_stem",
            TOKENIZER + "title": "en_stem",  # the JVM knows it
            TOKENIZER.upper() + "fr_stem": "a, b",  # the list form
            S.INDEXING_TYPEMAP.prefix + "body": "text",
        }
    )
    assert len(said) == 3, said
    assert said[0].startswith("IndexTables4Spark does not know tokenizer de_stem of column body: the JVM will not")
    assert "german" in said[0]
    assert [s.split(" of column ")[1].split(":")[0] for s in said[1:]] == ["a", "b"]
    assert S.jvm_tokenizer_warnings({TOKENIZER + "body": "whitespace", TOKENIZER + "t": "xx_stem"}) == []
