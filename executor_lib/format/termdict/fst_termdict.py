"""The FST term dictionary the ``tantivy`` Python package writes: a reader. No tantivy here.

Tantivy without the ``quickwit`` feature (``src/termdict/fst_termdict/``) stores each field's
terms of a segment's ``.term`` file (a composite file, ``composite_file.py``) as::

    [FST map: term -> term ordinal (fst.py)][TermInfoStore][u64 TermInfoStore length]
    [u32 FST dictionary version = 1][u32 dictionary type = 1 (FST)]

    TermInfoStore = [u64 block metas length][u64 number of terms][block meta]...[bit-packed data]
    block meta    = [u64 offset in the data][u32 doc_freq][u64 postings start][u32 postings length]
                    [u64 positions start][u32 positions length][u8 doc_freq bits]
                    [u8 postings bits][u8 positions bits]          (39 bytes; the block's first term)

Terms come in blocks of 256; a block's first ``TermInfo`` is in its meta, the others bit-packed
(low bits first) as ``postings start, positions start, doc_freq`` relative to the first term's
starts, then the last term's postings and positions ends. A term's postings (positions) end where
the next one's start.
"""

from __future__ import annotations

import itertools
import struct

import numpy as np

from executor_lib.format.directory import parse_composite, split_footer
from executor_lib.format.termdict.fst import FstError, build_map, read_ordinal_keys
from executor_lib.format.termdict.sstable import (
    DICT_TYPE_FST,
    DICT_TYPE_SSTABLE,
    TermColumns,
    TermDictionary,
    TermFile,
)
from indextables_contract.errors import CorruptSplitError

FST_TERMDICT_VERSION = 1
TERM_INFO_BLOCK_LEN = 256
_U32 = struct.Struct("<I")


