"""Tantivy's doc store (``<segment>.store``) as a container of blocks: parsing its skip index,
decompressing its blocks, and the empty store the ``tantivy`` package opens in its place. No
tantivy here; the documents inside a block are ``stored_docs.py``'s.

The layout, as the fork IndexTables4Spark reads with writes it (GitHub ``indextables/tantivy``,
``src/store/``: ``writer.rs``, ``store_compressor.rs``, ``footer.rs``, ``index/block.rs``,
``index/skip_index_builder.rs``, ``compression_lz4_block.rs``, ``compression_zstd_block.rs``),
little-endian::

    store     = [block 0][block 1]...[skip index][doc store footer][Tantivy file footer]
    block     = [u32 uncompressed length][lz4 block | zstd frame]   (compressor 1 | 4; 0: raw bytes)
    skip index = [VInt number of layers][VInt end offset of each layer][layers, the coarsest first]
    layer     = checkpoint blocks of at most 8 (``CHECKPOINT_PERIOD``) checkpoints:
                [VInt n][VInt first doc][VInt first byte][(VInt docs, VInt bytes) x n]
    footer    = [u32 doc store version][u64 skip index offset][u8 compressor id][15 zero bytes]

Layer 0 (the last one written) lists every block; each coarser layer has a checkpoint per
checkpoint block of the layer below it. The Tantivy file footer (``composite_file.with_footer``)
holds the body's CRC32.

Why this module exists: the ``tantivy`` package writes lz4 doc stores in 16 KB blocks and cannot
read any other (it is built without ``zstd-compression`` and panics on a zstd store). The JVM's
Tantivy reads zstd stores (``tantivy4java``'s ``native/Cargo.toml`` enables ``zstd-compression``).
So a split written here stores rows in zstd blocks of about ``ZSTD_BLOCK_BYTES`` with frame
checksums (a third fewer bytes than lz4 on log rows; the native writer compresses them,
``native/src/store.rs``, with the same layout as here), and the directory the ``tantivy`` package opens holds
``format.quickwit.bundle.empty_doc_store`` in place of each ``.store`` (the real one beside it as
``<segment>.docstore``): this project never reads rows through the ``tantivy`` package.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any

import cramjam
import numpy as np

from executor_lib.format._zstd import zstd
from executor_lib.format.directory import decode_vint, encode_vint, split_footer
from executor_lib.format.quickwit.bundle import DOC_STORE_FOOTER
from executor_lib.format.store.arrow_columns import u32_view
from indextables_contract.errors import CorruptSplitError

COMPRESSOR_NONE = 0
COMPRESSOR_LZ4 = 1
COMPRESSOR_ZSTD = 4
DOC_STORE_VERSION = 2  # src/store/mod.rs DOC_STORE_VERSION (V2), what the ``tantivy`` package writes
CHECKPOINT_PERIOD = 8  # src/store/index/mod.rs
ZSTD_LEVEL = 3
# Uncompressed bytes a zstd block aims at. On the storage benchmark's 300K log rows (42.6 MB stored):
# lz4 in 16 KB blocks 24.2 MB; zstd level 3 in 16 KB blocks 18.2 MB, 64 KB 16.9 MB, 256 KB 16.2 MB,
# 1 MB 15.6 MB. A row read costs its block's decompression: a rare word's 571 rows of 5M demo rows
# (32 splits, every block read once, none kept) took 97 ms in-process in 256 KB blocks, 64 ms in
# 64 KB blocks, and 0.253 s against 0.193 s through Spark (best of 10), for 2% more table bytes.
ZSTD_BLOCK_BYTES = 64 << 10
_U32 = struct.Struct("<I")
FOOTER_TAIL = 64 << 10  # a Tantivy file footer (JSON) is at most 50,000 bytes: read from this tail


@dataclass(frozen=True)
class DocStore:
    """A parsed doc store: its blocks' bytes and layer-0 checkpoints (numpy arrays, one entry per
    block: ``first_doc``, ``end_doc``, ``start``, ``end`` byte offsets into ``blocks``)."""

    blocks: memoryview
    compressor: int
    version: int
    first_doc: np.ndarray
    end_doc: np.ndarray
    start: np.ndarray
    end: np.ndarray
    tantivy_version: dict[str, Any]
    body: memoryview | None = None  # the bytes the Tantivy footer's CRC covers
    crc: int | None = None

    @property
    def num_docs(self) -> int:
        return int(self.end_doc[-1]) if len(self.end_doc) else 0

    def block_of(self, docs: np.ndarray) -> np.ndarray:
        """The block holding each doc id of ``docs``."""
        return np.searchsorted(self.end_doc, docs, side="right")

    def block(self, i: int, source: str) -> bytes:
        """Block ``i`` decompressed: documents, their offsets, their count (``stored_docs.py``),
        checked (``check_block``) against its checkpoint's number of documents.

        Raises:
            CorruptSplitError: the block does not decompress, its zstd checksum does not match, or
                it does not hold the documents its checkpoint says (names ``source``).
        """
        out = decompress_block(self.blocks[int(self.start[i]) : int(self.end[i])], self.compressor, source)
        assert isinstance(out, bytes)  # no buffer given
        check_block(out, int(self.end_doc[i] - self.first_doc[i]), f"{source} (block {i})")
        return out

    def lengths(self) -> np.ndarray:
        """Each block's length decompressed (int64): the u32 before its bytes (raw blocks: their size)."""
        if self.compressor == COMPRESSOR_NONE or not len(self.start):
            return (self.end - self.start).astype(np.int64)
        if len(self.blocks) < int(self.start[-1]) + 4:
            raise CorruptSplitError("a doc store's last block is shorter than its length header")
        return u32_view(np.frombuffer(self.blocks, np.uint8))[self.start].astype(np.int64)

    def block_into(self, i: int, buffer: bytearray, source: str) -> memoryview:
        """Block ``i`` decompressed into ``buffer`` and checked as ``block`` does: a view of ``buffer``
        valid until its next use (of a new buffer when ``buffer`` is shorter than the block).
        Decompressing into a buffer a caller reuses spares an allocation (and its page faults) per
        block: a quarter of a zstd block's decompression time at ``ZSTD_BLOCK_BYTES``.

        Raises:
            CorruptSplitError: as ``block``.
        """
        data = self.blocks[int(self.start[i]) : int(self.end[i])]
        out = memoryview(decompress_block(data, self.compressor, source, buffer))
        check_block(out, int(self.end_doc[i] - self.first_doc[i]), f"{source} (block {i})")
        return out

    def verify_crc(self, source: str) -> None:
        """Check the whole store against its Tantivy file footer's CRC32 (every byte must be present:
        a caller reading every block, ``DocStoreRows.read_all``).

        Raises:
            CorruptSplitError: the CRC differs (names ``source``).
        """
        if self.body is not None and self.crc is not None and zlib.crc32(self.body) != self.crc:
            raise CorruptSplitError(f"{source}: the doc store's bytes do not match its footer's CRC32 (damaged)")


