"""Shared fixtures: one lock-patched moto S3 server per test process, versitygw (a real S3 server, no
patch), Azurite (Azure Blob Storage) and fake-gcs-server (Google Cloud Storage) started on first use, and
a table URI fixture parametrized over the local filesystem and S3 (and versitygw, Azure and GCS where a
directory's conftest adds them: tests/storage, tests/log) so each test body runs on each."""

from __future__ import annotations

import os
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.moto_server import MotoServerProcess

# Spark session fixtures (classic and Spark Connect), shared by tests/spark and tests/connect_plugin.
pytest_plugins = ["tests.spark_sessions", "tests.census.summary"]

REPO_ROOT = Path(__file__).resolve().parent.parent
COMPAT_ROOT = REPO_ROOT.parent / "shared" / "compat" / "indextables_spark_v0.5.4"
# A fresh clone has no ../shared beside it: the tests that need IndexTables4Spark 0.5.4's pinned fixture
# tables (or the Avro schema in their files) skip with this line; CI, which has ../shared, runs them.
COMPAT_MISSING = (
    f"needs IndexTables4Spark 0.5.4's fixture tables at {COMPAT_ROOT} (../shared is not beside the checkout)"
)
requires_compat = pytest.mark.skipif(not COMPAT_ROOT.is_dir(), reason=COMPAT_MISSING)
BUCKET = "indextables-test"

# Decoded-manifest disk cache: private to this test run.
os.environ.setdefault("INDEXTABLES_MANIFEST_CACHE_DIR", tempfile.mkdtemp(prefix="indextables-test-manifests-"))

# boto3 must never pick up real credentials in tests.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


# One lock-patched moto server for the whole run, shared by every pytest-xdist worker (so the
# stress tests' writers in different workers really contend on one S3): started by the
# controlling process before the workers, which find it through this variable.
SHARED_S3_ENV = "INDEXTABLES_TEST_S3_ENDPOINT"
_SERVER_KEY = pytest.StashKey[MotoServerProcess]()


class SharedS3:
    def __init__(self, endpoint_url: str) -> None:
        self.endpoint_url = endpoint_url


def _create_bucket(endpoint_url: str) -> None:
    import boto3

    boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    ).create_bucket(Bucket=BUCKET)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or os.environ.get(SHARED_S3_ENV):
        return  # an xdist worker (the controller started the server) or a server given from outside
    server = MotoServerProcess(patched=True).start()
    _create_bucket(server.endpoint_url)
    os.environ[SHARED_S3_ENV] = server.endpoint_url
    config.stash[_SERVER_KEY] = server


def pytest_unconfigure(config: pytest.Config) -> None:
    server = config.stash.get(_SERVER_KEY, None)
    if server is not None:
        server.stop()
        os.environ.pop(SHARED_S3_ENV, None)


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """Tests marked ``docker`` need an engine (``bash scripts/docker-engine.sh``): without one they
    skip, except in CI (``CI`` set), where they fail, since CI starts one before running them."""
    from harness.docker_images import docker_available

    reason = docker_available()
    if reason and os.environ.get("CI"):
        pytest.fail(f"docker tests in CI: {reason}")
    if reason:
        pytest.skip(f"docker backend: {reason}")


