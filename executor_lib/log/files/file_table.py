"""Live files as Arrow columns: what a snapshot of an Avro-state table holds instead of an object per file.

A decoded manifest becomes a ``FileChunk``: one Arrow table whose rows are its add entries, one
column per ``AddAction`` attribute that is set in some row (all-default columns are left out).
Maps (``partitionValues``, ``tags``, ``minValues``, ``maxValues``) are ``map<string, string>``,
string sets and tuples are ``list<string>``, unknown fields (``extra``) a JSON string; each is held
in a compact form (``chunk_encoding``) and read through ``FileChunk.column``. Measured on a bench-shaped
table of a million files: about 70 bytes a row held, and 78 more for the min/max maps once they are
read (a chunk from the disk cache leaves them in their own file until then: ``DEFERRED_COLUMNS``),
against about 3 KB as a Python ``AddAction`` with its dicts; chunks are what the manifest caches keep
(in memory, and on disk as Arrow IPC files).

A state's live files over its chunks are ``live_files.LiveFiles``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.arrow_arrays import bools, int64s, strings
from executor_lib.arrow_pool import use_system_pool
from executor_lib.log.files.chunk_encoding import compact_table, is_physical_form, logical_column
from executor_lib.log.files.partition_index import (
    PartitionIndex,
    build_partition_index,
)
from executor_lib.protocol.actions import AddAction
from indextables_contract.errors import CorruptLogError

use_system_pool()  # the columns built here live long: an allocator that gives freed memory back (arrow_pool)

_STRING, _INT, _BOOL = pa.string(), pa.int64(), pa.bool_()
_MAP = pa.map_(pa.string(), pa.string())
_LIST = pa.list_(pa.string())
_EXTRA = "extra"

_SCALAR_TYPES: dict[str, pa.DataType] = {}
_MAP_ATTRS: list[str] = []
_LIST_ATTRS: dict[str, type] = {}  # attribute -> the Python collection it holds (frozenset, tuple)
for _f in dataclasses.fields(AddAction):
    _t = str(_f.type).removesuffix(" | None")
    if _f.name == _EXTRA:
        continue
    if _t.startswith("Mapping"):
        _MAP_ATTRS.append(_f.name)
    elif _t.startswith("frozenset"):
        _LIST_ATTRS[_f.name] = frozenset
    elif _t.startswith("tuple"):
        _LIST_ATTRS[_f.name] = tuple
    else:
        _SCALAR_TYPES[_f.name] = {"str": _STRING, "int": _INT, "bool": _BOOL}[_t]
_DEFAULTS: dict[str, Any] = {
    f.name: (f.default if f.default is not dataclasses.MISSING else None)
    for f in dataclasses.fields(AddAction)
    if f.name != _EXTRA
}
COLUMN_TYPES: dict[str, pa.DataType] = {
    **_SCALAR_TYPES,
    **dict.fromkeys(_MAP_ATTRS, _MAP),
    **dict.fromkeys(_LIST_ATTRS, _LIST),
    _EXTRA: _STRING,
}  # every column a chunk may have (dictionary-encoded columns: their value type)
# Names the column layout in cache and sidecar file names: a file of another layout is never read.
COLUMN_LAYOUT = hashlib.sha256(repr(sorted((k, str(v)) for k, v in COLUMN_TYPES.items())).encode()).hexdigest()[:12]
_ATTRIBUTE_NAMES = tuple(f.name for f in dataclasses.fields(AddAction))
_REQUIRED = tuple(
    f.name
    for f in dataclasses.fields(AddAction)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
)
_DICTIONARY_ENCODED = frozenset({"doc_mapping_ref", "companion_fast_field_mode"})  # few distinct values
# Columns only pruning by statistics and a file's own action read: a chunk from the disk cache leaves
# them in its memory-mapped file, unread and unchecked, until one is asked for (``DeferredColumns``).
DEFERRED_COLUMNS = ("min_values", "max_values", "stats")


class DeferredColumns:
    """Some columns of a chunk, loaded (and checked) by ``load`` on first use, then kept.

    A chunk read from the manifest disk cache holds its statistics this way: the pages of a
    memory-mapped file are only read, and only then count as the process's memory, when pruning
    or an action asks for them. ``load`` raises CorruptLogError if they cannot be had.
    """

    def __init__(
        self, names: Sequence[str], rows: int, load: Callable[[], pa.Table] | None, table: pa.Table | None = None
    ) -> None:
        """``load`` gets the columns on first use; or they are ``table``, in memory already."""
        self.names, self.rows = tuple(names), rows
        self._load = load if table is None else None
        self._table: pa.Table | None = table
        self._lock = threading.Lock()
        self.reread: Callable[[], Any] | None = None  # ``held``: how to read the chunk afresh

    @classmethod
    def held(cls, table: pa.Table, reread: Callable[[], Any]) -> DeferredColumns:
        """Columns decoded already and kept in memory until ``spill`` hands them to a file; ``reread``
        reads their chunk afresh, should that file be gone or damaged when they are next asked for."""
        deferred = cls(table.column_names, table.num_rows, None, table)
        deferred.reread = reread
        return deferred

    def spill(self, load: Callable[[], pa.Table]) -> None:
        """Let go of the columns in memory: ``load`` gets them (from the disk copy just written) when
        they are next asked for. A cold load of a 10M-file state holds ~780 MB less once its disk
        copies are written (``bench.state_benchmark``)."""
        with self._lock:
            self._table, self._load = None, load

    @property
    def loaded(self) -> bool:
        return self._table is not None

    def table(self) -> pa.Table:
        with self._lock:
            if self._table is None:
                assert self._load is not None
                table = self._load()
                if table.column_names != list(self.names) or table.num_rows != self.rows:
                    raise CorruptLogError(
                        f"deferred columns {table.column_names} of {table.num_rows} rows, "
                        f"expected {list(self.names)} of {self.rows}"
                    )
                self._table, self._load = table, None  # the loader (and what it holds) is let go
            return self._table


@dataclasses.dataclass(frozen=True, eq=False)
class FileChunk:
    """The add entries of one manifest (or of any batch of adds) as one Arrow table.

    ``objects``: the actions themselves, for the rare chunk whose unknown fields JSON cannot hold
    (then the table has no ``extra`` column and is not cached on disk). ``deferred``: columns kept
    out of ``table`` until asked for (a chunk from the disk cache: ``DEFERRED_COLUMNS``).
    """

    table: pa.Table
    objects: tuple[AddAction, ...] | None = None
    deferred: DeferredColumns | None = None
    # partition columns -> their distinct values in this chunk and each row's (``partition_index``)
    _partitions: dict[tuple[str, ...], PartitionIndex] = dataclasses.field(
        default_factory=dict, compare=False, repr=False
    )

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def partition_index(self, columns: Sequence[str]) -> PartitionIndex:
        """The distinct partition values of ``columns`` in this chunk and each row's, made once per
        chunk (a chunk never changes): a query's partition filter then costs one call of its ``keep``
        per distinct partition and a numpy gather, whatever the chunk's size."""
        key = tuple(columns)
        found = self._partitions.get(key)
        if found is None:
            found = self._partitions[key] = build_partition_index(self, key)
        return found

    @property
    def paths(self) -> pa.ChunkedArray:
        return self.column("path")

    @property
    def column_names(self) -> list[str]:
        return [*self.table.column_names, *(self.deferred.names if self.deferred is not None else ())]

    def full_table(self) -> pa.Table:
        """Every column in its compact form, deferred ones included (loaded if they were not)."""
        if self.deferred is None:
            return self.table
        extra = self.deferred.table()
        return pa.Table.from_arrays([*self.table.columns, *extra.columns], names=self.column_names)

    def select(self, names: Sequence[str], rows: pa.Array | None = None) -> FileChunk:
        """A chunk of these columns (each one this chunk has) in their compact forms, only the rows of
        the boolean mask ``rows`` if given: what to filter before decoding the logical columns."""
        table = self.full_table() if self.deferred is not None and set(names) & set(self.deferred.names) else self.table
        present = [n for n in names if n in table.column_names]
        chosen = table.select(present)
        return FileChunk(chosen if rows is None else chosen.filter(rows))

    def column(self, name: str) -> pa.ChunkedArray:
        """The column of attribute ``name`` in its logical type (``COLUMN_TYPES``; dictionary-encoded
        ones stay encoded), whatever compact form the chunk holds it in (``chunk_encoding``)."""
        if self.deferred is not None and name in self.deferred.names:
            column = self.deferred.table().column(name)
        else:
            column = self.table.column(name)
        if pa.types.is_dictionary(column.type) and name in _DICTIONARY_ENCODED:
            return column
        return logical_column(name, column, COLUMN_TYPES[name])

    @classmethod
    def from_actions(cls, adds: Sequence[AddAction]) -> FileChunk:
        """The columns of ``adds``."""
        attributes = [vars(a) for a in adds]
        by_attribute = {name: [d[name] for d in attributes] for name in _ATTRIBUTE_NAMES} if adds else {}
        return cls._from_columns(by_attribute, len(adds), lambda: tuple(adds))

    @classmethod
    def from_records(
        cls, records: Sequence[Mapping[str, Any]], keys: Sequence[str], ignore: frozenset[str]
    ) -> FileChunk:
        """The columns of Avro ``FileEntry`` records that all have exactly ``keys`` (one file's writer
        schema), without building an ``AddAction`` per record (the cold-load hot path); keys in
        ``ignore`` are dropped, other unknown keys kept as each row's ``extra``. CorruptLogError if a
        required field is null."""
        fields = AddAction.json_fields()
        lookups = [(k, attr) for k, attr in fields if k in keys]
        known = {k for k, _ in fields}
        unknown = [k for k in keys if k not in known and k not in ignore]
        wanted = [k for k, _ in lookups] + unknown
        if not records or not wanted:
            return cls._from_columns({}, len(records), lambda: ())
        transposed = [[r[k] for r in records] for k in wanted]  # 2x faster than zip(*rows) here
        by_attribute: dict[str, Sequence[Any]] = {attr: transposed[i] for i, (_, attr) in enumerate(lookups)}
        for attr in _REQUIRED:
            if attr in by_attribute and None in by_attribute[attr]:
                raise CorruptLogError(f"'add' record lacks required field {attr!r}")
        if unknown:
            values = transposed[len(lookups) :]
            by_attribute[_EXTRA] = [
                {k: v for k, v in zip(unknown, row, strict=True) if v is not None} for row in zip(*values, strict=True)
            ]
        convert = AddAction.record_converter(keys, ignore)
        return cls._from_columns(by_attribute, len(records), lambda: tuple(map(convert, records)))

    @classmethod
    def _from_columns(cls, by_attribute: Mapping[str, Sequence[Any]], n: int, objects: Any) -> FileChunk:
        """The chunk of these attribute columns; ``objects()`` gives the actions themselves, kept only
        when an ``extra`` field holds a value JSON cannot write (e.g. bytes of an unknown Avro field)."""
        columns: dict[str, pa.Array] = {}
        for name, arrow_type in _SCALAR_TYPES.items():
            values = list(by_attribute.get(name, ()))
            if name != "path" and (not values or _all_default(values, _DEFAULTS[name], n)):
                continue
            array = pa.array(values if values else [None] * n, arrow_type)
            columns[name] = array.dictionary_encode() if name in _DICTIONARY_ENCODED else array
        for name in _MAP_ATTRS:
            maps = list(by_attribute.get(name, ()))
            if name == "partition_values" or (maps and maps.count(None) != n):
                columns[name] = _map_array(maps or [{}] * n)
        for name, collection in _LIST_ATTRS.items():
            lists = list(by_attribute.get(name, ()))
            if lists and lists.count(None) != n:
                order = sorted if collection is frozenset else list
                values = [None if v is None else order(set(v) if collection is frozenset else v) for v in lists]
                columns[name] = pa.array(values, _LIST)
        check_counts(columns)
        extras = by_attribute.get(_EXTRA, ())
        if any(extras):
            try:
                columns[_EXTRA] = pa.array([json.dumps(e) if e else None for e in extras], _STRING)
            except (TypeError, ValueError):  # e.g. bytes from an unknown Avro field: keep the objects
                return cls(compact_table(pa.table(columns), COLUMN_TYPES), objects())
        return cls(compact_table(pa.table(columns), COLUMN_TYPES))

    def all_actions(self) -> tuple[AddAction, ...]:
        """``actions()`` of every row, kept for the chunks used last (``MATERIALIZED_BUDGET`` actions in
        all), so repeated full listings of a table of moderate size cost nothing after the first."""
        if self.objects is not None:
            return self.objects
        return _MATERIALIZED.get(self)

    def actions(self, rows: pa.Array | None = None) -> list[AddAction]:
        """``AddAction`` objects of all rows, or of the row indices ``rows``, in that order."""
        if self.objects is not None:
            return list(self.objects) if rows is None else [self.objects[i] for i in rows.to_pylist()]
        chunk = self if rows is None else FileChunk(self.full_table().take(rows))
        n = len(chunk)
        present = set(chunk.column_names)
        columns: list[Iterable[Any]] = []
        for name in _ATTRIBUTE_NAMES:
            if name not in present:
                columns.append([{} for _ in range(n)] if name == _EXTRA else itertools.repeat(_DEFAULTS[name], n))
                continue
            column = chunk.column(name)
            if name in _MAP_ATTRS:
                columns.append(_map_values(column))
            elif name in _LIST_ATTRS:
                to_collection = _LIST_ATTRS[name]
                columns.append([None if v is None else to_collection(v) for v in column.to_pylist()])
            elif name == _EXTRA:
                columns.append([json.loads(v) if v is not None else {} for v in column.to_pylist()])
            else:
                columns.append(column.to_pylist())
        new, set_dict, names = object.__new__, object.__setattr__, _ATTRIBUTE_NAMES
        out = []
        for row in zip(*columns, strict=True):
            add = new(AddAction)
            set_dict(add, "__dict__", dict(zip(names, row, strict=True)))
            out.append(add)
        return out


