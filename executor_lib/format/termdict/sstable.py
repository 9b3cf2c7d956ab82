"""The SSTable term dictionary of the Tantivy fork IndexTables4Spark reads with: a reader and a
writer, byte for byte as the fork writes them. No tantivy here.

That Tantivy (GitHub ``indextables/tantivy``, built with its ``quickwit`` feature) stores each
field's terms in an SSTable (``src/termdict/sstable_termdict/``, crate ``sstable/``) and refuses
the FST dictionaries the ``tantivy`` Python package writes. A segment's ``.term`` file is a
composite file (``composite_file.py``) with one slice per indexed field; a slice, little-endian::

    [block]...[block][u32 0]                                   the terms, then an empty block
    [index][u64 index length]                                  see below
    [u64 index_offset][u64 num_terms][u32 SSTable version = 3]
    [u32 dictionary type = 2 (SSTable; 1 is FST)]

    block  = [u32 len + 1][u8 compressed][payload]             payload zstd level 3 when compressed
    payload = [values][delta]...                               one delta per term of the block
    values = [VInt n][VInt first postings start][VInt first positions start]
             [VInt doc_freq][VInt postings bytes][VInt positions bytes] x n
    delta  = [u8 keep | add << 4][suffix]        when keep < 16 and add < 16
           = [u8 1][LEB128 keep][LEB128 add][suffix]   otherwise
             (the key is the previous key of the block cut to ``keep`` bytes plus ``add`` bytes)

``VInt`` is Tantivy's (stop bit on the last byte); keep/add use the sstable crate's own LEB128.
A term's postings and positions start where the previous term's of the block end, so a block
lists only lengths. The writer starts a block after the one whose keys pass ``BLOCK_LEN`` bytes,
and compresses a payload of more than 2048 bytes when zstd makes it smaller (the fork is built
with ``zstd-compression``; its payloads here are zstd level-3 frames, as ``backports.zstd`` makes
them with libzstd 1.5.x: checked byte for byte on the 0.5.4 fixtures).

The index of a dictionary with one block is empty (``index length`` 0: readers take the single
block from 0 to ``index_offset``). With more blocks it is ``[FST: last key of each block,
shortened, -> block number][block address store]`` and ``index length`` is the FST's length; the
store (``sstable_index_v3.rs``: ``BlockAddrStoreWriter``) keeps each block's byte range and first
term ordinal, 128 blocks a group, bit-packed against a linear prediction.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from executor_lib.format._zstd import zstd
from executor_lib.format.directory import (
    CompositeSlice,
    decode_vint,
    encode_composite,
    parse_composite,
    split_footer,
    with_footer,
)
from indextables_contract.errors import CorruptSplitError

DICT_TYPE_FST = 1
DICT_TYPE_SSTABLE = 2
SSTABLE_VERSION = 3
BLOCK_LEN = 4000  # sstable/src/delta.rs: a block is flushed once its deltas pass this many bytes
COMPRESS_ABOVE = 2048  # payloads longer than this are zstd-compressed (when that makes them smaller)
ZSTD_LEVEL = 3
STORE_BLOCK_LEN = 128  # sstable_index_v3.rs: block addresses per group of the block address store
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_META = struct.Struct("<QQQIIBBH")  # BlockAddrBlockMetadata: 36 bytes


class TermInfo(NamedTuple):
    """Where a term's postings and positions are (byte ranges of ``.idx`` and ``.pos`` within the
    field's slice) and how many documents hold it (Tantivy's ``TermInfo``)."""

    doc_freq: int
    postings_start: int
    postings_end: int
    positions_start: int
    positions_end: int


@dataclass(frozen=True)
class BlockAddr:
    """A block of an SSTable: its byte range in the slice and the ordinal of its first term."""

    first_ordinal: int
    start: int
    end: int


@dataclass(frozen=True)
class TermDictionary:
    """One field's terms, sorted, with their ``TermInfo``s."""

    terms: list[bytes]
    infos: list[TermInfo]


