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
from collections.abc import Iterator

from executor_lib.splits.composite_file import parse_composite, split_footer
from executor_lib.splits.fst import FstError, iter_map, iter_map_shared
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


def read_term_info_store(data: bytes) -> list[TermInfo]:
    """Every ``TermInfo`` of a ``TermInfoStore``, in term order.

    Raises:
        ValueError: the store's lengths do not fit its bytes.
    """
    return list(iter_term_infos(data))


def iter_term_infos(data: bytes) -> Iterator[TermInfo]:
    """The ``TermInfo``s of a ``TermInfoStore``, in term order, one at a time.

    Raises:
        ValueError: the store's lengths do not fit its bytes (raised before the first one).
    """
    metas_len, num_terms = struct.unpack_from("<QQ", data, 0)
    metas = data[16 : 16 + metas_len]
    packed = memoryview(data)[16 + metas_len :]
    if len(metas) != metas_len or metas_len != _META.size * -(-num_terms // TERM_INFO_BLOCK_LEN):
        raise ValueError(f"{metas_len} bytes of block metas for {num_terms} terms")
    return _term_infos(metas, packed, num_terms)


def _term_infos(metas: bytes, packed: memoryview, num_terms: int) -> Iterator[TermInfo]:
    done = 0
    for block in range(0, len(metas), _META.size):
        offset, doc_freq, p_start, p_len, q_start, q_len, df_bits, p_bits, q_bits = _META.unpack_from(metas, block)
        yield TermInfo(doc_freq, p_start, p_start + p_len, q_start, q_start + q_len)
        count = min(TERM_INFO_BLOCK_LEN, num_terms - done) - 1
        done += count + 1
        nbits = df_bits + p_bits + q_bits
        # the block's bit-packed entries as one little-endian integer
        end = offset + (nbits * count + p_bits + q_bits + 7) // 8
        bits = int.from_bytes(packed[offset:end], "little")
        p_mask, q_mask, df_mask = (1 << p_bits) - 1, (1 << q_bits) - 1, (1 << df_bits) - 1
        p_now = p_start + (bits & p_mask)
        q_now = q_start + ((bits >> p_bits) & q_mask)
        for i in range(count):
            at = nbits * i
            p_next = p_start + ((bits >> (at + nbits)) & p_mask)
            q_next = q_start + ((bits >> (at + nbits + p_bits)) & q_mask)
            yield TermInfo((bits >> (at + p_bits + q_bits)) & df_mask, p_now, p_next, q_now, q_next)
            p_now, q_now = p_next, q_next


def iter_fst_dictionary(data: bytes, source: str = "term dictionary") -> Iterator[tuple[bytes, TermInfo]]:
    """The (term, ``TermInfo``) pairs of one field's FST term dictionary (a ``.term`` composite
    slice, dictionary type included), in term order, one at a time.

    Raises:
        CorruptSplitError: not an FST dictionary, or bytes that do not parse (possibly after some
            pairs were yielded); names ``source``.
    """
    fst, store = _parts(data, source)
    return _pairs(fst, store, source)


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


def _pairs(fst: bytes, store: bytes, source: str) -> Iterator[tuple[bytes, TermInfo]]:
    try:
        infos = iter_term_infos(store)
        ordinal = -1
        for ordinal, ((term, value), info) in enumerate(zip(iter_map(fst), infos)):  # noqa: B905 (counted below)
            if value != ordinal:
                raise CorruptSplitError(f"{source}: the FST gives term {ordinal} the ordinal {value}")
            yield term, info
        if next(infos, None) is not None:
            raise CorruptSplitError(f"{source}: more term infos than the FST's {ordinal + 1} terms")
    except (FstError, ValueError, IndexError, struct.error) as e:
        raise CorruptSplitError(f"{source}: FST term dictionary does not parse ({e})") from e


def iter_fst_dictionary_shared(data: bytes, source: str = "term dictionary") -> Iterator[tuple[bytes, TermInfo, int]]:
    """``iter_fst_dictionary`` with each term's shared prefix length with the previous term
    (``fst.iter_map_shared``), for ``sstable_termdict.encode_sstable_shared``.

    Raises:
        CorruptSplitError: as ``iter_fst_dictionary``.
    """
    fst, store = _parts(data, source)
    return _triples(fst, store, source)


def _triples(fst: bytes, store: bytes, source: str) -> Iterator[tuple[bytes, TermInfo, int]]:
    try:
        infos = iter_term_infos(store)
        ordinal = -1
        for ordinal, ((term, value, shared), info) in enumerate(zip(iter_map_shared(fst), infos)):  # noqa: B905
            if value != ordinal:
                raise CorruptSplitError(f"{source}: the FST gives term {ordinal} the ordinal {value}")
            yield term, info, shared
        if next(infos, None) is not None:
            raise CorruptSplitError(f"{source}: more term infos than the FST's {ordinal + 1} terms")
    except (FstError, ValueError, IndexError, struct.error) as e:
        raise CorruptSplitError(f"{source}: FST term dictionary does not parse ({e})") from e


def parse_fst_dictionary(data: bytes, source: str = "term dictionary") -> TermDictionary:
    """Read one field's FST term dictionary (a ``.term`` composite slice, dictionary type included).

    Raises:
        CorruptSplitError: not an FST dictionary, or bytes that do not parse; names ``source``.
    """
    terms: list[bytes] = []
    infos: list[TermInfo] = []
    for term, info in iter_fst_dictionary(data, source):
        terms.append(term)
        infos.append(info)
    return TermDictionary(terms, infos)


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
