"""The after-write settings of a batch write, parsed one way for the client and the cluster:
merge-on-write (``spark.indextables.mergeOnWrite.*``), purge-on-write (``spark.indextables.purgeOnWrite.*``)
and optimized writes (``spark.indextables.write.optimizeWrite.*``), with IndexTables4Spark's names
and defaults (its ``AsyncMergeOnWriteConfig``, ``PurgeOnWriteConfig`` and ``OptimizedWriteConfig``).

A bad value is a ``ConfigError`` naming the setting and the value, raised before anything is written
(also when the feature is off). Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from indextables_contract.errors import ConfigError
from indextables_contract.values import as_bool, as_size

MERGE_ON_WRITE = "spark.indextables.mergeOnWrite."
PURGE_ON_WRITE = "spark.indextables.purgeOnWrite."
OPTIMIZE_WRITE = "spark.indextables.write.optimizeWrite."
SORT_KEY = "spark.indextables.merge.sortKey"
DEFAULT_MERGE_TARGET = "4G"  # IndexTables4Spark's mergeOnWrite.targetSize
DEFAULT_OPTIMIZE_TARGET = "1G"  # IndexTables4Spark's write.optimizeWrite.targetSplitSize
MIN_SPLIT_RETENTION_HOURS = 24  # PURGE never deletes a younger split (it may belong to a running write)


def size_bytes(name: str, text: str) -> int:
    """``"512M"``, ``"4G"``, ``"1024K"`` or bytes (``values.as_size``); ConfigError naming ``name`` otherwise."""
    size = as_size(text)
    if size is None:
        raise ConfigError(f"{name} must be a size like 512M or 4G, not {text!r}")
    return size


def _get(opts: Mapping[str, Any], key: str, default: str) -> str:
    lower = key.lower()
    for k, v in opts.items():
        if k.lower() == lower:
            return str(v).strip()
    return default


def _bool(path: str, key: str, text: str) -> bool:
    parsed = as_bool(text)
    if parsed is None:
        raise ConfigError(f"write {path}: {key} must be true or false, not {text!r}")
    return parsed


def _count(path: str, key: str, text: str, least: int) -> int:
    if not text.isdigit() or int(text) < least:
        kind = "a positive integer" if least > 0 else "a whole number (0 or more)"
        raise ConfigError(f"write {path}: {key} must be {kind}, not {text!r}")
    return int(text)


def merge_on_write_settings(path: str, opts: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``merge_splits`` arguments of merge-on-write (``target_size``, ``sort_key``,
    ``min_splits_to_merge``, plus ``interval_s`` for streams), or None when it is off.

    Raises:
        ConfigError: a setting that is not valid, named with its value (checked also when it is off).

    Example: ``merge_on_write_settings("t", {"spark.indextables.mergeOnWrite.enabled": "true"})["target_size"]``
    is ``"4G"``.
    """
    enabled = _bool(path, MERGE_ON_WRITE + "enabled", _get(opts, MERGE_ON_WRITE + "enabled", "false"))
    target = _get(opts, MERGE_ON_WRITE + "targetSize", DEFAULT_MERGE_TARGET)
    size_bytes(f"write {path}: {MERGE_ON_WRITE}targetSize", target)
    key = MERGE_ON_WRITE + "minSplitsToMerge"
    minimum = _count(path, key, _get(opts, key, "10"), 1)
    interval = _get(opts, MERGE_ON_WRITE + "streamIntervalSeconds", "30")
    if not re.fullmatch(r"\d+(\.\d*)?", interval):
        raise ConfigError(
            f"write {path}: {MERGE_ON_WRITE}streamIntervalSeconds must be a number of seconds, not {interval!r}"
        )
    if not enabled:
        return None
    sort_key = _get(opts, SORT_KEY, "") or None
    return {"target_size": target, "sort_key": sort_key, "min_splits_to_merge": minimum, "interval_s": float(interval)}


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
    key = PURGE_ON_WRITE
    enabled = _bool(path, key + "enabled", _get(opts, key + "enabled", "false"))
    after_merge = _bool(path, key + "triggerAfterMerge", _get(opts, key + "triggerAfterMerge", "true"))
    after_writes = _count(path, key + "triggerAfterWrites", _get(opts, key + "triggerAfterWrites", "0"), 0)
    split_hours = _count(path, key + "splitRetentionHours", _get(opts, key + "splitRetentionHours", "168"), 0)
    log_hours = _count(path, key + "txLogRetentionHours", _get(opts, key + "txLogRetentionHours", "720"), 0)
    for name, hours in (("splitRetentionHours", split_hours), ("txLogRetentionHours", log_hours)):
        if hours < MIN_SPLIT_RETENTION_HOURS:
            raise ConfigError(
                f"write {path}: {key}{name}={hours} is below the minimum of {MIN_SPLIT_RETENTION_HOURS} hours"
            )
    if not enabled:
        return None
    return PurgeOnWrite(after_merge, after_writes, split_hours, log_hours)


def optimize_write_target(path: str, opts: Mapping[str, Any]) -> int | None:
    """The split size (bytes) an optimized write aims at, or None when ``write.optimizeWrite.enabled``
    is off (the default)."""
    enabled = _bool(path, OPTIMIZE_WRITE + "enabled", _get(opts, OPTIMIZE_WRITE + "enabled", "false"))
    target = size_bytes(
        f"write {path}: {OPTIMIZE_WRITE}targetSplitSize",
        _get(opts, OPTIMIZE_WRITE + "targetSplitSize", DEFAULT_OPTIMIZE_TARGET),
    )
    return target if enabled else None
