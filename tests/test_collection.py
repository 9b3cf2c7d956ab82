"""Every test file runs somewhere: the README's test command (``scripts/test.sh``: the main
``pytest`` run, ``-m "not slow and not docker and not jvm"``, then ``-m jvm tests/jvm``) collects
every ``tests/**/test_*.py``, and a file none of its tests run in either is named with the marker
that keeps it out (``slow``: ``-m slow``; ``docker``: ``scripts/test-docker.sh``).

pytest's default ``norecursedirs`` skips folders such as ``build`` and ``dist``: a test folder of
that name is never collected, and nothing says so (39 tests under ``tests/splits/build/`` once went
uncollected that way). This test collects with the project's own configuration, as CI does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict

import pytest

from tests.collection_report import REPORT_ENV
from tests.conftest import REPO_ROOT

# Markers that keep a test out of the main run, and where it runs instead.
ELSEWHERE = {"slow": "-m slow (soak)", "docker": "scripts/test-docker.sh"}


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[set[str]]]:
    """File -> the marker sets of its collected tests, from ``pytest --collect-only`` over the
    project's configured ``testpaths`` (the README's command with no marker expression)."""
    report = tmp_path_factory.mktemp("collection") / "collected.jsonl"
    env = {**os.environ, REPORT_ENV: str(report)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "tests.collection_report"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert run.returncode == 0, (
        f"collection failed (exit {run.returncode}):\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}"
    )
    files: dict[str, list[set[str]]] = defaultdict(list)
    for line in report.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        files[entry["file"]].append(set(entry["markers"]))
    return files


def _runs_in_readme_command(path: str, markers: set[str]) -> bool:
    main = not markers & {"slow", "docker", "jvm"}
    jvm_run = "jvm" in markers and "slow" not in markers and "docker" not in markers and path.startswith("tests/jvm/")
    return main or jvm_run


def test_every_test_file_is_collected_and_runs_or_names_its_marker(collected: dict[str, list[set[str]]]) -> None:
    on_disk = sorted(p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "tests").rglob("test_*.py"))
    assert "tests/test_collection.py" in collected  # the report names files as on_disk does
    missing = [path for path in on_disk if path not in collected]
    assert not missing, f"test files the README's test command never collects: {missing}"
    elsewhere: dict[str, str] = {}
    for path, marker_sets in collected.items():
        if any(_runs_in_readme_command(path, markers) for markers in marker_sets):
            continue
        kept_out_by = sorted({m for markers in marker_sets for m in markers & ELSEWHERE.keys()})
        assert kept_out_by, (
            f"{path}: none of its {len(marker_sets)} tests runs in the README's test command, and no marker "
            f"({', '.join(ELSEWHERE)}) says where they run instead"
        )
        elsewhere[path] = " / ".join(ELSEWHERE[m] for m in kept_out_by)
    # Named so that a reader of the test output sees what the main run leaves out, and where it runs.
    print("test files run outside the README's test command:", json.dumps(elsewhere, indent=1, sort_keys=True))


def test_the_write_tests_are_collected(collected: dict[str, list[set[str]]]) -> None:
    """The 39 tests once lost under ``tests/splits/build/`` (now ``tests/splits/write/``)."""
    write_tests = {path: len(sets) for path, sets in collected.items() if path.startswith("tests/splits/write/")}
    assert sum(write_tests.values()) >= 39, write_tests