_COUNTS = (("size", "size"), ("num_records", "numRecords"))  # attribute, the log's name


def check_counts(columns: Mapping[str, Any], paths: Callable[[], Any] | None = None) -> None:
    """CorruptLogError if a ``size`` or ``num_records`` column (attribute -> Arrow array) holds a negative
    value: one ``min`` per column, not a check per entry (``paths()``: the path column, read only to name
    the entry; else ``columns["path"]``). A negative count was trusted before (summed into the table's
    totals, used to plan merges and reads)."""
    for attribute, key in _COUNTS:
        column = columns.get(attribute)
        if column is None or len(column) == 0:
            continue
        smallest = pc.min(column).as_py()
        if smallest is not None and smallest < 0:
            at = pc.index(column, smallest).as_py()
            path_column = paths() if paths is not None else columns.get("path")
            named = f" (add {pc.take(path_column, [at])[0].as_py()!r})" if path_column is not None else ""
            raise CorruptLogError(f"add.{key} {smallest} is negative{named}: a size or record count cannot be")


def check_chunk_counts(chunk: FileChunk) -> FileChunk:
    """``chunk`` once ``check_counts`` passed on its columns (a chunk restored from a sidecar or a cache)."""
    present = set(chunk.column_names)
    check_counts({n: chunk.column(n) for n in ("size", "num_records") if n in present}, lambda: chunk.paths)
    return chunk


