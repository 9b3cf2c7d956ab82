"""Which state manifest a writer builds on: the newest one at or before a version that reads back
whole (``verified_state``), written by this project (``newest_own_state``: it holds the streaming
transactions), or just before a version (``newest_state_before``); and the protocol and metadata
a run of version files leaves on such a state (``latest_protocol_and_metadata``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from executor_lib.log.state.avro_state import StateManifest, read_state_manifest
from executor_lib.log.state.foreign_states import has_version_file, is_checkpoint_past_the_log, stale_beside
from executor_lib.log.state.streaming_txns import TxnRecord, advance
from executor_lib.log.state.version_files import read_version_actions
from executor_lib.protocol.actions import Action, MetadataAction, ProtocolAction
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import CorruptLogError, ObjectNotFoundError

log = logging.getLogger("executor_lib.log.transaction_log")


def verified_state(store: ObjectStore, version: int) -> StateManifest | None:
    """The state manifest of ``version``, or None when there is none or it fails its checks (a
    writer never builds a new state on a damaged one: it falls back to an older state, or to
    the snapshot, whose load falls back exactly or fails)."""
    try:
        return read_state_manifest(store, version)
    except CorruptLogError as e:
        log.warning("%s; not building on it", e)
        return None


def newest_own_state(store: ObjectStore, list_states: Callable[[int], Any], version: int) -> StateManifest | None:
    """The newest state at or before ``version`` written by this project (None if none is retained).
    Usually ``version`` or the one before (every commit writes one); older ones only on tables that
    other implementations also commit to, or where a state write failed."""
    for v in range(version, max(version - 3, 0), -1):
        manifest = verified_state(store, v)
        if manifest is not None and manifest.written_here:
            return manifest
    listing = list_states(version)
    for v in sorted((s for s in listing.states if s <= version - 3), reverse=True):
        manifest = verified_state(store, v)
        if manifest is not None and manifest.written_here:
            return manifest
    return None


def newest_state_before(
    store: ObjectStore, list_states: Callable[[int], Any], version: int, parallelism: int = 4
) -> StateManifest | None:
    """The newest state below ``version`` that can be built on: usually ``version - 1`` (every
    commit writes one), so probe the last few directly before listing (a listing of all states grows
    with history). Another implementation's state that does not hold the version file of its
    number is passed over (``foreign_states.stale_beside``)."""
    for v in range(version - 1, max(version - 4, 0), -1):
        manifest = _base_at(store, v, parallelism)
        if manifest is not None:
            return manifest
    listing = list_states(version - 1)
    for v in sorted((s for s in listing.states if s < version - 3), reverse=True)[:3]:
        manifest = _base_at(store, v, parallelism)
        if manifest is not None:
            return manifest
    return None


def _base_at(store: ObjectStore, version: int, parallelism: int) -> StateManifest | None:
    manifest = verified_state(store, version)
    has_file = functools.partial(has_version_file, store)
    if manifest is None or is_checkpoint_past_the_log(manifest, has_file):  # its file list need not be the table's
        return None
    if stale_beside(store, manifest, functools.partial(read_version_actions, store), parallelism):
        log.info(
            "%s: does not hold its version's file (another implementation's checkpoint); not built on", manifest.source
        )
        return None
    return manifest


def latest_protocol_and_metadata(
    versions: Sequence[tuple[int, Sequence[Action]]], base: StateManifest | None
) -> tuple[ProtocolAction | None, MetadataAction | None]:
    protocol: ProtocolAction | None = None
    metadata: MetadataAction | None = None
    for _, actions in versions:
        for a in actions:
            if isinstance(a, ProtocolAction):
                protocol = a
            elif isinstance(a, MetadataAction):
                metadata = a
    if base is not None:
        protocol = protocol or base.protocol()
        metadata = metadata or base.metadata()
    return protocol, metadata


def txns_through(
    store: ObjectStore,
    list_states: Callable[[int], Any],
    version: int,
    state: StateManifest | None,
    known: Mapping[int, list[Action]] | None = None,
) -> dict[str, TxnRecord]:
    """The streaming transaction map at ``version``: the newest state at or before it that this
    project wrote (``state``, if the caller read that of ``version`` already), advanced by the
    version files after it (``known``: ones the caller holds). Versions without a version file after
    that state were committed as states by another implementation and hold no transaction of ours."""
    base = state if state is not None and state.state_version == version and state.written_here else None
    if base is None:
        base = newest_own_state(store, list_states, version)
    start = base.state_version + 1 if base is not None else 1
    known = known or {}
    versions = []
    for v in range(start, version + 1):
        if v in known:
            versions.append((v, known[v]))
            continue
        try:
            versions.append((v, read_version_actions(store, v)))
        except ObjectNotFoundError:
            continue
    return advance(base.streaming_txns() if base is not None else {}, versions)
