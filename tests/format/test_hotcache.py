"""The split hotcache (``format/quickwit/hotcache.py``): Quickwit's HotDirectory format, read from every
real IndexTables4Spark split and from every kind of split this project writes.

Where Quickwit's format and this reading of it could drift, the assertions name the split, the
file and the field.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pyarrow as pa
import pytest

from executor_lib.format.directory import parse_composite, split_footer
from executor_lib.format.quickwit.bundle import BundleFooter, read_footer, read_hotcache, write_bundle
from executor_lib.format.quickwit.hotcache import (
    HOTCACHE_MAGIC,
    CachedSlice,
    FileSliceCache,
    HotCache,
    build_hotcache,
    choose_ranges,
    encode_hotcache,
    encode_varint,
    index_files,
    parse_hotcache,
)
from executor_lib.format.termdict.sstable import dictionary_type
from indextables_contract.errors import CorruptSplitError
from tests.conftest import COMPAT_ROOT

REAL_SPLITS = sorted(COMPAT_ROOT.rglob("*.split")) if COMPAT_ROOT.is_dir() else []


def _members(split: Path, footer: BundleFooter) -> dict[str, bytes]:
    data = split.read_bytes()
    return {name: data[s:e] for name, (s, e) in footer.files.items()}


def check_hotcache(split: Path) -> HotCache:
    """Parse ``split``'s hotcache and check it against the bundle: it lists exactly the files of the
    Tantivy index (those ``meta.json`` names, as Quickwit's ``list_index_files``) with their real
    lengths, gives each a slice cache, and every cached slice holds the file's bytes."""
    footer = read_footer(split)
    members = _members(split, footer)
    hot = read_hotcache(split)
    expected = index_files(members.get("meta.json"), members)
    assert "meta.json" in expected and any(n.endswith(".idx") for n in expected), f"{split}: {sorted(members)}"
    assert sorted(hot.file_lengths) == expected, (
        f"{split}: file_lengths lists {sorted(hot.file_lengths)}, the index files are {expected}"
    )
    for name in expected:
        assert hot.file_lengths[name] == len(members[name]), (
            f"{split}: file_lengths[{name!r}] = {hot.file_lengths[name]}, the member has {len(members[name])} bytes"
        )
        assert name in hot.slice_caches, f"{split}: no slice cache for {name!r}"
        cache = hot.slice_caches[name]
        assert cache.total_len == len(members[name]), f"{split}: {name!r} slice cache total_len {cache.total_len}"
        for piece in cache.slices:
            assert piece.data == members[name][piece.start : piece.stop], (
                f"{split}: {name!r} cached slice {piece.start}..{piece.stop} differs from the file's bytes"
            )
    return hot


# --- real IndexTables4Spark splits ---------------------------------------------------------------


@pytest.mark.parametrize("split", REAL_SPLITS, ids=lambda p: str(p.relative_to(COMPAT_ROOT)))
def test_every_real_split_hotcache_parses_and_matches_its_bundle(split: Path) -> None:
    hot = check_hotcache(split)
    for name in ("meta.json", ".managed.json"):
        assert hot.slice_caches[name].is_complete(), f"{split}: {name} is not cached whole"
    assert "split_fields" not in hot.file_lengths  # a Quickwit member, not a Tantivy file


@pytest.mark.parametrize("split", REAL_SPLITS[:20], ids=lambda p: str(p.relative_to(COMPAT_ROOT)))
def test_layout_rules_cover_what_real_splits_cache(split: Path) -> None:
    """``choose_ranges`` derives from Tantivy's file layouts what Quickwit recorded by tracing:
    for the doc store, fast fields, postings, positions, fieldnorms and (SSTable) term dictionaries
    of the real splits, every byte they cache is in our ranges."""
    footer = read_footer(split)
    members = _members(split, footer)
    hot = read_hotcache(split)
    for name, cache in hot.slice_caches.items():
        if name.rsplit(".", 1)[-1] not in ("store", "fast", "idx", "pos", "fieldnorm", "term"):
            continue
        data = members[name]
        ours = _layout_only_ranges(name, data)
        for piece in cache.slices:
            assert any(s <= piece.start and piece.stop <= e for s, e in ours), (
                f"{split}: {name!r} real cached slice {piece.start}..{piece.stop} (file of {len(data)} bytes) "
                f"is outside our ranges {ours}"
            )


def _layout_only_ranges(name: str, data: bytes) -> list[tuple[int, int]]:
    import executor_lib.format.quickwit.hotcache as hotcache_module

    saved = hotcache_module.WHOLE_FILE_MAX_BYTES
    hotcache_module.WHOLE_FILE_MAX_BYTES = 0  # real files are tiny: derive from the layout, not "whole"
    try:
        return choose_ranges(name, len(data), lambda s, e: data[s:e])
    finally:
        hotcache_module.WHOLE_FILE_MAX_BYTES = saved


@pytest.mark.parametrize("split", REAL_SPLITS[:5], ids=lambda p: str(p.relative_to(COMPAT_ROOT)))
def test_a_real_hotcache_survives_our_encoder(split: Path) -> None:
    hot = read_hotcache(split)
    again = parse_hotcache(encode_hotcache(hot), "re-encoded")
    assert dict(again.file_lengths) == dict(hot.file_lengths)
    assert dict(again.slice_caches) == dict(hot.slice_caches)


# --- splits this project writes --------------------------------------------------------------------

ROWS = pa.table(
    {
        "id": pa.array(range(300), pa.int64()),
        "level": [("INFO", "WARN", "ERROR")[i % 3] for i in range(300)],
        "latency": [i / 7 for i in range(300)],
        "message": [f"request {i} served by host{i % 5} in {i % 13} ms" for i in range(300)],
    }
)
OPTIONS = {"spark.indextables.indexing.typemap.message": "text"}
OUR_MEMBERS_NOT_LISTED = (
    "indextables.columns.arrow",
    "indextables.columns-by-segment.arrow",
    "indextables.segments.json",
    "indextables.docmapping.json",
    "indextables.docstore-rows.arrow",
    "indextables.checksums.json",
)


def _check_ours(split: Path) -> HotCache:
    hot = check_hotcache(split)
    footer = read_footer(split)
    copy_parts = {n for n in footer.files if re.fullmatch(r"indextables\.columns-by-segment\.\d{5}\.arrow", n)}
    ours = {*OUR_MEMBERS_NOT_LISTED, *copy_parts}  # copy parts: a merged split's sources' columnar copies
    for name in ours:
        assert name not in hot.file_lengths, f"{split}: our member {name} is listed in the hotcache"
    assert not [n for n in footer.files if n.endswith(".term.fst")], f"{split}: FST dictionaries stored"
    assert not set(footer.files) - set(hot.file_lengths) - ours, (
        f"{split}: members neither listed nor ours: {set(footer.files) - set(hot.file_lengths)}"
    )
    members = _members(split, footer)
    for name in hot.file_lengths:
        if name.endswith(".term"):  # the JVM's Tantivy reads SSTable dictionaries only (readers here build FSTs)
            body = split_footer(members[name], name).body
            for piece in parse_composite(body, name):
                assert dictionary_type(piece.data) == 2, f"{split}: {name} field {piece.field} is not an SSTable"
    for name, cache in hot.slice_caches.items():
        if name in ("meta.json", ".managed.json"):
            assert cache.is_complete(), f"{split}: {name} is not cached whole"
        else:  # the Tantivy footer (JSON, u32 length, u32 magic 1337) of every segment file
            tail = cache.read(cache.total_len - 8, cache.total_len)
            assert tail is not None and struct.unpack("<I", tail[4:])[0] == 1337, f"{split}: {name} footer not cached"
    return hot


def test_a_written_split_has_a_hotcache_listing_every_index_file(tmp_path: Path) -> None:
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.writer import write_split

    written = write_split(ROWS, mapping_for(ROWS.schema, OPTIONS), tmp_path)
    hot = _check_ours(written.path)
    assert len(hot.file_lengths) == 8  # meta.json, .managed.json, one segment's six files
    hotcache_len = struct.unpack("<I", written.path.read_bytes()[-4:])[0]
    assert 1000 < hotcache_len < 8000
    assert written.footer.footer_start < written.path.stat().st_size - 4 - hotcache_len  # within the add's footer range


def test_merged_and_sorted_splits_have_hotcaches(tmp_path: Path) -> None:
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.merge import MergeSource, merge_sources, sort_and_cut
    from executor_lib.splits.write.writer import write_split

    def source(split: Path) -> MergeSource:
        found = MergeSource.from_bundle(split)
        assert found is not None, f"{split}: no columnar copy"
        return found

    mapping = mapping_for(ROWS.schema, OPTIONS)
    parts = [write_split(ROWS.slice(i, 100), mapping, tmp_path / f"p{i}").path for i in range(0, 300, 100)]
    combined = merge_sources([source(p) for p in parts], mapping, tmp_path / "merged").path  # segments copied
    hot = _check_ours(combined)
    assert len(hot.file_lengths) == 2 + 3 * 6  # every source segment's files are listed
    # a segment in both sources cannot be combined: the rows are indexed again
    reindexed = merge_sources([source(combined), source(parts[0])], mapping, tmp_path / "again").path
    assert len(_check_ours(reindexed).file_lengths) == 8
    sorted_splits = list(sort_and_cut([source(p) for p in parts], mapping, tmp_path / "sorted", "latency", 120))
    assert len(sorted_splits) >= 2
    for written in sorted_splits:
        _check_ours(written.path)


def test_a_streamed_split_has_a_hotcache(tmp_path: Path) -> None:
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.writer import SplitBuilder

    builder = SplitBuilder(mapping_for(ROWS.schema, OPTIONS), tmp_path)
    for batch in ROWS.to_batches(max_chunksize=70):
        builder.add(pa.Table.from_batches([batch]))
    _check_ours(builder.finish().path)


def test_a_footer_longer_than_the_read_hint_is_read_whole(tmp_path: Path) -> None:
    meta = json.dumps({"segments": [], "padding": "x" * 100_000}).encode()  # cached whole: a 100 KB hotcache
    footer = write_bundle({"meta.json": meta, "other": b"abc"}, tmp_path / "big.split")
    assert read_footer(tmp_path / "big.split") == footer
    hot = read_hotcache(tmp_path / "big.split")
    assert hot.slice_caches["meta.json"].read(0, len(meta)) == meta and "other" not in hot.file_lengths


def test_a_bundle_without_an_index_has_an_empty_valid_hotcache(tmp_path: Path) -> None:
    write_bundle({"a": b"1", "b": b"22"}, tmp_path / "plain.split")
    hot = read_hotcache(tmp_path / "plain.split")
    assert (dict(hot.file_lengths), dict(hot.slice_caches)) == ({}, {})


def test_a_meta_json_that_is_not_tantivys_is_refused_at_write(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"meta\.json does not describe a Tantivy index"):
        write_bundle({"meta.json": b"[1, 2]"}, tmp_path / "bad.split")


# --- the codec --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"), ((1 << 64) - 1, b"\xff" * 9 + b"\x01")],
)
def test_varints_are_postcards(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    with pytest.raises(ValueError):
        encode_varint(-1)


def test_slice_index_entries_encode_as_quickwit_tests_them() -> None:
    # quickwit hot_directory.rs test_slice_entry_serialization: {start 1, stop 5, addr 4} -> [1, 5, 4]
    hot = encode_hotcache(HotCache({"f": 10}, {"f": FileSliceCache(10, (CachedSlice(1, 5, b"abcd"),))}))
    body_and_index = hot[-8 - len(b"abcd") - 5 : -8]
    assert body_and_index == b"abcd" + bytes([10, 1, 1, 5, 0])  # total_len 10, 1 slice: 1, 5, addr 0


def _sample() -> HotCache:
    return HotCache(
        {"one.txt": 100, "two.txt": 200, "three.txt": 300, "é/ü.bin": 1 << 40},
        {
            "one.txt": FileSliceCache(100, (CachedSlice(5, 13, b" happy t"),)),
            "two.txt": FileSliceCache(200, (CachedSlice(0, 7, b"my name"), CachedSlice(190, 200, b"0123456789"))),
        },
    )


def test_round_trip() -> None:
    data = encode_hotcache(_sample())
    assert struct.unpack("<II", data[:8]) == (HOTCACHE_MAGIC, 1)
    hot = parse_hotcache(data, "sample")
    assert dict(hot.file_lengths) == dict(_sample().file_lengths)
    assert hot.slice_caches["one.txt"].read(6, 11) == b"happy"
    assert hot.slice_caches["two.txt"].read(3, 7) == b"name" and hot.slice_caches["two.txt"].read(5, 9) is None
    assert hot.slice_caches["three.txt"] == FileSliceCache(300, ())  # every listed file gets a slice cache
    assert not hot.slice_caches["one.txt"].is_complete()


def test_build_hotcache_reads_only_what_it_caches() -> None:
    meta = json.dumps({"segments": [{"segment_id": "ab-cd", "deletes": {"opstamp": 3, "num_deleted_docs": 1}}]})
    files = {"meta.json": meta.encode(), "abcd.store": b"s" * 5000, "abcd.3.del": b"d" * 10, "x.arrow": b"a" * 9}
    reads: list[tuple[str, int, int]] = []

    def read(name: str, start: int, stop: int) -> bytes:
        reads.append((name, start, stop))
        return files[name][start:stop]

    hot = parse_hotcache(build_hotcache({n: len(d) for n, d in files.items()}, read), "built")
    assert sorted(hot.file_lengths) == ["abcd.3.del", "abcd.store", "meta.json"]
    assert hot.slice_caches["abcd.3.del"].is_complete()
    # no Tantivy footer in this fake store file: its last 128 bytes are cached instead
    assert [(s.start, s.stop) for s in hot.slice_caches["abcd.store"].slices] == [(4872, 5000)]
    assert all(name != "x.arrow" for name, _, _ in reads) and sum(e - s for _, s, e in reads) < 500


def test_encoder_refuses_bad_slices() -> None:
    for slices in [
        (CachedSlice(5, 3, b""),),
        (CachedSlice(0, 4, b"abcd"), CachedSlice(2, 6, b"cdef")),
        (CachedSlice(8, 12, b"abcd"),),
        (CachedSlice(0, 4, b"abc"),),
    ]:
        with pytest.raises(ValueError, match=r"f\.txt"):
            encode_hotcache(HotCache({"f.txt": 10}, {"f.txt": FileSliceCache(10, slices)}))
    with pytest.raises(ValueError, match="not in file_lengths"):
        encode_hotcache(HotCache({}, {"g": FileSliceCache(1, ())}))


# --- corruption -------------------------------------------------------------------------------------


def _corrupt(data: bytes, match: str) -> None:
    with pytest.raises(CorruptSplitError, match=match) as info:
        parse_hotcache(data, "s3://b/t/part-1.split")
    assert "s3://b/t/part-1.split" in str(info.value)


def test_truncated_hotcaches_are_refused_at_every_length() -> None:
    data = encode_hotcache(_sample())
    for cut in range(len(data)):
        with pytest.raises(CorruptSplitError, match=r"part-1\.split: hotcache"):
            parse_hotcache(data[:cut], "part-1.split")


def test_bad_header_is_named() -> None:
    data = encode_hotcache(_sample())
    _corrupt(b"", "truncated")
    _corrupt(struct.pack("<I", 0) + data[4:], "bad magic 0")
    _corrupt(data[:4] + struct.pack("<I", 2) + data[8:], "unsupported version 2")
    _corrupt(data[:8] + struct.pack("<I", 1 << 20) + data[12:], "truncated")


def _with_slice_index(total_len: int, slices: list[tuple[int, int, int]], body: bytes, listed: int) -> bytes:
    index = encode_varint(total_len) + encode_varint(len(slices))
    for entry in slices:
        index += b"".join(encode_varint(v) for v in entry)
    region = body + index + struct.pack("<Q", len(body))
    name = b"f.idx"
    meta = b"\x01" + bytes([len(name)]) + name + encode_varint(listed) + b"\x01" + bytes([len(name)]) + name + b"\x00"
    return struct.pack("<III", HOTCACHE_MAGIC, 1, len(meta)) + meta + region


def test_slices_out_of_range_are_named_with_their_file() -> None:
    assert (
        parse_hotcache(_with_slice_index(10, [(2, 5, 0)], b"abc", 10), "ok").slice_caches["f.idx"].read(2, 5) == b"abc"
    )
    _corrupt(
        _with_slice_index(10, [(8, 12, 0)], b"abcd", 10), r"slice cache of 'f.idx'.*slice 0 \(8..12\) out of range"
    )
    _corrupt(_with_slice_index(10, [(2, 5, 1)], b"abc", 10), r"'f.idx'.*runs past the body")
    _corrupt(_with_slice_index(10, [(2, 5, 0), (4, 6, 0)], b"abc", 10), r"'f.idx'.*slice 1 \(4..6\) overlaps")
    _corrupt(_with_slice_index(10, [(5, 2, 0)], b"abc", 10), r"'f.idx'.*out of range")
    _corrupt(_with_slice_index(10, [(2, 5, 0)], b"abc", 11), r"'f.idx': total_len 10 differs from file_lengths 11")
    _corrupt(_with_slice_index(10, [(2, 5, 0)], b"abc", 10)[:-9], r"'f.idx'")
    good = _with_slice_index(10, [(2, 5, 0)], b"abc", 10)
    _corrupt(good[:-8] + struct.pack("<Q", 1000), r"'f.idx': body length 1000 exceeds")


def test_unknown_or_duplicate_paths_and_trailing_bytes_are_refused() -> None:
    name = b"f"
    entry = bytes([len(name)]) + name
    meta = b"\x00" + b"\x01" + entry + b"\x00"  # no file_lengths, one slice cache
    _corrupt(struct.pack("<III", HOTCACHE_MAGIC, 1, len(meta)) + meta + b"\x00\x00" + b"\0" * 8, "not in file_lengths")
    meta = b"\x02" + entry + b"\x01" + entry + b"\x01" + b"\x00"
    _corrupt(struct.pack("<III", HOTCACHE_MAGIC, 1, len(meta)) + meta, "lists 'f' twice")
    meta = b"\x00\x00\x07"
    _corrupt(struct.pack("<III", HOTCACHE_MAGIC, 1, len(meta)) + meta, "unexpected bytes after HotDirectoryMeta")
    meta = b"\x00\x00"
    _corrupt(struct.pack("<III", HOTCACHE_MAGIC, 1, len(meta)) + meta + b"junk", "slice caches but no slice_offsets")
    _corrupt(struct.pack("<III", HOTCACHE_MAGIC, 1, 11) + b"\x01" + b"\xff" * 10, "longer than 10 bytes")


def test_a_split_with_a_damaged_hotcache_is_named(tmp_path: Path) -> None:
    split = tmp_path / "part-9.split"
    write_bundle({"meta.json": b'{"segments": []}'}, split)
    data = bytearray(split.read_bytes())
    hot_len = struct.unpack("<I", data[-4:])[0]
    data[-4 - hot_len] ^= 0xFF  # the magic's first byte
    split.write_bytes(bytes(data))
    with pytest.raises(CorruptSplitError, match=r"part-9\.split: hotcache has bad magic"):
        read_hotcache(split)
    split.write_bytes(bytes(data[:-4]) + struct.pack("<I", 1 << 30))
    with pytest.raises(CorruptSplitError, match=r"part-9\.split: hotcache of 1073741824 bytes does not fit"):
        read_hotcache(split)
