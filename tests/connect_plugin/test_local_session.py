"""A newcomer's script run with the venv's Python without activating the venv (issue 34): Spark's
local Python workers then start ``python3`` from the PATH, the system Python. Through
``connect_plugin.local_session()`` the script works; through a plain ``SparkSession.builder`` session,
``connect_plugin.install`` refuses it in one line naming the fix, before any job runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SCRIPT = textwrap.dedent("""
    import sys
    import connect_plugin
    if sys.argv[1] == "plain":
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
        connect_plugin.install(spark)
    else:
        spark = connect_plugin.local_session("local[1]", {"spark.ui.enabled": "false"})
    spark.range(3).write.format("indextables").mode("overwrite").save(sys.argv[2])
    print("rows", spark.read.format("indextables").load(sys.argv[2]).count())
""")

# A PATH without the venv: /usr/bin and /bin, and where java is.
JAVA = shutil.which("java")
BARE_PATH = os.pathsep.join(dict.fromkeys(["/usr/bin", "/bin", *([os.path.dirname(JAVA)] if JAVA else [])]))


def _system_python_lacks_the_project() -> bool:
    python = shutil.which("python3", path=BARE_PATH)
    if python is None:
        return True
    done = subprocess.run(
        [python, "-c", "import pyarrow, tantivy, pyspark"],
        capture_output=True,
        timeout=60,
        env={"PATH": BARE_PATH},
        check=False,
    )
    return done.returncode != 0


def _run_unactivated(mode: str, table: Path) -> subprocess.CompletedProcess[str]:
    """The script run as ``<venv>/bin/python script.py`` from a shell where the venv is not activated."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_", "VIRTUAL_ENV")) and k != "PATH"
    }
    env.update(PATH=BARE_PATH, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, mode, str(table)],
        cwd=table.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )


pytestmark = pytest.mark.skipif(
    not _system_python_lacks_the_project(), reason="python3 on /usr/bin:/bin has pyarrow, tantivy and pyspark"
)


def test_local_session_works_without_the_venv_activated(tmp_path: Path) -> None:
    done = _run_unactivated("local", tmp_path / "t")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["rows 3"]
    assert "DATA_SOURCE_NOT_FOUND" not in done.stderr and "Using Spark's default log4j profile" not in done.stderr


def test_a_plain_local_session_on_the_system_python_fails_in_one_line_naming_the_fix(tmp_path: Path) -> None:
    done = _run_unactivated("plain", tmp_path / "t")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "indextables_contract.errors.ConfigError: [INDEXTABLES_CONFIG] this local Spark "
        f"session's Python workers run {shutil.which('python3', path=BARE_PATH)} (PYSPARK_PYTHON is not set: python3 on PATH), "
        "which cannot import the data source (ModuleNotFoundError: No module named"
    ), last
    assert last.endswith(
        f"start the session with connect_plugin.local_session(), or set PYSPARK_PYTHON={sys.executable} "
        "in the environment before the session starts (or activate the venv)"
    ), last
    assert "DATA_SOURCE_NOT_FOUND" not in done.stderr  # refused before any read or write reached Spark
    assert not (tmp_path / "t").exists()
