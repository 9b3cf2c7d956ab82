"""Arrow arrays built from their buffers, and a map column's values by key, for the files' columns
(``file_table``, ``pruning``): ``pa.array`` and ``pa.scalar`` import pandas on first use (0.5-1.5 s in a
new process), which a partition listing must not pay, and no helper here builds an object per row.

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
    data = np.ascontiguousarray(values, dtype=np.int64)
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(_INT, len(data), [bitmap, pa.py_buffer(data)])


def integers(values: Sequence[int], arrow_type: pa.DataType) -> pa.Array:
    """An array of ``values`` of the integer type ``arrow_type`` (a dictionary's indices), no nulls.

    Example: ``integers([0, 3], chunk.field("prefix").indices.type)``
    """
    data = np.ascontiguousarray(
        values, dtype=np.dtype(f"{'int' if pa.types.is_signed_integer(arrow_type) else 'uint'}{arrow_type.bit_width}")
    )
    return pa.Array.from_buffers(arrow_type, len(data), [None, pa.py_buffer(data)])


def numpy_view(array: pa.Array, dtype: Any) -> np.ndarray:
    """The values of a null-free fixed-width array, viewed from its buffer."""
    size = np.dtype(dtype).itemsize
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * size)


def bools(values: np.ndarray) -> pa.Array:
    return pa.Array.from_buffers(_BOOL, len(values), [None, pa.py_buffer(np.packbits(values, bitorder="little"))])


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
