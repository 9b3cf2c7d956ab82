"""Tantivy's per-file framing, byte for byte: the file footer every index file ends with, and the
composite file (one slice per field) that ``.term``, ``.idx``, ``.pos`` and ``.fieldnorm`` are.
No tantivy here.

Both as Tantivy writes them (``src/directory/footer.rs``, ``src/directory/composite_file.rs`` of
the fork IndexTables4Spark reads with, GitHub ``indextables/tantivy``), little-endian::

    file      = [body][footer JSON {"version": {...}, "crc": crc32(body)}][u32 JSON length][u32 1337]
    composite = [slice 1][slice 2]...[slice n][VInt n][(VInt offset delta, u32 field, VInt idx) x n]
                [u32 length of the VInt n ... part]

Tantivy's ``VInt`` (``common/src/vint.rs``) is 7 bits a byte, low bits first, with the high bit
set on the *last* byte (the opposite of LEB128). A composite slice runs from its offset to the next
one's (the last to the start of the composite footer).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from indextables_contract.errors import CorruptSplitError

FOOTER_MAGIC = 1337
_FOOTER_MAX_LEN = 50_000
_U32 = struct.Struct("<I")


def encode_vint(value: int, out: bytearray) -> None:
    """Append ``value`` as a Tantivy ``VInt`` (stop bit on the last byte) to ``out``."""
    while value >= 128:
        out.append(value & 127)
        value >>= 7
    out.append(value | 128)


def decode_vint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The Tantivy ``VInt`` at ``data[pos:]`` and the position after it.

    Raises:
        IndexError: ``data`` ends inside the number.
    """
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 127) << shift
        if b >= 128:
            return result, pos
        shift += 7


@dataclass(frozen=True)
class TantivyFile:
    """An index file split into its body and its footer's version (the footer's JSON ``version``)."""

    body: bytes
    version: dict[str, Any]
    crc: int

    def crc_matches(self) -> bool:
        """Whether the footer's CRC32 is the body's."""
        return zlib.crc32(self.body) == self.crc


def split_footer(data: bytes, source: str) -> TantivyFile:
    """Split a Tantivy index file into body and footer.

    Raises:
        CorruptSplitError: no Tantivy footer (bad magic, length out of range, JSON that does not
            parse); the message names ``source``.
    """
    if len(data) < 8:
        raise CorruptSplitError(f"{source}: {len(data)} bytes, too short for a Tantivy file footer")
    length, magic = struct.unpack_from("<II", data, len(data) - 8)
    if magic != FOOTER_MAGIC or length > _FOOTER_MAX_LEN or length + 8 > len(data):
        raise CorruptSplitError(f"{source}: no Tantivy file footer (magic {magic}, length {length})")
    raw = data[len(data) - 8 - length : len(data) - 8]
    try:
        footer = json.loads(bytes(raw))  # (a memoryview of a mapped file too)
        version, crc = footer["version"], int(footer["crc"])
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptSplitError(f"{source}: Tantivy file footer does not parse ({e})") from e
    if not isinstance(version, dict):
        raise CorruptSplitError(f"{source}: Tantivy file footer's version is not an object")
    return TantivyFile(data[: len(data) - 8 - length], version, crc)


def with_footer(body: bytes, version: dict[str, Any]) -> bytes:
    """``body`` with a Tantivy footer: ``version`` (as Tantivy's serde writes it: compact JSON, keys
    in the given order) and the body's CRC32 (crc32fast = zlib's CRC-32)."""
    return body + file_footer(version, zlib.crc32(body))


def file_footer(version: Mapping[str, object], crc: int) -> bytes:
    """The footer every Tantivy index file ends with: JSON ``{"version": ..., "crc": crc}`` (as
    Tantivy's serde writes it: compact, keys in order), its u32 length, u32 magic 1337.

    Example:
        >>> file_footer({"major": 0}, 7)[-4:] == FOOTER_MAGIC.to_bytes(4, "little")
        True
    """
    footer = json.dumps({"version": version, "crc": crc}, separators=(",", ":")).encode()
    return footer + _U32.pack(len(footer)) + _U32.pack(FOOTER_MAGIC)


