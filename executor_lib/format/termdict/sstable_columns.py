"""One field's SSTable term dictionary read into ``TermColumns`` with array operations: what turning
a split's SSTable dictionaries into the FST ones the ``tantivy`` package reads costs at open
(``term_convert.fst_term_file``). No tantivy here.

The layout is ``sstable_termdict.py``'s. ``parse_sstable`` there reads a term at a time in Python
(about 3 us a term, and it also reads the block index); this reader does per block only its framing
(length, compression, the values' count) and decodes every block's values and deltas at once:

* values: Tantivy VInts end at a byte with the high bit set, so each block's ``3 + 3n`` numbers end
  at its first ``3 + 3n`` such bytes;
* deltas: where a delta starts depends on the one before it (its header says how long it is). Every
  byte is given the length it would have as a delta's first byte, and the chain from the first
  byte is followed by doubling jumps (``log2`` of the number of terms array passes);
* keys: byte ``j`` of a term is its own suffix's when ``j`` is at least its ``keep``, else the
  previous term's byte ``j``: one pass per byte position, over the terms at least that long.
"""

from __future__ import annotations

import struct

import numpy as np

from executor_lib.format._zstd import zstd
from executor_lib.format.termdict.sstable import TermColumns, sstable_frame
from indextables_contract.errors import CorruptSplitError

_U32 = struct.Struct("<I")
_MAX_LEB_BYTES = 10  # a u64 as 7-bit groups


def read_sstable_columns(data: bytes, source: str = "term dictionary") -> TermColumns:
    """Every term of one field's SSTable dictionary (a ``.term`` composite slice, dictionary type
    included) with its ``TermInfo``, in order.

    Example:
        >>> from executor_lib.format.termdict.sstable import encode_sstable_columns
        >>> cols = TermColumns.from_terms([b"a", b"b"], np.array([[1, 0, 3, 0, 0], [2, 3, 5, 0, 0]]))
        >>> read_sstable_columns(encode_sstable_columns(cols)).to_dictionary().terms
        [b'a', b'b']

    Raises:
        CorruptSplitError: not an SSTable dictionary (an FST one says so), another SSTable version,
            or bytes that do not parse; the message names ``source``.
    """
    main, index_offset, num_terms = sstable_frame(data, source)
    try:
        payloads = _payloads(main, index_offset)
        counts, values, deltas, delta_starts = _split_blocks(payloads)
        if int(counts.sum()) != num_terms:
            raise ValueError(f"the footer says {num_terms} terms, the blocks hold {int(counts.sum())}")
        infos = _infos(counts, values)
        keep, add, suffix_at = _delta_chain(deltas, delta_starts, counts)
        offsets, keys = _keys(deltas, keep, add, suffix_at)
    except (ValueError, IndexError, struct.error, zstd.ZstdError) as e:
        raise CorruptSplitError(f"{source}: SSTable term dictionary does not parse ({e})") from e
    return TermColumns(offsets, keys, infos)


def _payloads(main: memoryview, index_offset: int) -> list[bytes]:
    """Each block's payload, decompressed, up to the empty block before the index."""
    out = []
    pos = 0
    while True:
        (length,) = _U32.unpack_from(main, pos)
        if length <= 1:
            pos += 4
            break
        flag = main[pos + 4]
        payload = bytes(main[pos + 5 : pos + 4 + length])
        if len(payload) != length - 1:
            raise ValueError("a block runs past the data")
        if flag == 1:
            payload = zstd.decompress(payload)
        elif flag != 0:
            raise ValueError(f"block compression flag {flag}")
        out.append(payload)
        pos += 4 + length
    if pos != index_offset:
        raise ValueError(f"the blocks end at {pos}, the index starts at {index_offset}")
    return out


