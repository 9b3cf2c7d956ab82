"""Log maintenance: checkpoints and cleanup, beside the commit loop of ``TransactionLog``, never inside one.

The functions take a ``log.maintenance.interfaces.MaintainedLog`` (the few members they use); the log calls
them, they never import the log: imports run one way.

A checkpoint consolidates the state of a version: on an Avro-state table (protocol v4,
``state.format=avro``) it writes the compacted state (upgrading a v3 table to v4 first, one
commit); otherwise a JSON checkpoint. Every checkpoint ends with the cleanup of what expired
(``log.maintenance.cleanup.expire_after_checkpoint``), whose failure is logged, not raised.
"""

from __future__ import annotations

import functools
import logging

from executor_lib.log.config import LogConfig
from executor_lib.log.maintenance.cleanup import CleanupReport, cleanup_log, expire_after_checkpoint
from executor_lib.log.maintenance.interfaces import MaintainedLog
from executor_lib.log.snapshot import Snapshot
from executor_lib.log.state import checkpoint as checkpoints
from executor_lib.log.state.avro_state import STATE_MANIFEST_NAMES, StateManifest, read_state_manifest
from executor_lib.log.state.foreign_states import has_version_file, is_checkpoint_past_the_log, stale_beside
from executor_lib.log.state.version_files import check_writable, read_version_actions
from executor_lib.protocol.actions import ProtocolAction
from executor_lib.protocol.files import LOG_DIR, state_dir
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import CorruptLogError, IndexTablesError, InvalidActionError

log = logging.getLogger(__name__)


def uses_avro_state(config: LogConfig, protocol: ProtocolAction | None) -> bool:
    """Whether the table keeps Avro state: ``state.format=avro`` on a protocol v4 table."""
    return config.state_format == "avro" and protocol is not None and protocol.min_writer_version >= 4


def checkpoint(txlog: MaintainedLog, version: int | None = None) -> checkpoints.LastCheckpoint:
    """Consolidate the state at ``version`` (default: latest).

    With ``state.format=avro`` (default): a v3 table is first upgraded to protocol v4
    (one commit), then the Avro state of the latest version is written compacted, if
    it does not exist yet. With ``state.format=json``: a JSON checkpoint.
    """
    snap = txlog.snapshot(version)
    check_writable(snap.protocol, txlog.uri)
    if txlog.config.state_format != "avro":
        return write_json_checkpoint(txlog, snap)
    if not uses_avro_state(txlog.config, snap.protocol):
        if version is not None:
            raise InvalidActionError("upgrading a table to the Avro state format needs the latest version")
        txlog.commit([v4_protocol(snap.protocol)], operation="UPGRADE PROTOCOL", read_version=snap.version)
        return _last_state_info(txlog)
    existing = read_state_manifest(txlog.store, snap.version)
    has_file = functools.partial(has_version_file, txlog.store)
    if existing is not None and (is_checkpoint_past_the_log(existing, has_file) or _stale(txlog, existing)):
        # Another implementation's checkpoint holds the state name of this version, and its file list
        # need not be the table's (foreign_states): the checkpoint goes to a version that changes
        # nothing, with a state of ours.
        if version is not None:
            raise InvalidActionError(
                f"{txlog.uri}: the state of version {version} is another implementation's checkpoint that does "
                "not hold that version; checkpoint the latest version instead"
            )
        txlog.commit([snap.metadata], operation="CHECKPOINT", read_version=snap.version)
        snap = txlog.snapshot()
        existing = read_state_manifest(txlog.store, snap.version)
    manifest = existing or txlog.write_state(snap.version, force_compaction=True)
    info = write_state_hint(txlog.store, manifest)
    expire_after_checkpoint_quietly(txlog, snap.version)
    return info


def _stale(txlog: MaintainedLog, manifest: StateManifest) -> bool:
    actions_of = functools.partial(read_version_actions, txlog.store)
    return stale_beside(txlog.store, manifest, actions_of, txlog.config.state_read_parallelism)


def write_json_checkpoint(txlog: MaintainedLog, snap: Snapshot) -> checkpoints.LastCheckpoint:
    written = checkpoints.write_checkpoint(txlog.store, snap.state, txlog.config)
    expire_after_checkpoint_quietly(txlog, snap.version)
    return written


