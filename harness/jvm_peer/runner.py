"""The JVM peer's process: one PySpark 3.5 session with IndexTables4Spark's shaded jar, driven by JSON jobs.

Run by ``harness.jvm_peer.client.JvmPeer`` with the peer's own virtualenv (``scripts/jvm-peer.sh``)::

    python runner.py --work DIR [--jar JAR] [--conf key=value ...]

It imports only the standard library, PySpark 3.5 and pyarrow (never this project's packages: they
need Python and Spark versions of their own). Protocol: one JSON job per line on stdin, one JSON answer
per line on stdout; everything else the process or its JVM prints goes to stderr. The first answer
says the session is ready (or why it could not start). Jobs (``op``):

- ``write``: rows from the Parquet file ``input`` (``schema``: an optional DDL string to read it with)
  written with ``format``, ``mode``, ``options``, ``partition_by`` to ``path``;
- ``sql``: run ``sql``; the result rows as an Arrow IPC file;
- ``read``: load ``path`` with ``format`` and ``options``, then ``filter`` (a SQL expression, so
  ``indexquery`` works through the extension) and ``select`` (SQL expressions); the rows as an Arrow
  IPC file;
- ``view``: load ``path`` as the temporary view ``name`` (for SQL over it);
- ``conf``: set runtime settings ``set`` on the session;
- ``stop``: answer and stop the session.

Results are written by Spark as one Parquet file (microsecond timestamps, UTC) and turned into an
Arrow IPC file here, so nested types survive the way Spark itself stores them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import traceback
import uuid
from typing import Any

EXTENSIONS = "io.indextables.extensions.IndexTablesSparkExtensions"


def session_conf(work: str, jar: str | None) -> dict[str, str]:
    """The session settings: Spark on 127.0.0.1, UTC, every temporary and cache directory under ``work``;
    with the jar, IndexTables4Spark's extensions and the settings a second implementation beside it needs."""
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp, exist_ok=True)
    conf = {
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "2g",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.local.dir": os.path.join(work, "spark-local"),
        # the native library is extracted to java.io.tmpdir (tantivy4java core/Tantivy.java)
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={tmp}",
        "spark.sql.warehouse.dir": os.path.join(work, "warehouse"),
        # results: one Parquet file with microsecond UTC timestamps (not INT96)
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    }
    if jar:
        conf.update(
            {
                "spark.jars": jar,
                "spark.sql.extensions": EXTENSIONS,
                # without a pushed LIMIT each split returns at most 250 rows, silently
                # (core/SplitReaderContext.scala computeEffectiveLimit: defaultLimit, else 250)
                "spark.indextables.read.defaultLimit": "2147483647",
                # the other implementation writes the same log: never answer from a cached one
                "spark.indextables.transaction.cache.enabled": "false",
                "spark.indextables.cache.disk.enabled": "false",
                "spark.indextables.indexWriter.tempDirectoryPath": os.path.join(work, "it-index"),
                "spark.indextables.merge.tempDirectoryPath": os.path.join(work, "it-merge"),
                "spark.indextables.cache.directoryPath": os.path.join(work, "it-cache"),
            }
        )
    return conf


def build_session(work: str, jar: str | None, extra: dict[str, str]) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("indextables-jvm-peer")
    for key, value in {**session_conf(work, jar), **extra}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def check_extensions(spark: Any) -> None:
    """Spark only logs a warning when an extension class cannot be loaded; the extension injects
    IndexTables4SparkSqlParser (extensions/IndexTables4SparkExtensions.scala), so that must be the parser."""
    spark.sparkContext._jvm.org.apache.spark.util.Utils.classForName(EXTENSIONS, True, False)
    parser = spark._jsparkSession.sessionState().sqlParser().getClass().getName()
    if "IndexTables4SparkSqlParser" not in parser:
        raise RuntimeError(f"{EXTENSIONS} is not active: the session's SQL parser is {parser}")
    spark.sql("SELECT 1").collect()


