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

import struct

from executor_lib.splits.composite_file import parse_composite, split_footer
from executor_lib.splits.fst import FstError, read_map
from executor_lib.splits.sstable_termdict import (
    DICT_TYPE_FST,
    DICT_TYPE_SSTABLE,
    TermDictionary,
    TermFile,
    TermInfo,
)
from indextables_contract.errors import CorruptSplitError

FST_TERMDICT_VERSION = 1
TERM_INFO_BLOCK_LEN = 256
_META = struct.Struct("<QIQIQIBBB")  # 39 bytes
_U32 = struct.Struct("<I")


def _bits(data: bytes, addr: int, nbits: int) -> int:
    byte = addr >> 3
    window = int.from_bytes(data[byte : byte + 9].ljust(9, b"\0"), "little")
    return (window >> (addr & 7)) & ((1 << nbits) - 1)


def read_term_info_store(data: bytes) -> list[TermInfo]:
    """Every ``TermInfo`` of a ``TermInfoStore``, in term order.

    Raises:
        ValueError: the store's lengths do not fit its bytes.
    """
    metas_len, num_terms = struct.unpack_from("<QQ", data, 0)
    metas = data[16 : 16 + metas_len]
    packed = data[16 + metas_len :]
    if len(metas) != metas_len or metas_len != _META.size * -(-num_terms // TERM_INFO_BLOCK_LEN):
        raise ValueError(f"{metas_len} bytes of block metas for {num_terms} terms")
    out: list[TermInfo] = []
    for block in range(0, metas_len, _META.size):
        offset, doc_freq, p_start, p_len, q_start, q_len, df_bits, p_bits, q_bits = _META.unpack_from(metas, block)
        out.append(TermInfo(doc_freq, p_start, p_start + p_len, q_start, q_start + q_len))
        count = min(TERM_INFO_BLOCK_LEN, num_terms - len(out) + 1) - 1
        bits = packed[offset:]
        nbits = df_bits + p_bits + q_bits
        for i in range(count):
            at = nbits * i
            out.append(
                TermInfo(
                    _bits(bits, at + p_bits + q_bits, df_bits),
                    p_start + _bits(bits, at, p_bits),
                    p_start + _bits(bits, at + nbits, p_bits),
                    q_start + _bits(bits, at + p_bits, q_bits),
                    q_start + _bits(bits, at + p_bits + nbits, q_bits),
                )
            )
    return out


def parse_fst_dictionary(data: bytes, source: str = "term dictionary") -> TermDictionary:
    """Read one field's FST term dictionary (a ``.term`` composite slice, dictionary type included).

    Raises:
        CorruptSplitError: not an FST dictionary, or bytes that do not parse; names ``source``.
    """
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
    try:
        items = read_map(main[:fst_end])
        infos = read_term_info_store(main[fst_end : len(main) - 12])
    except (FstError, ValueError, IndexError, struct.error) as e:
        raise CorruptSplitError(f"{source}: FST term dictionary does not parse ({e})") from e
    if len(items) != len(infos) or any(n != i for i, (_, n) in enumerate(items)):
        raise CorruptSplitError(f"{source}: the FST's ordinals do not number its {len(infos)} term infos")
    return TermDictionary([k for k, _ in items], infos)


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