def footer_version(tail: bytes, what: str, source: str) -> dict[str, object]:
    """The Tantivy version in the Tantivy footer that ``tail`` (a file's last bytes) ends with.

    Raises:
        CorruptSplitError: ``tail`` does not end with a Tantivy footer (names ``what`` and ``source``).
    """
    try:
        json_len, magic = struct.unpack_from("<II", tail, len(tail) - 8)
        if magic != FOOTER_MAGIC or json_len + 8 > len(tail):
            raise ValueError(f"magic {magic}, footer length {json_len}")
        version = json.loads(tail[len(tail) - 8 - json_len : len(tail) - 8])["version"]
        if not isinstance(version, dict):
            raise ValueError(f"version {version!r}")
        return version
    except (ValueError, KeyError, TypeError, struct.error) as e:
        raise CorruptSplitError(f"{source}: the {what}'s Tantivy footer does not parse ({e})") from e


def composite_addresses(footer: bytes | memoryview) -> list[tuple[int, int]]:
    """(field id, start offset) of each slice of a composite file, from its footer (the bytes
    between the slices and the footer's u32 length): a VInt count, then per slice a VInt offset
    delta, a u32 field and a VInt index.

    Raises:
        ValueError: the footer does not parse or lists slices out of order.

    Example:
        >>> composite_addresses(bytes([0x81, 0x80]) + (3).to_bytes(4, "little") + bytes([0x80]))
        [(3, 0)]
    """
    out: list[tuple[int, int]] = []
    offset = 0
    try:
        count, pos = decode_vint(footer, 0)
        for _ in range(count):
            delta, pos = decode_vint(footer, pos)
            offset += delta
            (field,) = _U32.unpack_from(footer, pos)
            _, pos = decode_vint(footer, pos + 4)
            out.append((field, offset))
    except (IndexError, struct.error) as e:
        raise ValueError("composite footer does not parse") from e
    if [start for _, start in out] != sorted(start for _, start in out):
        raise ValueError("composite footer lists sections out of order")
    return out


@dataclass(frozen=True)
class CompositeSlice:
    """One slice of a composite file: field id, index (0 for every file here but ``.idx``'s
    per-field parts, which are also 0 in this Tantivy), and its bytes."""

    field: int
    idx: int
    data: bytes


def parse_composite(body: bytes, source: str) -> list[CompositeSlice]:
    """The slices of a composite file body (a Tantivy file without its footer), in file order.

    Raises:
        CorruptSplitError: the composite footer does not parse or lists offsets out of order or
            past its start; the message names ``source``.
    """
    try:
        if len(body) < 4:
            raise ValueError("shorter than the composite footer length")
        (footer_len,) = _U32.unpack_from(body, len(body) - 4)
        footer_start = len(body) - 4 - footer_len
        if footer_start < 0:
            raise ValueError(f"composite footer of {footer_len} bytes does not fit")
        footer = memoryview(body)[footer_start : len(body) - 4]
        count, pos = decode_vint(footer, 0)
        addrs: list[tuple[int, int, int]] = []
        offset = 0
        for _ in range(count):
            delta, pos = decode_vint(footer, pos)
            offset += delta
            (field,) = _U32.unpack_from(footer, pos)
            idx, pos = decode_vint(footer, pos + 4)
            addrs.append((field, idx, offset))
        if pos != len(footer):
            raise ValueError(f"{len(footer) - pos} bytes after the composite footer's entries")
    except (ValueError, IndexError, struct.error) as e:
        raise CorruptSplitError(f"{source}: composite file footer does not parse ({e})") from e
    ends = [a[2] for a in addrs[1:]] + ([footer_start] if addrs else [])
    out = []
    for (field, idx, start), end in zip(addrs, ends, strict=True):
        if not 0 <= start <= end <= footer_start:
            raise CorruptSplitError(f"{source}: composite slice of field {field} at {start}..{end} is out of order")
        out.append(CompositeSlice(field, idx, body[start:end]))
    return out


def encode_composite(slices: Sequence[CompositeSlice]) -> bytes:
    """A composite file body (no Tantivy footer) holding ``slices`` in the given order."""
    out = bytearray()
    offsets = []
    for piece in slices:
        offsets.append(len(out))
        out += piece.data
    footer = bytearray()
    encode_vint(len(slices), footer)
    previous = 0
    for piece, offset in zip(slices, offsets, strict=True):
        encode_vint(offset - previous, footer)
        footer += _U32.pack(piece.field)
        encode_vint(piece.idx, footer)
        previous = offset
    return bytes(out + footer + _U32.pack(len(footer)))
