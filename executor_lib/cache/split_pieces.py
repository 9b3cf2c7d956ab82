"""A split in the node's cache fetched by the piece: only the members and byte ranges queries read.

A split on object storage is a bundle of members (``format/quickwit/bundle.py``). A cold search used to
download all of it; a ``SplitPieces`` entry instead lays the members out as files of their full
length in ``<entry>/pieces/`` (the directory the ``tantivy`` package opens) and fills in, by ranged
reads of the split, only:

* **whole**: every member that is neither a doc store, a composite index file nor a columnar copy
  (``meta.json``, ``.managed.json``, ``.fast``, ``.del``, the doc mapping, the segment offsets,
  and any member this code does not know, e.g. an earlier version's ``.term.fst``);
* **doc store** (``<seg>.store``, laid out as ``<seg>.docstore`` beside an empty stand-in the
  ``tantivy`` package opens, ``bundle.local_files``): its skip index, doc store and Tantivy footers
  (``hotcache.open_ranges``), then, of a split that keeps its rows there
  (``ROWS_IN_STORE_MEMBER``), the blocks holding a search's hits, all at once before they are
  decoded (``store_rows.DocStoreRows``). A split with a columnar copy never has its blocks fetched,
  and a split with neither (written by IndexTables4Spark, transcoded through its doc store) is
  fetched whole, never by the piece;
* **composite index files** (``<seg>.idx .pos .term .fieldnorm``; an SSTable ``.term`` laid out as
  ``<seg>.term.sstable``, whose FST version the searcher builds as fields are queried,
  ``format/termdict/convert.py``): their footers at open, and the sections of a field when a query on
  that field is about to run (``ensure_fields``). A query's
  fields are read off the compiled Tantivy query (``query_fields``); when they cannot be, every
  section is fetched. So no query runs over bytes that were not fetched;
* **columnar copy** (``indextables.columns*.arrow``): its IPC footer, then the record batches
  holding a search's hits, all at once before they are decoded (``ColumnarCopy``'s prefetch);
  other reads Arrow makes in ``FETCH_ALIGN`` blocks (``member_file``).

Ranges closer than ``COALESCE_GAP`` are one ranged read, and up to ``PARALLEL_READS`` reads of one
fetch are in flight at once (object stores answer each in tens of milliseconds).

Unfetched ranges are holes of a sparse file (they read as zeros); the entry's ``pieces.json``
records which ranges of each member are present, and nothing reads a range it does not list.
Pieces are fetched under the entry's lock (``file_lock.entry_lock``), so processes of a node
fetch a range once; ``pieces.json`` is replaced atomically. A fetched range of the wrong length
raises ``CorruptSplitError`` naming the split and is not recorded.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from executor_lib.cache import entry_checksums
from executor_lib.cache.entry_checksums import record_checksums
from executor_lib.file_lock import entry_lock, exclusive_lock
from executor_lib.format.quickwit.bundle import (
    ASIDE_SUFFIXES,
    CHECKSUM_CHUNK,
    CHECKSUMS_MEMBER,
    ROWS_IN_STORE_MEMBER,
    BundleFooter,
    check_tantivy_crc,
    is_checksummed,
    is_segment_file,
    local_files,
    member_name,
    parse_checksums,
    stand_in,
)
from executor_lib.format.quickwit.hotcache import (
    COMPOSITE_EXTENSIONS,
    check_slices,
    composite_sections,
    open_ranges,
    parse_hotcache,
)
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import CorruptSplitError

PIECES_DIR = "pieces"
STATE_FILE = "pieces.json"
FETCH_ALIGN = 16 << 10  # ranged reads of the columnar copy are widened to blocks of this many bytes
PARALLEL_READS = 8  # ranged reads of one fetch in flight at once
COALESCE_GAP = 32 << 10  # ranges of the split closer than this are fetched in one read
TAIL_BYTES = 16 << 10  # a doc store's or composite file's tail is fetched in one read of at most this
COPY_PREFIX = "indextables.columns"  # columnar copies: indextables.columns.arrow, ...-by-segment.arrow
_SEGMENT_MEMBER = re.compile(r"^[0-9a-f]{32}\.(.+)$")
Ranges = list[tuple[int, int]]


def chunk_checked(member: str) -> bool:
    """Whether a member's fetched ranges are checked chunk by chunk against ``CHECKSUMS_MEMBER``: every
    member but segment files, and the composite index files (postings, positions, term dictionaries,
    field norms) where the split lists them. A ``.fast`` file is fetched whole and checked against its
    Tantivy footer; a doc store's blocks carry their own checksums (``format/store/blocks.py``)."""
    if is_checksummed(member):
        return True
    return is_segment_file(member) and member.rsplit(".", 1)[-1] in COMPOSITE_EXTENSIONS