@pytest.fixture(scope="session")
def moto_server() -> SharedS3:
    """The run's lock-patched moto server on 127.0.0.1, with the test bucket."""
    return SharedS3(os.environ[SHARED_S3_ENV])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` an xdist worker's items marked ``xdist_group`` carry their group in
    their node id (``...@group``); without it the group's tests spread over the workers and a session
    fixture meant to run once (tests/spark/test_commit_crashes.py: 3 minutes) runs on each."""
    if not getattr(config.option, "loadgroup", False):  # set on each xdist worker of a loadgroup run
        return
    lost = [item.nodeid for item in items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        message = (
            f"--dist loadgroup did not group {len(lost)} xdist_group tests (e.g. {lost[0]}): "
            "this pytest-xdist does not work with this pytest (see pyproject.toml's pin)"
        )
        print(message, file=sys.__stderr__)  # the controller reports a worker's UsageError without it
        raise pytest.UsageError(message)


# --- end-of-run summaries, printed by the controller: each stress run's line, and the seconds each
# test file took (setup, call and teardown summed over its tests, every worker's), where CI's time goes.


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call":
        _STRESS_LINES.extend(str(v) for k, v in report.user_properties if k == "stress_summary")
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration
    if report.when == "call":
        _FILE_TESTS[path] = _FILE_TESTS.get(path, 0) + 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if terminalreporter.config.getoption("durations", None) and _FILE_SECONDS:
        _print_file_seconds(terminalreporter)
    if _STRESS_LINES:
        from harness.stress import StressResult

        terminalreporter.section("stress runs")
        terminalreporter.write_line(StressResult.LEGEND)
        for line in _STRESS_LINES:
            terminalreporter.write_line(line)


_STRESS_LINES: list[str] = []
_FILE_SECONDS: dict[str, float] = {}
_FILE_TESTS: dict[str, int] = {}


def _print_file_seconds(terminalreporter: Any, shown: int = 40) -> None:
    """The ``shown`` test files that took longest (with ``--durations``, as scripts/test.sh runs)."""
    total = sum(_FILE_SECONDS.values())
    terminalreporter.section(f"slowest {shown} test files (of {len(_FILE_SECONDS)}: {total:.0f} s of test time in all)")
    for path, seconds in sorted(_FILE_SECONDS.items(), key=lambda kv: -kv[1])[:shown]:
        tests = _FILE_TESTS.get(path, 0)
        terminalreporter.write_line(f"{seconds:8.1f} s {100 * seconds / total:5.1f}% {tests:4d} tests  {path}")


def s3_options(server: Any) -> dict[str, Any]:
    """Storage options of a table on ``server`` (moto, any key; versitygw, the keys it was started with)."""
    return {
        "endpoint_url": server.endpoint_url,
        "region": "us-east-1",
        "access_key_id": getattr(server, "access_key_id", "testing"),
        "secret_access_key": getattr(server, "secret_access_key", "testing"),
        "path_style": True,
    }


class SharedVersityGw:
    def __init__(self, endpoint_url: str) -> None:
        from harness.versitygw import ACCESS_KEY, SECRET_KEY

        self.endpoint_url = endpoint_url
        self.access_key_id, self.secret_access_key = ACCESS_KEY, SECRET_KEY


@pytest.fixture(scope="session")
def versitygw_server() -> Iterator[SharedVersityGw]:
    """versitygw on 127.0.0.1 (a real S3 server: posix backend in a temporary directory, its own
    conditional writes, signatures checked; no lock patch), one per test process, started at first use,
    stopped by pid at the end, with the test bucket. Built with ``go install`` into
    ~/.cache/indextables/versitygw the first time (scripts/versitygw.sh does it before the tests);
    without Go the versitygw tests skip, except in CI (``CI`` set), where they fail."""
    from harness.versitygw import VersityGwProcess, VersityGwUnavailable

    try:
        server = VersityGwProcess(bucket=BUCKET).start()
    except VersityGwUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"versitygw tests in CI: {e}")
        pytest.skip(f"versitygw backend: {e}")
    try:
        yield SharedVersityGw(server.endpoint_url)
    finally:
        server.stop()


AZURE_CONTAINER = "indextables-test"


class SharedAzurite:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[SharedAzurite]:
    """Azurite on 127.0.0.1 (one per test process, started at first use, stopped by pid at the end),
    with the test container. Installed with npm into ~/.cache/indextables/azurite the first time;
    without npm the Azure tests skip, except in CI (``CI`` set), where they fail."""
    from harness.azurite import AzuriteProcess, AzuriteUnavailable, create_container

    try:
        server = AzuriteProcess().start()
    except AzuriteUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"Azure tests in CI: {e}")
        pytest.skip(f"Azure backend: {e}")
    try:
        create_container(server.endpoint, AZURE_CONTAINER)
        yield SharedAzurite(server.endpoint)
    finally:
        server.stop()


def azure_options(server: Any) -> dict[str, Any]:
    """Storage options of a table on the test Azurite (IndexTables4Spark's key names)."""
    from harness.azurite import options

    return options(server.endpoint)


def azure_uri(path: str) -> str:
    """An ``abfss://`` URI in the test container of Azurite's development account."""
    from harness.azurite import ACCOUNT

    return f"abfss://{AZURE_CONTAINER}@{ACCOUNT}.dfs.core.windows.net/{path}"


GCS_BUCKET = "indextables-test"


class SharedFakeGcs:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[SharedFakeGcs]:
    """fake-gcs-server on 127.0.0.1 (one per test process, started at first use, in memory, plain HTTP,
    stopped by pid at the end), with the test bucket. Built with ``go install`` into
    ~/.cache/indextables/fake-gcs-server the first time (scripts/fake-gcs-server.sh does it before the
    tests); without Go the GCS tests skip, except in CI (``CI`` set), where they fail."""
    from harness.fake_gcs import FakeGcsProcess, FakeGcsUnavailable, create_bucket

    try:
        server = FakeGcsProcess().start()
    except FakeGcsUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"GCS tests in CI: {e}")
        pytest.skip(f"GCS backend: {e}")
    try:
        create_bucket(server.endpoint, GCS_BUCKET)
        yield SharedFakeGcs(server.endpoint)
    finally:
        server.stop()


def gcs_options(server: Any) -> dict[str, Any]:
    """Storage options of a table on the test fake-gcs-server."""
    from harness.fake_gcs import options

    return options(server.endpoint)


@pytest.fixture(params=["moto", "versitygw"])
def s3_server(request: pytest.FixtureRequest) -> Any:
    """Each S3 server in turn: the run's lock-patched moto, then versitygw (unpatched)."""
    return request.getfixturevalue("versitygw_server" if request.param == "versitygw" else "moto_server")


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def table(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """``(uri, storage options)`` of a fresh, empty table location on the parametrized backend."""
    if backend == "local":
        return str(tmp_path / "table"), {}
    if backend == "azure":
        azurite = request.getfixturevalue("azurite_server")
        return azure_uri(f"tables/{uuid.uuid4().hex}"), azure_options(azurite)
    if backend == "gcs":
        gcs = request.getfixturevalue("gcs_server")
        return f"gs://{GCS_BUCKET}/tables/{uuid.uuid4().hex}", gcs_options(gcs)
    server = request.getfixturevalue("versitygw_server" if backend == "versitygw" else "moto_server")
    return f"s3://{BUCKET}/tables/{uuid.uuid4().hex}", s3_options(server)


@pytest.fixture
def compat_root() -> Path:
    if not COMPAT_ROOT.is_dir():
        pytest.skip(COMPAT_MISSING)
    return COMPAT_ROOT
