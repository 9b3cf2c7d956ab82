"""Arrow arrays built from and read into numpy through their buffers, for every layer (the stored
columns, the log's files, the searches): pyarrow imports pandas (0.25-1.5 s in a new process) at its
first ``pa.array``/``pa.scalar`` of Python or numpy values, ``to_numpy`` or ``Schema.empty_table``,
which a partition listing or the first query must not pay; no helper here builds an object per row.
It imports nothing of ``executor_lib``.

    >>> ids = numbers(np.array([3, 1]), pa.uint64())
    >>> as_numpy(ids)
    array([3, 1], dtype=uint64)
    >>> map_values(chunk.column("partition_values"), "day")
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_STRING, _INT, _BOOL = pa.string(), pa.int64(), pa.bool_()


def int64s(values: Any, valid: np.ndarray | None = None) -> pa.Array:
    """An int64 array of ``values`` (null where ``valid`` is False)."""
    return numbers(values, _INT, valid)


def numbers(values: Any, arrow_type: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    """An array of the fixed-width type ``arrow_type`` (an integer, a float, a date, a time or a
    timestamp, from its integer form) of ``values``, null where ``valid`` is False.

    Example: ``numbers(np.array([3, 1]), pa.uint64())``; ``numbers(days, pa.date32(), valid=days >= 0)``
    """
    if pa.types.is_floating(arrow_type):
        dtype = np.dtype(f"float{arrow_type.bit_width}")
    else:
        signed = not pa.types.is_unsigned_integer(arrow_type)
        dtype = np.dtype(f"{'int' if signed else 'uint'}{arrow_type.bit_width}")
    data = np.ascontiguousarray(values, dtype=dtype)
    return pa.Array.from_buffers(arrow_type, len(data), [_bitmap(valid), pa.py_buffer(data)])


def _bitmap(valid: np.ndarray | None) -> pa.Buffer | None:
    return None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def numpy_view(array: pa.Array, dtype: Any) -> np.ndarray:
    """The values of a null-free fixed-width array, viewed from its buffer."""
    size = np.dtype(dtype).itemsize
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * size)


def as_numpy(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``values.to_numpy()`` without pandas: a null-free number array is viewed from its buffer (one
    chunk) or copied (several); booleans are unpacked; anything else goes through Arrow's own
    ``to_numpy``, which imports pandas.

    Example: ``as_numpy(table["__row"])`` -> ``array([0, 7, 9], dtype=uint64)``
    """
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            return as_numpy(values.chunk(0))
        if values.null_count or not _is_plain(values.type):
            return values.to_numpy()
        if values.num_chunks == 0:
            return np.empty(0, dtype=values.type.to_pandas_dtype())
        return np.concatenate([as_numpy(chunk) for chunk in values.chunks])
    if values.null_count == 0 and _is_plain(values.type):
        if pa.types.is_boolean(values.type):
            bits = np.frombuffer(values.buffers()[1], dtype=np.uint8)
            return np.unpackbits(bits, bitorder="little", count=values.offset + len(values))[values.offset :].view(bool)
        return numpy_view(values, values.type.to_pandas_dtype())
    return values.to_numpy(zero_copy_only=False)


def _is_plain(arrow_type: pa.DataType) -> bool:
    """A type whose null-free arrays ``as_numpy`` reads from their buffer."""
    return pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_boolean(arrow_type)


def bools(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A bool array of ``values``, null where ``valid`` is False."""
    packed = pa.py_buffer(np.packbits(np.asarray(values, dtype=bool), bitorder="little"))
    return pa.Array.from_buffers(_BOOL, len(values), [_bitmap(valid), packed])


def strings(values: Sequence[str]) -> pa.Array:
    encoded = [v.encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return pa.Array.from_buffers(_STRING, len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])


def map_values(column: pa.ChunkedArray, key: str) -> pa.Array:
    """Each row's value for ``key`` in a ``map<string, string>`` column (``partitionValues``,
    ``minValues``...; null: no such key, a null value, or a null map), without an object per row.
    Arrow's own ``map_lookup`` imports pandas on first use (about a second), so this does it from the
    flat keys and items.

    Example: ``map_values(chunk.column("min_values"), "id")`` -> ``["0", "1000", null, ...]``
    """
    maps = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    offsets = numpy_view(maps.offsets, np.int32)  # into the full keys and items (a sliced array's start past 0)
    first, last = int(offsets[0]), int(offsets[-1])
    keys = maps.keys.slice(first, last - first)
    counts = np.diff(offsets)
    parents = np.repeat(np.arange(len(maps), dtype=np.int64), counts)  # the row of each key
    matches = pc.equal(keys, strings([key])[0])  # map keys are never null
    hits = numpy_view(pc.indices_nonzero(matches), np.uint64).astype(np.int64)
    position = np.full(len(maps), -1, dtype=np.int64)
    position[parents[hits][::-1]] = hits[::-1] + first  # reversed: the first occurrence is written last
    return pc.take(maps.items, int64s(position, valid=position >= 0))


def partition_value(value: str | None, arrow_type: pa.DataType) -> pa.Scalar:
    """A partition value as written in the log (a string, or None for null) as a scalar of ``arrow_type``,
    cast as Spark reads it back.

    Example: ``partition_value("2024-01-02", pa.date32())`` -> ``<pyarrow.Date32Scalar: 2024-01-02>``
    """
    if value is None:
        return pa.nulls(1, arrow_type)[0]
    return strings([value]).cast(arrow_type)[0]


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of ``schema`` with no rows (``schema.empty_table()`` imports pandas).

    Example: ``empty_table(pa.schema([("id", pa.int64())])).num_rows`` -> ``0``
    """
    return pa.Table.from_batches([], schema=schema)
