"""The read-path profiler: phase timings and cache hits/misses of split reads, per node.

IndexTables4Spark's ``ENABLE / DISABLE / DESCRIBE / RESET INDEXTABLES PROFILER [CACHE]`` time
tantivy4java's native read path; here they time this project's: opening a split (cache lookup,
download or piece fetch, opening the index), the index query, fetching the matching rows
(``doc_batch_*``), the residual filter, per-split aggregation (``agg_*``), PREWARM's fetch of a
split (``prewarm_components``) and scan planning's pruning (``plan_*``); and count hits and misses
of the split cache on disk (``l2_disk``), the in-memory split footers (``footer``) and the open
searchers kept per process (``searcher``).

Off, a probe is one module-attribute check per split (``if profiler.ENABLED``), nothing per row.
On, a probe adds its time to this process's counters, which a task adds to its node's counter file
when it ends (``flush``: one locked file update per task; see ``executor_lib.node_counters``).
Whether the profiler is on is a flag file in the node's split-cache directory, which ENABLE and
DISABLE write on every node their tasks reach and each task reads when it starts (``sync``: one
``stat``), so every Python worker of a node and every session on it follow the same switch.

    t0 = time.perf_counter_ns() if profiler.ENABLED else 0
    ids = searcher.row_ids(query)
    if t0:
        profiler.record("query_search", t0)
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from executor_lib import node_counters

ENABLED = False  # read by the probes: set from the node's flag by ``sync`` (and by ``set_enabled``)

_SECTIONS: dict[str, list[int]] = {}  # section -> [count, total_ns, min_ns, max_ns], not yet flushed
_CACHES: dict[str, int] = {}  # "<cache>_hit" / "<cache>_miss" -> count, not yet flushed
_LOCK = threading.Lock()

PROFILER_DIR = "profiler"
_FLAG = "enabled"
_COUNTERS = "counters.json"


def record(section: str, started_ns: int) -> None:
    """Add one call of ``section`` that started at ``started_ns`` (``time.perf_counter_ns()``)."""
    elapsed = time.perf_counter_ns() - started_ns
    with _LOCK:
        s = _SECTIONS.get(section)
        if s is None:
            _SECTIONS[section] = [1, elapsed, elapsed, elapsed]
        else:
            s[0] += 1
            s[1] += elapsed
            if elapsed < s[2]:
                s[2] = elapsed
            if elapsed > s[3]:
                s[3] = elapsed


def cache_event(cache: str, hit: bool, n: int = 1) -> None:
    """Count ``n`` hits (or misses) of ``cache`` (e.g. ``l2_disk``)."""
    key = f"{cache}_hit" if hit else f"{cache}_miss"
    with _LOCK:
        _CACHES[key] = _CACHES.get(key, 0) + n


def _paths(directory: Path) -> tuple[Path, Path]:
    base = Path(directory) / PROFILER_DIR
    return base / _FLAG, base / _COUNTERS


def sync(directory: Path) -> bool:
    """Switch this process's probes as the node's flag says (a task calls this when it starts)."""
    global ENABLED
    ENABLED = _paths(directory)[0].exists()
    return ENABLED


def flush(directory: Path) -> None:
    """Add this process's unflushed counts to the node's counter file and forget them (a task calls
    this when it ends; nothing is written when nothing was recorded)."""
    with _LOCK:
        if not _SECTIONS and not _CACHES:
            return
        deltas: dict[str, Any] = {"sections": dict(_SECTIONS), "caches": dict(_CACHES)}
        _SECTIONS.clear()
        _CACHES.clear()
    node_counters.add(_paths(directory)[1], deltas)


def set_enabled(directory: Path, on: bool) -> None:
    """ENABLE (counters of the node reset, as IndexTables4Spark's ENABLE does) or DISABLE (counters
    kept, still readable) the profiler on the node whose split-cache directory is ``directory``."""
    global ENABLED
    flag, counters = _paths(directory)
    if on:
        flag.parent.mkdir(parents=True, exist_ok=True)
        with _LOCK:
            _SECTIONS.clear()
            _CACHES.clear()
        node_counters.read(counters, reset=True)
        flag.touch()
    else:
        flag.unlink(missing_ok=True)
    ENABLED = on


def counters(directory: Path, reset: str | None = None) -> dict[str, Any]:
    """The node's counters: ``{"sections": {name: [count, total_ns, min_ns, max_ns]}, "caches":
    {"<cache>_hit": n, ...}}``. ``reset``: ``"sections"`` or ``"caches"`` zeroes those in the same step
    (returning their values before the reset)."""
    flush(directory)
    path = _paths(directory)[1]
    if reset is None:
        return node_counters.read(path)
    return node_counters.read(path, reset=True, keys=(reset,))


def is_enabled(directory: Path) -> bool:
    """Whether the node's flag is set (without switching this process)."""
    return _paths(directory)[0].exists()
