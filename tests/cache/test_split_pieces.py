"""Splits on object storage fetched by the piece (``cache/split_pieces.py``), on the moto S3 server:
the same answers as a whole split, only the ranges queries read (of the doc stores, only the blocks
holding hits), within the cache's budget, and damage found rather than answered over."""

from __future__ import annotations

import json
import os
import random
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.cache.split_pieces import PIECES_DIR, STATE_FILE, member_kind, query_fields, query_needs
from executor_lib.format.quickwit.bundle import read_footer
from executor_lib.format.store import blocks as doc_store
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search import split_opening
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage import open_store
from indextables_contract import filters
from indextables_contract.errors import ConfigError, CorruptSplitError
from tests.cache.test_split_cache import CountingStore
from tests.conftest import BUCKET, s3_options

RARE = "quetzalcoatl"
OPTIONS = {"spark.indextables.indexing.typemap.message": "text"}
QUERIES: list[str | filters.Filter | None] = [
    f"message:{RARE}",
    'message:"alpha beta"',
    "message:gamma AND level:ERROR",
    "level:WARN",
    "id:[100 TO 120]",
    "latency:>500",
    "message:del*",
    filters.Term("level", "DEBUG"),
    filters.Between("id", 5, 9, True, False),
    filters.Regex("level", "ERR.*"),
    filters.Exists("level"),
    None,
]


def rows(n: int = 24000, seed: int = 38) -> pa.Table:
    """Log-like rows: a rare word in a few messages, common words, four levels."""
    rng = np.random.default_rng(seed)
    words = np.array(
        ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"] + [f"w{i}" for i in range(300)]
    )
    drawn = words[rng.integers(0, len(words), size=(n, 8))].astype(object)
    drawn[rng.choice(n, size=5, replace=False), 3] = RARE
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "level": pa.array(rng.choice(["INFO", "WARN", "ERROR", "DEBUG"], size=n)),
            "latency": pa.array(rng.lognormal(5, 1, size=n)),
            "message": pa.array([" ".join(m) for m in drawn.tolist()]),
        }
    )