def matching_paths(chunk: FileChunk, paths: frozenset[str], value_set: pa.Array) -> list[str]:
    """The chunk's paths (one per matching row) that are in ``paths``. On the compact path form
    (``chunk_encoding``: a dictionary prefix, the middle, a dictionary suffix) only the middles are
    matched, against the middles ``paths`` would have under the chunk's prefixes and suffixes, and
    the few rows hit are joined back and checked whole: no full path is built per row."""
    column = chunk.table.column("path")
    if not pa.types.is_struct(column.type):
        hits = pc.is_in(chunk.paths, value_set=value_set)
        return pc.filter(chunk.paths, hits).to_pylist() if pc.any(hits).as_py() else []
    out: list[str] = []
    for part in column.chunks:
        prefixes = part.field("prefix").dictionary.to_pylist()
        suffixes = part.field("suffix").dictionary.to_pylist()
        middles = {
            p[len(d) : len(p) - len(e)]
            for p in paths
            for d in prefixes
            if p.startswith(d)
            for e in suffixes
            if p.endswith(e) and len(p) >= len(d) + len(e)
        }
        if not middles:
            continue
        hits = pc.is_in(part.field("middle"), value_set=pa.array(sorted(middles), pa.string()))
        rows = pc.indices_nonzero(hits)
        if len(rows):
            candidates = logical_column("path", pa.chunked_array([part.take(rows)]), pa.string()).to_pylist()
            out += [p for p in candidates if p in paths]
    return out


