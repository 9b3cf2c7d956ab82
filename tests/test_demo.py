"""The main job (``indextables_demo.run``) at a tiny size on the shared Spark Connect session, and
its command line's argument errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

import executor_lib
from indextables_demo import corpus, run
from indextables_demo.__main__ import parse_args


def test_demo_job_end_to_end(connect_spark: Any, tmp_path: Path) -> None:
    table, parquet = str(tmp_path / "logs"), str(tmp_path / "logs-parquet")
    lines: list[str] = []
    report = run(connect_spark, table, rows=20_000, parquet=parquet, days=2, repeat=1, out=lines.append)

    # every example search found the same rows on the index as Spark on Parquet
    assert len(report.queries) == 5
    assert all(q.hits == q.parquet_hits and q.parquet_s is not None for q in report.queries)
    # ... and the rare word's count agrees with pyarrow reading the Parquet files itself
    messages = ds.dataset(parquet, format="parquet", partitioning="hive").to_table(columns=["message", "level"])
    needle = report.queries[0]
    assert needle.hits == pc.sum(pc.match_substring(messages["message"], corpus.NEEDLE)).as_py() > 0
    assert 0 < report.queries[-1].hits < 20_000  # the broad query is not everything
    # the aggregation's counts per level are the data's
    levels = messages["level"].value_counts().to_pylist()
    assert {k: n for k, (n, _) in report.levels.items()} == {d["values"]: d["counts"] for d in levels}

    # the report's numbers are the table's
    snap = executor_lib.open_log(table).snapshot()
    assert snap.num_records == 20_000
    assert (report.state["version"], report.state["numFiles"], report.state["numRecords"]) == (
        snap.version,
        len(snap.files),
        snap.num_records,
    )
    assert report.state["sizeInBytes"] == snap.size_in_bytes
    assert {f.partition_values["day"] for f in snap.files} == {"2024-05-01", "2024-05-02"}
    # one append per day, then the merge: fewer splits, same rows
    assert report.splits_after_merge == len(snap.files) < report.splits_before_merge
    operations = [e.operation for e in executor_lib.open_log(table).history()]
    assert operations[0] == "MERGE SPLITS" and len(operations) == 1 + 2 + 1  # create, a write per day, merge
    assert report.purge_candidates == 0  # nothing is older than the 24-hour minimum

    text = report.format()
    assert table in text and "20,000 rows" in text and "speed-up" in text
    assert any("rows indexed so far" in line for line in lines)
    assert any(corpus.NEEDLE in line and "first hits" in line for line in lines)
    json.loads(report.to_json())


def test_demo_job_without_baseline(connect_spark: Any, tmp_path: Path) -> None:
    report = run(connect_spark, str(tmp_path / "t"), rows=2_000, days=1, repeat=1, out=lambda _: None)
    assert report.parquet is None and all(q.parquet_s is None for q in report.queries)
    assert report.state["numRecords"] == 2_000 and report.overall_speedup is None
    assert "speed-up   " not in report.format()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rows", "0"], "--rows must be at least 1"),
        (["--remote", "http://x:1"], "--remote must be a Spark Connect URL"),
        (["--table", "hdfs://b/t"], "--table must be a local path"),
        (["-o", "endpoint_url"], "-o/--option 'endpoint_url' must look like key=value"),
        (["--parquet", "/x", "--no-baseline"], "--parquet and --no-baseline"),
    ],
)
def test_demo_flags_are_checked(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        parse_args(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_demo_options_parse() -> None:
    args = parse_args(["--table", "s3://bucket/logs", "-o", "endpoint_url=http://127.0.0.1:9000", "-o", "a=b=c"])
    assert args.options == {"endpoint_url": "http://127.0.0.1:9000", "a": "b=c"}
    args = parse_args(["--table", "gs://bucket/logs", "-o", "spark.indextables.gcs.endpoint=http://127.0.0.1:4443"])
    assert args.table == "gs://bucket/logs" and args.options == {
        "spark.indextables.gcs.endpoint": "http://127.0.0.1:4443"
    }


def test_report_end_lines_are_pasteable_and_explain_only_what_applies(tmp_path: Path) -> None:
    import shlex
    import subprocess
    import sys

    from indextables_demo.report import QueryResult, Report

    report = Report(table=str(tmp_path / "my logs"), rows=200_000, merged_splits=8, spark_ui="http://127.0.0.1:4040")
    report.queries = [QueryResult("q", "w", "b", 1, 0.5, parquet_s=0.4, parquet_hits=1)]
    text = report.format()
    assert "Spark UI" not in text and "4040" not in text  # the server stops right after the report
    assert "the ratios grow with --rows" in text
    assert "younger than the 24-hour minimum" in text
    command = next(line for line in text.splitlines() if "inspect it with:" in line).split("inspect it with: ")[1]
    argv = shlex.split(command)
    assert argv[0] == "indextables" or Path(argv[0]).is_file()
    executor_lib.create_table(str(tmp_path / "my logs"), pa.schema([("id", pa.int64())]))
    if argv[0] == "indextables":  # no script beside this interpreter: run the same entry point
        argv = [sys.executable, "-m", "executor_lib.cli", *argv[1:]]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "version" in done.stdout, done.stderr

    report.rows, report.purge_candidates = 2_000_000, 3
    text = report.format()
    assert "the ratios grow" not in text and "24-hour" not in text and "3 files to delete" in text


# What a new user's first run must not show on stderr (issue 22): tool banners and Spark's noise.
TOOL_NOISE = (
    "editable install",  # setuptools' compat-mode banner
    "SetuptoolsDeprecationWarning",
    "does not yet fully support pandas",  # PySpark with pandas >= 3
    "FutureWarning",
    "UserWarning",
    "Using incubator modules",
    "NativeCodeLoader",
    "resolves to a loopback",
    "replaced a statically registered",
    "log4j",
)


def test_the_demo_command_prints_a_report_and_nothing_on_stderr(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "INDEXTABLES_DEMO_TABLE")}
    argv = [sys.executable, "-m", "indextables_demo", "--rows", "2000", "--days", "1", "--repeat", "1", "--no-baseline"]
    done = subprocess.run(
        argv,
        cwd=Path(__file__).resolve().parents[1],
        env={**env, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "IndexTables demo: report" in done.stdout and "2,000 rows" in done.stdout
    assert [n for n in TOOL_NOISE if n.lower() in done.stderr.lower()] == [], done.stderr
    assert done.stderr == ""


def test_report_sizes_use_the_units_they_name() -> None:
    """``MB`` is 10**6 bytes: the issue-34 run printed 357,731,571 bytes as ``341.2 MB`` (MiB)."""
    from indextables_demo.report import _bytes

    assert _bytes(357_731_571) == "357.7 MB"
    assert (_bytes(999), _bytes(1_500), _bytes(2_500_000_000)) == ("999 B", "1.5 kB", "2.5 GB")


def test_the_inspect_hint_of_an_s3_table_runs_as_printed(moto_server: Any) -> None:
    """The report's ``inspect it with:`` line carries the job's storage options (it printed a literal
    ``-o ...``), leaves out those the command does not take and the credentials (named on the next
    line; here they come from the environment, as the AWS variables the tests set), and runs as is."""
    import shlex
    import subprocess
    import sys
    import uuid

    from executor_lib.cli import build_parser
    from indextables_demo.report import Report, cli_options
    from tests.conftest import BUCKET, s3_options

    table = f"s3://{BUCKET}/demo-hint-{uuid.uuid4().hex[:8]}/logs"
    storage = s3_options(moto_server)
    executor_lib.create_table(table, pa.schema([("id", pa.int64())]), **storage)
    job_options = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in storage.items()}
    job_options["spark.indextables.indexing.typemap.message"] = "text"  # a write option: not the command's
    report = Report(table=table, rows=10)
    report.cli_options, report.hidden_options = cli_options(job_options)
    lines = report.format().splitlines()
    at = next(i for i, line in enumerate(lines) if "inspect it with:" in line)
    argv = shlex.split(lines[at].split("inspect it with: ")[1])
    assert "..." not in argv and "testing" not in " ".join(argv)
    args = build_parser().parse_args(argv[1:])
    assert (args.command, args.table) == ("describe", table)
    assert sorted(args.option) == sorted(
        f"{k}={v}" for k, v in job_options.items() if k in ("endpoint_url", "region", "path_style")
    )
    assert "-o access_key_id=... -o secret_access_key=..." in lines[at + 1]
    if argv[0] == "indextables":  # no script beside this interpreter: run the same entry point
        argv = [sys.executable, "-m", "executor_lib.cli", *argv[1:]]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and "version" in done.stdout, done.stderr
