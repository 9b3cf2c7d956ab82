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

``LiveFiles`` is the ``Mapping[str, AddAction]`` a ``TableState`` holds for such a snapshot: the
state's chunks (shared, immutable) plus an overlay of the version files replayed on top of them
(paths shadowed, actions added). ``AddAction`` objects are built only for the rows a caller asks
for: a lookup, the files of the partitions a predicate selects (``LiveFiles.select_partitions``),
or an explicit walk over ``values()``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.arrow_pool import use_system_pool
from executor_lib.log.arrow_arrays import bools, int64s, map_values, strings
from executor_lib.log.chunk_encoding import compact_table, is_physical_form, logical_column
from executor_lib.log.partition_index import (
    PartitionIndex,
    build_partition_index,
    partition_mask,
    partition_totals,
    present_values,
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
        lookups = [(k, attr) for k, attr, _ in AddAction._codec().lookups if k in keys]
        unknown = [k for k in keys if k not in AddAction._codec().keys and k not in ignore]
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


REJECTS_MIN_ROWS = 2_000  # a chunk's accepted rows from which ``LiveFiles.select`` asks its ``rejects``
# what judges a chunk's rows column-wise (``LiveFiles.select``): (kind, rows it certainly rejects) pairs
RowRejects = Callable[["FileChunk"], list[tuple[str, np.ndarray]]]


class LiveFiles(Mapping[str, AddAction]):
    """Path -> ``AddAction`` over Arrow chunks plus an overlay of later changes.

    ``shadowed``: paths whose chunk rows no longer count (removed, or replaced by an entry of
    ``added``); ``added``: actions added after the chunks, by path. Immutable: ``replaced`` builds
    the next state's files without copying the chunks.
    """

    def __init__(
        self,
        chunks: Sequence[FileChunk],
        shadowed: frozenset[str] = frozenset(),
        added: Mapping[str, AddAction] | None = None,
    ) -> None:
        self.chunks = tuple(c for c in chunks if len(c))
        self.shadowed = shadowed
        self.added: Mapping[str, AddAction] = added or {}
        self._length: int | None = None
        self._index: dict[str, tuple[int, int]] | None = None
        self._masks: dict[int, pa.Array | None] = {}  # chunk position -> live mask (see _live_mask)
        self._shadowed_array: pa.Array | None = None

    def replaced(self, shadowed: Iterable[str], added: Mapping[str, AddAction]) -> LiveFiles:
        """These files with ``shadowed`` paths no longer live in the chunks, and ``added`` as the overlay."""
        return LiveFiles(self.chunks, frozenset(shadowed), added)

    # -- Mapping ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        if self._length is None:
            rows = sum(len(c) for c in self.chunks)
            self._length = rows - self._shadowed_rows() + len(self.added)
        return self._length

    def __iter__(self) -> Iterator[str]:
        shadowed = self.shadowed
        for chunk in self.chunks:
            for path in chunk.paths.to_pylist():
                if path not in shadowed:
                    yield path
        yield from self.added

    def __contains__(self, path: object) -> bool:
        if path in self.added:
            return True
        if not isinstance(path, str) or path in self.shadowed:
            return False
        return path in self._row_index()

    def __getitem__(self, path: str) -> AddAction:
        found = self.added.get(path)
        if found is not None:
            return found
        if path in self.shadowed:
            raise KeyError(path)
        chunk, row = self._row_index()[path]
        return self.chunks[chunk].actions(int64s([row]))[0]

    def missing(self, paths: Iterable[str]) -> list[str]:
        """Those of ``paths`` that are not live files, found column-wise (``matching_paths``): no
        object or index entry is built per file, as ``in`` builds on its first lookup."""
        wanted = frozenset(p for p in paths if p not in self.added and p not in self.shadowed)
        value_set = strings(sorted(wanted))
        found = {p for chunk in self.chunks for p in matching_paths(chunk, wanted, value_set)} if wanted else set()
        return [p for p in paths if p not in self.added and p not in found]

    def actions_of(
        self, paths: Sequence[str], keep: Any = None, partition_columns: Sequence[str] = ()
    ) -> list[AddAction]:
        """The live files at ``paths``, in that order, found column-wise in the chunks whose partitions
        ``keep`` accepts (all if None; ``select_partitions``' ``keep``): no index of every path is built,
        as ``files[path]`` builds on its first lookup (10M files: seconds and gigabytes). KeyError names
        the first path that is not a live file there.

        Example: ``files.actions_of(group_paths, lambda v: v.get("day") == "2024-05-01", ["day"])``
        """
        found = {p: self.added[p] for p in paths if p in self.added}
        wanted = sorted({p for p in paths if p not in found and p not in self.shadowed})
        if wanted:
            value_set = strings(wanted)
            for chunk in self.chunks:
                mask = None if keep is None else partition_mask(chunk, keep, partition_columns)
                if mask is not None and not pc.any(mask).as_py():
                    continue  # (a chunk of other partitions: no path compared)
                hits = pc.is_in(chunk.paths, value_set=value_set)
                rows = pc.indices_nonzero(hits if mask is None else pc.and_(hits, mask))
                if len(rows):
                    found.update((a.path, a) for a in chunk.actions(rows))
        for p in paths:
            if p not in found:
                raise KeyError(p)
        return [found[p] for p in paths]

    def values(self) -> Iterator[AddAction]:  # type: ignore[override]  # a lazy walk, chunk by chunk
        """Every live file, built chunk by chunk (a million files: seconds; prefer a selection)."""
        for chunk in self.chunks:
            yield from self._live_actions(chunk)
        yield from self.added.values()

    def items(self) -> Iterator[tuple[str, AddAction]]:  # type: ignore[override]
        for add in self.values():
            yield add.path, add

    # -- vectorized helpers ------------------------------------------------------------------------
    def columns(self, attributes: Sequence[str], keep: Any = None, partition_columns: Sequence[str] = ()) -> pa.Table:
        """The live files' ``attributes`` as one Arrow table, a row per file (``COLUMN_TYPES``; an
        attribute no file sets holds its default), only the files whose partition values ``keep``
        accepts if given (asked once per distinct combination, as ``select_partitions``). No
        ``AddAction`` is built for the chunks' rows.

        Example: ``files.columns(["path", "size"]).column("size")``
        """
        parts = []
        overlay = [FileChunk.from_actions(list(self.added.values()))] if self.added else []
        for chunk in (*self.chunks, *overlay):
            mask = None if chunk in overlay else self._live_mask(chunk)
            if keep is not None:
                chosen = partition_mask(chunk, keep, partition_columns)
                mask = chosen if mask is None else pc.and_(mask, chosen)
            parts.append(_chunk_columns(chunk, attributes, mask))
        schema = pa.schema([(a, COLUMN_TYPES[a]) for a in attributes])
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def total(self, attribute: str) -> int:
        """The sum of an integer attribute (``size``, ``num_records``) over the live files (None as 0)."""
        total = sum(a_value or 0 for a_value in (getattr(a, attribute) for a in self.added.values()))
        for chunk in self.chunks:
            if attribute not in chunk.column_names:
                continue
            live = self._live_mask(chunk)
            column = chunk.column(attribute)
            total += pc.sum(column if live is None else pc.filter(column, live)).as_py() or 0
        return int(total)

    def mapping_keys(self) -> set[tuple[str | None, str | None]]:
        """The distinct (inline doc mapping JSON, doc mapping ref) pairs of the live files, each
        chunk's read from its dictionary-encoded refs (a few values) unless it has inline mappings,
        so that no column of the table's size is made.

        Example: ``live.mapping_keys()`` -> ``{(None, "gC45RGOqJ_Grt0xH")}``
        """
        out: set[tuple[str | None, str | None]] = set()
        for chunk in self.chunks:
            live, n = self._live_mask(chunk), len(chunk)
            names = chunk.column_names
            refs = chunk.column("doc_mapping_ref") if "doc_mapping_ref" in names else pa.nulls(n, _STRING)
            inline = chunk.column("doc_mapping_json") if "doc_mapping_json" in names else None
            if live is not None:
                refs = pc.filter(refs, live)
                inline = None if inline is None else pc.filter(inline, live)
            if inline is None or inline.null_count == len(inline):
                out |= {(None, ref) for ref in pc.unique(refs).to_pylist()}
                continue
            pairs = pa.table({"inline": inline, "ref": refs.cast(_STRING)}).group_by(["inline", "ref"]).aggregate([])
            out |= set(zip(pairs.column("inline").to_pylist(), pairs.column("ref").to_pylist(), strict=True))
        out |= {(a.doc_mapping_json, a.doc_mapping_ref) for a in self.added.values()}
        return out

    def partition_totals(self, attribute: str, columns: Sequence[str]) -> dict[tuple[str | None, ...], int] | None:
        """The live files' sum of the integer ``attribute`` (one whose default is None, as
        ``num_records``) per partition (a tuple of ``columns``' values; None: null), from each chunk's
        partition index; None if a live file has no value.

        Example: ``live.partition_totals("num_records", ["day"])`` -> ``{("2024-01-01",): 3000}``
        """
        out: dict[tuple[str | None, ...], int] = {}
        for chunk in self.chunks:
            if attribute not in chunk.column_names:
                return None  # no file of the chunk has one (the column is left out)
            found = partition_totals(chunk, attribute, columns, self._live_mask(chunk))
            if found is None:
                return None
            for key, n in found.items():
                out[key] = out.get(key, 0) + n
        for a in self.added.values():
            value = getattr(a, attribute)
            if value is None:
                return None
            key = tuple(a.partition_values.get(c) for c in columns)
            out[key] = out.get(key, 0) + int(value)
        return out

    def select_partitions(self, keep: Any, partition_columns: Sequence[str]) -> list[AddAction]:
        """The live files whose partition values ``keep(values)`` accepts (``values``: column -> value,
        a column left out when the file has no value or a null for it); ``keep`` is called once per
        distinct combination of values, and only the accepted rows become ``AddAction`` objects."""
        return self.select(keep, partition_columns)[0]

    def select(
        self, keep: Any, partition_columns: Sequence[str], rejects: RowRejects | None = None
    ) -> tuple[list[AddAction], int, dict[str, int]]:
        """``select_partitions``, its chunks' rows also judged column-wise by ``rejects(chunk)`` (each a
        kind and a boolean numpy mask of the rows it certainly rejects; ``log.pruning.stats_rejects``)
        before any becomes an object; the files added on top of the chunks are not (their objects exist).
        Returns the accepted files, how many live files ``keep`` accepted, and per kind how many of those
        a ``rejects`` mask rejected.

        Example: ``files, accepted, rejected = live.select(lambda v: True, [], rejects)``
        """
        out: list[AddAction] = []
        accepted = 0
        rejected: dict[str, int] = {}
        for chunk in self.chunks:
            mask = partition_mask(chunk, keep, partition_columns)
            live = self._live_mask(chunk)
            if live is not None:
                mask = pc.and_(mask, live)
            kept = np.asarray(mask.to_numpy(zero_copy_only=False), dtype=np.bool_)
            count = int(kept.sum())
            accepted += count
            if rejects is not None and count >= REJECTS_MIN_ROWS:  # (fewer: their objects cost less)
                out_rows = np.zeros(len(chunk), dtype=np.bool_)
                for kind, rows in rejects(chunk):
                    rejected[kind] = rejected.get(kind, 0) + int((rows & kept).sum())
                    out_rows |= rows
                kept = kept & ~out_rows
            rows = np.flatnonzero(kept)
            if len(rows):
                out.extend(chunk.actions(int64s(rows)))
        added = [a for a in self.added.values() if keep(present_values(a.partition_values, partition_columns))]
        return out + added, accepted + len(added), rejected

    def _live_actions(self, chunk: FileChunk) -> Iterable[AddAction]:
        actions = chunk.all_actions()
        if self._live_mask(chunk) is None:
            return actions
        shadowed = self.shadowed
        return [a for a in actions if a.path not in shadowed]

    def _live_mask(self, chunk: FileChunk) -> pa.Array | None:
        """True for the chunk's rows not shadowed; None when none is (computed once per chunk)."""
        if not self.shadowed:
            return None
        key = id(chunk)  # the chunks are held by self: ids are stable
        if key not in self._masks:
            if self._shadowed_array is None:
                self._shadowed_array = strings(list(self.shadowed))
            hit = pc.is_in(chunk.paths, value_set=self._shadowed_array)
            self._masks[key] = pc.invert(hit) if pc.any(hit).as_py() else None
        return self._masks[key]

    def _shadowed_rows(self) -> int:
        shadowed = 0
        for chunk in self.chunks:
            live = self._live_mask(chunk)
            if live is not None:
                shadowed += len(chunk) - int(pc.sum(live).as_py() or 0)
        return shadowed

    def _row_index(self) -> dict[str, tuple[int, int]]:
        """Path -> (chunk, row), built on the first point lookup (then about 100 bytes a file)."""
        if self._index is None:
            index: dict[str, tuple[int, int]] = {}
            for i, chunk in enumerate(self.chunks):
                index.update((p, (i, row)) for row, p in enumerate(chunk.paths.to_pylist()))
            self._index = index
        return self._index


def file_columns(
    files: Mapping[str, AddAction], attributes: Sequence[str], keep: Any = None, partition_columns: Sequence[str] = ()
) -> pa.Table:
    """``LiveFiles.columns`` of any state's files (a JSON checkpoint's or a log replay's: from their actions)."""
    if not isinstance(files, LiveFiles):
        files = LiveFiles([FileChunk.from_actions(list(files.values()))])
    return files.columns(attributes, keep, partition_columns)


def partition_strings(partition_values: pa.ChunkedArray | pa.Array, columns: Sequence[str]) -> dict[str, pa.Array]:
    """Column -> each row's value of that partition column in a ``partition_values`` map column (null:
    none), as the log writes it (a string)."""
    chunked = partition_values
    if not isinstance(chunked, pa.ChunkedArray):
        chunked = pa.chunked_array([chunked])
    if chunked.num_chunks == 0:
        chunked = pa.chunked_array([pa.array([], _MAP)])
    return {c: map_values(chunked, c) for c in columns}


def _chunk_columns(chunk: FileChunk, attributes: Sequence[str], mask: pa.Array | None) -> pa.Table:
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
            columns.append(_default_column(name, n))
    return pa.Table.from_arrays(columns, schema=pa.schema([(a, COLUMN_TYPES[a]) for a in attributes]))


def _default_column(name: str, n: int) -> pa.Array:
    """``n`` rows of an attribute's default (left out of a chunk whose rows all hold it)."""
    default, arrow_type = _DEFAULTS.get(name), COLUMN_TYPES[name]
    if default is None or name in _MAP_ATTRS or name in _LIST_ATTRS:
        return pa.nulls(n, arrow_type)
    if arrow_type == _BOOL:
        return bools(np.full(n, bool(default)))
    if arrow_type == _INT:
        return int64s(np.full(n, int(default), dtype=np.int64))
    return strings([str(default)] * n)