def deferring(chunk: FileChunk, reread: Callable[[], FileChunk]) -> FileChunk:
    """``chunk`` with its ``DEFERRED_COLUMNS`` held apart (``DeferredColumns.held``), for the manifest
    disk cache to ``spill`` once it has written them; the chunk itself if it has none of them or
    keeps its objects (never cached on disk)."""
    names = [n for n in DEFERRED_COLUMNS if n in chunk.table.column_names]
    if not names or chunk.objects is not None or chunk.deferred is not None:
        return chunk
    held = DeferredColumns.held(chunk.table.select(names), reread)
    return FileChunk(chunk.table.drop_columns(names), deferred=held)


def restore_chunk(table: pa.Table, deferred: DeferredColumns | None = None) -> FileChunk:
    """The chunk of a table read back from a cache or sidecar file (columns not yet compact are
    compacted); ValueError unless every column is one of the layout's, typed as it or in one of its
    compact forms (``chunk_encoding``), and there is a path column."""
    for field in table.schema:
        expected = COLUMN_TYPES.get(field.name)
        if expected is None or not is_physical_form(field.name, field.type, expected):
            raise ValueError(f"unexpected column {field.name}: {field.type}")
    if "path" not in table.column_names:
        raise ValueError("no path column")
    return FileChunk(compact_table(table, COLUMN_TYPES), deferred=deferred)


