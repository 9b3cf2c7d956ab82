"""BM25 ``_score`` with table-wide statistics: one split, 20 splits and the merged split score every
row as one independent tantivy-py index over the same rows does (same top 20, scores within 1e-4)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import tantivy

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.protocol.actions import removes_of
from executor_lib.splits.search.scoring import FIELDNORMS, ScoreStats, parse_debug
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import merge_splits
from indextables_contract.errors import QueryError

WORDS = ["timeout", "upstream", "error", "disk", "connection", "reset", "peer", "slow", "gateway", "refused"]
WORDS += ["retry", "backend", "cache", "miss"]
OPTIONS = {"spark.indextables.indexing.typemap.message": "text"}
N = 3000


def rows(n: int = N, seed: int = 7) -> pa.Table:
    rng = random.Random(seed)
    weights = list(range(1, len(WORDS) + 1))
    messages = [" ".join(rng.choices(WORDS, weights=weights, k=rng.randint(1, 80))) for _ in range(n)]
    return pa.table({"id": pa.array(range(n), pa.int64()), "message": messages})


def reference(data: pa.Table) -> tuple[Any, Any]:
    """An independent tantivy-py index of ``data`` (one segment), as a user would build it."""
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("id", stored=True, indexed=True)
    builder.add_text_field("message", stored=False)
    index = tantivy.Index(builder.build())
    writer = index.writer(50_000_000, 1)
    for i, m in zip(data["id"].to_pylist(), data["message"].to_pylist(), strict=True):
        writer.add_document(tantivy.Document(id=i, message=m))
    writer.commit()
    index.reload()
    return index, index.searcher()


def write_table(uri: str, options: dict[str, Any], data: pa.Table, splits: int) -> Any:
    log = executor_lib.create_table(uri, data.schema, **options)
    mapping = executor_lib.mapping_for(data.schema, OPTIONS)
    step = -(-data.num_rows // splits)
    log.commit(
        [
            executor_lib.write_and_upload(log.store, data.slice(i, step), mapping, {})
            for i in range(0, data.num_rows, step)
        ]
    )
    return log


def merge_all(log: Any, cache: SplitCache) -> None:
    snap = log.snapshot()
    merged = merge_splits(
        log.store, snap.files, snap.arrow_schema(), {a.path: snap.doc_mapping(a) for a in snap.files}, cache
    )
    log.commit([merged, *removes_of(snap.files, data_change=False)])


def ranked(hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Hits in score order, ties by id (tantivy breaks ties by document address, tables by split)."""
    return sorted(hits, key=lambda h: (-round(h[1], 4), h[0]))


def assert_same_top(got: pa.Table, want: list[tuple[int, float]], k: int) -> None:
    pairs = list(zip(got["id"].to_pylist(), got["_score"].to_pylist(), strict=True))
    assert len(pairs) == len(want[:k])
    np.testing.assert_allclose([s for _, s in pairs], [s for _, s in want[:k]], atol=1e-4)
    # same ids, except where a tie at the cut lets either of two equal rows in
    cut = round(want[k - 1][1], 4) if len(want) >= k else None
    assert {i for i, s in pairs if round(s, 4) != cut} == {i for i, s in want[:k] if round(s, 4) != cut}


QUERIES: list[tuple[str, Any]] = [
    ("timeout upstream", lambda i: i.parse_query("timeout upstream", ["message"])),
    ('"connection reset"~1', lambda i: i.parse_query('"connection reset"~1', ["message"])),
    ("timeout^2 OR refused", lambda i: i.parse_query("timeout^2 OR refused", ["message"])),
    ("id:7 OR id:1500 OR timeout", lambda i: i.parse_query("id:7 OR id:1500 OR timeout", ["message"])),
    (  # a wildcard is a regex over the terms (IndexTables4Spark's meaning), scoring a constant 1
        "gate* AND retry",
        lambda i: tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, tantivy.Query.regex_query(i.schema, "message", "(?s)gate.*")),
                (tantivy.Occur.Must, i.parse_query("retry", ["message"])),
            ]
        ),
    ),
    ("(timeout AND upstream) OR peer", lambda i: i.parse_query("(timeout AND upstream) OR peer", ["message"])),
    (
        # as IndexTables4Spark means it (Quickwit's BoolQuery: 'NOT error' excludes from every row, and
        # the every-row part scores 1.0); tantivy-py's own parser reads it as nothing, so built by hand
        "gateway AND NOT error",
        lambda i: tantivy.Query.boolean_query(
            [
                (tantivy.Occur.Must, i.parse_query("gateway", ["message"])),
                (
                    tantivy.Occur.Must,
                    tantivy.Query.boolean_query(
                        [
                            (tantivy.Occur.MustNot, i.parse_query("error", ["message"])),
                            (tantivy.Occur.Must, tantivy.Query.all_query()),
                        ]
                    ),
                ),
            ]
        ),
    ),
]


