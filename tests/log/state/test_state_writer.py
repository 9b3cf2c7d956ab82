"""Writing the Avro state (protocol v4): incremental manifests, tombstones, compaction, codecs,
the exact FileEntry schema, v3 -> v4 upgrade, crash leftovers. Each body runs on local and S3."""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

import fastavro
import pytest

import executor_lib
from executor_lib.log.state.avro_state import read_state_files, read_state_manifest
from executor_lib.protocol.actions import AddAction, RemoveAction
from executor_lib.storage import open_store
from indextables_contract.errors import UnsupportedProtocolError
from tests.conftest import COMPAT_MISSING, COMPAT_ROOT
from tests.log.helpers import add, make_table

Table = tuple[str, dict[str, Any]]
LOG = "_transaction_log"

JSON_MANIFESTS = {"spark.indextables.state.manifestFormat": "json"}


def _jvm_writer_schema(pattern: str) -> dict[str, Any]:
    """The writer schema IndexTables4Spark 0.5.4 embedded in its own files (``pattern`` under a table's log)."""
    if not COMPAT_ROOT.is_dir():
        pytest.skip(COMPAT_MISSING)
    found = sorted(COMPAT_ROOT.glob(f"*/_transaction_log/{pattern}"))
    assert found, f"no IndexTables4Spark file {pattern} under {COMPAT_ROOT}"
    with open(found[0], "rb") as f:
        return dict(fastavro.reader(f).writer_schema)  # type: ignore[arg-type]


def state(uri: str, options: dict[str, Any], version: int) -> Any:
    manifest = read_state_manifest(open_store(uri, **options), version)
    assert manifest is not None, f"no state at version {version}"
    return manifest


