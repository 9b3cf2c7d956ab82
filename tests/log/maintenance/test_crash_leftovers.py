"""Crash leftovers and orphans are collected (issue 20, hole 7): temporary files a killed writer
left (``.<name>.tmp-<id>``, hidden from listings) in the log, ``manifests/`` and the data directories
go with cleanup/PURGE once older than the retention; young ones (a live writer's) stay. An upload
whose commit was refused is an orphan PURGE collects, while every live split stays.

Before the fix nothing ever removed ``*.tmp-*`` files.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.log.maintenance.cleanup import cleanup_log
from executor_lib.log.maintenance.purge import purge_table
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.write.publish import write_and_upload
from indextables_contract.errors import IndexTablesError, InvalidActionError

SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string())])
DAY = 24 * 3600


def _leftover(path: Path, age_s: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"half written")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


DEAD, LIVE = "d" * 32, "1" * 32  # the id part of the store's temporary names (LocalStore: 32 hex digits)


def test_cleanup_and_purge_remove_old_temporary_files_only(tmp_path: Path) -> None:
    root = tmp_path / "t"
    log = executor_lib.create_table(str(root), SCHEMA)
    log.commit([write_and_upload(log.store, pa.table({"id": [1], "msg": ["a"]}), mapping_for(SCHEMA, {}))])
    old_log = _leftover(root / "_transaction_log" / f".00000000000000000009.json.tmp-{DEAD}", 2 * 3600)
    old_manifest = _leftover(root / "_transaction_log" / "manifests" / f".manifest-x.avro.tmp-{DEAD}", 2 * 3600)
    young_log = _leftover(root / "_transaction_log" / f".00000000000000000002.json.tmp-{LIVE}", 60)
    old_split = _leftover(root / "splits" / f".split-x.split.tmp-{DEAD}", 8 * DAY)
    young_split = _leftover(root / "splits" / f".split-y.split.tmp-{LIVE}", 3600)

    dry = cleanup_log(log.store, log.config, dry_run=True)
    assert (
        sorted(dry.deleted_temporary) == sorted(str(p.relative_to(root)) for p in (old_log, old_manifest))
        and old_log.exists()
    )
    report = cleanup_log(log.store, log.config)
    assert not old_log.exists() and not old_manifest.exists() and young_log.exists()
    assert report.to_json()["deletedTemporaryFiles"] == dry.deleted_temporary

    purged = purge_table(log, retention_hours=168)
    assert [k for k, _ in purged.deleted_temporary] == [f"splits/.split-x.split.tmp-{DEAD}"]
    assert ("temporary", f"splits/.split-x.split.tmp-{DEAD}", len(b"half written")) in purged.rows()
    assert not old_split.exists() and young_split.exists()
    assert log.snapshot().num_records == 1


def test_the_split_of_a_refused_commit_is_an_orphan_purge_collects(tmp_path: Path) -> None:
    log = executor_lib.create_table(str(tmp_path / "t"), SCHEMA)
    live = write_and_upload(log.store, pa.table({"id": [1], "msg": ["a"]}), mapping_for(SCHEMA, {}))
    log.commit([live])
    other = pa.table({"id": [2]})
    refused = write_and_upload(log.store, other, mapping_for(other.schema, {}))
    with pytest.raises(InvalidActionError):
        log.commit([refused])
    report = purge_table(log, now_ms=int((time.time() + 8 * DAY) * 1000))
    assert [k for k, _ in report.deleted_splits] == [refused.path]
    assert log.store.exists(live.path) and not log.store.exists(refused.path)


@pytest.mark.parametrize("seed", range(3))
def test_purge_after_log_cleanup_leaves_every_readable_version_its_files(tmp_path: Path, seed: int) -> None:
    """Random adds and removes over states every few versions, then a purge that also cleans the log:
    every version still readable afterwards finds all its files, and splits no version needs are gone
    (bases reached through retained version files are not loaded, ``purge_table``)."""
    import random

    from executor_lib.protocol.actions import RemoveAction

    rng = random.Random(seed)
    options = {"spark.indextables.state.format": "avro", "spark.indextables.checkpoint.interval": "3"}
    log = executor_lib.create_table(str(tmp_path / "t"), SCHEMA, **options)
    live: list[str] = []
    for _ in range(14):
        adds = [
            write_and_upload(log.store, pa.table({"id": [i], "msg": ["m"]}), mapping_for(SCHEMA, {}))
            for i in range(rng.randrange(1, 4))
        ]
        removed = rng.sample(live, min(len(live), rng.randrange(0, 3)))
        log.commit([*adds, *(RemoveAction(path=p) for p in removed)])
        live = [p for p in live if p not in removed] + [a.path for a in adds]
    latest = log.latest_version()
    report = purge_table(log, tx_log_retention_hours=24, now_ms=int((time.time() + 8 * DAY) * 1000))
    assert report.deleted_splits and report.log is not None and report.log.deleted_version_files
    readable = 0
    for version in range(latest + 1):
        try:
            snapshot = executor_lib.open_log(str(tmp_path / "t")).snapshot(version=version)
        except IndexTablesError:
            continue
        readable += 1
        missing = [a.path for a in snapshot.files if not log.store.exists(a.path)]
        assert missing == [], f"version {version} lost {missing}"
    assert readable >= 2 and sorted(a.path for a in log.snapshot().files) == sorted(live)


def test_a_purge_with_every_old_split_live_reads_no_version_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common case is cheap (a 1M-file table: 5.2 s -> 0.25 s in-process): old splits that are
    live in the latest version are protected by one vectorized lookup; the version files' adds and
    every retained state are read only for what that leaves. A removed split a retained version
    still holds is kept by the full rule (``test_purge_after_log_cleanup_…``)."""
    log = executor_lib.create_table(str(tmp_path / "t"), SCHEMA)
    for i in range(3):
        log.commit([write_and_upload(log.store, pa.table({"id": [i], "msg": ["a"]}), mapping_for(SCHEMA, {}))])
    read: list[str] = []
    original = type(log.store).read
    monkeypatch.setattr(
        type(log.store), "read", lambda self, key, *a, **k: read.append(key) or original(self, key, *a, **k)
    )
    later = int((time.time() + 8 * DAY) * 1000)
    report = purge_table(executor_lib.open_log(str(tmp_path / "t")), dry_run=True, now_ms=later)
    assert report.deleted_splits == [] and report.earliest_version == 0
    # (version 0 is read as the oldest readable version is loaded: to know it still loads)
    assert _version_files(read) == {0}, read
    orphan = write_and_upload(log.store, pa.table({"id": [9], "msg": ["z"]}), mapping_for(SCHEMA, {}))
    read.clear()
    report = purge_table(executor_lib.open_log(str(tmp_path / "t")), dry_run=True, now_ms=later)
    assert [k for k, _ in report.deleted_splits] == [orphan.path]
    assert _version_files(read) == {0, 1, 2, 3}, "an unprotected split: every version file's adds are read"


def _version_files(keys: list[str]) -> set[int]:
    return {
        int(k[len("_transaction_log/") : -len(".json")])
        for k in keys
        if re.fullmatch(r"_transaction_log/\d{20}\.json", k)
    }
