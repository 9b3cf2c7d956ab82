"""Where a split's bytes live, behind one interface (as tantivy's ``Directory`` hides it).

A ``SplitSource`` gives what a ``SplitSearcher`` reads of one split: its bundle footer, the
directory Tantivy opens its index from, a member's bytes, its columnar copy, a segment's doc store
(with what fetches its missing blocks), and the index sections a query needs made present. Two
kinds exist:

* ``LocalSplit``: a split file on this node (the split cache's whole copy, or a file a test wrote),
  read in place, memory-mapped, by the native engine and for its rows (a split written elsewhere
  without stored rows is transcoded into a work directory first, once); its index is extracted into
  the work directory only for the jobs left on the ``tantivy`` package, under that directory's lock;
* ``PieceSplit``: a split fetched by the piece (``cache.split_pieces``): members laid out in the
  cache entry, ranges fetched as they are read.

``open_split_source`` picks one; ``SplitSearcher`` never asks which it has.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import json
import mmap
import os
import shutil
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, cast

import pyarrow as pa
import pyarrow.compute as pc
import tantivy

from executor_lib.cache.entry_checksums import (
    REVERIFY_SECONDS,
    damaged_files,
    record_checksums,
    record_written,
    recorded,
)
from executor_lib.cache.split_pieces import SplitPieces
from executor_lib.file_lock import entry_lock, exclusive_lock
from executor_lib.format.quickwit.bundle import (
    CHECKSUMS_MEMBER,
    LOCAL_STORE_SUFFIX,
    ROWS_IN_STORE_MEMBER,
    STORE_SUFFIX,
    TERM_SUFFIX,
    BundleFooter,
    check_member_crcs,
    extract_bundle,
    is_segment_file,
    member_name,
    read_footer,
    read_member,
)
from executor_lib.format.tantivy4java.parquet_manifest import MANIFEST_MEMBER
from executor_lib.format.termdict.convert import holds_fst
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.rows.columnar import PartedCopy, RowCopy, fetch_member, ranged_copy
from executor_lib.splits.rows.doc_store_rows import Fetch, KeptCopy, Sink
from executor_lib.splits.rows.foreign_values import needs_conversion, stored_value
from executor_lib.splits.search.native import NativeSplit
from executor_lib.splits.search.scoring import SplitFiles, split_files
from executor_lib.splits.write.companion import transcode_jvm_companion
from executor_lib.splits.write.writer import DOC_MAPPING_MEMBER, columns_members, open_columns, write_split
from indextables_contract.errors import CorruptSplitError

_TANTIVY_MEMBERS = frozenset({"meta.json", ".managed.json"})  # besides the segment files


class SplitSource(abc.ABC):
    """The bytes of one split's members, wherever they live (module docstring).

    ``name``: what errors call the split; ``origin``: the split as it was named to open it (a local
    file's path, before any transcoding; a fetched split's URI); ``footer``: its bundle footer;
    ``index_dir``: the directory Tantivy opens; ``lock_dir``: the cache entry whose lock guards what
    is built beside the index; ``pieces`` / ``bundle``: the ``SplitPieces`` or the local split file
    read (the other None), for the callers that reuse them (the searcher cache, merges).
    """

    name: str
    origin: Path | str
    footer: BundleFooter
    index_dir: Path
    lock_dir: Path
    pieces: SplitPieces | None = None
    bundle: Path | None = None
    jvm_companion: bool = False  # a companion split in tantivy4java's layout only (transcoded here)
    in_place: bool = False  # a local table's own split file read where it is (``LocalSplit``)

    @abc.abstractmethod
    def native_split(self) -> NativeSplit | None:
        """The split opened in place by the native engine (None: a layout it cannot read)."""

    @abc.abstractmethod
    def member_bytes(self, name: str) -> bytes | None:
        """The whole member ``name``, or None if the split has none."""

    @abc.abstractmethod
    def row_copy(self) -> RowCopy:
        """The split's columnar copy of its rows (its ``columns_members``)."""

    @abc.abstractmethod
    def segment_store(self, stem: str) -> tuple[memoryview, Fetch | None]:
        """A segment's doc store bytes (memory-mapped) and what fetches its missing ranges (None: all present)."""

    keep_unpacked: bool = True  # the split cache's switch (``SplitCache.keep_unpacked``), set at each open or use

    def unpacked_store(self, stem: str) -> KeptCopy | None:
        """Where a segment's doc store is kept unpacked (its blocks decompressed back to back) in the
        split's cache entry (``doc_store_rows.SegmentStore``; ``UnpackedCopy``); kept and read only
        while ``keep_unpacked`` (asked at each read: a searcher kept open follows the setting)."""
        return UnpackedCopy(self.lock_dir, stem, lambda: self.keep_unpacked)

    def ensure_fields(self, fields: Any, positions: Any) -> bool:
        """Make the index sections of ``fields`` present; True if any was fetched (the index must be
        opened again). Nothing to do where the whole index is present."""
        return False

    def reads_only_the_split(self) -> bool:
        """Whether a reuse of this source needs only its split file's identity and a fresh record of its
        members' check (a local table's split read in place, ``LocalSplit``); False elsewhere."""
        return False

    def built_damaged(self) -> list[str]:
        """The files made in ``index_dir`` rather than fetched — the term dictionary files Tantivy
        reads (``<segment>.term``: a stand-in, or the FST dictionaries built from the split's SSTable
        ones as queries need them) and a by-the-piece entry's doc store stand-ins — that differ from
        the size and CRC32 recorded when they were written (``entry_checksums``, in the directory's own
        ``checksums.json``; a stat each within the window). A directory without that record (laid out
        by an older version) names the record itself: its entry is fetched again once.

        Example: ``if source.built_damaged(): cache.discard(store, key)``
        """
        return damaged_files(self.index_dir, required=None)

    @property
    def complete(self) -> bool:
        """Whether every index section is present (a query then needs nothing fetched)."""
        return True

    @abc.abstractmethod
    def split_files(self, field_names: Sequence[str]) -> SplitFiles:
        """The split's segments and members as ``scoring`` reads them."""


