"""Reading Avro state written the way IndexTables4Spark writes it: both state-manifest names,
all three manifest path forms, tombstones, and the zstd/snappy/null codecs."""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pytest

import executor_lib
from executor_lib.protocol.actions import actions_to_ndjson
from executor_lib.protocol.files import encode_log_bytes
from executor_lib.storage import open_store
from indextables_contract.errors import CorruptLogError, MissingLogFileError
from tests.log.helpers import SCHEMA

STATE_SCHEMA = {
    "type": "record",
    "name": "StateManifest",
    "namespace": "io.indextables.state",
    "fields": [
        {"name": "formatVersion", "type": "int"},
        {"name": "stateVersion", "type": "long"},
        {"name": "createdAt", "type": "long"},
        {"name": "numFiles", "type": "long"},
        {"name": "totalBytes", "type": "long"},
        {
            "name": "manifests",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "ManifestInfoItem",
                    "fields": [
                        {"name": "path", "type": "string"},
                        {"name": "numEntries", "type": "long"},
                        {"name": "minAddedAtVersion", "type": "long"},
                        {"name": "maxAddedAtVersion", "type": "long"},
                    ],
                },
            },
        },
        {"name": "tombstones", "type": {"type": "array", "items": "string"}},
        {"name": "schemaRegistry", "type": {"type": "map", "values": "string"}},
        {"name": "protocolVersion", "type": "int"},
        {"name": "metadata", "type": ["null", "string"], "default": None},
    ],
}
FILE_ENTRY_SCHEMA = {
    "type": "record",
    "name": "FileEntry",
    "namespace": "io.indextables.state",
    "fields": [
        {"name": "path", "type": "string", "field-id": 100},
        {"name": "partitionValues", "type": {"type": "map", "values": "string"}, "field-id": 101},
        {"name": "size", "type": "long", "field-id": 102},
        {"name": "modificationTime", "type": "long", "field-id": 103},
        {"name": "dataChange", "type": "boolean", "field-id": 104},
        {"name": "numRecords", "type": ["null", "long"], "default": None, "field-id": 113},
        {"name": "hasFooterOffsets", "type": "boolean", "default": False, "field-id": 122},
        {"name": "docMappingRef", "type": ["null", "string"], "default": None, "field-id": 132},
        {"name": "addedAtVersion", "type": "long", "field-id": 140},
        {"name": "addedAtTimestamp", "type": "long", "field-id": 141},
        {"name": "someFutureField", "type": ["null", "string"], "default": None, "field-id": 199},
    ],
}


def avro_bytes(schema: dict[str, Any], records: list[dict[str, Any]], codec: str) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec=codec)
    return buf.getvalue()


def entry(path: str, records: int) -> dict[str, Any]:
    return {
        "path": path,
        "partitionValues": {},
        "size": 100,
        "modificationTime": 1,
        "dataChange": True,
        "numRecords": records,
        "hasFooterOffsets": False,
        "docMappingRef": "ref1",
        "addedAtVersion": 0,
        "addedAtTimestamp": 1,
        "someFutureField": None,
    }


def write_v0(uri: str, options: dict[str, Any]) -> None:
    """Version 0 as IndexTables4Spark writes it: protocol 4/4 and metaData, header-prefixed gzip."""
    log = executor_lib.create_table(uri + "-tmp", SCHEMA, **options)
    meta = log.snapshot().metadata
    from executor_lib.protocol.actions import ProtocolAction

    store = open_store(uri, **options)
    body = encode_log_bytes(actions_to_ndjson([ProtocolAction(4, 4), meta]), True)
    store.put("_transaction_log/00000000000000000000.json", body)