@dataclass(frozen=True)
class ParsedSSTable:
    """A field's SSTable as read: the dictionary, its blocks (as laid out) and the block index
    (``None`` for a single block, else each block's shortened last key and address)."""

    dictionary: TermDictionary
    blocks: list[BlockAddr]
    index: list[tuple[bytes, BlockAddr]] | None


# --- reading ---------------------------------------------------------------------------------------


def _leb128(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 127) << shift
        if b < 128:
            return result, pos
        shift += 7


def _read_block(payload: bytes, terms: list[bytes], infos: list[TermInfo], previous: bytes) -> bytes:
    count, pos = decode_vint(payload, 0)
    if count == 0:
        return previous
    postings, pos = decode_vint(payload, pos)
    positions, pos = decode_vint(payload, pos)
    for _ in range(count):
        doc_freq, pos = decode_vint(payload, pos)
        postings_len, pos = decode_vint(payload, pos)
        positions_len, pos = decode_vint(payload, pos)
        infos.append(TermInfo(doc_freq, postings, postings + postings_len, positions, positions + positions_len))
        postings += postings_len
        positions += positions_len
    key = previous
    for _ in range(count):
        b = payload[pos]
        if b == 1:
            keep, pos = _leb128(payload, pos + 1)
            add, pos = _leb128(payload, pos)
        else:
            keep, add = b & 15, b >> 4
            pos += 1
        if keep > len(key) or pos + add > len(payload):
            raise ValueError(f"a delta keeps {keep} of {len(key)} bytes, adds {add}")
        key = key[:keep] + payload[pos : pos + add]
        pos += add
        terms.append(key)
    if pos != len(payload):
        raise ValueError(f"{len(payload) - pos} bytes after a block's last term")
    return key


def sstable_frame(data: bytes, source: str = "term dictionary") -> tuple[memoryview, int, int]:
    """One field's SSTable dictionary checked from its end: its bytes without the dictionary type,
    where its index starts (the blocks end) and how many terms it holds.

    Raises:
        CorruptSplitError: not an SSTable dictionary (an FST one says so), an SSTable version other
            than 3, or an index offset out of range; the message names ``source``.
    """
    if len(data) < 24:
        raise CorruptSplitError(f"{source}: {len(data)} bytes, too short for a term dictionary")
    (dict_type,) = _U32.unpack_from(data, len(data) - 4)
    if dict_type != DICT_TYPE_SSTABLE:
        kind = {DICT_TYPE_FST: "an FST"}.get(dict_type, f"type {dict_type}")
        raise CorruptSplitError(f"{source}: {kind} term dictionary, not an SSTable")
    main = memoryview(data)[:-4]
    index_offset, num_terms, version = struct.unpack_from("<QQI", main, len(main) - 20)
    if version != SSTABLE_VERSION:
        raise CorruptSplitError(f"{source}: SSTable version {version}, only {SSTABLE_VERSION} is read")
    if not 4 <= index_offset <= len(main) - 28:
        raise CorruptSplitError(f"{source}: SSTable index offset {index_offset} out of range")
    return main, int(index_offset), int(num_terms)


def parse_sstable(data: bytes, source: str = "term dictionary") -> ParsedSSTable:
    """Read one field's SSTable term dictionary (a ``.term`` composite slice, dictionary type
    included).

    Raises:
        CorruptSplitError: not an SSTable dictionary (an FST one says so), an SSTable version other
            than 3, or bytes that do not parse; the message names ``source``.
    """
    view, index_offset, num_terms = sstable_frame(data, source)
    main = bytes(view)
    terms: list[bytes] = []
    infos: list[TermInfo] = []
    blocks: list[BlockAddr] = []
    pos = 0
    key = b""
    try:
        while True:
            (length,) = _U32.unpack_from(main, pos)
            if length <= 1:
                pos += 4
                break
            start = pos
            payload = main[pos + 5 : pos + 4 + length]
            if len(payload) != length - 1:
                raise ValueError("a block runs past the data")
            if main[pos + 4] == 1:
                payload = zstd.decompress(payload)
            elif main[pos + 4] != 0:
                raise ValueError(f"block compression flag {main[pos + 4]}")
            first = len(terms)
            key = _read_block(payload, terms, infos, key)
            pos += 4 + length
            blocks.append(BlockAddr(first, start, pos))
        if pos != index_offset:
            raise ValueError(f"the blocks end at {pos}, the index starts at {index_offset}")
        index = _parse_index(main[index_offset : len(main) - 20])
    except (ValueError, IndexError, struct.error, zstd.ZstdError) as e:
        raise CorruptSplitError(f"{source}: SSTable term dictionary does not parse ({e})") from e
    if len(terms) != num_terms:
        raise CorruptSplitError(f"{source}: SSTable footer says {num_terms} terms, its blocks hold {len(terms)}")
    return ParsedSSTable(TermDictionary(terms, infos), blocks, index)


