"""Aggregations pushed to the index: per-split aggregation requests (``aggregate``) and planned
group aggregates (``group_aggregate``), answered by the log's record counts where they can be."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from executor_lib import profiler
from executor_lib.log.files.live_files import LiveFiles, partition_strings
from executor_lib.log.files.pruning import prune_snapshot
from executor_lib.protocol.actions import (
    AddAction,
    parquet_table_root,
)
from executor_lib.spark import options as O
from executor_lib.spark.commands.base import (
    CommandReader,
    partition_mask,
    register,
    typed_partitions,
)
from executor_lib.spark.common import (
    DATA_SKIPPING_FILE,
    node_split_cache,
    parsed_option,
    partition_constants,
    pinned_snapshot,
    planning_counters_dir,
    profiled_task,
    typed_filter,
)
from executor_lib.spark.reader import (
    check_filter,
    doc_mappings,
    plan_tasks,
    prunable,
    query_strings,
    unknown_columns_text,
)
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError
from indextables_contract.read import PARALLELISM as READ_PARALLELISM

if TYPE_CHECKING:
    from executor_lib.log.snapshot import Snapshot


@dataclass(frozen=True)
class LogCounts:
    """A ``group_aggregate`` answered by the transaction log's record counts: the partial results (JSON)."""

    partials: str


@dataclass(frozen=True)
class SplitScan:
    """A ``group_aggregate`` task's splits (with their doc mappings), aggregated by the task."""

    splits: list[tuple[AddAction, str | None]]


def plan_aggregate(r: CommandReader, cmd: C.Aggregate) -> list[Any]:
    """A task per split (with its doc mapping); a query that does not parse fails here, before any task."""
    snapshot = r.table_log().snapshot()
    if cmd.filter is not None:
        where = F.from_text(cmd.filter, "option filter")
        schema = snapshot.arrow_schema()
        check_filter(
            where,
            f"aggregate over {r.path}",
            schema,
            lambda: doc_mappings(snapshot),
            strict=S.READ_STRICT_QUERIES.get(r.options),
        )
    return [[(f, snapshot.doc_mapping(f))] for f in sorted(snapshot.files, key=lambda a: a.path)]


def run_aggregate(r: CommandReader, cmd: C.Aggregate, payload: Any) -> Iterator[tuple[Any, ...]]:
    """One split's aggregation result (avg computed as stats, so partial results merge exactly)."""
    from executor_lib.splits.query.pushdown import plan
    from executor_lib.splits.search.split_opening import damage_of_split, open_searcher
    from executor_lib.storage import open_store

    request = json.loads(cmd.aggregations)
    store = open_store(r.path, **O.storage_and_log_options(r.options))
    cache = node_split_cache(r.options)
    where = F.from_text(cmd.filter, "option filter") if cmd.filter is not None else None
    where = O.with_fuzzy_setting(where, r.options)
    snapshot = r.table_log().snapshot()
    snapshot_schema = snapshot.arrow_schema()
    root = parquet_table_root(snapshot.metadata.configuration, r.options)
    with profiled_task(cache.directory):
        for add, mapping in payload:
            searcher = open_searcher(
                cache, store, add.path, snapshot_schema, mapping, add.size, add.footer_start_offset, root
            )
            query = None
            if where is not None:
                filter_plan = plan(where, [searcher.mapping], snapshot_schema)
                if filter_plan.residual is not None:
                    raise ConfigError(
                        f"aggregate: the query {F.to_json(where)} is not answered exactly by the index of {add.path}"
                    )
                query = filter_plan.index
            t0 = time.perf_counter_ns() if profiler.ENABLED else 0
            with damage_of_split(cache, store, add.path):
                result = searcher.aggregate(split_request(request), query)
            if t0:
                profiler.record("agg_split", t0)
            yield add.path, json.dumps(result)


