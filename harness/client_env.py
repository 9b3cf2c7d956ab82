"""A Python environment with only the Spark Connect client and ``connect_plugin``, as a user's
client machine has: no JVM jars, no tantivy, no boto3, no executor_lib, no credentials.

``ensure_client_env(dir)`` creates ``dir/venv`` with ``pyspark-client`` (and ``lark`` for the
SQL commands) once, and copies ``connect_plugin`` into ``dir/site``; run client programs with
``client_command(dir, script, ...)``, which puts only ``dir/site`` on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CLIENT_REQUIREMENTS = ["pyspark-client>=4.2,<4.4", "pandas>=2.2,<3", "lark>=1.1"]


def ensure_client_env(root: Path) -> Path:
    """The client environment's Python (created on first use; reused while its marker exists)."""
    venv, marker = root / "venv", root / "venv" / ".indextables-client-ready"
    python = venv / "bin" / "python"
    if not marker.exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *CLIENT_REQUIREMENTS],
                       check=True, timeout=900)  # fmt: skip
        marker.write_text(" ".join(CLIENT_REQUIREMENTS))
    site = root / "site"
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(REPO_ROOT / "connect_plugin", site / "connect_plugin", ignore=shutil.ignore_patterns("__pycache__"))
    return python


def client_env_vars(root: Path) -> dict[str, str]:
    """The environment for client processes: only ``connect_plugin`` importable, no credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON", "SPARK_", "INDEXTABLES_"))}
    env.update(PYTHONPATH=str(root / "site"), PYTHONNOUSERSITE="1")
    return env
