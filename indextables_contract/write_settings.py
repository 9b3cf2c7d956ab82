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

from indextables_contract import settings as S
from indextables_contract.errors import ConfigError
from indextables_contract.values import as_bool, as_size

SORT_KEY = S.MERGE_SORT_KEY.key
DEFAULT_MERGE_TARGET = S.MERGE_ON_WRITE_TARGET_SIZE.default  # IndexTables4Spark's mergeOnWrite.targetSize
DEFAULT_OPTIMIZE_TARGET = S.OPTIMIZE_WRITE_TARGET_SPLIT_SIZE.default  # its write.optimizeWrite.targetSplitSize
MIN_SPLIT_RETENTION_HOURS = 24  # PURGE never deletes a younger split (it may belong to a running write)


def size_bytes(name: str, text: str) -> int:
    """``"512M"``, ``"4G"``, ``"1024K"`` or bytes (``values.as_size``); ConfigError naming ``name`` otherwise."""
    size = as_size(text)
    if size is None:
        raise ConfigError(f"{name} must be a size like 512M or 4G, not {text!r}")
    return size


def _get(opts: Mapping[str, Any], setting: S.Setting[Any]) -> str:
    """The setting's text in ``opts`` (any case, stripped), else its default's."""
    given = setting.raw(opts)
    return setting.default if given is None else given


def _bool(path: str, setting: S.Setting[bool], opts: Mapping[str, Any]) -> bool:
    text = _get(opts, setting)
    parsed = as_bool(text)
    if parsed is None:
        raise ConfigError(f"write {path}: {setting.key} must be true or false, not {text!r}")
    return parsed


def _count(path: str, setting: S.Setting[int], opts: Mapping[str, Any], least: int) -> int:
    text = _get(opts, setting)
    if not text.isdigit() or int(text) < least:
        kind = "a positive integer" if least > 0 else "a whole number (0 or more)"
        raise ConfigError(f"write {path}: {setting.key} must be {kind}, not {text!r}")
    return int(text)


def merge_on_write_settings(path: str, opts: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``merge_splits`` arguments of merge-on-write (``target_size``, ``sort_key``,
    ``min_splits_to_merge``, plus ``interval_s`` for streams), or None when it is off.

    Raises:
        ConfigError: a setting that is not valid, named with its value (checked also when it is off).

    Example: ``merge_on_write_settings("t", {"spark.indextables.mergeOnWrite.enabled": "true"})["target_size"]``
    is ``"4G"``.
    """
    enabled = _bool(path, S.MERGE_ON_WRITE_ENABLED, opts)
    target = _get(opts, S.MERGE_ON_WRITE_TARGET_SIZE)
    size_bytes(f"write {path}: {S.MERGE_ON_WRITE_TARGET_SIZE.key}", target)
    minimum = _count(path, S.MERGE_ON_WRITE_MIN_SPLITS, opts, 1)
    interval = _get(opts, S.MERGE_ON_WRITE_STREAM_INTERVAL)
    if not re.fullmatch(r"\d+(\.\d*)?", interval):
        raise ConfigError(
            f"write {path}: {S.MERGE_ON_WRITE_STREAM_INTERVAL.key} must be a number of seconds, not {interval!r}"
        )
    if not enabled:
        return None
    sort_key = S.MERGE_SORT_KEY.raw(opts) or None
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
    enabled = _bool(path, S.PURGE_ON_WRITE_ENABLED, opts)
    after_merge = _bool(path, S.PURGE_ON_WRITE_TRIGGER_AFTER_MERGE, opts)
    after_writes = _count(path, S.PURGE_ON_WRITE_TRIGGER_AFTER_WRITES, opts, 0)
    split_hours = _count(path, S.PURGE_ON_WRITE_SPLIT_RETENTION_HOURS, opts, 0)
    log_hours = _count(path, S.PURGE_ON_WRITE_TX_LOG_RETENTION_HOURS, opts, 0)
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
    enabled = _bool(path, S.OPTIMIZE_WRITE_ENABLED, opts)
    target = size_bytes(
        f"write {path}: {S.OPTIMIZE_WRITE_TARGET_SPLIT_SIZE.key}", _get(opts, S.OPTIMIZE_WRITE_TARGET_SPLIT_SIZE)
    )
    return target if enabled else None
