"""Table state as a pure function of actions: ``replay(base, versions) -> TableState``.

Rules (same as IndexTables4Spark and Delta Lake): the newest protocol and metaData
win; ``add`` puts a file (replacing one with the same path); ``remove`` deletes it and
keeps a tombstone; ``mergeskip`` records the newest skip per path; ``commitInfo`` does
not change state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from executor_lib.log.live_files import LiveFiles
from executor_lib.protocol.actions import (
    Action,
    AddAction,
    MetadataAction,
    ProtocolAction,
    RemoveAction,
    SkipAction,
)
from executor_lib.protocol.schema_registry import registry_from_configuration


@dataclass(frozen=True)
class TableState:
    """Everything a snapshot knows: protocol, metadata, live files, tombstones, skips."""

    version: int
    protocol: ProtocolAction | None
    metadata: MetadataAction | None
    files: Mapping[str, AddAction] = field(default_factory=dict)
    tombstones: Mapping[str, RemoveAction] = field(default_factory=dict)
    skips: Mapping[str, SkipAction] = field(default_factory=dict)
    schema_registry: Mapping[str, str] = field(default_factory=dict)


EMPTY_STATE = TableState(version=-1, protocol=None, metadata=None)


def _copied(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict of ``mapping``: the C-level copy for a dict or a read-only view of one (``dict(view)``
    iterates item by item: 0.46 s for a 1M-file state, against 0.026 s)."""
    if isinstance(mapping, (dict, MappingProxyType)):
        copied = mapping.copy()
        if type(copied) is dict:
            return copied
    return dict(mapping)


def replay(base: TableState, versions: Iterable[tuple[int, Iterable[Action]]]) -> TableState:
    """Apply the actions of each ``(version, actions)`` in order on top of ``base``.

    ``base`` is not modified; the result shares no mutable structure with it.
    """
    protocol, metadata = base.protocol, base.metadata
    columnar = base.files if isinstance(base.files, LiveFiles) else None
    # On columnar files (an Avro state's) the changes go to an overlay; the chunks are shared, not copied.
    files = _copied(columnar.added if columnar is not None else base.files)
    shadowed = set(columnar.shadowed) if columnar is not None else set()
    tombstones = _copied(base.tombstones)
    skips = _copied(base.skips)
    registry = _copied(base.schema_registry)
    version = base.version
    for version, actions in versions:  # noqa: B007 - the last version is the result's
        for action in actions:
            if isinstance(action, AddAction):
                files[action.path] = action
                shadowed.add(action.path)
                tombstones.pop(action.path, None)
            elif isinstance(action, RemoveAction):
                files.pop(action.path, None)
                shadowed.add(action.path)
                tombstones[action.path] = action
            elif isinstance(action, MetadataAction):
                metadata = action
            elif isinstance(action, ProtocolAction):
                protocol = action
            elif isinstance(action, SkipAction):
                skips[action.path] = action
    if metadata is not None:
        registry.update(registry_from_configuration(metadata.configuration))
    return TableState(
        version=version,
        protocol=protocol,
        metadata=metadata,
        files=columnar.replaced(shadowed, files) if columnar is not None else MappingProxyType(files),
        tombstones=MappingProxyType(tombstones),
        skips=MappingProxyType(skips),
        schema_registry=MappingProxyType(registry),
    )