def to_arrow_file(df: Any, work: str) -> dict[str, Any]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = uuid.uuid4().hex
    staging = os.path.join(work, "results", name)
    df.coalesce(1).write.mode("overwrite").parquet(staging)
    files = sorted(f for f in os.listdir(staging) if f.endswith(".parquet"))
    if files:
        table = pa.concat_tables([pq.read_table(os.path.join(staging, f)) for f in files])
    else:  # no rows and no file: the schema alone
        table = pa.Table.from_pylist([], schema=_arrow_schema(df.schema))
    out = os.path.join(work, "results", f"{name}.arrow")
    with pa.OSFile(out, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    shutil.rmtree(staging, ignore_errors=True)
    return {"arrow": out, "num_rows": table.num_rows}


def _arrow_schema(schema: Any) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


def _writer(df: Any, job: dict[str, Any], mode: str) -> Any:
    """``df.write`` in the job's format and options, with ``mode``."""
    writer = df.write.format(job["format"]).mode(mode)
    for key, value in (job.get("options") or {}).items():
        writer = writer.option(key, value)
    return writer


def op_write(spark: Any, job: dict[str, Any], work: str) -> dict[str, Any]:
    reader = spark.read
    if job.get("schema"):
        reader = reader.schema(job["schema"])
    df = reader.parquet(job["input"])
    if job.get("repartition"):
        df = df.repartition(int(job["repartition"]))
    writer = _writer(df, job, job.get("mode", "append"))
    if job.get("partition_by"):
        writer = writer.partitionBy(*job["partition_by"])
    writer.save(job["path"])
    return {}


def op_sql(spark: Any, job: dict[str, Any], work: str) -> dict[str, Any]:
    return to_arrow_file(spark.sql(job["sql"]), work)


def op_read(spark: Any, job: dict[str, Any], work: str) -> dict[str, Any]:
    reader = spark.read.format(job["format"])
    for key, value in (job.get("options") or {}).items():
        reader = reader.option(key, value)
    df = reader.load(job["path"])
    if job.get("filter"):
        df = df.filter(job["filter"])
    if job.get("select"):
        df = df.selectExpr(*job["select"])
    return to_arrow_file(df, work)


def op_view(spark: Any, job: dict[str, Any], work: str) -> dict[str, Any]:
    reader = spark.read.format(job["format"])
    for key, value in (job.get("options") or {}).items():
        reader = reader.option(key, value)
    reader.load(job["path"]).createOrReplaceTempView(job["name"])
    return {}


def op_conf(spark: Any, job: dict[str, Any], work: str) -> dict[str, Any]:
    for key, value in (job.get("set") or {}).items():
        spark.conf.set(key, value)
    return {}


def op_ingest(spark: Any, job: dict[str, Any], work: str) -> dict[str, Any]:
    """Timed writes (``mode("overwrite")``) of a Parquet input's rows, cached first in ``partitions``
    partitions: the best of ``repeat`` in seconds, and the number of rows."""
    df = spark.read.parquet(job["input"]).repartition(int(job["partitions"])).cache()
    try:
        rows = df.count()
        best = float("inf")
        for _ in range(int(job.get("repeat", 1))):
            writer = _writer(df, job, "overwrite")
            start = time.perf_counter()
            writer.save(job["path"])
            best = min(best, time.perf_counter() - start)
    finally:
        df.unpersist()
    return {"seconds": best, "rows": rows}


OPS = {"write": op_write, "sql": op_sql, "read": op_read, "view": op_view, "conf": op_conf, "ingest": op_ingest}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", required=True)
    parser.add_argument("--jar")
    parser.add_argument("--conf", action="append", default=[], help="key=value")
    args = parser.parse_args(argv)
    # The protocol keeps the real stdout; anything the JVM or Spark prints goes to stderr.
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def answer(message: dict[str, Any]) -> None:
        proto.write(json.dumps(message) + "\n")
        proto.flush()

    extra = dict(kv.split("=", 1) for kv in args.conf)
    started = time.monotonic()
    try:
        spark = build_session(args.work, args.jar, extra)
        if args.jar:  # the jar is loaded and its parser is the session's: fail here, not in the first job
            check_extensions(spark)
    except Exception as e:
        error = "\n".join(f"{type(e).__name__}: {e}".splitlines()[:12])
        answer({"ok": False, "error": f"the PySpark 3.5 session did not start: {error}"})
        return 1
    answer(
        {
            "ok": True,
            "ready": True,
            "spark": spark.version,
            "jar": args.jar,
            "pid": os.getpid(),
            "startup_s": round(time.monotonic() - started, 3),
        }
    )
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        if job.get("op") == "stop":
            answer({"ok": True})
            break
        t0 = time.monotonic()
        try:
            handler = OPS[job["op"]]
            result = {"ok": True, **handler(spark, job, args.work)}
        except Exception as e:
            error = "\n".join(f"{type(e).__name__}: {e}".splitlines()[:40])  # a JVM error's stack, cut
            result = {"ok": False, "error": error, "traceback": traceback.format_exc()[-4000:]}
        result["elapsed_s"] = round(time.monotonic() - t0, 3)
        answer(result)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
