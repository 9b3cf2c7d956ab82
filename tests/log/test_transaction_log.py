"""Transaction log behaviour, each body run on the local filesystem and on S3 (moto)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import time
from typing import Any

import pytest

import executor_lib
from executor_lib.protocol.actions import MetadataAction, ProtocolAction, RemoveAction, actions_to_ndjson
from executor_lib.protocol.files import encode_log_bytes
from executor_lib.storage import open_store
from indextables_contract.errors import (
    CommitConflictError,
    ConfigError,
    InvalidActionError,
    MissingLogFileError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedProtocolError,
    VersionNotFoundError,
)
from tests.log.helpers import SCHEMA, add, make_table

Table = tuple[str, dict[str, Any]]
LOG = "_transaction_log"
JSON_STATE = {"spark.indextables.state.format": "json"}  # v3 table with JSON checkpoints


def log_keys(uri: str, options: dict[str, Any]) -> list[str]:
    return [o.key for o in open_store(uri, **options).list(f"{LOG}/")]


def test_create_commit_snapshot_and_reopen(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    assert log.snapshot().version == 0 and log.snapshot().files == []
    a1, a2 = add("2024-01-01", 5), add("2024-01-02", 7)
    assert log.commit([a1]) == 1
    assert log.commit([a2]) == 2
    reopened = executor_lib.open_log(uri, **options)
    snap = reopened.snapshot()
    assert snap.version == 2
    assert {f.path for f in snap.files} == {a1.path, a2.path}
    assert snap.num_records == 12
    assert snap.partition_columns == ("date",)
    assert snap.arrow_schema() == SCHEMA
    assert reopened.snapshot(version=1).num_records == 5


def test_create_twice_and_open_missing(table: Table) -> None:
    uri, options = table
    with pytest.raises(TableNotFoundError, match="not an IndexTables table"):
        executor_lib.open_log(uri, **options)
    make_table(uri, options)
    with pytest.raises(TableAlreadyExistsError):
        make_table(uri, options)


def test_remove_and_time_travel_by_version_and_timestamp(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    first = add()
    log.commit([first])
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    log.commit([RemoveAction(first.path, int(time.time() * 1000), partition_values=first.partition_values)])
    assert log.snapshot().files == []
    assert [f.path for f in log.snapshot(version=1).files] == [first.path]
    assert log.snapshot(timestamp_ms=middle_ms).version == 1
    with pytest.raises(VersionNotFoundError):
        log.snapshot(version=9)
    with pytest.raises(VersionNotFoundError, match="before the earliest"):
        log.snapshot(timestamp_ms=1)
    with pytest.raises(ConfigError, match=r"snapshot of .*: give either version=1 or timestamp_ms=\d+, not both"):
        log.snapshot(version=1, timestamp_ms=middle_ms)  # a class of the hierarchy, not a bare ValueError
    history = log.history()
    assert [h.version for h in history] == [2, 1, 0]
    assert (history[0].num_removed_files, history[1].num_added_files, history[2].operation) == (
        1,
        1,
        "CREATE TABLE",
    )
    assert len({h.txn_id for h in history}) == 3


def test_checkpoints_every_interval_and_snapshot_uses_them(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options, **JSON_STATE, **{"spark.indextables.checkpoint.interval": "4"})
    added = [add(records=i + 1) for i in range(9)]
    for a in added:
        log.commit([a])
    keys = log_keys(uri, options)
    assert f"{LOG}/00000000000000000004.checkpoint.json" in keys
    assert f"{LOG}/00000000000000000008.checkpoint.json" in keys
    store = open_store(uri, **options)
    hint = json.loads(store.read(f"{LOG}/_last_checkpoint"))
    assert (hint["version"], hint["numFiles"], hint["format"]) == (8, 8, "json")
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert snap.base == "checkpoint 8"
    assert {f.path for f in snap.files} == {a.path for a in added}
    assert snap.num_records == sum(range(1, 10))
    # version files before the checkpoint are no longer needed for the latest snapshot
    for v in range(1, 8):
        store.delete(f"{LOG}/{v:020d}.json")
    assert executor_lib.open_log(uri, **options).snapshot().num_records == sum(range(1, 10))
    with pytest.raises(VersionNotFoundError, match="version 3 is no longer retained"):
        executor_lib.open_log(uri, **options).snapshot(version=3)


def test_multi_part_checkpoint(table: Table) -> None:
    uri, options = table
    opts = {
        "spark.indextables.checkpoint.interval": "5",
        "spark.indextables.checkpoint.actionsPerPart": "3",
        **JSON_STATE,
    }
    log = make_table(uri, options, **opts)
    added = [add() for _ in range(5)]
    for a in added:
        log.commit([a])
    keys = log_keys(uri, options)
    parts = [k for k in keys if ".checkpoint." in k and not k.endswith("checkpoint.json")]
    assert len(parts) == 3  # protocol + metaData + 5 adds = 7 actions, 3 per part
    store = open_store(uri, **options)
    hint = json.loads(store.read(f"{LOG}/_last_checkpoint"))
    assert (hint["format"], hint["parts"]) == ("json-multipart", 3)
    assert executor_lib.open_log(uri, **options).snapshot().base == "checkpoint 5"
    assert {f.path for f in executor_lib.open_log(uri, **options).snapshot().files} == {a.path for a in added}
    store.delete(parts[1])
    with pytest.raises(MissingLogFileError, match="part of checkpoint 5"):
        executor_lib.open_log(uri, **options).snapshot()


def test_stale_last_checkpoint_hint_is_only_a_hint(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options, **JSON_STATE, **{"spark.indextables.checkpoint.interval": "2"})
    for _ in range(2):
        log.commit([add()])
    store = open_store(uri, **options)
    hint = store.read(f"{LOG}/_last_checkpoint")
    for _ in range(3):  # versions 3..5, checkpoint at 4 - then the hint is rolled back (writer "crashed")
        log.commit([add()])
    store.put(f"{LOG}/_last_checkpoint", hint)
    assert executor_lib.open_log(uri, **options).snapshot().version == 5
    assert len(executor_lib.open_log(uri, **options).snapshot().files) == 5
    # a hint pointing at a checkpoint that no longer exists
    store.delete(f"{LOG}/00000000000000000002.checkpoint.json")
    store.delete(f"{LOG}/00000000000000000004.checkpoint.json")
    assert len(executor_lib.open_log(uri, **options).snapshot().files) == 5


def test_uncompressed_log_and_crc_files(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options, **{"spark.indextables.transaction.compression.enabled": "false"})
    log.commit([add()])
    store = open_store(uri, **options)
    assert store.read(f"{LOG}/00000000000000000001.json").startswith(b'{"add"'), "no commitInfo line by default"
    store.put(f"{LOG}/.00000000000000000001.json.crc", b"crc\x00garbage")
    store.put(f"{LOG}/.00000000000000000002.json.crc", b"crc\x00garbage")
    assert executor_lib.open_log(uri, **options).snapshot().version == 1


def test_schema_deduplication_on_commit(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    mapping = '[{"name":"id","type":"i64","fast":true},{"name":"message","type":"text"}]'
    log.commit([add(doc_mapping=mapping), add(doc_mapping=mapping)])
    log.commit([add(doc_mapping=mapping)])
    snap = executor_lib.open_log(uri, **options).snapshot()
    refs = {f.doc_mapping_ref for f in snap.files}
    assert len(refs) == 1 and None not in refs
    assert all(f.doc_mapping_json is None for f in snap.files)
    (ref,) = refs
    assert snap.metadata.configuration[f"docMappingSchema.{ref}"] == mapping
    assert snap.doc_mapping(snap.files[0]) == mapping
    history = log.history()
    store = open_store(uri, **options)
    from executor_lib.log.state.version_files import read_version_actions

    assert any(isinstance(a, MetadataAction) for a in read_version_actions(store, 1))
    assert not any(isinstance(a, MetadataAction) for a in read_version_actions(store, 2))
    assert history[0].version == 2


def test_invalid_actions_write_nothing(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    a = add()
    log.commit([a])
    before = log_keys(uri, options)
    with pytest.raises(InvalidActionError, match="partition values"):
        log.commit([add(date=None)])
    with pytest.raises(InvalidActionError, match="not live at read version"):
        log.commit([RemoveAction("date=2024-01-01/splits/never-added.split", 1)])
    with pytest.raises(InvalidActionError, match="added twice"):
        log.commit(
            [
                dataclasses.replace(a, path="date=x/p.split"),
                dataclasses.replace(a, path="date=x/p.split"),
            ]
        )
    with pytest.raises(InvalidActionError, match="invalid file path"):
        log.commit([dataclasses.replace(a, path="../escape.split")])
    with pytest.raises(InvalidActionError, match="at least one action"):
        log.commit([])
    with pytest.raises(InvalidActionError, match="not a transaction-log action"):
        log.commit(["add"])  # type: ignore[list-item]
    assert log_keys(uri, options) == before


def test_concurrent_removes_conflict(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    target = add()
    log.commit([target, add()])
    a, b = executor_lib.open_log(uri, **options), executor_lib.open_log(uri, **options)
    read = a.snapshot().version
    assert b.snapshot().version == read
    a.commit([RemoveAction(target.path, 1)], read_version=read)
    with pytest.raises(CommitConflictError, match="already removed"):
        b.commit([RemoveAction(target.path, 2), add()], read_version=read)
    assert executor_lib.open_log(uri, **options).snapshot().version == 2


def test_appends_commute_but_overwrite_and_metadata_conflict(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    old = add()
    log.commit([old])
    read = log.snapshot().version
    other = executor_lib.open_log(uri, **options)
    other.commit([add()])
    assert log.commit([add()], read_version=read) == 3  # blind append on a stale read: fine
    with pytest.raises(CommitConflictError, match="added files"):
        log.commit([RemoveAction(old.path, 1), add()], read_version=read, fail_on_concurrent_add=True)
    meta = log.snapshot().metadata
    changed = meta.with_configuration({**meta.configuration, "owner": "team-a"})
    with pytest.raises(CommitConflictError, match="metadata"):
        log.commit([changed], read_version=read)
    assert log.commit([changed]) == 4
    with pytest.raises(CommitConflictError, match="changed the table metadata"):
        other.commit([add()], read_version=3)


def _write_raw_version(uri: str, options: dict[str, Any], version: int, data: bytes) -> None:
    open_store(uri, **options).put(f"{LOG}/{version:020d}.json", data)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"\x01\x01\x1f\x8b\x08\x00garbage", "corrupt or truncated gzip"),
        (b'{"add": {"path": ', "line 1: invalid JSON"),
        (b'{"teleport":{"to":"mars"}}\n', "unknown action type 'teleport'"),
    ],
)
def test_corrupt_version_files_are_named(table: Table, data: bytes, error: str) -> None:
    uri, options = table
    log = make_table(uri, options)
    log.commit([add()])
    _write_raw_version(uri, options, 2, data)
    with pytest.raises(executor_lib.ProtocolError) as err:
        executor_lib.open_log(uri, **options).snapshot()
    assert "00000000000000000002.json" in str(err.value) and error in str(err.value)


def test_version_gap_is_an_error(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    log.commit([add()])
    _write_raw_version(uri, options, 3, actions_to_ndjson([add()]))
    with pytest.raises(MissingLogFileError, match=r"00000000000000000002\.json is missing"):
        executor_lib.open_log(uri, **options).snapshot()


def test_unsupported_protocols_are_refused(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    future = ProtocolAction(5, 5)
    _write_raw_version(uri, options, 1, encode_log_bytes(actions_to_ndjson([future]), True))
    with pytest.raises(UnsupportedProtocolError, match="reader version 5"):
        executor_lib.open_log(uri, **options).snapshot()
    _write_raw_version(uri, options, 1, actions_to_ndjson([ProtocolAction(3, 3, frozenset({"timeMachine"}))]))
    with pytest.raises(UnsupportedProtocolError, match="timeMachine"):
        executor_lib.open_log(uri, **options).snapshot()
    newer = actions_to_ndjson([ProtocolAction(5, 5)]) + b'{"deletionVector":{"path":"x"}}\n'
    _write_raw_version(uri, options, 1, newer)
    with pytest.raises(UnsupportedProtocolError, match="reader version 5"):
        executor_lib.open_log(uri, **options).snapshot()
    _write_raw_version(uri, options, 1, actions_to_ndjson([ProtocolAction(4, 5)]))  # readable, not writable
    reader = executor_lib.open_log(uri, **options)
    assert reader.snapshot().version == 1
    before = log_keys(uri, options)
    with pytest.raises(UnsupportedProtocolError, match="writer version 5"):
        reader.commit([add()])
    with pytest.raises(UnsupportedProtocolError, match="writer version 5"):
        reader.checkpoint()
    assert log_keys(uri, options) == before
    del log


def test_checkpoint_renormalizes_raw_hashed_schema_refs(table: Table) -> None:
    """Refs hashed from raw JSON by older writers collapse to one canonical ref per schema."""
    uri, options = table
    log = make_table(uri, options, **JSON_STATE, **{"spark.indextables.checkpoint.interval": "100"})
    mapping = '[{"name":"id","type":"i64"},{"name":"message","type":"text"}]'
    variants = [json.dumps(json.loads(mapping), indent=i) for i in range(1, 8)]
    meta = log.snapshot().metadata
    registry = {f"raw{i}": v for i, v in enumerate(variants)}
    log.commit(
        [meta.with_configuration({**meta.configuration, **{f"docMappingSchema.{k}": v for k, v in registry.items()}})]
    )
    log.commit([dataclasses.replace(add(), doc_mapping_ref=ref) for ref in registry])
    log.checkpoint()
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert snap.base.startswith("checkpoint")
    refs = {f.doc_mapping_ref for f in snap.files}
    assert len(refs) == 1 and len(snap.files) == len(variants)
    (ref,) = refs
    assert json.loads(snap.doc_mapping(snap.files[0]) or "") == json.loads(mapping)
    # every old ref stays resolvable: a later version file may still use it
    assert {k for k in snap.metadata.configuration if k.startswith("docMappingSchema.")} == {
        f"docMappingSchema.{r}" for r in [ref, *registry]
    }


def test_doc_mappings_of_removed_files_survive_checkpoints(table: Table) -> None:
    """A mapping no live file uses at checkpoint time must still resolve for files added later."""
    uri, options = table
    log = make_table(
        uri,
        options,
        **JSON_STATE,
        **{"spark.indextables.checkpoint.interval": "10", "spark.indextables.state.schema.renormalizeThreshold": "0"},
    )
    mapping_a = '[{"name":"id","type":"i64"},{"name":"message","type":"text"}]'
    mapping_b = '[{"name":"id","type":"i64","fast":true},{"name":"message","type":"text"}]'
    first = add(doc_mapping=mapping_a)
    log.commit([first])
    for _ in range(8):
        log.commit([add(doc_mapping=mapping_b)])
    log.commit([RemoveAction(first.path, 1, partition_values=first.partition_values)])  # v10, checkpoint
    late = add(doc_mapping=mapping_a)
    log.commit([late])
    fresh = executor_lib.open_log(uri, **options).snapshot()
    assert fresh.base == "checkpoint 10"
    (late_add,) = [f for f in fresh.files if f.path == late.path]
    assert fresh.doc_mapping(late_add) == mapping_a


def test_a_v3_table_gets_json_checkpoints_under_the_default_state_format(table: Table) -> None:
    """Writers with state.format=avro (the default) still checkpoint a v1-v3 table every interval,
    as JSON; only an explicit checkpoint() upgrades it to Avro state."""
    uri, options = table
    make_table(uri, options, **{"spark.indextables.state.format": "json"})
    log = executor_lib.open_log(uri, **options, **{"spark.indextables.checkpoint.interval": "5"})
    files = [add() for _ in range(6)]
    for f in files:
        log.commit([f])
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert snap.protocol.min_writer_version == 3 and snap.base == "checkpoint 5"
    assert {f.path for f in snap.files} == {f.path for f in files}


def test_commit_info_line_only_when_enabled_and_recorded_with_the_state(table: Table) -> None:
    """IndexTables4Spark's readers reject unknown action lines, so by default a version file holds
    only protocol/metaData/add/remove lines and the commitInfo is recorded with the version's state."""
    uri, options = table
    log = make_table(uri, options)
    version = log.commit([add()], operation="MERGE", operation_parameters={"mergeId": "m1"})
    store = open_store(uri, **options)
    assert b"commitInfo" not in gzip.decompress(store.read(f"{LOG}/{version:020d}.json")[2:])
    info = log.commit_info(version)
    assert info is not None and info.operation == "MERGE" and info.operation_parameters == {"mergeId": "m1"}
    assert log.history(limit=1)[0].operation == "MERGE"

    uri2 = uri.rstrip("/") + "-with-line"
    log2 = make_table(uri2, options, **{"spark.indextables.transaction.commitInfo.enabled": "true"})
    log2.commit([add()])
    assert gzip.decompress(open_store(uri2, **options).read(f"{LOG}/{1:020d}.json")[2:]).startswith(b'{"commitInfo"')
