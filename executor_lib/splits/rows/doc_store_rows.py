"""A split's rows read from its Tantivy doc stores (``DocStoreRows``), for splits that keep no
columnar copy (PROTOCOL.md §15, ``indextables.docstore-rows.arrow``).

A split whose every stored column comes back exactly from Tantivy's stored values
(``stored_docs.decodable``) keeps its rows once: in the zstd doc stores the JVM reads as well
(``doc_store.py``). Its row ``n`` is a document ordinal: the documents of its segments, in the order
of the index's ``meta.json``, numbered from 0. A row is read by finding its segment (the segments'
first rows), its block (the store's checkpoints), decompressing that block (kept in a process-wide
cache of ``BLOCK_BYTES_KEPT``), gathering the bytes of the documents asked for from all their blocks
and decoding them in one vectorized pass (``stored_docs``).

Table-like as ``columnar_copy.ColumnarCopy``: ``num_rows``, ``schema``, ``column_names``, ``select``,
``with_schema``, ``take``, ``read_all``. Columns of ``schema`` the store does not hold (index-only
ones) read as nulls.
"""

from __future__ import annotations

import itertools
import json
import os
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pyarrow as pa

from executor_lib import profiler
from executor_lib.arrow_arrays import as_numpy, empty_table, numbers
from executor_lib.format.store.arrow_columns import u32_view
from executor_lib.format.store.blocks import ZSTD_BLOCK_BYTES, DocStore, check_block, parse_store
from executor_lib.format.store.documents import StoredColumn, decode_blocks
from executor_lib.splits.rows.decoded_cache import LeastRecentlyUsed
from indextables_contract.errors import CorruptSplitError

BLOCK_BYTES_KEPT = 256 << 20  # decompressed blocks kept by the process (all splits), least recently used out
Fetch = Callable[[list[tuple[int, int]]], None]  # fetches byte ranges of a store (a split read by the piece)


_BLOCKS: LeastRecentlyUsed[bytes] = LeastRecentlyUsed(BLOCK_BYTES_KEPT, len)  # decompressed blocks
_STORE_IDS = itertools.count()


class Sink(Protocol):
    """Where an unpacked copy is written (a file)."""

    def write(self, data: bytes, /) -> int: ...


class KeptCopy(Protocol):
    """A segment's unpacked copy as its split's source keeps it (``split_source.UnpackedCopy``)."""

    def enabled(self) -> bool:
        """Whether copies are kept and read now (the node's setting; when not, none is read)."""

    def mapped(self) -> memoryview | None:
        """The copy, mapped, if one is kept and found as written (a damaged one is removed)."""

    def sound(self) -> bool:
        """Whether the copy is still as written (checked again once the entry's window has passed or a
        file changed; a damaged one is removed)."""

    def keep(self, write: Callable[[Sink], None]) -> memoryview | None:
        """Write a copy through ``write`` and keep it; the copy, mapped (None: none was kept)."""


