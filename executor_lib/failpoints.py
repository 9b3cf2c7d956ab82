"""Failpoints: named places where a crash test makes this process die, as ``kill -9`` would.

A commit has steps a worker can die between (splits uploaded, the version file written, maintenance
after it); the crash tests (``tests/spark/test_commit_crashes.py``) stop a real Spark job at each
step and check that what was acknowledged is all there and nothing committed was deleted. A step
calls ``reach("<name>")``; nothing happens unless the environment variable ``INDEXTABLES_FAILPOINTS_FILE``
names a file (inherited by Spark's Python workers from the process that started the JVM) whose lines
list the failpoints armed. An armed failpoint fires once: its line is removed, then the process exits
at once with status 137 (no ``finally`` blocks, no ``atexit``), as a killed process does.

Without the variable, ``reach`` is one dictionary lookup.

Example: ``reach("log.commit.landed")`` in ``TransactionLog.commit`` after its version landed.
"""

from __future__ import annotations

import os
from pathlib import Path

from executor_lib.file_lock import exclusive_lock

FILE_ENV = "INDEXTABLES_FAILPOINTS_FILE"
KILLED_STATUS = 137  # 128 + SIGKILL, what a shell reports for kill -9

# Every failpoint, so a test cannot arm a name no code reaches.
NAMES = frozenset(
    {
        "spark.commit.before",  # the job's splits uploaded, its commit not yet tried
        "log.commit.landed",  # the version is in the log; the log's own work after it (state, checkpoint) not done
        "spark.commit.after",  # committed; the maintenance after it (merge-, purge-on-write) not done
    }
)


def reach(name: str) -> None:
    """Die here if ``name`` is armed (see the module docstring); else return at once."""
    path = os.environ.get(FILE_ENV)
    if not path:
        return
    if name not in NAMES:
        raise ValueError(f"unknown failpoint {name!r}; known: {sorted(NAMES)}")
    with exclusive_lock(_lock_of(path)):
        try:
            with open(path, encoding="utf-8") as f:
                armed = f.read().split()
        except FileNotFoundError:
            return
        if name not in armed:
            return
        armed.remove(name)
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(armed))
    os._exit(KILLED_STATUS)


def arm(path: str, *names: str) -> None:
    """Arm ``names`` in the failpoint file ``path`` (for the crash tests)."""
    unknown = sorted(set(names) - NAMES)
    if unknown:
        raise ValueError(f"unknown failpoints {unknown}; known: {sorted(NAMES)}")
    with exclusive_lock(_lock_of(path)), open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(names))


def armed(path: str) -> list[str]:
    """The failpoints still armed in ``path`` (a fired one is gone)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().split()
    except FileNotFoundError:
        return []


def _lock_of(path: str) -> Path:
    return Path(path + ".lock")
