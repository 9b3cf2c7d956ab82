"""A table's history: one entry per retained commit, newest first, read from version files and,
for versions committed as a state only (IndexTables4Spark 0.5.x style), from their Avro state."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from executor_lib.log.state.avro_state import read_state_manifest
from executor_lib.log.state.version_files import list_log, read_version_actions
from executor_lib.protocol.actions import (
    Action,
    AddAction,
    CommitInfoAction,
    MetadataAction,
    ProtocolAction,
    RemoveAction,
)
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import ObjectNotFoundError


@dataclass(frozen=True)
class HistoryEntry:
    """One commit as ``DESCRIBE INDEXTABLES TRANSACTION LOG`` shows it."""

    version: int
    timestamp_ms: int | None
    operation: str | None
    txn_id: str | None
    num_added_files: int
    num_removed_files: int
    num_added_records: int
    source: str  # "version file" or "state" (a version only recorded as Avro state)
    num_files: int | None = None  # live files after this version (known for state-only versions)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "timestamp": self.timestamp_ms,
            "operation": self.operation,
            "txnId": self.txn_id,
            "numAddedFiles": self.num_added_files,
            "numRemovedFiles": self.num_removed_files,
            "numAddedRecords": self.num_added_records,
            "source": self.source,
            "numFiles": self.num_files,
        }


def read_history(store: ObjectStore, limit: int | None = None) -> list[HistoryEntry]:
    """Commits newest first: one entry per retained version file or state-only version."""
    listing = list_log(store)
    entries: list[HistoryEntry] = []
    for v in sorted(set(listing.versions) | listing.states, reverse=True):
        if limit is not None and len(entries) >= limit:
            break
        entries.append(_history_entry(store, v, listing.versions.get(v)))
    return entries


def _history_entry(store: ObjectStore, version: int, modified_ms: int | None) -> HistoryEntry:
    if modified_ms is None:
        manifest = read_state_manifest(store, version)
        info = manifest.commit_info() if manifest else None
        return HistoryEntry(
            version,
            info.timestamp if info else manifest.created_at if manifest else None,
            info.operation if info else None,
            info.txn_id if info else None,
            0,
            0,
            0,
            "state",
            num_files=manifest.num_files if manifest else None,
        )
    actions = read_version_actions(store, version)
    info = commit_info_of(store, version, actions)
    adds = [a for a in actions if isinstance(a, AddAction)]
    return HistoryEntry(
        version=version,
        timestamp_ms=info.timestamp if info else modified_ms,
        operation=info.operation if info else _guess_operation(actions),
        txn_id=info.txn_id if info else None,
        num_added_files=len(adds),
        num_removed_files=sum(isinstance(a, RemoveAction) for a in actions),
        num_added_records=sum(a.num_records or 0 for a in adds),
        source="version file",
    )


def commit_info_of(
    store: ObjectStore, version: int, actions: Sequence[Action] | None = None
) -> CommitInfoAction | None:
    """The commitInfo of ``version``: its version file's line (``transaction.commitInfo.enabled``),
    else the one recorded with its state; None if neither exists (e.g. a JVM-written version).
    ``actions``: the version file's actions, if the caller read them already."""
    if actions is None:
        try:
            actions = read_version_actions(store, version)
        except ObjectNotFoundError:
            actions = []
    info = next((a for a in actions if isinstance(a, CommitInfoAction)), None)
    if info is not None:
        return info
    manifest = read_state_manifest(store, version)
    return manifest.commit_info() if manifest is not None else None


def _guess_operation(actions: Sequence[Action]) -> str | None:
    kinds = {type(a) for a in actions}
    if MetadataAction in kinds and ProtocolAction in kinds:
        return "CREATE TABLE"
    if AddAction in kinds and RemoveAction in kinds:
        return "REPLACE"
    if AddAction in kinds:
        return "WRITE"
    if RemoveAction in kinds:
        return "DELETE"
    return None
