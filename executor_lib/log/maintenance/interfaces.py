"""The narrow view of a table's log that maintenance works through (``log.maintenance``).

``TransactionLog`` calls maintenance after a commit and for ``checkpoint()``/``cleanup()``;
maintenance needs only these few members of it, so it is written against this Protocol and
never imports ``TransactionLog`` (not even for types): imports run one way, from the log to
maintenance (``tests/test_imports.py`` counts type-only imports too).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from executor_lib.log.config import LogConfig
from executor_lib.log.snapshot import Snapshot
from executor_lib.log.state.avro_state import StateManifest
from executor_lib.protocol.actions import Action
from executor_lib.storage.base import ObjectStore


class MaintainedLog(Protocol):
    """What checkpoints and cleanup use of a log: its store and settings, its snapshots, a commit
    (the protocol upgrade of a checkpoint) and the writing of an Avro state."""

    @property
    def store(self) -> ObjectStore: ...

    @property
    def config(self) -> LogConfig: ...

    @property
    def uri(self) -> str: ...

    def latest_version(self) -> int: ...

    def snapshot(self, version: int | None = None) -> Snapshot: ...

    def commit(
        self, actions: Iterable[Action], *, read_version: int | None = None, operation: str = "WRITE"
    ) -> int: ...

    def write_state(self, version: int, force_compaction: bool = False) -> StateManifest: ...