class PieceSplit(SplitSource):
    """A split fetched by the piece: members laid out in ``pieces.directory``, rows read by range."""

    def __init__(self, pieces: SplitPieces, name: str) -> None:
        self.pieces, self.name, self.origin = pieces, name, name
        self.footer = pieces.footer
        self.index_dir = pieces.directory
        self.lock_dir = pieces.entry

    def native_split(self) -> NativeSplit | None:
        """The split's Tantivy files as laid out in the cache entry, each memory-mapped (ranges fetched
        later are written in place: the maps see them); None for a split of an earlier version of this
        project holding FST term dictionaries (``LOCAL_TERM_SUFFIX``: its SSTables are not laid out)."""
        files = self.footer.files  # under their local names (bundle.local_files)
        if any(name.endswith(TERM_SUFFIX) for name in files):  # an FST member laid out as <segment>.term
            return None
        members = [(member_name(n), self.index_dir / n) for n in files]
        members = [(m, path) for m, path in members if m in _TANTIVY_MEMBERS or is_segment_file(m)]
        return NativeSplit.open_files(self.name, members)

    def member_bytes(self, name: str) -> bytes | None:
        assert self.pieces is not None
        return self.pieces.member_bytes(name)

    def row_copy(self) -> RowCopy:
        assert self.pieces is not None
        parts = [
            ranged_copy(self.pieces, self.footer, member, self.name) for member in columns_members(self.footer) or ()
        ]
        return parts[0] if len(parts) == 1 else PartedCopy(parts, self.name)

    def segment_store(self, stem: str) -> tuple[memoryview, Fetch | None]:
        local = f"{stem}{LOCAL_STORE_SUFFIX}"
        with open(self.index_dir / local, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return memoryview(mapped), functools.partial(fetch_member, self.pieces, local)

    def ensure_fields(self, fields: Any, positions: Any) -> bool:
        assert self.pieces is not None
        return bool(self.pieces.ensure_fields(fields, positions))

    @property
    def complete(self) -> bool:
        return False

    def split_files(self, field_names: Sequence[str]) -> SplitFiles:
        return split_files(self.index_dir, self.pieces, field_names)


class LocalSplit(SplitSource):
    """A split file on this node, read in place: the native engine opens the file itself, and its rows
    are read memory-mapped. Its members' CRC32s are checked once per work directory (Tantivy reads
    unchecked). Only a job left on the ``tantivy`` package (a layout the native engine cannot read)
    has its index extracted into ``work_dir`` (``index_dir``), once. Several Python workers of a node
    may open the same split at once; one checks (and extracts) under the entry's lock and the others
    reuse its result."""

    def __init__(
        self, split: Path, work_dir: Path, arrow_schema: pa.Schema, doc_mapping: str | None, companion_root: str | None
    ) -> None:
        self.name, self.origin, self.lock_dir = str(split), split, work_dir
        footer = read_footer(split)
        self._index_dir = work_dir / "index"
        self._extracted = False
        work_dir.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(entry_lock(work_dir)):
            self.jvm_companion = columns_members(footer) is None and MANIFEST_MEMBER in footer.files
            if columns_members(footer) is None and ROWS_IN_STORE_MEMBER not in footer.files:
                if CHECKSUMS_MEMBER in footer.files:  # written here, so never transcoded: a member's name was damaged
                    check_member_crcs(split, footer, str(split))
                    raise CorruptSplitError(
                        f"{split}: the split holds neither a columnar copy nor {ROWS_IN_STORE_MEMBER} (damaged)"
                    )
                split, footer = _transcode(split, footer, work_dir, arrow_schema, doc_mapping, companion_root)
            # a local table's own file (SplitCache reads it in place), not a copy the cache checks itself
            self.in_place = not split.is_relative_to(work_dir)
            _check_members(split, footer, work_dir, self.in_place)
        self.bundle, self.footer = split, footer  # the local split read: this one, or its transcoded version

    @property
    def index_dir(self) -> Path:  # type: ignore[override]
        """The split's index extracted for the ``tantivy`` package, the first time it is asked for."""
        if not self._extracted:
            self._extract()
        return self._index_dir

    def _extract(self) -> None:
        assert self.bundle is not None
        index_dir = self._index_dir
        with exclusive_lock(entry_lock(self.lock_dir)):
            if not (index_dir / "meta.json").exists():
                shutil.rmtree(index_dir, ignore_errors=True)  # a partial extraction from a killed process
                tmp = Path(tempfile.mkdtemp(dir=self.lock_dir, prefix="index.tmp-"))
                extract_bundle(self.bundle, self.footer, tmp, copy_stores=False)  # rows are read from the split file
                tmp.rename(index_dir)
                # checked with the split at the next open (SplitCache.get's verify); not the FST .term files
                # built here as queries need them (ensure_fst_terms replaces them)
                extracted = {f"index/{p.name}": p for p in index_dir.iterdir() if p.is_file() and p.suffix != ".term"}
                record_checksums(self.lock_dir, extracted)
                record_checksums(index_dir, {p.name: p for p in index_dir.glob("*.term")})  # (built_damaged)
        self._extracted = True

    def built_damaged(self) -> list[str]:
        """As ``SplitSource.built_damaged``; nothing while no process of the node extracted the index.
        A split read in place has its members' CRC32s checked again here once the last check is
        ``REVERIFY_SECONDS`` old (a searcher kept open finds rot at rest as a new open would): a
        damaged one names the split."""
        if self.in_place and self.bundle is not None:
            try:
                _check_members(self.bundle, self.footer, self.lock_dir, in_place=True)
            except CorruptSplitError:
                return [str(self.bundle)]
        if not self._extracted and not self._index_dir.exists():
            return []
        return damaged_files(self._index_dir, required=None)

    def reads_only_the_split(self) -> bool:
        """Whether this source reads nothing but a local table's split file in place: no copy, no index
        extracted for the ``tantivy`` package (whose files ``built_damaged`` checks at each use), so a
        reuse needs only the file's identity and a fresh ``MEMBERS_CHECKED`` record (``members_fresh``)."""
        return self.in_place and not self._extracted and not self._index_dir.exists()

    def native_split(self) -> NativeSplit | None:
        """The split file opened in place; None for a split of an earlier version of this project
        whose ``.term`` members hold FST dictionaries (the native engine reads SSTables only)."""
        assert self.bundle is not None
        mapped = _mapped(self.bundle)
        for name, (start, end) in self.footer.files.items():
            if not name.endswith(TERM_SUFFIX) or name + ".fst" in self.footer.files:
                continue  # not a term dictionary, or one whose FST version is its own member
            if holds_fst(cast(bytes, mapped[start:end]), f"{self.name}: {name}"):  # (its footers read in place)
                return None
        return NativeSplit.open(self.bundle)

    def member_bytes(self, name: str) -> bytes | None:
        assert self.bundle is not None
        return read_member(self.bundle, self.footer, name)

    def row_copy(self) -> RowCopy:
        assert self.bundle is not None
        return open_columns(self.bundle, self.footer)

    def segment_store(self, stem: str) -> tuple[memoryview, Fetch | None]:
        assert self.bundle is not None
        start, end = self.footer.files[f"{stem}{STORE_SUFFIX}"]
        return _mapped(self.bundle)[start:end], None

    def split_files(self, field_names: Sequence[str]) -> SplitFiles:
        return split_files(self.index_dir, None, field_names)


MEMBERS_CHECKED = "members-checked"  # a work directory's record: its split's members' CRCs were checked


def _check_members(split: Path, footer: BundleFooter, work_dir: Path, in_place: bool) -> None:
    """Check the split's members' CRC32s (``check_member_crcs``: Tantivy reads them unchecked) unless
    ``work_dir``'s ``MEMBERS_CHECKED`` record says this file was checked: a cached copy (checked by
    the cache as a whole too) once, a split read in place (``in_place``) again once the record is
    ``REVERIFY_SECONDS`` old, so rot at rest, which changes no ``stat``, is found as in a cached copy.
    Raises CorruptSplitError naming the split."""
    marker, seen = work_dir / MEMBERS_CHECKED, _identity(split)
    if _read_text(marker) == seen and (not in_place or _younger_than(marker, REVERIFY_SECONDS)):
        return
    check_member_crcs(split, footer, str(split))
    with contextlib.suppress(OSError):  # a full or read-only cache: checked again at the next open
        marker.write_text(seen)


def members_fresh(work_dir: Path) -> bool:
    """Whether ``work_dir`` records a check of its split's members younger than ``REVERIFY_SECONDS``
    (``MEMBERS_CHECKED``; one ``stat``), the window ``_check_members`` keeps to for a split read in place."""
    return _younger_than(work_dir / MEMBERS_CHECKED, REVERIFY_SECONDS)


def _younger_than(path: Path, seconds: float) -> bool:
    try:
        return 0 <= time.time() - path.stat().st_mtime < seconds
    except OSError:
        return False


def _identity(path: Path) -> str:
    """What says a file is the one checked before: its size and modification time."""
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns}"


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


