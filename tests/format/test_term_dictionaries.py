"""Term dictionaries (``format/termdict/sstable.py``, ``format/termdict/fst_termdict.py``, ``format/termdict/fst.py``):
the SSTable dictionaries of every real IndexTables4Spark split read and written again byte for
byte, and the FST dictionaries of splits this project writes read and checked against tantivy."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from executor_lib.format.directory import parse_composite, split_footer
from executor_lib.format.quickwit.bundle import read_footer
from executor_lib.format.termdict import fst as fst_module
from executor_lib.format.termdict.convert import ensure_fst_terms, fst_slice, fst_to_sstable
from executor_lib.format.termdict.fst import (
    FstError,
    build_map,
    build_python,
    iter_map,
    read_keys_values,
    read_map,
    read_ordinal_keys,
)
from executor_lib.format.termdict.fst_termdict import (
    _parts,
    fst_map_bytes,
    parse_fst_dictionary,
    read_fst_term_file,
    term_info_columns,
)
from executor_lib.format.termdict.sstable import (
    TermColumns,
    TermDictionary,
    TermInfo,
    dictionary_type,
    encode_sstable,
    encode_sstable_columns,
    encode_sstable_term_file,
    parse_sstable,
    read_sstable_term_file,
)
from executor_lib.format.termdict.sstable_columns import read_sstable_columns
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.write.writer import write_split
from indextables_contract.errors import CorruptSplitError
from tests.conftest import COMPAT_ROOT, requires_compat

REAL_SPLITS = sorted(COMPAT_ROOT.rglob("*.split")) if COMPAT_ROOT.is_dir() else []


def _member(split: Path, suffix: str) -> tuple[str, bytes]:
    footer = read_footer(split)
    (name,) = [n for n in footer.files if n.endswith(suffix)]
    start, end = footer.files[name]
    with open(split, "rb") as f:
        f.seek(start)
        return name, f.read(end - start)


def _num_docs(split: Path) -> int:
    meta = json.loads(_member(split, "meta.json")[1])
    return sum(s["max_doc"] for s in meta["segments"])


def check_dictionary(d: TermDictionary, num_docs: int, where: str) -> None:
    """Terms strictly increasing; each TermInfo's doc_freq in 1..num_docs; postings and positions
    ranges contiguous and increasing (Tantivy writes a field's postings in term order)."""
    assert d.terms == sorted(set(d.terms)), f"{where}: terms not strictly increasing"
    previous = None
    for term, info in zip(d.terms, d.infos, strict=True):
        assert 1 <= info.doc_freq <= num_docs, f"{where}: {term!r} doc_freq {info.doc_freq} of {num_docs} docs"
        assert info.postings_start < info.postings_end, f"{where}: {term!r} has no postings"
        assert info.positions_start <= info.positions_end, f"{where}: {term!r} positions {info}"
        if previous is not None:
            assert info.postings_start == previous.postings_end, f"{where}: {term!r} postings do not follow"
            assert info.positions_start == previous.positions_end, f"{where}: {term!r} positions do not follow"
        previous = info


# --- SSTable dictionaries of the real IndexTables4Spark splits -------------------------------------


@pytest.mark.parametrize("split", REAL_SPLITS, ids=lambda p: str(p.relative_to(COMPAT_ROOT)))
def test_every_real_sstable_term_file_reads_and_encodes_byte_identically(split: Path) -> None:
    name, data = _member(split, ".term")
    term_file = read_sstable_term_file(data, f"{split}:{name}")
    assert term_file.fields, f"{split}: no term dictionaries"
    num_docs = _num_docs(split)
    for field, dictionary in term_file.fields.items():
        check_dictionary(dictionary, num_docs, f"{split} field {field}")
    assert encode_sstable_term_file(term_file) == data, f"{split}: re-encoded .term differs"
    assert split_footer(data, name).crc_matches()


@requires_compat
def test_the_real_splits_cover_compressed_blocks() -> None:
    """Two of the fixtures' dictionaries hold a zstd-compressed block: the byte-identical test above
    covers the compression rule (payload > 2048 bytes, zstd level 3, kept when smaller)."""
    compressed = 0
    for split in REAL_SPLITS:
        body = split_footer(_member(split, ".term")[1], str(split)).body
        for piece in parse_composite(body, str(split)):
            parsed = parse_sstable(piece.data)
            compressed += sum(piece.data[b.start + 4] == 1 for b in parsed.blocks)
    assert compressed >= 2


# --- the writer beyond the fixtures: many blocks, a block index, long keys --------------------------


def _synthetic(n: int, seed: int) -> TermDictionary:
    rng = random.Random(seed)
    terms = sorted({bytes(rng.choice(b"abcdefgh\xff\x00") for _ in range(rng.randint(0, 40))) for _ in range(n)})
    infos = []
    postings = positions = 7
    for _ in terms:
        p, q = rng.randint(1, 300), rng.choice([0, rng.randint(1, 5000)])
        infos.append(TermInfo(rng.randint(1, 10_000), postings, postings + p, positions, positions + q))
        postings, positions = postings + p, positions + q
    return TermDictionary(terms, infos)


@pytest.mark.parametrize("n", [0, 1, 300, 40_000])
def test_multi_block_sstables_round_trip_with_a_consistent_block_index(n: int) -> None:
    d = _synthetic(n, n)
    data = encode_sstable(d)
    parsed = parse_sstable(data)
    assert parsed.dictionary == d
    if parsed.index is None:
        assert len(parsed.blocks) <= 1
        return
    assert [a for _, a in parsed.index] == parsed.blocks  # the block address store, decoded
    for (key, _), following in zip(parsed.index, [*parsed.blocks[1:], None], strict=True):
        last = d.terms[(following.first_ordinal if following else len(d.terms)) - 1]
        assert last <= key, "an index key below its block's last term"
        if following is not None:
            assert key < d.terms[following.first_ordinal], "an index key reaches into the next block"


def test_the_writer_refuses_what_an_sstable_cannot_hold() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        encode_sstable(TermDictionary([b"b", b"a"], [TermInfo(1, 0, 1, 0, 0), TermInfo(1, 1, 2, 0, 0)]))
    with pytest.raises(ValueError, match="do not follow"):
        encode_sstable(TermDictionary([b"a", b"b"], [TermInfo(1, 0, 1, 0, 0), TermInfo(1, 5, 6, 0, 0)]))


def test_damaged_dictionaries_are_named() -> None:
    good = encode_sstable(_synthetic(300, 1))
    with pytest.raises(CorruptSplitError, match="here: an FST term dictionary"):
        parse_sstable(good[:-4] + b"\x01\x00\x00\x00", "here")
    with pytest.raises(CorruptSplitError, match="here: SSTable"):
        parse_sstable(good[:40] + good[60:], "here")
    with pytest.raises(CorruptSplitError, match="here: an SSTable term dictionary, not an FST"):
        parse_fst_dictionary(good, "here")


# --- FST maps and the FST dictionaries of this project's splits -------------------------------------


def test_fst_maps_round_trip_and_refuse_unsorted_keys() -> None:
    rng = random.Random(3)
    keys = sorted({bytes(rng.randrange(256) for _ in range(rng.randint(1, 12))) for _ in range(5000)})
    items = [(k, rng.randrange(1 << rng.choice([1, 8, 20, 40, 63]))) for k in keys]
    built = build_map(items)
    assert read_map(built) == items
    assert list(iter_map(built)) == items  # the Python walk (the fallback without ducer) agrees
    assert build_python(items) == built  # and so does the Python builder, byte for byte
    assert read_map(build_map([(b"", 5), (b"a", 0)])) == [(b"", 5), (b"a", 0)]
    for small in ([], [(b"", 0)], [(b"a", 0)], [(b"ab", 7), (b"ac", 1)]):  # maps of a few bytes read too
        assert read_map(build_python(small)) == small
    for build in (build_map, build_python):
        with pytest.raises(FstError, match="strictly increasing"):
            build([(b"b", 0), (b"a", 1)])


def test_fst_reads_refuse_damaged_maps() -> None:
    good = build_map([(b"alpha", 1), (b"beta", 2), (b"gamma", 3)])
    for damaged in (good[:20], b"\x03" + good[1:], good[:-16] + (99).to_bytes(8, "little") + good[-8:]):
        with pytest.raises(FstError):
            read_keys_values(damaged)


def test_fst_fallback_without_ducer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the ``ducer`` package the Python walk and builder give the same maps."""
    rng = random.Random(5)
    items = [(k, i) for i, k in enumerate(sorted({rng.randbytes(rng.randint(1, 9)) for _ in range(2000)}))]
    with_ducer = build_map(items)
    monkeypatch.setattr(fst_module, "_ducer", None)
    assert build_map(items) == with_ducer
    assert read_keys_values(with_ducer) == ([k for k, _ in items], [v for _, v in items])


@pytest.mark.parametrize("rust", [True, False], ids=["ducer", "python"])
def test_ordinal_keys_read_and_refuse_values_that_are_not_ordinals(rust: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A term dictionary's FST (values 0..n-1) gives its keys; one whose values are not the
    ordinals is refused, whether the bad value is a sampled one, the last, or (Python) any."""
    rng = random.Random(7)
    keys = sorted({rng.randbytes(rng.randint(1, 12)) for _ in range(5000)})
    if not rust:
        monkeypatch.setattr(fst_module, "_ducer", None)
    assert read_ordinal_keys(build_map(list(zip(keys, range(len(keys)), strict=True)))) == keys
    assert read_ordinal_keys(build_map([])) == []
    for bad in (0, fst_module.ORDINAL_SAMPLE_STEP, len(keys) - 1):
        values = list(range(len(keys)))
        values[bad] += 1 if bad < len(keys) - 1 else 5
        with pytest.raises(FstError, match=f"key {bad} has the value"):
            read_ordinal_keys(build_map(list(zip(keys, values, strict=True))))


def test_long_shared_prefixes_and_long_keys_encode() -> None:
    """Keys sharing more than the 32 bytes compared at once, and keys past 16 bytes (the LEB128
    delta header), round-trip through the columnar SSTable writer."""
    stem = b"x" * 70
    terms = sorted({stem + bytes([a]) * b for a in range(97, 110) for b in range(1, 40)} | {b"a" * 300, b"b"})
    infos = np.array([[1, i * 2, i * 2 + 2, 0, 0] for i in range(len(terms))], np.int64)
    data = encode_sstable_columns(TermColumns.from_terms(terms, infos), block_len=600)
    assert parse_sstable(data).dictionary == TermDictionary(terms, [TermInfo(*r) for r in infos.tolist()])
    assert data == encode_sstable(TermDictionary(terms, [TermInfo(*r) for r in infos.tolist()]), block_len=600)


LOG_WORDS = [f"w{i:04d}{'x' * (i % 13)}" for i in range(3000)]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, pa.Schema]:
    rng = random.Random(7)
    n = 6000
    rows = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "message": [" ".join(rng.choices(LOG_WORDS, k=6)) for _ in range(n)],
            "level": [rng.choice(["INFO", "WARN", "ERROR"]) for _ in range(n)],
            "latency": [rng.random() * 100 for _ in range(n)],
        }
    )
    out = tmp_path_factory.mktemp("split")
    mapping = mapping_for(rows.schema, {"spark.indextables.indexing.typemap.message": "text"})
    return write_split(rows, mapping, out).path, out / "work", rows.schema


