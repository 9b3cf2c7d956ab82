"""A local table's splits are read where they are (``SplitCache.get``, ``INDEXTABLES_CACHE_LOCAL_SPLITS``):
nothing is copied into the node cache, and the table's own file is checked as a cached copy is, its
members' CRC32s at the first open and again once the last check is ``REVERIFY_SECONDS`` old, by a new
open and by a searcher kept open (bit rot at rest changes no ``stat``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache import entry_checksums
from executor_lib.cache.split_cache import SplitCache
from executor_lib.format.quickwit.bundle import read_footer
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.split_opening import close_kept_searchers, open_searcher
from executor_lib.splits.search.split_source import MEMBERS_CHECKED
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage import open_store
from indextables_contract.errors import ConfigError, CorruptSplitError
from tests.cache.test_split_cache import CountingStore
from tests.census.sweeps import flip_in_place

DATA = pa.table({"id": pa.array(range(40), pa.int64()), "tag": [f"t{i % 4}" for i in range(40)]})
SCHEMA = pa.schema([*DATA.schema])


@pytest.fixture(autouse=True)
def _no_kept_searchers() -> Any:
    close_kept_searchers()
    yield
    close_kept_searchers()


def _table(tmp_path: Path) -> tuple[str, Any]:
    uri = str(tmp_path / "t")
    log = executor_lib.create_table(uri, SCHEMA)
    add = write_and_upload(open_store(uri), DATA, mapping_for(DATA.schema, {}))
    log.commit([add])
    return uri, add


def _rot(path: Path) -> None:
    """A bit flipped at rest in the split's largest member: its size and modification time unchanged."""
    start, end = max(read_footer(path).files.values(), key=lambda r: r[1] - r[0])
    st = path.stat()
    flip_in_place(path, (start + end) // 2, 2)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _age_the_last_check(entry: Path) -> None:
    marker = entry / MEMBERS_CHECKED
    then = marker.stat().st_mtime - entry_checksums.REVERIFY_SECONDS - 1
    os.utime(marker, (then, then))


def test_a_local_tables_first_query_copies_nothing(tmp_path: Path) -> None:
    uri, add = _table(tmp_path)
    store = CountingStore(open_store(uri))
    cache = SplitCache(tmp_path / "cache")
    rows = search_table(store, executor_lib.open_log(uri).snapshot(), "tag:t1", cache, ["id"])  # type: ignore[arg-type]
    assert sorted(rows.column("id").to_pylist()) == list(range(1, 40, 4))
    assert store.reads == 0, "the split is read where it is, not fetched"
    entry = cache.get(store, add.path, add.size)  # type: ignore[arg-type]
    assert entry.split == Path(store.local_path(add.path) or "") and not (entry.directory / "data.split").exists()
    stats = cache.describe()
    assert (stats["bytes_downloaded"], stats["misses"]) == (0, 0)


def test_rot_in_a_split_read_in_place_is_found_once_its_last_check_is_old(tmp_path: Path) -> None:
    uri, add = _table(tmp_path)
    store = open_store(uri)
    cache = SplitCache(tmp_path / "cache")
    searcher = open_searcher(cache, store, add.path, SCHEMA, None, add.size)
    assert searcher.source.in_place and searcher.rows.read_all().num_rows == 40
    entry = cache.get(store, add.path, add.size).directory
    _rot(Path(store.local_path(add.path) or ""))
    assert open_searcher(cache, store, add.path, SCHEMA, None, add.size) is searcher, "within the window: kept"
    _age_the_last_check(entry)
    with pytest.raises(CorruptSplitError, match=add.path.replace(".", r"\.")):  # the searcher kept open checks again
        open_searcher(cache, store, add.path, SCHEMA, None, add.size)
    close_kept_searchers()
    with pytest.raises(CorruptSplitError, match=add.path.replace(".", r"\.")) as found:  # so does a new open
        search_table(store, executor_lib.open_log(uri).snapshot(), "tag:t1", SplitCache(tmp_path / "cache"), ["id"])
    assert "cached copy" not in str(found.value), f"no copy was made: {found.value}"


def test_a_copy_made_before_splits_were_read_in_place_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, add = _table(tmp_path)
    store = open_store(uri)
    monkeypatch.setenv("INDEXTABLES_CACHE_LOCAL_SPLITS", "copy")
    copied = SplitCache(tmp_path / "cache").get(store, add.path, add.size)
    assert copied.split == copied.directory / "data.split"
    monkeypatch.delenv("INDEXTABLES_CACHE_LOCAL_SPLITS")
    cache = SplitCache(tmp_path / "cache")
    in_place = cache.get(store, add.path, add.size, verify=True)
    assert in_place.split == Path(store.local_path(add.path) or "") and not copied.split.exists()
    assert search_table(store, executor_lib.open_log(uri).snapshot(), "*", cache).num_rows == 40


def test_a_bad_local_splits_setting_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("INDEXTABLES_CACHE_LOCAL_SPLITS", "mirror")
    with pytest.raises(ConfigError, match=r"\(or INDEXTABLES_CACHE_LOCAL_SPLITS\) is 'mirror': give in-place or copy"):
        SplitCache(tmp_path / "cache")


def test_a_kept_searcher_in_place_is_reused_with_two_stats_and_a_changed_file_is_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reusing the searcher kept over a local table's split read in place takes a ``stat`` of the file
    and one of its members' record (``split_opening._reuse_in_place``), not the cache's whole lookup
    (about 0.25 ms a split a query); a file written over (another modification time) still gets a
    new searcher at its next use, and a use counts as a cache hit."""
    uri, add = _table(tmp_path)
    store = open_store(uri)
    cache = SplitCache(tmp_path / "cache")
    searcher = open_searcher(cache, store, add.path, SCHEMA, None, add.size)
    lookups: list[str] = []
    whole_lookup = SplitCache.get
    monkeypatch.setattr(SplitCache, "get", lambda self, *a, **k: lookups.append(a[1]) or whole_lookup(self, *a, **k))
    hits = cache.describe()["hits"]
    for _ in range(3):
        assert open_searcher(cache, store, add.path, SCHEMA, None, add.size) is searcher
    assert lookups == [] and cache.describe()["hits"] == hits + 3
    local = Path(store.local_path(add.path) or "")
    st = local.stat()
    os.utime(local, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # written over: another mtime
    again = open_searcher(cache, store, add.path, SCHEMA, None, add.size)
    assert again is not searcher and set(lookups) == {add.path}  # the whole path ran
    assert again.rows.read_all().num_rows == 40
