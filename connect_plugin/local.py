"""A local classic Spark session that works as it is started, and the check that a local session's
Python workers can run the data source.

``connect_plugin.local_session()`` (``connect_plugin.session``) is the way to get a ``spark`` on one machine::

    import connect_plugin
    spark = connect_plugin.local_session()          # local[2], the data source installed
    spark.range(3).write.format("indextables").save("/tmp/t")

In a local session the data source runs in Python worker processes that Spark's JVM starts with
``PYSPARK_PYTHON`` (its environment, read when the JVM starts), else ``python3`` on its ``PATH``. Run
as ``.venv/bin/python script.py`` without activating the venv, that is the system Python, which
cannot import this project: every read and write then fails with ``[DATA_SOURCE_NOT_FOUND]``.
``local_session`` starts the JVM with ``PYSPARK_PYTHON`` = this interpreter, and
``check_local_workers`` (run by ``connect_plugin.install``) refuses a local session whose workers
cannot import the data source, in one line naming what to set, before any job runs.

The session is also quiet: the driver JVM gets ``log4j2-local.properties`` (Spark's default layout,
WARN and above; Hadoop's NativeCodeLoader and Spark's DataSourceManager log only errors),
``SPARK_LOCAL_IP`` defaults to 127.0.0.1, and the JVM's stderr is forwarded line by line without
the one "Using incubator modules" notice the JVM prints by itself. These settings apply only when
this call starts the JVM (no SparkContext was started before in this process).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from indextables_contract.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG4J2_CONFIG = Path(__file__).resolve().with_name("log4j2-local.properties")

# Exact lines the JVM prints on stderr by itself that carry nothing a user can act on.
JVM_NOTICES = frozenset({b"WARNING: Using incubator modules: jdk.incubator.vector"})

# What a Python worker imports to run format("indextables") (pyspark_indextables registers it).
WORKER_IMPORTS = "import pyarrow, tantivy, pyspark_indextables"

# Spark starts its Python workers from this daemon: PySpark's, with the read path imported before
# each fork (a worker Spark replaces after a show() starts in ~0.05 s instead of ~0.6 s; see
# executor_lib.spark.worker_daemon). Set by local_session, install (local classic sessions) and
# ConnectServer; a cluster sets it in spark-defaults.conf (docs/spark.md).
DAEMON_MODULE = "executor_lib.spark.worker_daemon"
DAEMON_CONF = {"spark.python.daemon.module": DAEMON_MODULE}


def check_local_workers(spark: SparkSession) -> None:
    """Refuse a classic local session whose Python workers cannot import the data source.

    The workers of a ``local[...]`` session run the JVM's ``PYSPARK_PYTHON`` (else
    ``PYSPARK_DRIVER_PYTHON``, else ``python3`` on the JVM's ``PATH``). When that is not this
    interpreter, it is asked to import what the data source needs (one short subprocess), before any
    job. Spark Connect sessions and cluster masters are not checked (their workers are elsewhere).

    Args:
        spark: the session ``connect_plugin.install`` was given.

    Raises:
        ConfigError: the workers' Python cannot import the data source; the one-line message names the
            Python, why it was chosen and what to set.

    Example: ``check_local_workers(SparkSession.builder.master("local[2]").getOrCreate())``
    """
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return
    context = spark.sparkContext
    if not str(context.master).startswith("local"):
        return
    getenv = context._jvm.System.getenv  # type: ignore[union-attr]
    python, why = _worker_python(getenv)
    if python is not None and os.path.abspath(python) == os.path.abspath(sys.executable):
        return
    problem = _cannot_import(python, getenv("PATH"))
    if problem is None:
        return
    raise ConfigError(
        f"this local Spark session's Python workers run {python or 'python3'} ({why}), which {problem}, so "
        f"format('indextables') cannot work: start the session with connect_plugin.local_session(), or set "
        f"PYSPARK_PYTHON={sys.executable} in the environment before the session starts (or activate the venv)"
    )


def _worker_python(getenv: Callable[[str], Any]) -> tuple[str | None, str]:
    """(the executable the JVM starts Python workers with, resolved on its PATH; how it was chosen)."""
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        value = getenv(name)
        if value:
            return shutil.which(str(value), path=getenv("PATH")) or str(value), f"{name}={value}"
    return shutil.which("python3", path=getenv("PATH")), "PYSPARK_PYTHON is not set: python3 on PATH"


def _cannot_import(python: str | None, path: str | None) -> str | None:
    """Why ``python`` cannot run the data source (``None``: it can)."""
    if python is None:
        return "is not on the PATH"
    env = {**os.environ, **({"PATH": path} if path else {})}
    try:
        done = subprocess.run(
            [python, "-c", WORKER_IMPORTS], env=env, capture_output=True, text=True, timeout=120, check=False
        )
    except OSError as e:
        return f"cannot be started ({e.strerror})"
    except subprocess.TimeoutExpired:
        return "did not import the data source within 120 s"
    if done.returncode == 0:
        return None
    lines = done.stderr.strip().splitlines()
    return f"cannot import the data source ({lines[-1] if lines else f'exit code {done.returncode}'})"


def use_worker_daemon(spark: SparkSession) -> bool:
    """Make a classic ``local[...]`` session's Python workers start from ``DAEMON_MODULE`` from now on,
    unless the session sets ``spark.python.daemon.module`` itself or this Python lacks the module
    (a Spark Connect session or a cluster master is left as it is: its setting is the server's).

    Local executors share the driver's live ``SparkConf``, read each time a task asks for a worker;
    workers forked before keep running under PySpark's daemon until they end.

    Returns:
        whether the session now uses the daemon module (set here or before).

    Example: ``use_worker_daemon(SparkSession.builder.master("local[2]").getOrCreate())`` -> True
    """
    import importlib.util

    if type(spark).__module__.startswith("pyspark.sql.connect") or not str(spark.sparkContext.master).startswith(
        "local"
    ):
        return False
    live = spark.sparkContext._jsc.sc().conf()
    ((key, module),) = DAEMON_CONF.items()
    if live.contains(key):
        return str(live.get(key)) == module
    if importlib.util.find_spec(module) is None:
        return False
    live.set(key, module)
    return True


def quiet_conf() -> dict[str, str]:
    """The configuration that points the driver JVM's log4j2 at ``LOG4J2_CONFIG``."""
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"}


def quiet_local_session(conf: Mapping[str, str], master: str = "local[2]") -> SparkSession:
    """A classic ``SparkSession`` on ``master`` with ``conf`` (plus ``quiet_conf()``), without Spark's
    start-up noise on stderr; ``PYSPARK_PYTHON`` defaults to this interpreter.

    The JVM settings (log4j2, ``spark.driver.*``) apply only if this call starts the JVM, i.e. no
    SparkContext was started before in this process; a later call reuses that JVM.

    Example: ``quiet_local_session({"spark.driver.memory": "4g"})``
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    settings = {**conf, **quiet_conf()}
    if SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        from pyspark.java_gateway import launch_gateway

        spark_conf = SparkConf().setMaster(master).setAll(list(settings.items()))
        gateway = _retrying_launch(lambda: launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE}))  # type: ignore[no-untyped-call]
        forward_stderr(gateway.proc.stderr)
        SparkContext(conf=spark_conf, gateway=gateway)
    builder = SparkSession.builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def get_or_create_retrying(builder: Any, attempts: int = 3) -> Any:
    """``builder.getOrCreate()``, trying again when the JVM exits before it starts (PySpark's
    ``JAVA_GATEWAY_EXITED``). The full test suite saw this twice on a busy 2-core machine: the
    launching ``spark-submit`` exited silently with nothing on stderr (cause not found; a signal
    from another process is suspected), and the next launch in the same process worked.

    Example: ``get_or_create_retrying(SparkSession.builder.master("local[2]"))``
    """
    return _retrying_launch(builder.getOrCreate, attempts)


def _retrying_launch(launch: Callable[[], Any], attempts: int = 3) -> Any:
    from pyspark.errors import PySparkRuntimeError

    for attempt in range(1, attempts):
        try:
            return launch()
        except PySparkRuntimeError as e:
            if "JAVA_GATEWAY_EXITED" not in str(e):
                raise
            print(f"spark-submit exited before the JVM started (attempt {attempt}); starting it again", file=sys.stderr)
    return launch()


def forward_stderr(pipe: IO[bytes]) -> threading.Thread:
    """Copy ``pipe`` to this process's stderr (file descriptor 2, where the JVM's stderr would have
    gone) line by line on a daemon thread, leaving out the lines in ``JVM_NOTICES``.

    Example: ``forward_stderr(gateway.proc.stderr)``
    """

    def copy() -> None:
        with pipe:
            for line in pipe:
                if line.rstrip(b"\r\n") not in JVM_NOTICES:
                    os.write(2, line)

    thread = threading.Thread(target=copy, name="spark-jvm-stderr", daemon=True)
    thread.start()
    return thread