def _parse_index(index: bytes) -> list[tuple[bytes, BlockAddr]] | None:
    if len(index) < 8:
        raise ValueError("SSTable index shorter than its length")
    (fst_len,) = _U64.unpack_from(index, len(index) - 8)
    if fst_len == 0:
        if len(index) != 8:
            raise ValueError("an empty SSTable index with bytes")
        return None
    from executor_lib.format.termdict.fst import read_map  # the block index is an FST map

    keys = read_map(index[:fst_len])
    addrs = _read_block_addr_store(index[fst_len : len(index) - 8], len(keys))
    if [n for _, n in keys] != list(range(len(keys))):
        raise ValueError("the SSTable index's FST does not number the blocks in order")
    return [(k, a) for (k, _), a in zip(keys, addrs, strict=True)]


def _bits(data: bytes, addr: int, nbits: int) -> int:
    byte = addr >> 3
    window = int.from_bytes(data[byte : byte + 9].ljust(9, b"\0"), "little")
    return (window >> (addr & 7)) & ((1 << nbits) - 1)


def _read_block_addr_store(data: bytes, count: int) -> list[BlockAddr]:
    (meta_len,) = _U64.unpack_from(data, 0)
    metas = data[8 : 8 + meta_len]
    packed = data[8 + meta_len :]
    out: list[BlockAddr] = []
    for m in range(0, len(metas), _META.size):
        offset, ref_start, ref_ord, range_slope, ord_slope, ord_bits, range_bits, block_len = _META.unpack_from(
            metas, m
        )
        bits = packed[offset:]
        range_shift = 1 << (range_bits - 1)
        ord_shift = 1 << (ord_bits - 1)
        nbits = range_bits + ord_bits
        starts = [ref_start]
        ords = [ref_ord]
        for i in range(block_len):
            at = nbits * i
            starts.append(ref_start + _bits(bits, at, range_bits) + range_slope * (i + 1) - range_shift)
            ords.append(ref_ord + _bits(bits, at + range_bits, ord_bits) + ord_slope * (i + 1) - ord_shift)
        end = ref_start + _bits(bits, nbits * block_len, range_bits) + range_slope * (block_len + 1) - range_shift
        ends = [*starts[1:], end]
        out.extend(BlockAddr(o, s, e) for o, s, e in zip(ords, starts, ends, strict=True))
    if len(out) != count:
        raise ValueError(f"the block address store holds {len(out)} blocks, the FST {count}")
    return out