UNPACKED_DIR = "unpacked"  # a cache entry's unpacked doc stores, with their own checksums.json
UNPACKED_SUFFIX = ".unpacked"  # a segment's doc store decompressed: <entry>/unpacked/<segment>.unpacked


class UnpackedCopy:
    """Segment ``stem``'s unpacked doc store in the cache entry ``entry`` (``doc_store_rows.KeptCopy``).

    The copies of an entry live in its ``unpacked/`` directory with their sizes and CRC32s in its own
    ``checksums.json``, checked as the entry's files are (``entry_checksums.damaged_files``: read
    again once ``REVERIFY_SECONDS`` have passed since the last check, or at once once a file was
    rewritten) when a searcher opens and before each read from the copy, so a searcher kept open
    finds damage too. A copy not recorded (a writer killed between its rename and its record) is not
    read; a damaged one is removed with the others, and the rows are read from the split as before:
    never wrong. A copy is written to a temporary file, then renamed and recorded under the entry's
    lock (a second writer's copy is dropped); a full or read-only cache keeps none.

    Example: ``UnpackedCopy(entry, "5f2d...").mapped()`` -> None before a read of many blocks.
    """

    def __init__(self, entry: Path, stem: str, enabled: Callable[[], bool] = lambda: True) -> None:
        self.entry, self.directory, self.name = entry, entry / UNPACKED_DIR, f"{stem}{UNPACKED_SUFFIX}"
        self.enabled = enabled  # the node's setting (``SplitCache.keep_unpacked``), asked at each read

    def mapped(self) -> memoryview | None:
        if not self.enabled() or not recorded(self.directory, self.name) or not self.sound():
            return None
        try:
            return _mapped(self.directory / self.name)
        except OSError:  # removed meanwhile (evicted, or found damaged by another process)
            return None

    def sound(self) -> bool:
        if not recorded(self.directory, self.name):  # removed (found damaged, evicted) by another process
            return False
        if not damaged_files(self.directory, required=None):
            return True
        with exclusive_lock(entry_lock(self.entry)):
            shutil.rmtree(self.directory, ignore_errors=True)
        return False

    def keep(self, write: Callable[[Sink], None]) -> memoryview | None:
        path, tmp = self.directory / self.name, self.directory / f".{self.name}.tmp-{uuid.uuid4().hex}"
        try:
            self.directory.mkdir(exist_ok=True)
            with open(tmp, "wb") as f:
                summed = _Summed(f)
                write(summed)
            with exclusive_lock(entry_lock(self.entry)):
                if not recorded(self.directory, self.name):
                    os.replace(tmp, path)
                    record_written(self.directory, self.name, summed.size, summed.crc)
            return _mapped(path)
        except OSError:  # a full or read-only cache, an entry evicted meanwhile: rows come from the split
            return None
        finally:
            tmp.unlink(missing_ok=True)


