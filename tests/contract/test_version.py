"""One version source (``indextables_contract.version``): the root pyproject.toml's version, which the
thin client's pyproject repeats and every module that names the version reads."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import connect_plugin
import executor_lib
from executor_lib.protocol.actions import ENGINE
from indextables_contract import version as V
from tests.conftest import REPO_ROOT


def _pyproject_version(path: Path) -> str:
    found = re.search(r'^version = "([^"]+)"$', path.read_text(), re.MULTILINE)
    assert found is not None, path
    return found.group(1)


def test_every_module_names_the_pyproject_version() -> None:
    expected = _pyproject_version(REPO_ROOT / "pyproject.toml")
    assert V.VERSION == expected == _pyproject_version(REPO_ROOT / "clients" / "connect" / "pyproject.toml")
    assert executor_lib.__version__ == connect_plugin.__version__ == expected
    assert f"indextables-python/{expected}" == ENGINE
    # no other module spells the version
    spelled = [
        str(p.relative_to(REPO_ROOT))
        for package in ("executor_lib", "connect_plugin", "indextables_contract")
        for p in (REPO_ROOT / package).rglob("*.py")
        if re.search(rf'["\'/]{re.escape(expected)}["\']', p.read_text())
    ]
    assert spelled == []


def test_the_source_reader_and_the_installed_fallback(tmp_path: Path) -> None:
    assert V.source_version(REPO_ROOT) == _pyproject_version(REPO_ROOT / "pyproject.toml")
    (tmp_path / "pyproject.toml").write_text('[tool.x]\nversion = "9"\n[project]\nname = "other"\nversion = "2.0"\n')
    assert V.source_version(tmp_path) is None  # another project's file
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "indextables"\nversion = "3.1"\n[tool.x]\nversion = "9"\n'
    )
    assert V.source_version(tmp_path) == "3.1"
    assert V.source_version(tmp_path / "missing") is None
    installed = V.installed_version()
    assert installed is None or installed == metadata.version(next(d for d in V.DISTRIBUTIONS if _has(d)))


def _has(distribution: str) -> bool:
    try:
        metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def test_an_installed_copy_reads_its_metadata(tmp_path: Path) -> None:
    """Outside a source checkout (no pyproject.toml beside the packages) the version comes from the
    distribution's metadata: here a copy of the contract package beside a made-up dist-info."""
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2])",
            str(REPO_ROOT / "indextables_contract"),
            str(target / "indextables_contract"),
        ],
        check=True,
    )
    info = target / "indextables_connect-7.7.7.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: indextables-connect\nVersion: 7.7.7\n")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from indextables_contract.version import VERSION; print(VERSION)"
    )
    done = subprocess.run([sys.executable, "-I", "-c", code, str(target)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    expected = V.installed_version() if _has("indextables") else "7.7.7"  # "indextables" comes first
    assert done.stdout.strip() == expected
