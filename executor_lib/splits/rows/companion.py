"""Companion splits: an index over a source table's Parquet files that copies none of their rows.

A companion split (``BUILD INDEXTABLES COMPANION``, ``executor_lib.companion``) is an ordinary split
of this project's format whose fields are index-only (no doc store values) and whose columnar
copy holds, instead of the rows, two locator columns per document: ``__pq_file`` (the position of
its source file in the split's file list) and ``__pq_row`` (its row number in that file). The
member ``indextables.companion.json`` names the source: its root URI, format, the files (paths
relative to the root, as the add action's ``companionSourceFiles``), each file's row count, and
the data columns.

A search maps hits to row numbers (``__row``) as usual; ``CompanionRows`` takes the locators of
those rows and reads the rows from the source files by row group, with projection, in one
vectorized take per (file, row group) touched. A source file that vanished, or whose row count, size,
modification time or Parquet footer (its CRC32) is no longer the one indexed, is ``CompanionSourceError``
naming it and saying to run BUILD again.
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from executor_lib.arrow_arrays import as_numpy, empty_table, numbers
from executor_lib.format.tantivy4java.parquet_manifest import FILE_HASH_FIELD, ROW_IN_FILE_FIELD
from executor_lib.splits.doc_mapping import DocMapping, FieldMapping
from executor_lib.splits.rows.columnar import RowCopy
from indextables_contract.errors import CompanionSourceError, ObjectNotFoundError

COMPANION_MEMBER = "indextables.companion.json"
FILE_COLUMN = "__pq_file"
ROW_COLUMN = "__pq_row"
READ_BATCH_ROWS = 65_536
_OPEN_FILES_KEPT = 64


@dataclass(frozen=True)
class CompanionInfo:
    """What a companion split's member says about its source."""

    source_root: str
    source_format: str
    files: tuple[str, ...]
    file_rows: tuple[int, ...]
    data_columns: tuple[str, ...]
    # each file's (size, modification time in ms) as BUILD read it; None: built before they were recorded
    file_identities: tuple[tuple[int, int], ...] | None = None
    # each file's Parquet footer CRC32 (``footer_crc``) as BUILD read it; None: built before they were recorded
    file_footer_crcs: tuple[int, ...] | None = None

    def to_json(self) -> str:
        d: dict[str, Any] = {
            "sourceRoot": self.source_root,
            "sourceFormat": self.source_format,
            "files": list(self.files),
            "fileRows": list(self.file_rows),
            "dataColumns": list(self.data_columns),
        }
        if self.file_identities is not None:
            d["fileIdentities"] = [list(i) for i in self.file_identities]
        if self.file_footer_crcs is not None:
            d["fileFooterCrcs"] = list(self.file_footer_crcs)
        return json.dumps(d, sort_keys=True)

    def identity(self, index: int) -> tuple[int, int] | None:
        return self.file_identities[index] if self.file_identities is not None else None

    def footer_crc(self, index: int) -> int | None:
        return self.file_footer_crcs[index] if self.file_footer_crcs is not None else None

    @classmethod
    def from_json(cls, text: bytes | str, where: str) -> CompanionInfo:
        try:
            d = json.loads(text)
            return cls(
                str(d["sourceRoot"]),
                str(d["sourceFormat"]),
                tuple(str(f) for f in d["files"]),
                tuple(int(n) for n in d["fileRows"]),
                tuple(str(c) for c in d["dataColumns"]),
                (
                    tuple((int(size), int(ms)) for size, ms in d["fileIdentities"])
                    if d.get("fileIdentities") is not None
                    else None
                ),
                _footer_crcs(d.get("fileFooterCrcs"), len(d["files"])),
            )
        except (ValueError, KeyError, TypeError) as e:
            from indextables_contract.errors import CorruptSplitError

            raise CorruptSplitError(f"{where}: the companion member {COMPANION_MEMBER} does not parse ({e})") from e


def _footer_crcs(value: Any, files: int) -> tuple[int, ...] | None:
    if value is None:
        return None
    crcs = tuple(int(c) for c in value)
    if len(crcs) != files or any(not 0 <= c <= 0xFFFFFFFF for c in crcs):
        raise ValueError(f"fileFooterCrcs: {len(crcs)} CRC32s for {files} files, or one out of range")
    return crcs


def _resync_hint(root: str) -> str:
    return f"run BUILD INDEXTABLES COMPANION FOR ... '{root}' AT LOCATION '<this table>' again to resync the companion"


