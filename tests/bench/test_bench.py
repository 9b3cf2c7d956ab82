"""``python -m bench`` at tiny sizes (no timings are asserted): the state suite on its own, the Spark
suites together in one process (one Python and PySpark start-up for all of them, as a full run has)."""

from __future__ import annotations

import fcntl
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.__main__ import main

REPO = Path(__file__).resolve().parents[2]


def _bench(argv: list[str]) -> str:
    """``python -m bench argv`` in a process of its own (the Spark benchmarks start and stop a local
    session of their own, which must not be this test process's shared one); its standard output."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", *argv], cwd=REPO, capture_output=True, text=True, timeout=900, check=False
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


SPARK_SUITES = {
    "analytics": ["--analytics-rows", "20000"],
    "spark": ["--spark-rows", "20000"],
    "limits": ["--limits-rows", "3000"],
    "hits": ["--hits-rows", "30000"],
    "compaction": ["--compaction-rows", "16000"],
    "ingest": ["--ingest-rows", "20000"],
    "storage": ["--storage-rows", "5000"],
}


# The shared run takes about 6 minutes on 2 cores (350 s on a quiet machine, measured 2026-11-29): over
# the suite's 300 s default, so each test that may be the one to start it waits longer.
SPARK_SUITES_TIMEOUT = 1200


@pytest.fixture(scope="module")
def spark_suites(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> tuple[dict[str, Any], str]:
    """One ``python -m bench --quick`` of every Spark suite at a tiny size: its JSON document and its
    output. A suite that fails is listed in ``failed`` (the others still run), so each test below checks
    its own suite. Under xdist the run is shared: the first worker runs it under a file lock, the
    other reads what it wrote."""
    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    out, log = shared / "bench-spark-suites.json", shared / "bench-spark-suites.out"
    with open(shared / "bench-spark-suites.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not log.is_file():
            argv = ["--quick", "--only", ",".join(SPARK_SUITES), "--out", str(out)]
            command = [sys.executable, "-m", "bench", *argv, *(a for sizes in SPARK_SUITES.values() for a in sizes)]
            try:
                done = subprocess.run(
                    command, cwd=REPO, capture_output=True, text=True, timeout=SPARK_SUITES_TIMEOUT - 60, check=False
                )
                log.write_text(done.stdout + done.stderr)
            except subprocess.TimeoutExpired as e:  # written all the same: the other tests read it, not run it again
                log.write_text(f"{_text(e.stdout)}{_text(e.stderr)}\nthe run took over {e.timeout:.0f} s")
    printed = log.read_text()
    assert out.is_file(), printed[-5000:]
    return json.loads(out.read_text()), printed


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def _suite(run: tuple[dict[str, Any], str], name: str) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """One suite of the shared run: its results, its ratio rows, and the run's output (the suite's
    traceback is in it when it failed)."""
    doc, printed = run
    assert name not in doc["failed"] and name in doc["results"], printed[-6000:]
    return doc["results"][name], [r for r in doc["ratios"] if r["suite"] == name], printed


@pytest.mark.slow  # about 100 s of a CI run (-m slow runs it)
def test_bench_state_at_tiny_sizes(tmp_path: Path) -> None:
    out, png = tmp_path / "bench.json", tmp_path / "png"
    argv = ["--quick", "--only", "state", "--state-sizes", "100", "300", "--out", str(out), "--png", str(png)]
    printed = _bench(argv)
    doc = json.loads(out.read_text())
    assert doc["failed"] == [] and set(doc["results"]) == {"state"}
    names = [r["name"] for r in doc["ratios"]]
    assert (
        len(names) == 16
        and "SELECT count(*) through Spark, 300 files, vs 1.5 s target" in names
        and "warm snapshot load, 300 files: Avro state vs JSON checkpoint" in names
    )
    assert all(r["ratio"] > 0 for r in doc["ratios"])
    assert doc["results"]["state"]["pruning"]["manifestsRead"] < doc["results"]["state"]["pruning"]["manifestsTotal"]
    assert "warm snapshot load" in printed and "met?" in printed
    if importlib.util.find_spec("matplotlib") is None:
        assert "matplotlib is not installed" in printed
    else:
        assert (png / "ratios.png").is_file() and (png / "state.png").is_file()


def test_bench_names_a_bad_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--only", "state,disk"])
    assert "--only: unknown benchmark ['disk']" in capsys.readouterr().err


def test_bench_names_a_hits_size_too_small(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--only", "hits", "--hits-rows", "3"])
    assert "--hits-rows must be at least 10" in capsys.readouterr().err


def test_a_fixed_target_is_labelled_a_goal_not_a_baseline() -> None:
    from bench.__main__ import format_table
    from bench.suite import split_ratios

    results = {
        "indexing": {"rows": 10, "write_split_s": 1.0, "raw_tantivy_s": 1.0, "ratio_vs_raw": 1.0},
        "materialization": {
            "rows_returned": 10,
            "split_rows": 100,
            "rows_per_second": 1_000_000.0,
            "fast_rows_per_second": 3_000_000.0,
        },
        "cold_warm": {"warm_s": 0.1, "cold_s": 0.2, "warm_store_reads": 0, "cold_store_reads": 4},
    }
    ratios = split_ratios(results)
    assert [r.baseline_is_target for r in ratios] == [False, True, True, False, False]
    table = format_table(ratios)
    fast = next(line for line in table.splitlines() if "materialization, fast column id" in line)
    assert "goal 2.00M rows/s" in fast and "2M rows/s goal" in fast and "1.50x" in fast
    every = next(line for line in table.splitlines() if "materialization, every column" in line)
    assert "goal 500.0K rows/s" in every and "500K rows/s goal" in every and "2.00x" in every
    assert "'goal ...': a fixed target, not a measurement" in table


@pytest.mark.xdist_group("bench-spark-suites")  # one worker runs them all: no worker waits on the lock
@pytest.mark.slow  # the shared run of the Spark suites: about 6.5 minutes of a CI run (-m slow runs it)
@pytest.mark.timeout(SPARK_SUITES_TIMEOUT)
def test_bench_analytics_at_a_tiny_size(spark_suites: tuple[dict[str, Any], str]) -> None:
    """The analytics suite runs every statement both ways (it stops if any result differs from
    Parquet's) and prints a goal per row, the floor row included."""
    _, rows, printed = _suite(spark_suites, "analytics")
    for name in ("count(*)", "GROUP BY level count", "indexquery WHERE + GROUP BY level", "trivial-query floor"):
        assert any(name in r["name"] for r in rows) and name in printed
    assert {r["goal"] for r in rows} >= {">= 3", ">= 1", "<= 0.1"}


@pytest.mark.xdist_group("bench-spark-suites")  # one worker runs them all: no worker waits on the lock
@pytest.mark.slow  # the shared run of the Spark suites: about 6.5 minutes of a CI run (-m slow runs it)
@pytest.mark.timeout(SPARK_SUITES_TIMEOUT)
def test_bench_spark_at_a_tiny_size(spark_suites: tuple[dict[str, Any], str]) -> None:
    """The Spark suite checks that the index and Parquet count the same rows (it stops otherwise) and
    prints the selective query's distance to PySpark's floor with its goal."""
    r, rows, _ = _suite(spark_suites, "spark")
    assert any("trivial-query floor" in row["name"] for row in rows)
    assert r["selective_0.1pct"]["rows"] == 20
    assert {row["goal"] for row in rows} >= {">= 10", "<= 0.1"}


@pytest.mark.xdist_group("bench-spark-suites")  # one worker runs them all: no worker waits on the lock
@pytest.mark.slow  # the shared run of the Spark suites: about 6.5 minutes of a CI run (-m slow runs it)
@pytest.mark.timeout(SPARK_SUITES_TIMEOUT)
def test_bench_limits_at_a_tiny_size(spark_suites: tuple[dict[str, Any], str]) -> None:
    """The first-look suite checks every answer (row counts, filtered rows matching their filter; it stops
    otherwise) in a classic and a Spark Connect session, and prints each against its baseline and goal."""
    r, rows, printed = _suite(spark_suites, "limits")
    for name in ("classic limit(1).collect()", "connect show() (20 rows)", "SQL indexquery LIMIT 20"):
        assert name in printed
    assert len(r["connect"]["queries"]) == 5
    assert {row["goal"] for row in rows} == {"<= 0.05", "<= 0.1"}


@pytest.mark.xdist_group("bench-spark-suites")  # one worker runs them all: no worker waits on the lock
@pytest.mark.slow  # the shared run of the Spark suites: about 6.5 minutes of a CI run (-m slow runs it)
@pytest.mark.timeout(SPARK_SUITES_TIMEOUT)
def test_bench_hits_at_a_tiny_size(spark_suites: tuple[dict[str, Any], str]) -> None:
    """The hits suite checks its answers (SELECT id and SELECT * find the phrase's rows Parquet finds;
    it stops otherwise) and prints in-process rows/s, the speed-ups and both floors against their goals."""
    r, rows, printed = _suite(spark_suites, "hits")
    assert r["spark"]["SELECT *"]["hits"] == r["spark"]["SELECT id"]["hits"] == r["materialization"]["hits"] > 0
    assert r["connect"]["rare word"]["hits"] == r["spark"]["rare word"]["hits"] > 0
    assert {row["goal"] for row in rows} - {None} == {">= 1", ">= 8", ">= 5", "<= 0.03", "<= 0.05"}
    assert "seconds over a trivial source returning as many rows" in printed
    assert r["materialization"]["engine_s"] > 0 and "id only vs Tantivy's own search of it" in printed
    assert r["materialization"]["match_s"] > 0 and "id only vs Tantivy matching it (a count" in printed
    assert "SELECT * through Spark vs Parquet" in printed and "Connect rare word" in printed


@pytest.mark.xdist_group("bench-spark-suites")  # one worker runs them all: no worker waits on the lock
@pytest.mark.slow  # the shared run of the Spark suites: about 6.5 minutes of a CI run (-m slow runs it)
@pytest.mark.timeout(SPARK_SUITES_TIMEOUT)
def test_bench_compaction_at_a_tiny_size(spark_suites: tuple[dict[str, Any], str]) -> None:
    """The compaction suite writes a small day of micro-batches twice, merges one table sorted by ts
    and the other size-tiered (it stops if the one-hour query's answers differ) and prints its goals."""
    r, _, printed = _suite(spark_suites, "compaction")
    assert r["fresh"]["count"] == r["sorted"]["count"] == r["size_tiered"]["count"] > 0
    assert r["sorted"]["splits_needed"] < r["fresh"]["splits_needed"]
    assert 1.0 <= r["write_amplification"] <= 2.0
    assert "after MERGE SPLITS SORT BY ts vs unmerged" in printed and "write amplification" in printed


@pytest.mark.xdist_group("bench-spark-suites")  # one worker runs them all: no worker waits on the lock
@pytest.mark.slow  # the shared run of the Spark suites: about 6.5 minutes of a CI run (-m slow runs it)
@pytest.mark.timeout(SPARK_SUITES_TIMEOUT)
def test_bench_ingest_at_a_tiny_size(spark_suites: tuple[dict[str, Any], str]) -> None:
    """The ingest suite writes the same rows as Parquet, as IndexTables (default and narrowed fast
    fields), with raw tantivy-py, in-process through the split writer and with Lance (or why it did
    not run), merges a table of several splits (it stops if rows are lost), prints its goals and
    IndexTables4Spark's rate (or why it did not run)."""
    r, rows, _ = _suite(spark_suites, "ingest")
    kinds = {"parquet", "indextables", "indextables_narrow_fast", "raw_tantivy", "in_process", "lance"}
    assert set(r["rows_per_s"]) == kinds | {"in_process_message_only"} and r["rows_per_s"]["in_process"] > 0
    assert r["rows_per_s"]["in_process_message_only"] > 0
    merged = r["merge_in_process"]  # the executor's merge in a process of its own: its time and peak memory
    assert merged["rows"] == r["rows"] and merged["splits"] == r["splits"] and merged["peak_rss_bytes"] > 2**20
    assert {row["goal"] for row in rows} >= {">= 2", ">= 0.3", ">= 3"}
    assert r["rows_per_s"]["lance"] > 0 if r["lance_skipped"] is None else "pylance" in r["lance_skipped"]
    jvm = r["jvm_peer"]  # IndexTables4Spark's rate beside ours, or why it did not run
    assert jvm["rows_per_s"] > 0 if "rows_per_s" in jvm else jvm["skipped"]
    names = [row["name"] for row in rows]
    assert any("fastfields=ts,level,service,latency_ms" in n for n in names) and "MERGE SPLITS" in names[-1]


@pytest.mark.xdist_group("bench-spark-suites")  # one worker runs them all: no worker waits on the lock
@pytest.mark.slow  # the shared run of the Spark suites: about 6.5 minutes of a CI run (-m slow runs it)
@pytest.mark.timeout(SPARK_SUITES_TIMEOUT)
def test_bench_storage_at_a_tiny_size(spark_suites: tuple[dict[str, Any], str]) -> None:
    """The storage suite starts its own counting S3 server, checks that the index and the Parquet scan
    give the same answers (it stops otherwise), and prints bytes per member, bytes moved cold and the
    warm S3-over-local time with its goal."""
    r, rows, printed = _suite(spark_suites, "storage")
    assert r["bytes"]["split_bytes"] > 0 and r["bytes"]["parquet_bytes"] > 0 and "*.idx" in r["bytes"]["members"]
    assert set(r["cold"]) == {"rare-word search", "phrase search", "aggregate: count per level"}
    assert r["cold"]["rare-word search"]["result"] >= 3
    assert all(c["bytes_moved"] > 0 and c["parquet_bytes_moved"] > 0 for c in r["cold"].values())
    assert {row["goal"] for row in rows} >= {"<= 2", "<= 0.8", "<= 0.05"}
    assert "split bytes per member" in printed and "warm rare-word search" in printed


def test_bench_companion_rows_at_a_tiny_size(tmp_path: Path) -> None:
    """The split suite's companion measurement: a companion split of the same rows is smaller than the
    full split, and both searches find the same rows (the benchmark stops otherwise)."""
    from bench.split_benchmark import companion, make_rows
    from bench.suite import companion_ratios

    r = companion(make_rows(8000), tmp_path)
    assert r["companion_hits"] == r["full_hits"] > 0
    assert 0 < r["companion_split_bytes"] < r["full_split_bytes"] and r["parquet_bytes"] > 0
    names = [x.name for x in companion_ratios(r)]
    assert names[0] == "companion split bytes / full split (8,000 rows)" and len(names) == 4


def test_bench_companion_table_rows_at_a_tiny_size(tmp_path: Path) -> None:
    """The table-level companion measurement: a companion table (fewer, index-only splits) is smaller than
    the full table of the same rows, and both find the same rows through the split cache."""
    from bench.split_benchmark import companion_table, make_rows
    from bench.suite import companion_table_ratios

    r = companion_table(make_rows(8000), tmp_path)
    assert r["companion_hits"] == r["full_hits"] > 0 and r["companion_splits"] == 4 and r["parquet_files"] == 8
    assert 0 < r["companion_table_bytes"] < r["full_table_bytes"] and r["parquet_bytes"] > 0
    assert r["companion_cold_s"] > 0 and r["companion_warm_s"] > 0
    names = [x.name for x in companion_table_ratios(r)]
    assert names[0] == "companion table bytes / full table (8,000 rows)" and len(names) == 4


def test_bench_takes_the_ten_million_state_size_and_says_it_is_slow(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.__main__ import parse_args, sizes_of
    from bench.suite import snapshot_targets

    args = parse_args(["--only", "state", "--state-sizes", "1000000", "10000000"])
    assert sizes_of(args).state_sizes == (1_000_000, 10_000_000)
    assert "--state-sizes 10,000,000 is slow" in capsys.readouterr().err
    parse_args(["--only", "state", "--state-sizes", "1000000"])
    assert capsys.readouterr().err == ""
    assert snapshot_targets(10_000_000) == (5.0, 1500.0) and snapshot_targets(1_100_014) == (1.0, 150.0)


def test_each_size_of_a_million_files_and_more_is_checked_against_its_own_targets() -> None:
    from bench.suite import _scale_ratios

    def scale(load_s: float) -> dict[str, Any]:
        keys = ("count", "search", "describe_state", "merge_plan", "purge_dry_run", "baseline_search")
        spark = {f"{k}_first_s": 0.5 for k in keys}
        log = {"one_file_commit_max_s": 0.3, "one_file_commit_median_s": 0.04, "warm_after_commit_s": 0.01}
        return {"scale": {**log, "load_s": load_s, "listing_s": 0.05, "rss_mb": 100.0, "spark": spark}}

    sizes = {"1000": scale(0.1), "1000000": scale(0.4), "10000000": scale(0.9)}
    ratios = {r.name: r for r in _scale_ratios({"sizes": sizes})}
    assert ratios["new-process snapshot load, 1,000,000 files, vs 1 s target"].ratio == pytest.approx(0.4)
    assert ratios["new-process snapshot load, 10,000,000 files, vs 5 s target"].ratio == pytest.approx(0.18)
    assert "MERGE SPLITS planning, 1,000,000 files, vs 5 s target" in ratios
    assert not any("Spark" in name and "10,000,000" in name for name in ratios)  # issue 54 sets none at 10M
    assert not any("1,000 files, vs" in name for name in ratios)  # below a million: only the largest size


def test_bench_lance_at_a_tiny_size() -> None:
    """The beside-Lance suite: every timing of this project's side is there and its top 10 has rows; the
    Lance side and its ratios exactly when pylance is installed (the ``bench`` extra)."""
    from bench.lance_benchmark import run
    from bench.suite import lance_ratios

    r = run(rows=20_000, split_rows=10_000, repeat=1, first_runs=1)
    has_lance = importlib.util.find_spec("lance") is not None
    assert r["splits"] == 2 and (r["lance"] is None) == has_lance
    for q in r["top10"].values():
        assert q["hits"] > 0 and q["ours_s"] > 0 and q["tantivy_s"] > 0 and ("lance_s" in q) == has_lance
    assert r["first_query"]["ours_bare_s"] > 0 and r["projection"]["ours_rows_per_s"] > 0
    names = [x.name for x in lance_ratios(r)]
    assert len(names) == (7 if has_lance else 3) and all(x.ratio > 0 for x in lance_ratios(r))
