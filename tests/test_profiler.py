"""The read-path profiler's node counters (``executor_lib.profiler``, ``executor_lib.node_counters``)
without Spark: the switch is a flag file of the node, a process's counts reach the node's file when it
flushes, RESET zeroes sections or caches alone and returns what it zeroed, and several processes of
one node add up (the SQL statements run in tests/connect_plugin/test_jvm_sql.py)."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from executor_lib import node_counters, profiler


def _one_process(directory: str) -> None:
    profiler.sync(Path(directory))
    if profiler.ENABLED:
        profiler.record("query_search", time.perf_counter_ns())
        profiler.cache_event("l2_disk", hit=False)
    profiler.flush(Path(directory))


def test_enable_record_flush_reset(tmp_path: Path) -> None:
    assert not profiler.sync(tmp_path) and not profiler.is_enabled(tmp_path)
    profiler.set_enabled(tmp_path, True)
    try:
        assert profiler.sync(tmp_path)
        t0 = time.perf_counter_ns()
        profiler.record("split_open", t0)
        profiler.record("split_open", t0)
        profiler.cache_event("searcher", hit=True)
        profiler.cache_event("searcher", hit=False, n=2)
        counters = profiler.counters(tmp_path)  # flushes this process first
        calls, total, least, most = counters["sections"]["split_open"]
        assert calls == 2 and 0 < least <= most and least + most <= total + most
        assert counters["caches"] == {"searcher_hit": 1, "searcher_miss": 2}
        context = multiprocessing.get_context("spawn")  # other processes of the node
        workers = [context.Process(target=_one_process, args=(str(tmp_path),)) for _ in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert profiler.counters(tmp_path)["sections"]["query_search"][0] == 2
        before = profiler.counters(tmp_path)
        assert profiler.counters(tmp_path, reset="sections") == {"sections": before["sections"]}
        assert "sections" not in profiler.counters(tmp_path)  # the caches stay
        assert profiler.counters(tmp_path, reset="caches")["caches"]["l2_disk_miss"] == 2
        assert profiler.counters(tmp_path) == {}
    finally:
        profiler.set_enabled(tmp_path, False)
    assert not profiler.sync(tmp_path) and not profiler.ENABLED


def test_enable_resets_and_disable_keeps(tmp_path: Path) -> None:
    profiler.set_enabled(tmp_path, True)
    profiler.record("plan_prune", time.perf_counter_ns())
    profiler.set_enabled(tmp_path, False)  # DISABLE: counters kept
    assert profiler.counters(tmp_path)["sections"]["plan_prune"][0] == 1
    profiler.set_enabled(tmp_path, True)  # ENABLE: counters reset
    try:
        assert profiler.counters(tmp_path) == {}
    finally:
        profiler.set_enabled(tmp_path, False)


def test_counters_merge_timings_and_nested_counts(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    node_counters.add(path, {"t": [1, 10, 10, 10], "n": 1, "kinds": {"Term": 2}})
    node_counters.add(path, {"t": [2, 6, 2, 4], "n": 2, "kinds": {"Term": 1, "Between": 1}})
    assert node_counters.read(path) == {"t": [3, 16, 2, 10], "n": 3, "kinds": {"Term": 3, "Between": 1}}
    assert node_counters.read(path, reset=True)["n"] == 3 and node_counters.read(path) == {}


def test_an_unknown_action_is_named_before_anything_runs() -> None:
    from executor_lib.spark.commands import CommandReader
    from indextables_contract.errors import ConfigError

    for name in ("profiler", "data_skipping"):
        with pytest.raises(ConfigError, match=f"command {name}: option action='nope': expected one of"):
            CommandReader({"command": name, "action": "nope"})
