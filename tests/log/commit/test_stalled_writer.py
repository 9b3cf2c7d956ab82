"""A writer that stalls between listing the log and writing its version, while another writer commits
and log retention deletes version files: put-if-absent cannot see a deleted file, so the stalled
writer's version file may take the number of a version committed and deleted meanwhile. Such a file
lies beneath a newer state, where no reader sees it; it must never be acknowledged
(``commit_point.reused_deleted_version``). A stall with nothing deleted under it still commits.

The stall is real time (the version files' minimum age is set to 0.4 s); the other writer and the
cleanup run inside the stalled writer's put, before it reaches the store. On the local disk a version
file's time tells the reused number; Azurite lists times to the second, so there the newer state does."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import executor_lib
from executor_lib.log.config import LogConfig
from executor_lib.log.transaction_log import TransactionLog
from executor_lib.protocol.actions import AddAction
from executor_lib.protocol.files import LOG_DIR, state_dir, version_file
from executor_lib.storage import open_store
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import CommitConflictError
from tests.conftest import azure_options, azure_uri
from tests.log.helpers import add, make_table

MIN_AGE_S = 0.4
RETENTION = {
    "spark.indextables.checkpoint.interval": "2",
    "spark.indextables.state.retention.versions": "1",
    "spark.indextables.state.retention.hours": "0",
    "spark.indextables.purge.txLogRetentionHours": "0",
    "spark.indextables.state.gc.minManifestAgeHours": str(MIN_AGE_S / 3600),
    "spark.indextables.state.gc.allowUnsafeMinManifestAge": "true",
}


def stalling(store: ObjectStore, key: str, meanwhile: Callable[[], None]) -> ObjectStore:
    """``store`` (a real one), its first put-if-absent of ``key`` running ``meanwhile`` before it writes."""
    real = type(store).put_if_absent

    class Stalling(type(store)):  # type: ignore[misc]
        stalled = False

        def put_if_absent(self, k: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
            if k == key and not self.stalled:
                self.stalled = True
                meanwhile()
            real(self, k, data, metadata)

    store.__class__ = Stalling
    return store


def _key(version: int) -> str:
    return f"{LOG_DIR}/{version_file(version)}"


@pytest.fixture(params=["local", "azure"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """A fresh table's URI and options (retention as above) on the local disk or Azurite."""
    if request.param == "local":
        uri, options = str(tmp_path / "t"), dict(RETENTION)
    else:
        uri = azure_uri(f"stalled/{uuid.uuid4().hex}")
        options = {**azure_options(request.getfixturevalue("azurite_server")), **RETENTION}
    make_table(uri, options)
    return uri, options


def _live(uri: str, options: dict[str, Any]) -> set[str]:
    return {f.path for f in executor_lib.open_log(uri, **options).snapshot().files}


def _stalled_writer(uri: str, options: dict[str, Any], meanwhile: Callable[[], None]) -> TransactionLog:
    store = stalling(open_store(uri, **options), _key(2), meanwhile)
    return TransactionLog(store, LogConfig.from_options(options))