def plan_group_aggregate(r: CommandReader, cmd: C.GroupAggregate) -> list[LogCounts] | list[SplitScan]:
    """One payload per task: ``LogCounts`` when the log's record counts answer the plan (``count(*)``
    only, filters and groups on partition columns only), else a ``SplitScan`` per task."""
    from executor_lib import node_counters
    from indextables_contract.aggregate import AggregatePlan, partials_to_json
    from indextables_contract.errors import AggregatePlanError

    try:
        agg = AggregatePlan.from_json(cmd.plan)
    except AggregatePlanError as e:
        raise ConfigError(f"aggregate over {r.path}: {e}") from e
    snapshot = pinned_snapshot(r.path, r.options)
    schema = snapshot.arrow_schema()
    agg = _resolve_names(agg, schema.names)
    r.command = dataclasses.replace(cmd, plan=agg.to_json())  # the tasks' plan
    where = None if agg.filter is None else F.from_text(agg.filter, "option filter")
    where = None if where is None else typed_filter(where, schema, r.time_zone)
    named = {*agg.group_by, *agg.measured_columns(), *(F.columns_of(where) if where is not None else ())}
    unknown = sorted(named - set(schema.names))
    if unknown:
        raise ConfigError(f"read {r.path}: {unknown_columns_text(unknown, schema.names)}")
    if where is not None:  # a query that does not parse fails here, before any task
        check_filter(
            where, f"read {r.path}", schema, lambda: doc_mappings(snapshot), strict=S.READ_STRICT_QUERIES.get(r.options)
        )
    r.table_schema = snapshot.metadata.schema_string
    r.companion_root = parquet_table_root(snapshot.metadata.configuration, r.options)
    partition_columns = r.partition_columns = list(snapshot.partition_columns)
    on_partitions = set(partition_columns).issuperset
    if (
        agg.counts_only()
        and on_partitions(agg.group_by)
        and (where is None or (on_partitions(F.columns_of(where)) and not query_strings(where)))
    ):
        counts = _log_counts(snapshot, where, agg.group_by)
        if counts is not None:
            return [LogCounts(partials_to_json(counts))]
    if where is not None and prunable(F.columns_of(where), partition_columns, schema):
        files, counts = prune_snapshot(snapshot, [where])
        directory = planning_counters_dir(r.options)
        if directory is not None:
            node_counters.add(directory / DATA_SKIPPING_FILE, counts)
    else:
        files = snapshot.files
    groups = plan_tasks(  # an aggregate reads fast fields, a small part of each split: one wave
        files,
        S.READ_TARGET_PARTITION_BYTES.get(r.options),
        S.READ_MAX_SPLITS_PER_PARTITION.get(r.options),
        parsed_option(r.options, READ_PARALLELISM, O.parse_positive_int),
        light=True,
    )
    return [SplitScan([(a, snapshot.doc_mapping(a)) for a in g]) for g in groups] or [SplitScan([])]


def group_rows_at_analysis(r: CommandReader) -> list[tuple[Any, ...]] | None:
    """The result rows when planning answered the command (the transaction log's record counts)."""
    if len(r.plan) == 1 and isinstance(r.plan[0], LogCounts):
        return _log_rows(r, r.plan[0].partials)
    return None


def _log_rows(r: CommandReader, partials: str) -> list[tuple[Any, ...]]:
    return [(partials, r.table_schema, 0, 0, 0, True)]


def run_group_aggregate(
    r: CommandReader, cmd: C.GroupAggregate, task: LogCounts | SplitScan
) -> Iterator[tuple[Any, ...]]:
    """The task's splits aggregated (``executor_lib.splits.search.group_aggregate``) and merged."""
    from executor_lib.splits.search.group_aggregate import aggregate_split
    from executor_lib.splits.search.split_opening import damage_of_split, open_searcher
    from executor_lib.storage import open_store
    from executor_lib.table_schema import spark_json_to_arrow
    from indextables_contract.aggregate import AggregatePlan, Partials, merge_into, partials_to_json

    if isinstance(task, LogCounts):
        yield from _log_rows(r, task.partials)
        return
    body = task.splits
    agg = AggregatePlan.from_json(cmd.plan)
    schema = spark_json_to_arrow(r.table_schema)
    where = None if agg.filter is None else F.from_text(agg.filter, "option filter")
    where = O.with_fuzzy_setting(where, r.options)
    where = None if where is None else typed_filter(where, schema, r.time_zone)
    store = open_store(r.path, **O.storage_and_log_options(r.options))
    cache = node_split_cache(r.options)
    merged: Partials = {}
    routes = {"index": 0, "rows": 0}
    with profiled_task(cache.directory):
        for add, mapping in body:
            searcher = open_searcher(
                cache,
                store,
                add.path,
                schema,
                mapping,
                add.size,
                add.footer_start_offset,
                r.companion_root,
            )
            constants = partition_constants(add.partition_values, r.partition_columns, schema)
            t0 = time.perf_counter_ns() if profiler.ENABLED else 0
            with damage_of_split(cache, store, add.path):
                partials, route = aggregate_split(searcher, agg, where, schema, constants)
            if t0:
                profiler.record("agg_split", t0)
            merge_into(merged, partials)
            routes[route] += 1
    yield partials_to_json(merged), r.table_schema, len(body), routes["index"], routes["rows"], False


