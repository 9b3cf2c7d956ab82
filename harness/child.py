"""Server child processes the tests and the harness start: run a ``python -m harness.<server>``
command that prints ``READY <port>`` once it listens, and stop it by its pid. Used by the moto S3
server and Azurite (``moto_server.py``, ``azurite.py``); ``stop`` also stops fake-gcs-server and
versitygw (``fake_gcs.py``, ``versitygw.py``)."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any


def start_announcing(cmd: list[str], timeout: float) -> tuple[subprocess.Popen[str], int] | None:
    """Start ``cmd`` and wait up to ``timeout`` seconds for its ``READY <port>`` line: (the process,
    the port), or None (the process stopped) if it exits or stays silent."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("READY "):
            return proc, int(line.split()[1])
        if not line and proc.poll() is not None:
            break
    stop(proc, 10)
    return None


def stop(proc: subprocess.Popen[Any] | None, wait_s: float) -> None:
    """Terminate a child (by its pid), kill it after ``wait_s`` seconds, and reap it."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