@dataclass(eq=False)
class SegmentStore:
    """One segment's doc store: parsed over its bytes (a mapped file; a split read by the piece has
    holes where nothing was fetched), and ``fetch`` to fetch byte ranges first (None: all present).

    ``unpacked``: the store's blocks decompressed back to back, as the node's split cache keeps them
    for a split many of whose rows were read (``UNPACK_SHARE``); read in place (no decompression),
    each read asking ``copy`` first whether it is still as written (a searcher kept open for hours
    finds a copy damaged meanwhile, and reads the split again). ``copy``: where the split's source
    keeps that copy (None: it keeps none, e.g. a split not in the cache)."""

    store: DocStore
    source: str
    fetch: Fetch | None = None
    key: int = field(default_factory=lambda: next(_STORE_IDS))  # its blocks' key in the process's cache
    unpacked: memoryview | None = None
    copy: KeptCopy | None = None
    _bounds: np.ndarray | None = None  # each block's offset in ``unpacked``, and its length, last

    def _unpacked_bounds(self) -> np.ndarray:
        """Each block's offset in ``unpacked``, and its length, last (checked against the copy's size)."""
        assert self.unpacked is not None
        if self._bounds is None:
            bounds = np.concatenate([[0], np.cumsum(self.store.lengths())]).astype(np.int64)
            if int(bounds[-1]) != len(self.unpacked):
                raise CorruptSplitError(
                    f"{self.source}: its unpacked copy holds {len(self.unpacked)} bytes, its blocks {bounds[-1]}"
                )
            self._bounds = bounds
        return self._bounds

    def _unpacked_block(self, i: int) -> memoryview:
        """Block ``i`` of the unpacked copy, checked as a decompressed block is (``check_block``)."""
        assert self.unpacked is not None
        bounds = self._unpacked_bounds()
        view = self.unpacked[int(bounds[i]) : int(bounds[i + 1])]
        check_block(view, int(self.store.end_doc[i] - self.store.first_doc[i]), f"{self.source} (unpacked block {i})")
        return view

    def _gathered_unpacked(self, docs: np.ndarray) -> bytes:
        """The documents ``docs`` (ascending) of the unpacked copy as one block (``_documents_of``'s
        layout), found for all blocks at once: each block's trailing count must be its checkpoint's,
        and each document's bytes must lie within its block, before the block's offset table."""
        assert self.unpacked is not None
        bounds, store = self._unpacked_bounds(), self.store
        data = np.frombuffer(self.unpacked, np.uint8)
        u32 = u32_view(data)
        counts = store.end_doc - store.first_doc
        table = bounds[1:] - 4 - 4 * counts  # where each block's offset table starts
        block_of = store.block_of(docs)
        used = np.unique(block_of)
        if bool(np.any(table[used] < bounds[used])) or bool(np.any(u32[bounds[used + 1] - 4] != counts[used])):
            raise CorruptSplitError(
                f"{self.source}: its unpacked copy's blocks do not hold their checkpoints' documents"
            )
        local = docs - store.first_doc[block_of]
        base, count = bounds[block_of], counts[block_of]
        start = base + u32[table[block_of] + 4 * local].astype(np.int64)
        after = np.minimum(local + 1, count - 1)
        end = np.where(local + 1 >= count, table[block_of], base + u32[table[block_of] + 4 * after].astype(np.int64))
        if bool(np.any((start > end) | (end > table[block_of]))):
            raise CorruptSplitError(f"{self.source}: its unpacked copy's document offsets do not rise within a block")
        return _gathered(data, start, end)

    def _unpacked_sound(self) -> bool:
        """Whether rows are read from the unpacked copy: there is one and it is still as written (a
        damaged one is dropped, and the rows read from the split)."""
        if self.unpacked is None:
            return False
        if self.copy is not None and not (self.copy.enabled() and self.copy.sound()):
            self.unpacked, self._bounds = None, None
            return False
        return True

    def write_unpacked(self, out: Sink) -> None:
        """Every block decompressed, in order, to ``out`` (on the read threads; the blocks absent
        from a split read by the piece fetched first)."""
        if self.fetch is not None:
            self.fetch([(int(a), int(b)) for a, b in zip(self.store.start, self.store.end, strict=True)])
        if profiler.ENABLED:  # every block decompressed, once
            profiler.cache_event("doc_store_block", False, len(self.store.start))
        for block in _read_pool().map(lambda i: self.store.block(i, self.source), range(len(self.store.start))):
            out.write(block)

    def _prepare(self, read: int, absent: Sequence[int]) -> None:
        """Count ``read`` blocks in the profiler (those not ``absent`` from the process's cache as
        hits), and fetch the ``absent`` ones' bytes of a split read by the piece, all at once."""
        if profiler.ENABLED:  # blocks read: kept decompressed (hits) or decompressed now (misses)
            if read > len(absent):
                profiler.cache_event("doc_store_block", True, read - len(absent))
            if absent:
                profiler.cache_event("doc_store_block", False, len(absent))
        if absent and self.fetch is not None:
            self.fetch([(int(self.store.start[i]), int(self.store.end[i])) for i in absent])

    def blocks(self, indexes: Sequence[int], keep: bool = True) -> list[bytes | memoryview]:
        """Blocks ``indexes`` decompressed (fetched first, all at once, if absent; ``keep``: kept
        in the process's cache); of the unpacked copy where there is one."""
        if self._unpacked_sound():
            return [self._unpacked_block(i) for i in indexes]
        found = {i: _BLOCKS.get((self.key, i)) for i in indexes}
        absent = [i for i, b in found.items() if b is None]
        self._prepare(len(found), absent)
        out: list[bytes | memoryview] = []
        for i in indexes:
            block = found[i]
            if block is None:
                block = self.store.block(i, self.source)
                if keep:
                    _BLOCKS.put((self.key, i), block)
            out.append(block)
        return out

    def take(self, docs: np.ndarray, columns: Sequence[StoredColumn]) -> pa.Table:
        """The documents ``docs`` (ascending doc ids, repeats allowed) of this store as a table of
        ``columns``: their bytes gathered from their blocks, then decoded in one pass.

        A read of a few blocks keeps them decompressed for the next one (a first look, a page of
        results). A read of more than ``KEPT_READ_BLOCKS`` blocks (a query's many hits) decompresses
        the ones not kept into reused buffers on ``READ_THREADS`` threads (zstd runs without the
        GIL), gathering from each only the documents asked for, and keeps none. A read of at least
        1/``UNPACK_SHARE`` of the blocks first has the store kept unpacked (``unpack``: each block
        decompressed once), then reads from that copy, as every later read of the split does."""
        block_of = self.store.block_of(docs)
        used = np.flatnonzero(np.bincount(block_of)).tolist()
        sound = self._unpacked_sound()
        copy = self.copy if self.copy is not None and self.copy.enabled() else None
        if not sound and copy is not None and len(used) * UNPACK_SHARE >= len(self.store.start):
            self.unpacked, self._bounds = copy.keep(self.write_unpacked), None
            sound = self.unpacked is not None
            if not sound:  # kept none (a full or read-only cache): not tried again by this searcher
                self.copy = None
        if sound:
            if profiler.ENABLED:  # blocks read, kept decompressed
                profiler.cache_event("doc_store_block", True, len(used))
            return decode_blocks([self._gathered_unpacked(docs)], columns, self.source)
        bounds = np.searchsorted(block_of, np.append(used, len(self.store.start)), side="left")
        first = self.store.first_doc
        local = [docs[bounds[k] : bounds[k + 1]] - first[b] for k, b in enumerate(used)]
        if len(used) <= KEPT_READ_BLOCKS:
            picked = [_documents_of(b, d) for b, d in zip(self.blocks(used), local, strict=True)]
            return decode_blocks(picked, columns, self.source)
        kept = [_BLOCKS.get((self.key, b)) for b in used]
        absent = [b for b, block in zip(used, kept, strict=True) if block is None]
        self._prepare(len(used), absent)

        def gathered(k: int) -> bytes | memoryview:
            block = kept[k]
            if block is not None:
                return _documents_of(block, local[k])
            view = self.store.block_into(used[k], _buffer(), self.source)
            return bytes(_documents_of(view, local[k]))

        return decode_blocks(list(_read_pool().map(gathered, range(len(used)))), columns, self.source)


