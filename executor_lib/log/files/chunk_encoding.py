"""How a ``FileChunk`` holds its columns: compact physical forms of the logical ``COLUMN_TYPES``.

A snapshot of a million files holds its chunks for as long as it lives, so each column is kept in
the smallest Arrow form that gives back the logical column exactly (``logical_column``), and
callers only ever see the logical one (``FileChunk.column`` and ``LiveFiles.columns``):

* ``path``: ``struct<prefix: dictionary<string>, middle: string, suffix: dictionary<string>>``,
  concatenated back: the directory and the start every file name of the chunk shares, the rest of
  the name, and the end they share (``day=.../splits/split-``, a UUID, ``.split``);
* ``partition_values``: ``map<dictionary<string>, dictionary<string>>``: a few distinct keys and values;
* integers: ``int32`` where every value of the chunk fits (sizes, record counts, footer offsets);
* dictionary-encoded strings (``doc_mapping_ref``...): the narrowest index that holds the dictionary.

Chunks are compacted when they are built (``compact_table``), so the manifest caches and sidecars
store the compact form and a load reads it as is (memory-mapped, zero-copy from the disk cache).
A file holding plain columns (written before) is compacted when read.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.arrow_arrays import int64s, strings

_STRING, _INT, _INT32 = pa.string(), pa.int64(), pa.int32()
_MAP = pa.map_(pa.string(), pa.string())
_PREFIX, _MIDDLE, _SUFFIX = "prefix", "middle", "suffix"
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
# Bumped when a compact form changes: names the manifest disk cache's files (``DiskManifestCache``).
PHYSICAL_VERSION = "compact-2"
# Columns kept dictionary-encoded in the map form (few distinct keys and values).
_DICTIONARY_MAPS = frozenset({"partition_values"})


def _index_type(size: int) -> pa.DataType:
    """The narrowest signed index type for a dictionary of ``size`` values."""
    if size <= 127:
        return pa.int8()
    if size <= 32767:
        return pa.int16()
    return pa.int32()


def _narrow_dictionary(array: pa.Array) -> pa.Array:
    """``array`` dictionary-encoded with the narrowest index type (a dictionary array stays one)."""
    encoded = array if pa.types.is_dictionary(array.type) else pc.dictionary_encode(array)
    wanted = pa.dictionary(_index_type(len(encoded.dictionary)), encoded.type.value_type)
    return encoded if encoded.type == wanted else encoded.cast(wanted)


def _split_paths(paths: pa.Array) -> pa.Array:
    """``path`` as ``struct<prefix, middle, suffix>``, joined back by concatenation: ``prefix`` the
    directory (up to and including the last ``/``) and the start every file name of the chunk shares
    (``split-``), ``suffix`` the end they share (``.split``), both dictionary-encoded; ``middle`` the
    rest (a UUID). Split by Arrow: a regular expression costs 20x more, and a second on first use."""
    parts = pc.split_pattern(paths, pattern="/", max_splits=1, reverse=True)  # [dir without "/", name] or [name]
    offsets = np.frombuffer(parts.buffers()[1], np.int32, len(parts) + 1, parts.offset * 4)
    has_dir = np.diff(offsets) == 2
    names = parts.values.take(int64s(offsets[1:] - 1))
    start, end = _shared_ends(names)
    middle = pc.utf8_slice_codeunits(names, len(start), -len(end) if end else None)
    dirs = pc.dictionary_encode(parts.values.take(int64s(offsets[:-1][has_dir])))
    size = len(dirs.dictionary)
    joined = pc.binary_join_element_wise(dirs.dictionary, strings(["/" + start] * size), strings([""] * size))
    dictionary = pa.concat_arrays([joined, strings([start])])  # last: the prefix of a path without "/"
    codes = np.full(len(paths), len(dictionary) - 1, dtype=np.int32)
    codes[has_dir] = np.frombuffer(dirs.indices.buffers()[1], np.int32, len(dirs.indices), dirs.indices.offset * 4)
    prefix = _narrow_dictionary(pa.DictionaryArray.from_arrays(_int32s(codes), dictionary))
    suffix = pa.DictionaryArray.from_arrays(_int32s(np.zeros(len(paths), np.int32)), strings([end]))
    return pa.StructArray.from_arrays([prefix, middle, _narrow_dictionary(suffix)], [_PREFIX, _MIDDLE, _SUFFIX])


def _shared_ends(names: pa.Array) -> tuple[str, str]:
    """The longest start and the longest end all ``names`` share, not overlapping in any of them
    (each found by bisection over the first name's, one vectorized test a step)."""
    if len(names) == 0:
        return "", ""
    first = str(names[0].as_py())
    shortest = int(pc.min(pc.utf8_length(names)).as_py())

    def longest(fits: Any, limit: int) -> int:
        low, high = 0, limit  # fits(low) holds; find the largest k <= limit with fits(k)
        while low < high:
            k = (low + high + 1) // 2
            if fits(k):
                low = k
            else:
                high = k - 1
        return low

    start = longest(lambda k: bool(pc.all(pc.starts_with(names, pattern=first[:k])).as_py()), shortest)
    end = longest(
        lambda k: bool(pc.all(pc.ends_with(names, pattern=first[len(first) - k :])).as_py()), shortest - start
    )
    return first[:start], first[len(first) - end :] if end else ""


def _int32s(values: np.ndarray) -> pa.Array:
    data = np.ascontiguousarray(values, dtype=np.int32)
    return pa.Array.from_buffers(_INT32, len(data), [None, pa.py_buffer(data)])


# The separator of a concatenation, made without ``pa.scalar``: a Python str there imports pandas on
# first use (over a second in a new process).
_NO_SEPARATOR = strings([""])[0]


def compact_column(name: str, array: pa.Array, logical: pa.DataType) -> pa.Array:
    """The compact form of one chunk's column ``name`` (logical type ``logical``); a column already
    compact, or with no compact form, is returned as is."""
    if not _compactable(name, array.type):
        return array  # already compact, or no compact form: not copied
    if array.type == _INT and not _fits_int32(array):
        return array
    if pa.types.is_dictionary(array.type):
        chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
        if all(c.type.index_type == _index_type(len(c.dictionary)) for c in chunks):
            return array
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if name == "path" and array.type == _STRING and array.null_count == 0:
        return _split_paths(array)
    if name in _DICTIONARY_MAPS and array.type == _MAP:
        if array.offset:  # a slice: taken whole, so its offsets and children start at 0
            rows = pa.py_buffer(np.arange(len(array), dtype=np.int64))
            array = array.take(pa.Array.from_buffers(_INT, len(array), [None, rows]))
        keys, items = _narrow_dictionary(array.keys), _narrow_dictionary(array.items)
        mask = array.is_null() if array.null_count else None
        return pa.MapArray.from_arrays(array.offsets, keys, items, mask=mask)
    if array.type == _INT:
        return array.cast(_INT32)  # it fits (above)
    if pa.types.is_dictionary(array.type):
        return _narrow_dictionary(array)
    return array


def _fits_int32(array: pa.Array | pa.ChunkedArray) -> bool:
    """Whether an int64 column has a value and every value fits an int32."""
    if len(array) == 0 or array.null_count == len(array):
        return False
    low, high = pc.min_max(array).values()
    return bool(low.as_py() >= _INT32_MIN and high.as_py() <= _INT32_MAX)


def _compactable(name: str, physical: pa.DataType) -> bool:
    """Whether a column of this type may have a more compact form (``compact_column`` decides)."""
    if name == "path" or name in _DICTIONARY_MAPS:
        return bool(physical in (_STRING, _MAP))
    return bool(physical == _INT or pa.types.is_dictionary(physical))


def compact_table(table: pa.Table, types: dict[str, pa.DataType]) -> pa.Table:
    """``table`` with every column in its compact form (``types``: the logical type of each name)."""
    if not any(_compactable(f.name, f.type) for f in table.schema):
        return table
    before = table.columns
    after = [compact_column(name, column, types[name]) for name, column in zip(table.column_names, before, strict=True)]
    if all(a is b for a, b in zip(after, before, strict=True)):
        return table  # nothing to compact: the table itself, not a copy of it
    return pa.Table.from_arrays(after, names=table.column_names)


def is_physical_form(name: str, physical: pa.DataType, logical: pa.DataType) -> bool:
    """Whether ``physical`` is the logical type or one of its compact forms (a file's column type)."""
    if physical.equals(logical):
        return True
    if pa.types.is_dictionary(physical):
        return bool(physical.value_type.equals(logical))
    if logical == _INT:
        return bool(physical == _INT32)
    if name == "path" and pa.types.is_struct(physical):
        fields = [(f.name, f.type) for f in physical]
        dictionary = [t for n, t in fields if n in (_PREFIX, _SUFFIX)]
        return (
            [n for n, _ in fields] == [_PREFIX, _MIDDLE, _SUFFIX]
            and fields[1][1] == _STRING
            and all(pa.types.is_dictionary(t) and t.value_type == _STRING for t in dictionary)
        )
    if name in _DICTIONARY_MAPS and pa.types.is_map(physical) and logical == _MAP:
        return all(
            t.equals(_STRING) or (pa.types.is_dictionary(t) and t.value_type.equals(_STRING))
            for t in (physical.key_type, physical.item_type)
        )
    return False


def logical_column(name: str, column: pa.ChunkedArray, logical: pa.DataType) -> pa.ChunkedArray:
    """The logical column (type ``logical``) of a chunk's column in any physical form."""
    if column.type.equals(logical):
        return column
    if name == "path" and pa.types.is_struct(column.type):
        return pa.chunked_array(
            [
                pc.binary_join_element_wise(
                    c.field(_PREFIX).cast(_STRING), c.field(_MIDDLE), c.field(_SUFFIX).cast(_STRING), _NO_SEPARATOR
                )
                for c in column.chunks
            ],
            _STRING,
        )
    return column.cast(logical)
