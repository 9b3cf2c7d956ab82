"""The ``_last_checkpoint`` hint only moves forward for long (``log.maintenance.checkpointing.write_state_hint``): it
is read, then overwritten, so a writer whose read came before a racing writer's newer hint writes its
older one over it; it then finds the newer state and moves the hint there. IndexTables4Spark 0.5.3
builds its automatic checkpoint from the hint, read twice: a hint left behind makes it a checkpoint
that misses versions (issue 68)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

import executor_lib
from executor_lib.log.maintenance.checkpointing import write_state_hint
from executor_lib.log.state.avro_state import read_state_manifest
from executor_lib.log.transaction_log import TransactionLog
from executor_lib.storage import open_store
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import StorageError
from tests.log.helpers import add, make_table

Table = tuple[str, dict[str, Any]]
HINT = "_transaction_log/_last_checkpoint"


class RaceAtHintRead:
    """A writer's store that lets another writer commit right after this one, its state written, has
    read the hint, and before it writes its own: the interleaving that moves the hint back."""

    def __init__(self, store: ObjectStore, other_commit: Any) -> None:
        self._store, self._other_commit = store, other_commit
        self.state_written = self.raced = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        self._store.put_if_absent(key, data, metadata)
        self.state_written = self.state_written or ("/state-v" in key and "/_manifest" in key)

    def put(self, key: str, data: bytes) -> None:
        self._store.put(key, data)
        self.state_written = self.state_written or ("/state-v" in key and "/_manifest" in key)

    def read(self, key: str) -> bytes:
        data = self._store.read(key)
        if key == HINT and self.state_written and not self.raced:
            self.raced = True
            self._other_commit()
        return data


def hint_version(uri: str, options: dict[str, Any]) -> int:
    return int(json.loads(open_store(uri, **options).read(HINT))["version"])


def test_a_hint_written_over_a_racing_writers_newer_one_is_moved_forward(table: Table) -> None:
    uri, options = table
    make_table(uri, options).commit([add()])  # version 1
    other = executor_lib.open_log(uri, **options)
    racing = RaceAtHintRead(open_store(uri, **options), lambda: other.commit([add()]))
    ours = TransactionLog(racing, other.config)  # type: ignore[arg-type]
    version = ours.commit([add()])  # its hint read lets the other writer commit first
    assert racing.raced and version == 2
    assert executor_lib.open_log(uri, **options).latest_version() == 3
    assert hint_version(uri, options) == 3, "the hint of state 2 was written over state 3's and left there"


def test_a_writer_that_finds_a_newer_hint_writes_none(table: Table) -> None:
    uri, options = table
    log = make_table(uri, options)
    log.commit([add()])
    writes: list[str] = []
    store = open_store(uri, **options)

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def put(self, key: str, data: bytes) -> None:
            writes.append(key)
            store.put(key, data)

    log.commit([add()])  # state 2 and its hint
    left = write_state_hint(Counting(), read_state_manifest(store, 1))  # type: ignore[arg-type]
    assert HINT not in writes, "a hint newer than the writer's own state was there: nothing to write or repair"
    assert left.version == 2
    assert hint_version(uri, options) == 2


def test_a_failed_probe_fails_no_commit(table: Table, caplog: pytest.LogCaptureFixture) -> None:
    """The probe after the hint is a repair of a hint: a store error there is logged, and neither the
    commit nor its state counts as failed (a state commit raising after it landed would be retried)."""
    uri, options = table
    make_table(uri, options).commit([add()])
    store = open_store(uri, **options)

    class ProbeFails:
        def __getattr__(self, name: str) -> Any:
            return getattr(store, name)

        def exists(self, key: str) -> bool:
            if "/state-v" in key:
                raise StorageError(f"{key}: injected failure of the probe")
            return store.exists(key)

    log = TransactionLog(ProbeFails(), executor_lib.open_log(uri, **options).config)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        assert log.commit([add()]) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("_last_checkpoint not checked after state 2" in w for w in warnings), warnings
    assert not any("state at version 2 failed" in w for w in warnings), warnings
    assert hint_version(uri, options) == 2, "the hint was written before the probe failed"
    assert len(executor_lib.open_log(uri, **options).snapshot().files) == 2
