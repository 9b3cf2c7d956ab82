"""The state a version leaves, written: incrementally on the newest state before it (its
version files applied, small manifests merged as the tiering policy says) or compacted from the
snapshot; then the ``_last_checkpoint`` hint. ``TransactionLog`` calls it after each commit and for
``write_state``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from executor_lib.log.commit.state_lookup import latest_protocol_and_metadata, newest_state_before, txns_through
from executor_lib.log.config import LogConfig
from executor_lib.log.maintenance.checkpointing import write_state_hint
from executor_lib.log.snapshot import Snapshot
from executor_lib.log.state.avro_state import StateManifest
from executor_lib.log.state.state_writer import build_compacted_state, build_incremental_state, put_state
from executor_lib.log.state.streaming_txns import advance
from executor_lib.log.state.version_files import read_version_actions
from executor_lib.protocol.actions import Action, CommitInfoAction
from executor_lib.protocol.schema_registry import registry_from_configuration
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import AmbiguousWriteError, ObjectNotFoundError

log = logging.getLogger("executor_lib.log.transaction_log")


def write_state(
    store: ObjectStore,
    config: LogConfig,
    list_states: Callable[[int], Any],
    snapshot_of: Callable[[int], Snapshot],
    version: int,
    force_compaction: bool = False,
    known_actions: Mapping[int, list[Action]] | None = None,
    commit_info: CommitInfoAction | None = None,
) -> tuple[StateManifest, bool]:
    """Write the Avro state of ``version`` (``TransactionLog.write_state``): incrementally on the
    newest earlier state that reads back whole, else compacted from the snapshot (``snapshot_of``);
    and whether this call wrote the state manifest (False: one existed). ``known_actions`` are
    version files the caller holds, not read again."""
    known = known_actions or {}
    base = newest_state_before(store, list_states, version, config.state_read_parallelism)
    versions: list[tuple[int, list[Action]]] | None = None
    if base is not None:
        try:
            versions = [
                (v, known[v] if v in known else read_version_actions(store, v))
                for v in range(base.state_version + 1, version + 1)
            ]
        except ObjectNotFoundError:
            versions = None
    protocol, metadata = latest_protocol_and_metadata(versions or [], base)
    if base is not None and base.written_here and versions is not None:
        txns = advance(base.streaming_txns(), versions)
    else:
        txns = txns_through(store, list_states, version, None, known)
    if base is None or versions is None or protocol is None or metadata is None or not versions:
        snap = snapshot_of(version)
        protocol = snap.protocol
        manifest = build_compacted_state(
            store, version, snap.files, snap.metadata, dict(snap.schema_registry), config, txns
        )
    else:
        registry = registry_from_configuration(metadata.configuration)
        manifest = build_incremental_state(store, base, versions, metadata, registry, config, force_compaction, txns)
    try:
        won = put_state(store, manifest, protocol, config, commit_info=commit_info)
    except AmbiguousWriteError:
        won = False
    try:
        write_state_hint(store, manifest)
    except Exception as e:  # the state is written (or was there): a hint not moved only costs a longer listing
        log.warning("%s: _last_checkpoint not moved to state %d: %s", store.root_uri, manifest.state_version, e)
    return manifest, won