@pytest.mark.parametrize("query,build", QUERIES, ids=[q for q, _ in QUERIES])
def test_scores_do_not_depend_on_how_the_table_is_split(
    table: tuple[str, dict[str, Any]], tmp_path: Path, query: str, build: Any
) -> None:
    uri, options = table
    data = rows()
    index, searcher = reference(data)
    hits = searcher.search(build(index), 40).hits
    want = ranked([(searcher.doc(a)["id"][0], s) for s, a in hits])
    cache = SplitCache(tmp_path / "cache")
    for splits in (1, 20):
        log = write_table(f"{uri}/t{splits}", options, data, splits)
        assert len(log.snapshot().files) == splits
        got = search_table(log.store, log.snapshot(), query, cache, ["id"], 20, scored=True)
        assert_same_top(got, want, 20)
        if splits == 20:
            merge_all(log, cache)
            assert len(log.snapshot().files) == 1
            got = search_table(log.store, log.snapshot(), query, cache, ["id"], 20, scored=True)
            assert_same_top(got, want, 20)


def test_split_local_scores_differ_so_statistics_matter(tmp_path: Path) -> None:
    """The test above means something: without table-wide statistics 20 splits score differently."""
    data = rows()
    log = write_table(str(tmp_path / "t"), {}, data, 20)
    cache = SplitCache(tmp_path / "cache")
    snap = log.snapshot()
    from executor_lib.splits.search.split_opening import load_split

    searchers = [
        load_split(cache, log.store, a.path, snap.arrow_schema(), snap.doc_mapping(a), a.size) for a in snap.files
    ]
    local = [s.score_stats("timeout") for s in searchers]
    assert all(s is not None for s in local)
    table_stats = ScoreStats.merged(s for s in local if s is not None)
    assert table_stats.num_docs == N
    _, ref = reference(data)
    assert table_stats.doc_freqs[("message", "timeout")] == ref.doc_freq("message", "timeout")
    _, scores_local = searchers[0].scored("timeout", 5)
    _, scores_table = searchers[0].scored("timeout", 5, table_stats)
    assert not np.allclose(scores_local, scores_table, atol=1e-4)


def test_scored_rows_come_best_first_with_a_limit_per_split(tmp_path: Path) -> None:
    data = rows(500)
    log = write_table(str(tmp_path / "t"), {}, data, 4)
    got = search_table(
        log.store, log.snapshot(), "retry cache", SplitCache(tmp_path / "c"), ["id", "message"], 7, scored=True
    )
    assert got.num_rows == 7 and got.column_names == ["id", "message", "_score"]
    scores = got["_score"].to_pylist()
    assert scores == sorted(scores, reverse=True)
    assert all(("retry" in m.split()) or ("cache" in m.split()) for m in got["message"].to_pylist())


def test_score_needs_a_query(tmp_path: Path) -> None:
    log = write_table(str(tmp_path / "t"), {}, rows(10), 1)
    with pytest.raises(QueryError, match="_score needs a query"):
        search_table(log.store, log.snapshot(), "*", SplitCache(tmp_path / "c"), ["id"], 5, scored=True)


def test_fieldnorm_table_and_query_forms() -> None:
    assert list(FIELDNORMS[:42]) == [*range(41), 42]
    assert FIELDNORMS[255] == 2013265944
    node = parse_debug('Query(TermQuery(Term(field=1, type=Str, "a \\"b\\" \\u{e9}")))')
    assert node.items[0][1].items[0][1].items[-1][1] == 'a "b" é'


