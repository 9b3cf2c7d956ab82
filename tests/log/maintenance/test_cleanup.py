"""Retention and garbage collection never delete what a retained state or the latest version needs."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import executor_lib
from executor_lib.protocol.actions import RemoveAction
from executor_lib.storage import open_store
from indextables_contract.errors import CommitConflictError, VersionNotFoundError
from tests.log.helpers import add, make_table

Table = tuple[str, dict[str, Any]]
LOG = "_transaction_log"
NOW_RETENTION = {
    "spark.indextables.state.retention.hours": "0",
    "spark.indextables.state.gc.minManifestAgeHours": "0",
    "spark.indextables.state.gc.allowUnsafeMinManifestAge": "true",  # these tests expire at once
}


def keys(uri: str, options: dict[str, Any], prefix: str) -> set[str]:
    return {o.key for o in open_store(uri, **options).list(prefix)}


def build(uri: str, options: dict[str, Any]) -> list[Any]:
    log = make_table(uri, options, **{"spark.indextables.state.compaction.maxManifests": "3"})
    files = []
    for _ in range(8):
        files.append(add())
        log.commit([files[-1]])
    log.commit([RemoveAction(files[0].path, 1, partition_values=files[0].partition_values, size=files[0].size)])
    return files


def test_old_states_and_unreferenced_manifests_are_collected(table: Table) -> None:
    uri, options = table
    files = build(uri, options)
    expected = {f.path for f in files[1:]}
    dry = executor_lib.open_log(uri, **options, **NOW_RETENTION).cleanup(dry_run=True)
    assert dry.deleted_states == list(range(1, 8)) and dry.retained_states == [8, 9]
    assert len(keys(uri, options, f"{LOG}/state-v")) == 9, "a dry run deletes nothing"
    report = executor_lib.open_log(uri, **options, **NOW_RETENTION).cleanup()
    assert report.deleted_states == list(range(1, 8)) and report.deleted_manifests
    assert {k.split("/")[1] for k in keys(uri, options, f"{LOG}/state-v")} == {
        "state-v00000000000000000008",
        "state-v00000000000000000009",
    }
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert {f.path for f in snap.files} == expected
    assert {f.path for f in executor_lib.open_log(uri, **options).snapshot(version=8).files} == {f.path for f in files}
    assert len(executor_lib.open_log(uri, **options).snapshot(version=3).files) == 3, "version files still there"
    assert executor_lib.open_log(uri, **options).commit([add()]) == 10


def test_young_manifests_and_recent_states_survive_the_defaults(table: Table) -> None:
    uri, options = table
    build(uri, options)
    before = keys(uri, options, f"{LOG}/")
    report = executor_lib.open_log(uri, **options).cleanup()
    assert report.deleted_states == [] and report.deleted_manifests == [] and report.deleted_version_files == []
    assert keys(uri, options, f"{LOG}/") == before


def test_log_retention_deletes_covered_version_files_only(table: Table) -> None:
    uri, options = table
    files = build(uri, options)
    opts = {**NOW_RETENTION, "spark.indextables.purge.txLogRetentionHours": "0"}
    report = executor_lib.open_log(uri, **options, **opts).cleanup()
    assert report.deleted_version_files == [f"{LOG}/{v:020d}.json" for v in range(1, 10)]
    assert f"{LOG}/00000000000000000000.json" in keys(uri, options, f"{LOG}/0")
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert {f.path for f in snap.files} == {f.path for f in files[1:]}
    with pytest.raises(VersionNotFoundError, match="no longer retained"):
        executor_lib.open_log(uri, **options).snapshot(version=3)
    assert executor_lib.open_log(uri, **options).commit([add()]) == 10
    assert len(executor_lib.open_log(uri, **options).snapshot().files) == len(files)  # 7 left + 1 new


EXPIRE_NOW = {
    **NOW_RETENTION,
    "spark.indextables.purge.txLogRetentionHours": "0",
    "spark.indextables.checkpoint.interval": "5",
}


def state_versions(uri: str, options: dict[str, Any]) -> list[int]:
    return sorted({int(k.split("/")[1][len("state-v") :]) for k in keys(uri, options, f"{LOG}/state-v")})


def version_files(uri: str, options: dict[str, Any]) -> list[int]:
    return sorted(
        int(k.split("/")[1][:20])
        for k in keys(uri, options, f"{LOG}/0")
        if re.fullmatch(r"\d{20}\.json", k.split("/")[1])
    )


def commit_slowly(log: Any, files: list[Any]) -> None:
    for f in files:
        time.sleep(0.005)  # "older than 0 hours" needs at least a millisecond
        log.commit([f])


def test_every_checkpoint_deletes_expired_states_and_version_files(table: Table) -> None:
    """Every checkpoint.interval-th commit ends with the cheap part of the cleanup (rules 1 and 3)."""
    uri, options = table
    log = make_table(uri, options, **EXPIRE_NOW)
    files = [add() for _ in range(12)]
    commit_slowly(log, files[:9])
    assert state_versions(uri, options) == [4, 5, 6, 7, 8, 9], "version 5's checkpoint kept itself and state 4"
    assert version_files(uri, options) == [0, 6, 7, 8, 9], "version 0 is never deleted"
    commit_slowly(log, files[9:10])  # version 10: a checkpoint
    assert state_versions(uri, options) == [9, 10]
    assert version_files(uri, options) == [0]
    commit_slowly(log, files[10:])
    assert version_files(uri, options) == [0, 11, 12] and state_versions(uri, options) == [9, 10, 11, 12]
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert snap.version == 12 and {f.path for f in snap.files} == {f.path for f in files}
    assert len(executor_lib.open_log(uri, **options).snapshot(version=9).files) == 9
    with pytest.raises(VersionNotFoundError, match="no longer retained"):
        executor_lib.open_log(uri, **options).snapshot(version=7)
    if not options:  # a file system's emptied state directories go too, so listings stay short
        assert sorted(p.name for p in (Path(uri) / LOG).glob("state-v*")) == [
            f"state-v{v:020d}" for v in (9, 10, 11, 12)
        ]


def test_checkpoint_cleanup_keeps_everything_by_default_or_when_disabled(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options, **{"spark.indextables.checkpoint.interval": "5"})
    commit_slowly(log, [add() for _ in range(10)])
    assert version_files(uri, options) == list(range(11)), "version files are kept 30 days by default"
    assert state_versions(uri, options)[0] <= 1, "states are kept 168 hours by default"
    min_age_1h = {**EXPIRE_NOW, "spark.indextables.state.gc.minManifestAgeHours": "1"}
    commit_slowly(executor_lib.open_log(uri, **options, **min_age_1h), [add() for _ in range(5)])
    assert version_files(uri, options) == list(range(16)), "none is younger than the minimum age (1 hour)"
    assert state_versions(uri, options) == [14, 15], "states have no minimum age"
    disabled = {**EXPIRE_NOW, "spark.indextables.checkpoint.cleanup.enabled": "false"}
    log = executor_lib.open_log(uri, **options, **disabled)
    commit_slowly(log, [add() for _ in range(5)])
    log.checkpoint()
    assert version_files(uri, options) == list(range(21))


def test_a_json_checkpoint_deletes_the_expired_version_files_it_covers(table: Table) -> None:
    uri, options = table
    opts = {**EXPIRE_NOW, "spark.indextables.state.format": "json", "spark.indextables.checkpoint.interval": "100"}
    log = make_table(uri, options, **opts)
    files = [add() for _ in range(6)]
    commit_slowly(log, files[:4])
    log.checkpoint()
    commit_slowly(log, files[4:])
    assert version_files(uri, options) == [0, 5, 6]
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert snap.base == "checkpoint 4"
    assert {f.path for f in snap.files} == {f.path for f in files}


def test_an_append_whose_head_is_cleaned_up_under_it_commits_after_the_new_head(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cleanup by another writer can delete the state of the head a blind append just read, before
    the append reads its live files (retentions of 0, as in tests/log/commit/test_concurrency.py, where Azurite
    once hit this): the append reads the new head instead and lands after it. A commit that named its
    own read version cannot be checked once that version is gone: a conflict, to re-read and retry."""
    uri, options = table
    commit_slowly(make_table(uri, options, **EXPIRE_NOW), [add() for _ in range(3)])
    appender = executor_lib.open_log(uri, **options, **EXPIRE_NOW)
    read_head = appender._refresh_head
    raced: list[int] = []

    def head_then_cleanup() -> Any:
        head = read_head()
        if not raced:  # once: another writer commits past two checkpoints, each cleaning up
            raced.append(head.version)
            commit_slowly(executor_lib.open_log(uri, **options, **EXPIRE_NOW), [add() for _ in range(7)])
        return head

    monkeypatch.setattr(appender, "_refresh_head", head_then_cleanup)
    mine = add()
    assert appender.commit([mine]) == 11
    assert raced == [3] and 3 not in state_versions(uri, options) and 3 not in version_files(uri, options)
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert snap.version == 11 and mine.path in {f.path for f in snap.files} and len(snap.files) == 11
    with pytest.raises(CommitConflictError, match="read version 3, which log retention deleted"):
        executor_lib.open_log(uri, **options).commit([add()], read_version=3)


