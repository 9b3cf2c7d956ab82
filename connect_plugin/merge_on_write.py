"""Merge on write: MERGE SPLITS run by the client after its writes (``spark.indextables.mergeOnWrite.*``).

IndexTables4Spark merges in the background after writes (its AsyncMergeOnWriteManager). Here a
batch write (``df.write.format("indextables")`` or ``connect_plugin.write``) merges after its commit,
in the committing process (``executor_lib.spark.after_write``); streams are merged by the client:

* while a ``connect_plugin.write_stream`` query runs, a ``StreamMerger`` thread of this client
  merges after new micro-batches, at most every ``streamIntervalSeconds``.

Either way the data is committed first: a merge that fails (a conflict with another writer, the
session going away) is a warning, and the next one tries again. Which splits a merge takes is the
cluster's plan (``minSplitsToMerge`` small splits, or level-0 splits with
``spark.indextables.merge.sortKey``; PROTOCOL.md §15 and §16).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from indextables_contract.write_settings import merge_on_write_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["StreamMerger", "merge_after_write", "merge_on_write_settings"]


def merge_after_write(merge_splits: Callable[..., Any], path: str, merge: Mapping[str, Any]) -> bool:
    """``merge_splits`` (the table's ``IndexTable.merge_splits``) with the merge-on-write settings;
    False (and a warning) if it failed."""
    arguments = {k: v for k, v in merge.items() if k != "interval_s"}
    try:
        merge_splits(**arguments)
    except Exception as e:  # the data is committed; the next merge tries again
        warnings.warn(
            f"merge on write {path}: the data is committed, the merge failed and is left to the next one: {e}",
            stacklevel=3,
        )
        return False
    return True


class StreamMerger:
    """A daemon thread that merges the table of a running streaming query after new micro-batches
    (its ``lastProgress`` batch id moved), at most every ``interval_s`` seconds, until the query stops.

    A classic session's thread needs the session as its JVM thread's active session (the data
    source lookup of the merge's write resolves against it), so it runs as PySpark's
    ``InheritableThread`` and sets it; a Spark Connect session needs neither.
    """

    def __init__(
        self, spark: SparkSession, merge_splits: Callable[..., Any], path: str, merge: Mapping[str, Any], query: Any
    ) -> None:
        self.spark, self.merge_splits, self.path, self.merge, self.query = spark, merge_splits, path, merge, query
        self.merges = 0  # merge runs that succeeded (tests and the curious read it)
        self.thread = self._thread(self._run)

    def start(self) -> StreamMerger:
        self.thread.start()
        return self

    def _thread(self, target: Any) -> threading.Thread:
        if type(self.spark).__module__.startswith("pyspark.sql.connect"):
            return threading.Thread(target=target, name=f"indextables-merge-on-write {self.path}", daemon=True)
        from pyspark import InheritableThread

        spark: Any = self.spark  # a classic session here: its JVM handles are not in the shared type

        def with_session() -> None:
            spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
            target()

        thread = InheritableThread(target=with_session)
        thread.daemon = True
        return thread

    def _run(self) -> None:
        merged_through = -1
        stopped = threading.Event()
        while not stopped.wait(float(self.merge["interval_s"])):
            try:
                if not self.query.isActive:
                    return
                progress = self.query.lastProgress
            except Exception:  # the session went away with the query
                return
            batch = int(progress["batchId"]) if progress else -1
            if batch > merged_through and merge_after_write(self.merge_splits, self.path, self.merge):
                merged_through = batch
                self.merges += 1