class SourceFiles:
    """Opened source Parquet files of one source root (local, or through the project's object store)."""

    _lock = threading.Lock()
    _open: OrderedDict[tuple[str, str, Any, int | None], pq.ParquetFile] = OrderedDict()

    def __init__(self, root: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.root = root
        self.storage_options = dict(storage_options or {})
        self._store: Any = None

    def store(self) -> Any:
        if self._store is None:
            from executor_lib.storage import open_store

            self._store = open_store(self.root, shared_client=True, **self.storage_options)
        return self._store

    def size(self, relative: str) -> int:
        """The byte size of the source file ``relative`` (one stat, or one HEAD request).

        Raises:
            CompanionSourceError: the file is gone.
        """
        store = self.store()
        try:
            local = store.local_path(relative)
            return int(os.stat(local).st_size) if local is not None else int(store.head(relative).size)
        except (FileNotFoundError, ObjectNotFoundError) as e:
            raise CompanionSourceError(
                f"companion source file {store.uri_of(relative)} no longer exists; {_resync_hint(self.root)}"
            ) from e

    def identity(self, relative: str) -> tuple[int, int]:
        """The source file's size and modification time in ms (``ObjectInfo.modified_ms``), what BUILD
        records (``CompanionInfo.file_identities``) and a read checks.

        Raises:
            CompanionSourceError: the file is gone.
        """
        store = self.store()
        try:
            info = store.head(relative)
        except (FileNotFoundError, ObjectNotFoundError) as e:
            raise CompanionSourceError(
                f"companion source file {store.uri_of(relative)} no longer exists; {_resync_hint(self.root)}"
            ) from e
        return int(info.size), int(info.modified_ms)

    def footer_crc(self, relative: str, size: int | None = None) -> int:
        """The CRC32 of the source file's Parquet footer (its Thrift ``FileMetaData``, the 4-byte length
        and the ``PAR1`` magic: the last ``length + 8`` bytes). The footer holds every row group's and
        column chunk's offsets, sizes, row counts and statistics, so a rewrite of the rows changes it
        even when the file keeps its size and modification time. One or two reads at the file's end.

        Raises:
            CompanionSourceError: the file is gone or is not Parquet.
        """
        store = self.store()
        try:
            local = store.local_path(relative)
            if local is not None:
                with open(local, "rb") as f:
                    end = os.fstat(f.fileno()).st_size
                    return _footer_crc(end, lambda start, n: os.pread(f.fileno(), n, start), store.uri_of(relative))
            end = int(size) if size is not None else int(store.head(relative).size)
            return _footer_crc(end, lambda start, n: store.read_range(relative, start, n), store.uri_of(relative))
        except (FileNotFoundError, ObjectNotFoundError) as e:
            raise CompanionSourceError(
                f"companion source file {store.uri_of(relative)} no longer exists; {_resync_hint(self.root)}"
            ) from e

    def open(
        self,
        relative: str,
        expected_rows: int | None = None,
        expected: tuple[int, int] | None = None,
        expected_footer_crc: int | None = None,
    ) -> pq.ParquetFile:
        """The source file ``relative`` (to the root); its footer is kept by the process while the
        file's size and modification time stay the same (one stat, or one HEAD request, per use; a
        local file's inode and change time too, which a rewrite changes even when it restores the
        modification time). ``expected``: the (size, modification time in ms) BUILD recorded
        (``identity``); ``expected_footer_crc``: the footer's CRC32 it recorded (``footer_crc``),
        checked whenever the file is opened (a kept file is one whose bytes were not written since).

        Raises:
            CompanionSourceError: the file is gone, differs from the size, modification time or footer
                it was indexed with, or holds another number of rows than indexed.
        """
        store = self.store()
        identity: tuple[int, int, int | None, int | None]
        try:
            local = store.local_path(relative)
            if local is not None:
                st = os.stat(local)
                identity = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
                now = (int(st.st_size), int(st.st_mtime * 1000))  # as LocalStore's ObjectInfo gives it
            else:
                info = store.head(relative)
                identity = (info.size, info.modified_ms, None, None)
                now = (int(info.size), int(info.modified_ms))
        except (FileNotFoundError, ObjectNotFoundError) as e:
            raise CompanionSourceError(
                f"companion source file {store.uri_of(relative)} no longer exists: the source table changed "
                f"after the companion was built; {_resync_hint(self.root)}"
            ) from e
        if expected is not None and now != tuple(expected):
            raise CompanionSourceError(
                f"companion source file {store.uri_of(relative)} was rewritten after the companion was built "
                f"({now[0]} bytes modified at {now[1]} ms; indexed: {expected[0]} bytes modified at {expected[1]} ms); "
                f"{_resync_hint(self.root)}"
            )
        key = (self.root, relative, identity, expected_footer_crc)
        with self._lock:
            pf = self._open.get(key)
            if pf is not None:
                self._open.move_to_end(key)
        if pf is None:
            try:
                if local is not None:
                    crc = self.footer_crc(relative) if expected_footer_crc is not None else None
                    pf = pq.ParquetFile(str(local))
                else:
                    data = store.read(relative)
                    crc = (
                        _footer_crc(len(data), lambda start, n: data[start : start + n], store.uri_of(relative))
                        if expected_footer_crc is not None
                        else None
                    )
                    pf = pq.ParquetFile(pa.BufferReader(data))
            except (FileNotFoundError, ObjectNotFoundError) as e:
                raise CompanionSourceError(
                    f"companion source file {store.uri_of(relative)} no longer exists: the source table changed "
                    f"after the companion was built; {_resync_hint(self.root)}"
                ) from e
            except (OSError, ValueError) as e:  # ArrowInvalid is a ValueError
                raise CompanionSourceError(
                    f"companion source file {store.uri_of(relative)} is not readable Parquet ({e}); "
                    f"{_resync_hint(self.root)}"
                ) from e
            if expected_footer_crc is not None and crc != expected_footer_crc:
                raise CompanionSourceError(
                    f"companion source file {store.uri_of(relative)} was rewritten after the companion was built "
                    f"(its Parquet footer's CRC32 is {crc:#010x}, {expected_footer_crc:#010x} was indexed, with "
                    f"the same size and modification time); {_resync_hint(self.root)}"
                )
            with self._lock:
                self._open[key] = pf
                while len(self._open) > _OPEN_FILES_KEPT:
                    self._open.popitem(last=False)
        if expected_rows is not None and pf.metadata.num_rows != expected_rows:
            raise CompanionSourceError(
                f"companion source file {store.uri_of(relative)} now holds {pf.metadata.num_rows} rows, "
                f"{expected_rows} were indexed: the file was rewritten; {_resync_hint(self.root)}"
            )
        return pf


_FOOTER_GUESS = 64 * 1024  # the first read at a file's end: most footers fit


def _footer_crc(size: int, read: Any, where: str) -> int:
    """The CRC32 of the Parquet footer of a file of ``size`` bytes, ``read(start, n)`` reading its bytes."""
    if size < 12:
        raise CompanionSourceError(f"companion source file {where} is not Parquet ({size} bytes)")
    first = min(size, _FOOTER_GUESS)
    tail = bytes(read(size - first, first))
    if len(tail) != first or tail[-4:] != b"PAR1":
        raise CompanionSourceError(f"companion source file {where} is not Parquet (no PAR1 magic at its end)")
    length = int.from_bytes(tail[-8:-4], "little") + 8
    if length + 4 > size:
        raise CompanionSourceError(f"companion source file {where} is not Parquet (a footer of {length} bytes)")
    if length > first:
        tail = bytes(read(size - length, length))
        if len(tail) != length:
            raise CompanionSourceError(f"companion source file {where} changed while its footer was read")
    return zlib.crc32(tail[-length:])


class CompanionRows:
    """A companion split's rows, read from its source files (table-like as ``ColumnarCopy``: ``num_rows``,
    ``schema``, ``column_names``, ``select``, ``with_schema``, ``take``, ``read_all``).

    Example: ``CompanionRows(locators, info, schema).select(["id"]).take(pa.array([0, 5], pa.uint64()))``.
    """

    def __init__(
        self, locators: RowCopy, info: CompanionInfo, schema: pa.Schema, sources: SourceFiles | None = None
    ) -> None:
        self.locators = locators
        self.info = info
        self.schema = schema
        self.num_rows = locators.num_rows
        self.sources = sources or SourceFiles(info.source_root)

    @property
    def column_names(self) -> list[str]:
        return list(self.schema.names)

    def select(self, columns: Sequence[str]) -> CompanionRows:
        return self.with_schema(pa.schema([self.schema.field(c) for c in columns]))

    def with_schema(self, schema: pa.Schema) -> CompanionRows:
        return CompanionRows(self.locators, self.info, schema, self.sources)

    def read_all(self) -> pa.Table:
        return self.take(numbers(np.arange(self.num_rows), pa.uint64()))

    def take(self, ids: pa.Array) -> pa.Table:
        """The rows numbered ``ids`` (in that order), read from the source files."""
        n = len(ids)
        loc = self.locators.take(ids)
        files = as_numpy(loc.column(FILE_COLUMN)).astype(np.int64, copy=False)
        rows = as_numpy(loc.column(ROW_COLUMN)).astype(np.int64, copy=False)
        columns = list(self.schema.names)
        if n == 0:
            return empty_table(self.schema)
        order = np.lexsort((rows, files))
        sorted_files, sorted_rows = files[order], rows[order]
        parts: list[pa.Table] = []
        for start, stop in _runs(sorted_files):
            index = int(sorted_files[start])
            pf = self.sources.open(
                self.info.files[index],
                self.info.file_rows[index],
                self.info.identity(index),
                self.info.footer_crc(index),
            )
            parts.extend(_take_from_file(pf, sorted_rows[start:stop], columns, self.schema, self.info.files[index]))
        table = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n)
        return table.take(numbers(inverse, pa.int64()))


