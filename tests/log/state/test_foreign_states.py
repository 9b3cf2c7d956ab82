"""A checkpoint IndexTables4Spark 0.5.3 writes past the log (``executor_lib.log.state.foreign_states``) loses
no commit: its CHECKPOINT on a table of ours finds the newest version's state taken (every commit here
writes one) and writes the same files at the next version without a state, a number no version file
claims; 0.5.3's next append takes that number. Found by tests/jvm/test_two_writers.py (CI: 280
acknowledged rows lost); tests/jvm/test_checkpoint_beside_us.py runs the same with the real 0.5.3."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import executor_lib
from executor_lib.log.config import LogConfig
from executor_lib.log.transaction_log import TransactionLog
from executor_lib.storage import open_store
from executor_lib.storage.local import LocalStore
from indextables_contract.errors import InvalidActionError
from tests.jvm_reader import Jvm053Log, jvm_read
from tests.log.helpers import add, make_table

Table = tuple[str, dict[str, Any]]
LOG = "_transaction_log"


def ours_then_checkpoint(
    uri: str, options: dict[str, Any], missing: tuple[int, ...] = ()
) -> tuple[Any, list[str], int]:
    """A table of ours with three appends (version files and a state each), then 0.5.3's CHECKPOINT,
    whose listing lost our appends numbered ``missing``: (our log, our paths, the version it wrote its
    state at)."""
    log = make_table(uri, options, partitioned=False)
    paths = []
    for _ in range(3):
        a = add(None)
        log.commit([a])
        paths.append(a.path)
    at = Jvm053Log(uri, options).checkpoint(missing=tuple(paths[i] for i in missing))
    assert at == 4, "state-v3 is ours: 0.5.3 writes its checkpoint at the next version, past the log"
    return log, paths, at


def live(uri: str, options: dict[str, Any]) -> set[str]:
    return {f.path for f in executor_lib.open_log(uri, **options).snapshot().files}


def test_an_append_into_the_version_of_a_checkpoint_past_the_log_is_read(table: Table) -> None:
    uri, options = table
    log, paths, at = ours_then_checkpoint(uri, options)
    theirs = "part-jvm-after-checkpoint.split"
    assert Jvm053Log(uri, options).append(theirs) == at, "0.5.3 takes the number its own state stands at"
    assert live(uri, options) == {*paths, theirs}, "the state beside version 4's file does not hold it: read past"
    mine = add(None)
    assert log.commit([mine]) == at + 1
    assert live(uri, options) == {*paths, theirs, mine.path}
    assert set(jvm_read(uri, **options).files) == {*paths, theirs, mine.path}, "our state 5 is the JVM's base now"


def test_a_checkpoint_past_the_log_is_closed_before_the_next_commit(table: Table) -> None:
    uri, options = table
    log, paths, at = ours_then_checkpoint(uri, options)
    mine = add(None)
    assert log.commit([mine]) == at + 1, "version 4 is closed first (a version file that changes nothing)"
    store = open_store(uri, **options)
    assert store.exists(f"{LOG}/{at:020d}.json")
    closing = executor_lib.open_log(uri, **options).version_actions(at)
    assert [type(a).__name__ for a in closing] == ["MetadataAction"], "the table's metaData again, unchanged"
    theirs = "part-jvm-after-close.split"
    assert Jvm053Log(uri, options).append(theirs) == at + 2, "0.5.3's next append can no longer take version 4"
    assert live(uri, options) == {*paths, mine.path, theirs}
    assert set(jvm_read(uri, **options).files) == {*paths, mine.path, theirs}


def test_a_snapshot_at_a_checkpoint_past_the_log_sees_the_append_that_takes_its_number(table: Table) -> None:
    uri, options = table
    _, paths, at = ours_then_checkpoint(uri, options)
    reader = executor_lib.open_log(uri, **options)
    assert reader.snapshot().version == at and {f.path for f in reader.snapshot().files} == set(paths)
    theirs = "part-jvm-under-a-cached-snapshot.split"
    Jvm053Log(uri, options).append(theirs)
    assert {f.path for f in reader.snapshot().files} == {*paths, theirs}, "the cached snapshot is not extended"


class _CheckpointBesideOurVersionFile(LocalStore):
    """0.5.3's CHECKPOINT runs while our writer commits version N: it sees version N-1 last, finds its
    state taken and writes the files of N-1 as state N, just before our ``N.json`` lands."""

    def __init__(self, root: Path, version: int) -> None:
        super().__init__(root)
        self.uri, self.key, self.fired_at = str(root), f"{LOG}/{version:020d}.json", -1

    def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        if key == self.key and self.fired_at < 0:
            self.fired_at = Jvm053Log(self.uri, {}).checkpoint()
        super().put_if_absent(key, data, metadata)


def test_our_version_file_stands_beside_a_checkpoint_written_at_its_number(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    first = add(None)
    make_table(uri, {}, partitioned=False).commit([first])  # version 1 (version file + state)
    store = _CheckpointBesideOurVersionFile(Path(uri), 2)
    mine = add(None)
    assert TransactionLog(store, LogConfig()).commit([mine]) == 2, "a checkpoint is no commit: not a lost race"
    assert store.fired_at == 2 and store.exists(f"{LOG}/{2:020d}.json"), "our version file was not withdrawn"
    assert live(uri, {}) == {first.path, mine.path}
    later = add(None)
    assert executor_lib.open_log(uri).commit([later]) == 3
    assert live(uri, {}) == set(jvm_read(uri).files) == {first.path, mine.path, later.path}


def test_our_checkpoint_beside_a_stale_checkpoint_of_the_latest_version_goes_to_a_version_of_its_own(
    table: Table,
) -> None:
    uri, options = table
    _, paths, at = ours_then_checkpoint(uri, options)
    theirs = "part-jvm-before-our-checkpoint.split"
    Jvm053Log(uri, options).append(theirs)  # version 4: its file beside the stale state
    assert jvm_read(uri, **options).version == at and theirs not in jvm_read(uri, **options).files
    info = executor_lib.open_log(uri, **options).checkpoint()
    assert info.version == at + 1, "state 4 cannot be ours: a version that changes nothing takes the checkpoint"
    assert set(jvm_read(uri, **options).files) == live(uri, options) == {*paths, theirs}


def test_a_checkpoint_asked_for_at_the_version_of_a_stale_foreign_checkpoint_is_refused(table: Table) -> None:
    uri, options = table
    ours_then_checkpoint(uri, options)
    at = Jvm053Log(uri, options).append("part-jvm-before-our-checkpoint.split")  # its file beside the stale state
    before = sorted(o.key for o in open_store(uri, **options).list(LOG))
    with pytest.raises(InvalidActionError, match=rf"state of version {at} is another implementation's checkpoint"):
        executor_lib.open_log(uri, **options).checkpoint(version=at)
    assert sorted(o.key for o in open_store(uri, **options).list(LOG)) == before, "refused before anything is written"


def test_a_checkpoint_past_the_log_that_lost_files_loses_none(table: Table) -> None:
    uri, options = table
    log, paths, at = ours_then_checkpoint(uri, options, missing=(1,))  # its listing raced a hint update
    assert live(uri, options) == set(paths), "a checkpoint's file list is not taken for the table's"
    mine = add(None)
    assert log.commit([mine]) == at + 1
    assert live(uri, options) == set(jvm_read(uri, **options).files) == {*paths, mine.path}


class _CheckpointWhileWeRetry(LocalStore):
    """While our writer puts ``N.json``: another writer of ours commits N first (a lost race), and
    0.5.3's CHECKPOINT then finds state N taken and writes its state at N+1, past the log."""

    def __init__(self, root: Path, version: int) -> None:
        super().__init__(root)
        self.uri, self.key, self.fired_at = str(root), f"{LOG}/{version:020d}.json", -1
        self.winner = add(None)

    def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        if key == self.key and self.fired_at < 0:
            executor_lib.open_log(self.uri).commit([self.winner])
            self.fired_at = Jvm053Log(self.uri, {}).checkpoint()
        super().put_if_absent(key, data, metadata)


def test_a_checkpoint_past_the_log_that_lands_while_a_commit_retries_is_closed(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    first = add(None)
    make_table(uri, {}, partitioned=False).commit([first])  # version 1
    store = _CheckpointWhileWeRetry(Path(uri), 2)
    mine = add(None)
    assert TransactionLog(store, LogConfig()).commit([mine]) == 4, "2 lost to ours, 3 closed, then 4"
    assert store.fired_at == 3 and store.exists(f"{LOG}/{3:020d}.json")
    theirs = "part-jvm-after-the-retry.split"
    assert Jvm053Log(uri, {}).append(theirs) == 5
    assert live(uri, {}) == {first.path, store.winner.path, mine.path, theirs}