class _Summed:
    """A file being written, with the size and CRC32 of what was written to it."""

    def __init__(self, out: BinaryIO) -> None:
        self.out, self.size, self.crc = out, 0, 0

    def write(self, data: bytes, /) -> int:
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)
        return self.out.write(data)


def _mapped(path: Path) -> memoryview:
    """The whole file, memory-mapped read-only."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return memoryview(b"")
        return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))


def open_split_source(
    split: Path | str,
    work_dir: Path,
    arrow_schema: pa.Schema,
    doc_mapping: str | None,
    pieces: SplitPieces | None = None,
    companion_root: str | None = None,
) -> SplitSource:
    """The source of a split: fetched by the piece (``pieces``; ``split`` only names it), else the
    local split file ``split`` extracted into ``work_dir``.

    Example: ``open_split_source(Path("x.split"), Path("/tmp/w"), schema, None).member_bytes("doc_mapping.json")``
    """
    if pieces is not None:
        return PieceSplit(pieces, str(split))
    return LocalSplit(Path(split), work_dir, arrow_schema, doc_mapping, companion_root)


def json_text(value: Any) -> Any:
    """A string column's value stored in a JSON field (``typemap.<column>=json``): the object as
    compact JSON text with sorted keys, as IndexTables4Spark reads it back; text as it is."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return value


