"""The native engine (``native/``, ``indextables_native``): ranked search on a local split is
Tantivy's own top-k with the table's BM25 statistics, with the same statistics, rows and scores
as the ``scoring`` module's rescoring of every hit (kept for splits read by the piece); JSON
fields, which ``scoring`` does not model, score table-wide too; IndexTables4Spark's splits open
in place as they are."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.log.tables import open_log
from executor_lib.splits.search.native import NativeSplit
from executor_lib.splits.search.scoring import ScoreStats
from executor_lib.splits.search.split_opening import open_searcher
from executor_lib.splits.search.table_search import search_table
from indextables_contract import filters
from indextables_contract.errors import QueryError
from tests.conftest import COMPAT_ROOT, requires_compat

WORDS = ["timeout", "upstream", "error", "disk", "connection", "reset", "peer", "slow", "gateway", "refused"]
OPTIONS: dict[str, Any] = {"spark.indextables.indexing.typemap.message": "text"}
QUERIES: list[Any] = [
    "error",
    "timeout upstream",
    "message:error AND NOT slow",
    '"connection reset"',
    "'disk peer'",
    "gate*",
    "NOT refused",
    "(error OR slow) AND (disk OR peer)^2",
    filters.And((filters.QueryString("timeout"), filters.Between("n", 10, 500, True, False))),
    filters.Or((filters.QueryString("peer"), filters.Term("level", "WARN"))),
    filters.And((filters.QueryString("peer"), filters.Not(filters.Term("level", "INFO")))),
]
# queries whose scores ``scoring`` does not model (it keeps split-local scores): table-wide here
NATIVE_ONLY: list[Any] = [
    filters.And((filters.QueryString("reset"), filters.Not(filters.TermIn("level", ("INFO", "DEBUG"))))),
    filters.And((filters.QueryString("error slow"), filters.TermIn("level", ("WARN", "ERROR")))),
]


def _rows(n: int, seed: int = 3) -> pa.Table:
    rng = random.Random(seed)
    weights = list(range(1, len(WORDS) + 1))
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "n": pa.array([rng.randint(0, 1000) for _ in range(n)], pa.int64()),
            "level": [rng.choice(["INFO", "WARN", "DEBUG", "ERROR"]) for _ in range(n)],
            "message": [" ".join(rng.choices(WORDS, weights=weights, k=rng.randint(1, 40))) for _ in range(n)],
        }
    )


def _table(uri: str, data: pa.Table, splits: int, options: dict[str, Any] = OPTIONS) -> Any:
    log = executor_lib.create_table(uri, data.schema, **options)
    mapping = executor_lib.mapping_for(data.schema, options)
    step = -(-data.num_rows // splits)
    adds = [
        executor_lib.write_and_upload(log.store, data.slice(i, step), mapping, {})
        for i in range(0, data.num_rows, step)
    ]
    log.commit(adds)
    return log


def _searchers(log: Any, cache: SplitCache) -> list[Any]:
    snap = log.snapshot()
    return [
        open_searcher(cache, log.store, a.path, snap.arrow_schema(), snap.doc_mapping(a), a.size) for a in snap.files
    ]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[Any]]:
    root = tmp_path_factory.mktemp("native")
    log = _table(str(root / "t"), _rows(4000), 4)
    return log, _searchers(log, SplitCache(root / "cache"))


@pytest.mark.parametrize("query", QUERIES, ids=[str(i) for i in range(len(QUERIES))])
def test_native_statistics_and_scores_are_the_rescored_ones(table: tuple[Any, list[Any]], query: Any) -> None:
    _, searchers = table
    assert all(s._native_split() is not None for s in searchers)  # local splits: the native engine scores
    native = ScoreStats.merged(s.score_stats(query) for s in searchers)
    modelled = [s._modelled_stats(query) for s in searchers]
    assert all(m is not None for m in modelled)
    want = ScoreStats.merged(m for m in modelled if m is not None)
    # the same keys and counts (splits of both kinds mix in one table); the native engine also
    # counts the terms that only filter (NOT, comparisons), which score nothing
    assert native.num_docs == want.num_docs
    assert {k: native.field_tokens[k] for k in want.field_tokens} == want.field_tokens
    assert {k: native.doc_freqs[k] for k in want.doc_freqs} == want.doc_freqs
    for searcher in searchers:
        rows, scores = searcher.scored(query, 10, native)
        want_rows, want_scores = searcher._rescored(query, None, native)
        np.testing.assert_allclose(scores, want_scores[:10], atol=1e-4)
        kth = scores[-1] if len(scores) else None
        strictly_better = [
            r for r, s in zip(want_rows.to_pylist(), want_scores, strict=True) if kth is not None and s > kth + 1e-4
        ]
        assert set(strictly_better) <= set(rows.to_pylist())  # the same ids up to ties at the k-th score
        all_rows, all_scores = searcher.scored(query, None, native)
        assert all_rows.to_pylist() == want_rows.to_pylist()
        np.testing.assert_allclose(all_scores, want_scores, atol=1e-4)


def test_split_local_scores_without_table_statistics(table: tuple[Any, list[Any]]) -> None:
    _, searchers = table
    rows, scores = searchers[0].scored("error timeout", 5)
    want_rows, want_scores = searchers[0]._rescored("error timeout", 5, None)
    assert rows.to_pylist() == want_rows.to_pylist()
    np.testing.assert_allclose(scores, want_scores, atol=1e-5)


def test_a_query_that_cannot_run_is_a_query_error(table: tuple[Any, list[Any]]) -> None:
    _, searchers = table
    with pytest.raises(QueryError, match="nosuchfield"):
        searchers[0].scored("nosuchfield:x", 5)


def _all_scores(log: Any, cache: SplitCache, query: Any) -> dict[int, float]:
    """id -> table-wide score of every row matching ``query``."""
    searchers = _searchers(log, cache)
    stats = ScoreStats.merged(s.score_stats(query) for s in searchers)
    scored: dict[int, float] = {}
    for s in searchers:
        rows, scores = s.scored(query, None, stats)
        ids = s.rows.select(["id"]).take(pa.array(rows.to_pylist(), pa.int64()))["id"].to_pylist()
        scored.update(zip(ids, scores.tolist(), strict=True))
    return scored


def _same_scores(one: dict[int, float], many: dict[int, float]) -> None:
    assert one and one.keys() == many.keys()
    for i, score in one.items():
        assert many[i] == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("query", NATIVE_ONLY, ids=[str(i) for i in range(len(NATIVE_ONLY))])
def test_scores_do_not_depend_on_the_split_count(tmp_path: Path, query: Any) -> None:
    data = _rows(2000, seed=11)
    one, many = (
        _all_scores(_table(str(tmp_path / f"t{n}"), data, n), SplitCache(tmp_path / f"cache{n}"), query) for n in (1, 5)
    )
    _same_scores(one, many)


def test_json_fields_score_table_wide(tmp_path: Path) -> None:
    rng = random.Random(5)
    attrs = [
        json.dumps(
            {"user": rng.choice(["alice", "bob", "carol"]), "msg": " ".join(rng.choices(WORDS, k=rng.randint(1, 12)))}
        )
        for _ in range(1200)
    ]
    data = pa.table({"id": pa.array(range(1200), pa.int64()), "attrs": attrs})
    options = {"spark.indextables.indexing.typemap.attrs": "json"}
    one, many = (
        _all_scores(
            _table(str(tmp_path / f"t{n}"), data, n, options), SplitCache(tmp_path / f"c{n}"), "attrs.msg:timeout"
        )
        for n in (1, 6)
    )
    _same_scores(one, many)
    assert len(set(one.values())) >= 3  # scores vary with the field's length: a real BM25, not a constant


@requires_compat
def test_indextables4spark_splits_open_in_place() -> None:
    tables = sorted(p.parent for p in COMPAT_ROOT.glob("*/_transaction_log"))
    assert tables
    opened = 0
    for root in tables:
        snap = open_log(str(root)).snapshot()
        for add in snap.files:
            split = NativeSplit.open(root / add.path)
            assert split.num_docs == add.num_records, add.path
            opened += 1
    assert opened > 20


def test_splits_read_by_the_piece_score_natively_as_local_ones(tmp_path: Path, moto_server: Any) -> None:
    from tests.conftest import BUCKET, s3_options

    data = _rows(3000, seed=13)
    local = _table(str(tmp_path / "t"), data, 3)
    remote = _table(f"s3://{BUCKET}/tables/native-{uuid.uuid4().hex}", data, 3, {**OPTIONS, **s3_options(moto_server)})
    cache = SplitCache(tmp_path / "cache")
    searchers = _searchers(remote, cache)
    assert all(s.source.pieces is not None and s._native_split() is not None for s in searchers)
    for query in ["error timeout", '"connection reset"', QUERIES[8], NATIVE_ONLY[0]]:
        want = _all_scores(local, SplitCache(tmp_path / "local-cache"), query)
        _same_scores(want, _all_scores(remote, cache, query))
        if isinstance(query, str):  # (search_table takes query text)
            top = search_table(remote.store, remote.snapshot(), query, cache, ["id"], limit=10, scored=True)
            best = sorted(want.values(), reverse=True)[:10]
            np.testing.assert_allclose(top["_score"].to_numpy(), best, atol=1e-4)
