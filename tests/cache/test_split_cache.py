"""The node-local split cache: warm reads touch no storage, one download per node, LRU budget (a
local table's splits copied, as a download is)."""

from __future__ import annotations

import json
import multiprocessing as mp
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.cli import main as cli_main
from executor_lib.format.quickwit.bundle import read_footer
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage import open_store
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import CorruptSplitError


@pytest.fixture(autouse=True)
def _local_splits_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    """A local table stands in here for a store splits are downloaded from: its splits are copied
    into the cache (``INDEXTABLES_CACHE_LOCAL_SPLITS=copy``; spawned processes inherit it).
    tests/cache/test_in_place.py reads them in place, the default."""
    monkeypatch.setenv("INDEXTABLES_CACHE_LOCAL_SPLITS", "copy")


DATA = pa.table({"id": pa.array(range(50), pa.int64()), "tag": [f"t{i % 5}" for i in range(50)]})


class CountingStore:
    """A real store that counts the reads of split data going through it."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner, self.reads = inner, 0

    def read(self, key: str) -> bytes:
        self.reads += 1
        return self.inner.read(key)

    def read_range(self, key: str, start: int, length: int) -> bytes:
        self.reads += 1
        return self.inner.read_range(key, start, length)

    def get_file(self, key: str, local_path: str) -> int:
        self.reads += 1
        return self.inner.get_file(key, local_path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def make(uri: str, options: dict[str, Any], splits: int = 3) -> list[Any]:
    schema = pa.schema([*DATA.schema])
    log = executor_lib.create_table(uri, schema, **options)
    store = open_store(uri, **options)
    adds = [write_and_upload(store, DATA.slice(i * 10, 10), mapping_for(DATA.schema, {})) for i in range(splits)]
    log.commit(adds)
    return adds


def test_warm_queries_read_no_split_data(table: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    uri, options = table
    make(uri, options)
    snap = executor_lib.open_log(uri, **options).snapshot()
    store = CountingStore(open_store(uri, **options))
    cache = SplitCache(tmp_path / "cache")
    cold = search_table(store, snap, "tag:t1", cache, ["id"])  # type: ignore[arg-type]
    if not uri.startswith("s3:"):
        assert store.reads == 3  # a local table's splits are copied whole
    else:  # on S3 fetched by the piece (tests/cache/test_split_pieces.py): footer, then what is needed
        assert 3 < store.reads <= 3 * 3
    store.reads = 0
    warm = search_table(store, snap, "tag:t1", SplitCache(tmp_path / "cache"), ["id"])  # type: ignore[arg-type]
    assert store.reads == 0, "a warm query reads nothing from the object store"
    assert sorted(warm.column("id").to_pylist()) == sorted(cold.column("id").to_pylist()) == [1, 6, 11, 16, 21, 26]
    stats = cache.describe()
    assert (stats["misses"], stats["hits"], stats["splitsCached"]) == (3, 3, 3)


def test_footer_with_one_ranged_read_and_footer_only_prewarm(table: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    uri, options = table
    adds = make(uri, options, splits=1)
    store = CountingStore(open_store(uri, **options))
    cache = SplitCache(tmp_path / "cache")
    cache.prewarm(store, adds[0], footer_only=True)  # type: ignore[arg-type]
    assert store.reads == 1 and cache.describe()["splitsCached"] == 0
    footer = cache.footer(store, adds[0])  # type: ignore[arg-type]
    assert store.reads == 1, "the second footer lookup is served from memory"
    local = cache.get(store, adds[0].path)  # type: ignore[arg-type]
    assert footer == read_footer(local.split)


def _race(target: Any, args: list[tuple[Any, ...]], timeout: float = 60) -> None:
    """One spawned process per ``args`` entry running ``target(*entry, barrier)``, released at a
    barrier; each must exit 0."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(args))
    procs = [ctx.Process(target=target, args=(*a, barrier)) for a in args]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=timeout)
    assert [p.exitcode for p in procs] == [0] * len(args)