def _transcode(
    split: Path,
    footer: BundleFooter,
    work_dir: Path,
    schema: pa.Schema,
    doc_mapping: str | None,
    companion_root: str | None = None,
) -> tuple[Path, BundleFooter]:
    """A split written elsewhere without stored rows, rewritten here as this project writes splits
    (once per work directory; an earlier version's result is reused)."""
    out = work_dir / "transcoded"
    for existing in sorted(out.glob("split-*.split")) if out.exists() else []:
        existing_footer = read_footer(existing)
        if DOC_MAPPING_MEMBER in existing_footer.files:
            return existing, existing_footer
        shutil.rmtree(out)  # left by an older version of this code: transcode again
        shutil.rmtree(work_dir / "index", ignore_errors=True)
        break
    if doc_mapping is None:
        raise CorruptSplitError(f"{split}: no doc mapping for this split; cannot read it")
    if MANIFEST_MEMBER in footer.files:  # tantivy4java's companion split: no stored rows to read
        written = transcode_jvm_companion(split, footer, schema, doc_mapping, companion_root, out)
        return written.path, written.footer
    mapping = DocMapping.from_json(doc_mapping)
    raw_dir = work_dir / "source"
    shutil.rmtree(raw_dir, ignore_errors=True)
    extract_bundle(split, footer, raw_dir, stores_aside=False)  # its rows are read through its doc store
    try:
        index = tantivy.Index.open(str(raw_dir))
    except (OSError, ValueError) as e:
        raise CorruptSplitError(f"{split}: the split's index does not open ({e})") from e
    searcher = index.searcher()
    hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs), count=False).hits
    docs = [searcher.doc(address).to_dict() for _, address in hits]
    columns = {}
    for f in mapping.fields:
        values = [d.get(f.name, [None])[0] for d in docs]
        arrow_type = schema.field(f.name).type if f.name in schema.names else None
        if arrow_type is not None and needs_conversion(arrow_type):
            values = [stored_value(v, arrow_type) for v in values]
        elif (
            arrow_type is not None
            and f.type == "json"
            and (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type))
        ):
            values = [json_text(v) for v in values]
        column = pa.array(values, type=arrow_type)
        if f.type == "ip":  # Tantivy stores IPv4 as IPv4-mapped IPv6; rows show what was written
            column = pc.replace_substring_regex(column, r"^::ffff:(\d+\.\d+\.\d+\.\d+)$", r"\1")
        columns[f.name] = column
    written = write_split(pa.table(columns), mapping, out)
    shutil.rmtree(raw_dir, ignore_errors=True)
    return written.path, written.footer
