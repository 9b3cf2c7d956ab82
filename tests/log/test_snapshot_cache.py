"""The process-wide snapshot cache (``log.snapshot_cache``) through ``TransactionLog(shared_snapshots=...)``
and ``read_snapshot``: what a repeated query reads, that it sees every commit, and that a table created
again at the same place is never mixed with the old one. Every body runs on the local filesystem and S3."""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import executor_lib
from executor_lib.log.config import split_options
from executor_lib.log.snapshot_cache import SnapshotCache
from executor_lib.log.tables import read_snapshot
from executor_lib.log.transaction_log import TransactionLog
from executor_lib.storage import ObjectInfo, ObjectStore, open_store
from tests.log.helpers import add, make_table

Table = tuple[str, dict[str, Any]]


class CountingStore(ObjectStore):
    """The real store, with each call counted by kind (instrumentation: every call goes through)."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    @property
    def root_uri(self) -> str:
        return self.inner.root_uri

    @property
    def cache_identity(self) -> str:
        return self.inner.cache_identity

    def uri_of(self, key: str) -> str:
        return self.inner.uri_of(key)

    def local_path(self, key: str) -> Path | None:
        return self.inner.local_path(key)

    def read(self, key: str) -> bytes:
        self.calls["read"] += 1
        return self.inner.read(key)

    def read_range(self, key: str, start: int, length: int) -> bytes:
        self.calls["read_range"] += 1
        return self.inner.read_range(key, start, length)

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)

    def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        self.inner.put_if_absent(key, data, metadata)

    def list(self, prefix: str, start_after: str | None = None, recursive: bool = True) -> Iterator[ObjectInfo]:
        self.calls["list"] += 1
        return self.inner.list(prefix, start_after, recursive)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def head(self, key: str) -> ObjectInfo:
        self.calls["head"] += 1
        return self.inner.head(key)


def counted_log(uri: str, options: dict[str, Any], cache: SnapshotCache) -> tuple[TransactionLog, CountingStore]:
    config, storage = split_options(options)
    store = CountingStore(open_store(uri, **storage))
    return TransactionLog(store, config, cache), store


def test_a_repeated_read_lists_once_past_the_cached_version_and_reads_only_new_version_files(table: Table) -> None:
    uri, options = table
    writer = make_table(uri, options)
    files = [add() for _ in range(4)]
    for f in files[:3]:
        writer.commit([f])
    cache = SnapshotCache()
    first, _ = counted_log(uri, options, cache)
    snap = first.snapshot()
    assert snap.version == 3 and len(cache) == 1

    again, store = counted_log(uri, options, cache)  # a new log object, as each query makes
    assert again.snapshot() is snap
    assert store.calls == {"list": 2}, "no _last_checkpoint, state or manifest read: two LISTs past version 3"

    writer.commit([files[3]])
    after, store = counted_log(uri, options, cache)
    newer = after.snapshot()
    assert newer.version == 4 and {f.path for f in newer.files} == {f.path for f in files}
    assert newer.base == "cached version 3 + version files 4..4"
    assert store.calls == {"list": 2, "read": 1}, "the one new version file"
    assert cache.get(store.cache_identity) is newer


def test_time_travel_and_a_log_without_the_cache_load_as_before(table: Table) -> None:
    uri, options = table
    writer = make_table(uri, options)
    writer.commit([add()])
    writer.commit([add()])
    assert read_snapshot(uri, **options).version == 2
    assert read_snapshot(uri, version=1, **options).version == 1
    plain = executor_lib.open_log(uri, **options).snapshot()
    assert plain.version == 2 and not plain.base.startswith("cached")


def test_a_table_created_again_at_the_same_place_is_not_extended_from_the_old_one(table: Table) -> None:
    uri, options = table
    old = make_table(uri, options)
    old.commit([add()])
    cache = SnapshotCache()
    log, store = counted_log(uri, options, cache)
    assert log.snapshot().version == 1
    if options:  # an object store (S3, Azure)
        for entry in list(store.inner.list("")):
            store.inner.delete(entry.key)
    else:
        shutil.rmtree(uri)
    time.sleep(1.1)  # S3 and Azure list modification times in whole seconds: the check needs another second
    new = make_table(uri, options)
    fresh = [add(), add()]
    new.commit([fresh[0]])
    new.commit([fresh[1]])
    log, _ = counted_log(uri, options, cache)
    snap = log.snapshot()
    assert snap.version == 2 and {f.path for f in snap.files} == {f.path for f in fresh}


def test_the_cache_keeps_the_newest_snapshot_and_at_most_its_tables(tmp_path: Path) -> None:
    cache = SnapshotCache(max_tables=2)
    snaps = {}
    for name in ("a", "b", "c"):
        uri = str(tmp_path / name)
        log = make_table(uri, {})
        log.commit([add()])
        snaps[name] = log.snapshot()
        older = log.snapshot(version=0)
        cache.offer(name, snaps[name])
        cache.offer(name, older)  # an older version never replaces a newer one
    assert len(cache) == 2 and cache.get("a") is None
    assert cache.get("c") is snaps["c"] and cache.get("b") is snaps["b"]
    off = SnapshotCache(max_tables=0)
    off.offer("a", snaps["a"])
    assert len(off) == 0