def _get(cache_dir: str, uri: str, key: str, barrier: Any) -> None:
    barrier.wait(timeout=60)
    SplitCache(Path(cache_dir)).get(open_store(uri), key)


def test_concurrent_processes_download_once(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    (add,) = make(uri, {}, splits=1)
    _race(_get, [(str(tmp_path / "cache"), uri, add.path)] * 4)
    stats = SplitCache(tmp_path / "cache").describe()
    assert (stats["misses"], stats["hits"], stats["bytes_downloaded"]) == (1, 3, add.size)


def _count(cache_dir: str, times: int, barrier: Any) -> None:
    cache = SplitCache(Path(cache_dir))
    barrier.wait(timeout=60)
    for _ in range(times):
        cache._write_counts({"hits": 1, "misses": 2})


def test_counters_written_by_racing_processes_add_up(tmp_path: Path) -> None:
    """stats.json is rewritten in place under its lock: no count of 4 racing processes is lost."""
    _race(_count, [(str(tmp_path / "cache"), 300)] * 4)
    stats = SplitCache(tmp_path / "cache").describe()
    assert (stats["hits"], stats["misses"]) == (1200, 2400)
    SplitCache(tmp_path / "cache").flush()
    assert SplitCache(tmp_path / "cache").describe()["hits"] == 0, "a flush resets the counters"


def _search(cache_dir: str, uri: str, out: str, barrier: Any) -> None:
    barrier.wait(timeout=60)
    snapshot = executor_lib.open_log(uri).snapshot()
    rows = search_table(open_store(uri), snapshot, None, SplitCache(Path(cache_dir)))
    Path(out).write_text(json.dumps(sorted(rows.column("id").to_pylist())))


def test_concurrent_processes_open_one_split_once(tmp_path: Path) -> None:
    """Python workers of one node opening the same uncached split at the same moment: it is
    downloaded and its index extracted once, and every process reads all its rows."""
    uri = str(tmp_path / "t")
    make(uri, {}, splits=1)
    expected = sorted(
        search_table(open_store(uri), executor_lib.open_log(uri).snapshot(), None, SplitCache(tmp_path / "other-cache"))
        .column("id")
        .to_pylist()
    )
    workers = 4
    outs = [tmp_path / f"out-{i}.json" for i in range(workers)]
    _race(_search, [(str(tmp_path / "cache"), uri, str(o)) for o in outs], timeout=120)
    assert [json.loads(o.read_text()) for o in outs] == [expected] * workers
    assert SplitCache(tmp_path / "cache").describe()["misses"] == 1
    assert not list((tmp_path / "cache").rglob("index.tmp*")), "a temporary extraction was left behind"


def test_lru_eviction_within_the_budget(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    adds = make(uri, {}, splits=3)
    store = open_store(uri)
    cache = SplitCache(tmp_path / "cache", max_bytes=max(a.size for a in adds) + 500)
    for a in adds:
        cache.get(store, a.path)
    stats = cache.describe()
    assert stats["splitsCached"] == 1 and stats["evictions"] == 2
    assert cache.get(store, adds[-1].path).split.exists()
    assert cache.describe()["hits"] == 1


def test_counters_of_a_block_are_written_once_at_its_end(tmp_path: Path) -> None:
    """``counted_once`` (a read task's splits): the counters change only when the outermost block ends,
    by exactly what its calls counted, also when the block fails."""
    uri = str(tmp_path / "t")
    adds = make(uri, {}, splits=2)
    store = open_store(uri)
    cache = SplitCache(tmp_path / "cache")
    other_process = SplitCache(tmp_path / "cache")  # reads only stats.json
    with cache.counted_once():
        for a in adds:
            cache.get(store, a.path, a.size)
        with cache.counted_once():
            cache.get(store, adds[0].path, adds[0].size)
        assert (other_process.describe()["misses"], other_process.describe()["hits"]) == (0, 0)
    stats = other_process.describe()
    assert (stats["misses"], stats["hits"], stats["bytes_downloaded"]) == (2, 1, sum(a.size for a in adds))
    with pytest.raises(KeyError), cache.counted_once():
        cache.get(store, adds[1].path, adds[1].size)
        raise KeyError("the task failed")
    assert other_process.describe()["hits"] == 2
    cache.get(store, adds[1].path, adds[1].size)  # outside a block: written at once
    assert other_process.describe()["hits"] == 3


def test_eviction_while_another_process_churns_temporary_files(tmp_path: Path) -> None:
    """Another worker's temporary files (a download's .part, a transcoding's .tmp, a whole entry
    being evicted) come and go while this one sums the cache's size: that is not an error."""
    uri = str(tmp_path / "t")
    adds = make(uri, {}, splits=2)
    store = open_store(uri)
    cache = SplitCache(tmp_path / "cache", max_bytes=10 << 20)
    cached = cache.get(store, adds[0].path)
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            scratch = cached.directory / "transcoded" / "split-x"
            scratch.mkdir(parents=True, exist_ok=True)
            for i in range(20):
                (scratch / f".tmp{i}").write_bytes(b"x" * 100)
            shutil.rmtree(cached.directory / "transcoded", ignore_errors=True)

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert cache.evict() == 0
    finally:
        stop.set()
        worker.join()
    assert cache.get(store, adds[1].path).split.exists()


def test_cache_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    uri = str(tmp_path / "t")
    make(uri, {}, splits=2)
    assert cli_main(["search", uri, "*", "--json", "--cache-dir", str(tmp_path / "c")]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 20
    assert cli_main(["cache", "describe", "--cache-dir", str(tmp_path / "c")]) == 0
    described = json.loads(capsys.readouterr().out)
    assert (described["splitsCached"], described["misses"]) == (2, 2)
    assert cli_main(["cache", "flush", "--cache-dir", str(tmp_path / "c")]) == 0
    flushed = json.loads(capsys.readouterr().out)
    assert (flushed["splitsCached"], flushed["misses"], flushed["bytesCached"]) == (0, 0, 0)


def test_a_corrupt_split_does_not_poison_the_cache(table: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    """Issue 20, hole 5: a damaged split fails naming the table's split (not the cache file) and is
    not kept: once repaired, the next search fetches and answers without flushing the cache. Before
    the fix the damaged copy stayed cached and every later search failed."""
    uri, options = table
    adds = make(uri, options, splits=2)
    store = open_store(uri, **options)
    snap = executor_lib.open_log(uri, **options).snapshot()
    victim = adds[0].path
    good = store.read(victim)
    cache_dir = tmp_path / "cache"
    expected = sorted(search_table(store, snap, "tag:t1", SplitCache(cache_dir), ["id"]).column("id").to_pylist())
    SplitCache(cache_dir).flush()
    zeroed_footer = good[:-64] + b"\x00" * 64  # same size: only opening it shows the damage
    for damaged in (good[:-10], zeroed_footer):
        store.put(victim, damaged)
        with pytest.raises(CorruptSplitError) as failure:
            search_table(store, snap, "tag:t1", SplitCache(cache_dir), ["id"])
        assert failure.value.message.startswith(store.uri_of(victim)), failure.value
        store.put(victim, good)  # repaired
        rows = search_table(store, snap, "tag:t1", SplitCache(cache_dir), ["id"])
        assert sorted(rows.column("id").to_pylist()) == expected
        SplitCache(cache_dir).flush()


def test_a_damaged_cached_copy_is_fetched_again(tmp_path: Path) -> None:
    """A cached copy whose size differs from the add action's is dropped and fetched again."""
    uri = str(tmp_path / "t")
    adds = make(uri, {}, splits=1)
    store = open_store(uri)
    cache = SplitCache(tmp_path / "cache")
    entry = cache.get(store, adds[0].path, adds[0].size)
    entry.split.write_bytes(entry.split.read_bytes()[:-100])
    again = cache.get(store, adds[0].path, adds[0].size)
    assert again.split.stat().st_size == adds[0].size
    stats = cache.describe()
    assert (stats["misses"], stats["hits"], stats["evictions"]) == (2, 0, 1)
    snap = executor_lib.open_log(uri).snapshot()
    assert search_table(store, snap, "*", cache).num_rows == 10


def test_open_searchers_follow_a_replaced_split(tmp_path: Path) -> None:
    """The executors' path (``open_searcher``, searchers kept open across queries): a split replaced
    under the same path is fetched again by its new add action's size and gets a new searcher."""
    from executor_lib.splits.search.split_opening import open_searcher

    uri = str(tmp_path / "t")
    (first,) = make(uri, {}, splits=1)
    store = open_store(uri)
    other = write_and_upload(store, DATA.slice(10, 25), mapping_for(DATA.schema, {}))
    assert other.size != first.size
    cache = SplitCache(tmp_path / "cache")
    schema = pa.schema([*DATA.schema])
    old = open_searcher(cache, store, first.path, schema, None, first.size)
    assert sorted(old.rows.read_all().column("id").to_pylist()) == list(range(10))
    store.put(first.path, store.read(other.path))  # the path now holds the other split
    new = open_searcher(cache, store, first.path, schema, None, other.size)
    assert sorted(new.rows.read_all().column("id").to_pylist()) == list(range(10, 35))


def test_a_footer_longer_than_the_hint_without_offsets_is_read_whole(tmp_path: Path) -> None:
    from executor_lib.format.quickwit.bundle import write_bundle
    from executor_lib.protocol.actions import AddAction

    meta = json.dumps({"segments": [], "padding": "x" * 100_000}).encode()  # cached whole: a 100 KB hotcache
    (tmp_path / "t").mkdir()
    written = write_bundle({"meta.json": meta, "data": b"abc"}, tmp_path / "t" / "big.split")
    add = AddAction("big.split", {}, (tmp_path / "t" / "big.split").stat().st_size, 0, True)  # no footer offsets
    store = CountingStore(open_store(str(tmp_path / "t")))
    footer = SplitCache(tmp_path / "cache").footer(store, add)  # type: ignore[arg-type]
    assert footer == written and store.reads == 2  # the 64 KiB hint, then the whole footer


def test_misses_walk_the_cache_once_a_while_not_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each miss used to stat every file of every entry (O(n^2) to fill a cache of n splits): within
    ``REWALK_SECONDS`` of a walk, a miss that keeps the cache within its budget walks nothing; what
    another process added is seen at the next walk, and the budget then holds."""
    from executor_lib.cache import split_cache

    uri = str(tmp_path / "t")
    adds = make(uri, {}, splits=12)
    store = open_store(uri)
    size = max(a.size for a in adds)
    walks = []
    real_entries = SplitCache._entries

    def counted(self: SplitCache) -> Any:
        walks.append(self)
        return real_entries(self)

    monkeypatch.setattr(SplitCache, "_entries", counted)
    mine = SplitCache(tmp_path / "cache", max_bytes=size * 20)
    for add in adds[:8]:
        mine.get(store, add.path)
    assert len(walks) == 1  # the first miss walks; the next 7 fit the walked total plus their own bytes
    other = SplitCache(tmp_path / "cache", max_bytes=size * 20)  # another process on the node
    for add in adds[8:]:
        other.get(store, add.path)
    monkeypatch.setattr(split_cache, "REWALK_SECONDS", 0.0)  # the interval is over
    mine.max_bytes = other.max_bytes = int(size * 6.5)
    mine.get(store, adds[0].path)  # a hit: no walk
    assert mine.evict(added=0) > 0  # walked: the other's entries count, and the budget holds again
    assert sum(size for _, size, _ in real_entries(mine)) <= mine.max_bytes
