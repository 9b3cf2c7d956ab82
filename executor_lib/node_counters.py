"""Counters one node's processes share: a small JSON file in a node-local directory, updated under a lock.

Spark runs a node's work in several Python worker processes; each keeps its counts in memory
while a task runs and adds them to the node's file once, when the task ends (``add``), so any
process of the node (a DESCRIBE task, the driver's planner) reads the node's totals (``read``),
optionally zeroing them in the same locked step (``read(..., reset=True)``). Used by the read-path
profiler (``executor_lib.profiler``) and the data-skipping statistics of scan planning.

A counter file is a JSON object whose values are integers (summed), timings ``[count, total_ns,
min_ns, max_ns]`` (counts and totals summed, the least minimum and the greatest maximum kept) or
objects of either (merged key by key).

    add(Path("/tmp/c/profiler.json"), {"sections": {"query_search": [1, 5000, 5000, 5000]}})
    read(Path("/tmp/c/profiler.json"))   # {'sections': {'query_search': [1, 5000, 5000, 5000]}}
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from executor_lib.file_lock import exclusive_lock
from indextables_contract.commands import merge_counters as merge


def add(path: Path, deltas: Mapping[str, Any]) -> None:
    """Add ``deltas`` to the node's counters in ``path`` (created with its directory if absent)."""
    if not deltas:
        return
    with exclusive_lock(path.with_name(path.name + ".lock")):
        counters = _load(path)
        _store(path, merge(counters, deltas))


def read(path: Path, reset: bool = False, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The node's counters in ``path`` ({} when none were recorded); ``reset``: zero them in the same
    locked step (only the top-level ``keys`` when given, e.g. ``("sections",)``)."""
    if not reset:
        return _load(path)
    with exclusive_lock(path.with_name(path.name + ".lock")):
        counters = _load(path)
        kept = {} if keys is None else {k: v for k, v in counters.items() if k not in keys}
        _store(path, kept)
    return counters if keys is None else {k: v for k, v in counters.items() if k in keys}


def _load(path: Path) -> dict[str, Any]:
    try:
        loaded = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _store(path: Path, counters: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(counters))
    os.replace(tmp, path)