def split_request(request: Mapping[str, Any]) -> dict[str, Any]:
    """The per-split form of an aggregation request: ``avg`` becomes ``stats`` (sum and count merge
    exactly) and ``terms`` asks each split for more buckets than the final size."""
    out: dict[str, Any] = {}
    for name, spec in request.items():
        spec = dict(spec)
        if "avg" in spec:
            spec["stats"] = spec.pop("avg")
        if "terms" in spec:
            terms = dict(spec["terms"])
            terms["size"] = int(terms.get("size", 10)) * 5 + 100
            spec["terms"] = terms
        if "aggs" in spec:
            spec["aggs"] = split_request(spec["aggs"])
        out[name] = spec
    return out


def _resolve_names(agg: Any, columns: list[str]) -> Any:
    """The plan with its column names matched case-insensitively to the table's (as Spark resolves them)."""
    from indextables_contract.aggregate import AggregatePlan, Measure

    by_lower = {c.lower(): c for c in columns}

    def resolve(name: str) -> str:
        return by_lower.get(name.lower(), name)

    tree = None if agg.filter is None else F.resolve_columns(F.from_text(agg.filter, "option filter"), columns)
    where = None if tree is None else json.dumps(F.to_json(tree))
    return AggregatePlan(
        tuple(resolve(c) for c in agg.group_by),
        tuple(Measure(m.func, m.column and resolve(m.column)) for m in agg.measures),
        where,
    )


def _log_counts(snapshot: Snapshot, where: F.Filter | None, group_by: tuple[str, ...]) -> Any | None:
    """``count(*)`` per group of partition values, from the files' record counts: no split is opened,
    and no file becomes an object (record counts summed per distinct partition as Arrow columns, then
    ``where`` judged once per partition). None if a live file has no record count."""
    from indextables_contract.aggregate import count_partials

    columns = list(snapshot.partition_columns)
    live = snapshot.state.files
    if isinstance(live, LiveFiles):  # summed per partition through each chunk's partition index
        totals = live.partition_totals("num_records", columns)
        if totals is None:
            return None
        if not columns:
            return count_partials({(): sum(totals.values())})
        partitions = pa.table({c: pa.array([k[i] for k in totals], pa.string()) for i, c in enumerate(columns)})
        total = list(totals.values())
    else:
        files = snapshot.file_columns(["num_records", "partition_values"])
        records = files.column("num_records")
        if records.null_count:
            return None
        if not columns:
            return count_partials({(): int(pc.sum(records).as_py() or 0)})
        strings = partition_strings(files.column("partition_values"), columns)
        sums = pa.table({**strings, "records": records}).group_by(columns).aggregate([("records", "sum")])
        partitions, total = sums.select(columns), sums.column("records_sum").to_pylist()
    keys = typed_partitions(partitions, snapshot.arrow_schema()).select(list(group_by)).to_pylist()
    counts: dict[tuple[Any, ...], int] = {}
    for key, n, keep in zip(keys, total, partition_mask(snapshot, where, partitions), strict=True):
        if keep:
            group = tuple(key[c] for c in group_by)
            counts[group] = counts.get(group, 0) + int(n)
    return count_partials(counts)


register(C.Aggregate, run_aggregate, plan=plan_aggregate)
register(C.GroupAggregate, run_group_aggregate, plan=plan_group_aggregate, at_analysis=group_rows_at_analysis)
