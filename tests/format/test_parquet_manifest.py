"""Companion splits in tantivy4java's layout (``executor_lib.format.tantivy4java.parquet_manifest``).

Golden values: ``hash_parquet_path`` against Rust's ``std::collections::hash_map::DefaultHasher`` (the
function tantivy4java's ``native/src/parquet_companion/indexing.rs`` uses), computed with rustc 1.95.0
on this machine; manifest JSON against the serde structs and test literals of tantivy4java
``native/src/parquet_companion/manifest.rs`` / ``manifest_io.rs`` / ``string_indexing.rs`` at commit
be5b3db6aba0377f08a1249a0a2134911049e963.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tantivy

from executor_lib.format.quickwit.bundle import extract_bundle, read_footer, read_member
from executor_lib.format.tantivy4java import parquet_manifest as PM
from executor_lib.format.termdict.convert import ensure_fst_terms
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.write.companion import SourceFiles, build_companion_split
from indextables_contract.errors import CorruptSplitError

# rustc 1.95.0: `let mut h = DefaultHasher::new(); s.hash(&mut h); h.finish()`
RUST_DEFAULT_HASHER = {
    "": 3476900567878811119,
    "part-0001.parquet": 134649504540951650,
    "data/part-00001.parquet": 575483795069555291,
    "year=2024/part-00000-abc.snappy.parquet": 12521802341200935743,
    "é/ü.parquet": 6778375593689821125,
}

# manifest.rs: the serde names of ParquetManifest, ParquetFileEntry, RowGroupEntry, ColumnChunkInfo, ColumnMapping
MANIFEST_KEYS = {
    "version",
    "table_root",
    "fast_field_mode",
    "segment_row_ranges",
    "parquet_files",
    "column_mapping",
    "total_rows",
    "storage_config",
    "metadata",
    "string_hash_fields",
    "string_indexing_modes",
    "companion_hash_fields",
}
FILE_KEYS = {"relative_path", "file_size_bytes", "row_offset", "num_rows", "has_offset_index", "row_groups"}
GROUP_KEYS = {"row_group_idx", "num_rows", "row_offset_in_file", "columns"}
CHUNK_KEYS = {"column_idx", "column_name", "data_page_offset", "compressed_size", "uncompressed_size"}
MAPPING_KEYS = {
    "tantivy_field_name",
    "parquet_column_name",
    "physical_ordinal",
    "parquet_type",
    "tantivy_type",
    "field_id",
}

# manifest.rs test_manifest_backward_compat_missing_new_fields, verbatim
UPSTREAM_OLD_MANIFEST = b"""{
    "version": 1,
    "table_root": "",
    "fast_field_mode": "disabled",
    "segment_row_ranges": [{"segment_ord": 0, "row_offset": 0, "num_rows": 10}],
    "parquet_files": [{"relative_path": "p.parquet", "file_size_bytes": 100, "row_offset": 0, "num_rows": 10,
                       "has_offset_index": false, "row_groups": []}],
    "column_mapping": [],
    "total_rows": 10,
    "storage_config": null,
    "metadata": {},
    "string_hash_fields": {}
}"""


def test_file_hash_is_rusts_default_hasher() -> None:
    for path, expected in RUST_DEFAULT_HASHER.items():
        assert PM.hash_parquet_path(path) == expected, path


def test_string_hash_is_xxh64_with_zero_reserved() -> None:
    # xxHash64 reference values (seed 0): "" and "abc"
    assert PM.hash_string_value("") == 0xEF46DB3751D8E999
    assert PM.hash_string_value("abc") == 0x44BC2CF5AD770999
    hashed = PM.hash_strings(pa.array(["abc", None, ""]))
    assert hashed.type == pa.uint64() and hashed.to_pylist() == [0x44BC2CF5AD770999, None, 0xEF46DB3751D8E999]


def test_upstream_manifest_literal_reads_and_bad_ones_are_named() -> None:
    m = PM.deserialize_manifest(UPSTREAM_OLD_MANIFEST, "s.split")
    assert m["total_rows"] == 10 and m["parquet_files"][0]["relative_path"] == "p.parquet"
    bad = json.loads(UPSTREAM_OLD_MANIFEST)
    bad["version"] = 999  # manifest_io.rs test_version_check
    with pytest.raises(CorruptSplitError, match="version 999"):
        PM.deserialize_manifest(json.dumps(bad).encode(), "s.split")
    bad = json.loads(UPSTREAM_OLD_MANIFEST)
    bad["total_rows"] = 9  # manifest.rs test_manifest_validation_row_mismatch
    with pytest.raises(CorruptSplitError, match=r"s\.split: .*total_rows 9"):
        PM.deserialize_manifest(json.dumps(bad).encode(), "s.split")


def test_indexing_modes_serde_as_string_indexing_rs() -> None:
    assert PM.indexing_mode_json("exact_only") == {"mode": "exact_only"}
    assert PM.indexing_mode_json("text_uuid_exactonly") == {"mode": "text_uuid_exactonly"}
    assert PM.indexing_mode_json("text_custom_strip:SSN-\\d+") == {"mode": "text_custom_strip", "regex": "SSN-\\d+"}
    assert PM.indexing_mode_json("text_custom_exactonly:") is None  # parse_tokenizer_override: empty regex
    assert PM.indexing_mode_json("raw") is None and PM.indexing_mode_json("text") is None


def _source(root: Path) -> list[str]:
    root.mkdir(parents=True)
    names = []
    for i, rows in enumerate((700, 300, 1)):
        ids = np.arange(i * 1000, i * 1000 + rows, dtype=np.int64)
        table = pa.table(
            {"id": ids, "msg": [f"event {n} kraken{n % 7}" for n in ids], "score": ids.astype(np.float64) / 10}
        )
        name = f"part={i}/f{i}.parquet"
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, root / name, row_group_size=256)
        names.append(name)
    return names


MAPPING = DocMapping.from_json(
    json.dumps(
        [
            {"name": "id", "type": "i64", "stored": False, "indexed": True, "fast": True},
            {"name": "msg", "type": "text", "stored": False, "indexed": True, "fast": False, "tokenizer": "default"},
        ]
    )
)


def test_companion_split_has_the_jvm_manifest_and_locator_fast_fields(tmp_path: Path) -> None:
    src = tmp_path / "src"
    files = _source(src)
    schema = pq.read_schema(src / files[0])
    written, _ = build_companion_split(
        SourceFiles(str(src)),
        files,
        "parquet",
        schema,
        MAPPING,
        tmp_path / "out",
        fast_field_mode="HYBRID",
        indexing_modes={"msg": "text_uuid_strip"},
    )
    footer = read_footer(written.path)
    raw = read_member(written.path, footer, PM.MANIFEST_MEMBER)
    assert raw is not None
    m = PM.deserialize_manifest(raw, str(written.path))
    assert set(m) == MANIFEST_KEYS and m["version"] == 1 and m["table_root"] == ""
    assert m["fast_field_mode"] == "hybrid" and m["total_rows"] == 1001
    assert [(f["relative_path"], f["row_offset"], f["num_rows"]) for f in m["parquet_files"]] == [
        (files[0], 0, 700),
        (files[1], 700, 300),
        (files[2], 1000, 1),
    ]
    f0 = m["parquet_files"][0]
    assert set(f0) == FILE_KEYS and f0["file_size_bytes"] == (src / files[0]).stat().st_size
    assert [g["num_rows"] for g in f0["row_groups"]] == [256, 256, 188]
    assert [g["row_offset_in_file"] for g in f0["row_groups"]] == [0, 256, 512]
    chunk = f0["row_groups"][1]["columns"][1]
    meta = pq.ParquetFile(src / files[0]).metadata.row_group(1).column(1)
    assert set(chunk) == CHUNK_KEYS and (chunk["column_name"], chunk["data_page_offset"], chunk["compressed_size"]) == (
        "msg",
        meta.data_page_offset,
        meta.total_compressed_size,
    )
    assert [
        (c["tantivy_field_name"], c["parquet_type"], c["tantivy_type"], c.get("fast_field_tokenizer"))
        for c in m["column_mapping"]
    ] == [
        ("id", "INT64", "I64", None),
        ("msg", "BYTE_ARRAY", "Str", "text_uuid_strip"),
        ("score", "DOUBLE", "F64", None),
    ]
    assert all(set(c) - {"fast_field_tokenizer"} == MAPPING_KEYS for c in m["column_mapping"])
    assert m["string_indexing_modes"] == {"msg": {"mode": "text_uuid_strip"}} and m["companion_hash_fields"] == {}
    assert sum(r["num_rows"] for r in m["segment_row_ranges"]) == 1001

    # The JVM's resolution (bulk_retrieval.rs resolve_to_parquet_locations): each hit's __pq_file_hash and
    # __pq_row_in_file fast fields -> (file of that hash, row) -> the source row. Check it for every document.
    index_dir = tmp_path / "index"
    extract_bundle(written.path, footer, index_dir)
    ensure_fst_terms(index_dir, None)  # the FST term dictionaries the tantivy package reads, from the SSTables
    index = tantivy.Index.open(str(index_dir))
    schema_names = [f["name"] for f in json.loads((index_dir / "meta.json").read_text())["schema"]]
    assert {"__pq_file_hash", "__pq_row_in_file"} <= set(schema_names)
    searcher = index.searcher()
    hits = searcher.search(index.parse_query("kraken3", ["msg"]), limit=2000).hits
    addresses = [a for _, a in hits]
    hashes = np.array(searcher.fast_field_values("__pq_file_hash", addresses), np.uint64)
    rows = np.array(searcher.fast_field_values("__pq_row_in_file", addresses), np.int64)
    positions = PM.file_index_of_hashes(m, hashes, "test")
    got = sorted(
        pq.read_table(src / m["parquet_files"][p]["relative_path"]).column("id")[int(r)].as_py()
        for p, r in zip(positions, rows, strict=True)
    )
    expected = sorted(n for i, k in enumerate((700, 300, 1)) for n in range(i * 1000, i * 1000 + k) if n % 7 == 3)
    assert got == expected and len(got) > 100


def test_large_manifests_are_zstd_and_merges_shift_offsets() -> None:
    base = json.loads(UPSTREAM_OLD_MANIFEST)
    base["column_mapping"] = [
        {
            "tantivy_field_name": f"field_{i}",
            "parquet_column_name": f"column_{i}",
            "physical_ordinal": i,
            "parquet_type": "BYTE_ARRAY",
            "tantivy_type": "Str",
            "field_id": i,
        }
        for i in range(100)
    ]  # fmt: skip  (manifest_io.rs test_roundtrip_zstd)
    packed = PM.serialize_manifest(base)
    assert packed[:4] == b"\x28\xb5\x2f\xfd" and PM.deserialize_manifest(packed, "x") == base
    other = json.loads(json.dumps(base))
    other["parquet_files"][0]["relative_path"] = "q.parquet"
    merged = PM.combine_manifests([base, other], "merge")
    assert [(f["relative_path"], f["row_offset"]) for f in merged["parquet_files"]] == [
        ("p.parquet", 0),
        ("q.parquet", 10),
    ]
    assert merged["segment_row_ranges"] == [{"segment_ord": 0, "row_offset": 0, "num_rows": 20}]
    other["fast_field_mode"] = "hybrid"
    with pytest.raises(CorruptSplitError, match="fast_field_mode"):
        PM.combine_manifests([base, other], "merge")


def _as_jvm_layout(written_path: Path, out: Path) -> Path:
    """The split as tantivy4java lays a companion split out: its index files and ``_parquet_manifest.json``
    only (no columnar copy, no doc mapping member, no ``indextables.companion.json``)."""
    from executor_lib.format.quickwit.bundle import write_bundle
    from executor_lib.splits.rows.companion import COMPANION_MEMBER
    from executor_lib.splits.write.writer import COLUMNS_MEMBER, DOC_MAPPING_MEMBER

    footer = read_footer(written_path)
    dropped = {COLUMNS_MEMBER, DOC_MAPPING_MEMBER, COMPANION_MEMBER}
    files: dict[str, bytes | Path] = {}
    for name in footer.files:
        if name not in dropped:
            data = read_member(written_path, footer, name)
            assert data is not None
            files[name] = data
    write_bundle(files, out, checksums=False)
    return out


def test_a_split_in_the_jvm_layout_is_read_through_its_manifest(tmp_path: Path) -> None:
    import executor_lib
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.log.tables import create_table
    from executor_lib.protocol.actions import AddAction
    from executor_lib.storage import open_store

    src = tmp_path / "src"
    files = _source(src)
    schema = pq.read_schema(src / files[0])
    written, _ = build_companion_split(
        SourceFiles(str(src)), files, "parquet", schema, MAPPING, tmp_path / "out", fast_field_mode="HYBRID"
    )
    index = tmp_path / "index"
    (index / "splits").mkdir(parents=True)
    jvm = _as_jvm_layout(written.path, index / "splits" / "companion-0-x.split")
    jvm_footer = read_footer(jvm)
    assert PM.MANIFEST_MEMBER in jvm_footer.files and not any(n.startswith("indextables.") for n in jvm_footer.files)
    configuration = {
        "indextables.companion.enabled": "true",
        "indextables.companion.sourceTablePath": str(src),
        "indextables.companion.sourceFormat": "parquet",
    }
    log = create_table(str(index), schema, configuration=configuration)
    log.commit(
        [
            AddAction(
                path="splits/companion-0-x.split",
                partition_values={},
                size=jvm.stat().st_size,
                modification_time=1,
                data_change=True,
                num_records=1001,
                has_footer_offsets=True,
                footer_start_offset=jvm_footer.footer_start,
                footer_end_offset=jvm_footer.footer_end,
                doc_mapping_json=written.doc_mapping_json,
                companion_source_files=tuple(files),
                companion_delta_version=-1,
                companion_fast_field_mode="HYBRID",
            )
        ]
    )
    snapshot = executor_lib.open_log(str(index)).snapshot()
    cache = SplitCache(tmp_path / "cache")
    got = executor_lib.search_table(open_store(str(index)), snapshot, "msg:kraken3 AND id:[0 TO 1500]", cache)
    expected = pq.read_table(src / files[0]).to_pylist() + pq.read_table(src / files[1]).to_pylist()
    expected = [r for r in expected if r["id"] % 7 == 3 and r["id"] <= 1500]
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == expected and len(expected) > 100

    # the root is needed: a table whose metadata names none is a clear error
    with pytest.raises(CorruptSplitError, match="parquetTableRoot"):
        from executor_lib.splits.search.searcher import SplitSearcher

        SplitSearcher(jvm, tmp_path / "no-root", schema, written.doc_mapping_json)


def test_a_jvm_layout_split_with_hashed_modes_answers_hash_lookups(tmp_path: Path) -> None:
    import uuid

    from executor_lib.companion.sync import hashed_fields
    from executor_lib.splits.search.searcher import SplitSearcher
    from indextables_contract import filters as F

    src = tmp_path / "src"
    src.mkdir()
    uuids = [str(uuid.UUID(int=i * 104729 + 1)) for i in range(200)]
    table = pa.table(
        {
            "id": pa.array(range(200), pa.int64()),
            "trace": [f"t-{i % 9}" for i in range(200)],
            "msg": [f"call {u} ok" for u in uuids],
        }
    )
    pq.write_table(table, src / "a.parquet")
    modes = {"trace": "exact_only", "msg": "text_uuid_exactonly"}
    mapping = hashed_fields(
        DocMapping.from_json(
            json.dumps(
                [
                    {"name": "id", "type": "i64", "stored": False, "indexed": True, "fast": True},
                    {
                        "name": "trace",
                        "type": "text",
                        "stored": False,
                        "indexed": True,
                        "fast": True,
                        "tokenizer": "raw",
                    },
                    {
                        "name": "msg",
                        "type": "text",
                        "stored": False,
                        "indexed": True,
                        "fast": False,
                        "tokenizer": "default",
                    },
                ]
            )
        ),
        modes,
        {"trace": "trace", "msg": "msg", "id": "id"},
    )
    written, _ = build_companion_split(
        SourceFiles(str(src)),
        ["a.parquet"],
        "parquet",
        table.schema,
        mapping,
        tmp_path / "out",
        strip={"msg": PM.UUID_REGEX},
        indexing_modes=modes,
    )
    jvm = _as_jvm_layout(written.path, tmp_path / "jvm.split")
    for path, work in ((written.path, "ours"), (jvm, "jvm")):  # this project's layout, then the JVM's alone
        s = SplitSearcher(path, tmp_path / work, table.schema, written.doc_mapping_json, companion_root=str(src))
        by_trace = s.search(F.Term("trace", "t-4"), ["id"]).column("id").to_pylist()
        assert sorted(by_trace) == [i for i in range(200) if i % 9 == 4], work
        assert s.search(F.QueryString(uuids[77], "msg"), ["id", "msg"]).to_pylist() == [
            {"id": 77, "msg": f"call {uuids[77]} ok"}
        ], work
        assert s.search(F.QueryString("call", "msg"), ["id"]).num_rows == 200, work
