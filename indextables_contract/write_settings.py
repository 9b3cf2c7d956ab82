"""The after-write settings of a batch write, read one way for the client and the cluster (each
through its entry in ``indextables_contract.settings``, which parses it):
merge-on-write (``spark.indextables.mergeOnWrite.*``), purge-on-write (``spark.indextables.purgeOnWrite.*``)
and optimized writes (``spark.indextables.write.optimizeWrite.*``), with IndexTables4Spark's names
and defaults (its ``AsyncMergeOnWriteConfig``, ``PurgeOnWriteConfig`` and ``OptimizedWriteConfig``).

A bad value is a ``ConfigError`` naming the setting and the value, raised before anything is written
(also when the feature is off). Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from indextables_contract import settings as S
from indextables_contract.errors import ConfigError

MIN_SPLIT_RETENTION_HOURS = 24  # PURGE never deletes a younger split (it may belong to a running write)


def merge_on_write_settings(path: str, opts: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``merge_splits`` arguments of merge-on-write (``target_size`` in bytes, ``sort_key``,
    ``min_splits_to_merge``, plus ``interval_s`` for streams), or None when it is off. Each setting is
    read through its registry entry (``indextables_contract.settings``).

    Raises:
        ConfigError: a setting that is not valid, named with its value (checked also when it is off).

    Example: ``merge_on_write_settings("t", {"spark.indextables.mergeOnWrite.enabled": "true"})["target_size"]``
    is ``4 << 30`` (4G).
    """
    what = f"write {path}"
    enabled = S.MERGE_ON_WRITE_ENABLED.get(opts, what)
    target = S.MERGE_ON_WRITE_TARGET_SIZE.get(opts, what)
    minimum = S.MERGE_ON_WRITE_MIN_SPLITS.get(opts, what)
    interval = S.MERGE_ON_WRITE_STREAM_INTERVAL.get(opts, what)
    if not enabled:
        return None
    sort_key = S.MERGE_SORT_KEY.raw(opts) or None
    return {"target_size": target, "sort_key": sort_key, "min_splits_to_merge": minimum, "interval_s": interval}


@dataclass(frozen=True)
class PurgeOnWrite:
    """When and how a batch write purges its table after the commit (IndexTables4Spark's semantics:
    after a merge-on-write ran, or after every ``trigger_after_writes``-th write)."""

    trigger_after_merge: bool
    trigger_after_writes: int
    split_retention_hours: int
    tx_log_retention_hours: int

    def due(self, merged: bool, version: int) -> bool:
        """Whether the write that committed ``version`` (and ran a merge, if ``merged``) purges. Writes
        are counted by the table's version: every ``trigger_after_writes``-th version purges."""
        if self.trigger_after_merge and merged:
            return True
        return self.trigger_after_writes > 0 and version % self.trigger_after_writes == 0


def purge_on_write_settings(path: str, opts: Mapping[str, Any]) -> PurgeOnWrite | None:
    """Purge-on-write, or None when it is off.

    Raises:
        ConfigError: a setting that is not valid, or a split retention below 24 hours.
    """
    what = f"write {path}"
    enabled = S.PURGE_ON_WRITE_ENABLED.get(opts, what)
    after_merge = S.PURGE_ON_WRITE_TRIGGER_AFTER_MERGE.get(opts, what)
    after_writes = S.PURGE_ON_WRITE_TRIGGER_AFTER_WRITES.get(opts, what)
    split_hours = S.PURGE_ON_WRITE_SPLIT_RETENTION_HOURS.get(opts, what)
    log_hours = S.PURGE_ON_WRITE_TX_LOG_RETENTION_HOURS.get(opts, what)
    for setting, hours in (
        (S.PURGE_ON_WRITE_SPLIT_RETENTION_HOURS, split_hours),
        (S.PURGE_ON_WRITE_TX_LOG_RETENTION_HOURS, log_hours),
    ):
        if hours < MIN_SPLIT_RETENTION_HOURS:
            raise ConfigError(
                f"write {path}: {setting.key}={hours} is below the minimum of {MIN_SPLIT_RETENTION_HOURS} hours"
            )
    if not enabled:
        return None
    return PurgeOnWrite(after_merge, after_writes, split_hours, log_hours)


def optimize_write_target(path: str, opts: Mapping[str, Any]) -> int | None:
    """The split size (bytes) an optimized write aims at, or None when ``write.optimizeWrite.enabled``
    is off (the default)."""
    what = f"write {path}"
    enabled = S.OPTIMIZE_WRITE_ENABLED.get(opts, what)
    target = S.OPTIMIZE_WRITE_TARGET_SPLIT_SIZE.get(opts, what)
    return target if enabled else None