def _split_blocks(payloads: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each block's term count, every block's values (its ``3 + 3n`` VInts, decoded, concatenated),
    the blocks' deltas concatenated, and where each block's deltas start in them."""
    counts, value_parts, delta_parts = [], [], []
    for payload in payloads:
        raw = np.frombuffer(payload, np.uint8)
        stops = np.flatnonzero(raw >= 128)
        if not len(stops):
            raise ValueError("a block without a complete count")
        count = _vints(raw[: stops[0] + 1])[0]
        if count == 0:
            raise ValueError("a non-empty block of no term")  # the writer never makes one
        if len(stops) < 3 + 3 * count:
            raise ValueError(f"a block of {count} terms ends inside its values")
        end = int(stops[2 + 3 * count]) + 1
        counts.append(count)
        value_parts.append(_vints(raw[:end]))
        delta_parts.append(raw[end:])
    sizes = np.array([len(p) for p in delta_parts], np.int64)
    delta_starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if len(sizes) else np.zeros(0, np.int64)
    deltas = np.concatenate(delta_parts) if delta_parts else np.zeros(0, np.uint8)
    values = np.concatenate(value_parts) if value_parts else np.zeros(0, np.int64)
    return np.array(counts, np.int64), values, deltas, delta_starts


def _vints(raw: np.ndarray) -> np.ndarray:
    """The Tantivy VInts that fill ``raw`` (each ends at a byte with the high bit set)."""
    ends = np.flatnonzero(raw >= 128)
    starts = np.concatenate([[0], ends[:-1] + 1])
    if np.any(ends - starts >= _MAX_LEB_BYTES):
        raise ValueError("a VInt of more than 10 bytes")
    within = np.arange(len(raw)) - np.repeat(starts, ends - starts + 1)
    groups = (raw & 127).astype(np.uint64) << (7 * within).astype(np.uint64)
    return np.add.reduceat(groups, starts).astype(np.int64) if len(raw) else np.zeros(0, np.int64)


def _infos(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``(n, 5)`` ``TermInfo``s from each block's ``[n][postings start][positions start]`` and
    ``[doc_freq][postings bytes][positions bytes]`` per term."""
    per_block = 3 + 3 * counts
    block_at = np.concatenate([[0], np.cumsum(per_block)[:-1]])
    term_block = np.repeat(np.arange(len(counts)), counts)
    first_term = np.concatenate([[0], np.cumsum(counts)[:-1]])
    within = np.arange(int(counts.sum())) - first_term[term_block]
    at = block_at[term_block] + 3 + 3 * within
    doc_freq, postings_len, positions_len = values[at], values[at + 1], values[at + 2]
    infos = np.empty((len(at), 5), np.int64)
    infos[:, 0] = doc_freq
    for column, lengths, head in ((1, postings_len, 1), (3, positions_len, 2)):
        ends = np.cumsum(lengths)
        block_base = (ends - lengths)[first_term]  # the cumulative length before each block's first term
        start = values[block_at + head][term_block] + (ends - lengths) - block_base[term_block]
        infos[:, column] = start
        infos[:, column + 1] = start + lengths
    return infos


def _leb_at(deltas: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The LEB128 numbers starting at positions ``at`` of ``deltas`` (read as far as the data goes)
    and their byte lengths."""
    padded = np.concatenate([deltas, np.zeros(_MAX_LEB_BYTES, np.uint8)])
    at = np.minimum(at, len(deltas))  # a number starting past the data (off the chain of deltas) reads zeros
    value = np.zeros(len(at), np.int64)
    length = np.zeros(len(at), np.int64)
    going = np.ones(len(at), bool)
    for k in range(_MAX_LEB_BYTES):
        b = padded[at + k].astype(np.int64)
        value[going] |= (b[going] & 127) << (7 * k)
        length += going
        going &= b >= 128
    return value, length


def _delta_chain(
    deltas: np.ndarray, delta_starts: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each term's ``keep``, ``add`` and where its suffix starts in ``deltas``: the chain of deltas
    from byte 0, found by doubling jumps over "the next delta if one started here"."""
    n, size = int(counts.sum()), len(deltas)
    header = deltas.astype(np.int64)
    long_form = np.flatnonzero(header == 1)
    keep_long, keep_len = _leb_at(deltas, long_form + 1)
    add_long, add_len = _leb_at(deltas, long_form + 1 + keep_len)
    head_len = np.ones(size, np.int64)
    add = header >> 4
    head_len[long_form] = 1 + keep_len + add_len
    add[long_form] = np.clip(add_long, 0, size)  # past the data (or a garbage number off the chain): the end
    jump = np.minimum(np.arange(size, dtype=np.int64) + head_len + add, size)
    jump = np.append(jump, size)  # position ``size``: past the end, stays there
    chain = np.zeros(1, np.int64)
    while len(chain) < n:
        chain = np.concatenate([chain, jump[chain]])
        jump = jump[jump]
    chain = chain[:n]
    if n and (int(chain.max()) >= size or int(chain[-1] + head_len[chain[-1]] + add[chain[-1]]) != size):
        raise ValueError("the deltas do not end where the blocks do")
    first_terms = np.concatenate([[0], np.cumsum(counts)[:-1]])
    if n and not np.array_equal(chain[first_terms], delta_starts):
        raise ValueError("a block's deltas do not start where its first delta does")
    keep = header[chain] & 15
    is_long = header[chain] == 1
    keep[is_long] = keep_long[np.searchsorted(long_form, chain[is_long])]
    return keep, add[chain], chain + head_len[chain]


def _keys(
    deltas: np.ndarray, keep: np.ndarray, add: np.ndarray, suffix_at: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The terms' bytes (offsets, concatenated data) from their deltas: a term is the previous one
    cut to ``keep`` bytes plus its ``add`` suffix bytes."""
    n = len(keep)
    lengths = keep + add
    if n and (keep[0] != 0 or np.any(keep[1:] > lengths[:-1])):
        raise ValueError("a delta keeps more bytes than the previous term has")
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    keys = np.empty(int(offsets[-1]), np.uint8)
    candidates = np.arange(n, dtype=np.int64)  # in term order, every term longer than the last power of 2 <= j
    for j in range(int(lengths.max(initial=0))):
        if j & (j - 1) == 0:  # j a power of 2 (or 0): drop the terms too short for it
            candidates = candidates[lengths[candidates] > j]
        terms = candidates[lengths[candidates] > j]  # the terms with a byte j; one keeping it follows one that has it
        writes = keep[terms] <= j
        source = np.maximum.accumulate(np.where(writes, np.arange(len(terms)), -1))
        if source[0] < 0:
            raise ValueError(f"byte {j} of term {int(terms[0])} comes from no term")
        writer = terms[source]
        keys[offsets[terms] + j] = deltas[suffix_at[writer] + j - keep[writer]]
    return offsets, keys