def _runs(values: np.ndarray) -> Iterator[tuple[int, int]]:
    """(start, stop) of each run of equal values of a sorted array."""
    bounds = np.concatenate(([0], np.flatnonzero(np.diff(values)) + 1, [len(values)]))
    for i in range(len(bounds) - 1):
        yield int(bounds[i]), int(bounds[i + 1])


def _take_from_file(
    pf: pq.ParquetFile, rows: np.ndarray, columns: list[str], schema: pa.Schema, name: str
) -> list[pa.Table]:
    """The (ascending) ``rows`` of one file: one read per row group touched, projected to ``columns``."""
    meta = pf.metadata
    starts = np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)])
    groups = np.searchsorted(starts, rows, side="right") - 1
    present = set(pf.schema_arrow.names)
    read = [c for c in columns if c in present]
    out = []
    for start, stop in _runs(groups):
        g = int(groups[start])
        if read:
            try:
                table = pf.read_row_group(g, columns=read)
            except (OSError, ValueError) as e:  # the file changed under the open footer
                raise CompanionSourceError(
                    f"companion source file {name} row group {g} does not read ({e}): the file changed after "
                    "the companion was built; run BUILD INDEXTABLES COMPANION again to resync"
                ) from e
        else:
            table = pa.table({"_": pa.nulls(int(meta.row_group(g).num_rows))})
        taken = table.take(numbers(rows[start:stop] - starts[g], pa.int64()))
        out.append(conformed(taken, schema, stop - start))
    return out


