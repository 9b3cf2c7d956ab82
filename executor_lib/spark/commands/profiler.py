"""The profiler and data-skipping counters of every node: enable, disable, describe, reset."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from executor_lib import profiler
from executor_lib.spark.commands.base import (
    CommandReader,
    register,
)
from executor_lib.spark.common import (
    data_skipping_file,
    node_split_cache,
)
from indextables_contract import commands as C
from indextables_contract.errors import ConfigError


def plan_profiler(r: CommandReader, cmd: C.Profiler) -> list[Any]:
    """The driver's node now, then one row per task."""
    _check_action(r, cmd.action, C.PROFILER_ACTIONS)
    driver = _profiler_row(Path(node_split_cache(r.options).directory), cmd.action, "driver")
    return [driver, *([None] * cmd.tasks)]


def plan_data_skipping(r: CommandReader, cmd: C.DataSkipping) -> list[Any]:
    """Scans are planned on the driver's node: its counts."""
    from executor_lib import node_counters

    _check_action(r, cmd.action, C.DATA_SKIPPING_ACTIONS)
    path = data_skipping_file(r.options)
    counts = node_counters.read(path, reset=cmd.action != "describe")
    return [(socket.gethostname(), str(path.parent), json.dumps(counts))]


def _check_action(r: CommandReader, action: str, known: Any) -> None:
    if action not in known:
        raise ConfigError(f"command {r.name}: option action={action!r}: expected one of {known}")


def run_profiler(r: CommandReader, cmd: C.Profiler, payload: Any) -> Iterator[tuple[Any, ...]]:
    if payload is not None:  # the driver's node, done when planning
        yield payload
        return
    yield _profiler_row(Path(node_split_cache(r.options).directory), cmd.action, "executor")


def run_data_skipping(r: CommandReader, cmd: C.DataSkipping, payload: Any) -> Iterator[tuple[Any, ...]]:
    yield payload


def _profiler_row(directory: Path, action: str, role: str) -> tuple[Any, ...]:
    """Do ``action`` (``C.PROFILER_ACTIONS``) on this node's profiler; its row of ``C.Profiler.RESULT``."""
    counters: dict[str, Any] = {}
    if action in ("enable", "disable"):
        profiler.set_enabled(directory, action == "enable")
    elif action == "describe":
        counters = profiler.counters(directory)
    else:
        counters = profiler.counters(directory, reset="sections" if action == "reset_sections" else "caches")
    return socket.gethostname(), str(directory), role, profiler.is_enabled(directory), json.dumps(counters)


register(C.Profiler, run_profiler, plan=plan_profiler)
register(C.DataSkipping, run_data_skipping, plan=plan_data_skipping)
