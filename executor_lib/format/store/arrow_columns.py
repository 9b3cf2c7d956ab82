"""A doc store's stored values as Arrow columns: each field's payloads, found in the decoded
documents (``executor_lib.format.store.documents``), become one array in one pass each: 8-byte
integers, floats (Tantivy's order-preserving u64 form undone), bools, times in any unit (checked
to lose nothing), and text and bytes over the documents' own buffer.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.arrow_arrays import bools, numbers
from indextables_contract.errors import CorruptSplitError

_HIGHEST_BIT = np.uint64(1 << 63)
_NANOS_PER_DAY = 86_400 * 10**9
_NANOS_PER_UNIT = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


def u32_view(data: np.ndarray) -> np.ndarray:
    """``view[i]`` is the little-endian u32 at byte ``i`` of ``data`` (an unaligned view, no copy)."""
    return np.ndarray((len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))


def u64_view(data: np.ndarray) -> np.ndarray:
    """``view[i]`` is the little-endian u64 at byte ``i`` of ``data`` (an unaligned view, no copy)."""
    return np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))


def stored_column(
    data: np.ndarray,
    doc_starts: np.ndarray,
    tantivy_type: str,
    arrow_type: pa.DataType,
    start: np.ndarray,
    length: np.ndarray,
    where: str,
    version: int,
) -> pa.Array:
    """A stored field's column, of Tantivy type ``tantivy_type`` read as ``arrow_type``, from its
    payloads' positions in ``data`` (``start`` below 0: null) and lengths; ``version`` is the doc
    store's (1: dates in microseconds).

    Raises:
        CorruptSplitError: a value that does not fit ``arrow_type`` (``where`` names the field).

    Example: ``stored_column(data, starts, "i64", pa.int64(), start, length, "split s: field id", 2)``
    """
    valid = start >= 0
    try:
        if tantivy_type in ("text", "bytes"):
            return _binary(data, doc_starts, arrow_type, start, length, valid, where)
        return _fixed(data, tantivy_type, arrow_type, start, valid, where, version)
    except (pa.ArrowInvalid, OverflowError) as e:
        raise CorruptSplitError(f"{where}: stored values do not fit {arrow_type} ({e})") from e


def _fixed(
    data: np.ndarray,
    tantivy_type: str,
    arrow_type: pa.DataType,
    start: np.ndarray,
    valid: np.ndarray,
    where: str,
    version: int,
) -> pa.Array:
    """A column of 8-byte or bool values."""
    mask = None if valid.all() else ~valid
    at = start if mask is None else np.where(valid, start, 0)
    if tantivy_type == "bool":
        byte = data.take(at)
        if mask is not None:
            byte[mask] = 0
        if (byte > 1).any():
            raise CorruptSplitError(f"{where}: a stored bool is {int(byte.max())}, not 0 or 1")
        return bools(byte.view(np.bool_), valid)
    raw = u64_view(data)[at]
    if tantivy_type == "u64":
        return numbers(_narrowed(raw, arrow_type, valid, where), arrow_type, valid)
    if tantivy_type == "i64":
        return numbers(_narrowed(raw.view(np.int64), arrow_type, valid, where), arrow_type, valid)
    if tantivy_type == "f64":  # common's u64_to_f64: flip the sign bit if set, else every bit
        raw ^= (((raw >> np.uint64(63)) - np.uint64(1)) >> np.uint64(1)) | _HIGHEST_BIT
        return numbers(_floats(raw.view(np.float64), arrow_type, valid, where), arrow_type, valid)
    tick = 1000 if version == 1 else 1  # nanoseconds a stored unit
    return numbers(_temporal(raw.view(np.int64), tick, arrow_type, valid, where), arrow_type, valid)


def _floats(values: np.ndarray, arrow_type: pa.DataType, valid: np.ndarray, where: str) -> np.ndarray:
    """Float64 ``values`` as ``arrow_type``'s (rounded to float32); CorruptSplitError if a finite one
    is beyond float32's range."""
    if pa.types.is_float64(arrow_type):
        return values
    with np.errstate(over="ignore"):
        narrow = values.astype(np.float32)
    outside = valid & np.isinf(narrow) & np.isfinite(values)
    if outside.any():
        raise CorruptSplitError(f"{where}: stored value {values[np.argmax(outside)]} does not fit {arrow_type}")
    return narrow