def member_kind(name: str) -> str:
    """How a member is fetched: ``copy`` (by range), ``store`` (open ranges only), ``composite``
    (footers, then per field) or ``whole``."""
    if name.startswith(COPY_PREFIX) and name.endswith(".arrow"):
        return "copy"
    match = _SEGMENT_MEMBER.match(member_name(name))
    ext = match.group(1) if match else ""
    if ext in ("store", "docstore"):  # a doc store is laid out aside, as <segment>.docstore (bundle.local_files)
        return "store"
    if ext in COMPOSITE_EXTENSIONS:
        return "composite"
    return "whole"


def query_needs(query: Any, field_names: list[str]) -> tuple[set[int] | None, bool]:
    """What a compiled query reads of the composite index files: its fields (``query_fields``) and
    whether positions (``.pos``): only phrase queries (``PhraseQuery``, ``PhrasePrefixQuery``,
    ``RegexPhraseQuery``) read them; term queries are built with frequencies only, as Tantivy's
    query parser builds them (``query_compile``, ``searcher``)."""
    return query_fields(query, field_names), "Phrase" in repr(query)


def query_fields(query: Any, field_names: list[str]) -> set[int] | None:
    """The Tantivy field ids a compiled query reads, from its debug form (``Term(field=3 ...``,
    ``Field(3)``, ``field_name: "x"``); ``None`` (meaning every field) when it names none and is not
    the all-documents query, or names a field this schema does not have. Naming too many fields
    costs bytes, never answers."""
    text = repr(query)
    if text in ("Query(AllQuery)", "Query(EmptyQuery)"):
        return set()
    ids = {int(m) for m in re.findall(r"(?:field=|Field\()(\d+)", text)}
    for name in re.findall(r'field_name: "((?:[^"\\]|\\.)*)"', text):
        found = _field_of_path(name, field_names)
        if found is None:
            return None
        ids.add(found)
    if not ids or any(i >= len(field_names) for i in ids):
        return None
    return ids


def _field_of_path(name: str, field_names: list[str]) -> int | None:
    if name in field_names:
        return field_names.index(name)
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):  # a JSON path: the longest field name before a dot
        head = ".".join(parts[:cut])
        if head in field_names:
            return field_names.index(head)
    return None


