"""The doc store container (``format/store/blocks.py``): the skip index as Tantivy writes it (checked
byte for byte against stores the ``tantivy`` package, the native writer and IndexTables4Spark
wrote), the native writer's zstd blocks,
and the empty stand-in the ``tantivy`` package opens (``format.quickwit.bundle.empty_doc_store``)."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import tantivy

from executor_lib.format.directory import split_footer
from executor_lib.format.quickwit.bundle import (
    LOCAL_STORE_SUFFIX,
    empty_doc_store,
    extract_bundle,
    read_footer,
    read_member,
)
from executor_lib.format.store import blocks as doc_store
from executor_lib.format.termdict.convert import ensure_fst_terms
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.write.writer import write_split
from indextables_contract.errors import CorruptSplitError
from tests.conftest import COMPAT_ROOT

REAL_SPLITS = sorted(COMPAT_ROOT.rglob("*.split")) if COMPAT_ROOT.is_dir() else []


def _lz4_store(tmp_path: Path, docs: int) -> bytes:
    """A doc store the ``tantivy`` package writes (lz4, 16 KB blocks) for ``docs`` documents."""
    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("id", stored=True)
    sb.add_text_field("body", stored=True)
    (tmp_path / "lz4").mkdir()
    index = tantivy.Index(sb.build(), path=str(tmp_path / "lz4"))
    writer = index.writer(50_000_000, 1)
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(2000)]
    for i in range(docs):
        writer.add_document(tantivy.Document(id=i, body=" ".join(rng.choice(words, 20))))
    writer.commit()
    writer.wait_merging_threads()
    (store,) = (tmp_path / "lz4").glob("*.store")
    return store.read_bytes()


def _skip_index(data: bytes) -> bytes:
    body = split_footer(data, "store").body
    _, offset, _ = doc_store.DOC_STORE_FOOTER.unpack_from(body, len(body) - doc_store.DOC_STORE_FOOTER.size)
    return body[offset : len(body) - doc_store.DOC_STORE_FOOTER.size]


def _documents(store: doc_store.DocStore) -> list[bytes]:
    out = []
    for i in range(len(store.start)):
        block = store.block(i, "test")
        (count,) = struct.unpack_from("<I", block, len(block) - 4)
        table = len(block) - 4 - 4 * count
        offsets = [*np.frombuffer(block, "<u4", count, table).tolist(), table]
        out += [block[offsets[j] : offsets[j + 1]] for j in range(count)]
    return out


def _checkpoints(store: doc_store.DocStore) -> list[tuple[int, int, int, int]]:
    return list(zip(*(a.tolist() for a in (store.first_doc, store.end_doc, store.start, store.end)), strict=True))


def test_the_skip_index_is_written_as_tantivy_writes_it(tmp_path: Path) -> None:
    """Over 64 blocks, so three layers: parsed, then written again, byte for byte the same."""
    data = _lz4_store(tmp_path, 40_000)
    store = doc_store.parse_store(data, "store")
    assert len(store.start) > 64 and store.num_docs == 40_000 and store.compressor == doc_store.COMPRESSOR_LZ4
    assert doc_store.skip_index(_checkpoints(store)) == _skip_index(data)


@pytest.mark.skipif(not REAL_SPLITS, reason="compat tables not present")
def test_the_skip_indexes_of_indextables4spark_splits_are_written_the_same() -> None:
    for split in REAL_SPLITS:
        footer = read_footer(split)
        for name in [n for n in footer.files if n.endswith(".store")]:
            data = read_member(split, footer, name)
            assert data is not None
            store = doc_store.parse_store(data, f"{split}: {name}")
            assert doc_store.skip_index(_checkpoints(store)) == _skip_index(data), f"{split}: {name}"


def test_the_native_writer_stores_documents_in_checksummed_zstd_blocks(tmp_path: Path) -> None:
    """Over 64 blocks (three skip layers): every document in a zstd block of about
    ``ZSTD_BLOCK_BYTES`` whose frame carries a checksum, the skip index and file footer as Tantivy
    writes them (byte for byte), and a flipped byte in a block an error, never a wrong row."""
    rng = np.random.default_rng(3)
    words = np.array([f"w{i}" for i in range(3000)])
    body = [" ".join(rng.choice(words, 30)) for _ in range(40_000)]
    rows = pa.table({"id": pa.array(range(40_000), pa.int64()), "body": body})
    mapping = mapping_for(rows.schema, {"spark.indextables.indexing.typemap.body": "text"})
    written = write_split(rows, mapping, tmp_path, threads=1)  # one segment, one store
    docs = 0
    for name in [n for n in written.footer.files if n.endswith(".store")]:
        data = read_member(written.path, written.footer, name)
        assert data is not None
        store = doc_store.parse_store(data, name)
        assert store.compressor == doc_store.COMPRESSOR_ZSTD and store.version == doc_store.DOC_STORE_VERSION
        assert split_footer(data, name).crc_matches()
        assert doc_store.skip_index(_checkpoints(store)) == _skip_index(data)
        blocks = [store.block(i, name) for i in range(len(store.start))]
        assert len(blocks) > 64 and all(len(b) > 0.95 * doc_store.ZSTD_BLOCK_BYTES for b in blocks[:-1])
        for start in store.start.tolist():  # the zstd frame after the u32 length: magic, then its descriptor
            frame = store.blocks[start + 4 :]
            assert bytes(frame[:4]) == b"\x28\xb5\x2f\xfd" and frame[4] & 0b100, "content checksum flag"
        docs += sum(struct.unpack_from("<I", b, len(b) - 4)[0] for b in blocks)
        flipped = bytearray(data)
        flipped[int(store.start[1]) + 40] ^= 0x10
        with pytest.raises(CorruptSplitError, match="does not decompress"):
            doc_store.parse_store(bytes(flipped), name).block(1, name)
    assert docs == 40_000


def test_a_written_split_stores_zstd_blocks_and_searches_through_a_stand_in(tmp_path: Path) -> None:
    rows = pa.table({"id": pa.array(range(5000), pa.int64()), "body": [f"row {i} fox" for i in range(5000)]})
    mapping = mapping_for(rows.schema, {"spark.indextables.indexing.typemap.body": "text"})
    written = write_split(rows, mapping, tmp_path)
    (name,) = [n for n in written.footer.files if n.endswith(".store")]
    data = read_member(written.path, written.footer, name)
    assert data is not None and doc_store.parse_store(data, name).compressor == doc_store.COMPRESSOR_ZSTD
    extract_bundle(written.path, written.footer, tmp_path / "x")
    stand_in = (tmp_path / "x" / name).read_bytes()
    assert (tmp_path / "x" / (name[: -len(".store")] + LOCAL_STORE_SUFFIX)).read_bytes() == data
    assert doc_store.parse_store(stand_in, "stand-in").num_docs == 0
    index = tantivy.Index.open(str(tmp_path / "x"))
    with pytest.raises(ValueError, match="term dictionary"):  # FSTs not built yet: an error, never no hit
        index.searcher().search(index.parse_query("fox", ["body"]), 3)
    assert ensure_fst_terms(tmp_path / "x", None)  # the FST dictionaries, from the split's SSTables
    index = tantivy.Index.open(str(tmp_path / "x"))
    searcher = index.searcher()
    hits = searcher.search(index.parse_query("fox", ["body"]), 3).hits
    assert searcher.num_docs == 5000 and len(hits) == 3
    with pytest.raises(ValueError):  # a stored document read through the stand-in fails, never a wrong row
        searcher.doc(hits[0][1])
    searcher = SplitSearcher(written.path, tmp_path / "w", rows.schema, None)
    found = searcher.search('body:"row 4321"', ["id"])
    assert found.column("id").to_pylist() == [4321]
    assert not list(searcher.index_dir.glob(f"*{LOCAL_STORE_SUFFIX}")), "rows are read in the split file, not copied"


def test_damaged_doc_stores_are_named(tmp_path: Path) -> None:
    data = _lz4_store(tmp_path, 3000)
    store = doc_store.parse_store(data, "store")
    body = split_footer(data, "s").body
    offset = int(store.end[-1])
    cut = body[: offset + 1] + body[len(body) - doc_store.DOC_STORE_FOOTER.size :]  # skip index cut short
    with pytest.raises(CorruptSplitError, match=r"s1\.split: .*skip index"):
        doc_store.parse_store(cut + data[len(body) :], "s1.split: x.store")
    with pytest.raises(CorruptSplitError, match=r"s2\.split: a doc store block"):
        doc_store.decompress_block(b"\x10\x00\x00\x00garbage", doc_store.COMPRESSOR_ZSTD, "s2.split")
    with pytest.raises(CorruptSplitError, match=r"s3\.split: the doc store's Tantivy footer"):
        empty_doc_store(b"not a footer", "s3.split")


def _rows_in_store(tmp_path: Path, n: int, block_bytes: int) -> tuple[pa.Table, SplitSearcher]:
    """``n`` rows written to a split that keeps them in zstd doc store blocks of ``block_bytes``, and its searcher."""
    rows = pa.table({"id": pa.array(range(n), pa.int64()), "body": [f"row {i} " + "w" * (i % 50) for i in range(n)]})
    mapping = mapping_for(rows.schema, {"spark.indextables.indexing.typemap.body": "text"})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(doc_store, "ZSTD_BLOCK_BYTES", block_bytes)
        written = write_split(rows, mapping, tmp_path)
    return rows, SplitSearcher(written.path, tmp_path / "w", rows.schema, None)


def test_rows_taken_from_blocks_equal_arrows_take(tmp_path: Path) -> None:
    """Rows taken from the doc stores (their documents gathered from many blocks, decoded at once),
    in any order with repeats, cold and from the process's block cache, with any projection, equal
    Arrow's take over the rows written."""
    from executor_lib.splits.rows import doc_store_rows as store_rows

    n = 20_000
    rows, searcher = _rows_in_store(tmp_path, n, 32 << 10)
    assert isinstance(searcher.rows, store_rows.DocStoreRows)
    ids = pa.array(np.random.default_rng(5).integers(0, n, 300), pa.uint64())
    for _ in range(2):  # cold, then from the block cache
        assert searcher.rows.take(ids).equals(rows.take(ids))
    assert searcher.rows.select(["body"]).take(ids).column("body").equals(rows.take(ids).column("body"))
    every = pa.array(range(n), pa.uint64())
    assert searcher.rows.take(every).equals(rows) and searcher.rows.read_all().equals(rows)


