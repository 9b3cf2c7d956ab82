"""A split's doc stores kept unpacked in its cache entry (``doc_store_rows.SegmentStore.unpacked``,
``split_source.unpacked_copy``), on the local filesystem (a whole split in the cache) and S3 (a split
fetched by the piece): a read of many of a store's blocks has the cache keep the store decompressed;
later reads gather rows from it with no decompression and give the same rows; the copies carry their
own checksums, so a damaged copy is found at the next open or read and the rows read from the split, never
wrong."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache import entry_checksums as checks
from executor_lib.cache.split_cache import SplitCache
from executor_lib.format.store import blocks as doc_store
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.rows import doc_store_rows as store_rows
from executor_lib.splits.search import split_opening
from executor_lib.splits.search.split_source import UNPACKED_SUFFIX
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage import open_store
from tests.census.sweeps import flip_in_place

N = 20_000
WORDS = np.array(["alpha", "beta", "gamma", "delta", "omega"])
OPTIONS = {"spark.indextables.indexing.typemap.body": "text"}
Reader = Callable[[SplitCache, str], pa.Table]


def _rows() -> pa.Table:
    rng = np.random.default_rng(11)
    body = [
        f"{w} row {i} " + "x" * int(n)
        for i, (w, n) in enumerate(zip(rng.choice(WORDS, N), rng.integers(0, 40, N), strict=True))
    ]
    return pa.table({"id": pa.array(range(N), pa.int64()), "body": body, "level": rng.choice(["INFO", "WARN"], N)})


@pytest.fixture
def written(table: tuple[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> tuple[Reader, pa.Table]:
    """A one-split table on the parametrized backend (local, S3), and a search of it through a cache."""
    rows = _rows()
    uri, options = table
    log = executor_lib.create_table(uri, rows.schema, configuration=OPTIONS, **options)
    with monkeypatch.context() as patch:
        patch.setattr(doc_store, "ZSTD_BLOCK_BYTES", 16 << 10)  # many blocks a split
        log.commit([write_and_upload(open_store(uri, **options), rows, mapping_for(rows.schema, OPTIONS))])

    def search(cache: SplitCache, query: str) -> pa.Table:
        log = executor_lib.open_log(uri, **options)
        return search_table(log.store, log.snapshot(), query, cache).sort_by("id")

    return search, rows


def _copies(cache: SplitCache) -> list[Path]:
    return sorted(cache.directory.rglob(f"*{UNPACKED_SUFFIX}"))


def _expected(rows: pa.Table, word: str) -> pa.Table:
    mask = pa.array([b.startswith(word + " ") for b in rows.column("body").to_pylist()])
    return rows.filter(mask)


def test_a_read_of_many_blocks_keeps_the_store_unpacked_and_later_reads_use_it(
    written: tuple[Reader, pa.Table], tmp_path: Path
) -> None:
    search, rows = written
    cache = SplitCache(tmp_path / "cache")
    store_rows._BLOCKS.clear()
    first = search(cache, "body:alpha")  # a fifth of the rows: every block
    assert first.equals(_expected(rows, "alpha"))
    (copy,) = _copies(cache)
    entry = copy.parent
    assert checks.recorded(entry, copy.name), "the copy is checked with the entry"
    stem, crc, length = copy.name.removesuffix(UNPACKED_SUFFIX).split("-")  # bound to the store's bytes
    assert len(stem) == 32 and len(crc) == 8 and int(length, 16) > 0
    assert json.loads((entry / checks.CHECKSUMS).read_text())[copy.name][0] == copy.stat().st_size
    decompressed = []
    original = doc_store.DocStore.block_into
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(doc_store.DocStore, "block_into", lambda *a, **k: decompressed.append(1) or original(*a, **k))
        patch.setattr(doc_store.DocStore, "block", lambda *a, **k: decompressed.append(1) or b"")
        again = search(SplitCache(tmp_path / "cache"), "body:beta")  # another process's look: a new searcher
        few = search(SplitCache(tmp_path / "cache"), "id:17")
    assert again.equals(_expected(rows, "beta")) and few.column("id").to_pylist() == [17]
    assert decompressed == [], "rows come from the unpacked copy"


def test_a_damaged_copy_is_found_and_the_rows_read_from_the_split(
    written: tuple[Reader, pa.Table], tmp_path: Path
) -> None:
    search, rows = written
    cache = SplitCache(tmp_path / "cache")
    search(cache, "body:alpha")
    (copy,) = _copies(cache)
    for offset in range(0, copy.stat().st_size, max(1, copy.stat().st_size // 7)):
        flip_in_place(copy, offset, 5)  # written: its modification time moves, the next open checks it
        checks._VERIFIED.clear()
        found = search(SplitCache(tmp_path / "cache"), "body:gamma")
        assert found.equals(_expected(rows, "gamma")), f"a bit flipped at {offset} of the copy changed the rows"
        copies = _copies(cache)
        assert (
            copies and checks.damaged_files(copies[0].parent, required=None) == []
        )  # fetched again, kept unpacked again
        (copy,) = copies


def test_a_searcher_kept_open_finds_its_copy_rotted_once_the_window_ends(
    written: tuple[Reader, pa.Table],
    table: tuple[str, dict[str, Any]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark's Python workers keep searchers open across queries (``split_opening.open_searcher``), so
    the copy is checked before each read from it, not only at an open: bit rot at rest (no ``stat``
    change) is found once the entry's window ends, and the rows are read from the split."""
    _, rows = written
    uri, options = table
    log = executor_lib.open_log(uri, **options)
    snap = log.snapshot()
    (add,) = snap.files
    cache = SplitCache(tmp_path / "cache")

    def searcher() -> Any:
        args = (snap.arrow_schema(), snap.doc_mapping(add), add.size, add.footer_start_offset)
        return split_opening.open_searcher(cache, log.store, add.path, *args)

    kept = searcher()
    kept.search("body:alpha")
    kept = searcher()  # (a split read by the piece has all its blocks now: its identity is settled)
    (copy,) = _copies(cache)
    st = copy.stat()
    flip_in_place(copy, st.st_size // 2, 3)
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))  # rot at rest: inode, size and time unchanged
    monkeypatch.setattr(checks, "REVERIFY_SECONDS", 0.0)  # the window has ended
    again = searcher()
    assert again is kept, "the same searcher answers"
    assert again.search("body:gamma").sort_by("id").equals(_expected(rows, "gamma"))
    (copy,) = _copies(cache)  # the damaged copy was removed, and a sound one kept again
    assert checks.damaged_files(copy.parent, required=None) == []


