"""The multi-node cluster from ``python -m harness``: up, status, a client with only the Spark
Connect client writing and reading through it, executors killed during a write and a read,
and down stopping exactly what up started (the ``cluster`` fixture). The same body runs on the
process backend (``-m slow``) and on the docker backend (``-m docker``: containers, run by CI after
the main suite). One test uses it, so one cluster per backend and run (a cluster is 5 JVMs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.client_env import client_env_vars, ensure_client_env
from harness.cluster import pid_alive
from harness.docker_cluster import attach_cluster

REPO = Path(__file__).resolve().parents[2]
CLIENT_DIR = REPO / ".cache" / "thin-client"


def harness_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False
    )


def thin_client_job(url: str, path: str, rows: int) -> dict[str, Any]:
    python = ensure_client_env(CLIENT_DIR)
    done = subprocess.run(
        [str(python), str(Path(__file__).with_name("thin_client_job.py")), url, path, str(rows)],
        cwd=CLIENT_DIR,
        env=client_env_vars(CLIENT_DIR),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    python_lines = [line for line in done.stderr.splitlines() if not line.lstrip().startswith("at ")]
    assert done.returncode == 0, "\n".join(python_lines)[-4000:]  # without the JVM frames that bury the error
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def remote_session(url: str) -> Any:
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    import connect_plugin

    spark = RemoteSparkSession.builder.remote(url).create()
    connect_plugin.install(spark)
    return spark


def kill_an_executor_while(job: Any, cluster: Any, started: Callable[[], bool], timeout_s: float = 300) -> int:
    """Run ``job`` in a thread and SIGKILL one executor JVM as soon as ``started()`` says the job's
    tasks are under way (an event, not a fixed sleep: a fast machine finishes a job before a
    sleep ends); returns the killed pid."""
    outcome: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: outcome.update(result=_call(job)))
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not started():
        assert thread.is_alive(), f"the job ended before its tasks were seen under way: {outcome.get('result')}"
        assert time.monotonic() < deadline, f"the job's tasks were not seen under way within {timeout_s:.0f}s"
        time.sleep(0.05)
    executors = cluster.executor_pids()
    assert executors, "no executor JVM under the workers"
    assert thread.is_alive(), "the job finished before an executor could be killed: make it bigger"
    os.kill(executors[0], signal.SIGKILL)
    thread.join(timeout=600)
    error = outcome["result"][1]
    assert error is None, f"the job failed after one executor was killed: {error}"
    return executors[0]


def splits_uploaded(cluster: Any, prefix: str) -> Callable[[], bool]:
    """True once a task of a write has uploaded its first split under ``prefix`` in the bucket."""
    import boto3

    s3 = boto3.client(
        "s3",
        endpoint_url=cluster.info.s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )

    def any_split() -> bool:
        listed = s3.list_objects_v2(Bucket=cluster.info.bucket, Prefix=prefix)
        return any(o["Key"].endswith(".split") for o in listed.get("Contents", []))

    return any_split


def splits_opened(cluster: Any) -> Callable[[], bool]:
    """True once a task of a read has asked a worker's split cache for a split (its hit and miss
    counters in ``stats.json`` moved)."""

    def lookups() -> int:
        total = 0
        for directory in cluster.info.cache_dirs:
            try:
                stats = json.loads((Path(directory) / "stats.json").read_text())
            except (OSError, ValueError):
                continue
            total += int(stats.get("hits", 0)) + int(stats.get("misses", 0))
        return total

    before = lookups()
    return lambda: lookups() > before


def _call(job: Any) -> tuple[Any, BaseException | None]:
    try:
        return job(), None
    except BaseException as e:
        return None, e


# The process backend under -m slow (about 4 minutes of a CI run's main suite); CI runs the same body on
# the docker backend (scripts/test-docker.sh).
@pytest.fixture(
    params=[pytest.param("process", marks=pytest.mark.slow), pytest.param("docker", marks=pytest.mark.docker)]
)
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A 2-worker cluster of either backend brought up and down with ``python -m harness`` (the
    same code users run); teardown checks that ``down`` left nothing running (for docker: no
    container, network or volume of the cluster)."""
    backend = request.param
    if backend == "docker":
        request.getfixturevalue("docker_engine")
    run_dir = tmp_path / "cluster"
    up = harness_cli("up", "--backend", backend, "--run-dir", str(run_dir), "--workers", "2", timeout=1800)
    assert up.returncode == 0, up.stderr[-4000:]
    started = attach_cluster(run_dir)
    assert started.info.backend == backend
    assert started.info.connect_url in up.stdout and started.info.s3_endpoint in up.stdout
    pids = dict(started.info.pids)
    try:
        yield started
    finally:
        down = harness_cli("down", "--run-dir", str(run_dir))
    assert down.returncode == 0, down.stderr
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids.values()):
        time.sleep(0.5)
    assert not [name for name, pid in pids.items() if pid_alive(pid)], "down left processes running"
    if backend == "docker":
        assert started.leftovers() == [], "down left containers, networks or volumes"
    after = harness_cli("status", "--run-dir", str(run_dir))
    assert after.returncode == 3 and after.stdout.startswith("nothing is running in "), after.stdout


