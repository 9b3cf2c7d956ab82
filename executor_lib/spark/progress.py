"""Progress of long executor tasks (indexed writes, MERGE SPLITS): what a user sees while one runs.

A task that runs longer than ``spark.indextables.progress.intervalSeconds`` (default 30; 0 turns
progress off) reports a line at every interval, and a last one when it ends::

    indextables write s3://bucket/logs: task 3 (stage 7, attempt 0): 1,250,000 rows indexed
    (41,300 rows/s), 2 splits uploaded (612.3 MB), 1 split open, 30 s

Shorter tasks say nothing, so a small write stays quiet in a local session's console.

Where the lines go: through the ``indextables.progress`` logger when the Python worker has a
logging handler (Spark's Python worker logging, ``spark.sql.pyspark.worker.logging.enabled=true``,
which makes them queryable with ``spark.tvf.python_worker_logs()``, also over Spark Connect),
else to the worker's stderr, which Spark keeps in the executor's stderr log (the Spark UI's
Executors page). Counting is a few integer additions per Arrow batch, never per row.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping

from indextables_contract import settings as S

INTERVAL_OPTION = S.PROGRESS_INTERVAL_SECONDS.key
DEFAULT_INTERVAL_SECONDS: float = S.PROGRESS_INTERVAL_SECONDS.value

log = logging.getLogger("indextables.progress")
log.setLevel(logging.INFO)


def interval_seconds(options: Mapping[str, str]) -> float:
    """The reporting interval the options set (0: off); ConfigError naming the option if it is not a number >= 0.

    Example: ``interval_seconds({"spark.indextables.progress.intervalSeconds": "10"}) == 10.0``
    """
    return S.PROGRESS_INTERVAL_SECONDS.get(options)


class TaskProgress:
    """Counts one task's rows and uploads and reports them every ``interval`` seconds.

    ``indexed`` is called by the task's thread (it also reports); ``uploaded`` may be called from
    an upload thread. ``done`` reports the totals if the task reported anything before.
    """

    def __init__(
        self, what: str, interval: float, verb: str = "indexed", clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.what = what
        self.verb = verb
        self.interval = interval
        self.clock = clock
        self.rows = 0
        self.splits_uploaded = 0
        self.bytes_uploaded = 0
        self.open_splits = 0
        self.reports = 0
        self._lock = threading.Lock()
        self._start = self._last = clock()

    def indexed(self, rows: int, open_splits: int = 0) -> None:
        """``rows`` more rows went into the task's open splits (``open_splits`` of them now) or were merged."""
        self.rows += rows
        self.open_splits = open_splits
        if self.interval > 0 and self.clock() - self._last >= self.interval:
            self._report()

    def uploaded(self, nbytes: int) -> None:
        """One more split of ``nbytes`` bytes is in storage."""
        with self._lock:
            self.splits_uploaded += 1
            self.bytes_uploaded += nbytes

    def done(self) -> None:
        """The last line (only if the task was long enough to report before)."""
        self.open_splits = 0
        if self.reports:
            self._report(last=True)

    def line(self, last: bool = False) -> str:
        """The progress line as it is now."""
        elapsed = max(self.clock() - self._start, 1e-9)
        with self._lock:
            splits, nbytes = self.splits_uploaded, self.bytes_uploaded
        parts = [
            f"{self.rows:,} rows {self.verb} ({self.rows / elapsed:,.0f} rows/s)",
            f"{splits} split{'' if splits == 1 else 's'} uploaded ({nbytes / 1e6:,.1f} MB)",
        ]
        if self.open_splits:
            parts.append(f"{self.open_splits} split{'' if self.open_splits == 1 else 's'} open")
        parts.append(f"{elapsed:,.0f} s" + (", done" if last else ""))
        return f"indextables {self.what}: {_task_name()}: " + ", ".join(parts)

    def _report(self, last: bool = False) -> None:
        self.reports += 1
        self._last = self.clock()
        emit(self.line(last))


def emit(line: str) -> None:
    """Send ``line`` where a user watching the job finds it (see the module docstring)."""
    if logging.getLogger().handlers or log.handlers:
        log.info(line)
    else:
        print(line, file=sys.stderr, flush=True)


def _task_name() -> str:
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
    except ImportError:
        context = None
    if context is None:
        return "outside a Spark task"
    return f"task {context.partitionId()} (stage {context.stageId()}, attempt {context.attemptNumber()})"
