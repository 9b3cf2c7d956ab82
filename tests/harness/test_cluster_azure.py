"""``python -m harness up --storage azure``: the cluster's Azure store (Azurite, started by pid like
moto), reachable from every node through ``AZURE_STORAGE_CONNECTION_STRING`` alone, and stopped by
``down``. The whole cluster (5 JVMs) is the ``slow`` test; the store alone runs in the default suite.
On the docker backend (``-m docker``) Azurite is a container of its own image: the store alone
(reached from the host and from a node container on the cluster's network), and the whole cluster
(``slow`` too)."""

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

pytestmark = pytest.mark.azure
REPO = Path(__file__).resolve().parents[2]


def _table_in_a_fresh_process(env: dict[str, str], uri: str) -> str:
    """Create a table and commit to it in a new interpreter that has only the cluster's environment."""
    code = (
        "import sys, pyarrow as pa, executor_lib\n"
        "log = executor_lib.create_table(sys.argv[1], pa.schema([('id', pa.int64())]))\n"
        "print(log.latest_version(), log.store.cache_identity)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, uri], env=env, cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_the_clusters_azure_store_starts_serves_the_nodes_environment_and_stops(tmp_path: Path) -> None:
    cluster = ProcessCluster(tmp_path / "run", storage="azure")
    cluster._dir("logs")
    try:
        cluster.start_storage(120)
    except ClusterError as e:
        if "npm" in str(e) and not os.environ.get("CI"):
            pytest.skip(str(e))
        raise
    try:
        pid = cluster.info.pids["azure"]
        assert pid_alive(pid) and cluster.info.azure_endpoint.startswith("http://127.0.0.1:")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "AWS_"))}
        env.update(cluster.storage_env(), PYTHONPATH=str(REPO))
        uri = f"abfss://{BUCKET}@devstoreaccount1.dfs.core.windows.net/harness/{uuid.uuid4().hex}"
        out = _table_in_a_fresh_process(env, uri)
        assert out.startswith("0 ") and cluster.info.azure_endpoint in out
        attached = ProcessCluster.attach(tmp_path / "run")
        assert attached.info.storage == "azure" and attached.storage_env() == cluster.storage_env()
    finally:
        stopped = cluster.down()
    assert stopped == ["azure"] and not pid_alive(pid)


@pytest.mark.docker
@pytest.mark.timeout(1800)
def test_the_docker_backends_azure_store_serves_host_and_nodes_and_is_removed(
    docker_engine: None, tmp_path: Path
) -> None:
    """``DockerCluster(storage="azure")``: Azurite in its container, the development account's
    container made, a table created from the host through the published port and committed to from
    a node container on the cluster's network (only its environment: the in-network connection
    string), and nothing left after ``down``."""
    from harness.docker_images import docker

    cluster = DockerCluster(tmp_path / "run", storage="azure")
    try:
        cluster.up_storage(300)
        assert cluster.info.azure_endpoint.startswith("http://127.0.0.1:") and "azure" in cluster.info.containers
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "AWS_"))}
        env.update(cluster.storage_env(), PYTHONPATH=str(REPO))
        uri = f"abfss://{BUCKET}@devstoreaccount1.dfs.core.windows.net/docker/{uuid.uuid4().hex}"
        assert _table_in_a_fresh_process(env, uri).startswith("0 ")
        code = (
            "import sys, executor_lib, pyarrow as pa\n"
            "log = executor_lib.open_log(sys.argv[1])\n"
            "add = executor_lib.write_and_upload(log.store, pa.table({'id': [1, 2, 3]}), "
            "executor_lib.mapping_for(pa.schema([('id', pa.int64())]), {}))\n"
            "print(log.commit([add]), log.store.cache_identity)\n"
        )
        args = ["run", "--rm", "--network", cluster.info.network, "--label", f"indextables.cluster={cluster.id}"]
        for key, value in cluster.node_storage_env().items():
            args += ["--env", f"{key}={value}"]
        done = docker(*args, cluster.images["node"], "python", "-c", code, uri, timeout=300)
        assert done.stdout.split()[:2] == ["1", f"{uri}"] and "http://azure:10000/devstoreaccount1" in done.stdout
        storage = {"spark.indextables.azure.connectionString": cluster.storage_env()["AZURE_STORAGE_CONNECTION_STRING"]}
        assert executor_lib.open_log(uri, **storage).snapshot().num_records == 3
        assert attach_cluster(tmp_path / "run").storage_env() == cluster.storage_env()
    finally:
        stopped = cluster.down()
    assert stopped == ["azure"] and cluster.leftovers() == []


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("backend", ["process", pytest.param("docker", marks=pytest.mark.docker)])
def test_harness_up_with_azure_storage_runs_a_job_on_an_abfss_table(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The whole cluster on Azure: a Connect client writes and reads an abfss:// table."""
    from tests.harness.test_cluster import harness_cli, remote_session

    if backend == "docker":
        request.getfixturevalue("docker_engine")
    run_dir = str(tmp_path / "run")
    up = harness_cli(
        "up", "--run-dir", run_dir, "--workers", "2", "--storage", "azure", "--backend", backend, timeout=1800
    )
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        assert "abfss://indextables@devstoreaccount1.dfs.core.windows.net/<path>" in up.stdout
        cluster = attach_cluster(run_dir)
        assert cluster.info.backend == backend
        import connect_plugin

        spark: Any = remote_session(cluster.info.connect_url)
        uri = f"abfss://{BUCKET}@devstoreaccount1.dfs.core.windows.net/jobs/{uuid.uuid4().hex}"
        connect_plugin.write(spark.range(1000).selectExpr("id", "cast(id % 7 as string) as k"), uri)
        assert connect_plugin.read(spark, uri).count() == 1000
        spark.stop()
        storage = {"spark.indextables.azure.connectionString": cluster.storage_env()["AZURE_STORAGE_CONNECTION_STRING"]}
        assert executor_lib.open_log(uri, **storage).snapshot().num_records == 1000
    finally:
        down = harness_cli("down", "--run-dir", run_dir)
    assert down.returncode == 0 and "azure" in down.stdout
