"""Commands on the nodes' caches: PREWARM, DESCRIBE/FLUSH the split cache, FLUSH the searcher
cache, and the split component sizes a cache holds."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator, Mapping
from typing import Any

from executor_lib import profiler
from executor_lib.spark import options as O
from executor_lib.spark.commands.base import (
    CommandReader,
    matching_files,
    register,
    worker,
)
from executor_lib.spark.common import (
    node_split_cache,
    profiled_task,
)
from indextables_contract import commands as C


def run_prewarm(r: CommandReader, cmd: C.Prewarm, payload: Any) -> Iterator[tuple[Any, ...]]:
    from executor_lib.storage import open_store

    footer_only = cmd.footer_only
    store = open_store(r.path, **O.storage_and_log_options(r.options))
    cache = node_split_cache(r.options)
    with profiled_task(cache.directory):
        for add in payload:
            t0 = time.perf_counter_ns() if profiler.ENABLED else 0
            cache.prewarm(store, add, footer_only=footer_only)
            if t0:
                profiler.record("prewarm_components", t0)
            yield add.path, add.size, socket.gethostname(), footer_only


def run_describe_cache(r: CommandReader, cmd: C.DescribeCache, _: Any) -> Iterator[tuple[Any, ...]]:

    yield _cache_row(node_split_cache(r.options).describe())


def run_flush_cache(r: CommandReader, cmd: C.FlushCache, _: Any) -> Iterator[tuple[Any, ...]]:

    cache = node_split_cache(r.options)
    cache.flush()
    yield _cache_row(cache.describe())


def run_flush_searcher_cache(r: CommandReader, cmd: C.FlushSearcherCache, _: Any) -> Iterator[tuple[Any, ...]]:
    from executor_lib.splits.search.split_opening import close_kept_searchers

    searchers = close_kept_searchers()
    yield "split_searchers", "success", searchers, f"closed {searchers} open split searchers on {worker()}"
    cache = node_split_cache(r.options)
    footers = len(cache._footers)
    cache._footers.clear()
    yield "split_footers", "success", footers, f"dropped {footers} split footers held in memory on {worker()}"


def run_component_sizes(r: CommandReader, cmd: C.ComponentSizes, payload: Any) -> Iterator[tuple[Any, ...]]:
    from executor_lib.storage import open_store

    store = open_store(r.path, **O.storage_and_log_options(r.options))
    cache = node_split_cache(r.options)
    for add in payload:
        footer = cache.footer(store, add)
        sizes: dict[tuple[str, str], int] = {}
        for name, (begin, end) in footer.files.items():
            part = _component_of(name)
            sizes[part] = sizes.get(part, 0) + (end - begin)
        values = json.dumps(add.partition_values, sort_keys=True) if add.partition_values else None
        for (key, kind), size in sorted(sizes.items()):
            yield add.path, values, key, size, kind, None


def _cache_row(d: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        socket.gethostname(),
        os.getpid(),
        d.get("directory"),
        d.get("maxBytes"),
        d.get("splitsCached"),
        d.get("bytesCached"),
        d.get("hits", 0),
        d.get("misses", 0),
        d.get("bytes_downloaded", 0),
    )


_COMPONENTS = {
    "term": ("_term_total", "term"),
    "idx": ("_postings_total", "postings"),
    "pos": ("_positions_total", "positions"),
    "store": ("_store", "store"),
    "fast": ("_fastfield_total", "fastfield"),
    "fieldnorm": ("_fieldnorm_total", "fieldnorm"),
}


def _component_of(member: str) -> tuple[str, str]:
    extension = member.rsplit(".", 1)[-1] if "." in member else ""
    return _COMPONENTS.get(extension, ("_other", "other"))


def plan_prewarm(r: CommandReader, cmd: C.Prewarm) -> list[Any]:
    """A task per split whose partition the WHERE selects."""
    snapshot = r.table_log().snapshot()
    files = matching_files(snapshot, r.partition_filter(snapshot))
    return [[f] for f in sorted(files, key=lambda a: a.path)]


def plan_component_sizes(r: CommandReader, cmd: C.ComponentSizes) -> list[Any]:
    """A task per 16 splits whose partition the WHERE selects."""
    snapshot = r.table_log().snapshot()
    files = sorted(matching_files(snapshot, r.partition_filter(snapshot)), key=lambda a: a.path)
    return [files[i : i + 16] for i in range(0, len(files), 16)]


register(C.Prewarm, run_prewarm, plan=plan_prewarm)
register(C.DescribeCache, run_describe_cache)
register(C.FlushCache, run_flush_cache)
register(C.FlushSearcherCache, run_flush_searcher_cache)
register(C.ComponentSizes, run_component_sizes, plan=plan_component_sizes)
