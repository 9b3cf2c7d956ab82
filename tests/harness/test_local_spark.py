"""The benchmarks' local session (``bench.spark_benchmark.local_session``, built by
``harness.local_spark.quiet_local_session``) in a process of its own, as ``python -m bench`` has it
(the JVM settings apply only to the JVM a process starts): none of Spark's start-up noise on
stderr, while a real log4j warning and a Python worker's error still show."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Lines a plain local session printed on stderr before doing any work (issue 22).
SPARK_NOISE = (
    "Using incubator modules",
    "Using Spark's default log4j profile",
    "resolves to a loopback address",
    "NativeCodeLoader",
    "replaced a statically registered",
    "replaced a previously registered",
    "Setting default log level",
    "does not yet fully support pandas",
)

JOB = textwrap.dedent("""
    import sys
    from bench.spark_benchmark import local_session

    def job(spark):
        spark.range(3).write.mode("overwrite").format("indextables").save(sys.argv[1])
        print("rows", spark.read.format("indextables").load(sys.argv[1]).count())
        print("max heap MB", spark._jvm.java.lang.Runtime.getRuntime().maxMemory() // 2**20)
        spark._jvm.org.apache.logging.log4j.LogManager.getLogger("indextables.test").warn("a real warning")
        try:
            spark.range(1).rdd.map(lambda x: 1 // 0).collect()
        except Exception:
            print("worker error raised")

    with local_session(None, "indextables-test-local-session-") as (spark, work):
        job(spark)
""")


def test_bench_session_prints_warnings_and_errors_but_no_start_up_noise(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_", "INDEXTABLES_"))}
    done = subprocess.run(
        [sys.executable, "-c", JOB, str(tmp_path / "t")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "rows 3" in lines and "worker error raised" in lines
    heap_mb = int(next(line for line in lines if line.startswith("max heap MB")).split()[-1])
    assert heap_mb > 2048  # local_session's spark.driver.memory=4g reached spark-submit
    assert [n for n in SPARK_NOISE if n in done.stderr] == [], done.stderr
    assert "WARN test: a real warning" in done.stderr  # log4j warnings still reach stderr
    assert "ZeroDivisionError" in done.stderr  # and so does a task's error with the worker's traceback
