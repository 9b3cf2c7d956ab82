"""Retention and garbage collection never delete what a retained state or the latest version needs."""

from __future__ import annotations

from typing import Any

import pytest

import executor_lib
from executor_lib.actions import RemoveAction
from executor_lib.errors import VersionNotFoundError
from executor_lib.storage import open_store
from tests.log.helpers import add, make_table

Table = tuple[str, dict[str, Any]]
LOG = "_transaction_log"
NOW_RETENTION = {
    "spark.indextables.state.retention.hours": "0",
    "spark.indextables.state.gc.minManifestAgeHours": "0",
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
        "state-v00000000000000000008", "state-v00000000000000000009",
    }  # fmt: skip
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
