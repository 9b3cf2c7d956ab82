"""A Python environment with only the Spark Connect client and ``connect_plugin``, as a user's
client machine has: no JVM jars, no tantivy, no boto3, no executor_lib, no credentials.

``ensure_client_env(dir)`` creates ``dir/venv`` and installs the thin client package
``clients/connect`` (``indextables-connect``: ``connect_plugin`` with ``pyspark-client`` and
``lark``) into it, re-installing ``connect_plugin`` on every call so it matches the checkout.
Run client programs with the environment from ``client_env_vars(dir)``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CLIENT_PACKAGE = REPO_ROOT / "clients" / "connect"


def ensure_client_env(root: Path) -> Path:
    """The client environment's Python (the venv is created once and reused)."""
    venv = root / "venv"
    python, installed = venv / "bin" / "python", venv / ".dependencies-installed"
    # A new venv gets the package with its dependencies; a complete one only the package again
    # (same version number, newer code), which pip skips unless forced.
    refresh = ["--force-reinstall", "--no-deps"] if installed.exists() else []
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    with tempfile.TemporaryDirectory(prefix="indextables-client-build-") as build:
        source = Path(build) / "connect"  # build from a copy: no build/ or egg-info in the checkout
        shutil.copytree(CLIENT_PACKAGE, source, symlinks=False, ignore=shutil.ignore_patterns("__pycache__"))
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *refresh, str(source)], check=True, timeout=900)
    installed.touch()
    return python


def client_env_vars(root: Path) -> dict[str, str]:
    """The environment for client processes: nothing from this checkout, no credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON", "SPARK_", "INDEXTABLES_"))}
    env["PYTHONNOUSERSITE"] = "1"
    return env
