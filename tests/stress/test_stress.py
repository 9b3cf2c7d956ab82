"""Concurrent commits on S3 under faults, across pytest-xdist workers (``harness.stress``), and one run on
Azure and one on versitygw (a real S3 server, unpatched).

Every ``test_concurrent_commits_with_faults`` shard appends to ONE table shared by all shards
of the run (whatever xdist worker runs it), alongside its own merger, checkpointer, reader,
and a private table with an overwriter, an appender and a writer killed before committing.
Sizes come from the environment, so the same tests make the short run of the default test
command and the long soak run (README, "Stress and soak"):
``INDEXTABLES_STRESS_SHARDS`` (2), ``..._WRITERS`` (3), ``..._COMMITS`` (6), ``..._FAULT_RATE`` (0.03).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.moto_server import MotoServerProcess
from harness.stress import StressConfig, StressResult, run_stress
from tests.conftest import BUCKET, _create_bucket, azure_options, azure_uri, s3_options

SHARDS = int(os.environ.get("INDEXTABLES_STRESS_SHARDS", "2"))
WRITERS = int(os.environ.get("INDEXTABLES_STRESS_WRITERS", "3"))
COMMITS = int(os.environ.get("INDEXTABLES_STRESS_COMMITS", "6"))
FAULT_RATE = float(os.environ.get("INDEXTABLES_STRESS_FAULT_RATE", "0.03"))


@pytest.fixture(scope="session")
def run_uid(request: pytest.FixtureRequest) -> str:
    """The same id in every xdist worker of one run (xdist's ``testrun_uid``), else a fresh one."""
    try:
        return str(request.getfixturevalue("testrun_uid"))
    except pytest.FixtureLookupError:
        return uuid.uuid4().hex


def _record(result: StressResult, record_property: Any, label: str = "stress") -> None:
    record_property("stress_summary", result.summary(label))
    print(result.summary(label))


def _assert_clean(result: StressResult) -> None:
    assert not result.errors, result.errors[:3]
    assert result.violations == [], result.violations[:5]
    assert result.lost == [], f"acknowledged commits missing from the log: {result.lost[:5]}"
    assert result.duplicated == [], f"transactions or files added twice: {result.duplicated[:5]}"
    assert result.acknowledged > 0
    # the counters mean what the legend says: each landed version holds a split of one attempt, each
    # acknowledged commit landed (conflicts are neither acknowledged nor landed)
    assert result.attempted >= result.landed >= result.acknowledged, result.summary()
    assert result.orphans_purged == 2
    assert result.rows_read > 0


@pytest.mark.s3
@pytest.mark.timeout(900)
@pytest.mark.parametrize("shard", range(SHARDS))
def test_concurrent_commits_with_faults(
    shard: int, moto_server: Any, run_uid: str, tmp_path: Path, record_property: Any
) -> None:
    cfg = StressConfig(
        table_a=f"s3://{BUCKET}/stress/{run_uid}/shared",
        table_b=f"s3://{BUCKET}/stress/{run_uid}/private-{shard}",
        storage=s3_options(moto_server),
        writers=WRITERS,
        commits_per_writer=COMMITS,
        fault_rate=FAULT_RATE,
        seed=shard,
    )
    result = run_stress(cfg, tmp_path)
    _record(result, record_property)
    _assert_clean(result)
    assert sum(result.faults.values()) > 0 or FAULT_RATE == 0, "no fault was injected: the run proves nothing"


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "store", [pytest.param("azure", marks=pytest.mark.azure), pytest.param("versitygw", marks=pytest.mark.s3)]
)
def test_concurrent_commits_with_faults_beside_moto(
    store: str, tmp_path: Path, record_property: Any, request: pytest.FixtureRequest
) -> None:
    """The same workload and checks on Azure Blob Storage (Azurite) and on versitygw (a real S3 server,
    no lock patch: its own If-None-Match decides who wins): writers, a merger, a checkpointer and a
    reader race on table A, an overwriter, an appender and a killed writer on B, with busy answers,
    resets, timeouts and put-if-absent calls whose answers are lost."""
    run = uuid.uuid4().hex
    if store == "azure":
        table_a, table_b = azure_uri(f"stress/{run}/shared"), azure_uri(f"stress/{run}/private")
        storage = azure_options(request.getfixturevalue("azurite_server"))
    else:
        table_a, table_b = f"s3://{BUCKET}/stress/{run}/shared", f"s3://{BUCKET}/stress/{run}/private"
        storage = s3_options(request.getfixturevalue("versitygw_server"))
    cfg = StressConfig(
        table_a=table_a,
        table_b=table_b,
        storage=storage,
        writers=WRITERS,
        commits_per_writer=COMMITS,
        fault_rate=FAULT_RATE,
        seed=11,
    )
    result = run_stress(cfg, tmp_path)
    _record(result, record_property, f"stress {store}")
    _assert_clean(result)
    assert sum(result.faults.values()) > 0 or FAULT_RATE == 0, "no fault was injected: the run proves nothing"


@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_soak(moto_server: Any, run_uid: str, tmp_path: Path, record_property: Any) -> None:
    """At scale (``-m slow``): 16 writers x 63 commits (1,008) with faults, plus merges, checkpoints,
    purges, killed writers and 2 readers. INDEXTABLES_SOAK_WRITERS / INDEXTABLES_SOAK_COMMITS override."""
    writers = int(os.environ.get("INDEXTABLES_SOAK_WRITERS", "16"))
    commits = int(os.environ.get("INDEXTABLES_SOAK_COMMITS", str(-(-1000 // writers))))
    cfg = StressConfig(
        table_a=f"s3://{BUCKET}/stress/{run_uid}/soak",
        table_b=f"s3://{BUCKET}/stress/{run_uid}/soak-b",
        storage=s3_options(moto_server),
        writers=writers,
        commits_per_writer=commits,
        fault_rate=max(0.05, FAULT_RATE),
        readers=2,
        timeout_s=3300,
    )
    result = run_stress(cfg, tmp_path)
    _record(result, record_property)
    _assert_clean(result)


@pytest.mark.timeout(600)
def test_checker_reports_lost_commits_on_unpatched_moto(tmp_path: Path, record_property: Any) -> None:
    """The same workload on moto WITHOUT the lock patch and with a widened check-to-write
    window: writers are told they won versions that another writer also "won", and the
    checker must catch it. If this passes vacuously, the checks above prove nothing."""
    with MotoServerProcess(patched=False, widen_ms=25) as server:
        _create_bucket(server.endpoint_url)
        run = uuid.uuid4().hex
        cfg = StressConfig(
            table_a=f"s3://{BUCKET}/unpatched/{run}/a",
            table_b=f"s3://{BUCKET}/unpatched/{run}/b",
            storage=s3_options(server),
            writers=6,
            commits_per_writer=8,
            fault_rate=0.0,
            merges=False,
            checkpoints=False,
            readers=0,
            table_b_workload=False,
        )
        result = run_stress(cfg, tmp_path)
    _record(result, record_property, "SELF-TEST on unpatched moto, losses expected")
    assert not result.errors, result.errors[:3]
    assert result.lost, f"the checker found no lost commit on unpatched moto: {result.summary()}"
    assert result.acknowledged > result.landed