def parse_store(data: bytes | memoryview, source: str) -> DocStore:
    """A ``.store`` file's blocks and checkpoints (``data``: its bytes, or a memoryview of a
    mapped file; the blocks are not copied).

    Raises:
        CorruptSplitError: the footers or the skip index do not parse, or the checkpoints do not
            tile the blocks; the message names ``source``.
    """
    view = memoryview(data)
    file = split_footer(bytes(view[-FOOTER_TAIL:]), source)  # the version; the body is the view's
    body = view[: len(view) - (min(len(view), FOOTER_TAIL) - len(file.body))]
    if len(body) < DOC_STORE_FOOTER.size:
        raise CorruptSplitError(f"{source}: doc store of {len(body)} bytes has no doc store footer")
    version, offset, compressor = DOC_STORE_FOOTER.unpack_from(body, len(body) - DOC_STORE_FOOTER.size)
    known = (COMPRESSOR_NONE, COMPRESSOR_LZ4, COMPRESSOR_ZSTD)
    if offset > len(body) - DOC_STORE_FOOTER.size or compressor not in known:
        raise CorruptSplitError(f"{source}: doc store footer is invalid (offset {offset}, compressor {compressor})")
    try:
        cps = np.array(_layer0(body[offset : len(body) - DOC_STORE_FOOTER.size]), dtype=np.int64).reshape(-1, 4)
    except (IndexError, ValueError) as e:
        raise CorruptSplitError(f"{source}: doc store skip index does not parse ({e})") from e
    first_doc, end_doc, start, end = cps.T
    tiles = len(cps) == 0 or (
        first_doc[0] == 0
        and start[0] == 0
        and end[-1] == offset
        and np.array_equal(first_doc[1:], end_doc[:-1])
        and np.array_equal(start[1:], end[:-1])
    )
    if not tiles:
        raise CorruptSplitError(f"{source}: doc store checkpoints do not tile its {offset} bytes of blocks")
    return DocStore(body[:offset], compressor, version, first_doc, end_doc, start, end, file.version, body, file.crc)


