"""``python -m harness up --storage gcs``: the cluster's GCS store (fake-gcs-server, started by pid like
moto), reachable from every node through ``STORAGE_EMULATOR_HOST`` alone, and stopped by ``down``. The
whole cluster (5 JVMs) is the ``slow`` test; the store alone runs in the default suite. The docker
backend has no GCS image: asking for one is an error saying so."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

import executor_lib
from harness.cluster import BUCKET, ClusterError, ProcessCluster, pid_alive
from harness.docker_cluster import DockerCluster, attach_cluster

pytestmark = pytest.mark.gcs
REPO = Path(__file__).resolve().parents[2]


def test_the_clusters_gcs_store_starts_serves_the_nodes_environment_and_stops(tmp_path: Path) -> None:
    cluster = ProcessCluster(tmp_path / "run", storage="gcs")
    cluster._dir("logs")
    try:
        cluster.start_storage(120)
    except ClusterError as e:
        if "needs Go" in str(e) and not os.environ.get("CI"):
            pytest.skip(str(e))
        raise
    try:
        pid = cluster.info.pids["gcs"]
        assert pid_alive(pid) and cluster.info.gcs_endpoint.startswith("http://127.0.0.1:")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GOOGLE_", "STORAGE_EMULATOR", "AWS_"))}
        env.update(cluster.storage_env(), PYTHONPATH=str(REPO))
        uri = f"gs://{BUCKET}/harness/{uuid.uuid4().hex}"
        code = (
            "import sys, pyarrow as pa, executor_lib\n"
            "log = executor_lib.create_table(sys.argv[1], pa.schema([('id', pa.int64())]))\n"
            "print(log.latest_version(), log.store.cache_identity)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, uri], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.startswith("0 ") and cluster.info.gcs_endpoint in done.stdout
        attached = ProcessCluster.attach(tmp_path / "run")
        assert attached.info.storage == "gcs" and attached.storage_env() == cluster.storage_env()
    finally:
        stopped = cluster.down()
    assert stopped == ["gcs"] and not pid_alive(pid)


def test_the_docker_backend_refuses_gcs_saying_why(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="no GCS image yet"):
        DockerCluster(tmp_path / "run", storage="gcs")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_harness_up_with_gcs_storage_runs_a_job_on_a_gs_table(tmp_path: Path) -> None:
    """The whole cluster on GCS: a Connect client writes and reads a gs:// table."""
    from tests.harness.test_cluster import harness_cli, remote_session

    run_dir = str(tmp_path / "run")
    up = harness_cli("up", "--run-dir", run_dir, "--workers", "2", "--storage", "gcs", timeout=1800)
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        assert f"gs://{BUCKET}/<path>" in up.stdout
        cluster = attach_cluster(run_dir)
        import connect_plugin

        spark: Any = remote_session(cluster.info.connect_url)
        uri = f"gs://{BUCKET}/jobs/{uuid.uuid4().hex}"
        connect_plugin.write(spark.range(1000).selectExpr("id", "cast(id % 7 as string) as k"), uri)
        assert connect_plugin.read(spark, uri).count() == 1000
        spark.stop()
        storage = {"spark.indextables.gcs.endpoint": cluster.info.gcs_endpoint}
        assert executor_lib.open_log(uri, **storage).snapshot().num_records == 1000
    finally:
        down = harness_cli("down", "--run-dir", run_dir)
    assert down.returncode == 0 and "gcs" in down.stdout
