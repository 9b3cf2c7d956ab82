"""Node-wide mutual exclusion between processes: an exclusive ``flock`` on a lock file.

A split-cache entry directory has one lock, ``<entry>.lock`` beside it (outside, so evicting
the entry never deletes a lock someone holds): the cache takes it to download or evict the
split, searchers take it to extract or transcode the split's index into the entry.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def entry_lock(directory: Path) -> Path:
    """The lock file of a cache entry directory."""
    return directory.parent / f"{directory.name}.lock"