def check_block(block: bytes | memoryview, docs: int, source: str) -> None:
    """A decompressed block holds ``docs`` documents whose offsets rise within it (its trailing count
    and offset table, ``stored_docs``'s layout): what a flipped bit in a block without a checksum, or
    in the skip index, most often breaks.

    Raises:
        CorruptSplitError: it does not (names ``source``).
    """
    if len(block) < 4:
        raise CorruptSplitError(f"{source}: a doc store block of {len(block)} bytes has no document count")
    (count,) = _U32.unpack_from(block, len(block) - 4)
    table = len(block) - 4 - 4 * count
    if count != docs or table < 0:
        raise CorruptSplitError(f"{source}: a doc store block holds {count} documents, its checkpoint says {docs}")
    offsets = np.frombuffer(block, "<u4", count, table)
    if count and (offsets[0] != 0 or bool(np.any(np.diff(offsets.astype(np.int64)) < 0)) or offsets[-1] > table):
        raise CorruptSplitError(f"{source}: a doc store block's document offsets do not rise within it")


def _layer0(skip: memoryview) -> list[tuple[int, int, int, int]]:
    """The finest layer's checkpoints (first doc, end doc, start byte, end byte) of a skip index."""
    layers, pos = decode_vint(skip, 0)
    ends = []
    for _ in range(layers):
        value, pos = decode_vint(skip, pos)
        ends.append(value)
    if not ends:
        return []
    data = skip[pos + (ends[-2] if len(ends) > 1 else 0) : pos + ends[-1]]
    if pos + ends[-1] != len(skip):
        raise ValueError(f"layers end at {pos + ends[-1]}, the skip index at {len(skip)}")
    out: list[tuple[int, int, int, int]] = []
    p = 0
    while p < len(data):
        n, p = decode_vint(data, p)
        doc, p = decode_vint(data, p)
        byte, p = decode_vint(data, p)
        for _ in range(n):
            docs, p = decode_vint(data, p)
            size, p = decode_vint(data, p)
            out.append((doc, doc + docs, byte, byte + size))
            doc, byte = doc + docs, byte + size
    return out


def decompress_block(
    data: bytes | memoryview, compressor: int, source: str, buffer: bytearray | None = None
) -> bytes | memoryview:
    """One block's bytes decompressed (``compressor``: the doc store footer's id); a zstd block
    into ``buffer`` when given (a view of it, or of a new buffer when it is too short).

    Raises:
        CorruptSplitError: the block does not decompress to the length its header gives.
    """
    if compressor == COMPRESSOR_NONE:
        return bytes(data)
    try:
        if len(data) < 4:
            raise ValueError("shorter than its length header")
        (length,) = _U32.unpack_from(data, 0)
        out: bytes | memoryview
        if compressor == COMPRESSOR_LZ4:  # lz4_flex's block with its size first, as cramjam's default reads it
            out = bytes(cramjam.lz4.decompress_block(bytes(data)))
        elif buffer is not None:  # cramjam checks the frame's checksum too
            buffer = buffer if len(buffer) >= length else bytearray(length)
            out = memoryview(buffer)[: cramjam.zstd.decompress_into(data[4:], buffer)]
        else:
            out = zstd.decompress(bytes(data[4:]))
    except (ValueError, RuntimeError, zstd.ZstdError, cramjam.DecompressionError) as e:
        raise CorruptSplitError(f"{source}: a doc store block does not decompress ({e})") from e
    if len(out) != length:
        raise CorruptSplitError(f"{source}: a doc store block decompresses to {len(out)} bytes, not {length}")
    return out


def skip_index(checkpoints: list[tuple[int, int, int, int]]) -> bytes:
    """The skip index of blocks with these (first doc, end doc, start byte, end byte), as
    ``SkipIndexBuilder::serialize_into`` writes it."""
    layers: list[bytearray] = []
    pending: list[list[tuple[int, int, int, int]]] = []  # each layer's checkpoint block being filled

    def flush(layer: int) -> tuple[int, int, int, int] | None:
        block = pending[layer]
        if not block:
            return None
        start = len(layers[layer])
        encode_vint(len(block), layers[layer])
        encode_vint(block[0][0], layers[layer])
        encode_vint(block[0][2], layers[layer])
        for first, end, lo, hi in block:
            encode_vint(end - first, layers[layer])
            encode_vint(hi - lo, layers[layer])
        pending[layer] = []
        return (block[0][0], block[-1][1], start, len(layers[layer]))

    def insert(layer: int, checkpoint: tuple[int, int, int, int]) -> None:
        if layer == len(layers):
            layers.append(bytearray())
            pending.append([])
        pending[layer].append(checkpoint)
        if len(pending[layer]) >= CHECKPOINT_PERIOD:
            up = flush(layer)
            if up is not None:
                insert(layer + 1, up)

    for checkpoint in checkpoints:
        insert(0, checkpoint)
    last = None
    for level in range(len(layers)):
        if last is not None:
            pending[level].append(last)
        last = flush(level)
    out = bytearray()
    encode_vint(len(layers), out)
    total = 0
    for data in reversed(layers):
        total += len(data)
        encode_vint(total, out)
    for data in reversed(layers):
        out += data
    return bytes(out)
