"""Filters on the native engine (``NativeSplit.count`` / ``matches`` / ``first_by`` / ``fast_values``):
a split's counts, row ids and fast-field values are the ones the ``tantivy`` package's path gives
(the same ``SplitSearcher`` with the native engine switched off), on a split of one segment and on
a merged split of two, for every kind of filter; a limited read gives the lowest rows."""

from __future__ import annotations

import ipaddress
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.native import Hits
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.write.merge import MergeSource, merge_sources
from executor_lib.splits.write.writer import write_split
from indextables_contract import filters

OPTIONS = {"spark.indextables.indexing.typemap.message": "text", "spark.indextables.indexing.typemap.ip": "ip"}
WORDS = ["alpha", "beta", "gamma", "delta", "omega"]
QUERIES: list[Any] = [
    "beta",
    "message:gamma AND NOT delta",
    '"alpha beta"',
    "NOT omega",
    filters.Term("level", "WARN"),
    filters.TermIn("level", ("INFO", "ERROR")),
    filters.Between("n", 100, 600, True, False),
    filters.Between("score", -0.5, 0.25, False, True),
    filters.And((filters.QueryString("alpha"), filters.Term("flag", True))),
    filters.Not(filters.Term("level", "INFO")),
    filters.Exists("maybe"),
    filters.Prefix("level", "WA"),
    filters.Term("ip", "10.0.0.7"),
    filters.Term("blob", b"\x00\x07"),
]


def _rows(n: int, start: int = 0, seed: int = 5) -> pa.Table:
    rng = random.Random(seed + start)
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "n": pa.array([rng.randint(0, 1000) for _ in range(n)], pa.int64()),
            "score": pa.array([rng.uniform(-1, 1) for _ in range(n)], pa.float64()),
            "flag": pa.array([rng.random() < 0.5 for _ in range(n)], pa.bool_()),
            "maybe": pa.array([None if rng.random() < 0.3 else rng.randint(0, 9) for _ in range(n)], pa.int64()),
            "level": [rng.choice(["INFO", "WARN", "DEBUG", "ERROR"]) for _ in range(n)],
            "ip": [str(ipaddress.IPv4Address(0x0A000000 + rng.randint(0, 15))) for _ in range(n)],
            "blob": pa.array([bytes([0, rng.randint(0, 9)]) for _ in range(n)], pa.binary()),
            "message": [" ".join(rng.choices(WORDS, k=rng.randint(1, 8))) for _ in range(n)],
        }
    )


@pytest.fixture(scope="module", params=["one segment", "merged"])
def split(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Schema]:
    root = tmp_path_factory.mktemp("native-filters")
    first, second = _rows(700), _rows(500, start=700)
    mapping = mapping_for(first.schema, OPTIONS)
    if request.param == "one segment":
        return write_split(pa.concat_tables([first, second]), mapping, root / "s").path, first.schema
    parts = [write_split(t, mapping, root / f"p{i}").path for i, t in enumerate((first, second))]
    sources = [MergeSource.from_bundle(p) for p in parts]
    merged = merge_sources([s for s in sources if s is not None], mapping, root / "merged").path
    return merged, first.schema


def _searchers(split: tuple[Path, pa.Schema], tmp_path: Path) -> tuple[SplitSearcher, SplitSearcher]:
    path, schema = split
    native = SplitSearcher(path, tmp_path / "native", schema, None)
    package = SplitSearcher(path, tmp_path / "package", schema, None)
    package._no_native = True  # the tantivy package's path, as before the native engine read filters
    assert native._native_split() is not None and package._native_split() is None
    return native, package


@pytest.mark.parametrize("query", QUERIES, ids=[str(i) for i in range(len(QUERIES))])
def test_native_filters_answer_as_the_tantivy_package(
    split: tuple[Path, pa.Schema], tmp_path: Path, query: Any
) -> None:
    native, package = _searchers(split, tmp_path)
    every = package.row_ids(query)
    assert len(every) > 0, "a query that matches nothing proves little"
    assert native.count(query) == package.count(query) == len(every)
    assert native.row_ids(query).equals(every)
    for k in (1, 17, len(every)):  # the lowest k rows (the package's limited read gives any k)
        assert native.row_ids(query, k).equals(every.slice(0, k))
    ids, hits, order = native.row_hits(query, 50)
    assert isinstance(hits, Hits) and ids.equals(every.slice(0, 50))
    values = native.fast_values(["n", "score", "flag", "maybe"], hits, order)
    expected = native.rows_with(ids, ["n", "score", "flag", "maybe"], {})
    for column in ("n", "score", "flag", "maybe"):
        assert values[column].equals(expected.column(column).combine_chunks()), column
    found = native.search(query, ["id", "n"])
    assert sorted(found.column("id").to_pylist()) == sorted(package.search(query, ["id", "n"]).column("id").to_pylist())


def test_fast_values_keep_nulls_of_every_numeric_type(split: tuple[Path, pa.Schema], tmp_path: Path) -> None:
    native, _ = _searchers(split, tmp_path)
    ids, hits, order = native.row_hits("NOT omega")
    values = native.fast_values(["maybe"], hits, order)["maybe"]
    expected = native.rows_with(ids, ["maybe"], {}).column("maybe").combine_chunks()
    assert values.null_count == expected.null_count > 0
    assert values.equals(expected)
    assert np.array_equal(np.sort(order), np.arange(len(order)))


@pytest.mark.parametrize("query", ["beta", '"alpha beta"', "message:gamma AND NOT delta", "omeg*"])
def test_native_snippets_are_the_tantivy_package_ones(
    split: tuple[Path, pa.Schema], tmp_path: Path, query: str
) -> None:
    native, package = _searchers(split, tmp_path)
    texts = [*native.search(query, ["message"], 40).column("message").to_pylist(), None, "  beta  ", "no match"]
    for tags, chars in ((("<b>", "</b>"), 150), (("[", "]"), 12)):
        ours = native.snippets(query, "message", texts, tags, chars).to_pylist()
        assert ours == package.snippets(query, "message", texts, tags, chars).to_pylist()
        assert ours[len(texts) - 3] is None
        if "*" not in query:  # (a wildcard's terms are not the query's: nothing is marked, as in the package)
            assert any(tags[0] in s for s in ours if s)


def test_the_native_syntax_check_gives_the_tantivy_packages_messages(
    split: tuple[Path, pa.Schema], tmp_path: Path
) -> None:
    """``NativeSplit.check_query`` (Tantivy's parser in Rust, what a plan's ``parse`` node runs) answers
    bad text and an unknown default field with the messages the ``tantivy`` package's parser gives."""
    native, package = _searchers(split, tmp_path)
    engine = native._native_split()
    assert engine is not None
    engine.check_query("message:[a TO c]", ["message"])
    for text, fields in (("message:[a TO", ["message"]), ("nosuch:a", ["message"]), ("a", ["nosuch"])):
        with pytest.raises(ValueError) as ours:
            engine.check_query(text, fields)
        with pytest.raises(ValueError) as theirs:
            package.index.parse_query(text, fields, allow_regexes=True)
        assert str(ours.value) == str(theirs.value)