def test_a_version_number_deleted_during_the_stall_is_never_acknowledged(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    other = executor_lib.open_log(uri, **options)
    other.commit([add()])  # version 1: the stalled writer lists the log here and writes version 2
    theirs: list[Any] = []

    def meanwhile() -> None:
        for _ in range(3):  # versions 2-4, a checkpoint at 2 and 4
            theirs.append(add())
            other.commit([theirs[-1]])
        time.sleep(MIN_AGE_S + 0.2)
        for _ in range(2):  # versions 5-6: the checkpoint at 6 deletes version files 1-4, now old enough
            theirs.append(add())
            other.commit([theirs[-1]])
        assert not other.store.exists(_key(2)), "the other writer's version 2 is deleted: its number is free"

    _refused_then_lands(_stalled_writer(uri, options, meanwhile), add(), theirs, _key(2), 7)


def _refused_then_lands(
    stalled: TransactionLog, ours: Any, theirs: list[Any], withdrawn: str, next_version: int
) -> None:
    """The stalled writer's commit of ``ours`` is refused, its commit point (``withdrawn``) deleted again
    and the other writer's commits (``theirs``) all stand; run again, as the error says, it lands."""
    with pytest.raises(CommitConflictError, match="deleted by log retention"):
        stalled.commit([ours])
    assert stalled.store.stalled  # type: ignore[attr-defined]
    live = {f.path for f in TransactionLog(stalled.store, stalled.config).snapshot().files}
    assert ours.path not in live, "the refused commit is not visible"
    assert {a.path for a in theirs} <= live, "the other writer's commits all stand"
    assert not stalled.store.exists(withdrawn), "the stalled writer withdrew its commit point"
    assert stalled.commit([ours]) == next_version
    assert ours.path in {f.path for f in TransactionLog(stalled.store, stalled.config).snapshot().files}


def test_a_stall_with_the_previous_version_deleted_still_commits(table: tuple[str, dict[str, Any]]) -> None:
    """Retention deletes version 1 (a state covers it) while the writer that listed it stalls: its
    version 2 takes no deleted number and is acknowledged, visible."""
    uri, options = table
    other = executor_lib.open_log(uri, **options)
    other.commit([add()])

    def meanwhile() -> None:
        time.sleep(MIN_AGE_S + 0.2)
        other.cleanup()
        assert not other.store.exists(_key(1)), "version 1 is deleted during the stall"

    stalled = _stalled_writer(uri, options, meanwhile)
    ours = add()
    assert stalled.commit([ours]) == 2
    assert ours.path in _live(uri, options)


def test_a_stall_without_any_cleanup_commits(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    executor_lib.open_log(uri, **options).commit([add()])
    present: list[bool] = []

    def meanwhile() -> None:
        time.sleep(MIN_AGE_S)
        present.append(stalled.store.exists(_key(1)))

    stalled = _stalled_writer(uri, options, meanwhile)
    ours = add()
    assert stalled.commit([ours]) == 2
    assert present == [True], "version 1 was there when the stalled put wrote version 2"
    assert ours.path in _live(uri, options)


# --- a table committed by state (IndexTables4Spark 0.5.x's commit point) ---------------------------

STATE_TABLE = "02_five_appends"  # version 0 a version file, versions 1-5 states only


def _state_key(version: int) -> str:
    return f"{LOG_DIR}/{state_dir(version)}/_manifest.avro"


@pytest.fixture(params=["local", "azure"])
def state_table(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any]]:
    """A copy of a table IndexTables4Spark 0.5.4 committed by state, on the local disk or Azurite."""
    source = request.getfixturevalue("compat_root") / STATE_TABLE
    if request.param == "local":
        uri, options = str(tmp_path / STATE_TABLE), dict(RETENTION)
    else:
        uri = azure_uri(f"stalled-state/{uuid.uuid4().hex}")
        options = {**azure_options(request.getfixturevalue("azurite_server")), **RETENTION}
    target = open_store(uri, **options)
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        target.put(path.relative_to(source).as_posix(), path.read_bytes())
    return uri, options


def _like(uri: str, options: dict[str, Any]) -> Callable[[], AddAction]:
    """New adds shaped like the table's own files (its partition values and doc mapping)."""
    template = executor_lib.open_log(uri, **options).snapshot().files[0]
    return lambda: dataclasses.replace(template, path=f"part-{uuid.uuid4().hex}.split", num_records=3)


def _stalled_state_writer(uri: str, options: dict[str, Any], meanwhile: Callable[[], None]) -> TransactionLog:
    store = stalling(open_store(uri, **options), _state_key(6), meanwhile)
    return TransactionLog(store, LogConfig.from_options(options))


def test_a_state_number_deleted_during_the_stall_is_never_acknowledged(state_table: tuple[str, dict[str, Any]]) -> None:
    """The stalled writer lists the table at version 5 and commits state 6; meanwhile another writer
    commits states 6-11 and state retention deletes states 5-9: its put-if-absent of state 6 succeeds
    beneath state 11. The commit is refused and its state withdrawn; run again, it lands, visible."""
    uri, options = state_table
    new = _like(uri, options)
    other = executor_lib.open_log(uri, **options)
    theirs: list[AddAction] = []

    def meanwhile() -> None:
        for _ in range(4):  # versions 6-9, as states (the table's commit style)
            theirs.append(new())
            other.commit([theirs[-1]])
        time.sleep(MIN_AGE_S + 0.2)
        for _ in range(2):  # versions 10-11: the cleanup after 10 deletes the states before it, now old enough
            theirs.append(new())
            other.commit([theirs[-1]])
        assert not other.store.exists(f"{LOG_DIR}/{version_file(6)}"), "version 6 was committed as a state only"
        assert not other.store.exists(_state_key(6)), "the other writer's state 6 is deleted: its number is free"

    stalled = _stalled_state_writer(uri, options, meanwhile)
    _refused_then_lands(stalled, new(), theirs, _state_key(6), 12)
    assert not stalled.store.exists(f"{LOG_DIR}/{version_file(12)}"), "still committed by state"


def test_a_state_commit_stalled_without_any_cleanup_commits(state_table: tuple[str, dict[str, Any]]) -> None:
    uri, options = state_table
    new = _like(uri, options)

    def meanwhile() -> None:
        time.sleep(MIN_AGE_S)

    stalled = _stalled_state_writer(uri, options, meanwhile)
    ours = new()
    assert stalled.commit([ours]) == 6
    assert stalled.store.stalled  # type: ignore[attr-defined]
    assert ours.path in _live(uri, options)