class SplitPieces:
    """One split's entry fetched by the piece (see the module docstring).

    Example: ``p = SplitPieces.open(store, key, size, footer, entry, count); p.ensure_fields({2})``.
    """

    def __init__(
        self, store: ObjectStore, key: str, entry: Path, state: dict[str, Any], count: Callable[[int], None]
    ) -> None:
        self.store = store
        self.key = key
        self.entry = entry
        self.directory = entry / PIECES_DIR
        self.identity = str(state["id"])
        self.size = int(state["size"])
        files = {n: (int(s), int(e)) for n, (s, e) in state["files"].items()}
        self.footer = BundleFooter(files, int(state["footer_start"]), self.size)
        self._present: dict[str, Ranges] = {n: [tuple(r) for r in rs] for n, rs in state["present"].items()}
        # each fetched range's CRC32 (member -> [start, stop, crc]), checked when the entry is loaded
        self._sums: dict[str, list[tuple[int, int, int]]] = _sums_of(state)
        self._count = count  # bytes fetched, for the cache's counters
        self._sections: dict[str, dict[int, Ranges]] | None = None
        self._checksums: dict[str, list[int]] | None = None  # the split's CHECKSUMS_MEMBER, once present
        self.field_names: list[str] = []
        self._checked: tuple[tuple[tuple[str, int, int, int], ...], float] | None = None  # (``_file_stats``, when)

    # --- opening ------------------------------------------------------------------------------

    @staticmethod
    def exists(entry: Path) -> bool:
        return (entry / STATE_FILE).is_file()

    @classmethod
    def load(
        cls, store: ObjectStore, key: str, entry: Path, size: int | None, count: Callable[[int], None]
    ) -> SplitPieces | None:
        """The entry's pieces if it holds them for a split of ``size`` bytes and every fetched range
        still has the CRC32 it was fetched with (read once per open of a searcher), else None: the
        caller drops the entry and fetches again. A ``pieces.json`` that does not parse, or lacks the
        checksums (an older cache), is None too."""
        try:
            state = json.loads((entry / STATE_FILE).read_text())
            if size is not None and int(state.get("size", -1)) != size:
                return None
            if not isinstance(state.get("sums"), dict):
                return None
            pieces = cls(store, key, entry, state, count)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        stats = pieces._file_stats()
        if pieces.damaged():
            return None
        pieces._checked = (stats, time.time())
        return pieces

    def sound(self) -> bool:
        """Whether the entry's fetched ranges are still as fetched, checked before a searcher kept open
        over them is used again: a ``stat`` of each file when a check of this object found them so less
        than ``REVERIFY_SECONDS`` ago and no file has changed since (inode, modification time, size),
        else every fetched range's CRC32 read again (``damaged``), the ranges other processes fetched
        meanwhile included. So a file written over is found at the next use, and bit rot at rest, which
        changes no ``stat``, once the window ends — as ``entry_checksums.damaged_files`` does for a
        whole split.

        Example: ``if not pieces.sound(): cache.discard(store, key)``
        """
        stats = self._file_stats()
        checked = self._checked
        if (
            stats
            and checked is not None
            and checked[0] == stats
            and 0 <= time.time() - checked[1] < entry_checksums.REVERIFY_SECONDS
        ):
            return True
        try:
            if not self._reload():
                return False
        except CorruptSplitError:
            return False
        if not stats or self.damaged():
            return False
        self._checked = (stats, time.time())
        return True

    def _file_stats(self) -> tuple[tuple[str, int, int, int], ...]:
        """Name, inode, modification time and size of ``STATE_FILE`` and of every member file a range
        of which is present; () when the entry is gone."""
        try:
            out = []
            files = [(STATE_FILE, self.entry / STATE_FILE), *((n, self.directory / n) for n in self._present)]
            for name, path in files:
                st = path.stat()
                out.append((name, st.st_ino, st.st_mtime_ns, st.st_size))
        except OSError:
            return ()
        return tuple(sorted(out))

    def damaged(self) -> list[str]:
        """The members a fetched range of which differs from the CRC32 it was fetched with, or is not
        recorded (every present range must be)."""
        out = []
        for name, ranges in self._present.items():
            sums = self._sums.get(name, [])
            covered = sum(stop - start for start, stop, _ in sums)
            if covered != sum(stop - start for start, stop in ranges):
                out.append(name)
                continue
            try:
                with open(self.directory / name, "rb", buffering=0) as f:
                    if any(zlib.crc32(os.pread(f.fileno(), stop - start, start)) != crc for start, stop, crc in sums):
                        out.append(name)
            except OSError:
                out.append(name)
        return out

    @classmethod
    def create(
        cls,
        store: ObjectStore,
        key: str,
        footer: BundleFooter,
        entry: Path,
        count: Callable[[int], None],
        hotcache: bytes | None = None,
    ) -> SplitPieces:
        """Lay out a new entry (caller holds the entry's lock, ``entry`` is empty or absent) and
        fetch what every query needs: whole members, doc store and composite file tails; then check
        the split's ``hotcache`` (its bytes, as the footer read gave them) against the members, as a
        whole split's read does (``check_hotcache``).

        Raises:
            CorruptSplitError: a fetched range of the wrong length, a whole segment file that differs
                from its Tantivy CRC32, a member that does not parse, or a hotcache that does not parse
                or differs from a member (names the split and the member).
        """
        bundle = footer
        directory = entry / PIECES_DIR
        directory.mkdir(parents=True, exist_ok=True)
        # Laid out under their local names (bundle.local_files): an FST ``.term.fst`` member as ``.term``,
        # else the SSTable ``.term`` as ``.term.sstable`` (a composite file too, fetched by field).
        footer = BundleFooter(local_files(footer.files), footer.footer_start, footer.footer_end)
        for name, (start, end) in footer.files.items():
            if "/" in name or name in ("", ".", ".."):
                raise CorruptSplitError(f"{store.uri_of(key)}: split lists an invalid file name {name!r}")
            with open(directory / name, "wb") as f:
                f.truncate(end - start)
        state = {
            "id": uuid.uuid4().hex,
            "size": footer.footer_end,
            "footer_start": footer.footer_start,
            "files": {n: [s, e] for n, (s, e) in footer.files.items()},
            "present": {},
            "sums": {},
        }
        pieces = cls(store, key, entry, state, count)
        wanted: dict[str, Ranges] = {}
        for name, (start, end) in footer.files.items():
            kind = member_kind(name)
            if kind == "whole":
                wanted[name] = [(0, end - start)]
            else:  # a doc store's or composite file's footers, a columnar copy's IPC footer
                wanted[name] = [(max(0, end - start - TAIL_BYTES), end - start)]
        pieces._fetch(wanted)
        for name in footer.files:  # a whole segment file (.fast): its Tantivy CRC32 too
            if member_kind(name) == "whole" and is_segment_file(name):
                with open(directory / name, "rb") as f:
                    check_tantivy_crc(f.read(), f"{store.uri_of(key)}: member {name}")
        stand_ins: dict[str, Path] = {}
        for name in footer.files:
            if member_kind(name) in ("store", "composite"):
                pieces._fetch({name: pieces._open_ranges(name)})
            if name.endswith(ASIDE_SUFFIXES):  # the tantivy package opens a stand-in
                tail = pieces.read(name, max(0, pieces._length(name) - TAIL_BYTES), pieces._length(name))
                stand_in_name, data = stand_in(name, tail, f"{store.uri_of(key)}: {member_name(name)}")
                (directory / stand_in_name).write_bytes(data)
                stand_ins[stand_in_name] = directory / stand_in_name
        record_checksums(directory, stand_ins)  # checked with what is built beside them (SplitSource.built_damaged)
        if hotcache is not None:
            pieces._check_hotcache(hotcache, bundle)
        pieces._save()
        (entry / "source.uri").write_text(store.uri_of(key))
        return pieces

    def _check_hotcache(self, hotcache: bytes, bundle: BundleFooter) -> None:
        """Check the split's hotcache against its members (``hotcache.check_slices``): the ranges it
        caches are what Tantivy reads on open (mostly fetched already: footers, small members), so
        fetching the rest costs little, and the JVM's reads of this split are served from it."""
        source = self.store.uri_of(self.key)
        cache = parse_hotcache(hotcache, source)
        local = {span: name for name, span in self.footer.files.items()}  # laid out under local names
        wanted = {
            local[bundle.files[name]]: [(piece.start, piece.stop) for piece in file.slices]
            for name, file in cache.slice_caches.items()
            if bundle.files.get(name) in local
        }
        self._fetch(wanted)

        def read(start: int, end: int) -> bytes:  # bytes start..end of the split
            for (s, e), name in local.items():
                if s <= start and end <= e and self.is_present(name, start - s, end - s):
                    with open(self.directory / name, "rb", buffering=0) as f:
                        return os.pread(f.fileno(), end - start, start - s)
            return self.store.read_range(self.key, start, end - start)  # a member not laid out (an FST's .term)

        check_slices(cache, bundle.files, read, source)

    # --- what is present ----------------------------------------------------------------------

    def _length(self, name: str) -> int:
        start, end = self.footer.files[name]
        return end - start

    def missing(self, name: str, ranges: Iterable[tuple[int, int]]) -> Ranges:
        """The parts of ``ranges`` of member ``name`` that are not present."""
        out: Ranges = []
        have = self._present.get(name, [])
        for start, stop in ranges:
            for s, e in have:
                if e <= start or s >= stop:
                    continue
                if s > start:
                    out.append((start, s))
                start = max(start, e)
                if start >= stop:
                    break
            if start < stop:
                out.append((start, stop))
        return out

    def is_present(self, name: str, start: int, stop: int) -> bool:
        return not self.missing(name, [(start, stop)])

    def _reload(self) -> bool:
        """Take the ranges other processes fetched since from ``STATE_FILE``; False when it is missing,
        does not parse, or is another entry's (this one was made again)."""
        try:
            state = json.loads((self.entry / STATE_FILE).read_text())
        except (OSError, ValueError):
            return False
        if not isinstance(state, dict) or state.get("id") != self.identity:
            return False
        try:
            present = {n: [tuple(r) for r in rs] for n, rs in state["present"].items()}
            sums = _sums_of(state)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            where = f"{self.store.uri_of(self.key)}: its cache entry's {STATE_FILE}"
            raise CorruptSplitError(f"{where} does not parse ({type(e).__name__}: {e})") from e
        self._present, self._sums = present, sums
        return True

    def _save(self) -> None:
        state = {
            "id": self.identity,
            "size": self.size,
            "footer_start": self.footer.footer_start,
            "files": {n: [s, e] for n, (s, e) in self.footer.files.items()},
            "present": {n: [list(r) for r in rs] for n, rs in self._present.items()},
            "sums": {n: [list(r) for r in rs] for n, rs in self._sums.items()},
        }
        tmp = self.entry / f"{STATE_FILE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.entry / STATE_FILE)

    # --- fetching -----------------------------------------------------------------------------

    def fetch(self, wanted: Mapping[str, Iterable[tuple[int, int]]]) -> int:
        """Make ``wanted`` (member -> ranges) present, under the entry's lock; returns the bytes fetched."""
        wanted = {n: list(rs) for n, rs in wanted.items()}
        if not any(self.missing(n, rs) for n, rs in wanted.items()):
            return 0
        if not self.entry.is_dir():
            raise FileNotFoundError(f"{self.entry}: the cache entry was evicted")
        with exclusive_lock(entry_lock(self.entry)):
            if not (self.entry / STATE_FILE).is_file():
                raise FileNotFoundError(f"{self.entry}: the cache entry was evicted")
            self._reload()
            fetched = self._fetch(wanted)
            if fetched:
                self._save()
        return fetched

    def _fetch(self, wanted: Mapping[str, Iterable[tuple[int, int]]]) -> int:
        """Fetch the absent parts of ``wanted``: ranges of the split less than ``COALESCE_GAP`` apart
        are one ranged read (a small split's members and tails come in one). A member the split's
        ``CHECKSUMS_MEMBER`` lists is fetched in whole ``CHECKSUM_CHUNK``s, each checked (``_verify``)."""
        pieces = sorted(
            (self.footer.files[name][0] + start, self.footer.files[name][0] + stop, name, start)
            for name, ranges in wanted.items()
            for start, stop in self.missing(name, self._chunked(name, ranges))
        )
        groups: list[list[tuple[int, int, str, int]]] = []
        for piece in pieces:
            if groups and piece[0] - max(p[1] for p in groups[-1]) <= COALESCE_GAP:
                groups[-1].append(piece)
            else:
                groups.append([piece])
        fetched = 0
        if len(groups) > 1:  # object stores answer each read in tens of ms: several at once
            with ThreadPoolExecutor(min(PARALLEL_READS, len(groups))) as pool:
                datas = list(pool.map(self._read_group, groups))
        else:
            datas = [self._read_group(g) for g in groups]
        for group, data in zip(groups, datas, strict=True):
            first = group[0][0]
            fetched += len(data)
            for absolute_start, absolute_stop, name, start in group:
                chunk = data[absolute_start - first : absolute_stop - first]
                with open(self.directory / name, "r+b", buffering=0) as f:
                    os.pwrite(f.fileno(), chunk, start)
                self._add(name, start, start + absolute_stop - absolute_start)
                self._sums.setdefault(name, []).append((start, start + len(chunk), zlib.crc32(chunk)))
        if fetched:
            self._count(fetched)
        self._verify([(name, start, start + stop - first) for first, stop, name, start in pieces])
        return fetched

    def _chunked(self, name: str, ranges: Iterable[tuple[int, int]]) -> Ranges:
        """``ranges`` of member ``name`` widened to whole ``CHECKSUM_CHUNK``s where its chunks may be checked
        (``chunk_checked``)."""
        if not chunk_checked(member_name(name)):
            return list(ranges)
        length = self._length(name)
        return _union(  # two ranges in one chunk widen to the same bytes: fetched (and summed) once
            (start // CHECKSUM_CHUNK * CHECKSUM_CHUNK, min(length, -(-stop // CHECKSUM_CHUNK) * CHECKSUM_CHUNK))
            for start, stop in ranges
        )

    def _verify(self, fetched: Iterable[tuple[str, int, int]]) -> None:
        """Check the chunks that ranges just ``fetched`` (member, start, stop) lie in against the split's
        ``CHECKSUMS_MEMBER`` (none for a split written before it; segment files only where it lists them:
        their Tantivy footers' CRC32s are of the whole file, which a split read by the piece never has).

        Raises:
            CorruptSplitError: a chunk differs, or ``CHECKSUMS_MEMBER`` does not parse (names split and member).
        """
        source = self.store.uri_of(self.key)
        if self._checksums is None:
            length = self._length(CHECKSUMS_MEMBER) if CHECKSUMS_MEMBER in self.footer.files else None
            if length is None or not self.is_present(CHECKSUMS_MEMBER, 0, length):
                return
            with open(self.directory / CHECKSUMS_MEMBER, "rb") as f:
                data = f.read()
            files = {member_name(n): span for n, span in self.footer.files.items()}
            self._checksums = parse_checksums(data, files, source)
            fetched = [(n, 0, self._length(n)) for n, rs in self._present.items() if rs]  # all present so far
        for name, start, stop in fetched:
            crcs = self._checksums.get(member_name(name)) if chunk_checked(member_name(name)) else None
            if crcs is None or stop <= start:
                continue
            length = self._length(name)
            with open(self.directory / name, "rb", buffering=0) as f:
                for k in range(start // CHECKSUM_CHUNK, -(-stop // CHECKSUM_CHUNK)):
                    chunk_start, chunk_stop = k * CHECKSUM_CHUNK, min(length, (k + 1) * CHECKSUM_CHUNK)
                    if not self.is_present(name, chunk_start, chunk_stop):
                        continue
                    if zlib.crc32(os.pread(f.fileno(), chunk_stop - chunk_start, chunk_start)) != crcs[k]:
                        raise CorruptSplitError(
                            f"{source}: member {member_name(name)}: bytes {chunk_start}..{chunk_stop} differ from "
                            f"the split's {CHECKSUMS_MEMBER} (damaged)"
                        )

    def _read_group(self, group: list[tuple[int, int, str, int]]) -> bytes:
        first, last = group[0][0], max(p[1] for p in group)
        data = self.store.read_range(self.key, first, last - first)
        if len(data) != last - first:
            raise CorruptSplitError(
                f"{self.store.uri_of(self.key)}: reading bytes {first}..{last} (member {group[0][2]}) returned "
                f"{len(data)} bytes: the split is shorter than its footer says (damaged or replaced)"
            )
        return data

    def _add(self, name: str, start: int, stop: int) -> None:
        self._present[name] = _union([*self._present.get(name, []), (start, stop)])

    def read(self, name: str, start: int, stop: int) -> bytes:
        """Bytes ``start..stop`` of member ``name``, fetched first if absent."""
        self.fetch({name: [(start, stop)]})
        with open(self.directory / name, "rb", buffering=0) as f:
            return os.pread(f.fileno(), stop - start, start)

    def _local_reader(self, name: str) -> Callable[[int, int], bytes]:
        """``read(start, stop)`` of a member, fetching (without taking the lock: callers hold it or
        are creating the entry) what is absent."""

        def read(start: int, stop: int) -> bytes:
            if not 0 <= start <= stop <= self._length(name):
                raise ValueError(f"{name}: range {start}..{stop} outside the member")
            self._fetch({name: [(start, stop)]})
            with open(self.directory / name, "rb", buffering=0) as f:
                return os.pread(f.fileno(), stop - start, start)

        return read

    def _open_ranges(self, name: str) -> Ranges:
        try:
            return open_ranges(member_name(name), self._length(name), self._local_reader(name))
        except ValueError as e:
            raise CorruptSplitError(f"{self.store.uri_of(self.key)}: member {name} does not parse ({e})") from e

    def sections(self) -> dict[str, dict[int, Ranges]]:
        """Each composite member's sections by field id (from footers already present)."""
        if self._sections is None:
            out = {}
            for name in self.footer.files:
                if member_kind(name) == "composite":
                    try:
                        read = functools.partial(self.read, name)
                        out[name] = composite_sections(self._length(name), read)
                    except ValueError as e:
                        raise CorruptSplitError(
                            f"{self.store.uri_of(self.key)}: member {name} does not parse ({e})"
                        ) from e
            self._sections = out
        return self._sections

    def ensure_fields(self, fields: set[int] | None, positions: bool = True) -> bool:
        """Fetch the composite sections of ``fields`` (Tantivy field ids; None: every field) that
        are absent, those of ``.pos`` only with ``positions``. True when some were absent as this
        object saw the entry (fetched now, by this process or another): an index opened before
        should be opened again."""
        wanted: dict[str, Ranges] = {}
        for name, by_field in self.sections().items():
            if not positions and name.endswith(".pos"):
                continue
            ranges = [r for f, rs in by_field.items() if fields is None or f in fields for r in rs]
            if ranges and self.missing(name, ranges):
                wanted[name] = ranges
        if not wanted:
            return False
        self.fetch(wanted)
        return True

    def ensure_all_index(self) -> None:
        """Everything a search of any field needs (PREWARM): every composite section, and the rows:
        the whole columnar copy, or the whole doc stores of a split that keeps its rows there
        (``ROWS_IN_STORE_MEMBER``); a split with a columnar copy leaves its doc store's blocks unfetched."""
        self.ensure_fields(None)
        rows_kind = "store" if ROWS_IN_STORE_MEMBER in self.footer.files else "copy"
        self.fetch({n: [(0, self._length(n))] for n in self.footer.files if member_kind(n) == rows_kind})

    def member_bytes(self, name: str) -> bytes | None:
        """A whole member (fetched if absent), or None if the split does not hold it."""
        if name not in self.footer.files:
            return None
        return self.read(name, 0, self._length(name))

    def member_file(self, name: str) -> RangedMember:
        """A read-only file object over member ``name`` that fetches what it reads, in ``FETCH_ALIGN`` blocks."""
        return RangedMember(self, name, self._length(name))


def _union(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """``ranges`` sorted, the overlapping and touching ones merged."""
    merged: Ranges = []
    for start, stop in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(stop, merged[-1][1]))
        else:
            merged.append((start, stop))
    return merged


def _sums_of(state: Mapping[str, Any]) -> dict[str, list[tuple[int, int, int]]]:
    return {str(n): [(int(a), int(b), int(c)) for a, b, c in rs] for n, rs in state.get("sums", {}).items()}


class RangedMember(io.RawIOBase):
    """A member of a split fetched by the piece, as a seekable read-only file (for ``pa.PythonFile``):
    a read of an absent range fetches the ``FETCH_ALIGN`` blocks covering it."""

    def __init__(self, pieces: SplitPieces, name: str, length: int) -> None:
        super().__init__()
        self._pieces, self._name, self._length, self._pos = pieces, name, length, 0
        self._fd: int | None = os.open(pieces.directory / name, os.O_RDONLY)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._length}[whence]
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def size(self) -> int:
        return self._length

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        start, stop = self._pos, min(self._length, self._pos + len(view))
        if stop <= start:
            return 0
        if not self._pieces.is_present(self._name, start, stop):
            aligned = (start // FETCH_ALIGN * FETCH_ALIGN, min(self._length, -(-stop // FETCH_ALIGN) * FETCH_ALIGN))
            self._pieces.fetch({self._name: [aligned]})
        assert self._fd is not None
        data = os.pread(self._fd, stop - start, start)
        view[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        super().close()