@pytest.mark.parametrize("codec", ["zstandard", "snappy", "null"])
@pytest.mark.parametrize("manifest_name", ["_manifest.avro", "_manifest.json"])
def test_state_with_all_path_forms_tombstones_and_codecs(
    table: tuple[str, dict[str, Any]], codec: str, manifest_name: str
) -> None:
    uri, options = table
    write_v0(uri, options)
    store = open_store(uri, **options)
    log_dir = "_transaction_log"
    state = "state-v00000000000000000003"
    manifests = {
        f"{log_dir}/manifests/manifest-shared.avro": [entry("a.split", 1), entry("b.split", 2)],
        f"{log_dir}/state-v00000000000000000002/manifest-normalized.avro": [entry("c.split", 4)],
        f"{log_dir}/{state}/manifest-legacy.avro": [entry("d.split", 8), entry("e.split", 16)],
    }
    for key, records in manifests.items():
        store.put(key, avro_bytes(FILE_ENTRY_SCHEMA, records, codec))
    manifest = {
        "formatVersion": 1,
        "stateVersion": 3,
        "createdAt": 5,
        "numFiles": 4,
        "totalBytes": 400,
        "manifests": [
            {"path": "manifests/manifest-shared.avro", "numEntries": 2, "minAddedAtVersion": 0, "maxAddedAtVersion": 1},
            {
                "path": "state-v00000000000000000002/manifest-normalized.avro",
                "numEntries": 1,
                "minAddedAtVersion": 2,
                "maxAddedAtVersion": 2,
            },
            {"path": "manifest-legacy.avro", "numEntries": 2, "minAddedAtVersion": 3, "maxAddedAtVersion": 3},
        ],
        "tombstones": ["b.split"],
        "schemaRegistry": {"ref1": '[{"name":"id","type":"i64"}]'},
        "protocolVersion": 4,
        "metadata": None,
    }
    data = (
        avro_bytes(STATE_SCHEMA, [manifest], codec)
        if manifest_name.endswith(".avro")
        else json.dumps(manifest).encode()
    )
    store.put(f"{log_dir}/{state}/{manifest_name}", data)
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert snap.version == 3
    assert snap.base == state
    assert sorted(f.path for f in snap.files) == ["a.split", "c.split", "d.split", "e.split"]
    assert snap.num_records == 1 + 4 + 8 + 16
    assert snap.doc_mapping(snap.files[0]) == '[{"name":"id","type":"i64"}]'
    assert snap.protocol is not None and snap.protocol.min_reader_version == 4
    assert snap.arrow_schema() == SCHEMA
    assert all("addedAtVersion" not in f.extra for f in snap.files)


def test_missing_or_corrupt_manifest_is_named(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    write_v0(uri, options)
    store = open_store(uri, **options)
    manifest = {
        "formatVersion": 1,
        "stateVersion": 1,
        "createdAt": 5,
        "numFiles": 1,
        "totalBytes": 1,
        "manifests": [
            {"path": "manifests/manifest-gone.avro", "numEntries": 1, "minAddedAtVersion": 0, "maxAddedAtVersion": 0}
        ],
        "tombstones": [],
        "schemaRegistry": {},
        "protocolVersion": 4,
        "metadata": None,
    }
    store.put(
        "_transaction_log/state-v00000000000000000001/_manifest.avro", avro_bytes(STATE_SCHEMA, [manifest], "null")
    )
    with pytest.raises(MissingLogFileError, match=r"manifest-gone\.avro"):
        executor_lib.open_log(uri, **options).snapshot()
    store.put("_transaction_log/manifests/manifest-gone.avro", b"Obj\x01 this is not avro")
    with pytest.raises(CorruptLogError, match=r"manifest-gone\.avro"):
        executor_lib.open_log(uri, **options).snapshot()


def test_state_dir_without_manifest_is_an_unfinished_write(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    write_v0(uri, options)
    store = open_store(uri, **options)
    store.put("_transaction_log/manifests/manifest-orphan.avro", avro_bytes(FILE_ENTRY_SCHEMA, [entry("x", 1)], "null"))
    store.put("_transaction_log/state-v00000000000000000001/.writing", b"")
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert snap.version == 0 and snap.files == []


def test_absolute_manifest_paths_inside_the_table_are_accepted(tmp_path: Any) -> None:
    uri = str(tmp_path / "t")
    write_v0(uri, {})
    store = open_store(uri)
    store.put("_transaction_log/manifests/m-abs.avro", avro_bytes(FILE_ENTRY_SCHEMA, [entry("z.split", 3)], "null"))
    info = {"numEntries": 1, "minAddedAtVersion": 0, "maxAddedAtVersion": 0}
    manifest = {
        "formatVersion": 1,
        "stateVersion": 1,
        "createdAt": 5,
        "numFiles": 1,
        "totalBytes": 100,
        "manifests": [{"path": f"{store.root_uri}/_transaction_log/manifests/m-abs.avro", **info}],
        "tombstones": [],
        "schemaRegistry": {},
        "protocolVersion": 4,
        "metadata": None,
    }
    store.put("_transaction_log/state-v00000000000000000001/_manifest.json", json.dumps(manifest).encode())
    assert [f.path for f in executor_lib.open_log(uri).snapshot().files] == ["z.split"]
    manifest["manifests"] = [{"path": "file:///elsewhere/_transaction_log/manifests/m-abs.avro", **info}]
    store.put(
        "_transaction_log/state-v00000000000000000002/_manifest.json",
        json.dumps({**manifest, "stateVersion": 2}).encode(),
    )
    with pytest.raises(CorruptLogError, match="outside the table"):
        executor_lib.open_log(uri).snapshot()
