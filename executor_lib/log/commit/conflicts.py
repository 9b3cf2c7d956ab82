"""Conflict detection between a transaction and the commits that won the race before it.

Pure functions over actions. IndexTables4Spark retries a lost race with the same
actions and no check; this project checks what changed since the transaction's read
version and only retries when the outcome is the same as if it had committed first:

* appends (adds only, plus schema-registry entries) commute with anything but a
  concurrent protocol or metadata change;
* a remove conflicts with a concurrent remove of the same file;
* a protocol or (non-registry) metadata change conflicts with any concurrent commit,
  and any transaction conflicts with a concurrent protocol/metadata change;
* with ``fail_on_concurrent_add`` (overwrite, replace-where) a concurrent add conflicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from executor_lib.protocol.actions import Action, AddAction, MetadataAction, ProtocolAction, RemoveAction
from executor_lib.protocol.schema_registry import without_registry
from indextables_contract.errors import CommitConflictError


@dataclass(frozen=True)
class CommitIntent:
    """What a transaction does, as far as conflicts are concerned."""

    added: frozenset[str]
    removed: frozenset[str]
    changes_metadata: bool
    changes_protocol: bool
    fail_on_concurrent_add: bool = False

    @classmethod
    def of(
        cls, actions: Iterable[Action], current: MetadataAction | None, fail_on_concurrent_add: bool = False
    ) -> CommitIntent:
        actions = list(actions)
        return cls(
            added=frozenset(a.path for a in actions if isinstance(a, AddAction)),
            removed=frozenset(a.path for a in actions if isinstance(a, RemoveAction)),
            changes_metadata=any(
                isinstance(a, MetadataAction) and is_real_metadata_change(current, a) for a in actions
            ),
            changes_protocol=any(isinstance(a, ProtocolAction) for a in actions),
            fail_on_concurrent_add=fail_on_concurrent_add,
        )


def is_real_metadata_change(before: MetadataAction | None, after: MetadataAction) -> bool:
    """False when ``after`` only adds schema-registry entries to ``before``."""
    if before is None:
        return True
    return (
        before.id != after.id
        or before.schema_string != after.schema_string
        or tuple(before.partition_columns) != tuple(after.partition_columns)
        or without_registry(before.configuration) != without_registry(after.configuration)
        or before.name != after.name
        or before.description != after.description
        or dict(before.format) != dict(after.format)
    )


def check_conflicts(
    intent: CommitIntent,
    read_version: int,
    winners: Sequence[tuple[int, Sequence[Action]]],
    metadata_at_read: MetadataAction | None,
) -> None:
    """Raise CommitConflictError if ``intent`` cannot be committed after ``winners``."""
    metadata = metadata_at_read
    for version, actions in winners:
        for action in actions:
            if isinstance(action, ProtocolAction):
                raise CommitConflictError(
                    f"version {version} changed the table protocol after this transaction read version "
                    f"{read_version}; re-read the table and retry"
                )
            if isinstance(action, MetadataAction):
                if is_real_metadata_change(metadata, action):
                    raise CommitConflictError(
                        f"version {version} changed the table metadata (schema, partitioning or configuration) "
                        f"after this transaction read version {read_version}; re-read the table and retry"
                    )
                metadata = action
            elif isinstance(action, RemoveAction) and action.path in intent.removed:
                raise CommitConflictError(
                    f"file {action.path!r} was already removed by version {version} (concurrent delete, merge "
                    f"or overwrite) after this transaction read version {read_version}"
                )
            elif isinstance(action, AddAction):
                if action.path in intent.added:
                    raise CommitConflictError(f"file {action.path!r} was already added by version {version}")
                if intent.fail_on_concurrent_add:
                    raise CommitConflictError(
                        f"version {version} added files after this transaction read version {read_version}; "
                        "an overwrite must see every file it replaces"
                    )
        if intent.changes_metadata or intent.changes_protocol:
            raise CommitConflictError(
                f"this transaction changes the table's metadata or protocol but version {version} was "
                f"committed after its read version {read_version}; re-read the table and retry"
            )