def test_cli_search_ranks_by_score(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from executor_lib.cli import main

    log = write_table(str(tmp_path / "t"), {}, rows(400), 3)
    assert main(["search", str(tmp_path / "t"), "retry cache", "--columns", "id", "--limit", "4", "--json"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    want = search_table(log.store, log.snapshot(), "retry cache", SplitCache(tmp_path / "c"), ["id"], 4, scored=True)
    assert [p["_score"] for p in printed] == pytest.approx(want["_score"].to_pylist(), abs=1e-6)
    assert [p["_score"] for p in printed] == sorted((p["_score"] for p in printed), reverse=True)


def test_a_read_task_sends_only_its_best_k(tmp_path: Path) -> None:
    """The data source's reader itself (as Spark runs it, in this process): with ``scoreTopK`` a task
    over 20 splits sends 5 rows, the table's best 5; without it, every hit with its score."""
    from pyspark.sql.types import StructType

    from executor_lib.spark.datasource import IndexTablesDataSource
    from indextables_contract import filters as F
    from indextables_contract.read import ReadPlan

    path = str(tmp_path / "t")
    log = write_table(path, {}, rows(), 20)
    query = F.QueryString("retry cache", "message")
    want = search_table(
        log.store, log.snapshot(), "message:(retry cache)", SplitCache(tmp_path / "c"), ["id"], None, True
    )
    for top_k in (5, None):
        options = {"path": path, "spark.indextables.read.parallelism": "1"}
        options.update(ReadPlan(columns=("id", "_score"), filter=query, top_k=top_k).to_options())
        source = IndexTablesDataSource(options)
        schema = source.schema()
        assert isinstance(schema, StructType) and [f.name for f in schema.fields] == ["id", "_score"]
        reader = source.reader(schema)
        (partition,) = reader.partitions()
        got = pa.Table.from_batches(list(reader.read(partition)))
        expected = want.num_rows if top_k is None else top_k
        assert got.num_rows == expected
        best = got.sort_by([("_score", "descending")])
        np.testing.assert_allclose(best["_score"].to_numpy(), want["_score"].to_numpy()[:expected], atol=1e-5)


@pytest.mark.parametrize("name", ["_score", "_SCORE"])
def test_a_table_column_named_score_is_refused_before_anything_is_written(tmp_path: Path, name: str) -> None:
    from indextables_contract.errors import ConfigError

    schema = pa.schema([("id", pa.int64()), (name, pa.float64())])
    with pytest.raises(ConfigError, match=rf"column '{name}'.*BM25 score .*rename the column"):
        executor_lib.create_table(str(tmp_path / "t"), schema)
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").rglob("*"))
    with pytest.raises(ConfigError, match="rename the column"):
        executor_lib.mapping_for(schema, {})


def test_a_limited_ranking_is_the_head_of_the_whole_ranking_ties_included(tmp_path: Path) -> None:
    """The best k of a table equal the first k of its whole ranking, ties broken the same way (earlier
    split, then row), though each split after the first is searched above the table's k-th best score
    so far and a merged split's segments share one top k (``hits.rs`` ``best_k``). Many rows score the
    same here: the same few messages repeat in every split."""
    rng = random.Random(3)
    messages = [" ".join(rng.choices(WORDS[:6], k=rng.randint(1, 4))) for _ in range(12)]
    data = pa.table({"id": pa.array(range(2400), pa.int64()), "message": [messages[i % 12] for i in range(2400)]})
    log = write_table(str(tmp_path / "t"), {}, data, 6)
    cache = SplitCache(tmp_path / "cache")
    for layout in ("six splits", "one merged split"):
        if layout == "one merged split":
            merge_all(log, cache)
        snap = log.snapshot()
        for query in ("timeout", "upstream error", "disk OR connection OR reset", "timeout upstream error disk"):
            whole = search_table(log.store, snap, query, cache, ["id"], None, scored=True)
            for k in (1, 7, 40, 333):
                top = search_table(log.store, snap, query, cache, ["id"], k, scored=True)
                assert top.equals(whole.slice(0, k)), (layout, query, k)
