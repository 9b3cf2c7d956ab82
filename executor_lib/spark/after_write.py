"""What a batch write of ``format("indextables")`` does around its commit, in the committing process
(the Python process beside the driver that runs ``IndexTablesWriter.commit``), with IndexTables4Spark's
settings (``indextables_contract.write_settings``):

* **optimized write** (``write.optimizeWrite.enabled``): before the commit, each partition's new splits
  are merged into splits of about ``write.optimizeWrite.targetSplitSize`` (1G), so the write commits few,
  well-sized splits in one version. IndexTables4Spark gets there by asking Spark for a shuffle before
  the write, which Spark does not offer Python data sources; the result is the same.
* **merge on write** (``mergeOnWrite.enabled``): after the commit, MERGE SPLITS of the partitions with
  at least ``mergeOnWrite.minSplitsToMerge`` small (or, with ``merge.sortKey``, level-0) splits, to
  ``mergeOnWrite.targetSize`` (4G), committed as one more version.
* **purge on write** (``purgeOnWrite.enabled``): after that, PURGE INDEXTABLE with
  ``purgeOnWrite.splitRetentionHours`` / ``txLogRetentionHours`` when a merge ran
  (``triggerAfterMerge``) or every ``triggerAfterWrites``-th version.

The data is committed first: a merge or purge that fails is logged as a warning (logger
``executor_lib.spark.after_write``) and the write succeeds, as in IndexTables4Spark. The work runs in
one process (no Spark session is reachable from a data source's commit), so it suits the merges a
write leaves behind; schedule MERGE SPLITS for large backlogs.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from executor_lib.protocol.actions import AddAction
from executor_lib.spark.common import delete_quietly, node_split_cache
from indextables_contract.write_settings import (
    merge_on_write_settings,
    optimize_write_target,
    purge_on_write_settings,
)

if TYPE_CHECKING:
    from executor_lib.storage.base import ObjectStore

log = logging.getLogger(__name__)


def check_settings(path: str, options: Mapping[str, str]) -> None:
    """ConfigError for a bad merge-, purge- or optimize-on-write setting (before any task runs)."""
    merge_on_write_settings(path, options)
    purge_on_write_settings(path, options)
    optimize_write_target(path, options)


def optimize_adds(
    path: str,
    store: ObjectStore,
    adds: list[AddAction],
    mapping_json: str,
    arrow_schema: Any,
    options: Mapping[str, str],
) -> list[AddAction]:
    """The adds to commit: with ``write.optimizeWrite.enabled``, each partition's uploaded splits merged
    into splits of about the target size (the sources deleted; they were never committed). If a merge
    fails, the write commits its splits as they are (and says so in the log)."""
    target = optimize_write_target(path, options)
    if target is None or len(adds) < 2:
        return adds
    from executor_lib.splits.write.merge_plan import SKIP_FRACTION
    from executor_lib.splits.write.publish import merge_splits

    by_partition: dict[tuple[Any, ...], list[AddAction]] = defaultdict(list)
    for add in adds:
        by_partition[tuple(sorted(add.partition_values.items()))].append(add)
    out: list[AddAction] = []
    cache = node_split_cache(options)
    mappings = {a.path: mapping_json for a in adds}
    for group in by_partition.values():
        small = sorted((a for a in group if a.size < target * SKIP_FRACTION), key=lambda a: (a.size, a.path))
        out += [a for a in group if a not in small]
        for batch in _pack(small, target):
            if len(batch) < 2:
                out += batch
                continue
            try:
                merged = merge_splits(store, batch, arrow_schema, mappings, cache)
            except Exception as e:
                log.warning(
                    "optimized write %s: merging %d new splits failed, committing them as they are: %s",
                    path,
                    len(batch),
                    e,
                )
                out += batch
                continue
            delete_quietly(store, [a.path for a in batch])
            out.append(merged)
    return out


def _pack(adds: list[AddAction], target: int) -> list[list[AddAction]]:
    """Consecutive runs of ``adds`` whose sizes add up to at most ``target`` (at least one each)."""
    batches: list[list[AddAction]] = []
    size = 0
    for add in adds:
        if batches and size + add.size <= target:
            batches[-1].append(add)
            size += add.size
        else:
            batches.append([add])
            size = add.size
    return batches


def after_commit(path: str, options: Mapping[str, str], version: int | None) -> dict[str, int]:
    """Merge on write, then purge on write, after the write committed ``version`` (None: it committed
    nothing). Returns what was done (``merged``: splits merged away, ``purged``: files purged); never raises."""
    done = {"merged": 0, "purged": 0}
    if version is None:
        return done
    try:
        merge = merge_on_write_settings(path, options)
        purge = purge_on_write_settings(path, options)
    except Exception as e:  # checked before the write ran: only a changed environment gets here
        log.warning("write %s: after-write settings: %s", path, e)
        return done
    if merge is None and purge is None:
        return done
    from executor_lib.spark.common import open_table_log

    try:
        txlog = open_table_log(path, options)
    except Exception as e:
        log.warning("write %s: the data is committed; the table could not be opened to merge or purge: %s", path, e)
        return done
    if merge is not None:
        try:
            from executor_lib.spark.commands import merge_now

            target, minimum = merge["target_size"], merge["min_splits_to_merge"]  # bytes, a count: parsed
            done["merged"] = merge_now(txlog, options, target, minimum, merge["sort_key"])
        except Exception as e:  # the data is committed; the next write's merge tries again
            log.warning(
                "merge on write %s: the data is committed, the merge failed and is left to the next write: %s", path, e
            )
    if purge is not None and purge.due(done["merged"] > 0, version):
        try:
            from executor_lib.log.maintenance.purge import purge_table

            report = purge_table(txlog, purge.split_retention_hours, purge.tx_log_retention_hours)
            done["purged"] = len(report.rows())
            log.info("purge on write %s: %d files deleted", path, done["purged"])
        except Exception as e:
            log.warning("purge on write %s: the data is committed, the purge failed: %s", path, e)
    return done


__all__ = ["after_commit", "check_settings", "optimize_adds"]
