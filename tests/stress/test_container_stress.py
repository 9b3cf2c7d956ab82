"""The stress workload on the docker backend, with faults only containers give
(``harness.container_stress``): a worker container killed mid-write and mid-merge, a worker cut
off from S3, the S3 container paused — and the same invariants as ``test_stress`` checked on the
log afterwards. Marked ``docker``: CI runs it after the main suite, with an engine it started."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.container_stress import run_container_stress
from harness.docker_cluster import DockerCluster
from harness.stress import StressConfig
from tests.stress.test_stress import _assert_clean, _record

CONTAINER_FAULTS = {"kill_mid_write", "kill_mid_merge", "net_disconnect", "s3_pause"}


@pytest.fixture
def docker_cluster(docker_engine: None, tmp_path: Path) -> Iterator[DockerCluster]:
    cluster = DockerCluster(tmp_path / "cluster", workers=2)
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()
    assert cluster.leftovers() == []


@pytest.mark.docker
@pytest.mark.timeout(1800)
def test_container_faults(docker_cluster: DockerCluster, tmp_path: Path, record_property: Any) -> None:
    run = uuid.uuid4().hex
    storage = {
        "endpoint_url": docker_cluster.info.s3_endpoint,
        "region": "us-east-1",
        "path_style": True,
        "access_key_id": "testing",
        "secret_access_key": "testing",
    }
    cfg = StressConfig(
        table_a=f"s3://{docker_cluster.info.bucket}/stress/{run}/shared",
        table_b=f"s3://{docker_cluster.info.bucket}/stress/{run}/private",
        storage=storage,
        commits_per_writer=8,
        fault_rate=0.02,
        timeout_s=900,
    )
    result = run_container_stress(docker_cluster, cfg, tmp_path)
    _record(result, record_property, "container stress")
    _assert_clean(result)
    assert set(result.faults) >= CONTAINER_FAULTS, f"a container fault did not happen: {result.summary()}"