@pytest.fixture(autouse=True)
def small_doc_store_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 32 KB: these splits of 12,000 rows get a dozen, as a split of 100,000 rows gets at
    the default size, so that fetching the blocks of a few hits is told apart from fetching all."""
    monkeypatch.setattr(doc_store, "ZSTD_BLOCK_BYTES", 32 << 10)


@pytest.fixture
def s3_table(moto_server: Any) -> tuple[str, dict[str, Any], Any]:
    """A table of two splits on S3: ``(uri, options, adds)``."""
    options = s3_options(moto_server)
    uri = f"s3://{BUCKET}/tables/{uuid.uuid4().hex}"
    data = rows()
    log = executor_lib.create_table(uri, data.schema, **options)
    store = open_store(uri, **options)
    mapping = mapping_for(data.schema, OPTIONS)
    adds = [write_and_upload(store, data.slice(i * 12000, 12000), mapping) for i in range(2)]
    log.commit(adds)
    return uri, options, adds


def _ids(table: pa.Table) -> list[Any]:
    return sorted(zip(table.column("id").to_pylist(), table.column("message").to_pylist(), strict=True))


def _search(uri: str, options: dict[str, Any], cache: SplitCache, query: Any, store: Any = None) -> list[Any]:
    snapshot = executor_lib.open_log(uri, **options).snapshot()
    store = store or open_store(uri, **options)
    if isinstance(query, filters.Filter):
        out = []
        for add in snapshot.files:
            searcher = split_opening.load_split(
                cache,
                store,
                add.path,
                snapshot.arrow_schema(),
                snapshot.doc_mapping(add),
                add.size,
                add.footer_start_offset,
            )
            out.extend(_ids(searcher.search(query, ["id", "message"])))
        return sorted(out)
    return _ids(search_table(store, snapshot, query, cache, ["id", "message"]))


def _states(cache_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(cache_dir.glob(f"splits/*/{STATE_FILE}"))]


def _member_bytes(state: dict[str, Any], kind: str) -> int:
    return sum(end - start for name, (start, end) in state["files"].items() if member_kind(name) == kind)


def _fetched(cache_dir: Path, kind: str | None = None) -> int:
    return sum(
        stop - start
        for state in _states(cache_dir)
        for name, ranges in state["present"].items()
        if kind is None or member_kind(name) == kind
        for start, stop in ranges
    )


def _poison_holes(cache_dir: Path) -> int:
    """Fill every range not fetched, of every member of every entry, with random bytes; returns how many."""
    poisoned = 0
    for state_file in sorted(cache_dir.glob(f"splits/*/{STATE_FILE}"))[:1]:  # one split damaged
        state = json.loads(state_file.read_text())
        for name, (start, end) in state["files"].items():
            length, position = end - start, 0
            holes = []
            for s, e in state["present"].get(name, []):
                holes.append((position, s))
                position = e
            holes.append((position, length))
            with open(state_file.parent / PIECES_DIR / name, "r+b") as f:
                for s, e in holes:
                    if e > s:
                        f.seek(s)
                        f.write(random.randbytes(e - s))
                        poisoned += e - s
    return poisoned


def test_pieces_answer_as_the_whole_split_and_read_no_holes(
    s3_table: tuple[str, dict[str, Any], Any], tmp_path: Path
) -> None:
    """Every kind of query answers as on a split fetched whole; then every byte not fetched is
    overwritten with random bytes and the same queries, on fresh searchers, answer the same: no query
    read a range (of the doc store, of another field's sections, of the columnar copy) not fetched."""
    uri, options, adds = s3_table
    for query in QUERIES:
        whole = _search(uri, options, SplitCache(tmp_path / "whole", by_piece=False), query)
        cache_dir = tmp_path / f"pieces-{uuid.uuid4().hex[:6]}"
        got = _search(uri, options, SplitCache(cache_dir), query)
        assert got == whole, query
        assert _fetched(cache_dir) < sum(a.size for a in adds), query
        split_opening.close_kept_searchers()
        assert _poison_holes(cache_dir) > 0
        assert _search(uri, options, SplitCache(cache_dir), query) == whole, f"{query} read a range it did not fetch"
    assert not list((tmp_path / "whole").glob(f"splits/*/{STATE_FILE}")), "fetched whole: no pieces"


def _blocks_end(store: Any, add: Any, state: dict[str, Any], name: str) -> tuple[int, int]:
    """Where the blocks of a split's doc store member end, and its largest block's bytes."""
    start, end = state["files"][name]
    parsed = doc_store.parse_store(store.read(add.path)[start:end], name)
    return int(parsed.end[-1]), int((parsed.end - parsed.start).max())


def test_a_rare_word_fetches_the_blocks_of_its_hits_only(
    s3_table: tuple[str, dict[str, Any], Any], tmp_path: Path
) -> None:
    """The rows of 5 hits come from the doc store by range: at most the 5 blocks holding them, plus
    the store's skip index and footers; no columnar copy exists."""
    uri, options, adds = s3_table
    store = open_store(uri, **options)
    cache_dir = tmp_path / "cache"
    found = _search(uri, options, SplitCache(cache_dir), f"message:{RARE}")
    assert len(found) == 5
    for state in _states(cache_dir):
        add = next(a for a in adds if state["size"] == a.size)
        assert not [n for n in state["files"] if member_kind(n) == "copy"], "rows kept in the doc stores"
        for name, ranges in state["present"].items():
            start, end = state["files"][name]
            if member_kind(name) == "store":
                blocks_end, largest = _blocks_end(store, add, state, name)
                in_blocks = sum(max(0, min(e, blocks_end) - s) for s, e in ranges)
                assert in_blocks <= 5 * largest < blocks_end / 2, "more blocks than hits were fetched"
                assert ranges[-1][1] == end - start, "the doc store's footer was not fetched"
    stats = SplitCache(cache_dir).describe()
    # Of these small splits (12K rows), the message field's postings and the 16 KiB tails read at open
    # are a large part; the doc stores (the bulk) are fetched by block, a quarter of them or less.
    assert _fetched(cache_dir, "store") < sum(_member_bytes(s, "store") for s in _states(cache_dir)) / 4
    assert stats["bytes_downloaded"] < 0.6 * sum(a.size for a in adds)
    assert stats["bytesCached"] < 0.6 * sum(a.size for a in adds), "holes take no space in the budget"


def test_warm_queries_read_nothing_and_new_fields_fetch_their_sections(
    s3_table: tuple[str, dict[str, Any], Any], tmp_path: Path
) -> None:
    uri, options, _ = s3_table
    store = CountingStore(open_store(uri, **options))
    cache_dir = tmp_path / "cache"
    first = _search(uri, options, SplitCache(cache_dir), f"message:{RARE}", store)
    store.reads = 0
    split_opening.close_kept_searchers()
    assert _search(uri, options, SplitCache(cache_dir), f"message:{RARE}", store) == first
    assert store.reads == 0, "a warm query reads nothing from the object store"
    before = _fetched(cache_dir, "composite")
    whole = _search(uri, options, SplitCache(tmp_path / "whole", by_piece=False), "level:WARN")
    assert _search(uri, options, SplitCache(cache_dir), "level:WARN", store) == whole
    # level's sections: fetched now, or already with the 16 KiB chunks message's sections lie in
    assert store.reads > 0 and _fetched(cache_dir, "composite") >= before
    stats = SplitCache(cache_dir).describe()
    assert (stats["misses"], stats["splitsCached"]) == (2, 2)


def test_prewarm_fetches_the_index_and_the_rows(s3_table: tuple[str, dict[str, Any], Any], tmp_path: Path) -> None:
    """PREWARM fetches every index section and the rows (here the doc stores, whole): no query reads
    the object store afterwards."""
    uri, options, adds = s3_table
    store = CountingStore(open_store(uri, **options))
    cache = SplitCache(tmp_path / "cache")
    for add in adds:
        cache.prewarm(store, add)  # type: ignore[arg-type]
    assert _fetched(tmp_path / "cache", "store") == sum(
        e - s for st in _states(tmp_path / "cache") for n, (s, e) in st["files"].items() if member_kind(n) == "store"
    )
    store.reads = 0
    for query in QUERIES:
        _search(uri, options, SplitCache(tmp_path / "cache"), query, store)
    assert store.reads == 0, "after PREWARM no query reads the object store"


def test_eviction_within_the_budget_counts_fetched_bytes(
    s3_table: tuple[str, dict[str, Any], Any], tmp_path: Path
) -> None:
    uri, options, adds = s3_table
    store = open_store(uri, **options)
    probe = SplitCache(tmp_path / "probe")
    probe.pieces(store, adds[0].path, adds[0].size, adds[0].footer_start_offset)
    one_entry = probe.describe()["bytesCached"]
    assert 0 < one_entry < adds[0].size
    cache = SplitCache(tmp_path / "cache", max_bytes=int(one_entry * 1.5))
    for add in adds:
        cache.pieces(store, add.path, add.size, add.footer_start_offset)
    stats = cache.describe()
    assert (stats["splitsCached"], stats["evictions"]) == (1, 1)
    again = cache.pieces(store, adds[-1].path, adds[-1].size, adds[-1].footer_start_offset)
    assert again is not None and cache.describe()["hits"] == 1


def test_a_corrupt_range_is_dropped_and_fetched_again(
    s3_table: tuple[str, dict[str, Any], Any], tmp_path: Path
) -> None:
    """A cached range damaged on disk differs from the CRC32 it was fetched with: the entry is dropped
    and fetched again when the split is opened, and the search answers right (issue 50); a range the object store returns
    short (the split was replaced by a shorter one) is refused and not recorded."""
    uri, options, adds = s3_table
    cache_dir = tmp_path / "cache"
    expected = _search(uri, options, SplitCache(cache_dir), f"message:{RARE}")
    split_opening.close_kept_searchers()
    store = open_store(uri, **options)
    for state_file in sorted(cache_dir.glob(f"splits/*/{STATE_FILE}"))[:1]:  # one split damaged
        state = json.loads(state_file.read_text())
        add = next(a for a in adds if state["size"] == a.size)
        for name, ranges in state["present"].items():
            if member_kind(name) == "store":
                blocks_end, _ = _blocks_end(store, add, state, name)
                with open(state_file.parent / PIECES_DIR / name, "r+b") as f:
                    for s, e in ranges:  # the blocks fetched, not the skip index and footers
                        if s < blocks_end:
                            f.seek(s)
                            f.write(b"\xff" * (min(e, blocks_end) - s))
    cache = SplitCache(cache_dir)
    evictions = cache.describe()["evictions"]
    assert _search(uri, options, cache, f"message:{RARE}") == expected  # checked at open: fetched again
    assert cache.describe()["evictions"] == evictions + 1

    victim = adds[0]
    good = store.read(victim.path)
    cache_dir = tmp_path / "short"
    SplitCache(cache_dir).pieces(store, victim.path, victim.size, victim.footer_start_offset)
    store.put(victim.path, good[: len(good) // 2])  # shorter: a range past its end comes back short
    try:
        with pytest.raises(CorruptSplitError) as failure:
            _search(uri, options, SplitCache(cache_dir), filters.Term("level", "DEBUG"))
        assert store.uri_of(victim.path) in failure.value.message
    finally:
        store.put(victim.path, good)
    split_opening.close_kept_searchers()
    whole = _search(uri, options, SplitCache(tmp_path / "whole", by_piece=False), filters.Term("level", "DEBUG"))
    assert _search(uri, options, SplitCache(cache_dir), filters.Term("level", "DEBUG")) == whole


def test_whole_fetching_stays_available(s3_table: tuple[str, dict[str, Any], Any], tmp_path: Path) -> None:
    uri, options, adds = s3_table
    os.environ["INDEXTABLES_CACHE_FETCH"] = "whole"
    try:
        from executor_lib.cache.split_cache import fetch_by_piece

        assert fetch_by_piece() is False and fetch_by_piece("pieces") is True
    finally:
        del os.environ["INDEXTABLES_CACHE_FETCH"]
    with pytest.raises(ConfigError):
        fetch_by_piece("sometimes")
    cache = SplitCache(tmp_path / "cache", by_piece=False)
    _search(uri, options, cache, f"message:{RARE}")
    assert cache.describe()["bytes_downloaded"] >= sum(a.size for a in adds)


def test_query_fields_read_off_compiled_queries() -> None:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("message")
    builder.add_integer_field("id", indexed=True, fast=True)
    builder.add_text_field("level", tokenizer_name="raw", fast=True)
    builder.add_json_field("attrs")
    schema = builder.build()
    index = tantivy.Index(schema)
    names = ["message", "id", "level", "attrs"]
    assert query_fields(index.parse_query("alpha", ["message"]), names) == {0}
    assert query_fields(index.parse_query('"a b" AND id:[1 TO 5]', ["message"]), names) == {0, 1}
    assert query_fields(tantivy.Query.regex_query(schema, "level", "a.*"), names) == {2}
    assert query_fields(tantivy.Query.exists_query("attrs.user"), names) == {3}
    assert query_fields(tantivy.Query.all_query(), names) == set()
    assert query_fields(tantivy.Query.exists_query("nope"), names) is None  # unknown: every field
    assert query_needs(index.parse_query("alpha", ["message"]), names) == ({0}, False)
    assert query_needs(index.parse_query('"a b"', ["message"]), names) == ({0}, True)
    assert query_needs(index.parse_query('"a b"*', ["message"]), names) == ({0}, True)


def test_a_merged_split_by_the_piece(s3_table: tuple[str, dict[str, Any], Any], tmp_path: Path) -> None:
    """A merged split (segments copied, a columnar copy by segment, row offsets) answers by the piece
    as when fetched whole."""
    from executor_lib.splits.write.publish import merge_splits

    uri, options, adds = s3_table
    store = open_store(uri, **options)
    snapshot = executor_lib.open_log(uri, **options).snapshot()
    schema = snapshot.arrow_schema()
    mappings = {a.path: snapshot.doc_mapping(a) for a in adds}
    merged = merge_splits(store, adds, schema, mappings, SplitCache(tmp_path / "merge", by_piece=False))
    mapping = snapshot.doc_mapping(adds[0])

    def answers(cache: SplitCache, query: Any) -> list[Any]:
        split_opening.close_kept_searchers()
        searcher = split_opening.load_split(
            cache, store, merged.path, schema, mapping, merged.size, merged.footer_start_offset
        )
        return _ids(searcher.search(query, ["id", "message"]))

    for query in (f"message:{RARE}", 'message:"alpha beta"', filters.Term("level", "DEBUG"), None):
        cache_dir = tmp_path / f"pieces-{uuid.uuid4().hex[:6]}"
        whole = answers(SplitCache(tmp_path / "whole", by_piece=False), query)
        assert answers(SplitCache(cache_dir), query) == whole, query
        assert _states(cache_dir), "fetched by the piece"
        _poison_holes(cache_dir)
        assert answers(SplitCache(cache_dir), query) == whole, query


def test_damaged_segment_files_at_the_source_never_answer(
    s3_table: tuple[str, dict[str, Any], Any], tmp_path: Path
) -> None:
    """A bit flipped in a split's postings, positions, term dictionary or field norms on S3 is found
    when the ranges holding it are fetched (their 16 KiB chunks against the split's own CRC32s): the
    search is a CorruptSplitError naming the split, or answers right (the bit lies in bytes no query
    reads), never a wrong answer (issue 70, N7: the segment files' Tantivy footers hold the CRC32 of
    their whole body, which a split fetched by the piece never has)."""
    uri, options, adds = s3_table
    store = open_store(uri, **options)
    victim = sorted(adds, key=lambda a: a.path)[0]
    good = store.read(victim.path)
    (tmp_path / "good.split").write_bytes(good)
    members = read_footer(tmp_path / "good.split").files
    queries = [f"message:{RARE}", 'message:"alpha beta"', "message:gamma AND level:ERROR", "message:w*"]
    expected = [_search(uri, options, SplitCache(tmp_path / "expected"), q) for q in queries]
    rng = random.Random(70)
    outcomes: dict[str, list[str]] = {"right": [], "typed": [], "silent": []}
    try:
        for suffix in (".idx", ".pos", ".term", ".fieldnorm"):
            start, end = next(span for name, span in members.items() if name.endswith(suffix))
            for flip in range(8):
                offset = rng.randrange(start, end)
                damaged = bytearray(good)
                damaged[offset] ^= 1 << rng.randrange(8)
                store.put(victim.path, bytes(damaged))
                split_opening.close_kept_searchers()
                cache = SplitCache(tmp_path / f"cache-{suffix}-{flip}")
                where = f"{suffix}@{offset - start}"
                try:
                    got = [_search(uri, options, cache, q) for q in queries]
                except CorruptSplitError as e:
                    assert store.uri_of(victim.path) in e.message, e.message
                    outcomes["typed"].append(where)
                    continue
                outcomes["right" if got == expected else "silent"].append(where)
    finally:
        store.put(victim.path, good)
        split_opening.close_kept_searchers()
    assert not outcomes["silent"], f"wrong answers after flips at {outcomes['silent']} ({outcomes})"
    assert len(outcomes["typed"]) >= 8, outcomes
