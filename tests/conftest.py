"""Shared fixtures: one lock-patched moto S3 server per test process, and a table URI
fixture parametrized over the local filesystem and S3 so each test body runs on both."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.moto_server import MotoServerProcess

# Spark session fixtures (classic and Spark Connect), shared by tests/spark and tests/connect_plugin.
pytest_plugins = ["tests.spark_sessions"]

REPO_ROOT = Path(__file__).resolve().parent.parent
COMPAT_ROOT = REPO_ROOT.parent / "shared" / "compat" / "indextables_spark_v0.5.4"
BUCKET = "indextables-test"

# Decoded-manifest disk cache: private to this test run.
os.environ.setdefault("INDEXTABLES_MANIFEST_CACHE_DIR", tempfile.mkdtemp(prefix="indextables-test-manifests-"))

# boto3 must never pick up real credentials in tests.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServerProcess]:
    """A lock-patched moto server on 127.0.0.1 with the test bucket (started once per process)."""
    import boto3

    with MotoServerProcess(patched=True) as server:
        boto3.client(
            "s3",
            endpoint_url=server.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket=BUCKET)
        yield server


def s3_options(server: MotoServerProcess) -> dict[str, Any]:
    return {
        "endpoint_url": server.endpoint_url,
        "region": "us-east-1",
        "access_key_id": "testing",
        "secret_access_key": "testing",
        "path_style": True,
    }


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def table(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """``(uri, storage options)`` of a fresh, empty table location on the parametrized backend."""
    if backend == "local":
        return str(tmp_path / "table"), {}
    server = request.getfixturevalue("moto_server")
    return f"s3://{BUCKET}/tables/{uuid.uuid4().hex}", s3_options(server)


@pytest.fixture
def compat_root() -> Path:
    assert COMPAT_ROOT.is_dir(), f"compat tables not found at {COMPAT_ROOT} (shared/ must sit beside the checkout)"
    return COMPAT_ROOT
