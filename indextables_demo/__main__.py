"""``python -m indextables_demo``: the main job, end to end.

    python -m indextables_demo [--rows N] [--days D] [--remote sc://host:port] [--table PATH_OR_S3_URI]
                               [--parquet PATH | --no-baseline] [-o key=value ...] [--keep]

By default it starts a local Spark Connect server (``local[2]``, stopped at the end, also on
errors and Ctrl-C), writes the table and its Parquet baseline under a new temporary directory
(removed at the end unless ``--keep``) and prints a report. ``--remote`` (or ``SPARK_REMOTE``)
uses an existing Spark Connect server instead, ``--table`` (or ``INDEXTABLES_DEMO_TABLE``) any
table location the cluster can write, e.g. ``s3://bucket/logs`` with ``-o`` storage options.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from indextables_demo.job import DemoError, run

DESCRIPTION = """The IndexTables main job: generated application logs indexed into an IndexTables table
with Spark, searched with indexquery, aggregated, merged and purged, with the same searches on
Parquet (contains/rlike) timed beside them; ends with a report.

By default: a local Spark Connect server (local[2]) and a table in a temporary directory."""

SERVER_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "2g",
    "spark.sql.session.timeZone": "UTC",
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m indextables_demo",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--rows", type=int, default=1_000_000, help="log rows to generate (default 1,000,000)")
    p.add_argument("--days", type=int, default=4, help="days of logs = day partitions (default 4)")
    p.add_argument(
        "--remote",
        default=os.environ.get("SPARK_REMOTE"),
        help="sc://host:port of a Spark Connect server (default: start a local one; env SPARK_REMOTE)",
    )
    p.add_argument("--master", default="local[2]", help="master of the local server (default local[2])")
    p.add_argument(
        "--table",
        default=os.environ.get("INDEXTABLES_DEMO_TABLE"),
        help="table path, s3:// or gs:// URI; overwritten (default: a new temporary directory)",
    )
    p.add_argument("--parquet", default=None, help="where the Parquet baseline goes (default: temporary directory)")
    p.add_argument("--no-baseline", action="store_true", help="skip the Parquet baseline and the comparisons")
    p.add_argument(
        "-o",
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="storage or IndexTables option for the table, e.g. -o endpoint_url=http://127.0.0.1:9000",
    )
    p.add_argument("--repeat", type=int, default=2, help="runs per timed query; the best counts (default 2)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (table and Parquet)")
    p.add_argument("--traceback", action="store_true", help="on errors, show the whole traceback")
    args = p.parse_args(argv)
    _validate(p, args)
    return args


def _validate(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for flag in ("rows", "days", "repeat"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} must be at least 1, not {getattr(args, flag)}")
    if args.remote and not args.remote.startswith("sc://"):
        p.error(f"--remote must be a Spark Connect URL like sc://host:15002, not {args.remote!r}")
    if args.table and "://" in args.table and not re.match(r"(file|s3a?|gs)://", args.table):
        p.error(f"--table must be a local path, file://, s3://, s3a:// or gs:// URI, not {args.table!r}")
    if args.parquet and args.no_baseline:
        p.error("--parquet and --no-baseline exclude each other")
    args.options = {}
    for pair in args.option:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            p.error(f"-o/--option {pair!r} must look like key=value")
        args.options[key] = value


def spark_ui_url(log_dir: Path) -> str | None:
    """The Spark UI address the local server logged (Spark picks the next free port after 4040)."""
    for log in sorted(log_dir.glob("*.out")):
        match = re.search(r"started service 'SparkUI' on port (\d+)", log.read_text(errors="replace"))
        if match:
            return f"http://127.0.0.1:{match.group(1)}"
    return None


def error_summary(e: BaseException) -> str:
    """The root cause of a Spark error in one line: the innermost ``SomethingError: ...`` it quotes
    (e.g. the ConfigError naming a bad ``-o`` option raised in a Python worker), else its first line."""
    text = str(e)
    causes = re.findall(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)): (.+)$", text, flags=re.MULTILINE)
    if causes:
        kind, message = causes[-1]
        return f"{message} ({kind})"
    return f"{type(e).__name__}: {text.strip().splitlines()[0] if text.strip() else ''}"


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwind, so the local server is stopped


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    work = Path(tempfile.mkdtemp(prefix="indextables-demo-"))
    table = args.table or str(work / "logs")
    parquet = None if args.no_baseline else (args.parquet or str(work / "logs-parquet"))
    server, spark = None, None
    try:
        from pyspark.sql import SparkSession

        if args.remote:
            url, ui = args.remote, None
        else:
            from executor_lib.spark.connect_server import ConnectServer

            print(f"starting a local Spark Connect server ({args.master}) ...")
            server = ConnectServer(master=args.master, conf=SERVER_CONF).start()
            url, ui = server.url, spark_ui_url(server.work / "logs")
        print(f"Spark Connect: {url}; Spark UI: {ui or 'see the Spark server log'} (while the job runs)")
        spark = SparkSession.builder.remote(url).getOrCreate()
        report = run(spark, table, args.rows, parquet=parquet, days=args.days, options=args.options, repeat=args.repeat)
        report.spark_ui = ui
        report.table_kept = args.keep or args.table is not None
        print(report.format())
        return 0
    except (DemoError, ValueError) as e:
        print(f"indextables_demo: error: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        if args.traceback:
            raise
        print(f"indextables_demo: error: {error_summary(e)}\n(--traceback shows the whole error)", file=sys.stderr)
        return 1
    finally:
        _shutdown(spark, server, work, args.keep)


def _shutdown(spark: Any, server: Any, work: Path, keep: bool) -> None:
    if spark is not None:
        try:
            spark.stop()
        except Exception as e:  # the server may already be gone
            print(f"indextables_demo: stopping the Spark session: {e}", file=sys.stderr)
    if server is not None:
        print("stopping the local Spark Connect server ...")
        server.stop()
        if not keep:
            shutil.rmtree(server.work, ignore_errors=True)
    if keep:
        print(f"kept: {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