MATERIALIZED_BUDGET = 500_000  # AddAction objects kept by ``FileChunk.all_actions`` (about 3 KB each)


class _MaterializedChunks:
    """LRU of chunks' ``AddAction`` tuples, within ``MATERIALIZED_BUDGET`` actions."""

    def __init__(self) -> None:
        self._items: OrderedDict[int, tuple[FileChunk, tuple[AddAction, ...]]] = OrderedDict()
        self._count = 0
        self._lock = threading.Lock()

    def get(self, chunk: FileChunk) -> tuple[AddAction, ...]:
        key = id(chunk)  # the entry holds the chunk, so its id cannot be reused while cached
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                return found[1]
        actions = tuple(chunk.actions())
        if len(actions) > MATERIALIZED_BUDGET:
            return actions
        with self._lock:
            if key not in self._items:
                self._items[key] = (chunk, actions)
                self._count += len(actions)
                while self._count > MATERIALIZED_BUDGET:
                    _, (_, evicted) = self._items.popitem(last=False)
                    self._count -= len(evicted)
        return actions

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._count = 0


_MATERIALIZED = _MaterializedChunks()


def _all_default(values: list[Any], default: Any, n: int) -> bool:
    if default is None:
        return values.count(None) == n
    return all(v == default for v in values)


def _map_array(maps: Sequence[Mapping[str, Any] | None]) -> pa.Array:
    """A ``map<string, string>`` array of ``maps`` (None: a null map); Arrow converts dicts itself,
    2.5x faster than flattening them here."""
    return pa.array(maps, _MAP)


def _map_values(column: pa.ChunkedArray) -> list[dict[str, Any] | None]:
    """The maps of a ``map<string, string>`` column as dicts (None for a null map), decoded from its
    flat keys and items rather than through ``to_pylist`` (3x faster)."""
    out: list[dict[str, Any] | None] = []
    for chunk in column.chunks:
        offsets = chunk.offsets.to_pylist()
        keys = chunk.keys.to_pylist()
        items = chunk.items.to_pylist()
        valid = chunk.is_valid().to_pylist() if chunk.null_count else None
        base = offsets[0]
        for i in range(len(chunk)):
            if valid is not None and not valid[i]:
                out.append(None)
                continue
            start, stop = offsets[i] - base, offsets[i + 1] - base
            out.append(dict(zip(keys[start:stop], items[start:stop], strict=True)))
    return out


def chunk_columns(chunk: FileChunk, attributes: Sequence[str], mask: pa.Array | None) -> pa.Table:
    """``attributes`` of a chunk's rows (dictionary-encoded ones decoded), those of ``mask`` if given."""
    if mask is not None:  # filtered in the compact forms, then decoded
        chunk = chunk.select([a for a in attributes if a in COLUMN_TYPES], mask)
    n, present = len(chunk), set(chunk.column_names)
    columns = []
    for name in attributes:
        if name not in COLUMN_TYPES:
            raise ValueError(f"unknown file attribute {name!r} (known: {sorted(COLUMN_TYPES)})")
        if name in present:
            column = chunk.column(name)
            columns.append(column.cast(COLUMN_TYPES[name]) if pa.types.is_dictionary(column.type) else column)
        else:
            columns.append(default_column(name, n))
    return pa.Table.from_arrays(columns, schema=pa.schema([(a, COLUMN_TYPES[a]) for a in attributes]))


def default_column(name: str, n: int) -> pa.Array:
    """``n`` rows of an attribute's default (left out of a chunk whose rows all hold it)."""
    default, arrow_type = _DEFAULTS.get(name), COLUMN_TYPES[name]
    if default is None or name in _MAP_ATTRS or name in _LIST_ATTRS:
        return pa.nulls(n, arrow_type)
    if arrow_type == _BOOL:
        return bools(np.full(n, bool(default)))
    if arrow_type == _INT:
        return int64s(np.full(n, int(default), dtype=np.int64))
    return strings([str(default)] * n)