def test_a_copy_not_recorded_is_never_read(written: tuple[Reader, pa.Table], tmp_path: Path) -> None:
    """A crash between the copy's rename and its record leaves a file the entry does not vouch for:
    it is ignored, and written again by the next read of many blocks."""
    search, rows = written
    cache = SplitCache(tmp_path / "cache")
    search(cache, "body:alpha")
    (copy,) = _copies(cache)
    entry = copy.parent
    record = json.loads((entry / checks.CHECKSUMS).read_text())
    del record[copy.name]
    (entry / checks.CHECKSUMS).write_text(json.dumps(record))
    copy.write_bytes(os.urandom(copy.stat().st_size))  # garbage no check vouches for
    checks._VERIFIED.clear()
    assert search(SplitCache(tmp_path / "cache"), "body:delta").equals(_expected(rows, "delta"))
    assert checks.recorded(entry, copy.name) and checks.damaged_files(entry, required=None) == []


def test_a_copy_just_written_is_not_read_again_to_be_checked(
    written: tuple[Reader, pa.Table], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its CRC32 is summed as it is written and the check remembered (``record_written``): the next
    open, in this process or a new one, trusts it within the window, and reads it once that ends."""
    search, rows = written
    search(SplitCache(tmp_path / "cache"), "body:alpha")
    read: list[Path] = []
    original = checks.file_crc
    monkeypatch.setattr(checks, "file_crc", lambda path: read.append(path) or original(path))
    checks._VERIFIED.clear()  # a new process
    assert search(SplitCache(tmp_path / "cache"), "body:omega").equals(_expected(rows, "omega"))
    assert not [p for p in read if p.name.endswith(UNPACKED_SUFFIX)]
    monkeypatch.setattr(checks, "REVERIFY_SECONDS", 0.0)
    assert search(SplitCache(tmp_path / "cache"), "body:omega").equals(_expected(rows, "omega"))
    assert [p for p in read if p.name.endswith(UNPACKED_SUFFIX)]


def test_a_cache_set_to_keep_no_unpacked_stores_keeps_and_reads_none(
    written: tuple[Reader, pa.Table], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``spark.indextables.cache.unpackedStores=false`` (``SplitCache.keep_unpacked``): a read of many
    blocks gives the same rows and leaves no copy; a searcher kept open follows the setting of each
    read, and a copy kept before is no longer read."""
    from executor_lib.cache.split_cache import keep_unpacked
    from executor_lib.spark.common import node_split_cache
    from indextables_contract.errors import ConfigError

    search, rows = written
    split_opening.close_kept_searchers()
    options = {"spark.indextables.cache.directoryPath": str(tmp_path / "cache")}
    off = node_split_cache({**options, "spark.indextables.cache.unpackedStores": "false"})
    assert not off.keep_unpacked
    assert search(off, "body:alpha").equals(_expected(rows, "alpha"))
    assert _copies(off) == [], "no copy kept"
    on = node_split_cache(options)
    assert on.keep_unpacked
    assert search(on, "body:beta").equals(_expected(rows, "beta"))  # the same kept searcher: a copy now
    assert len(_copies(on)) == 1
    decompressed = []
    original = doc_store.DocStore.block_into
    monkeypatch.setattr(doc_store.DocStore, "block_into", lambda *a, **k: decompressed.append(1) or original(*a, **k))
    assert search(off, "body:gamma").equals(_expected(rows, "gamma"))
    assert decompressed, "with the setting off, the kept copy is not read: the blocks are"
    monkeypatch.setenv("INDEXTABLES_CACHE_UNPACKED", "no")
    with pytest.raises(ConfigError, match="INDEXTABLES_CACHE_UNPACKED"):
        keep_unpacked()