_META_DTYPE = np.dtype(
    [
        ("offset", "<u8"),
        ("doc_freq", "<u4"),
        ("postings_start", "<u8"),
        ("postings_len", "<u4"),
        ("positions_start", "<u8"),
        ("positions_len", "<u4"),
        ("doc_freq_bits", "u1"),
        ("postings_bits", "u1"),
        ("positions_bits", "u1"),
    ]
)  # 39 bytes, packed
_MAX_FIELD_BITS = 56  # a field read from one unaligned 64-bit word, shifted by up to 7 bits
_PAD_BYTES = 2 * (3 * _MAX_FIELD_BITS // 8) + 8


def term_info_columns(data: bytes) -> np.ndarray:
    """Every ``TermInfo`` of a ``TermInfoStore``, in term order, as an ``(n, 5)`` int64 array
    (``TermColumns.infos``), unpacked with array operations.

    Raises:
        ValueError: the store's lengths do not fit its bytes.
    """
    metas_len, num_terms = struct.unpack_from("<QQ", data, 0)
    blocks = -(-num_terms // TERM_INFO_BLOCK_LEN)
    if len(data) < 16 + metas_len or metas_len != _META_DTYPE.itemsize * blocks:
        raise ValueError(f"{metas_len} bytes of block metas for {num_terms} terms")
    metas = np.frombuffer(data, _META_DTYPE, blocks, 16)
    packed = np.frombuffer(data, np.uint8, offset=16 + metas_len)
    bits = {k: metas[f"{k}_bits"].astype(np.int64) for k in ("doc_freq", "postings", "positions")}
    if max((int(b.max(initial=0)) for b in bits.values()), default=0) > _MAX_FIELD_BITS:
        raise ValueError(f"a term info block packs a value in more than {_MAX_FIELD_BITS} bits")
    entry_bits = bits["doc_freq"] + bits["postings"] + bits["positions"]
    counts = np.minimum(TERM_INFO_BLOCK_LEN, num_terms - TERM_INFO_BLOCK_LEN * np.arange(blocks)) - 1
    offsets = metas["offset"].astype(np.int64)
    block_ends = offsets + (entry_bits * counts + bits["postings"] + bits["positions"] + 7) // 8
    if blocks and int(block_ends.max()) > len(packed):
        raise ValueError(f"term info blocks end at byte {int(block_ends.max())} of {len(packed)} packed bytes")
    # Room past the end: a block's first term reads (and then ignores) the fields of the entries after
    # it, up to three fields of _MAX_FIELD_BITS plus a 64-bit word, even when the block has no more.
    padded = np.concatenate([packed, np.zeros(_PAD_BYTES, np.uint8)])
    words, last = _unaligned_words(padded), len(padded) - 8  # a field's word starts at byte <= last

    term = np.arange(num_terms, dtype=np.int64)
    block, entry = term // TERM_INFO_BLOCK_LEN, term % TERM_INFO_BLOCK_LEN - 1  # entry -1: the block's first
    base = offsets[block] * 8 + entry_bits[block] * np.maximum(entry, 0)
    p_bits, q_bits = bits["postings"][block], bits["positions"][block]
    step = entry_bits[block]
    p_start = metas["postings_start"].astype(np.int64)[block]
    q_start = metas["positions_start"].astype(np.int64)[block]
    infos = np.empty((num_terms, 5), np.int64)
    infos[:, 0] = _bit_field(words, last, base + p_bits + q_bits, bits["doc_freq"][block])
    infos[:, 1] = p_start + _bit_field(words, last, base, p_bits)
    infos[:, 2] = p_start + _bit_field(words, last, base + step, p_bits)
    infos[:, 3] = q_start + _bit_field(words, last, base + p_bits, q_bits)
    infos[:, 4] = q_start + _bit_field(words, last, base + step + p_bits, q_bits)
    first = entry < 0  # the block's first term: all in its meta
    first_meta = metas[block[first]]
    infos[first, 0] = first_meta["doc_freq"]
    infos[first, 1] = first_meta["postings_start"].astype(np.int64)
    infos[first, 2] = infos[first, 1] + first_meta["postings_len"]
    infos[first, 3] = first_meta["positions_start"].astype(np.int64)
    infos[first, 4] = infos[first, 3] + first_meta["positions_len"]
    return infos


def _unaligned_words(data: np.ndarray) -> np.ndarray:
    """The little-endian 64-bit word starting at each byte of ``data`` (zeros past its end):
    ``words[k, j]`` is the one at byte ``8 * j + k`` (eight shifted copies of the bytes, so that
    reading a word is one gather, not eight)."""
    n = len(data) // 8 + 1
    tail = np.concatenate([data, np.zeros(16, np.uint8)])
    return np.stack([tail[k : k + 8 * n].view("<u8") for k in range(8)])


def _bit_field(words: np.ndarray, last: int, at_bit: np.ndarray, nbits: np.ndarray) -> np.ndarray:
    """The ``nbits``-bit little-endian fields (``nbits`` <= 56) starting at bit ``at_bit`` of the
    bytes ``words`` holds (``_unaligned_words``), read from the word at byte ``at_bit // 8`` or
    ``last``, whichever is lower (the bytes have ``_PAD_BYTES`` to spare at their end)."""
    at = np.minimum(at_bit >> 3, last)
    word = words[at & 7, at >> 3]
    word >>= (at_bit & 7).astype(np.uint64)
    mask = (np.uint64(1) << nbits.astype(np.uint64)) - np.uint64(1)
    return (word & mask).astype(np.int64)


def _num_bits(values: np.ndarray) -> np.ndarray:
    """Tantivy's ``compute_num_bits``: the bits of each (non-negative) value, 0 for 0."""
    out = np.zeros(len(values), np.int64)
    rest = values.astype(np.uint64)
    while rest.any():
        out += rest > 0
        rest >>= np.uint64(1)
    return out


def encode_term_info_store(infos: np.ndarray) -> bytes:
    """The ``TermInfoStore`` of ``infos`` (an ``(n, 5)`` array as ``term_info_columns`` gives), byte
    for byte as Tantivy's ``TermInfoStoreWriter`` writes it: blocks of 256 terms, the first in the
    block's meta, the others' ``postings start, positions start, doc_freq`` bit-packed relative to
    it, then the last term's ends; each block ends on a byte boundary.

    Raises:
        ValueError: a value that does not fit its field (a ``TermInfo`` Tantivy cannot hold).
    """
    n = len(infos)
    blocks = -(-n // TERM_INFO_BLOCK_LEN)
    first = np.arange(blocks) * TERM_INFO_BLOCK_LEN
    last = np.minimum(first + TERM_INFO_BLOCK_LEN, n) - 1
    block = np.arange(n) // TERM_INFO_BLOCK_LEN
    rest = np.arange(n) % TERM_INFO_BLOCK_LEN != 0  # the terms bit-packed (not their block's first)
    postings_ref, positions_ref = infos[first, 1], infos[first, 3]
    postings_end = infos[last, 2] - postings_ref
    positions_end = infos[last, 4] - positions_ref
    doc_freq_max = np.zeros(blocks, np.int64)
    np.maximum.at(doc_freq_max, block[rest], infos[rest, 0])
    bits = np.stack([_num_bits(postings_end), _num_bits(positions_end), _num_bits(doc_freq_max)], axis=1)
    # each block's first term, as its meta holds it: doc_freq, postings length, positions length (u32 each)
    first_u32 = np.stack([infos[first, 0], infos[first, 2] - postings_ref, infos[first, 4] - positions_ref], axis=1)
    if (bits > _MAX_FIELD_BITS).any() or (first_u32 >= 1 << 32).any():
        raise ValueError("a term info does not fit the term info store's fields")
    # Every packed number in order: per block its terms' (postings start, positions start, doc_freq),
    # then the postings and positions ends, then zero bits up to the next byte.
    packed_terms = np.flatnonzero(rest)
    term_values = np.stack(
        [
            infos[packed_terms, 1] - postings_ref[block[packed_terms]],
            infos[packed_terms, 3] - positions_ref[block[packed_terms]],
            infos[packed_terms, 0],
        ],
        axis=1,
    )
    term_widths = bits[block[packed_terms]]
    block_bits = (np.bincount(block[packed_terms], minlength=blocks) * bits.sum(axis=1)) + bits[:, 0] + bits[:, 1]
    padding = -block_bits % 8
    tails = np.stack([postings_end, positions_end, np.zeros(blocks, np.int64)], axis=1)
    tail_widths = np.stack([bits[:, 0], bits[:, 1], padding], axis=1)
    # Order: block b's terms, then its tail; a term sorts by its block, tails after.
    keys = np.concatenate([block[packed_terms] * 2, np.arange(blocks) * 2 + 1])
    order = np.argsort(keys, kind="stable")
    values = np.concatenate([term_values, tails])[order].ravel()
    widths = np.concatenate([term_widths, tail_widths])[order].ravel()
    data = _pack_bits(values, widths)
    offsets = np.concatenate([[0], np.cumsum((block_bits + padding) // 8)[:-1]]) if blocks else np.zeros(0)
    metas = np.zeros(blocks, _META_DTYPE)
    metas["offset"] = offsets
    metas["doc_freq"] = first_u32[:, 0]
    metas["postings_start"] = postings_ref
    metas["postings_len"] = first_u32[:, 1]
    metas["positions_start"] = positions_ref
    metas["positions_len"] = first_u32[:, 2]
    metas["doc_freq_bits"] = bits[:, 2]
    metas["postings_bits"] = bits[:, 0]
    metas["positions_bits"] = bits[:, 1]
    return struct.pack("<QQ", metas.nbytes, n) + metas.tobytes() + data


_PACK_CHUNK = 1 << 16  # numbers expanded to bits at once (64 bytes each)


def _pack_bits(values: np.ndarray, widths: np.ndarray) -> bytes:
    """``values`` written low bits first, each in its ``widths`` bits, as one bit stream (whose
    length the caller makes a multiple of 8)."""
    parts = []
    for lo in range(0, len(values), _PACK_CHUNK):
        v = values[lo : lo + _PACK_CHUNK].astype(np.uint64)
        w = widths[lo : lo + _PACK_CHUNK]
        width = int(w.max(initial=0))
        bit_matrix = ((v[:, None] >> np.arange(width, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
        parts.append(bit_matrix[np.arange(width) < w[:, None]])
    stream = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    return np.packbits(stream, bitorder="little").tobytes()


def encode_fst_dictionary(terms: TermColumns) -> bytes:
    """One field's FST term dictionary (a ``.term`` composite slice, dictionary type included) of
    ``terms``: the FST map term -> ordinal (``fst.build_map``), the ``TermInfoStore``, its length,
    version 1, type 1; what ``fst_dictionary_columns`` reads back.

    Raises:
        FstError: terms not strictly increasing.
        ValueError: as ``encode_term_info_store``.
    """
    blob = terms.data.tobytes()
    bounds = terms.offsets.tolist()
    fst = build_map(zip((blob[a:b] for a, b in itertools.pairwise(bounds)), range(len(terms)), strict=False))
    store = encode_term_info_store(terms.infos)
    return fst + store + struct.pack("<QII", len(store), FST_TERMDICT_VERSION, DICT_TYPE_FST)


def fst_dictionary_columns(data: bytes, source: str = "term dictionary") -> TermColumns:
    """One field's FST term dictionary (a ``.term`` composite slice, dictionary type included) as
    ``TermColumns``: the FST's keys (``fst.read_ordinal_keys``) and the unpacked ``TermInfoStore``.

    Raises:
        CorruptSplitError: not an FST dictionary, or bytes that do not parse; names ``source``.
    """
    fst, store = _parts(data, source)
    try:
        keys = read_ordinal_keys(fst)
        infos = term_info_columns(store)
    except (FstError, ValueError, IndexError, struct.error) as e:
        raise CorruptSplitError(f"{source}: FST term dictionary does not parse ({e})") from e
    if len(infos) != len(keys):
        raise CorruptSplitError(f"{source}: {len(infos)} term infos for the FST's {len(keys)} terms")
    return TermColumns.from_terms(keys, infos)


def _parts(data: bytes, source: str) -> tuple[bytes, bytes]:
    """The FST map and the ``TermInfoStore`` of one field's FST dictionary."""
    if len(data) < 16:
        raise CorruptSplitError(f"{source}: {len(data)} bytes, too short for a term dictionary")
    (dict_type,) = _U32.unpack_from(data, len(data) - 4)
    if dict_type != DICT_TYPE_FST:
        kind = {DICT_TYPE_SSTABLE: "an SSTable"}.get(dict_type, f"type {dict_type}")
        raise CorruptSplitError(f"{source}: {kind} term dictionary, not an FST")
    main = data[:-4]
    store_len, version = struct.unpack_from("<QI", main, len(main) - 12)
    if version != FST_TERMDICT_VERSION:
        raise CorruptSplitError(f"{source}: FST dictionary version {version}, only {FST_TERMDICT_VERSION} is read")
    fst_end = len(main) - 12 - store_len
    if fst_end < 0:
        raise CorruptSplitError(f"{source}: term info store of {store_len} bytes does not fit")
    return main[:fst_end], main[fst_end : len(main) - 12]


def parse_fst_dictionary(data: bytes, source: str = "term dictionary") -> TermDictionary:
    """Read one field's FST term dictionary (a ``.term`` composite slice, dictionary type included).

    Raises:
        CorruptSplitError: not an FST dictionary, or bytes that do not parse; names ``source``.
    """
    return fst_dictionary_columns(data, source).to_dictionary()


def fst_map_bytes(data: bytes) -> bytes:
    """The FST map of one field's FST term dictionary slice (for checks against ``fst.build_map``)."""
    main = data[:-4]
    (store_len,) = struct.unpack_from("<Q", main, len(main) - 12)
    return main[: len(main) - 12 - store_len]


def read_fst_term_file(data: bytes, source: str) -> TermFile:
    """Read a ``.term`` file of FST dictionaries (a segment the ``tantivy`` package wrote).

    Raises:
        CorruptSplitError: as ``parse_fst_dictionary`` and ``composite_file.parse_composite``.
    """
    file = split_footer(data, source)
    fields = {}
    for piece in parse_composite(file.body, source):
        if piece.idx != 0:
            raise CorruptSplitError(f"{source}: term dictionary slice {piece.idx} of field {piece.field}")
        fields[piece.field] = parse_fst_dictionary(piece.data, f"{source} field {piece.field}")
    return TermFile(fields, file.version)