# --- writing ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TermColumns:
    """One field's terms as arrays, sorted: term ``i`` is ``data[offsets[i]:offsets[i + 1]]`` and
    ``infos[i]`` its ``TermInfo`` as ``(doc_freq, postings_start, postings_end, positions_start,
    positions_end)`` (int64). What the SSTable writer takes, and the FST reader gives, without a
    Python object per term."""

    offsets: np.ndarray
    data: np.ndarray
    infos: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @classmethod
    def from_terms(cls, terms: Sequence[bytes], infos: np.ndarray) -> TermColumns:
        """The columns of ``terms`` (bytes, in order) and their ``infos`` (an ``(n, 5)`` array).

        Raises:
            ValueError: as many infos as terms.
        """
        if len(terms) != len(infos):
            raise ValueError(f"{len(terms)} terms, {len(infos)} term infos")
        lengths = np.fromiter(map(len, terms), np.int64, len(terms))
        offsets = np.zeros(len(terms) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        data = np.frombuffer(b"".join(terms), np.uint8)
        return cls(offsets, data, np.asarray(infos, np.int64).reshape(len(terms), 5))

    @classmethod
    def from_dictionary(cls, dictionary: TermDictionary) -> TermColumns:
        """The columns of a ``TermDictionary``.

        Raises:
            ValueError: terms and infos of different lengths.
        """
        infos = np.array(dictionary.infos, np.int64).reshape(len(dictionary.infos), 5)
        return cls.from_terms(dictionary.terms, infos)

    def to_dictionary(self) -> TermDictionary:
        """The same terms as a ``TermDictionary`` (one Python object per term)."""
        blob = self.data.tobytes()
        bounds = self.offsets.tolist()
        terms = [blob[a:b] for a, b in itertools.pairwise(bounds)]
        return TermDictionary(terms, [TermInfo(*row) for row in self.infos.tolist()])

    def term(self, i: int) -> bytes:
        """Term ``i``'s bytes."""
        return self.data[self.offsets[i] : self.offsets[i + 1]].tobytes()


def _common_prefix(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


_PREFIX_WIDTH = 32  # bytes compared at once per term pair; longer shared prefixes finish in Python
_PREFIX_CHUNK = 1 << 15  # terms per comparison matrix or suffix copy (bounds their memory to a few MB)


def _shared_prefixes(terms: TermColumns) -> np.ndarray:
    """For each term, how many leading bytes it shares with the previous term (0 for the first)."""
    n = len(terms)
    shared = np.zeros(n, np.int64)
    if n < 2:
        return shared
    lengths = np.diff(terms.offsets)
    width = np.arange(_PREFIX_WIDTH)
    padded = np.concatenate([terms.data, np.zeros(_PREFIX_WIDTH, np.uint8)])
    for lo in range(1, n, _PREFIX_CHUNK):
        rows = np.arange(lo - 1, min(n, lo + _PREFIX_CHUNK))
        matrix = padded[terms.offsets[rows][:, None] + width]
        valid = width < lengths[rows][:, None]
        equal = (matrix[1:] == matrix[:-1]) & valid[1:] & valid[:-1]
        first_differing = np.argmin(equal, axis=1)
        shared[rows[1:]] = np.where(equal.all(axis=1), _PREFIX_WIDTH, first_differing)
    for i in np.nonzero(shared >= _PREFIX_WIDTH)[0].tolist():
        shared[i] = _common_prefix(terms.term(i - 1), terms.term(i))
    return shared


def _check_increasing(terms: TermColumns, shared: np.ndarray) -> None:
    """ValueError unless every term is greater than the one before it."""
    n = len(terms)
    if n < 2:
        return
    lengths = np.diff(terms.offsets)
    keep, previous_len, length = shared[1:], lengths[:-1], lengths[1:]
    padded = np.concatenate([terms.data, np.zeros(1, np.uint8)])
    here = padded[np.minimum(terms.offsets[1:-1] + keep, len(terms.data))]
    before = padded[np.minimum(terms.offsets[:-2] + keep, len(terms.data))]
    greater = (keep < length) & ((keep == previous_len) | (here > before))
    if not greater.all():
        at = int(np.argmin(greater)) + 1
        before, here = terms.term(at - 1), terms.term(at)
        raise ValueError(f"terms not strictly increasing at ordinal {at}: {before!r} then {here!r}")


def _leb_lengths(values: np.ndarray) -> np.ndarray:
    """Bytes of each value as a 7-bit-group number (LEB128 and Tantivy's VInt alike)."""
    lengths = np.ones(len(values), np.int64)
    rest = values >> 7
    while rest.any():
        lengths += rest > 0
        rest >>= 7
    return lengths


def _put_groups(out: np.ndarray, at: np.ndarray, values: np.ndarray, lengths: np.ndarray, vint: bool) -> None:
    """Write ``values`` as 7-bit groups, low first, at ``out[at:]``: LEB128 (continuation bit on
    every byte but the last) or, ``vint``, Tantivy's VInt (stop bit on the last byte only)."""
    for k in range(int(lengths.max(initial=0))):
        rows = lengths > k
        group = (values[rows] >> (7 * k)) & 127
        last = lengths[rows] == k + 1
        flag = last if vint else ~last
        out[at[rows] + k] = group | (flag.astype(np.int64) << 7)


def _header_lengths(keep: np.ndarray, add: np.ndarray) -> np.ndarray:
    short = (keep < 16) & (add < 16)
    return np.where(short, 1, 1 + _leb_lengths(keep) + _leb_lengths(add))


def _block_starts(terms: TermColumns, shared: np.ndarray, block_len: int) -> np.ndarray:
    """The first term of each block: a block ends with the term whose delta takes its deltas past
    ``block_len`` bytes, and a block's first term shares nothing (it is written whole)."""
    n = len(terms)
    lengths = np.diff(terms.offsets)
    sizes = _header_lengths(shared, lengths - shared) + lengths - shared
    first_sizes = _header_lengths(np.zeros(n, np.int64), lengths) + lengths
    ends = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=ends[1:])
    starts = []
    start = 0
    while start < n:
        starts.append(start)
        threshold = block_len - first_sizes[start] + ends[start + 1]
        start = max(int(np.searchsorted(ends, threshold, side="right")), start + 1)
    return np.array(starts, np.int64)


def _deltas(terms: TermColumns, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every term's delta (``[keep | add << 4]`` or ``[1][LEB keep][LEB add]``, then the suffix),
    concatenated, and where each term's delta starts (n + 1 bounds)."""
    lengths = np.diff(terms.offsets)
    add = lengths - keep
    header = _header_lengths(keep, add)
    bounds = np.zeros(len(terms) + 1, np.int64)
    np.cumsum(header + add, out=bounds[1:])
    out = np.empty(int(bounds[-1]), np.uint8)
    at = bounds[:-1]
    short = header == 1
    out[at[short]] = keep[short] | (add[short] << 4)
    long_ = ~short
    out[at[long_]] = 1
    keep_len = _leb_lengths(keep[long_])
    _put_groups(out, at[long_] + 1, keep[long_], keep_len, vint=False)
    _put_groups(out, at[long_] + 1 + keep_len, add[long_], _leb_lengths(add[long_]), vint=False)
    for lo in range(0, len(terms), _PREFIX_CHUNK):  # the suffixes, a chunk of terms at a time
        hi = min(len(terms), lo + _PREFIX_CHUNK)
        sizes = add[lo:hi]
        total = int(sizes.sum())
        if not total:
            continue
        within = np.arange(total) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        src = np.repeat(terms.offsets[lo:hi] + keep[lo:hi], sizes) + within
        dst = np.repeat(at[lo:hi] + header[lo:hi], sizes) + within
        out[dst] = terms.data[src]
    return out, bounds


def _values(terms: TermColumns, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each block's values (``[n][first postings start][first positions start]`` then
    ``[doc_freq][postings bytes][positions bytes]`` per term) as VInts, concatenated, and where
    each block's start (blocks + 1 bounds)."""
    infos = terms.infos
    per_term = np.stack([infos[:, 0], infos[:, 2] - infos[:, 1], infos[:, 4] - infos[:, 3]], axis=1).ravel()
    counts = np.diff(np.append(starts, len(terms)))
    heads = np.stack([counts, infos[starts, 1], infos[starts, 3]], axis=1)
    values = np.insert(per_term, np.repeat(3 * starts, 3), heads.ravel())
    lengths = _leb_lengths(values)
    at = np.zeros(len(values) + 1, np.int64)
    np.cumsum(lengths, out=at[1:])
    out = np.empty(int(at[-1]), np.uint8)
    _put_groups(out, at[:-1], values, lengths, vint=True)
    first_value = 3 * starts + 3 * np.arange(len(starts))
    return out, at[np.append(first_value, len(values))]


def _check_contiguous(terms: TermColumns, starts: np.ndarray) -> None:
    """ValueError unless, within each block, a term's postings and positions start where the
    previous term's end (an SSTable stores only their lengths)."""
    infos = terms.infos
    follows = (infos[1:, 1] == infos[:-1, 2]) & (infos[1:, 3] == infos[:-1, 4])
    follows[starts[1:] - 1] = True
    if not follows.all():
        at = int(np.argmin(follows)) + 1
        raise ValueError(f"term {at}'s postings or positions do not follow the previous term's")


def _block(values: bytes, deltas: bytes, compressor: Any) -> bytes:
    """One block, its payload compressed by ``compressor`` (a ``zstd.ZstdCompressor``, one frame per
    call: the bytes ``zstd.compress`` gives, without a new compression context per block)."""
    payload = values + deltas
    if len(payload) > COMPRESS_ABOVE:
        packed = compressor.compress(payload, zstd.ZstdCompressor.FLUSH_FRAME)
        if len(packed) < len(payload):
            return _U32.pack(len(packed) + 1) + b"\x01" + packed
    return _U32.pack(len(payload) + 1) + b"\x00" + payload


def encode_sstable(dictionary: TermDictionary, block_len: int = BLOCK_LEN) -> bytes:
    """One field's SSTable term dictionary, dictionary type included, as the fork's
    ``TermDictionaryBuilder`` writes it for these terms and ``TermInfo``s.

    Raises:
        ValueError: terms not strictly increasing, a term's postings or positions not starting where
            the previous term's end (the SSTable stores lengths only), or terms and infos of
            different lengths.
    """
    return encode_sstable_columns(TermColumns.from_dictionary(dictionary), block_len)


def encode_sstable_columns(terms: TermColumns, block_len: int = BLOCK_LEN) -> bytes:
    """``encode_sstable`` of terms held as columns, with array operations (no Python work per
    term; per block: its compression and index key).

    Example:
        >>> cols = TermColumns.from_terms([b"a", b"b"], np.array([[1, 0, 3, 0, 0], [2, 3, 5, 0, 0]]))
        >>> parse_sstable(encode_sstable_columns(cols)).dictionary.terms
        [b'a', b'b']

    Raises:
        ValueError: as ``encode_sstable``.
    """
    n = len(terms)
    shared = _shared_prefixes(terms)
    _check_increasing(terms, shared)
    starts = _block_starts(terms, shared, block_len) if n else np.zeros(0, np.int64)
    _check_contiguous(terms, starts)
    keep = shared.copy()
    keep[starts] = 0
    deltas, delta_at = _deltas(terms, keep)
    values, value_at = _values(terms, starts)
    value_bytes, delta_bytes = values.tobytes(), deltas.tobytes()
    bounds = np.append(starts, n).tolist()
    delta_bounds = delta_at[bounds].tolist()
    value_bounds = value_at.tolist()
    out = bytearray()
    index: list[tuple[bytes, BlockAddr]] = []
    compressor = zstd.ZstdCompressor(level=ZSTD_LEVEL)
    for b in range(len(starts)):
        start = len(out)
        out += _block(
            value_bytes[value_bounds[b] : value_bounds[b + 1]],
            delta_bytes[delta_bounds[b] : delta_bounds[b + 1]],
            compressor,
        )
        last = terms.term(bounds[b + 1] - 1)
        key = _shorten(last, terms.term(bounds[b + 1])) if b + 1 < len(starts) else last
        index.append((key, BlockAddr(bounds[b], start, len(out))))
    out += _U32.pack(0)
    index_offset = len(out)
    fst_len = 0
    if len(index) > 1:
        from executor_lib.format.termdict.fst import build_map

        fst_bytes = build_map([(k, i) for i, (k, _) in enumerate(index)])
        fst_len = len(fst_bytes)
        out += fst_bytes
        out += _block_addr_store([a for _, a in index])
    out += _U64.pack(fst_len) + _U64.pack(index_offset) + _U64.pack(n) + _U32.pack(SSTABLE_VERSION)
    out += _U32.pack(DICT_TYPE_SSTABLE)
    return bytes(out)


def _shorten(left: bytes, right: bytes) -> bytes:
    """``find_shorter_str_in_between``: a key >= ``left`` and < ``right``, shorter where it can."""
    common = _common_prefix(left, right)
    if len(left) == common:
        return left
    for pos in range(common + 1, len(left)):
        if left[pos] != 0xFF:
            return left[:pos] + bytes([left[pos] + 1])
    return left


def _num_bits(n: int) -> int:
    bits = n.bit_length()
    return bits if bits <= 56 else 64


def _best_slope(points: Sequence[tuple[int, int]]) -> tuple[int, int]:
    """``find_best_slope``: a slope through (index, value) points and the bits of the largest
    deviation from it, plus a sign bit."""
    min_idx = max_idx = 1
    min_val = max_val = 0
    min_slope, max_slope = 0xFFFFFFFF, 0
    for index, value in points:
        slope = (value // index) & 0xFFFFFFFF
        if slope <= min_slope:
            min_slope, min_idx, min_val = slope, index, value
        if slope >= max_slope:
            max_slope, max_idx, max_val = slope, index, value
    denominator = min_idx + max_idx
    final = ((min_val + max_val + denominator // 2) // denominator) & 0xFFFFFFFF
    deviation = max((abs(value - final * index) for index, value in points), default=0)
    return final, _num_bits(deviation) + 1


def _block_addr_store(blocks: Sequence[BlockAddr]) -> bytes:
    metas = bytearray()
    packed = bytearray()
    for g in range(0, len(blocks), STORE_BLOCK_LEN):
        group = blocks[g : g + STORE_BLOCK_LEN]
        ref = group[0]
        starts = [b.start - ref.start for b in group]
        ords = [b.first_ordinal - ref.first_ordinal for b in group]
        end = group[-1].end - ref.start
        range_slope, range_bits = _best_slope(list(enumerate([*starts, end]))[1:])
        ord_slope, ord_bits = _best_slope(list(enumerate(ords))[1:])
        range_shift = 1 << (range_bits - 1)
        ord_shift = 1 << (ord_bits - 1)
        metas += _META.pack(
            len(packed), ref.start, ref.first_ordinal, range_slope, ord_slope, ord_bits, range_bits, len(group) - 1
        )
        acc = 0
        nbits = 0
        for i in range(1, len(group)):
            acc |= (starts[i] - range_slope * i + range_shift) << nbits
            nbits += range_bits
            acc |= (ords[i] - ord_slope * i + ord_shift) << nbits
            nbits += ord_bits
        acc |= (end - range_slope * len(group) + range_shift) << nbits
        nbits += range_bits
        packed += acc.to_bytes((nbits + 7) // 8, "little")
    return _U64.pack(len(metas)) + bytes(metas) + bytes(packed)


# --- .term files -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TermFile:
    """A segment's ``.term`` file: each field's dictionary (field id -> dictionary, in file order)
    and the Tantivy version its footer names."""

    fields: dict[int, TermDictionary]
    version: dict[str, object]


def dictionary_type(field_slice: bytes) -> int:
    """The dictionary type of a ``.term`` composite slice (its last 4 bytes): 1 FST, 2 SSTable."""
    if len(field_slice) < 4:
        raise CorruptSplitError(f"a {len(field_slice)}-byte term dictionary has no type")
    return int(_U32.unpack_from(field_slice, len(field_slice) - 4)[0])


def read_sstable_term_file(data: bytes, source: str) -> TermFile:
    """Read a ``.term`` file of SSTable dictionaries (an IndexTables4Spark segment's).

    Raises:
        CorruptSplitError: as ``parse_sstable`` and ``composite_file.parse_composite``, naming
            ``source`` and the field.
    """
    file = split_footer(data, source)
    fields = {}
    for piece in parse_composite(file.body, source):
        if piece.idx != 0:
            raise CorruptSplitError(f"{source}: term dictionary slice {piece.idx} of field {piece.field}")
        fields[piece.field] = parse_sstable(piece.data, f"{source} field {piece.field}").dictionary
    return TermFile(fields, file.version)


def encode_sstable_term_file(term_file: TermFile) -> bytes:
    """A ``.term`` file of SSTable dictionaries, fields in the given order."""
    slices = [CompositeSlice(field, 0, encode_sstable(d)) for field, d in term_file.fields.items()]
    return with_footer(encode_composite(slices), dict(term_file.version))
