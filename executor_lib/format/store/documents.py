"""Tantivy's doc store, decoded: the documents of decompressed ``.store`` blocks as Arrow columns,
vectorized (numpy over all documents at once, one step per stored value; no Python loop per
document). Decompressing the blocks (lz4 or zstd) and finding them (the store's skip index) is not
done here. No tantivy here.

The format, as Tantivy writes it (``src/store/writer.rs`` ``send_current_block_to_compressor``,
``src/schema/document/se.rs`` and ``de.rs``, ``type_codes`` in ``src/schema/document/mod.rs``,
``common/src/serialize.rs``, ``common/src/vint.rs`` of the fork IndexTables4Spark reads with, GitHub
``indextables/tantivy``; the ``tantivy`` Python package's 0.27 writes the same bytes), little-endian::

    block    = [doc 0][doc 1]...[doc n-1][u32 start of each doc, n of them][u32 n]
    doc      = [VInt number of values] ([u32 field id][value]) x number of values
    value    = [u8 type code][payload]
    payload  = text 0, facet 3, bytes 4:  [VInt length][bytes]      (text is UTF-8)
               u64 1, i64 2:              8 bytes
               f64 6:                     u64 ``f64_to_u64`` (sign bit flipped, or all bits if negative)
               date 5:                    i64 nanoseconds since the epoch (doc store version 2;
                                          microseconds in version 1)
               bool 9: 1 byte (0 or 1);   ip 10: 16 bytes;  null 11: nothing
               array 12, object 13:       [VInt count] then count values (an object's count is
                                          twice its entries: keys and values alternate, keys text)
               ext 7 (pre-tokenized text), json 8 (deprecated serde JSON): not supported

A document's values come in the order they were added (not by field id), a field may hold several,
and a field without a value is absent. Tantivy's ``VInt`` is 7 bits a byte, low bits first, with
the high bit set on the *last* byte (``composite_file.decode_vint``).

The decoding: all documents' positions in one numpy array; each step reads one value of every
document still being read (one unaligned 8-byte read: its field id, type code and the first byte
of a length), noting in a (column, document) table where the payloads of the wanted fields are;
nested values (JSON fields) are skipped the same way, with a count of values still to skip per
document. A step where every document's next value is of one field and type (the writer's
documents, fields in one order) works with numbers for the field, code and size. Then each
column gathers its payloads at once: fixed-size values from unaligned numpy views of the bytes;
text and bytes as a binary array over the blocks' own bytes, alternately the values and the
bytes between them, whose ``take`` of every other element copies the values out (documents out
of order, from ``decode_docs``: one numpy gather).

What the writer does not produce is refused as CorruptSplitError rather than guessed: a field
with two values in a document (a stored null counts: it reads as null alone), a value whose type
is not its column's, a value that does not fit the column's type, bytes left after a document's
last value, text that is not UTF-8, lengths and counts of more than 8 VInt bytes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from executor_lib.format.store.arrow_columns import stored_column, u32_view, u64_view
from indextables_contract.errors import CorruptSplitError, SplitSchemaError

DOC_STORE_VERSION = 2  # what Tantivy writes (``src/store/mod.rs``); version 1 dates are microseconds

TEXT_CODE = 0
U64_CODE = 1
I64_CODE = 2
FACET_CODE = 3
BYTES_CODE = 4
DATE_CODE = 5
F64_CODE = 6
EXT_CODE = 7
JSON_OBJ_CODE = 8
BOOL_CODE = 9
IP_CODE = 10
NULL_CODE = 11
ARRAY_CODE = 12
OBJECT_CODE = 13

_TYPE_CODES = {
    "text": TEXT_CODE,
    "u64": U64_CODE,
    "i64": I64_CODE,
    "bytes": BYTES_CODE,
    "datetime": DATE_CODE,
    "f64": F64_CODE,
    "bool": BOOL_CODE,
}
_CODE_NAMES = {v: k for k, v in _TYPE_CODES.items()} | {
    FACET_CODE: "facet",
    EXT_CODE: "pre-tokenized text",
    JSON_OBJ_CODE: "json (deprecated)",
    IP_CODE: "ip",
    NULL_CODE: "null",
    ARRAY_CODE: "array",
    OBJECT_CODE: "object",
}

# What follows a type code: a fixed-size payload, a VInt length and that many bytes, a VInt count
# of nested values, or something this module cannot skip (unknown codes among them).
_FIXED, _SIZED, _NESTED, _UNSUPPORTED = 0, 1, 2, 3
_KIND = np.full(256, _UNSUPPORTED, np.int8)
_KIND[[U64_CODE, I64_CODE, DATE_CODE, F64_CODE, BOOL_CODE, IP_CODE, NULL_CODE]] = _FIXED
_KIND[[TEXT_CODE, FACET_CODE, BYTES_CODE]] = _SIZED
_KIND[[ARRAY_CODE, OBJECT_CODE]] = _NESTED
_SIZE = np.zeros(256, np.int64)
_SIZE[[U64_CODE, I64_CODE, DATE_CODE, F64_CODE]] = 8
_SIZE[BOOL_CODE] = 1
_SIZE[IP_CODE] = 16

_PAD = 32  # zero bytes after the data: a read at a position within the data never runs off it
_STOP_BITS = np.uint64(0x8080_8080_8080_8080)
_FIELD_AND_CODE = np.uint64(0xFF_FFFF_FFFF)  # of the 8 bytes at a field value: its u32 field id and type code
_MAX_FIELD_ID = 1 << 20  # the largest field id a column may name (a lookup table this long)


@dataclass(frozen=True)
class StoredColumn:
    """A stored Tantivy field to decode, and the Arrow column it becomes."""

    field_id: int  # the Tantivy field id: the field's position in the index's meta.json schema
    name: str
    tantivy_type: str  # the doc mapping's type: "text", "i64", "u64", "f64", "bool", "datetime", "bytes"
    arrow_type: pa.DataType  # the type the column is returned as


def decodable(tantivy_type: str, arrow_type: pa.DataType) -> bool:
    """Whether stored values of this Tantivy type give back the values ``splits.write.writer`` was given
    in this Arrow type, exactly.

    ``text`` -> string, large_string; ``i64`` -> int8..int64; ``u64`` -> uint8..uint64; ``f64`` ->
    float32, float64; ``bool`` -> bool; ``datetime`` -> timestamp of any unit and time zone (the
    store keeps nanoseconds; the writer gives whole microseconds, and refuses a timestamp[ns] with a
    part of one) and date32, date64; ``bytes`` -> binary, large_binary. Lists, structs, maps,
    decimals, json and ip: False (those columns stay in another row copy).

    ``f64`` -> float64 is exact because the native writer hands Tantivy the Arrow values themselves
    (a float32 widened, which narrows back to itself).

    Example: ``decodable("datetime", pa.timestamp("us", "UTC"))`` is True, ``decodable("ip",
    pa.string())`` False.
    """
    return _readable(tantivy_type, arrow_type)


def _readable(tantivy_type: str, arrow_type: pa.DataType) -> bool:
    """Whether ``decode_blocks`` reads stored values of this Tantivy type as this Arrow type."""
    t = arrow_type
    checks = {
        "text": lambda: pa.types.is_string(t) or pa.types.is_large_string(t),
        "i64": lambda: pa.types.is_signed_integer(t),
        "u64": lambda: pa.types.is_unsigned_integer(t),
        "f64": lambda: pa.types.is_float32(t) or pa.types.is_float64(t),
        "bool": lambda: pa.types.is_boolean(t),
        "datetime": lambda: pa.types.is_timestamp(t) or pa.types.is_date32(t) or pa.types.is_date64(t),
        "bytes": lambda: pa.types.is_binary(t) or pa.types.is_large_binary(t),
    }
    check = checks.get(tantivy_type)
    return bool(check is not None and check())


def decode_blocks(
    blocks: Sequence[bytes | memoryview],
    columns: Sequence[StoredColumn],
    source: str,
    version: int = DOC_STORE_VERSION,
) -> pa.Table:
    """Every document of the decompressed blocks, in order, as a table of ``columns``.

    A document without a value for a field (or with a stored null) gives null.

    Args:
        blocks: decompressed doc store blocks, in doc id order.
        columns: the fields to decode (types as ``decodable`` lists, and f64 as float64); other
            stored fields are skipped.
        source: names the store in error messages (e.g. the split and member).
        version: the doc store's version (its footer's), 2 as Tantivy writes it now.

    Raises:
        CorruptSplitError: naming ``source``: a block does not parse, a value has a type other than
            its column's, a field holds more than one value in a document, a value does not fit
            its column's type.
        SplitSchemaError: a column's types are not readable (see ``columns``) or two columns name one field.

    Example: ``decode_blocks([lz4.block.decompress(b) for b in raw], [StoredColumn(0, "id", "i64",
    pa.int64())], "s.split:x.store").column("id")``
    """
    lut = _field_lookup(tuple(columns))
    data, starts, ends = _concat_blocks(blocks, source)
    return _decode(data, starts, ends, columns, lut, source, version)


def decode_docs(
    block: bytes | memoryview,
    docs: np.ndarray,
    columns: Sequence[StoredColumn],
    source: str,
    version: int = DOC_STORE_VERSION,
) -> pa.Table:
    """The documents at positions ``docs`` of one decompressed block, in that order, as ``decode_blocks`` gives them.

    Args:
        block: one decompressed doc store block.
        docs: positions of documents in the block (any order, repeats allowed).
        columns, source, version: as for ``decode_blocks``.

    Raises:
        CorruptSplitError: as ``decode_blocks``, or a position is not a document of the block.
        SplitSchemaError: as ``decode_blocks``.

    Example: ``decode_docs(block, np.array([7, 2, 7]), columns, "s.split:x.store").num_rows == 3``
    """
    lut = _field_lookup(tuple(columns))
    data, starts, ends = _concat_blocks([block], source)
    wanted = np.asarray(docs, dtype=np.int64).reshape(-1)
    if wanted.size and (wanted.min() < 0 or wanted.max() >= len(starts)):
        raise CorruptSplitError(f"{source}: the block has {len(starts)} documents, not documents {wanted.tolist()}")
    return _decode(data, starts[wanted], ends[wanted], columns, lut, source, version)


# --- blocks -----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _field_lookup(columns: tuple[StoredColumn, ...]) -> np.ndarray:
    """Column index by field id (-1: not wanted); its last entry is -1, for every larger id."""
    for c in columns:
        if not _readable(c.tantivy_type, c.arrow_type):
            raise SplitSchemaError(f"stored field {c.name!r}: {c.tantivy_type} values cannot be read as {c.arrow_type}")
        if not 0 <= c.field_id < _MAX_FIELD_ID:
            raise SplitSchemaError(f"stored field {c.name!r}: field id {c.field_id} out of range")
    ids = [c.field_id for c in columns]
    if len(set(ids)) != len(ids):
        raise SplitSchemaError(f"stored fields {[c.name for c in columns]}: a field id is named twice ({ids})")
    lut = np.full(max(ids, default=-1) + 2, -1, np.int64)
    lut[ids] = np.arange(len(ids), dtype=np.int64)
    return lut


def _concat_blocks(blocks: Sequence[bytes | memoryview], source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All blocks' bytes in one padded array, and each document's start and end in it."""
    if len(blocks) == 1:
        return _one_block(blocks[0], source)
    sizes = np.array([len(b) for b in blocks], dtype=np.int64)
    counts = np.array([int.from_bytes(b[-4:], "little") if len(b) >= 4 else -1 for b in blocks], dtype=np.int64)
    index_starts = sizes - 4 - 4 * counts
    broken = np.flatnonzero((counts < 0) | (index_starts < 0))
    if broken.size:
        k = int(broken[0])
        raise CorruptSplitError(
            f"{source}: doc store block {k} does not parse ({sizes[k]} bytes, a trailer of {counts[k]} documents)"
        )
    data = np.frombuffer(b"".join([*blocks, bytes(_PAD)]), dtype=np.uint8)
    bases = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    block_of_doc = np.repeat(np.arange(len(blocks)), counts)
    first_doc = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    index_pos = (
        bases[block_of_doc] + index_starts[block_of_doc] + 4 * (np.arange(first_doc[-1]) - first_doc[block_of_doc])
    )
    offsets = u32_view(data)[index_pos].astype(np.int64)
    block_end = index_starts[block_of_doc]
    ends = np.empty_like(offsets)
    ends[:-1] = offsets[1:]
    last = first_doc[1:][counts > 0] - 1  # each nonempty block's last document
    ends[last] = index_starts[counts > 0]
    bad = (offsets > ends) | (ends > block_end)
    if bad.any():
        k = int(block_of_doc[np.argmax(bad)])
        raise CorruptSplitError(f"{source}: doc store block {k} does not parse (its document offsets are out of order)")
    base = bases[block_of_doc]
    return data, offsets + base, ends + base


