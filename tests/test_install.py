"""The install that ``scripts/demo.sh`` and ``scripts/test.sh`` do (``scripts/_venv.sh``): an
editable install Spark's static data source registration can see, done once per pyproject.toml,
announced in one line and silent when there is nothing to do."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INSTALLING = "installing IndexTables into .venv (about 2 minutes the first time)...\n"
BUILDING = "building IndexTables' native engine (native/, cargo; about 6 minutes the first time)...\n"


def test_installed_project_is_visible_to_spark_static_registration(tmp_path: Path) -> None:
    # Spark finds pyspark_indextables with pkgutil.iter_modules() (lookup_data_sources.py), which
    # sees path entries (a .pth line, site-packages) but not setuptools' editable import hooks.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "import pkgutil; print(sorted(m.name for m in pkgutil.iter_modules() if m.name.startswith('pyspark_')))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    assert "pyspark_indextables" in done.stdout


def _checkout_with_pip_recorder(root: Path) -> Path:
    """scripts/_venv.sh and pyproject.toml in ``root``, with a .venv whose python runs everything
    but ``-m pip``, which it records in .venv/pip-calls (a real install takes minutes and the network;
    scripts/test.sh runs the real one)."""
    (root / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "_venv.sh", root / "scripts" / "_venv.sh")
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    shutil.copytree(REPO / "native", root / "native", ignore=shutil.ignore_patterns("target"))
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "$*" >> "$(dirname "$0")/../pip-calls"; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    python.chmod(0o755)
    return root / ".venv" / "pip-calls"


def _source_venv(root: Path, extras: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'source scripts/_venv.sh "{extras}"'],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_venv_script_installs_once_per_pyproject_and_says_so(tmp_path: Path) -> None:
    calls = _checkout_with_pip_recorder(tmp_path)

    first = _source_venv(tmp_path, "test,dev")
    assert (first.stdout, first.stderr) == (BUILDING + INSTALLING, "")
    installs = calls.read_text().splitlines()
    assert "-m pip install --quiet ./native" in installs and installs[-1] == "-m pip install --quiet -e .[test,dev]"
    assert not any("editable_mode" in line for line in installs)  # compat mode prints a 14-line banner

    again = _source_venv(tmp_path, "test,dev")
    assert (again.stdout, again.stderr) == ("", "") and calls.read_text().splitlines() == installs

    other = _source_venv(tmp_path, "spark,s3")  # the demo's extras are a separate install
    assert other.stdout == INSTALLING and calls.read_text().splitlines()[-1] == "-m pip install --quiet -e .[spark,s3]"
    count = len(calls.read_text().splitlines())
    assert _source_venv(tmp_path, "test,dev").stdout == "" and _source_venv(tmp_path, "spark,s3").stdout == ""
    assert len(calls.read_text().splitlines()) == count

    with (tmp_path / "pyproject.toml").open("a") as f:
        f.write("# a changed dependency\n")
    changed = _source_venv(tmp_path, "test,dev")
    assert (
        changed.stdout == INSTALLING and calls.read_text().splitlines()[-1] == "-m pip install --quiet -e .[test,dev]"
    )
    assert _source_venv(tmp_path, "test,dev").stdout == ""

    with (tmp_path / "native" / "src" / "lib.rs").open("a") as f:
        f.write("// a changed engine\n")
    rebuilt = _source_venv(tmp_path, "test,dev")  # the engine alone is rebuilt
    assert rebuilt.stdout == BUILDING and calls.read_text().splitlines()[-1] == "-m pip install --quiet ./native"
    assert _source_venv(tmp_path, "test,dev").stdout == ""


def test_the_thin_client_wheel_ships_its_type_hints(tmp_path: Path) -> None:
    """PEP 561: ``py.typed`` in the thin client's wheel (both its packages); the main distribution
    declares the same package data for its three packages."""
    import zipfile

    source = tmp_path / "connect"
    shutil.copytree(REPO / "clients" / "connect", source, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {
        "connect_plugin/py.typed",
        "indextables_contract/py.typed",
        "connect_plugin/log4j2-local.properties",
    } <= names
    pyproject = (REPO / "pyproject.toml").read_text()
    for package in ("connect_plugin", "indextables_contract", "executor_lib"):
        assert re.search(rf'^{package} = \["py.typed"[],]', pyproject, re.M) and (REPO / package / "py.typed").is_file()