def _built_fst_term_file(split: Path, work: Path, schema: pa.Schema) -> tuple[SplitSearcher, str, bytes]:
    """A searcher of ``split`` whose (only) segment's FST ``.term`` was built from its SSTable one for
    every field (``term_convert.ensure_fst_terms``), and that file's name and bytes."""
    searcher = SplitSearcher(split, work, schema, None)
    assert ensure_fst_terms(searcher.index_dir, None)
    (path,) = sorted(searcher.index_dir.glob("*.term"))
    return searcher, path.name, path.read_bytes()


def test_fst_term_file_built_for_a_written_split_matches_tantivy(written: tuple[Path, Path, pa.Schema]) -> None:
    """The FST dictionaries built from a written split's SSTables: every term the reader lists has the
    doc_freq tantivy reports for it (tantivy reading those very dictionaries), and every field's FST
    is what ``fst.build_map`` builds from the listed terms, byte for byte."""
    import tantivy

    split, work, schema = written
    searcher, name, data = _built_fst_term_file(split, work, schema)
    term_file = read_fst_term_file(data, name)
    index = tantivy.Index.open(str(searcher.index_dir))
    meta = json.loads((searcher.index_dir / "meta.json").read_text())
    schema_fields = {i: f["name"] for i, f in enumerate(meta["schema"])}
    tantivy_searcher = index.searcher()
    num_docs = tantivy_searcher.num_docs
    checked = 0
    for field, dictionary in term_file.fields.items():
        check_dictionary(dictionary, num_docs, f"field {field}")
        fname = schema_fields[field]
        for term, info in list(zip(dictionary.terms, dictionary.infos, strict=True))[
            :: max(1, len(dictionary.terms) // 300)
        ]:
            if fname in ("message", "level"):
                query = tantivy.Query.term_query(index.schema, fname, term.decode())
                assert tantivy_searcher.search(query, 1).count == info.doc_freq, (fname, term)
                assert tantivy_searcher.doc_freq(fname, term.decode()) == info.doc_freq
                checked += 1
    assert checked > 300
    for piece in parse_composite(split_footer(data, name).body, name):
        items = [(t, i) for i, t in enumerate(term_file.fields[piece.field].terms)]
        assert build_map(items) == fst_map_bytes(piece.data), f"field {piece.field}"
        store = _parts(piece.data, name)[1]
        assert term_info_columns(store).tolist() == _reference_term_infos(store), f"field {piece.field}"


def _tantivy_term_file(tmp_path: Path, rows: pa.Table, options: dict[str, str]) -> bytes:
    """The ``.term`` file (FST dictionaries) Tantivy itself writes for ``rows``: one segment,
    indexed by the ``tantivy`` package with the schema a split of these rows gets."""
    import tantivy

    from executor_lib.splits.query.check import tantivy_schema

    mapping = mapping_for(rows.schema, options)
    index_dir = tmp_path / "tantivy-index"
    index_dir.mkdir()
    index = tantivy.Index(tantivy_schema(mapping, row_field=False), path=str(index_dir))
    writer = index.writer(50_000_000, 1)
    for row in rows.to_pylist():
        writer.add_document(tantivy.Document.from_dict(row, index.schema))
    writer.commit()
    writer.wait_merging_threads()
    (term,) = sorted(index_dir.glob("*.term"))
    return term.read_bytes()


def test_fst_dictionaries_built_from_sstables_are_the_bytes_tantivy_writes(tmp_path: Path) -> None:
    """Tantivy's own FST ``.term`` file, turned into SSTables (as a split stores it) and back
    (``fst_slice``, as a reader builds it): byte for byte what Tantivy wrote, for every field: many
    blocks of terms and of term infos, text with positions, raw strings, integers and floats."""
    rng = random.Random(11)
    n = 40_000
    rows = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "message": [" ".join(rng.choices(LOG_WORDS, k=5)) + f" tok{i * 7919 % 100_003}" for i in range(n)],
            "level": [rng.choice(["INFO", "WARN", "ERROR"]) for _ in range(n)],
            "latency": [rng.lognormvariate(3, 1) for _ in range(n)],
        }
    )
    original = _tantivy_term_file(tmp_path, rows, {"spark.indextables.indexing.typemap.message": "text"})
    sstables = fst_to_sstable(original, "tantivy .term")
    original_slices = parse_composite(split_footer(original, "fst").body, "fst")
    converted = parse_composite(split_footer(sstables, "sstable").body, "sstable")
    assert [p.field for p in converted] == [p.field for p in original_slices]
    for theirs, ours in zip(original_slices, converted, strict=True):
        assert dictionary_type(ours.data) == 2
        columns = read_sstable_columns(ours.data, f"field {ours.field}")
        assert columns.to_dictionary() == parse_sstable(ours.data).dictionary, f"field {ours.field}"
        assert fst_slice(ours.data, f"field {ours.field}") == theirs.data, f"field {ours.field}"
        assert fst_slice(theirs.data, "an FST slice") == theirs.data  # splits written before: kept as they are


