"""A state's live files over its manifests' chunks: ``LiveFiles``, the ``Mapping[str, AddAction]`` a
``TableState`` holds for an Avro-state snapshot: the state's chunks (``file_table.FileChunk``: shared,
immutable) plus an overlay of the version files replayed on top of them (paths shadowed, actions
added). ``AddAction`` objects are built only for the rows a caller asks for: a lookup, the files of
the partitions a predicate selects (``LiveFiles.select_partitions``), the files at some paths
(``LiveFiles.actions_of``), or an explicit walk over ``values()``; everything else (columns, totals,
doc-mapping keys, partition sums) is read column-wise.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.arrow_arrays import bools, empty_table, int64s, map_values, numbers, strings
from executor_lib.log.files.chunk_encoding import logical_column
from executor_lib.log.files.file_table import COLUMN_TYPES, FileChunk, chunk_columns, matching_paths
from executor_lib.log.files.partition_index import partition_mask, partition_totals, present_values
from executor_lib.protocol.actions import AddAction

_STRING = pa.string()
_MAP = pa.map_(pa.string(), pa.string())
REJECTS_MIN_ROWS = 2_000  # a chunk's accepted rows from which ``LiveFiles.select`` asks its ``rejects``
# A path that may not be its own store key: a URI, a '\\', an empty, '.' or '..' segment, a leading '/'.
NOT_PLAIN = re.compile(r"://|\\|//|^/|/$|^$|(?:^|/)\.\.?(?:/|$)")
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
        self, paths: Sequence[str], keep: Any = None, partition_columns: Sequence[str] = (), missing_ok: bool = False
    ) -> list[AddAction]:
        """The live files at ``paths``, in that order, found column-wise in the chunks whose partitions
        ``keep`` accepts (all if None; ``select_partitions``' ``keep``): no index of every path is built,
        as ``files[path]`` builds on its first lookup (10M files: seconds and gigabytes). KeyError names
        the first path that is not a live file there, unless ``missing_ok``: then those are left out.

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
        if not missing_ok:
            for p in paths:
                if p not in found:
                    raise KeyError(p)
        return [found[p] for p in paths if p in found]

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
            parts.append(chunk_columns(chunk, attributes, mask))
        schema = pa.schema([(a, COLUMN_TYPES[a]) for a in attributes])
        return pa.concat_tables(parts) if parts else empty_table(schema)

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

    def by_partition(self, keep: Any, partition_columns: Sequence[str]) -> Iterator[list[AddAction]]:
        """The live files whose partitions ``keep`` accepts (as ``select_partitions``), one list per
        partition, built a partition at a time: a walk over every file that holds the objects of one
        partition only (a 10M-file table: about 10,000 of them, not 10M).

        Example: ``sum(len(files) for files in live.by_partition(lambda v: True, ["day"]))``
        """
        columns = list(partition_columns)
        parts: dict[tuple[str | None, ...], list[tuple[int, np.ndarray]]] = {}
        for i, chunk in enumerate(self.chunks):
            index = chunk.partition_index(columns)
            live = self._live_mask(chunk)
            alive = None if live is None else np.asarray(live.to_numpy(zero_copy_only=False), dtype=np.bool_)
            of_rows = np.zeros(len(chunk), np.int64) if index.rows is None else index.rows.astype(np.int64)
            order = np.argsort(of_rows, kind="stable")
            starts = np.searchsorted(of_rows[order], np.arange(len(index.values) + 1))
            for j, values in enumerate(index.values):
                rows = order[starts[j] : starts[j + 1]]  # ascending: the sort is stable
                if alive is not None:
                    rows = rows[alive[rows]]
                if len(rows) and keep(values):
                    parts.setdefault(tuple(values.get(c) for c in columns), []).append((i, rows))
        added: dict[tuple[str | None, ...], list[AddAction]] = {}
        for a in self.added.values():
            if keep(present_values(a.partition_values, columns)):
                added.setdefault(tuple(a.partition_values.get(c) for c in columns), []).append(a)
        for key in [*parts, *(k for k in added if k not in parts)]:
            chunks = parts.get(key, [])
            yield [a for i, rows in chunks for a in self.chunks[i].actions(int64s(rows))] + added.get(key, [])

    def select_partitions(self, keep: Any, partition_columns: Sequence[str]) -> list[AddAction]:
        """The live files whose partition values ``keep(values)`` accepts (``values``: column -> value,
        a column left out when the file has no value or a null for it); ``keep`` is called once per
        distinct combination of values, and only the accepted rows become ``AddAction`` objects."""
        return self.select(keep, partition_columns)[0]

    def select(
        self, keep: Any, partition_columns: Sequence[str], rejects: RowRejects | None = None
    ) -> tuple[list[AddAction], int, dict[str, int]]:
        """``select_partitions``, its chunks' rows also judged column-wise by ``rejects(chunk)`` (each a
        kind and a boolean numpy mask of the rows it certainly rejects; ``log.files.pruning.stats_rejects``)
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


_UNPLAIN: weakref.WeakKeyDictionary[FileChunk, list[str]] = weakref.WeakKeyDictionary()  # chunks never change


def unplain_paths(chunk: FileChunk) -> list[str]:
    """The chunk's paths that are not plain relative keys (``NOT_PLAIN``: a full URI, a ``..``
    segment...), found on the compact path form (``chunk_encoding``: a prefix holding the directory,
    a middle, a suffix): each distinct prefix and suffix is tested once, and of the rows only those
    whose middle is short enough to make a ``.``/``..`` name or holds a ``\\`` are looked at whole;
    no full path is built per row (a million paths: about 0.15 s, once per chunk). Usually there is none."""
    found = _UNPLAIN.get(chunk)
    if found is None:
        found = _UNPLAIN[chunk] = _unplain_paths(chunk)
    return found


# Arrow scalars for the kernels below: a Python 2 or True there is converted by pa.scalar, which imports
# pandas on first use (0.3-1 s of a new process's first query)
_TWO, _TRUE = numbers([2], pa.int32())[0], bools(np.array([True]))[0]
_NO_SEPARATOR = strings([""])[0]


def _unplain_paths(chunk: FileChunk) -> list[str]:
    column = chunk.table.column("path")
    if not pa.types.is_struct(column.type):
        return [p for p in chunk.paths.to_pylist() if NOT_PLAIN.search(p)]
    out: list[str] = []
    for part in column.chunks:
        prefix, suffix, middle = part.field("prefix"), part.field("suffix"), part.field("middle")
        odd_prefixes = [i for i, p in enumerate(prefix.dictionary.to_pylist()) if NOT_PLAIN.search(p + "x")]
        odd_suffixes = [i for i, e in enumerate(suffix.dictionary.to_pylist()) if "\\" in e]
        rows = pc.or_(
            pc.or_(
                pc.is_in(prefix.indices, value_set=numbers(odd_prefixes, prefix.indices.type)),
                pc.is_in(suffix.indices, value_set=numbers(odd_suffixes, suffix.indices.type)),
            ),
            pc.or_(pc.less_equal(pc.utf8_length(middle), _TWO), pc.match_substring(middle, "\\")),
        )
        hits = pc.indices_nonzero(pc.fill_null(rows, _TRUE))
        if len(hits):
            candidates = logical_column("path", pa.chunked_array([part.take(hits)]), pa.string()).to_pylist()
            out += [p for p in candidates if NOT_PLAIN.search(p)]
    return out


# chunk -> a uint64 hash of each row's file name (or None: not found so), made once per chunk (they never change)
_NAME_HASHES: weakref.WeakKeyDictionary[FileChunk, tuple[tuple[str, str] | None, np.ndarray | None]] = (
    weakref.WeakKeyDictionary()
)
# the chunks of the last few states -> (weak references to them, their ``last_entries``)
_LAST_ENTRIES: dict[tuple[int, ...], tuple[list[weakref.ref[FileChunk]], tuple[FileChunk, ...]]] = {}
_MULTIPLIERS = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x27D4EB2F165667C5], np.uint64)


def last_entries(chunks: Sequence[FileChunk]) -> list[FileChunk]:
    """``chunks`` (a state's manifests, in order) with every entry of a path but the last dropped
    (PROTOCOL §9: the entry read last wins, within a manifest too): without it a path listed twice was
    a live file twice and its rows were read twice. The common case, no path twice, is found on a hash
    of each row's file name (from the compact path form, ``chunk_encoding``), cached per chunk, and one
    sort of all of them (the result cached for the chunks); only the rows whose hash repeats are compared whole."""
    chunks = [c for c in chunks if len(c)]
    if not chunks:
        return chunks
    key = tuple(id(c) for c in chunks)
    held = _LAST_ENTRIES.get(key)
    if held is not None and all(r() is c for r, c in zip(held[0], chunks, strict=True)):
        return list(held[1])
    out = _last_entries(chunks)
    if len(_LAST_ENTRIES) >= 16:
        _LAST_ENTRIES.pop(next(iter(_LAST_ENTRIES)))
    _LAST_ENTRIES[key] = ([weakref.ref(c) for c in chunks], tuple(out))
    return out


def _last_entries(chunks: list[FileChunk]) -> list[FileChunk]:
    found = [_name_hashes(c) for c in chunks]  # (the names' shared start and end, the middles' hashes)
    hashed: list[np.ndarray | None] = [h for _, h in found]
    if len({shape for shape, _ in found}) > 1:  # middles of different shapes: the names' hashes
        hashed = [_hash_names(c, joined=True)[1] for c in chunks]
    if all(h is not None for h in hashed):
        hashes = np.concatenate([h for h in hashed if h is not None])
        ordered = np.sort(hashes)  # (a sort and a comparison: 1M hashes in about 15 ms; a hash count costs more)
        again = ordered[1:] == ordered[:-1]
        if not again.any():
            return chunks  # no file name twice: no path twice
        candidate = np.isin(hashes, ordered[1:][again])
    else:  # names of several shapes (or plain path columns): every row is a candidate
        candidate = np.ones(sum(len(c) for c in chunks), np.bool_)
    rows = np.flatnonzero(candidate)
    bounds = np.cumsum([0, *(len(c) for c in chunks)])
    paths = pa.chunked_array(
        [
            c.paths.take(int64s(rows[(rows >= lo) & (rows < hi)] - lo))
            for c, lo, hi in zip(chunks, bounds[:-1], bounds[1:], strict=True)
        ],
        _STRING,
    )
    keyed = pa.table({"path": paths, "row": int64s(rows)})
    last = keyed.group_by("path").aggregate([("row", "max"), ("row", "count")])
    repeated = pc.greater(last.column("row_count"), 1)
    if not pc.any(repeated).as_py():
        return chunks
    repeated_paths = pc.filter(last.column("path"), repeated)
    kept_rows = pc.filter(last.column("row_max"), repeated).to_numpy()
    dropped = np.flatnonzero(pc.is_in(keyed.column("path"), value_set=repeated_paths).to_numpy(zero_copy_only=False))
    dropped_rows = np.setdiff1d(rows[dropped], kept_rows)
    out = []
    for c, lo, hi in zip(chunks, bounds[:-1], bounds[1:], strict=True):
        mine = dropped_rows[(dropped_rows >= lo) & (dropped_rows < hi)] - lo
        out.append(c if not len(mine) else _without_rows(c, mine))
    return [c for c in out if len(c)]


def _without_rows(chunk: FileChunk, rows: np.ndarray) -> FileChunk:
    keep = np.ones(len(chunk), np.bool_)
    keep[rows] = False
    objects = None if chunk.objects is None else tuple(a for a, k in zip(chunk.objects, keep, strict=True) if k)
    return FileChunk(chunk.full_table().filter(pa.array(keep)), objects)


def _name_hashes(chunk: FileChunk) -> tuple[tuple[str, str] | None, np.ndarray | None]:
    found = _NAME_HASHES.get(chunk)
    if found is None:
        found = _NAME_HASHES[chunk] = _hash_names(chunk, joined=False)
    return found


def _hash_names(chunk: FileChunk, joined: bool) -> tuple[tuple[str, str] | None, np.ndarray | None]:
    """The shared start and end of the chunk's file names (the part after the last ``/``; the compact
    form's, ``chunk_encoding``) and a hash of each row's middle (``joined``: of its whole name); (None,
    None) when the path column is plain, its parts differ in start or end, or the lengths differ (then
    every row is compared whole)."""
    column = chunk.table.column("path")
    if not pa.types.is_struct(column.type):
        return None, None
    shapes, hashes = set(), []
    for part in column.chunks:
        prefix, suffix, middle = part.field("prefix"), part.field("suffix"), part.field("middle")
        starts = {p.rsplit("/", 1)[-1] for p in prefix.dictionary.to_pylist()}
        ends = suffix.dictionary.to_pylist()
        if len(starts) != 1 or len(ends) != 1 or middle.null_count:
            return None, None
        shape = (starts.pop(), ends[0])
        shapes.add(shape)
        names = middle.cast(_STRING)
        if joined and (shape[0] or shape[1]):
            start, end = strings(list(shape))  # Arrow scalars: pa.scalar of a str imports pandas
            names = pc.binary_join_element_wise(start, names, end, _NO_SEPARATOR)
        found = _hash_fixed(names)
        if found is None or (len(shapes) > 1 and not joined):
            return None, None
        hashes.append(found)
    return (shapes.pop() if len(shapes) == 1 else None), (np.concatenate(hashes) if hashes else np.zeros(0, np.uint64))


def _hash_fixed(strings_: pa.Array) -> np.ndarray | None:
    """A uint64 hash of each string of an array whose strings all have one length (None otherwise)."""
    n = len(strings_)
    offsets = np.frombuffer(strings_.buffers()[1], np.int32, n + 1, strings_.offset * 4)
    width = int(offsets[1] - offsets[0]) if n else 0
    if n and (offsets[-1] - offsets[0] != width * n or np.any(np.diff(offsets) != width)):
        return None
    if n == 0 or width == 0:
        return np.zeros(n, np.uint64)
    buffer, start = strings_.buffers()[2], int(offsets[0])
    if width < 8:
        data = np.frombuffer(buffer, np.uint8)[start : start + width * n].reshape(n, width)
        words = [np.concatenate([data, np.zeros((n, 8 - width), np.uint8)], axis=1).view(np.uint64)[:, 0]]
    else:  # 8-byte words read in place at each row's stride (the last one overlapping), no copy
        at = [*range(0, width - 7, 8), *([width - 8] if width % 8 else [])]
        words = [np.ndarray((n,), np.uint64, buffer, start + a, (width,)) for a in at]
    out = np.full(n, np.uint64(width), np.uint64)
    with np.errstate(over="ignore"):
        for j, word in enumerate(words):
            out = (out ^ word) * _MULTIPLIERS[j % len(_MULTIPLIERS)]
            out ^= out >> np.uint64(29)
    return out
