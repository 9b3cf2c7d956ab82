"""Streaming transaction identifiers in the log: a micro-batch is committed once per application id,
the map survives state writes, checkpoints, cleanup, merges and missing states, and the version files
stay readable by the 0.5.x-style reader (no new action line)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import executor_lib
from executor_lib.log.state.avro_state import read_state_manifest
from executor_lib.log.state.streaming_txns import StreamingTxn, TxnRecord, decode, parse_tag
from executor_lib.protocol.actions import AddAction, removes_of
from executor_lib.protocol.files import LOG_DIR, state_dir
from executor_lib.storage import open_store
from indextables_contract.errors import ConfigError, CorruptLogError, InvalidActionError
from tests.jvm_reader import Jvm05Committer, jvm_read
from tests.log.helpers import add, make_table

APP = "query-7f3a"


def live_records(log: Any) -> int:
    return sum(a.num_records or 0 for a in log.snapshot().files)


def test_a_batch_is_committed_once_and_a_replay_is_skipped(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    log = make_table(uri, options)
    assert log.commit_streaming_batch([add(), add()], StreamingTxn(APP, 0)) == 1
    assert log.commit_streaming_batch([add()], StreamingTxn(APP, 1)) == 2
    # the restarted query replays batch 1 (new split files), then an older one
    assert log.commit_streaming_batch([add()], StreamingTxn(APP, 1)) is None
    assert log.commit_streaming_batch([add()], StreamingTxn(APP, 0)) is None
    assert log.latest_version() == 2
    assert live_records(log) == 30
    # another query's batch 0 is its own
    assert log.commit_streaming_batch([add()], StreamingTxn("other", 0)) == 3
    assert executor_lib.open_log(uri, **options).streaming_txns() == {
        APP: TxnRecord(1, 2),
        "other": TxnRecord(0, 3),
    }
    info = log.commit_info(3)
    assert info is not None and info.operation == "STREAMING UPDATE"
    assert info.operation_parameters == {"appId": "other", "batchId": "0"}


def test_the_map_is_carried_by_states_checkpoints_cleanup_and_merges(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    log = make_table(
        uri, {}, **{"spark.indextables.state.retention.versions": 1, "spark.indextables.state.retention.hours": 0}
    )
    for batch in range(3):
        log.commit_streaming_batch([add(), add()], StreamingTxn(APP, batch))
    # a merge removes every tagged split and adds an untagged one (dataChange=false)
    files = log.snapshot().files
    merged = AddAction(
        path="date=2024-01-01/splits/merged.split",
        partition_values={"date": "2024-01-01"},
        size=5,
        modification_time=1,
        data_change=False,
        num_records=60,
        num_merge_ops=1,
    )
    log.commit([*removes_of(files, data_change=False), merged], operation="MERGE SPLITS")
    log.checkpoint()
    log.cleanup()
    fresh = executor_lib.open_log(uri)
    assert not any(a.split_tags for a in fresh.snapshot().files)
    assert fresh.streaming_txns() == {APP: TxnRecord(2, 3)}
    assert fresh.commit_streaming_batch([add()], StreamingTxn(APP, 2)) is None
    assert fresh.commit_streaming_batch([add()], StreamingTxn(APP, 3)) == 5
    manifest = read_state_manifest(fresh.store, 5)
    assert manifest is not None and manifest.streaming_txns() == {APP: TxnRecord(3, 5)}


def test_a_missing_state_is_covered_by_the_version_files_tags(tmp_path: Path) -> None:
    """A writer killed after its version file landed but before its state: the tags in the version file
    still name the batch, for the replay's check and for the next state write."""
    uri = str(tmp_path / "t")
    log = make_table(uri, {})
    log.commit_streaming_batch([add()], StreamingTxn(APP, 0))
    log.commit_streaming_batch([add()], StreamingTxn(APP, 1))
    store = open_store(uri)
    store.delete(f"{LOG_DIR}/{state_dir(2)}/_manifest.avro")
    replay = executor_lib.open_log(uri)
    assert replay.commit_streaming_batch([add()], StreamingTxn(APP, 1)) is None
    assert replay.commit_streaming_batch([add()], StreamingTxn("b", 0)) == 3
    manifest = read_state_manifest(store, 3)
    assert manifest is not None and manifest.streaming_txns() == {APP: TxnRecord(1, 2), "b": TxnRecord(0, 3)}


def test_a_05x_commit_in_between_does_not_lose_the_map(tmp_path: Path) -> None:
    """A 0.5.x writer's state carries no map of ours: the newest state this project wrote is used."""
    uri = str(tmp_path / "t")
    log = make_table(uri, {}, partitioned=False)
    log.commit_streaming_batch([add(None)], StreamingTxn(APP, 4))
    Jvm05Committer(uri, {}).commit(["splits/jvm-a.split"])
    fresh = executor_lib.open_log(uri)
    assert fresh.commit_streaming_batch([add(None)], StreamingTxn(APP, 4)) is None
    assert fresh.commit_streaming_batch([add(None)], StreamingTxn(APP, 5)) == 3  # committed as a state
    manifest = read_state_manifest(fresh.store, 3)
    assert manifest is not None and manifest.committed_by_state
    assert manifest.streaming_txns() == {APP: TxnRecord(5, 3)}


def test_concurrent_commits_of_one_batch_land_once(table: tuple[str, dict[str, Any]]) -> None:
    """A restarted query racing its predecessor (zombie): of eight writers committing the same batch with
    different split files, exactly one lands; the others see it at the head or among the winners."""
    uri, options = table
    make_table(uri, options)
    results: list[int | None] = []
    errors: list[BaseException] = []

    def commit() -> None:
        try:
            results.append(executor_lib.open_log(uri, **options).commit_streaming_batch([add()], StreamingTxn(APP, 0)))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=commit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(results, key=lambda r: r is None) == [1] + [None] * 7
    assert live_records(executor_lib.open_log(uri, **options)) == 10


def test_streamed_version_files_are_jvm_readable(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    log = make_table(uri, {})
    for batch in range(3):
        log.commit_streaming_batch([add(), add("2024-01-02")], StreamingTxn(APP, batch))
    view = jvm_read(uri)
    snapshot = log.snapshot()
    assert view.version == snapshot.version == 3
    assert sorted(view.files) == sorted(a.path for a in snapshot.files)
    tags = {t for e in view.files.values() for t in e["splitTags"]}
    assert tags == {f"indextables.streamingTxn:{b}:{APP}" for b in range(3)}


def test_a_json_state_table_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    log = make_table(uri, {}, **{"spark.indextables.state.format": "json"})
    with pytest.raises(ConfigError, match="Avro state format"):
        log.commit_streaming_batch([add()], StreamingTxn(APP, 0))
    assert log.latest_version() == 0


def test_identifiers_are_checked() -> None:
    with pytest.raises(InvalidActionError):
        StreamingTxn("", 0)
    with pytest.raises(InvalidActionError):
        StreamingTxn(APP, -1)
    assert parse_tag(StreamingTxn("a:b", 12).tag) == StreamingTxn("a:b", 12)
    assert parse_tag("indextables.streamingTxn:x:a") is None
    assert parse_tag("other") is None
    with pytest.raises(CorruptLogError, match="state-v9"):
        decode('{"a": {"batchId": "1", "version": 2}}', "state-v9")
