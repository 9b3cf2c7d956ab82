"""A split's columnar copy of its rows: the Arrow IPC file members ``indextables.columns.arrow``
(rows in ``__row`` order) and ``indextables.columns-by-segment.arrow`` (merged splits), or, in a
split merged from sources' copies as they were, ``indextables.columns-by-segment.<k>.arrow`` parts
(``PartedCopy``), written and read here.

Writing (``ColumnarCopyWriter``): zstd-compressed record batches (Arrow IPC buffer compression)
of one fixed number of rows, chosen from the first rows given so that a batch holds about
``COPY_BATCH_BYTES`` uncompressed, and recorded in the schema's metadata
(``indextables.batchRows``). On log rows a compressed copy is 0.40x the uncompressed one
(24.1 MB -> 9.6 MB for 300K rows, 0.72x the same rows as Parquet).

Reading (``ColumnarCopy``): the member is memory-mapped and read batch by batch: a search
decompresses only the batches holding its hits, and only the columns it returns (IPC
``included_fields``). With a fixed batch size the batch of a row is a division; copies written
before compression (uncompressed, batches of any size) are read the same way, their batch
bounds taken from the batches themselves (zero-copy). Decoded batches are kept by the
process (``DECODED_BYTES_KEPT``), so repeated searches of a warm split do not decompress again.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import struct
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from executor_lib.arrow_arrays import as_numpy, empty_table, numbers
from executor_lib.format.quickwit.bundle import BundleFooter
from executor_lib.splits.rows.decoded_cache import LeastRecentlyUsed
from executor_lib.splits.rows.doc_store_rows import DocStoreRows

COPY_COMPRESSION = "zstd"
# Uncompressed bytes a batch aims at. Smaller batches cost a search less to decompress (a hit costs
# its batch: ~0.2 ms at 128 KB) and compress as well on log rows (zstd on 1K- to 64K-row batches of
# 300K log rows: 8.9-9.0 MB every time); a scan reads them all either way.
COPY_BATCH_BYTES = 128 << 10
MAX_BATCH_ROWS = 1 << 16
MIN_BATCH_ROWS = 64
BATCH_ROWS_KEY = b"indextables.batchRows"
DECODED_BYTES_KEPT = 256 << 20  # decoded batches kept by the process (all copies), least recently used out


_DECODED: LeastRecentlyUsed[pa.RecordBatch] = LeastRecentlyUsed(DECODED_BYTES_KEPT, lambda b: int(b.nbytes))
_COPY_IDS = itertools.count()  # one per opened copy: the decoded batches' key (views share it)


def batch_rows_for(batch: pa.RecordBatch) -> int:
    """Rows per batch for a copy whose rows look like ``batch``: about ``COPY_BATCH_BYTES`` a batch,
    between ``MIN_BATCH_ROWS`` and ``MAX_BATCH_ROWS``."""
    per_row = max(1, batch.nbytes // max(1, batch.num_rows))
    return int(min(MAX_BATCH_ROWS, max(MIN_BATCH_ROWS, COPY_BATCH_BYTES // per_row)))


class ColumnarCopyWriter:
    """Writes a columnar copy (an Arrow IPC file) in zstd-compressed batches of one fixed number of
    rows (the last may be shorter), whatever the size of the batches given. Memory: at most one
    batch's rows held back plus the batch given.

    Example: ``w = ColumnarCopyWriter(path, schema); w.write(batch); w.close()``.
    """

    def __init__(self, path: Path, schema: pa.Schema, compression: str | None = COPY_COMPRESSION) -> None:
        self.path = path
        self.schema = schema
        self.compression = compression
        self._ipc: pa.ipc.RecordBatchFileWriter | None = None
        self._closed = False
        self._batch_rows = 0
        self._pending: list[pa.RecordBatch] = []
        self._rows = 0

    def _open(self, batch_rows: int) -> pa.ipc.RecordBatchFileWriter:
        self._batch_rows = batch_rows
        metadata = {**(self.schema.metadata or {}), BATCH_ROWS_KEY: str(batch_rows).encode()}
        options = pa.ipc.IpcWriteOptions(compression=self.compression)
        self._ipc = pa.ipc.new_file(str(self.path), self.schema.with_metadata(metadata), options=options)
        return self._ipc

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        ipc = self._ipc or self._open(batch_rows_for(batch))
        self._pending.append(batch)
        self._rows += batch.num_rows
        if self._rows < self._batch_rows:
            return
        held = pa.Table.from_batches(self._pending, schema=self.schema)
        full = self._rows - self._rows % self._batch_rows
        for start in range(0, full, self._batch_rows):
            ipc.write_batch(_one_batch(held.slice(start, self._batch_rows)))
        rest = held.slice(full)
        self._pending, self._rows = rest.to_batches(), rest.num_rows

    def close(self) -> None:
        """Write what is held back and finish the file."""
        if self._closed:
            return
        ipc = self._ipc or self._open(MAX_BATCH_ROWS)
        if self._rows:
            ipc.write_batch(_one_batch(pa.Table.from_batches(self._pending, schema=self.schema)))
        self._pending, self._rows, self._closed = [], 0, True
        ipc.close()

    def abandon(self) -> None:
        """Close the file without writing what is held back (the split is given up)."""
        self._pending, self._rows = [], 0
        if not self._closed and self._ipc is not None:
            with contextlib.suppress(OSError, pa.ArrowException):
                self._ipc.close()
        self._closed = True


def _one_batch(rows: pa.Table) -> pa.RecordBatch:
    """``rows`` (at least one) as one record batch."""
    return rows.combine_chunks().to_batches()[0]


class ColumnarCopy:
    """The rows of a split's columnar copy, read batch by batch (see the module docstring).

    ``schema`` is the rows' schema: the copy's columns, plus, in ``output``'s order, columns the copy
    does not hold (index-only ones), read as nulls. Table-like: ``num_rows``, ``schema``,
    ``column_names``, ``select``, ``take``, ``read_all``.

    Example: ``ColumnarCopy.open(split, footer, member).take(pa.array([3, 9], pa.uint64()))``.
    """

    def __init__(
        self,
        buffer: pa.Buffer | pa.NativeFile,
        source: str,
        output: pa.Schema | None = None,
        prefetch: tuple[list[tuple[int, int]], Callable[[list[tuple[int, int]]], None]] | None = None,
    ) -> None:
        """``buffer``: the copy's bytes, or a file that reads them (``cache/split_pieces.py``: ranged
        reads of a split fetched by the piece). ``prefetch``: each record batch's byte range (``ipc_blocks``)
        and a function that fetches ranges at once, called with the batches a ``take`` will decode."""
        self._prefetch = prefetch
        self._buffer = buffer
        self.source = source
        reader = pa.ipc.open_file(buffer)
        self._stored = reader.schema
        self.schema = output if output is not None else _plain(reader.schema)
        self._starts = _batch_starts(reader, buffer)
        self.num_rows = int(self._starts[-1])
        self._id = next(_COPY_IDS)
        self._readers: dict[tuple[str, ...], pa.ipc.RecordBatchFileReader] = {}

    @classmethod
    def open(cls, split: Path, footer: BundleFooter, member: str, output: pa.Schema | None = None) -> ColumnarCopy:
        """The copy ``member`` of the local split, memory-mapped."""
        start, end = footer.files[member]
        mapped = pa.memory_map(str(split))
        mapped.seek(start)
        return cls(mapped.read_buffer(end - start), f"{split}:{member}", output)

    @property
    def column_names(self) -> list[str]:
        return list(self.schema.names)

    def select(self, columns: Sequence[str]) -> ColumnarCopy:
        """The same rows with ``columns`` only (nothing is read)."""
        return self.with_schema(pa.schema([self.schema.field(c) for c in columns]))

    def with_schema(self, schema: pa.Schema) -> ColumnarCopy:
        """The same rows as ``schema``: its columns the copy holds (with the copy's types), the
        others as nulls. Shares the decoded batches (nothing is read)."""
        view = ColumnarCopy.__new__(ColumnarCopy)
        view.__dict__.update(self.__dict__)
        view.schema = schema
        return view

    def read_all(self) -> pa.Table:
        """Every row, as one table."""
        self._fetch_batches(range(len(self._starts) - 1))
        return self._assemble([self._batch(i) for i in range(len(self._starts) - 1)], self.num_rows)

    def _fetch_batches(self, batches: Iterable[int]) -> None:
        """Fetch at once the bytes of the ``batches`` not decoded yet (a copy read by range)."""
        if self._prefetch is None:
            return
        blocks, fetch = self._prefetch
        columns = self._projection()
        ranges = [blocks[b] for b in batches if b < len(blocks) and _DECODED.get((self._id, b, columns)) is None]
        if ranges:
            fetch(ranges)

    def take(self, ids: pa.Array) -> pa.Table:
        """The rows numbered ``ids`` (uint64), in that order; IndexError names a row out of range."""
        wanted = as_numpy(ids).astype(np.int64, copy=False)
        n = len(wanted)
        if n and (wanted.min() < 0 or wanted.max() >= self.num_rows):
            bad = int(wanted[(wanted < 0) | (wanted >= self.num_rows)][0])
            raise IndexError(f"{self.source}: row {bad} is out of range (the copy has {self.num_rows} rows)")
        ascending = n < 2 or bool(np.all(wanted[1:] > wanted[:-1]))
        order = None if ascending else np.argsort(wanted, kind="stable")
        sorted_ids = wanted if order is None else wanted[order]
        starts = self._starts
        bounds = np.searchsorted(sorted_ids, starts)  # the ids in batch b: bounds[b]:bounds[b + 1]
        parts = []
        self._fetch_batches(int(b) for b in np.nonzero(bounds[1:] > bounds[:-1])[0])
        for b in np.nonzero(bounds[1:] > bounds[:-1])[0]:
            in_batch = sorted_ids[bounds[b] : bounds[b + 1]] - starts[b]
            batch = self._batch(int(b))
            if bool(np.all(np.diff(in_batch) == 1)):  # a run of rows: a zero-copy slice
                parts.append(batch.slice(int(in_batch[0]), len(in_batch)))
            else:
                parts.append(batch.take(numbers(in_batch, pa.int64())))
        table = self._assemble(parts, n)
        if order is None:
            return table
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n)
        return table.take(numbers(inverse, pa.int64()))

    def _projection(self) -> tuple[str, ...]:
        """The stored columns ``schema`` names, in the copy's order (as IPC reads them)."""
        wanted = set(self.schema.names)
        return tuple(c for c in self._stored.names if c in wanted)

    def _batch(self, index: int) -> pa.RecordBatch:
        columns = self._projection()
        key = (self._id, index, columns)
        batch = _DECODED.get(key)
        if batch is not None:
            return batch
        reader = self._readers.get(columns)
        if reader is None:
            included = [self._stored.get_field_index(c) for c in columns]
            options = pa.ipc.IpcReadOptions(included_fields=included) if included else None
            reader = self._readers[columns] = pa.ipc.open_file(self._buffer, options=options)
        batch = reader.get_batch(index)
        _DECODED.put(key, batch)
        return batch

    def _assemble(self, parts: list[pa.RecordBatch], rows: int) -> pa.Table:
        """``parts`` (batches of the projected stored columns) as a table of ``schema``."""
        stored = pa.schema([self._stored.field(c) for c in self._projection()])
        table = pa.Table.from_batches(parts, schema=stored) if parts else empty_table(stored)
        columns = [
            table.column(f.name) if f.name in stored.names else pa.chunked_array([pa.nulls(rows, f.type)])
            for f in self.schema
        ]
        return pa.Table.from_arrays(columns, schema=pa.schema([_as_in(stored, f) for f in self.schema]))


class PartedCopy:
    """A columnar copy made of several parts in row order (a merged split's
    ``indextables.columns-by-segment.<k>.arrow`` members, each the copy of one source split, copied
    into the merged split as it was, still compressed). Table-like as ``ColumnarCopy``: a row's part
    is a binary search over the parts' first rows; each part reads only the batches it is asked for.

    Example: ``PartedCopy([first, second]).take(pa.array([0, first.num_rows], pa.uint64()))`` is the
    first row of each part.
    """

    def __init__(self, parts: Sequence[ColumnarCopy], source: str | None = None) -> None:
        if not parts:
            raise ValueError("a parted columnar copy needs at least one part")
        self._parts = list(parts)
        self.source = source or self._parts[0].source
        self.schema = self._parts[0].schema
        self._starts = np.concatenate([[0], np.cumsum([p.num_rows for p in self._parts])]).astype(np.int64)
        self.num_rows = int(self._starts[-1])

    @property
    def column_names(self) -> list[str]:
        return list(self.schema.names)

    def select(self, columns: Sequence[str]) -> PartedCopy:
        """The same rows with ``columns`` only (nothing is read)."""
        return self.with_schema(pa.schema([self.schema.field(c) for c in columns]))

    def with_schema(self, schema: pa.Schema) -> PartedCopy:
        """Each part ``with_schema(schema)`` (nothing is read)."""
        return PartedCopy([p.with_schema(schema) for p in self._parts], self.source)

    def read_all(self) -> pa.Table:
        """Every row, as one table."""
        return pa.concat_tables([p.read_all() for p in self._parts])

    def take(self, ids: pa.Array) -> pa.Table:
        """The rows numbered ``ids`` (uint64), in that order; IndexError names a row out of range."""
        wanted = as_numpy(ids).astype(np.int64, copy=False)
        if len(wanted) and (wanted.min() < 0 or wanted.max() >= self.num_rows):
            bad = int(wanted[(wanted < 0) | (wanted >= self.num_rows)][0])
            raise IndexError(f"{self.source}: row {bad} is out of range (the copy has {self.num_rows} rows)")
        part_of = np.searchsorted(self._starts, wanted, side="right") - 1
        # the parts holding ids (np.unique would import numpy.ma on first use, ~0.06 s)
        used = np.flatnonzero(np.bincount(part_of, minlength=len(self._parts))) if len(wanted) else np.zeros(1, int)
        if len(used) == 1:  # the common case (ascending hits of one segment): no reordering
            only = int(used[0])
            return self._parts[only].take(numbers(wanted - self._starts[only], pa.uint64()))
        order = np.argsort(part_of, kind="stable")  # grouped by part, each group in the given order
        tables = []
        for part in used.tolist():
            rows = wanted[part_of == part] - self._starts[part]
            tables.append(self._parts[part].take(numbers(rows, pa.uint64())))
        grouped = pa.concat_tables(tables)
        if bool(np.all(order[1:] > order[:-1])):
            return grouped
        inverse = np.empty(len(order), dtype=np.int64)
        inverse[order] = np.arange(len(order))
        return grouped.take(numbers(inverse, pa.int64()))


RowCopy = ColumnarCopy | PartedCopy | DocStoreRows  # a split's rows: its columnar copy, or its doc stores


def _as_in(stored: pa.Schema, field: pa.Field) -> pa.Field:
    return stored.field(field.name) if field.name in stored.names else field


def _plain(schema: pa.Schema) -> pa.Schema:
    """``schema`` without this module's metadata key."""
    metadata = {k: v for k, v in (schema.metadata or {}).items() if k != BATCH_ROWS_KEY}
    return schema.with_metadata(metadata) if metadata else schema.remove_metadata()


def _batch_starts(reader: pa.ipc.RecordBatchFileReader, buffer: pa.Buffer) -> np.ndarray:
    """First row of each batch, then the row count: from the recorded batch size (reading only the
    last batch's first column), else (copies written before it was recorded) from every batch."""
    batches = reader.num_record_batches
    if batches == 0:
        return np.zeros(1, dtype=np.int64)
    recorded = (reader.schema.metadata or {}).get(BATCH_ROWS_KEY)
    if recorded is not None and reader.schema.names:
        size = int(recorded)
        last = pa.ipc.open_file(buffer, options=pa.ipc.IpcReadOptions(included_fields=[0])).get_batch(batches - 1)
        counts = np.full(batches, size, dtype=np.int64)
        counts[-1] = last.num_rows
    else:
        counts = np.array([reader.get_batch(i).num_rows for i in range(batches)], dtype=np.int64)
    return np.concatenate([[0], np.cumsum(counts)])


_ARROW_MAGIC = b"ARROW1"


def ipc_blocks(length: int, read: Callable[[int, int], bytes]) -> list[tuple[int, int]] | None:
    """Each record batch's byte range (message and body) in an Arrow IPC file of ``length`` bytes,
    from its footer (flatbuffer ``Footer.recordBatches``: ``Block {offset: long, metaDataLength: int,
    bodyLength: long}``); None when the footer does not read as expected (a reader then reads the
    batches as Arrow asks for them)."""
    try:
        tail = read(length - 10, length)
        (footer_len,) = struct.unpack("<i", tail[:4])
        if tail[4:] != _ARROW_MAGIC or not 0 < footer_len <= length - 10:
            return None
        buf = read(length - 10 - footer_len, length - 10)
        (root,) = struct.unpack_from("<I", buf, 0)
        (vtable_back,) = struct.unpack_from("<i", buf, root)
        vtable = root - vtable_back
        (vtable_len,) = struct.unpack_from("<H", buf, vtable)
        field = 3  # Footer: version, schema, dictionaries, recordBatches
        if 4 + 2 * field + 2 > vtable_len:
            return []
        (offset,) = struct.unpack_from("<H", buf, vtable + 4 + 2 * field)
        if offset == 0:
            return []
        position = root + offset
        (relative,) = struct.unpack_from("<I", buf, position)
        vector = position + relative
        (count,) = struct.unpack_from("<I", buf, vector)
        blocks = []
        for i in range(count):
            start, meta_len, _, body_len = struct.unpack_from("<qiiq", buf, vector + 4 + 24 * i)
            stop = start + meta_len + body_len
            if not 0 <= start < stop <= length - 10 - footer_len:
                return None
            blocks.append((start, stop))
        return blocks
    except (struct.error, ValueError, IndexError):
        return None


def fetch_member(pieces: Any, member: str, ranges: list[tuple[int, int]]) -> None:
    pieces.fetch({member: ranges})


def ranged_copy(pieces: Any, footer: BundleFooter, member: str, split: str | Path) -> ColumnarCopy:
    """The columnar copy (or part) ``member`` of a split fetched by the piece: the batches a take
    needs are fetched at once, by range."""
    length = footer.files[member][1] - footer.files[member][0]
    blocks = ipc_blocks(length, functools.partial(pieces.read, member))
    fetch = functools.partial(fetch_member, pieces, member)
    return ColumnarCopy(
        pa.PythonFile(pieces.member_file(member), mode="r"),
        f"{split}:{member}",
        prefetch=None if blocks is None else (blocks, fetch),
    )