def _narrowed(values: np.ndarray, arrow_type: pa.DataType, valid: np.ndarray, where: str) -> np.ndarray:
    """Integer ``values`` as ``arrow_type``'s numpy type; CorruptSplitError if one does not fit."""
    target = np.dtype(arrow_type.to_pandas_dtype())
    if target == values.dtype:
        return values
    info = np.iinfo(target)
    outside = valid & ((values < info.min) | (values > info.max))
    if outside.any():
        raise CorruptSplitError(f"{where}: stored value {values[np.argmax(outside)]} does not fit {arrow_type}")
    return values.astype(target)


def _temporal(ticks: np.ndarray, tick: int, arrow_type: pa.DataType, valid: np.ndarray, where: str) -> np.ndarray:
    """Times since the epoch in units of ``tick`` nanoseconds as ``arrow_type``'s integers (timestamp
    units, days, date64's milliseconds of whole days); CorruptSplitError if that would lose a part
    of one or overflow."""
    if pa.types.is_timestamp(arrow_type):
        whole = out = _NANOS_PER_UNIT[arrow_type.unit]
    else:
        whole, out = _NANOS_PER_DAY, _NANOS_PER_DAY if pa.types.is_date32(arrow_type) else 10**6
    if out < tick:  # version 1's microseconds as nanoseconds
        factor = tick // out
        beyond = valid & (np.abs(ticks) > np.iinfo(np.int64).max // factor)
        if beyond.any():
            raise CorruptSplitError(f"{where}: stored time {ticks[np.argmax(beyond)]} does not fit {arrow_type}")
        return ticks * factor
    lost = valid & (ticks % (whole // tick) != 0)
    if lost.any():
        raise CorruptSplitError(
            f"{where}: stored time {ticks[np.argmax(lost)]} x {tick} ns is not a whole {arrow_type}"
        )
    if out == tick:
        return ticks
    return (ticks // (out // tick)).astype(np.int32 if pa.types.is_date32(arrow_type) else np.int64)


def _binary(
    data: np.ndarray,
    doc_starts: np.ndarray,
    arrow_type: pa.DataType,
    start: np.ndarray,
    length: np.ndarray,
    valid: np.ndarray,
    where: str,
) -> pa.Array:
    """A text or bytes column: a binary array whose odd elements are the payloads (the even ones the
    bytes between them) over ``data`` itself, then ``take`` of the odd ones copies them out."""
    n = len(start)
    begin = start if valid.all() else np.where(valid, start, doc_starts)  # none: empty, at its document
    large = len(data) >= 2**31
    offsets = np.empty(2 * n + 1, dtype=np.int64 if large else np.int32)
    offsets[0] = 0
    offsets[1::2] = begin
    offsets[2::2] = begin + length
    if n and (offsets[1:] < offsets[:-1]).any():  # documents out of order (decode_docs): gather
        taken = _gathered(data, begin, length, large)
    else:
        spans = pa.Array.from_buffers(
            pa.large_binary() if large else pa.binary(), 2 * n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        )
        taken = pc.take(spans, numbers(np.arange(1, 2 * n, 2), pa.int64() if large else pa.int32()))
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        try:
            taken = taken.cast(arrow_type)
        except pa.ArrowInvalid as e:
            raise CorruptSplitError(f"{where}: stored text is not UTF-8 ({e})") from e
    else:
        taken = taken.cast(arrow_type)
    if valid.all():
        return taken
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(arrow_type, n, [bitmap, *taken.buffers()[1:]], null_count=n - int(valid.sum()))


def _gathered(data: np.ndarray, begin: np.ndarray, length: np.ndarray, large: bool) -> pa.Array:
    """The byte ranges ``begin, length`` of ``data`` as a binary array, copied by one numpy gather."""
    offsets = np.zeros(len(begin) + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    index = np.repeat(begin - offsets[:-1], length) + np.arange(offsets[-1])
    large = large or offsets[-1] >= 2**31
    return pa.Array.from_buffers(
        pa.large_binary() if large else pa.binary(),
        len(begin),
        [None, pa.py_buffer(offsets if large else offsets.astype(np.int32)), pa.py_buffer(data[index])],
    )