def expire_after_checkpoint_quietly(txlog: MaintainedLog, version: int) -> None:
    """The cleanup every checkpoint ends with (``log.maintenance.cleanup.expire_after_checkpoint``); its
    failure is logged, not raised: the checkpoint is written, and the next one tries again."""
    if not txlog.config.checkpoint_cleanup_enabled:
        return
    try:
        report = expire_after_checkpoint(txlog.store, txlog.config, version)
    except IndexTablesError as e:
        log.warning("%s: cleanup after the checkpoint at version %d failed: %s", txlog.uri, version, e)
        return
    if report.deleted_states or report.deleted_version_files:
        log.info(
            "%s: after the checkpoint at version %d, deleted %d expired states and %d version files",
            txlog.uri,
            version,
            len(report.deleted_states),
            len(report.deleted_version_files),
        )


def cleanup(txlog: MaintainedLog, dry_run: bool = False) -> CleanupReport:
    """Delete states, manifests, version files and checkpoints past retention (see ``log.maintenance.cleanup``)."""
    check_writable(txlog.snapshot().protocol, txlog.uri)
    return cleanup_log(txlog.store, txlog.config, dry_run=dry_run)


def _last_state_info(txlog: MaintainedLog) -> checkpoints.LastCheckpoint:
    version = txlog.latest_version()
    manifest = read_state_manifest(txlog.store, version) or txlog.write_state(version)
    return state_checkpoint_info(manifest)


def v4_protocol(current: ProtocolAction | None) -> ProtocolAction:
    """``current`` raised to protocol v4 with the ``avroState`` feature."""
    reader = set(current.reader_features or ()) if current else set()
    writer = set(current.writer_features or ()) if current else set()
    return ProtocolAction(
        min_reader_version=max(4, current.min_reader_version if current else 4),
        min_writer_version=max(4, current.min_writer_version if current else 4),
        reader_features=frozenset(reader | {"avroState"}),
        writer_features=frozenset(writer | {"avroState"}),
    )


# How far past its own state a writer follows newer ones when it repairs the hint (each step one probe).
HINT_REPAIR_STEPS = 8


def write_state_hint(store: ObjectStore, manifest: StateManifest) -> checkpoints.LastCheckpoint:
    """Move ``_last_checkpoint`` forward to ``manifest``'s state, then repair it if that moved it back;
    returns the hint left.

    The hint is read, then overwritten (no store here overwrites conditionally), so of two writers that
    read it at once the one with the older state can write last and move it back. Readers here only
    start their listing there, but IndexTables4Spark 0.5.3 builds its automatic checkpoint from the hint
    (read twice): a hint moved back between its reads makes it a checkpoint that misses versions. So
    after its write a writer probes the next states (``state-v<N+1>/_manifest.avro``, ...) and moves the
    hint to the newest it finds: a hint moved back stays so for one probe, not until the next commit.
    A probe costs one HEAD per commit (there is usually no newer state).

    Example: ``write_state_hint(txlog.store, txlog.write_state(7))`` -> ``LastCheckpoint(version=7, ...)``
    """
    info = state_checkpoint_info(manifest)
    if not checkpoints.write_last_checkpoint_if_newer(store, info):
        return checkpoints.read_last_checkpoint(store) or info  # a newer hint is there: nothing moved back
    try:
        newest = _newest_state_after(store, manifest)
        if newest is not manifest:
            info = state_checkpoint_info(newest)
            log.info("%s: _last_checkpoint moved back: moving it to state %s", store.uri_of(LOG_DIR), info.version)
            checkpoints.write_last_checkpoint_if_newer(store, info, replace_equal=False)
    except Exception as e:  # a hint: its repair never fails the commit that wrote it
        log.warning("%s: _last_checkpoint not checked after state %s: %s", store.uri_of(LOG_DIR), info.version, e)
    return info


def _newest_state_after(store: ObjectStore, manifest: StateManifest) -> StateManifest:
    """The newest of the states right after ``manifest``'s (probed one by one), or ``manifest``."""
    newest = manifest
    for version in range(manifest.state_version + 1, manifest.state_version + 1 + HINT_REPAIR_STEPS):
        if not store.exists(f"{LOG_DIR}/{state_dir(version)}/{STATE_MANIFEST_NAMES[0]}"):
            break
        try:
            found = read_state_manifest(store, version)
        except CorruptLogError:
            break  # not a state to point at (the readers report it)
        if found is None:
            break
        newest = found
    return newest


def state_checkpoint_info(manifest: StateManifest) -> checkpoints.LastCheckpoint:
    """The ``_last_checkpoint`` hint that points at an Avro state."""
    return checkpoints.LastCheckpoint(
        version=manifest.state_version,
        size=manifest.num_files,
        size_in_bytes=manifest.total_bytes,
        num_files=manifest.num_files,
        created_time=manifest.created_at,
        format=checkpoints.FORMAT_AVRO_STATE,
        state_dir=state_dir(manifest.state_version),
    )
