"""The Python worker daemon (``executor_lib.spark.worker_daemon``, issue 55): a local session's
workers start from it, a worker it forks has the read path imported already, a zip Python imports
from is re-read only when it changed, and a task Spark ends early (``limit(1)``, ``show()``) prints
no traceback on the user's console."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
import zipfile
import zipimport
from pathlib import Path

import connect_plugin.local
from executor_lib.spark import worker_daemon


def test_the_client_names_the_daemon_the_executors_ship() -> None:
    assert connect_plugin.local.DAEMON_CONF == worker_daemon.DAEMON_CONF
    assert worker_daemon.DAEMON_CONF["spark.python.daemon.module"] == worker_daemon.__name__


def _zip(path: Path, modules: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in modules.items():
            z.writestr(f"{name}.py", text)


def test_a_zip_is_re_read_only_when_it_changed(tmp_path: Path) -> None:
    archive = tmp_path / "lib.zip"
    _zip(archive, {"zipped_a": "X = 1\n"})
    importer = zipimport.zipimporter(str(archive))
    sys.path_importer_cache[str(archive)] = importer
    try:
        worker_daemon.refresh_zips_only_when_changed()
        files = importer._files  # type: ignore[attr-defined]
        importer.invalidate_caches()
        assert importer._files is files  # type: ignore[attr-defined]  # unchanged: not read again
        _zip(archive, {"zipped_a": "X = 1\n", "zipped_b": "Y = 2\n"})  # rewritten: a module more
        importer.invalidate_caches()
        assert importer.find_spec("zipped_b") is not None
        importer.invalidate_caches()
        assert importer.find_spec("zipped_b") is not None
    finally:
        sys.path_importer_cache.pop(str(archive), None)


def test_preload_skips_what_it_cannot_import() -> None:
    assert worker_daemon.preload(("json", "no_such_module_here")) == ["json"]
    importlib.import_module("json")


_SCRIPT = textwrap.dedent(
    """
    import io, contextlib, sys
    import connect_plugin

    spark = connect_plugin.local_session(conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    table = sys.argv[1]
    spark.range(0, 5000, numPartitions=2).selectExpr("id", "concat('row ', id) AS msg").write.format(
        "indextables"
    ).mode("append").save(table)
    df = spark.read.format("indextables").load(table)
    for _ in range(3):
        assert len(df.limit(1).collect()) == 1
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        df.show()
    assert shown.getvalue().count("row ") == 20

    def probe(batches):
        import os, sys
        import pyarrow as pa
        preloaded = "tantivy" in sys.modules and "executor_lib.spark.reader" in sys.modules
        parent = open(f"/proc/{os.getppid()}/cmdline", "rb").read().replace(b"\\0", b" ").decode()
        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"preloaded": [preloaded], "parent": [parent]})

    got = spark.range(1).mapInArrow(probe, "preloaded boolean, parent string").collect()[0]
    print("PRELOADED", got["preloaded"])
    print("PARENT", got["parent"])
    spark.stop()
    """
)


def test_a_local_session_forks_workers_from_the_daemon_and_ends_them_quietly(tmp_path: Path) -> None:
    """In a session of its own (its stderr is the JVM's and the daemon's): three ``limit(1)`` and a
    ``show()`` end tasks early, and nothing of it reaches stderr; a worker forked for a later task
    already has tantivy and the reader imported, and its parent is the daemon."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "t")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "PRELOADED True" in done.stdout, done.stdout
    assert worker_daemon.__name__ in done.stdout.split("PARENT", 1)[1]
    assert "BrokenPipeError" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
