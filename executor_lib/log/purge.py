"""PURGE: delete split files no retained version needs, then old log files and orphaned manifests.

A split file is deleted only when all of these hold:

* it is not live in the latest version, nor in the oldest version time travel can still
  reach after the log cleanup (``E``), nor added by any version after ``E`` — so every
  version that remains readable keeps all its files;
* it was last modified longer ago than the retention (``retention_hours``, never below 24):
  a writer may have uploaded it and not committed yet.

Log files, state directories and manifests follow ``log.cleanup`` with
``purge.txLogRetentionHours`` (or the given transaction-log retention). Like Delta Lake's
VACUUM, a purge limits time travel to what remains.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from executor_lib.errors import ConfigError, IndexTablesError
from executor_lib.log.cleanup import CleanupReport, cleanup_log
from executor_lib.log.snapshot import list_log, read_version_actions
from executor_lib.protocol.actions import AddAction
from executor_lib.protocol.files import LOG_DIR, version_name

MIN_RETENTION_HOURS = 24.0
_HOUR_MS = 3600 * 1000


@dataclass
class PurgeReport:
    dry_run: bool
    earliest_version: int
    deleted_splits: list[tuple[str, int]] = field(default_factory=list)  # (key, size)
    log: CleanupReport | None = None

    def rows(self) -> list[tuple[str, str, int]]:
        """(kind, key, size) of everything deleted (or, in a dry run, that would be)."""
        out = [("split", key, size) for key, size in self.deleted_splits]
        if self.log is not None:
            out += [("state", f"state-v{v}", 0) for v in self.log.deleted_states]
            out += [("manifest", k, 0) for k in self.log.deleted_manifests]
            out += [("log", k, 0) for k in self.log.deleted_version_files + self.log.deleted_checkpoint_files]
        return out


def purge_table(
    txlog: Any,
    retention_hours: float = 168.0,
    tx_log_retention_hours: float | None = None,
    dry_run: bool = False,
    now_ms: int | None = None,
) -> PurgeReport:
    """Purge the table of ``txlog`` (a ``TransactionLog``) under the rules above."""
    for name, hours in (("retention", retention_hours), ("transaction log retention", tx_log_retention_hours)):
        if hours is not None and hours < MIN_RETENTION_HOURS:
            raise ConfigError(f"purge {txlog.uri}: {name} {hours}h is below the minimum of {MIN_RETENTION_HOURS:.0f}h")
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    store = txlog.store
    config = txlog.config
    if tx_log_retention_hours is not None:
        config = dataclasses.replace(config, tx_log_retention_hours=tx_log_retention_hours)
    latest = txlog.snapshot()
    log_report = cleanup_log(store, config, dry_run=dry_run, now_ms=now_ms)
    gone = set(log_report.deleted_version_files) | set(log_report.deleted_checkpoint_files)
    listing = list_log(store)
    remaining = sorted(v for v in listing.versions if f"{LOG_DIR}/{version_name(v)}.json" not in gone)
    earliest, live_at_earliest = _earliest_readable(txlog, remaining, listing, log_report, latest.version)
    protected = {a.path for a in latest.files} | live_at_earliest
    for v in remaining:
        if v > earliest:
            protected |= {a.path for a in read_version_actions(store, v) if isinstance(a, AddAction)}
    horizon = now_ms - int(retention_hours * _HOUR_MS)
    report = PurgeReport(dry_run=dry_run, earliest_version=earliest, log=log_report)
    for obj in store.list(""):
        if obj.key.startswith(f"{LOG_DIR}/") or not obj.key.endswith(".split"):
            continue
        if obj.key not in protected and obj.modified_ms < horizon:
            report.deleted_splits.append((obj.key, obj.size))
    if not dry_run:
        for key, _ in report.deleted_splits:
            store.delete(key)
    return report


def _earliest_readable(
    txlog: Any, remaining: list[int], listing: Any, log_report: CleanupReport, latest: int
) -> tuple[int, set[str]]:
    """The oldest version a snapshot can still be built for, and its live files."""
    bases = set(log_report.retained_states) | set(listing.checkpoints)
    candidates = sorted(set(remaining) | {b for b in bases if b <= latest})
    for v in candidates:
        try:
            return v, {a.path for a in txlog.snapshot(version=v).files}
        except IndexTablesError:
            continue
    return latest, set()