@pytest.mark.timeout(1500)
def test_cluster_client_write_and_executor_loss(cluster: Any) -> None:
    status = harness_cli("status", "--run-dir", str(cluster.run_dir), "--json")
    assert status.returncode == 0, status.stdout
    assert json.loads(status.stdout)["alive_workers"] == 2
    assert len(set(cluster.info.cache_dirs)) == 2

    # A client with only pyspark-client + connect_plugin writes and reads through Connect.
    table = f"s3://{cluster.info.bucket}/tables/thin-client"
    out = thin_client_job(cluster.info.connect_url, table, 30_000)
    assert out == {
        "count": 30_000,
        "hits": 3_000,
        "sql_hits": 3_000,
        "day0": 10_000,
        "versions": 2,
        "has_tantivy": False,
        "has_executor_lib": False,
        "has_boto3": False,
    }
    cached = [
        p for d in cluster.info.cache_dirs for pattern in ("*.split", "pieces.json") for p in Path(d).rglob(pattern)
    ]
    assert cached, "no worker cached a split (whole, or by the piece)"

    spark = remote_session(cluster.info.connect_url)
    try:
        _executor_killed_during_write(spark, cluster)
        _executor_killed_during_read(spark, cluster)
    finally:
        spark.stop()  # before the cluster goes: a live client retries against a dead server at exit


def _executor_killed_during_write(spark: Any, cluster: Any) -> None:
    import connect_plugin
    from connect_plugin.table import IndexTable

    path = f"s3://{cluster.info.bucket}/tables/executor-loss"
    rows = 1_200_000
    df = spark.range(0, rows, 1, 8).selectExpr("id", "concat('line ', cast(id % 1000 as string)) as message")
    kill_an_executor_while(
        lambda: connect_plugin.write(df, path), cluster, splits_uploaded(cluster, "tables/executor-loss/")
    )
    table = IndexTable.for_path(spark, path)
    assert table.to_df().count() == rows
    assert table.count("message:'line 7'") == rows // 1000
    writes = [r for r in table.history().collect() if r["operation"] == "WRITE"]
    assert len(writes) == 1, f"one job, one commit: {writes}"


def _executor_killed_during_read(spark: Any, cluster: Any) -> None:
    path = f"s3://{cluster.info.bucket}/tables/executor-loss"
    df = spark.read.format("indextables").option("spark.indextables.read.maxSplitsPerPartition", "1").load(path)
    counted: dict[str, int] = {}

    def job() -> None:
        row = df.selectExpr("sum(id) as s", "count(*) as n").collect()[0]
        counted.update(rows=row["n"], total=row["s"])

    kill_an_executor_while(job, cluster, splits_opened(cluster))
    assert counted == {"rows": 1_200_000, "total": 1_200_000 * (1_200_000 - 1) // 2}


def test_harness_cli_names_what_is_wrong(tmp_path: Path) -> None:
    status = harness_cli("status", "--run-dir", str(tmp_path / "nothing"))
    assert status.returncode == 3 and status.stderr == "", status.stderr
    assert status.stdout == (
        f"nothing is running in {tmp_path / 'nothing'}: nothing was started there; "
        "python -m harness up starts a cluster\n"
    )
    bad = harness_cli("up", "--workers", "0", "--run-dir", str(tmp_path))
    assert bad.returncode == 2 and "--workers must be at least 1" in bad.stderr


@pytest.mark.parametrize(
    ("pids", "code", "first_line"),
    [
        ({}, 3, "nothing is running in "),  # what `down` leaves: cluster.json with no process
        ({"master": "dead"}, 3, "nothing is running in "),  # every recorded process gone
        ({"master": "self", "worker-0": "dead"}, 1, "process backend: master=up, worker-0=DOWN"),
        ({"master": "self"}, 0, "process backend: master=up"),
    ],
)
def test_status_exit_code_says_whether_anything_runs(
    tmp_path: Path, pids: dict[str, str], code: int, first_line: str
) -> None:
    """0: all up; 1: part of it down; 3: nothing running (as ``down`` leaves it, or all dead)."""
    import dataclasses

    from harness.cluster import ClusterInfo

    gone = subprocess.Popen(["true"])  # a pid that has exited
    gone.wait()
    pid_of = {"self": os.getpid(), "dead": gone.pid}
    run_dir = tmp_path / "cluster"
    run_dir.mkdir()
    info = ClusterInfo(str(run_dir), workers=1, pids={n: pid_of[p] for n, p in pids.items()})
    (run_dir / "cluster.json").write_text(json.dumps(dataclasses.asdict(info)))
    status = harness_cli("status", "--run-dir", str(run_dir))
    assert status.returncode == code and status.stdout.startswith(first_line), status.stdout
    as_json = harness_cli("status", "--run-dir", str(run_dir), "--json")
    assert as_json.returncode == code and json.loads(as_json.stdout)["running"] is (code != 3)