def _one_block(block: bytes | memoryview, source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_concat_blocks`` of one block."""
    count = int.from_bytes(block[-4:], "little") if len(block) >= 4 else -1
    index_start = len(block) - 4 - 4 * count
    if count < 0 or index_start < 0:
        raise CorruptSplitError(
            f"{source}: doc store block 0 does not parse ({len(block)} bytes, a trailer of {count} documents)"
        )
    data = np.frombuffer(b"".join([block, bytes(_PAD)]), dtype=np.uint8)
    starts = data[index_start : index_start + 4 * count].view("<u4").astype(np.int64)
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1:] = index_start
    if (starts > ends).any():
        raise CorruptSplitError(f"{source}: doc store block 0 does not parse (its document offsets are out of order)")
    return data, starts, ends


def _read_vints(u64: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The VInts at ``pos`` (at most 8 bytes each): values, positions after them, and which have no end."""
    word = u64[pos]
    if ((word & np.uint64(0x80)) != 0).all():  # all one byte: the common case
        return (word & np.uint64(0x7F)).astype(np.int64), pos + 1, np.zeros(len(pos), dtype=bool)
    stops = word & _STOP_BITS
    lowest = stops & (~stops + np.uint64(1))
    nbytes = np.frexp(lowest.astype(np.float64))[1] // 8  # lowest = 2^(8k+7) = 0.5 * 2^(8k+8): k+1 bytes
    word &= (lowest << np.uint64(1)) - np.uint64(1)
    value = np.zeros(len(pos), dtype=np.uint64)
    for i in range(8):
        value |= (word >> np.uint64(i)) & np.uint64(0x7F << (7 * i))
    return value.astype(np.int64), pos + nbytes, stops == 0


# --- the values of every document ---------------------------------------------------------------------


# One step's values: positions after them, wanted column (-1: none), type code, payload start and
# length; column, code and length are numbers when every document's value has the same.
_Step = tuple[np.ndarray, np.ndarray | int, np.ndarray | int, np.ndarray, np.ndarray | int]


@dataclass(frozen=True)
class _Found:
    """Where each wanted field's value is in each document: ``start[c, d]`` is the payload position
    of column ``c``'s value in document ``d`` (-1: none, -2: a stored null), ``length[c, d]`` its
    length in bytes."""

    start: np.ndarray
    length: np.ndarray


def _corrupt(source: str, what: str, docs: np.ndarray, mask: np.ndarray) -> CorruptSplitError:
    k = int(np.argmax(mask))
    return CorruptSplitError(f"{source}: stored document {int(docs[k])} (of those decoded) does not parse: {what}")


def _scan(
    data: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    lut: np.ndarray,
    columns: Sequence[StoredColumn],
    source: str,
) -> _Found:
    """Walk all documents at once, one value per step, noting where the wanted fields' payloads are."""
    n = len(starts)
    found = _Found(np.full((len(columns), n), -1, np.int64), np.zeros((len(columns), n), np.int64))
    expected = np.array([_TYPE_CODES[c.tantivy_type] for c in columns], dtype=np.uint8)
    u64 = u64_view(data)
    doc = np.arange(n, dtype=np.int64)
    fields, pos, no_end = _read_vints(u64, starts)
    if (no_end | (pos > ends)).any():
        raise _corrupt(source, "its value count does not parse", doc, no_end | (pos > ends))
    end = ends
    nested = np.zeros(n, dtype=np.int64)
    while True:
        done = (fields == 0) & (nested == 0)
        if done.any():
            short = done & (pos != end)
            if short.any():
                raise _corrupt(source, "bytes left after its last value", doc, short)
            keep = ~done
            doc, pos, end, fields, nested = doc[keep], pos[keep], end[keep], fields[keep], nested[keep]
        if not doc.size:
            return found
        pos, column, code, start, length = _step(u64, doc, pos, fields, nested, lut, source)
        if (pos > end).any():
            raise _corrupt(source, "a value runs past its end", doc, pos > end)
        _note(found, doc, column, code, start, length, expected, columns, source)


def _step(
    u64: np.ndarray,
    doc: np.ndarray,
    pos: np.ndarray,
    fields: np.ndarray,
    nested: np.ndarray,
    lut: np.ndarray,
    source: str,
) -> _Step:
    """Read one value of each document (a field's, or a nested one's); ``fields`` and ``nested`` are updated
    in place. Returns the positions after the values, the wanted column (-1 if not), type codes,
    payload starts and lengths.

    One 8-byte read per document: a field's u32 id, its type code and the first byte of a length
    (a nested value's code and length byte, shifted to the same place)."""
    word = u64[pos]
    in_nested = nested > 0
    if not in_nested.any():
        key = word & _FIELD_AND_CODE
        if (key == key[0]).all():
            return _uniform_step(u64, word, int(key[0]), doc, pos, fields, nested, lut, source)
    if in_nested.any():
        top = ~in_nested
        word = np.where(top, word, word << np.uint64(32))
        column = np.where(top, lut.take(np.minimum(word.view(np.uint32)[0::2], len(lut) - 1)), -1)
        start = pos + 4 * top + 1
        fields -= top
        nested -= in_nested
    else:
        column = lut.take(np.minimum(word.view(np.uint32)[0::2], len(lut) - 1))
        start = pos + 5
        fields -= 1
    code = word.view(np.uint8)[4::8]
    kind = _KIND.take(code)
    if (kind == _UNSUPPORTED).any():
        bad = kind == _UNSUPPORTED
        got = int(code[np.argmax(bad)])
        raise _corrupt(source, f"a value of type {_CODE_NAMES.get(got, f'unknown type code {got}')}", doc, bad)
    length = _SIZE.take(code)
    counted = np.flatnonzero(kind)
    if counted.size:
        value, after = _counts(u64, word.view(np.uint8)[5::8], counted, start, doc, source)
        start[counted] = after
        sized = kind[counted] == _SIZED
        length[counted[sized]] = value[sized]
        nested[counted[~sized]] += value[~sized]
    return start + length, column, code, start, length


def _uniform_step(
    u64: np.ndarray,
    word: np.ndarray,
    key: int,
    doc: np.ndarray,
    pos: np.ndarray,
    fields: np.ndarray,
    nested: np.ndarray,
    lut: np.ndarray,
    source: str,
) -> _Step:
    """``_step`` where every document's next value is a field's and of one field and type (``key``:
    the field id and, above it, the type code): the column, code and a fixed length are numbers."""
    field, code = key & 0xFFFF_FFFF, key >> 32
    kind = int(_KIND[code])
    if kind == _UNSUPPORTED:
        raise _corrupt(source, f"a value of type {_CODE_NAMES.get(code, f'unknown type code {code}')}", doc, pos >= 0)
    fields -= 1
    column = int(lut[min(field, len(lut) - 1)])
    if kind == _FIXED:
        start = pos + 5
        return start + int(_SIZE[code]), column, code, start, int(_SIZE[code])
    head = word.view(np.uint8)[5::8]
    if (head >= 0x80).all():
        value, start = (head & 0x7F).astype(np.int64), pos + 6
    else:
        value, start, no_end = _read_vints(u64, pos + 5)
        if no_end.any():
            raise _corrupt(source, "a length does not parse", doc, no_end)
    if kind == _SIZED:
        return start + value, column, code, start, value
    nested += value
    return start, column, code, start, 0


def _counts(
    u64: np.ndarray, first: np.ndarray, counted: np.ndarray, start: np.ndarray, doc: np.ndarray, source: str
) -> tuple[np.ndarray, np.ndarray]:
    """The VInts at ``start[counted]`` (lengths, nested counts), whose first bytes are ``first[counted]``,
    and the positions after them."""
    head = first[counted]
    value = (head & 0x7F).astype(np.int64)
    after = start[counted] + 1
    longer = np.flatnonzero(head < 0x80)
    if longer.size:
        value[longer], after[longer], no_end = _read_vints(u64, after[longer] - 1)
        if no_end.any():
            raise _corrupt(source, "a length does not parse", doc[counted[longer]], no_end)
    return value, after


def _note(
    found: _Found,
    doc: np.ndarray,
    column: np.ndarray | int,
    code: np.ndarray | int,
    start: np.ndarray,
    length: np.ndarray | int,
    expected: np.ndarray,
    columns: Sequence[StoredColumn],
    source: str,
) -> None:
    """Note the wanted values of one step in ``found``; CorruptSplitError if one has another type than
    its column's or is a field's second value in its document."""
    if isinstance(column, int):
        _note_one(found, doc, column, code, start, length, expected, columns, source)
        return
    assert not isinstance(code, int) and not isinstance(length, int)
    wanted = column >= 0
    if not wanted.all():
        if not wanted.any():
            return
        doc, column, code, start, length = doc[wanted], column[wanted], code[wanted], start[wanted], length[wanted]
    wrong = code != expected.take(column)
    if wrong.any():
        null = code == NULL_CODE
        if (wrong & ~null).any():
            k = int(np.argmax(wrong & ~null))
            c, got = columns[column[k]], int(code[k])
            raise CorruptSplitError(
                f"{source}: stored field {c.name!r} (field {c.field_id}) of document {int(doc[k])} (of those "
                f"decoded) holds a value of type {_CODE_NAMES.get(got, got)}, not {c.tantivy_type}"
            )
        start = np.where(null, -2, start)
    n = found.start.shape[1]
    if doc.size == n and (column == column[0]).all():  # every document, one field: rows, not a scatter
        if (found.start[column[0]] != -1).any():
            _twice(found.start[column[0]] != -1, np.arange(n), column, columns, source)
        found.start[column[0]] = start
        found.length[column[0]] = length
        return
    at = column.astype(np.int64) * n + doc
    starts = found.start.reshape(-1)
    again = starts[at] != -1
    if again.any():
        _twice(again, doc, column, columns, source)
    starts[at] = start
    found.length.reshape(-1)[at] = length


def _note_one(
    found: _Found,
    doc: np.ndarray,
    column: int,
    code: np.ndarray | int,
    start: np.ndarray,
    length: np.ndarray | int,
    expected: np.ndarray,
    columns: Sequence[StoredColumn],
    source: str,
) -> None:
    """``_note`` of a step whose values are all of one field, ``column`` (-1: not wanted)."""
    if column < 0:
        return
    c = columns[column]
    if code != expected[column]:
        if code != NULL_CODE:
            raise CorruptSplitError(
                f"{source}: stored field {c.name!r} (field {c.field_id}) of document {int(doc[0])} (of those "
                f"decoded) holds a value of type {_CODE_NAMES.get(int(code), code)}, not {c.tantivy_type}"
            )
        start = np.full(len(start), -2, np.int64)
    row, lengths = found.start[column], found.length[column]
    if doc.size == row.size:  # every document: the whole row
        if (row != -1).any():
            _twice(row != -1, doc, np.full(doc.size, column), columns, source)
        row[:] = start
        lengths[:] = length
        return
    if (row[doc] != -1).any():
        _twice(row[doc] != -1, doc, np.full(doc.size, column), columns, source)
    row[doc] = start
    lengths[doc] = length


def _twice(
    again: np.ndarray, doc: np.ndarray, column: np.ndarray, columns: Sequence[StoredColumn], source: str
) -> None:
    k = int(np.argmax(again))
    c = columns[column[k]]
    raise CorruptSplitError(
        f"{source}: stored field {c.name!r} (field {c.field_id}) holds more than one value in document "
        f"{int(doc[k])} (of those decoded)"
    )


# --- columns --------------------------------------------------------------------------------------------


def _decode(
    data: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    columns: Sequence[StoredColumn],
    lut: np.ndarray,
    source: str,
    version: int,
) -> pa.Table:
    if version not in (1, 2):
        raise CorruptSplitError(f"{source}: doc store version {version} (this reader knows 1 and 2)")
    found = _scan(data, starts, ends, lut, columns, source)
    arrays = [
        stored_column(
            data,
            starts,
            c.tantivy_type,
            c.arrow_type,
            found.start[i],
            found.length[i],
            f"{source}: stored field {c.name!r}",
            version,
        )
        for i, c in enumerate(columns)
    ]
    if not arrays:
        return _no_columns(len(starts))
    return pa.Table.from_arrays(arrays, names=[c.name for c in columns])


def _no_columns(rows: int) -> pa.Table:
    """A table of ``rows`` rows and no columns."""
    return pa.table({"_": pa.nulls(rows)}).drop_columns(["_"])
