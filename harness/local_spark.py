"""A local classic Spark session that prints Spark's warnings and errors but not its start-up noise.

``quiet_local_session(conf)`` is what the benchmarks run on. A plain ``SparkSession.builder``
session prints on stderr, before any work: Spark's "default log4j profile" lines, a warning that
the hostname resolves to a loopback address, Hadoop's NativeCodeLoader warning, the JVM's
"Using incubator modules" notice (Spark's launcher always passes
``--add-modules=jdk.incubator.vector``, and the JVM has no switch to silence the notice) and,
because ``connect_plugin.install`` registers the data source on top of its static registration,
"replaced a statically registered data source". Here:

* the driver JVM gets ``log4j2-local.properties`` (Spark's default layout, WARN and above; Hadoop's
  NativeCodeLoader and Spark's DataSourceManager log only errors);
* ``SPARK_LOCAL_IP`` defaults to 127.0.0.1, the address a local[N] session works on anyway;
* when this call starts the JVM, its stderr is forwarded line by line, except the one
  incubator-modules notice, so every other JVM line (log4j WARN/ERROR, Python worker
  tracebacks) still reaches stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

LOG4J2_CONFIG = Path(__file__).resolve().with_name("log4j2-local.properties")

# Exact lines the JVM prints on stderr by itself that carry nothing a user can act on.
JVM_NOTICES = frozenset({b"WARNING: Using incubator modules: jdk.incubator.vector"})


def quiet_conf() -> dict[str, str]:
    """The configuration that points the driver JVM's log4j2 at ``LOG4J2_CONFIG``."""
    return {"spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}"}


def quiet_local_session(conf: dict[str, str], master: str = "local[2]") -> Any:
    """A classic ``SparkSession`` on ``master`` with ``conf`` (plus ``quiet_conf()``).

    The JVM settings (log4j2, ``spark.driver.*``) apply only if this call starts the JVM, i.e.
    no SparkContext was started before in this process; a later call reuses that JVM.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    settings = {**conf, **quiet_conf()}
    if SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        from pyspark.java_gateway import launch_gateway

        spark_conf = SparkConf().setMaster(master).setAll(list(settings.items()))
        gateway = _retrying_launch(lambda: launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE}))
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
    from another process is suspected), and the next launch in the same process worked."""
    return _retrying_launch(builder.getOrCreate, attempts)


def _retrying_launch(launch: Callable[[], Any], attempts: int = 3) -> Any:
    from pyspark.errors import PySparkRuntimeError

    for attempt in range(1, attempts):
        try:
            return launch()
        except PySparkRuntimeError as e:
            if "JAVA_GATEWAY_EXITED" not in str(e):
                raise
            print(f"spark-submit exited before the JVM started (attempt {attempt}); starting it again",
                  file=sys.stderr)  # fmt: skip
    return launch()


def forward_stderr(pipe: IO[bytes]) -> threading.Thread:
    """Copy ``pipe`` to this process's stderr (file descriptor 2, where the JVM's stderr would have
    gone) line by line on a daemon thread, leaving out the lines in ``JVM_NOTICES``."""

    def copy() -> None:
        with pipe:
            for line in pipe:
                if line.rstrip(b"\r\n") not in JVM_NOTICES:
                    os.write(2, line)

    thread = threading.Thread(target=copy, name="spark-jvm-stderr", daemon=True)
    thread.start()
    return thread