def test_sstable_column_reader_equals_the_term_by_term_reader() -> None:
    """The vectorized reader on dictionaries with long shared prefixes, long keys (past a delta's
    4-bit lengths), empty and one-term blocks' edges, compressed and plain blocks."""
    rng = random.Random(5)
    cases = [
        [b"a"],
        [b"", b"a"],
        sorted({bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) for _ in range(5000)}),
        sorted({b"prefix/" * 5 + str(i).encode() * (1 + i % 9) for i in range(3000)}),
        sorted({b"x" * rng.randrange(1, 600) + bytes([rng.randrange(256)]) for _ in range(400)}),
        [i.to_bytes(8, "big") for i in range(0, 2_000_000, 7)],
    ]
    for terms in cases:
        infos = np.zeros((len(terms), 5), np.int64)
        infos[:, 0] = 1 + np.arange(len(terms)) % 5
        infos[:, 2] = np.cumsum(1 + np.arange(len(terms)) % 11)
        infos[1:, 1] = infos[:-1, 2]
        infos[:, 4] = np.cumsum(np.arange(len(terms)) % 3)
        infos[1:, 3] = infos[:-1, 4]
        for block_len in (16, 4000):
            data = encode_sstable_columns(TermColumns.from_terms(terms, infos), block_len)
            assert read_sstable_columns(data).to_dictionary() == parse_sstable(data).dictionary


