"""The Python worker daemon for IndexTables' executors: PySpark's own (``pyspark.daemon``), with the
modules a read task runs imported once, before it forks a worker, and Python's zip-import caches
refreshed only when a zip changed.

Set ``spark.python.daemon.module=executor_lib.spark.worker_daemon`` (``connect_plugin.local``'s
``DAEMON_CONF``; ``connect_plugin.local_session()``, ``connect_plugin.install`` on a local classic
session and ``ConnectServer`` set it) and Spark starts this module instead of ``pyspark.daemon``.

Why: Spark ends a task as soon as it has the rows a ``limit(1)``, ``show()`` or
``head()`` needs, and a task ended before its Python worker finished loses that worker: the next
query's task gets a freshly forked one. Under ``pyspark.daemon`` a fresh worker spends ~0.6 s before
it reads its first split (local[2], 2 cores): ~0.55 s importing PySpark's worker, pandas, pyarrow,
tantivy and this package, and ~0.28 s in ``importlib.invalidate_caches()``, which PySpark calls
when it puts the session's files directory on ``sys.path`` — Python 3.11's ``zipimporter`` then
re-reads the whole directory of ``pyspark.zip`` once per package imported from it (19 times).
Here the imports are done in the daemon (a fork inherits them), and a ``zipimporter`` re-reads its
archive only if the file changed (size, mtime or inode) since it last read it.

Importing before a fork is what ``pyspark.daemon`` avoids on principle (a library's threads do not
survive a fork). The modules imported here start only threads that are fork-safe by design: pyarrow's
jemalloc background thread and OpenBLAS's pool (numpy) are re-created after a fork by their own
``pthread_atfork`` handlers; tantivy and this package start none at import. A module that fails to
import is left to the worker, as before.
"""

from __future__ import annotations

import importlib
import os
import sys
import zipimport
from typing import Any

# The Spark setting that makes Spark start this module (connect_plugin.local holds the same, by name).
DAEMON_CONF = {"spark.python.daemon.module": "executor_lib.spark.worker_daemon"}

# What a read or write task imports, in import order (absent optional ones are skipped).
PRELOADED = (
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
    "pyspark.sql.worker.plan_data_source_read",
    "pandas",
    "numpy",
    "pyarrow",
    "pyarrow.compute",
    "pyarrow.pandas_compat",  # imported by the first pa.array() of a numpy array (2-3 ms in each worker)
    "tantivy",
    "pyspark_indextables",
    "executor_lib.spark.datasource",
    "executor_lib.spark.reader",
    "executor_lib.spark.writer",
    "executor_lib.splits.search.table_search",
)


def preload(modules: tuple[str, ...] = PRELOADED) -> list[str]:
    """Import ``modules`` (each that fails is skipped: the worker imports it, or fails, as before).

    Returns:
        the modules imported.

    Example: ``preload(("pyarrow",))`` -> ``["pyarrow"]``
    """
    done = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # a worker that needs it raises the real error itself
            continue
        done.append(name)
    return done


def _archive_stamp(archive: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(archive)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


def refresh_zips_only_when_changed() -> None:
    """Make ``zipimporter.invalidate_caches`` re-read an archive only when its file changed since this
    importer last read it; mark every importer already made as current (they read their archive when
    they were made, moments ago). A changed or vanished archive is re-read as before.

    Example: ``refresh_zips_only_when_changed(); importlib.invalidate_caches()`` reads no unchanged zip.
    """
    reread = zipimport.zipimporter.invalidate_caches
    if getattr(reread, "_indextables", False):
        return

    def invalidate_caches(self: Any) -> None:
        stamp = _archive_stamp(self.archive)
        if stamp is not None and getattr(self, "_indextables_stamp", None) == stamp:
            return
        reread(self)
        self._indextables_stamp = stamp

    invalidate_caches._indextables = True  # type: ignore[attr-defined]
    zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]
    for importer in list(sys.path_importer_cache.values()):
        if isinstance(importer, zipimport.zipimporter):
            importer._indextables_stamp = _archive_stamp(importer.archive)  # type: ignore[attr-defined]


def quiet_when_spark_hangs_up(daemon: Any) -> None:
    """Make ``daemon``'s (``pyspark.daemon``'s) worker loop end a worker whose socket Spark closed
    (``BrokenPipeError``, ``ConnectionResetError``) as if it had finished with an error, without the
    traceback it prints otherwise: Spark closes it when it ends a task early (a ``show()`` that has
    its rows), and that traceback on the user's console after every ``show()`` is not a failure.

    Example: ``quiet_when_spark_hangs_up(pyspark.daemon)``
    """
    work = daemon.worker
    if getattr(work, "_indextables", False):
        return

    def worker(sock: Any, authenticated: bool) -> int:
        try:
            return int(work(sock, authenticated))
        except (BrokenPipeError, ConnectionResetError):
            return 1  # the daemon then waits for Spark to close the socket and ends this process

    worker._indextables = True  # type: ignore[attr-defined]
    daemon.worker = worker


def main() -> None:
    """Preload, then run PySpark's daemon (it forks the workers)."""
    import pyspark.daemon

    preload()
    refresh_zips_only_when_changed()
    quiet_when_spark_hangs_up(pyspark.daemon)
    pyspark.daemon.manager()


if __name__ == "__main__":
    main()
