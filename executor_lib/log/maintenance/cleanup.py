"""Log cleanup: state retention, manifest garbage collection, transaction-log retention.

Rules (nothing a retained state, checkpoint or the latest version needs is ever deleted):

* **States.** The newest ``state.retention.versions`` (2) state directories are kept, and
  every state younger than ``state.retention.hours`` (168). Older state directories are
  deleted. A state that is its version's commit point (IndexTables4Spark 0.5.x commits by
  state, and so do our writers on its tables) is also never deleted younger than
  ``state.gc.minManifestAgeHours``, for the reason version files are not (below;
  ``commit_state_min_age_hours``).
* **Manifests.** A manifest under ``manifests/`` is deleted only when no retained state
  references it *and* it is older than ``state.gc.minManifestAgeHours`` (1): a writer
  may have just written a manifest whose state manifest is not visible yet.
* **Crash leftovers.** Temporary files (``*.tmp-*``, written then renamed into place) in the
  log and ``manifests/`` older than ``state.gc.minManifestAgeHours``: their writer died.
* **Version files and JSON checkpoints.** Deleted when older than
  ``purge.txLogRetentionHours`` (720) and covered by a newer retained state or
  checkpoint (the versions after the newest state/checkpoint are always kept). Version 0
  is never deleted: IndexTables4Spark keeps the table's metadata there. A version file is
  also never deleted younger than ``state.gc.minManifestAgeHours``, so that no writer can
  commit a deleted version number a second time (see ``_version_file_horizon``).

Time travel reaches back only as far as what remains.

``cleanup_log`` applies all of these (``indextables cleanup``, PURGE). ``expire_after_checkpoint``
is the cheap part a writer runs after each checkpoint: expired version files and state
directories only, its work bounded by what expired since the last run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from executor_lib.log.config import LogConfig
from executor_lib.log.state.avro_state import StateManifest, read_state_manifest, resolve_manifest_path
from executor_lib.log.state.manifest_columns import owning_manifest
from executor_lib.log.state.version_files import list_log
from executor_lib.protocol.files import LOG_DIR, MANIFESTS_DIR, state_dir, version_name
from executor_lib.storage.base import ObjectStore, table_key
from indextables_contract.errors import InvalidPathError

_HOUR_MS = 3600 * 1000


@dataclass
class CleanupReport:
    """What was (or, in a dry run, would be) deleted, as keys relative to the table."""

    dry_run: bool
    retained_states: list[int] = field(default_factory=list)
    deleted_states: list[int] = field(default_factory=list)
    deleted_manifests: list[str] = field(default_factory=list)
    deleted_version_files: list[str] = field(default_factory=list)
    deleted_checkpoint_files: list[str] = field(default_factory=list)
    deleted_temporary: list[str] = field(default_factory=list)  # crash leftovers (``*.tmp-*``)

    def to_json(self) -> dict[str, object]:
        return {
            "dryRun": self.dry_run,
            "retainedStates": self.retained_states,
            "deletedStates": self.deleted_states,
            "deletedManifests": self.deleted_manifests,
            "deletedVersionFiles": self.deleted_version_files,
            "deletedCheckpointFiles": self.deleted_checkpoint_files,
            "deletedTemporaryFiles": self.deleted_temporary,
        }


def _retained_states(
    store: ObjectStore, states: list[int], config: LogConfig, now_ms: int
) -> tuple[dict[int, StateManifest], list[int]]:
    """Retained ``{version: manifest}`` and the versions of state directories to delete."""
    expired = _state_expiry(config, now_ms)
    retained: dict[int, StateManifest] = {}
    doomed: list[int] = []
    for v in sorted(states, reverse=True):
        manifest = read_state_manifest(store, v)
        if manifest is None:  # unfinished write: whatever was listed in it is referenced by nothing
            doomed.append(v)
        elif len(retained) < config.state_retention_versions or not expired(manifest):
            retained[v] = manifest
        else:
            doomed.append(v)
    return retained, doomed


def commit_state_min_age_hours(config: LogConfig) -> float:
    """How old a state that committed its version (``StateManifest.commit_point``) must be before a
    cleanup deletes it: ``state.retention.hours``, and never less than ``state.gc.minManifestAgeHours``.
    Such a state is the version's only record, so it is what a writer's put-if-absent of
    ``state-v<N>/_manifest.avro`` would find; deleted, a writer that listed the log before it was
    committed could commit its number again (a writer stalled half as long checks:
    ``commit_point.reused_deleted_version``), as with version files (``version_file_min_age_hours``).

    >>> commit_state_min_age_hours(LogConfig())
    168.0
    """
    return float(max(config.state_retention_hours, config.gc_min_manifest_age_hours))


def _state_expiry(config: LogConfig, now_ms: int) -> Callable[[StateManifest], bool]:
    """Whether a state is past retention (``state.retention.hours``; a commit point's floor as above)."""
    horizon = now_ms - int(config.state_retention_hours * _HOUR_MS)
    commit_horizon = now_ms - int(commit_state_min_age_hours(config) * _HOUR_MS)
    return lambda m: m.created_at < (commit_horizon if m.commit_point else horizon)


def _expired_states_oldest_first(
    store: ObjectStore, states: list[int], config: LogConfig, now_ms: int, kept_version: int
) -> list[int]:
    """Expired states below ``kept_version`` (a complete state or checkpoint, which stays and counts
    as the newest retained one), found by reading the oldest states only.

    States are written in version order, so a later state is younger: the scan stops at the
    first state kept. (A state written late, out of order, only delays the next ones' turn.)
    """
    expired = _state_expiry(config, now_ms)
    below = sorted(v for v in states if v < kept_version)
    doomed: list[int] = []
    for v in below[: max(len(below) - (config.state_retention_versions - 1), 0)]:
        manifest = read_state_manifest(store, v)
        if manifest is not None and not expired(manifest):
            break
        doomed.append(v)
    return doomed


def _delete(store: ObjectStore, keys: list[str], dry_run: bool) -> None:
    if not dry_run:
        for key in keys:
            store.delete(key)


def _delete_states(store: ObjectStore, versions: list[int], report: CleanupReport) -> None:
    for v in sorted(versions):
        if not report.dry_run:
            delete_state_directory(store, v)
        report.deleted_states.append(v)


def delete_state_directory(store: ObjectStore, version: int) -> None:
    """Delete ``state-v<version>/``: its state manifest first, so that no reader finds a state whose
    parts are gone, then the rest, then (on a file system) the emptied directory. Its manifests under
    ``manifests/`` are left to manifest GC.

    >>> # delete_state_directory(store, 6)  (a retention cleanup, a withdrawn state commit)
    """
    prefix = f"{LOG_DIR}/{state_dir(version)}/"
    keys = [o.key for o in store.list(prefix)]
    for key in sorted(keys, key=lambda k: not k.rsplit("/", 1)[-1].startswith("_manifest.")):
        store.delete(key)
    store.remove_empty_dir(prefix)


def version_file_min_age_hours(config: LogConfig, min_age_hours: float | None = None) -> float:
    """How old a version file must be before a cleanup deletes it: ``purge.txLogRetentionHours``, and
    never less than ``min_age_hours`` (default ``state.gc.minManifestAgeHours``). A writer lists the
    log, then writes version latest+1 with put-if-absent, which cannot see a *deleted* file: had
    version latest+1 been committed and deleted in between, it would be written a second time.
    The minimum age makes that need a writer stalled that long between its listing and its write
    (and a writer stalled half as long checks its version: ``commit_point.reused_deleted_version``).

    >>> version_file_min_age_hours(LogConfig())
    720.0
    """
    floor = config.gc_min_manifest_age_hours if min_age_hours is None else min_age_hours
    return float(max(config.tx_log_retention_hours, floor))


def _version_file_horizon(config: LogConfig, now_ms: int, min_age_hours: float | None = None) -> int:
    """Version files modified before this may go (``version_file_min_age_hours``)."""
    return now_ms - int(version_file_min_age_hours(config, min_age_hours) * _HOUR_MS)


def _expired_version_files(versions: dict[int, int], newest_base: int, horizon_ms: int) -> list[str]:
    """Version files covered by the base at ``newest_base`` and modified before the horizon (never version 0)."""
    return [
        f"{LOG_DIR}/{version_name(v)}.json"
        for v, modified in sorted(versions.items())
        if 0 < v <= newest_base and modified < horizon_ms
    ]


def expire_after_checkpoint(
    store: ObjectStore, config: LogConfig, checkpoint_version: int, now_ms: int | None = None
) -> CleanupReport:
    """After a checkpoint or state at ``checkpoint_version`` is written: delete the expired state
    directories below it and the expired version files it covers (rules 1 and 3 of the module
    docstring, with that checkpoint as the newest base).

    Checkpoint files and unreferenced manifests are left to ``cleanup_log`` (PURGE), as the
    protocol has it. One listing of the log directory, plus one state-manifest read per
    expired state and one for the oldest state kept.
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    report = CleanupReport(dry_run=False)
    listing = list_log(store)
    expired = _expired_states_oldest_first(store, sorted(listing.states), config, now_ms, checkpoint_version)
    _delete_states(store, expired, report)
    report.deleted_version_files = _expired_version_files(
        listing.versions, checkpoint_version, _version_file_horizon(config, now_ms)
    )
    _delete(store, report.deleted_version_files, dry_run=False)
    return report


def _manifest_key(store: ObjectStore, path: str) -> str:
    """The storage key of a manifest path (a full URI inside the table is the key below it), so a
    manifest referenced by URI is as protected as one referenced by key."""
    try:
        return table_key(store.root_uri, path)
    except InvalidPathError:
        return path


def cleanup_log(
    store: ObjectStore,
    config: LogConfig,
    dry_run: bool = False,
    now_ms: int | None = None,
    version_file_min_age_hours: float | None = None,
) -> CleanupReport:
    """Apply the retention rules of the module docstring; returns what was deleted.

    ``version_file_min_age_hours`` overrides the minimum age of deleted version files (TRUNCATE
    INDEXTABLES TIME TRAVEL passes 0: all history goes now, so it must not race a writer).
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    report = CleanupReport(dry_run=dry_run)
    listing = list_log(store)
    retained, doomed = _retained_states(store, sorted(listing.states), config, now_ms)
    report.retained_states = sorted(retained)
    _delete_states(store, doomed, report)

    reachable = {
        _manifest_key(store, resolve_manifest_path(i.path, v)) for v, m in retained.items() for i in m.manifests
    }
    manifest_horizon = now_ms - int(config.gc_min_manifest_age_hours * _HOUR_MS)
    for obj in store.list(f"{LOG_DIR}/{MANIFESTS_DIR}/"):
        owner = owning_manifest(obj.key)  # a column sidecar lives as long as its manifest
        if (owner or obj.key) not in reachable and obj.modified_ms < manifest_horizon:
            report.deleted_manifests.append(obj.key)
    _delete(store, report.deleted_manifests, dry_run)
    # a temporary file older than a manifest may be is a crashed writer's: no rename will come
    report.deleted_temporary = [o.key for o in store.list_temporary(f"{LOG_DIR}/") if o.modified_ms < manifest_horizon]
    _delete(store, report.deleted_temporary, dry_run)

    bases = sorted(set(retained) | listing.checkpoints)
    newest_base = bases[-1] if bases else -1
    log_horizon = now_ms - int(config.tx_log_retention_hours * _HOUR_MS)
    report.deleted_version_files = _expired_version_files(
        listing.versions, newest_base, _version_file_horizon(config, now_ms, version_file_min_age_hours)
    )
    for c in sorted(listing.checkpoints):
        if c < newest_base:
            prefix = f"{LOG_DIR}/{version_name(c)}.checkpoint."
            files = [o for o in store.list(prefix)]
            if files and all(o.modified_ms < log_horizon for o in files):
                report.deleted_checkpoint_files += [o.key for o in files]
    # a checkpoint's manifest goes first, so no reader finds a manifest whose parts are gone
    report.deleted_checkpoint_files.sort(key=lambda k: (not k.endswith(".checkpoint.json"), k))
    _delete(store, report.deleted_version_files, dry_run)
    _delete(store, report.deleted_checkpoint_files, dry_run)
    return report