def test_the_sstable_column_reader_names_damaged_dictionaries() -> None:
    terms = [f"term{i:05d}".encode() for i in range(2000)]
    infos = np.zeros((len(terms), 5), np.int64)
    infos[:, 0] = 1
    infos[:, 2] = np.arange(1, len(terms) + 1)
    infos[1:, 1] = infos[:-1, 2]
    data = encode_sstable_columns(TermColumns.from_terms(terms, infos), 64)
    with pytest.raises(CorruptSplitError, match="field 9: an FST term dictionary"):
        read_sstable_columns(data[:-4] + b"\x01\x00\x00\x00", "field 9")
    damaged = bytearray(data)
    damaged[20] ^= 0xFF  # inside the first block's values or deltas
    with pytest.raises(CorruptSplitError, match="field 9: SSTable term dictionary does not parse"):
        read_sstable_columns(bytes(damaged), "field 9")
    with pytest.raises(CorruptSplitError, match="field 9"):
        read_sstable_columns(data[:10], "field 9")


def test_term_info_stores_ending_in_a_one_term_block_with_wide_fields() -> None:
    """A block of one term with wide bit fields (its packed bytes end right after its own entry): the
    vectorized reader must not read past the store (a one-term field of a split, seen in CI)."""
    import struct

    for num_terms in (1, 257):
        blocks = -(-num_terms // 256)
        metas, packed = b"", bytearray()
        for b in range(blocks):
            count = min(256, num_terms - 256 * b) - 1
            metas += struct.pack("<QIQIQIBBB", len(packed), 5, 1000 * (b + 1), 7, 0, 0, 24, 28, 28)
            bits = 0
            for i in range(count + 1):  # entries: postings start, positions start, doc freq
                bits |= (7 * i) << (80 * i)
                bits |= (3 * i + 1) << (80 * i + 56) if i < count else 0
            packed += bits.to_bytes((80 * count + 56 + 7) // 8, "little")
        store = struct.pack("<QQ", len(metas), num_terms) + metas + bytes(packed)
        assert term_info_columns(store).tolist() == _reference_term_infos(store)


def _reference_term_infos(data: bytes) -> list[list[int]]:
    """A TermInfoStore decoded one term at a time with Python integers (the reference for the
    vectorized ``term_info_columns``)."""
    import struct

    metas_len, num_terms = struct.unpack_from("<QQ", data, 0)
    metas, packed = data[16 : 16 + metas_len], data[16 + metas_len :]
    out = []
    for block in range(0, len(metas), 39):
        offset, df, p_start, p_len, q_start, q_len, df_bits, p_bits, q_bits = struct.unpack_from(
            "<QIQIQIBBB", metas, block
        )
        out.append([df, p_start, p_start + p_len, q_start, q_start + q_len])
        count = min(256, num_terms - len(out) + 1) - 1
        nbits = df_bits + p_bits + q_bits
        bits = int.from_bytes(packed[offset : offset + (nbits * count + p_bits + q_bits + 7) // 8], "little")

        def field(at: int, width: int, bits: int = bits) -> int:
            return (bits >> at) & ((1 << width) - 1)

        for i in range(count):
            at, nxt = nbits * i, nbits * (i + 1)
            out.append(
                [
                    field(at + p_bits + q_bits, df_bits),
                    p_start + field(at, p_bits),
                    p_start + field(nxt, p_bits),
                    q_start + field(at + p_bits, q_bits),
                    q_start + field(nxt + p_bits, q_bits),
                ]
            )
    return out


# --- SSTable .term members of the splits this project writes (term_convert.py) ----------------------


def _term_members(split: Path) -> dict[str, bytes]:
    """Per segment ``.term`` member, its bytes; a split written now has no ``.term.fst`` member."""
    footer = read_footer(split)
    data = split.read_bytes()
    assert not [n for n in footer.files if n.endswith(".term.fst")], f"{split}: FST dictionaries stored"
    return {name: data[s:e] for name, (s, e) in footer.files.items() if name.endswith(".term")}


def check_sstable_terms(split: Path, work: Path, schema: pa.Schema) -> int:
    """Every segment's ``.term`` holds SSTable dictionaries, which the vectorized reader reads as the
    term-by-term one does, and from which a reader builds FST dictionaries of the same terms and
    TermInfos; the hotcache lists the SSTable's length. Returns the term count."""
    from executor_lib.format.quickwit.bundle import read_hotcache

    hot = read_hotcache(split)
    terms = 0
    members = _term_members(split)
    assert members, f"{split}: no .term member"
    searcher = SplitSearcher(split, work, schema, None)
    ensure_fst_terms(searcher.index_dir, None)
    for name, sstable in members.items():
        ours = read_sstable_term_file(sstable, name)
        theirs = read_fst_term_file((searcher.index_dir / name).read_bytes(), f"built {name}")
        assert list(ours.fields) == list(theirs.fields), f"{split}: {name} fields differ"
        for piece in parse_composite(split_footer(sstable, name).body, name):
            assert read_sstable_columns(piece.data).to_dictionary() == ours.fields[piece.field]
        for field, dictionary in theirs.fields.items():
            assert ours.fields[field] == dictionary, f"{split}: {name} field {field} differs from the FST"
            terms += len(dictionary.terms)
        assert split_footer(sstable, name).crc_matches()
        assert ours.version == theirs.version
        assert hot.file_lengths[name] == len(sstable)
    return terms


def test_written_splits_hold_sstable_terms_equal_to_their_fst(written: tuple[Path, Path, pa.Schema]) -> None:
    split, work, schema = written
    assert check_sstable_terms(split, work.parent / "check", schema) > 6000


def test_every_field_type_converts(tmp_path: Path) -> None:
    """Text, raw strings, numbers, dates, bytes, booleans, IP addresses and JSON (several term types
    in one field) all convert; the split answers queries through the FSTs built from them."""
    import datetime

    n = 500
    rows = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "u": pa.array(range(n), pa.uint64()),
            "f": [i / 3 for i in range(n)],
            "ok": [i % 2 == 0 for i in range(n)],
            "name": [f"name {i % 17}" for i in range(n)],
            "text": [f"alpha beta{i % 31} gamma{i}" for i in range(n)],
            "day": pa.array([datetime.date(2024, 1, 1 + i % 28) for i in range(n)], pa.date32()),
            "at": pa.array([datetime.datetime(2024, 1, 1, i % 24) for i in range(n)], pa.timestamp("us")),
            "blob": pa.array([bytes([i % 256, 7]) for i in range(n)], pa.binary()),
            "ip": [f"10.0.{i % 4}.{i % 250}" for i in range(n)],
            "attrs": pa.array([{"color": ("red", "blue")[i % 2], "size": i % 9} for i in range(n)]),
        }
    )
    options = {"spark.indextables.indexing.typemap.text": "text", "spark.indextables.indexing.typemap.ip": "ip"}
    split = write_split(rows, mapping_for(rows.schema, options), tmp_path).path
    assert check_sstable_terms(split, tmp_path / "check", rows.schema) > 2 * n
    searcher = SplitSearcher(split, tmp_path / "work", rows.schema, None)
    assert searcher.count("text:gamma7") == 1
    assert searcher.count("text:beta3") == len(range(3, n, 31))
    assert searcher.count("attrs.color:red") == n // 2
    assert searcher.count('name:"name 5"') == len(range(5, n, 17))


def _as_written_before(split: Path, out: Path, schema: pa.Schema) -> Path:
    """The same split as written before SSTable members: FST dictionaries in ``<segment>.term``."""
    from executor_lib.format.quickwit.bundle import write_bundle

    footer = read_footer(split)
    data = split.read_bytes()
    members = {n: data[s:e] for n, (s, e) in footer.files.items()}
    _, name, fst = _built_fst_term_file(split, out.parent / "built-before", schema)
    members[name] = fst
    write_bundle(members, out)
    return out


def test_splits_written_before_still_open_and_merges_convert_them(tmp_path: Path) -> None:
    from executor_lib.splits.write.merge import MergeSource, merge_sources

    rows = pa.table({"id": pa.array(range(300), pa.int64()), "msg": [f"hello w{i % 7} n{i}" for i in range(300)]})
    mapping = mapping_for(rows.schema, {"spark.indextables.indexing.typemap.msg": "text"})
    new = write_split(rows.slice(0, 150), mapping, tmp_path / "new").path
    old = _as_written_before(
        write_split(rows.slice(150), mapping, tmp_path / "old").path, tmp_path / "old.split", rows.schema
    )
    assert all(
        dictionary_type(parse_composite(split_footer(t, n).body, n)[0].data) == 1 for n, t in _term_members(old).items()
    )
    old_searcher = SplitSearcher(old, tmp_path / "w-old", rows.schema, None)
    assert old_searcher.count("msg:w3") == len([i for i in range(150, 300) if i % 7 == 3])
    sources = [MergeSource.from_bundle(p) for p in (new, old)]
    assert all(s is not None for s in sources)
    merged = merge_sources([s for s in sources if s is not None], mapping, tmp_path / "merged").path
    assert len(_term_members(merged)) == 2  # the segments were combined, not indexed again
    check_sstable_terms(merged, tmp_path / "check", rows.schema)
    searcher = SplitSearcher(merged, tmp_path / "w-merged", rows.schema, None)
    assert searcher.count("msg:w3") == len([i for i in range(300) if i % 7 == 3])
    assert searcher.search("msg:n299", ["id"]).column("id").to_pylist() == [299]


def _package_count(searcher: SplitSearcher, query: str) -> int:
    """A count through the ``tantivy`` package's index (its jobs still need FST dictionaries, built as
    their queries need them: ``SplitSearcher._query``); ``count`` itself runs on the native engine."""
    compiled = searcher._query(query)  # first: it may open the index again
    return int(searcher.searcher.search(compiled, 1, count=True).count)


def test_native_queries_build_no_dictionary(written: tuple[Path, Path, pa.Schema], tmp_path: Path) -> None:
    """The native engine reads the split's SSTable dictionaries in place: its searches and counts
    build no FST, and nothing of the split is extracted (no ``tantivy`` package index is opened)."""
    split, _, schema = written
    searcher = SplitSearcher(split, tmp_path / "w", schema, None)
    word = LOG_WORDS[17]
    messages = searcher.search(None, ["message"]).column("message").to_pylist()
    assert searcher.count(f"message:{word}") == sum(word in m.split() for m in messages)
    assert searcher.count(f"message:{word} AND level:[A TO Z]") > 0  # a range: through Tantivy's parser
    assert searcher._native_split() is not None and searcher._index is None
    assert not (tmp_path / "w" / "index").exists()
    assert searcher._fields_to_build >= {searcher._field_names.index("message")}, "the package would build it"


def test_queries_build_only_their_fields_dictionaries_and_searchers_sharing_them_reopen(
    written: tuple[Path, Path, pa.Schema], tmp_path: Path
) -> None:
    """A split's FST dictionaries are built field by field, as queries need them; two searchers of
    one directory (as two processes of a node share a cache entry) each open the index again over
    dictionaries the other built, and every count is right."""
    split, _, schema = written
    first = SplitSearcher(split, tmp_path / "shared", schema, None)
    everything = first.search(None)
    fields = {name: i for i, name in enumerate(first._field_names)}
    assert first._fields_to_build >= {fields["message"], fields["level"], fields["id"]}
    word = LOG_WORDS[17]
    expected = sum(word in m.split() for m in everything.column("message").to_pylist())
    assert _package_count(first, f"message:{word}") == expected
    assert fields["message"] not in first._fields_to_build and fields["level"] in first._fields_to_build
    (term,) = sorted(first.index_dir.glob("*.term"))
    assert {p.field for p in parse_composite(split_footer(term.read_bytes(), "t").body, "t")} == {fields["message"]}
    second = SplitSearcher(split, tmp_path / "shared", schema, None)  # the entry as extracted: reused
    assert second._fields_to_build == first._fields_to_build
    levels = everything.column("level").to_pylist()
    assert _package_count(first, "level:WARN") == levels.count("WARN")  # builds level's; second's index predates it
    assert _package_count(second, "level:ERROR") == levels.count("ERROR")
    assert fields["level"] not in second._fields_to_build and fields["id"] in second._fields_to_build
    ids = everything.column("id").to_pylist()
    assert second.search("id:4321", ["id"]).column("id").to_pylist() == [4321] == [i for i in ids if i == 4321]
    assert first.count("*") == len(ids)


def test_a_field_one_segment_lacks_is_built_once_in_a_merged_split(tmp_path: Path) -> None:
    """A merged split whose second segment has no term of a column (all null there): a query on it
    builds the first segment's dictionary, and then nothing is left to build for it."""
    from executor_lib.splits.write.merge import MergeSource, merge_sources

    rows = pa.table(
        {"id": pa.array(range(200), pa.int64()), "tag": [f"t{i % 5}" if i < 100 else None for i in range(200)]}
    )
    mapping = mapping_for(rows.schema, {})
    parts = [write_split(rows.slice(0, 100), mapping, tmp_path / "a").path]
    parts.append(write_split(rows.slice(100), mapping, tmp_path / "b").path)
    sources = [MergeSource.from_bundle(p) for p in parts]
    merged = merge_sources([s for s in sources if s is not None], mapping, tmp_path / "merged").path
    assert len(_term_members(merged)) == 2
    searcher = SplitSearcher(merged, tmp_path / "work", rows.schema, None)
    tag = searcher._field_names.index("tag")
    assert tag in searcher._fields_to_build
    assert _package_count(searcher, "tag:t3") == 20
    assert tag not in searcher._fields_to_build
    assert searcher.search("tag:t4", ["id"]).column("id").to_pylist() == list(range(4, 100, 5))


def test_a_damaged_sstable_fails_the_query_naming_the_file(
    written: tuple[Path, Path, pa.Schema], tmp_path: Path
) -> None:
    """A field's SSTable slice that reads as zeros (a hole, a lost fetch) fails the query that
    needs it, naming the file and field; it never builds an empty dictionary."""
    import os

    split, _, schema = written
    searcher = SplitSearcher(split, tmp_path / "w", schema, None)
    (sstable,) = sorted(searcher.index_dir.glob("*.term.sstable"))
    message = searcher._field_names.index("message")
    pieces = {p.field: p for p in parse_composite(split_footer(sstable.read_bytes(), "s").body, "s")}
    data = sstable.read_bytes()
    at = data.index(pieces[message].data)
    with open(sstable, "r+b") as f:
        os.pwrite(f.fileno(), bytes(len(pieces[message].data)), at)
    with pytest.raises(CorruptSplitError, match=rf"term\.sstable field {message}: .*term dictionary"):
        _package_count(searcher, f"message:{LOG_WORDS[3]}")
    assert _package_count(searcher, "level:INFO") > 0  # the other fields still build and answer


def test_splits_with_fst_members_still_read_as_before(written: tuple[Path, Path, pa.Schema], tmp_path: Path) -> None:
    """A split as the previous version wrote it (SSTable ``.term`` plus its FST ``.term.fst``
    member): the FST member is laid out as ``.term``, nothing is built, queries answer; a merge of
    it drops the FST member."""
    from executor_lib.format.quickwit.bundle import write_bundle
    from executor_lib.splits.write.merge import MergeSource, merge_sources

    split, _, schema = written
    footer = read_footer(split)
    data = split.read_bytes()
    members: dict[str, bytes] = {}
    _, name, fst = _built_fst_term_file(split, tmp_path / "built", schema)
    for member, (s, e) in footer.files.items():
        members[member] = data[s:e]
        if member == name:
            members[name + ".fst"] = fst
    before = write_bundle(members, tmp_path / "previous.split")
    assert name + ".fst" in before.files
    searcher = SplitSearcher(tmp_path / "previous.split", tmp_path / "w", schema, None)
    assert searcher._fields_to_build == set() and not list(searcher.index_dir.glob("*.term.sstable"))
    assert (searcher.index_dir / name).read_bytes() == fst
    levels = searcher.search(None, ["level"]).column("level").to_pylist()
    assert searcher.count("level:WARN") == levels.count("WARN") > 0
    source = MergeSource.from_bundle(tmp_path / "previous.split")
    assert source is not None
    merged = merge_sources([source], searcher.mapping, tmp_path / "merged").path
    check_sstable_terms(merged, tmp_path / "check", schema)  # asserts no .term.fst member
