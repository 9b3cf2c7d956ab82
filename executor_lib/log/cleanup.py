"""Log cleanup: state retention, manifest garbage collection, transaction-log retention.

Rules (nothing a retained state, checkpoint or the latest version needs is ever deleted):

* **States.** The newest ``state.retention.versions`` (2) state directories are kept, and
  every state younger than ``state.retention.hours`` (168). Older state directories are
  deleted.
* **Manifests.** A manifest under ``manifests/`` is deleted only when no retained state
  references it *and* it is older than ``state.gc.minManifestAgeHours`` (1): a writer
  may have just written a manifest whose state manifest is not visible yet.
* **Version files and JSON checkpoints.** Deleted when older than
  ``purge.txLogRetentionHours`` (720) and covered by a newer retained state or
  checkpoint (the versions after the newest state/checkpoint are always kept). Version 0
  is never deleted: IndexTables4Spark keeps the table's metadata there.

Time travel reaches back only as far as what remains.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from executor_lib.log.avro_state import StateManifest, read_state_manifest, resolve_manifest_path
from executor_lib.log.config import LogConfig
from executor_lib.log.snapshot import list_log
from executor_lib.protocol.files import LOG_DIR, MANIFESTS_DIR, state_dir, version_name
from executor_lib.storage.base import ObjectStore

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

    def to_json(self) -> dict[str, object]:
        return {
            "dryRun": self.dry_run,
            "retainedStates": self.retained_states,
            "deletedStates": self.deleted_states,
            "deletedManifests": self.deleted_manifests,
            "deletedVersionFiles": self.deleted_version_files,
            "deletedCheckpointFiles": self.deleted_checkpoint_files,
        }


def _retained_states(
    store: ObjectStore, states: list[int], config: LogConfig, now_ms: int
) -> tuple[dict[int, StateManifest], list[int]]:
    """Retained ``{version: manifest}`` and the versions of state directories to delete."""
    horizon = now_ms - int(config.state_retention_hours * _HOUR_MS)
    retained: dict[int, StateManifest] = {}
    doomed: list[int] = []
    for v in sorted(states, reverse=True):
        manifest = read_state_manifest(store, v)
        if manifest is None:  # unfinished write: whatever was listed in it is referenced by nothing
            doomed.append(v)
        elif len(retained) < config.state_retention_versions or manifest.created_at >= horizon:
            retained[v] = manifest
        else:
            doomed.append(v)
    return retained, doomed


def _delete(store: ObjectStore, keys: list[str], dry_run: bool) -> None:
    if not dry_run:
        for key in keys:
            store.delete(key)


def cleanup_log(
    store: ObjectStore, config: LogConfig, dry_run: bool = False, now_ms: int | None = None
) -> CleanupReport:
    """Apply the retention rules of the module docstring; returns what was deleted."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    report = CleanupReport(dry_run=dry_run)
    listing = list_log(store)
    retained, doomed = _retained_states(store, sorted(listing.states), config, now_ms)
    report.retained_states = sorted(retained)
    for v in sorted(doomed):
        keys = [o.key for o in store.list(f"{LOG_DIR}/{state_dir(v)}/")]
        _delete(store, keys, dry_run)
        report.deleted_states.append(v)

    reachable = {resolve_manifest_path(i.path, v) for v, m in retained.items() for i in m.manifests}
    manifest_horizon = now_ms - int(config.gc_min_manifest_age_hours * _HOUR_MS)
    for obj in store.list(f"{LOG_DIR}/{MANIFESTS_DIR}/"):
        if obj.key not in reachable and obj.modified_ms < manifest_horizon:
            report.deleted_manifests.append(obj.key)
    _delete(store, report.deleted_manifests, dry_run)

    bases = sorted(set(retained) | listing.checkpoints)
    newest_base = bases[-1] if bases else -1
    log_horizon = now_ms - int(config.tx_log_retention_hours * _HOUR_MS)
    for v, modified in sorted(listing.versions.items()):
        if 0 < v <= newest_base and modified < log_horizon:
            report.deleted_version_files.append(f"{LOG_DIR}/{version_name(v)}.json")
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
