"""Opening a table's split for search in a process: through the node's split cache, healed when its
cached copy is damaged, and kept open for the next query (``open_searcher``) or opened once
(``load_split``).

A kept searcher is keyed by the identity of its cached copy (a whole split's file, a by-the-piece
entry's directory), so a copy fetched again gets a new searcher; its cached files are checked at
every use as an open checks them. ``damage_of_split`` turns the errors damaged bytes raise while a
split is read into ``CorruptSplitError`` naming the table's split, dropping its cached copy.

    >>> searcher = open_searcher(cache, store, add.path, schema, mapping, add.size)
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa

from executor_lib import profiler
from executor_lib.cache.split_cache import CacheEntry, SplitCache
from executor_lib.cache.split_pieces import SplitPieces
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.search.split_source import members_fresh
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import CorruptLogError, CorruptSplitError, IndexEngineError

_OPEN_SEARCHERS: OrderedDict[str, SplitSearcher] = OrderedDict()
_OPEN_LOCK = threading.Lock()
_KEY_OF: dict[str, str] = {}  # a kept searcher's split (``SplitSearcher.split``) -> its key in _OPEN_SEARCHERS
MAX_OPEN_SEARCHERS = 64
# what opening a split with damaged bytes raises (a flipped segment id in meta.json: a KeyError);
# ArrowInvalid is a ValueError, ArrowIOError an OSError
_DAMAGE = (CorruptLogError, OSError, ValueError, KeyError, IndexError, TypeError)


def open_searcher(
    cache: SplitCache,
    store: ObjectStore,
    path: str,
    arrow_schema: pa.Schema,
    doc_mapping: str | None,
    size: int | None = None,
    footer_start: int | None = None,
    companion_root: str | None = None,
) -> SplitSearcher:
    """A searcher over the split at ``path`` (through the node's split cache), kept open for the
    next query in this process (Spark reuses Python workers): splits are immutable, so an open
    searcher never goes stale — it is keyed by the cached file's identity, so a copy fetched
    again (replaced, repaired) gets a new searcher. Its cached files are checked at every use as at
    an open (a whole copy's ``damaged_files``, a by-the-piece entry's ``SplitPieces.sound``: a
    ``stat`` each within ``REVERIFY_SECONDS`` of the last read-through), so a file changed under it
    is found at the next use and the split fetched again, never answered from.
    ``size``: the add action's (see ``load_split``);
    ``footer_start`` its ``footerStartOffset`` (a cold split's footer is then one ranged read);
    ``companion_root`` a companion table's source root (``SplitSearcher``).
    The profiler (when on) times it as ``split_open`` and counts ``searcher`` hits and misses."""
    if not profiler.ENABLED:
        return _open_searcher(cache, store, path, arrow_schema, doc_mapping, size, footer_start, companion_root)
    t0 = time.perf_counter_ns()
    searcher = _open_searcher(cache, store, path, arrow_schema, doc_mapping, size, footer_start, companion_root)
    profiler.record("split_open", t0)
    return searcher


def _open_searcher(
    cache: SplitCache,
    store: ObjectStore,
    path: str,
    arrow_schema: pa.Schema,
    doc_mapping: str | None,
    size: int | None,
    footer_start: int | None,
    companion_root: str | None = None,
) -> SplitSearcher:
    reused = _reuse_in_place(cache, store, path, size, companion_root)
    if reused is not None:
        return reused
    key = cache.pieces_identity(store, path)  # a split fetched by the piece, kept open: one stat
    if key is not None:
        searcher = _kept(key)
        if searcher is not None and searcher.pieces is not None and size in (None, searcher.pieces.size):
            # its fetched ranges as fetched, what was built beside them as built (a stat each within the window)
            if searcher.pieces.sound() and not searcher.source.built_damaged():
                cache.count_hit(store, path)
                return _reused(searcher, cache)
            _forget_searcher(key)
            cache.discard(store, path)
    pieces = _pieces(cache, store, path, size, footer_start)
    key = cache.pieces_identity(store, path) if pieces is not None else None
    if pieces is not None and key is not None:
        searcher = _open_healing(cache, store, path, arrow_schema, doc_mapping, size, footer_start, None, pieces)
        return _opened_anew(cache.pieces_identity(store, path) or key, searcher)
    # a whole copy: checked as every open checks it (``entry_checksums.damaged_files``: a stat of each
    # file within the window), so a kept searcher never reads an index file that changed under it;
    # a damaged copy is fetched again, under another key
    entry = cache.get(store, path, size, verify=True)
    key = _whole_key(cache, store, path, size, entry, companion_root)
    searcher = _kept(key)
    if searcher is not None:
        if not searcher.source.built_damaged():
            _note_in_place(cache, store, path, size, companion_root, entry, key, searcher)
            return _reused(searcher, cache)
        _forget_searcher(key)
        cache.discard(store, path)
    searcher = _open_healing(
        cache, store, path, arrow_schema, doc_mapping, size, footer_start, companion_root, counted=False
    )
    if searcher.pieces is not None:  # (fetched by the piece after all: the whole copy was dropped meanwhile)
        key = cache.pieces_identity(store, path) or key
    else:
        entry = cache.get(store, path, size, count=False)
        key = _whole_key(cache, store, path, size, entry, companion_root)
        _note_in_place(cache, store, path, size, companion_root, entry, key, searcher)
    return _opened_anew(key, searcher)


# A kept searcher over a local table's split read in place, by (cache, store root, path, size, companion
# root): (the split file, the searcher's key, its cache entry, which records the members' last check).
_IN_PLACE: dict[tuple[str, str, str, int | None, str | None], tuple[str, str, Path]] = {}


def _note_in_place(
    cache: SplitCache,
    store: ObjectStore,
    path: str,
    size: int | None,
    companion_root: str | None,
    entry: CacheEntry,
    key: str,
    searcher: SplitSearcher,
) -> None:
    """Remember a searcher just checked as a whole open checks it, when it reads a local table's split
    in place and nothing else (``LocalSplit.reads_only_the_split``), for ``_reuse_in_place``."""
    if searcher.source.reads_only_the_split():
        with _OPEN_LOCK:
            _IN_PLACE[(str(cache.directory), store.root_uri, path, size, companion_root)] = (
                str(entry.split),
                key,
                entry.directory,
            )
            while len(_IN_PLACE) > 4 * MAX_OPEN_SEARCHERS:  # bounded as the kept searchers are
                del _IN_PLACE[next(iter(_IN_PLACE))]


def _reuse_in_place(
    cache: SplitCache, store: ObjectStore, path: str, size: int | None, companion_root: str | None
) -> SplitSearcher | None:
    """The searcher kept over a local table's split read in place, reused with a ``stat`` of the file and
    one of its entry's record of the members' last check (``_note_in_place``): the file's identity
    (inode, modification time, size) must be the one the searcher was kept under, so a file replaced or
    written over is found at this use, as the whole path finds it, and once the record is
    ``REVERIFY_SECONDS`` old the whole path checks the members' CRC32s again. None: take the whole path
    (which checks every file)."""
    noted = _IN_PLACE.get((str(cache.directory), store.root_uri, path, size, companion_root))
    if noted is None or not cache.in_place:
        return None
    split, key, entry = noted
    if not members_fresh(entry):
        return None
    try:
        st = os.stat(split)
    except OSError:
        return None
    if _file_key(split, st, companion_root) != key:
        return None
    searcher = _kept(key)
    if searcher is None:
        return None
    cache.count_hit(store, path, entry)
    return _reused(searcher, cache)


def _kept(key: str) -> SplitSearcher | None:
    """The searcher kept open under ``key``, made the most recently used, or None."""
    with _OPEN_LOCK:
        searcher = _OPEN_SEARCHERS.get(key)
        if searcher is not None:
            _OPEN_SEARCHERS.move_to_end(key)
        return searcher


def _reused(searcher: SplitSearcher, cache: SplitCache) -> SplitSearcher:
    searcher.source.keep_unpacked = cache.keep_unpacked  # (the setting of this read)
    if profiler.ENABLED:
        profiler.cache_event("searcher", True)
    return searcher


def _opened_anew(key: str, searcher: SplitSearcher) -> SplitSearcher:
    _remember_searcher(key, searcher)
    if profiler.ENABLED:
        profiler.cache_event("searcher", False)
    return searcher


def _whole_key(
    cache: SplitCache, store: ObjectStore, path: str, size: int | None, entry: CacheEntry, companion_root: str | None
) -> str:
    """The identity of a whole cached copy an open searcher is kept under (a copy fetched again has another)."""
    try:
        st = entry.split.stat()
    except FileNotFoundError:  # evicted by another process just now: fetch it again
        entry = cache.get(store, path, size)
        st = entry.split.stat()
    return _file_key(str(entry.split), st, companion_root)


def _file_key(split: str, st: os.stat_result, companion_root: str | None) -> str:
    """What a searcher kept over a whole file is keyed by: its identity (a JVM companion's rows: its root too)."""
    return f"{split}@{st.st_ino}:{st.st_mtime_ns}:{st.st_size}|{companion_root}"


def _open_healing(
    cache: SplitCache,
    store: ObjectStore,
    path: str,
    arrow_schema: pa.Schema,
    doc_mapping: str | None,
    size: int | None,
    footer_start: int | None,
    companion_root: str | None,
    pieces: SplitPieces | None = None,
    counted: bool = True,
) -> SplitSearcher:
    """Open a searcher over the cached split (``pieces``: as fetched by the piece already), its cached
    files checked first (``SplitCache.get``'s ``verify``, ``SplitPieces.load``'s checksums); a copy
    that does not open is dropped and fetched again once, so only a split damaged at its source fails
    (CorruptSplitError naming it). ``counted``: False where the caller's own lookup counted the hit."""
    for attempt in (1, 2):
        try:
            if pieces is None:
                pieces = _pieces(cache, store, path, size, footer_start)
            if pieces is not None:
                return _open_pieces(cache, store, path, pieces, arrow_schema, doc_mapping)
            entry = cache.get(store, path, size, verify=True, count=counted)
            return _open(cache, store, path, entry, arrow_schema, doc_mapping, companion_root)
        except CorruptSplitError:
            if attempt == 2:
                raise
            pieces = None
            cache.discard(store, path)  # (dropped already when it did not open; a bad footer or size too)
    raise AssertionError("unreachable")


def _remember_searcher(key: str, searcher: SplitSearcher) -> None:
    """Keep an opened searcher for reuse, the least recently used dropped past ``MAX_OPEN_SEARCHERS``;
    one searcher per split: another kept for the same split (over a copy since dropped) is let go."""
    with _OPEN_LOCK:
        stale = _KEY_OF.get(str(searcher.split))
        if stale is not None and stale != key:
            _OPEN_SEARCHERS.pop(stale, None)
        _KEY_OF[str(searcher.split)] = key
        _OPEN_SEARCHERS[key] = searcher
        while len(_OPEN_SEARCHERS) > MAX_OPEN_SEARCHERS:
            _, dropped = _OPEN_SEARCHERS.popitem(last=False)
            _KEY_OF.pop(str(dropped.split), None)


def _forget_searcher(key: str) -> None:
    with _OPEN_LOCK:
        dropped = _OPEN_SEARCHERS.pop(key, None)
        if dropped is not None:
            _KEY_OF.pop(str(dropped.split), None)


def load_split(
    cache: SplitCache,
    store: ObjectStore,
    path: str,
    arrow_schema: pa.Schema,
    doc_mapping: str | None,
    size: int | None = None,
    footer_start: int | None = None,
    companion_root: str | None = None,
) -> SplitSearcher:
    """Open the split at ``path`` from the cache (by the piece where ``SplitCache.pieces`` says so).
    ``size`` is the add action's size: a cached copy of another size is fetched again, a fetched
    split of another size is refused; ``footer_start`` its ``footerStartOffset``. A split that
    does not open, or whose cached files differ from their checksums, has its cached copy dropped and
    fetched again once (``_open_healing``); a split that still does not open raises CorruptSplitError
    naming the table's split, not the cache file."""
    return _open_healing(cache, store, path, arrow_schema, doc_mapping, size, footer_start, companion_root)


def _pieces(
    cache: SplitCache, store: ObjectStore, path: str, size: int | None, footer_start: int | None
) -> SplitPieces | None:
    """The split fetched by the piece (``SplitCache.pieces``), or None to fetch it whole (a footer
    that does not parse, or a short read, is CorruptSplitError naming the table's split)."""
    return cache.pieces(store, path, size, footer_start)


def _open_pieces(
    cache: SplitCache, store: ObjectStore, path: str, pieces: SplitPieces, arrow_schema: pa.Schema, mapping: str | None
) -> SplitSearcher:
    return _opened(
        cache,
        store,
        path,
        lambda: SplitSearcher(store.uri_of(path), pieces.entry, arrow_schema, mapping, pieces=pieces),
    )


def _open(
    cache: SplitCache,
    store: ObjectStore,
    path: str,
    entry: CacheEntry,
    arrow_schema: pa.Schema,
    mapping: str | None,
    companion_root: str | None = None,
) -> SplitSearcher:
    return _opened(
        cache,
        store,
        path,
        lambda: SplitSearcher(entry.split, entry.directory, arrow_schema, mapping, companion_root=companion_root),
    )


def _opened(cache: SplitCache, store: ObjectStore, path: str, make: Callable[[], SplitSearcher]) -> SplitSearcher:
    """``make()``: a searcher of the cached split ``path``; a split that does not open (damaged bytes,
    a Rust panic) has its cached copy dropped and is CorruptSplitError named as the table's split."""
    try:
        searcher = make()
        searcher.source.keep_unpacked = cache.keep_unpacked
        damaged = searcher.source.built_damaged()
        if damaged:
            made = ", ".join(damaged)
            raise CorruptSplitError(f"{store.uri_of(path)}: files made in its cache entry ({made}) are damaged")
        return searcher
    except BaseException as e:  # a Rust panic (pyo3's PanicException) is a BaseException
        if not isinstance(e, _DAMAGE) and type(e).__name__ != "PanicException":
            raise
        cache.discard(store, path)
        if isinstance(e, CorruptSplitError):  # found damaged: named as the table's split
            raise CorruptSplitError(
                f"{cache.named_as_source(store, path, e.message)}{_dropped(cache, store, path)}"
            ) from e
        raise CorruptSplitError(
            f"{store.uri_of(path)}: the split cannot be read ({type(e).__name__}: {e}){_dropped(cache, store, path)}"
        ) from e


@contextlib.contextmanager
def damage_of_split(cache: SplitCache, store: ObjectStore, path: str) -> Iterator[None]:
    """Run work on one split; an error that means its bytes are damaged (Arrow or I/O errors, an index
    out of range, a Tantivy failure) drops the split's cached copy, so a repaired split is fetched
    again, and becomes CorruptSplitError naming the table's split. Query and option errors pass.

    Example: ``with damage_of_split(cache, store, add.path): rows = scan_split(searcher, ...)``.
    """
    try:
        yield
    except CorruptSplitError as e:  # found damaged while read (a doc store block that does not decode)
        cache.discard(store, path)
        raise CorruptSplitError(f"{cache.named_as_source(store, path, e.message)}{_dropped(cache, store, path)}") from e
    except (pa.ArrowException, OSError, IndexError, IndexEngineError) as e:
        cache.discard(store, path)
        dropped = _dropped(cache, store, path)
        raise CorruptSplitError(
            f"{store.uri_of(path)}: the split cannot be searched ({type(e).__name__}: {e}){dropped}"
        ) from e


def _dropped(cache: SplitCache, store: ObjectStore, path: str) -> str:
    """What an error adds about the split's cached copy: none was made of a split read in place."""
    return "" if cache.reads_in_place(store, path) else "; its cached copy was dropped"


def close_kept_searchers() -> int:
    """Let go of every searcher this process keeps open (``open_searcher``); returns how many there were.

    Example: ``close_kept_searchers()`` -> ``12``
    """
    with _OPEN_LOCK:
        count = len(_OPEN_SEARCHERS)
        _OPEN_SEARCHERS.clear()
        _KEY_OF.clear()
        _IN_PLACE.clear()
    return count