UNPACK_SHARE = 4  # a read of at least 1/UNPACK_SHARE of a store's blocks has the cache keep it unpacked
KEPT_READ_BLOCKS = 8  # a read of at most this many blocks keeps them decompressed (_BLOCKS)
READ_THREADS = max(1, min(4, os.cpu_count() or 1))  # blocks decompressed at once by a read of many
_THREAD = threading.local()
_POOL: tuple[int, ThreadPoolExecutor] | None = None
_POOL_LOCK = threading.Lock()


def _buffer() -> bytearray:
    """This thread's decompression buffer (a zstd block of ``ZSTD_BLOCK_BYTES`` and more fits)."""
    buffer = getattr(_THREAD, "buffer", None)
    if buffer is None:
        buffer = _THREAD.buffer = bytearray(2 * ZSTD_BLOCK_BYTES)
    return buffer


def _read_pool() -> ThreadPoolExecutor:
    """The process's pool of block readers (a forked process, as Spark's Python workers are, starts its own)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid():
            _POOL = (os.getpid(), ThreadPoolExecutor(READ_THREADS, thread_name_prefix="doc-store-read"))
        return _POOL[1]


def _gathered(data: np.ndarray, start: np.ndarray, end: np.ndarray) -> bytes:
    """The documents at bytes ``start[k]:end[k]`` of ``data``, in that order, as one decompressed
    block: their bytes gathered, then their offsets and count (``stored_docs``'s block layout)."""
    lengths = end - start
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    gather = np.repeat(start - offsets, lengths) + np.arange(int(lengths.sum()))
    return data[gather].tobytes() + offsets.astype("<u4").tobytes() + struct.pack("<I", len(start))


def _documents_of(block: bytes | memoryview, local: np.ndarray) -> bytes | memoryview:
    """A decompressed block holding only the documents ``local`` (positions in ``block``, in that
    order): their bytes gathered, with their own offsets and count (``stored_docs``'s block layout);
    ``block`` itself when that is every document in order."""
    (count,) = struct.unpack_from("<I", block, len(block) - 4)
    if len(local) == count and bool(np.all(local == np.arange(count))):
        return block
    table = len(block) - 4 - 4 * count
    starts = np.frombuffer(block, "<u4", count, table).astype(np.int64)
    ends = np.append(starts[1:], table)
    return _gathered(np.frombuffer(block, np.uint8), starts[local], ends[local])


class DocStoreRows:
    """The rows of a split read from its segments' doc stores (see the module docstring).

    Example: ``DocStoreRows(segments, stored, field_ids, types, "s.split").take(pa.array([0, 9], pa.uint64()))``.
    """

    def __init__(
        self,
        segments: Sequence[SegmentStore],
        stored: pa.Schema,
        field_ids: Mapping[str, int],
        types: Mapping[str, str],
        source: str,
        schema: pa.Schema | None = None,
    ) -> None:
        """``stored``: the stored columns and their Arrow types (the split's
        ``indextables.docstore-rows.arrow``); ``field_ids``, ``types``: each one's Tantivy field id
        (position in ``meta.json``'s schema) and doc mapping type; ``schema``: the rows' schema
        (default ``stored``)."""
        self._segments = list(segments)
        self._stored = stored
        self._field_ids = dict(field_ids)
        self._types = dict(types)
        self.source = source
        self.schema = schema if schema is not None else stored
        counts = [s.store.num_docs for s in self._segments]
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.num_rows = int(self._starts[-1])

    @property
    def segment_starts(self) -> np.ndarray:
        """The first row of each segment (and the number of rows, last)."""
        return self._starts

    @property
    def column_names(self) -> list[str]:
        return list(self.schema.names)

    def select(self, columns: Sequence[str]) -> DocStoreRows:
        """The same rows with ``columns`` only (nothing is read)."""
        return self.with_schema(pa.schema([self.schema.field(c) for c in columns]))

    def with_schema(self, schema: pa.Schema) -> DocStoreRows:
        """The same rows as ``schema``: its columns the store holds (with their stored types), the
        others as nulls (nothing is read)."""
        view = DocStoreRows.__new__(DocStoreRows)
        view.__dict__.update(self.__dict__)
        view.schema = schema
        return view

    def _columns(self) -> list[StoredColumn]:
        return [
            StoredColumn(self._field_ids[f.name], f.name, self._types[f.name], self._stored.field(f.name).type)
            for f in self.schema
            if f.name in self._stored.names
        ]

    def read_all(self) -> pa.Table:
        """Every row, as one table."""
        columns = self._columns()
        parts = []
        for s in self._segments:
            if s.store.num_docs:
                blocks = s.blocks(range(len(s.store.start)), keep=False)
                s.store.verify_crc(s.source)  # every byte is present now: the Tantivy footer's CRC too
                parts.append(decode_blocks(blocks, columns, s.source))
        return self._assemble(parts, columns, self.num_rows)

    def take(self, ids: pa.Array) -> pa.Table:
        """The rows numbered ``ids`` (uint64), in that order; IndexError names a row out of range."""
        wanted = as_numpy(ids).astype(np.int64, copy=False)
        n = len(wanted)
        if n and (wanted.min() < 0 or wanted.max() >= self.num_rows):
            bad = int(wanted[(wanted < 0) | (wanted >= self.num_rows)][0])
            raise IndexError(f"{self.source}: row {bad} is out of range (the split has {self.num_rows} rows)")
        columns = self._columns()
        order = np.argsort(wanted, kind="stable")
        ordered = wanted[order]
        segment_of = np.searchsorted(self._starts, ordered, side="right") - 1
        parts = [
            self._segments[seg].take(ordered[segment_of == seg] - self._starts[seg], columns)
            for seg in np.flatnonzero(np.bincount(segment_of, minlength=len(self._segments))).tolist()
        ]
        table = self._assemble(parts, columns, n)
        if n < 2 or bool(np.all(order[1:] > order[:-1])):
            return table
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n)
        return table.take(numbers(inverse, pa.int64()))

    def _assemble(self, parts: list[pa.Table], columns: list[StoredColumn], rows: int) -> pa.Table:
        """Decoded ``parts`` (tables of ``columns``) as one table of ``schema``."""
        stored = pa.schema([pa.field(c.name, c.arrow_type) for c in columns])
        table = pa.concat_tables(parts) if parts else empty_table(stored)
        out = [
            table.column(f.name) if f.name in stored.names else pa.chunked_array([pa.nulls(rows, f.type)], f.type)
            for f in self.schema
        ]
        fields = [self._stored.field(f.name) if f.name in stored.names else f for f in self.schema]
        return pa.Table.from_arrays(out, schema=pa.schema(fields))