def test_each_commit_writes_one_manifest_with_only_its_files(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    for i in range(1, 6):
        log.commit([add(f"2024-01-0{i}") for _ in range(i)])
    states = [state(uri, options, v) for v in range(1, 6)]
    for v, s in enumerate(states, start=1):
        assert [m.num_entries for m in s.manifests] == list(range(1, v + 1))
        assert s.manifests[:-1] == states[v - 2].manifests if v > 1 else True
        assert s.num_files == sum(range(1, v + 1))
        assert s.tombstones == frozenset()
    last = states[-1].manifests[-1]
    assert last.partition_bounds == {"date": {"min": "2024-01-05", "max": "2024-01-05"}}
    assert (last.min_added_at_version, last.max_added_at_version) == (5, 5)
    hint = json.loads(open_store(uri, **options).read(f"{LOG}/_last_checkpoint"))
    assert (hint["version"], hint["format"], hint["stateDir"], hint["numFiles"]) == (
        5,
        "avro-state",
        "state-v00000000000000000005",
        15,
    )
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert snap.base == "state-v00000000000000000005" and len(snap.files) == 15


def test_file_entry_schema_is_the_deployed_one_and_codecs_apply(table: Table) -> None:
    """Shared manifests carry IndexTables4Spark 0.5.4's FileEntry record: its name, field names,
    types, defaults, field ids and order, as embedded in the real files (not Appendix B's ids)."""
    uri, options = table
    deployed = _jvm_writer_schema("manifests/*.avro")
    store = open_store(uri, **options)
    for version, codec in enumerate(["zstd", "snappy", "none"], start=1):
        log = make_table(f"{uri}/{codec}", options, **{"spark.indextables.state.compression": codec})
        log.commit([add()])
        info = state(f"{uri}/{codec}", options, 1).manifests[0]
        reader = fastavro.reader(io.BytesIO(store.read(f"{codec}/{LOG}/{info.path}")))
        assert reader.codec == {"zstd": "zstandard", "snappy": "snappy", "none": "null"}[codec]
        schema = reader.writer_schema
        assert schema["name"] == deployed["name"] == "io.indextables.state.FileEntry"
        fields = schema["fields"]
        (record,) = list(reader)
        assert record["addedAtVersion"] == 1 and record["numRecords"] == 10
        assert version > 0
        assert fields == deployed["fields"], "optional extension fields that are null everywhere are left out"
    log = make_table(f"{uri}/ext", options)
    log.commit([add(), dataclasses.replace(add(), time_range_start="2024-01-01T00:00:00Z")])
    info = state(f"{uri}/ext", options, 1).manifests[0]
    reader = fastavro.reader(io.BytesIO(store.read(f"ext/{LOG}/{info.path}")))
    extension = reader.writer_schema["fields"][len(deployed["fields"]) :]
    assert [(f["name"], f["field-id"]) for f in extension] == [("timeRangeStart", 137)], "tantivy4java's id"
    assert sorted(str(r["timeRangeStart"]) for r in reader) == ["2024-01-01T00:00:00Z", "None"]


def test_tombstones_then_compaction(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    files = [add() for _ in range(20)]
    log.commit(files)
    log.commit([RemoveAction(files[0].path, 1, partition_values=files[0].partition_values, size=files[0].size)])
    s2 = state(uri, options, 2)
    assert s2.tombstones == {files[0].path} and len(s2.manifests) == 1 and s2.num_files == 19
    assert s2.total_bytes == sum(f.size for f in files[1:])
    removes = [RemoveAction(f.path, 1, partition_values=f.partition_values, size=f.size) for f in files[1:4]]
    log.commit(removes)  # 4 of 20 entries tombstoned > 10%: compaction
    s3 = state(uri, options, 3)
    assert s3.tombstones == frozenset() and [m.num_entries for m in s3.manifests] == [16]
    assert s3.manifests[0].path != s2.manifests[0].path
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert {f.path for f in snap.files} == {f.path for f in files[4:]}


def test_small_manifests_merge_without_compaction(table: Table) -> None:
    """Past ``maxManifests`` small manifests, the smallest are merged; full ones are never rewritten."""
    uri, options = table
    limits = {"spark.indextables.state.compaction.maxManifests": "4", "spark.indextables.state.entriesPerManifest": "8"}
    log = make_table(uri, options, **limits)
    log.commit([add() for _ in range(16)])  # two full manifests
    full = {m.path for m in state(uri, options, 1).manifests}
    for v in range(2, 42):
        log.commit([add()])
        s = state(uri, options, v)
        small = [m for m in s.manifests if m.num_entries < 4]
        assert len(small) <= 4, f"version {v}: {len(small)} small manifests, limit 4"
        assert full <= {m.path for m in s.manifests}, f"version {v} rewrote a full manifest"
        assert sum(m.num_entries for m in s.manifests) == s.num_files == 16 + v - 1
    merged = [m for m in state(uri, options, 41).manifests if m.path not in full]
    assert any(m.num_entries >= 4 for m in merged)  # one-file manifests merged into bigger ones
    assert len(executor_lib.open_log(uri, **options).snapshot().files) == 56


def test_compacted_state_does_not_compact_again(table: Table) -> None:
    """A compaction leaves more manifests than ``maxManifests`` when the table needs them; the next
    commit references them all and writes only its own (the JVM's rule compacted again, forever)."""
    uri, options = table
    limits = {"spark.indextables.state.compaction.maxManifests": "3", "spark.indextables.state.entriesPerManifest": "4"}
    log = make_table(uri, options, **limits)
    log.commit([add() for _ in range(40)])
    log.checkpoint()
    compacted = state(uri, options, 1).manifests
    assert len(compacted) == 10
    log.commit([add()])
    after = state(uri, options, 2).manifests
    assert after[:10] == compacted and len(after) == 11 and after[10].num_entries == 1


def test_merge_drops_tombstoned_entries(table: Table) -> None:
    """Merging small manifests drops the entries of removed files, and with them their tombstones."""
    uri, options = table
    limits = {
        "spark.indextables.state.compaction.maxManifests": "2",
        "spark.indextables.state.entriesPerManifest": "100",
        "spark.indextables.state.compaction.tombstoneThreshold": "1",  # no manifest is rewritten for its tombstones
    }
    log = make_table(uri, options, **limits)
    for _ in range(2):
        log.commit([add()])
    gone = next(f for f in log.snapshot().files if f.path in {e.path for e in _entries(uri, options, 1)})
    log.commit([RemoveAction(gone.path, 1, size=gone.size, partition_values=gone.partition_values)])
    assert state(uri, options, 3).tombstones == {gone.path}
    log.commit([add()])  # three small manifests > 2: the two smallest (1 entry each) merge
    s = state(uri, options, 4)
    assert s.tombstones == frozenset() and len(s.manifests) == 2
    assert s.num_files == len(log.snapshot().files) == 2 == sum(m.num_entries for m in s.manifests)


def _entries(uri: str, options: dict[str, str], version: int) -> list[AddAction]:
    return list(read_state_files(open_store(uri, **options), state(uri, options, version)))


def test_entries_per_manifest_and_embedded_metadata(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options, **{"spark.indextables.state.entriesPerManifest": "4"})
    log.commit([add() for _ in range(10)])
    log.checkpoint()  # state exists at the latest version: nothing rewritten
    s1 = state(uri, options, 1)
    assert [m.num_entries for m in s1.manifests] == [4, 4, 2]
    log.commit([add() for _ in range(5)])
    assert [m.num_entries for m in state(uri, options, 2).manifests] == [4, 4, 2, 4, 1]
    log.commit([RemoveAction(log.snapshot().files[0].path, 1, size=1010, partition_values={"date": "2024-01-01"})])
    s3, s2 = state(uri, options, 3), state(uri, options, 2)
    # 1 of its manifest's 4 entries is past the 10% share: that manifest alone is rewritten without it
    assert not s3.tombstones and s3.num_files == 14 == sum(m.num_entries for m in s3.manifests)
    assert len({m.path for m in s3.manifests} - {m.path for m in s2.manifests}) == 1
    assert s2.metadata() == log.snapshot().metadata
    assert s2.protocol() == log.snapshot().protocol


def test_v3_table_upgrades_to_v4_on_checkpoint(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options, **{"spark.indextables.state.format": "json"})
    a, b = add(), add()
    log.commit([a])
    log.commit([b])
    assert log.snapshot().protocol.min_writer_version == 3  # type: ignore[union-attr]
    info = executor_lib.open_log(uri, **options).checkpoint()
    assert (info.version, info.format, info.num_files) == (3, "avro-state", 2)
    upgraded = executor_lib.open_log(uri, **options)
    snap = upgraded.snapshot()
    assert snap.protocol is not None and snap.protocol.min_writer_version == 4
    assert "avroState" in (snap.protocol.reader_features or ())
    assert "schemaDeduplication" in (snap.protocol.reader_features or ())
    assert snap.base == "state-v00000000000000000003"
    c = add()
    assert upgraded.commit([c]) == 4
    assert executor_lib.open_log(uri, **options).snapshot().base == "state-v00000000000000000004"
    assert {f.path for f in executor_lib.open_log(uri, **options).snapshot().files} == {a.path, b.path, c.path}


def test_crash_between_manifest_and_state_leaves_a_readable_table(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    log.commit([add()])
    store = open_store(uri, **options)
    store.put(f"{LOG}/manifests/manifest-orphan.avro", b"half-written garbage")
    store.put(f"{LOG}/state-v00000000000000000002/.in-progress", b"")
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert snap.version == 1 and len(snap.files) == 1
    assert executor_lib.open_log(uri, **options).commit([add()]) == 2
    assert len(executor_lib.open_log(uri, **options).snapshot().files) == 2


def test_unsupported_state_format_version_is_named(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options, **JSON_MANIFESTS)
    log.commit([add()])
    store = open_store(uri, **options)
    key = f"{LOG}/state-v00000000000000000001/_manifest.json"
    doc = json.loads(store.read(key))
    for seal in ("indextables.sha256", "indextables.integrity"):  # a future writer's state, unsealed
        doc.pop(seal)
    store.put(key, json.dumps({**doc, "formatVersion": 9}).encode())
    with pytest.raises(UnsupportedProtocolError, match=r"state-v00000000000000000001/_manifest\.json.*formatVersion 9"):
        executor_lib.open_log(uri, **options).snapshot()


def test_every_add_field_survives_the_state(table: Table) -> None:
    import dataclasses

    uri, options = table
    log = make_table(uri, options, **{"spark.indextables.state.format": "json"})
    full = dataclasses.replace(
        add(),
        tags={"k": "v"},
        time_range_start="2024-01-01T00:00:00Z",
        time_range_end="2024-01-02T00:00:00Z",
        delete_opstamp=7,
        hotcache_start_offset=11,
        hotcache_length=12,
        split_tags=frozenset({"hot"}),
        num_merge_ops=2,
        companion_source_files=("a.parquet",),
        companion_delta_version=3,
        companion_fast_field_mode="HYBRID",
        stats='{"x":1}',
        uncompressed_size_bytes=99,
    )
    log.commit([full])
    # a legacy inline doc mapping, committed raw (as an old writer would have)
    from executor_lib.protocol.actions import actions_to_ndjson

    legacy = dataclasses.replace(add(), doc_mapping_json='[{"name":"id","type":"i64"}]')
    open_store(uri, **options).put(f"{LOG}/00000000000000000002.json", actions_to_ndjson([legacy]))
    executor_lib.open_log(uri, **options).checkpoint()  # upgrade to v4: compacted Avro state
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert snap.base.startswith("state-v")
    (got,) = [f for f in snap.files if f.path == full.path]
    assert got == full
    (got_legacy,) = [f for f in snap.files if f.path == legacy.path]
    assert got_legacy.doc_mapping_json is None and got_legacy.doc_mapping_ref
    assert snap.doc_mapping(got_legacy) == legacy.doc_mapping_json


def test_avro_state_manifests_in_indextables4spark_schema(table: Table) -> None:
    uri, options = table
    avro = {**options, "spark.indextables.state.compaction.tombstoneThreshold": "1"}  # the default format
    json_writer = {**avro, **JSON_MANIFESTS}
    log = make_table(uri, json_writer)
    log.commit([add("2024-01-01") for _ in range(3)])
    first = executor_lib.open_log(uri, **avro).snapshot().files  # read back by a default (Avro) writer
    executor_lib.open_log(uri, **json_writer).commit([add("2024-01-02")])  # the non-JVM layout, when asked for
    executor_lib.open_log(uri, **avro).commit([RemoveAction(path=next(iter(first)).path, size=1)])
    store = open_store(uri, **options)
    names = {k.rsplit("/", 1)[-1] for k in (o.key for o in store.list(f"{LOG}/state-v"))}
    assert names == {"_manifest.avro", "_manifest.json"}
    assert not store.exists(f"{LOG}/state-v00000000000000000003/_manifest.json"), "moved to .avro on its next state"
    data = store.read(f"{LOG}/state-v00000000000000000003/_manifest.avro")
    reader = fastavro.reader(io.BytesIO(data))
    ours = reader.writer_schema
    (record,) = list(reader)
    jvm = _jvm_writer_schema("state-v*/_manifest.avro")
    assert ours["name"] == jvm["name"] == "io.indextables.state.StateManifest"
    # exactly IndexTables4Spark's record (names, types, defaults, docs, order), plus one optional field
    assert ours["fields"][:-1] == jvm["fields"]  # type: ignore[index]
    assert ours["fields"][-1] == {"name": "protocol", "type": ["null", "string"], "default": None}  # type: ignore[index]
    assert reader.codec == "zstandard", "the codec of IndexTables4Spark's state manifests"
    assert record["numFiles"] == 3 and len(record["tombstones"]) == 1
    s = state(uri, options, 3)
    assert s.protocol() is not None and s.protocol().min_writer_version == 4  # type: ignore[union-attr]
    snap = executor_lib.open_log(uri, **avro).snapshot()
    assert snap.base == "state-v00000000000000000003" and len(snap.files) == 3
    with pytest.raises(Exception, match="manifestFormat='xml'"):
        executor_lib.open_log(uri, **{"spark.indextables.state.manifestFormat": "xml"})