def conformed(table: pa.Table, schema: pa.Schema, n: int) -> pa.Table:
    """``table``'s columns in ``schema``'s order and types (a column the file lacks: nulls)."""
    arrays = []
    for f in schema:
        if f.name in table.column_names:
            column = table.column(f.name)
            arrays.append(column if column.type == f.type else column.cast(f.type))
        else:
            arrays.append(pa.chunked_array([pa.nulls(n, f.type)]))
    if not arrays:
        return pa.table({"_": pa.nulls(n)}).drop(["_"])
    return pa.Table.from_arrays(arrays, schema=schema)


def companion_rows(locators: RowCopy, member: bytes, table_schema: pa.Schema, where: str) -> CompanionRows:
    """The rows of a companion split (``member``: its ``COMPANION_MEMBER``), as the table's types."""
    info = CompanionInfo.from_json(member, where)
    fields = [table_schema.field(c) for c in info.data_columns if c in table_schema.names]
    return CompanionRows(locators, info, pa.schema(fields))


def locator_fields(mapping: DocMapping) -> DocMapping:
    """``mapping`` plus tantivy4java's two u64 fast fields of every companion document (replaced if present)."""
    kept = tuple(f for f in mapping.fields if f.name not in (FILE_HASH_FIELD, ROW_IN_FILE_FIELD))
    hidden = tuple(
        FieldMapping(name, "u64", stored=False, indexed=False, fast=True)
        for name in (FILE_HASH_FIELD, ROW_IN_FILE_FIELD)
    )
    return DocMapping(kept + hidden)