def open_doc_store_rows(
    rows_member: bytes,
    meta_json: bytes,
    types: Mapping[str, str],
    store: Callable[[str], tuple[memoryview, Fetch | None]],
    source: str,
    unpacked: Callable[[str], KeptCopy | None] | None = None,
) -> DocStoreRows:
    """The rows of a split that keeps them in its doc stores.

    Args:
        rows_member: its ``indextables.docstore-rows.arrow`` (the stored columns' Arrow schema).
        meta_json: its ``meta.json`` (the segments' order, the fields' ids).
        types: each column's doc mapping type.
        store: the bytes of a segment's doc store by segment id (no dashes), and how to fetch
            ranges of it first (None: all present).
        source: names the split in errors.
        unpacked: where a segment's unpacked copy is kept, by name (its segment id, its store's
            CRC32 and length; ``SegmentStore``; None: never kept).

    Raises:
        CorruptSplitError: the member, ``meta.json`` or a doc store does not parse, or a stored
            column is not a field of the index (names ``source``).
    """
    try:
        stored = pa.ipc.open_stream(rows_member).schema
        meta = json.loads(meta_json)
        field_ids = {str(f["name"]): i for i, f in enumerate(meta["schema"])}
        stems = [str(seg["segment_id"]).replace("-", "") for seg in meta["segments"]]
    except (ValueError, KeyError, TypeError) as e:  # ArrowInvalid is a ValueError
        raise CorruptSplitError(f"{source}: the split's doc store rows are not described ({e})") from e
    missing = [c for c in stored.names if c not in field_ids or c not in types]
    if missing:
        raise CorruptSplitError(f"{source}: stored columns {missing} are not fields of its index")
    segments = []
    for stem in stems:
        data, fetch = store(stem)
        where = f"{source}: {stem}.store"
        parsed = parse_store(data, where)
        # the copy's name binds it to these bytes (the store's Tantivy footer CRC32 and length): a split
        # replaced in the cache by another never reads the copy of the one before
        copy = unpacked(f"{stem}-{parsed.crc or 0:08x}-{len(parsed.blocks):x}") if unpacked else None
        mapped = copy.mapped() if copy is not None else None
        segments.append(SegmentStore(parsed, where, fetch, unpacked=mapped, copy=copy))
    return DocStoreRows(segments, stored, field_ids, types, source)