def test_a_read_of_many_blocks_decompresses_on_threads_and_keeps_none(tmp_path: Path) -> None:
    """A read of more than ``KEPT_READ_BLOCKS`` blocks (a query's many hits) decompresses them into
    reused buffers on the read threads and keeps none decompressed; a read of a few keeps them; a
    damaged block on either path is named (the split and the block), never read as other rows."""
    from executor_lib.splits.rows import doc_store_rows as store_rows

    n = 20_000
    rows, searcher = _rows_in_store(tmp_path, n, 16 << 10)
    (segment,) = searcher.rows._segments
    segment.copy = None  # no unpacked copy kept (tests/splits/rows/test_unpacked_store.py): every read decompresses
    blocks = len(segment.store.start)
    assert blocks > 4 * store_rows.KEPT_READ_BLOCKS
    store_rows._BLOCKS.clear()
    many = pa.array(np.arange(0, n, 7), pa.uint64())  # a row in every block
    assert searcher.rows.take(many).equals(rows.take(many))
    kept = lambda: [i for i in range(blocks) if store_rows._BLOCKS.get((segment.key, i)) is not None]  # noqa: E731
    assert kept() == [], "a read of many blocks keeps none"
    few = pa.array([1, 2, 3], pa.uint64())
    assert searcher.rows.take(few).equals(rows.take(few))
    assert kept() == [0], "a read of a few keeps them"
    assert searcher.rows.take(many).equals(rows.take(many)), "kept blocks and fresh ones mix"

    store_rows._BLOCKS.clear()
    data = bytearray(segment.store.blocks)
    middle = int(segment.store.start[blocks // 2]) + 40  # inside block blocks // 2's zstd frame
    data[middle] ^= 0x04
    damaged = store_rows.SegmentStore(
        dataclasses.replace(segment.store, blocks=memoryview(bytes(data))), "s9.split: x.store"
    )
    columns = searcher.rows._columns()
    docs = np.arange(0, n, 7)
    with pytest.raises(CorruptSplitError, match=r"s9\.split: x\.store.*(block|decompress)"):
        damaged.take(docs, columns)
    with pytest.raises(CorruptSplitError, match=r"s9\.split: x\.store"):
        damaged.take(
            np.arange(int(segment.store.first_doc[blocks // 2]), int(segment.store.end_doc[blocks // 2])), columns
        )
