"""A Spark job whose commit worker dies at any step leaves the table with exactly what was acknowledged
to the log, and never without a split a committed version names (issue 70, N1).

When the Python worker running a data source's ``commit`` dies, Spark calls the writer's ``abort``
with the same commit messages, also when the version had landed: before the fix ``abort`` deleted
those splits and the table stopped reading. Here a real local Spark session (in a process of its own,
``tests/spark/crash_driver.py``, so its JVM and Python workers inherit the failpoint file) runs append,
overwrite, MERGE SPLITS, companion BUILD and streaming jobs whose commit worker exits at a failpoint
(``executor_lib.failpoints``: ``os._exit(137)``, as ``kill -9``) before the commit, after the version
landed, and after the commit; each table is read back, written again, and checked on disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from executor_lib import failpoints
from tests.conftest import REPO_ROOT

BASE = list(range(100))
APPENDED = list(range(1000, 1100))
NEXT = list(range(5000, 5010))
STREAMED = sorted(f * 1000 + k for f in range(3) for k in range(30))
COMPANION = list(range(100))
LANDED = {"log.commit.landed", "spark.commit.after"}  # the version is in the log when the worker dies
# One driver process runs every job (a Spark session of its own: 2-4 minutes on 2 cores), once for the
# module's tests, all in one pytest worker.
pytestmark = [pytest.mark.xdist_group("commit_crashes"), pytest.mark.timeout(1500)]


@pytest.fixture(scope="session")  # session: a module fixture ran twice when xdist interleaved other modules
def crashes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], dict[str, Any]]:
    """(scenario, failpoint) -> what the driver found after that crash."""
    work = tmp_path_factory.mktemp("crashes")
    env = {**os.environ, failpoints.FILE_ENV: str(work / "failpoints"), "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-m", "tests.spark.crash_driver", str(work)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, f"crash driver failed (exit {done.returncode}):\n{done.stderr[-5000:]}"
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {(r["scenario"], r["failpoint"]): r for r in results}


def _checked(crashes: dict[tuple[str, str], dict[str, Any]], scenario: str, failpoint: str) -> dict[str, Any]:
    result = crashes.get((scenario, failpoint))
    assert result is not None, f"the driver ran no {scenario} job killed at {failpoint}: {sorted(crashes)}"
    assert "crashed" not in result, f"{scenario} killed at {failpoint}: {result['crashed']}"
    assert result["error"], f"{scenario}: the job did not fail although its commit worker died at {failpoint}"
    assert result["still_armed"] == [], f"{scenario}: failpoint {failpoint} was never reached"
    assert result["missing"] == [], f"{scenario} killed at {failpoint}: live splits deleted {result['missing']}"
    return result


@pytest.mark.parametrize("failpoint", ["spark.commit.before", "log.commit.landed", "spark.commit.after"])
def test_an_append_whose_commit_worker_dies_keeps_what_the_log_acknowledged(
    crashes: dict[tuple[str, str], dict[str, Any]], failpoint: str
) -> None:
    result = _checked(crashes, "append", failpoint)
    expected = BASE + APPENDED if failpoint in LANDED else BASE
    assert result["ids"] == expected
    assert result["ids_after_next_write"] == expected + NEXT


@pytest.mark.parametrize("failpoint", ["spark.commit.before", "log.commit.landed", "spark.commit.after"])
def test_an_overwrite_whose_commit_worker_dies_keeps_what_the_log_acknowledged(
    crashes: dict[tuple[str, str], dict[str, Any]], failpoint: str
) -> None:
    result = _checked(crashes, "overwrite", failpoint)
    expected = APPENDED if failpoint in LANDED else BASE
    assert result["ids"] == expected
    assert result["ids_after_next_write"] == expected + NEXT


@pytest.mark.parametrize("failpoint", ["spark.commit.before", "log.commit.landed"])
def test_a_merge_whose_commit_worker_dies_keeps_every_row(
    crashes: dict[tuple[str, str], dict[str, Any]], failpoint: str
) -> None:
    result = _checked(crashes, "merge", failpoint)
    assert result["ids_equal"] and result["ids_equal_after_next_merge"]
    merged = result["splits"] == 1  # 3 appends of 2 splits each, merged into one
    assert merged == (failpoint in LANDED)


@pytest.mark.parametrize("failpoint", ["spark.commit.before", "log.commit.landed"])
def test_a_companion_build_whose_commit_worker_dies_reads_right_and_a_rebuild_completes_it(
    crashes: dict[tuple[str, str], dict[str, Any]], failpoint: str
) -> None:
    result = _checked(crashes, "companion", failpoint)
    assert result["ids"] == (COMPANION if failpoint in LANDED else [])
    assert result["rebuild_status"] == ("no_action" if failpoint in LANDED else "success")
    assert result["ids_after_rebuild"] == COMPANION


@pytest.mark.parametrize("failpoint", ["spark.commit.before", "log.commit.landed"])
def test_a_stream_whose_commit_worker_dies_has_every_row_once_after_a_restart(
    crashes: dict[tuple[str, str], dict[str, Any]], failpoint: str
) -> None:
    result = _checked(crashes, "stream", failpoint)
    assert result["ids_after_restart"] == STREAMED