def test_a_state_that_committed_its_version_outlives_the_minimum_age(compat_root: Path, tmp_path: Path) -> None:
    """A table IndexTables4Spark 0.5.4 committed by state: each state is its version's only record, so
    a cleanup keeps it, whatever ``state.retention.hours`` says, until it is older than
    ``state.gc.minManifestAgeHours`` (1 h); then the states before the newest go."""
    from executor_lib.log.config import LogConfig
    from executor_lib.log.maintenance.cleanup import cleanup_log, expire_after_checkpoint
    from executor_lib.log.state.avro_state import read_state_manifest

    shutil.copytree(compat_root / "02_five_appends", tmp_path / "t")
    options = {"spark.indextables.state.retention.hours": "0", "spark.indextables.state.retention.versions": "1"}
    store, config = open_store(str(tmp_path / "t")), LogConfig.from_options(options)
    states = [1, 2, 3, 4, 5]
    created = [read_state_manifest(store, v).created_at for v in states]  # type: ignore[union-attr]
    assert all(read_state_manifest(store, v).commit_point for v in states)  # type: ignore[union-attr]
    young, old = max(created) + 30 * 60_000, max(created) + 61 * 60_000
    assert cleanup_log(store, config, dry_run=True, now_ms=young).deleted_states == []
    assert expire_after_checkpoint(store, config, 5, now_ms=young).deleted_states == []
    assert cleanup_log(store, config, dry_run=True, now_ms=old).deleted_states == [1, 2, 3, 4]
    assert expire_after_checkpoint(store, config, 5, now_ms=old).deleted_states == [1, 2, 3, 4]
    assert executor_lib.open_log(str(tmp_path / "t")).snapshot().version == 5
