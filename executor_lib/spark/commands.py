"""Maintenance commands as Spark work: ``format("indextables").option("command", NAME)``.

Every IndexTables command (history, describe, checkpoint, purge, merge, prewarm, cache ...) is
a read of the ``indextables`` data source with a ``command`` option, so it runs on the
cluster as an ordinary Spark job (visible in the Spark UI) and a Spark Connect client needs
neither tantivy nor storage credentials. Each command has a fixed result schema.

MERGE SPLITS is two steps: ``command=merge_plan`` reads one row per merge group (one input
partition each, planned on the driver side at one pinned version), and writing those rows with
``command=merge`` merges the groups in parallel on executors; the writer's commit then removes
all sources and adds all merged splits in one version (a concurrent merge of the same splits
makes it fail with a conflict; concurrent appends commute).
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceReader, InputPartition, WriterCommitMessage

from executor_lib import profiler
from executor_lib.log.pruning import column_types
from executor_lib.protocol.actions import (
    AddAction,
    CommitInfoAction,
    RemoveAction,
    parquet_table_root,
    removes_of,
)
from executor_lib.spark import options as O
from executor_lib.spark.common import (
    DATA_SKIPPING_FILE,
    data_skipping_file,
    delete_quietly,
    node_split_cache,
    parsed_option,
    partition_constants,
    pinned_snapshot,
    planning_counters_dir,
    profiled_task,
    typed_filter,
)
from executor_lib.spark.progress import TaskProgress, interval_seconds
from executor_lib.spark.reader import (
    DEFAULT_PARTITION_BYTES,
    DEFAULT_SPLITS_PER_PARTITION,
    check_filter,
    doc_mappings,
    plan_tasks,
    prunable,
    query_strings,
    unknown_columns_text,
)
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract.errors import CommandError, ConfigError
from indextables_contract.read import PARALLELISM as READ_PARALLELISM
from indextables_contract.values import as_duration

if TYPE_CHECKING:
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.log.snapshot import Snapshot
    from executor_lib.storage.base import ObjectStore

# Options a command read may carry beyond its arguments (a pinned version; the read settings of
# a pushed aggregate's tasks).
COMMAND_KEYS = (*C.option_keys(), "versionAsOf", "timestampAsOf")
# The commitInfo operation parameter that records a merge's id: the Merge command's option name.
MERGE_ID_PARAMETER = C.option_key("merge_id")
# Spark types a merge sort key may have: those split statistics (min/max) are kept for.
SORTABLE_TYPES = frozenset(
    {"byte", "short", "integer", "long", "float", "double", "string", "date", "timestamp", "timestamp_ntz"}
)


def command_schema(raw_options: Mapping[str, str]) -> Any:
    """The command's result schema (DDL: no JVM is needed to parse it in a Python worker). A
    ``group_aggregate`` with a ``request`` that the transaction log answers carries its result rows
    in the schema (``RESULT_ROWS_METADATA``): the client needs no Spark job for them."""
    cls = _command_class(raw_options)
    if cls is C.GroupAggregate and getattr(decode(raw_options), "request", None):
        rows = CommandReader(raw_options).rows_at_analysis()
        if rows is not None:
            return _result_struct(cls.RESULT, {C.RESULT_ROWS_METADATA: json.dumps(rows)})
    return cls.RESULT


def _result_struct(ddl: str, metadata: Mapping[str, str]) -> Any:
    """A result schema's DDL (names and simple types) as a StructType, ``metadata`` on its first field."""
    from pyspark.sql.types import BooleanType, DoubleType, IntegerType, LongType, StringType, StructField, StructType

    types = {"string": StringType, "long": LongType, "int": IntegerType, "boolean": BooleanType, "double": DoubleType}
    fields = []
    for i, column in enumerate(ddl.split(",")):
        name, type_name = column.split()
        fields.append(StructField(name, types[type_name](), True, dict(metadata) if i == 0 else None))
    return StructType(fields)


def _command_class(raw_options: Mapping[str, str]) -> type[C.Command]:
    try:
        return C.COMMANDS[C.command_name(raw_options)]
    except CommandError as e:
        raise ConfigError(str(e)) from e


def decode(raw_options: Mapping[str, str]) -> C.Command:
    """The typed command the options carry; ConfigError naming the option that is wrong."""
    try:
        return C.decode_command(raw_options)
    except CommandError as e:
        raise ConfigError(str(e)) from e


def _options(raw: Mapping[str, str], name: str) -> dict[str, str]:
    return O.canonical_options(raw, (*O.READ_KEYS, *COMMAND_KEYS), (), (), f"command {name}")


class MergeTask(NamedTuple):
    """A ``merge_plan`` task's payload, planned on the driver side: one merge group (its row, as the
    client writes it back with ``command=merge``)."""

    group: int
    partition_values: dict[str, str | None]
    sources: list[str]  # the split paths merged
    size: int  # their bytes
    version: int  # the snapshot the plan read
    sort_key: str | None
    target: int  # the target split size in bytes


@dataclass(frozen=True)
class LogCounts:
    """A ``group_aggregate`` answered by the transaction log's record counts: the partial results (JSON)."""

    partials: str


@dataclass(frozen=True)
class SplitScan:
    """A ``group_aggregate`` task's splits (with their doc mappings), aggregated by the task."""

    splits: list[tuple[AddAction, str | None]]


class CommandPartition(InputPartition):
    def __init__(self, index: int, payload: Any = None) -> None:
        super().__init__(index)
        self.payload = payload


class CommandReader(DataSourceReader):
    """Plans a command on the driver side; runs it in tasks."""

    def __init__(self, raw_options: Mapping[str, str]) -> None:
        self.command = decode(raw_options)
        if self.command.WRITE:
            raise ConfigError(f"command {self.command.NAME} is written, not read (write merge_plan rows with it)")
        self.name = self.command.NAME
        self.options = _options(raw_options, self.name)
        self.time_zone = self.options.get("sessionTimeZone")  # of timestamp literals without an offset
        if isinstance(self.command, C.TABLELESS):
            self.path = ""
        else:
            self.path = str(raw_options.get("path") or "")
            if not self.path:
                raise ConfigError(f"command {self.name}: no table path")
            if not isinstance(self.command, (C.GroupAggregate, C.CompanionPlan)):  # (a companion may not exist yet)
                self._log().latest_version()  # TableNotFoundError before any task runs
        self.plan: list[Any] = self._plan()

    def _log(self) -> Any:
        from executor_lib.log.tables import open_log

        return open_log(self.path, **O.storage_and_log_options(self.options))

    def _where(self, snapshot: Snapshot) -> F.Filter | None:
        text = getattr(self.command, "filter", None)
        if text is None:
            return None
        where = F.from_text(text, "option filter")
        if query_strings(where):
            raise ConfigError(
                f"{self.name} {self.path}: the WHERE selects partitions, so it cannot use indexquery, textsearch "
                f"or fieldmatch; name partition columns {list(snapshot.partition_columns)}"
            )
        unknown = sorted(F.columns_of(where) - set(snapshot.partition_columns))
        if unknown and isinstance(self.command, (C.DropPartitions, C.MergePlan)):
            raise ConfigError(
                f"{self.name} {self.path}: the predicate may name partition columns only "
                f"{list(snapshot.partition_columns)}, not {unknown}"
            )
        return where

    def _plan(self) -> list[Any]:
        """Per-task payloads (planned here, on the driver side)."""
        cmd = self.command
        if isinstance(cmd, (C.Profiler, C.DataSkipping)):
            known = C.PROFILER_ACTIONS if isinstance(cmd, C.Profiler) else C.DATA_SKIPPING_ACTIONS
            if cmd.action not in known:
                raise ConfigError(f"command {self.name}: option action={cmd.action!r}: expected one of {known}")
        if isinstance(cmd, C.Profiler):  # the driver's node now, then one row per task
            driver = _profiler_row(Path(node_split_cache(self.options).directory), cmd.action, "driver")
            return [driver, *([None] * cmd.tasks)]
        if isinstance(cmd, C.DataSkipping):  # scans are planned on the driver's node: its counts
            from executor_lib import node_counters

            path = data_skipping_file(self.options)
            counts = node_counters.read(path, reset=cmd.action != "describe")
            return [(socket.gethostname(), str(path.parent), json.dumps(counts))]
        if isinstance(cmd, C.TABLELESS) and not isinstance(cmd, C.DataSkipping):
            return list(range(cmd.tasks))
        if isinstance(cmd, C.MergePlan):
            return self._plan_merges(cmd)
        if isinstance(cmd, C.Aggregate):
            snapshot = self._log().snapshot()
            if cmd.filter is not None:  # a query that does not parse fails here, before any task
                where = F.from_text(cmd.filter, "option filter")
                schema = snapshot.arrow_schema()
                check_filter(where, f"aggregate over {self.path}", schema, lambda: doc_mappings(snapshot))
            return [[(f, snapshot.doc_mapping(f))] for f in sorted(snapshot.files, key=lambda a: a.path)]
        if isinstance(cmd, C.GroupAggregate):
            return self._plan_group_aggregate(cmd)
        if isinstance(cmd, C.CompanionPlan):
            from executor_lib.spark.companion import plan_companion

            return plan_companion(self.path, cmd, self.options)
        if isinstance(cmd, C.Prewarm):
            snapshot = self._log().snapshot()
            files = _matching_files(snapshot, self._where(snapshot))
            return [[f] for f in sorted(files, key=lambda a: a.path)] or []
        if isinstance(cmd, C.ComponentSizes):
            snapshot = self._log().snapshot()
            files = sorted(_matching_files(snapshot, self._where(snapshot)), key=lambda a: a.path)
            return [files[i : i + 16] for i in range(0, len(files), 16)]
        return [None]

    def _plan_merges(self, cmd: C.MergePlan) -> list[MergeTask]:
        from executor_lib.splits.build.merge_plan import DEFAULT_TARGET_BYTES

        snapshot = self._log().snapshot()
        files = _matching_files(snapshot, self._where(snapshot))
        target = DEFAULT_TARGET_BYTES
        if cmd.target_size is not None:
            target = O.parse_size(C.option_key("target_size"), cmd.target_size)
        option = C.option_key("sort_key") if cmd.sort_key is not None else SORT_KEY_SETTING
        value = cmd.sort_key if cmd.sort_key is not None else self.options.get(option)
        sort_key = merge_sort_key(snapshot, option, value)
        max_sources = cmd.max_source_splits_per_merge or self._max_sources()
        groups = plan_merge_groups(
            snapshot, files, target, sort_key, cmd.min_splits_to_merge or 2, cmd.max_dest_splits, max_sources
        )
        version = snapshot.version
        return [
            MergeTask(i, g.partition_values, [a.path for a in g.sources], g.size, version, g.sort_key, target)
            for i, g in enumerate(groups)
        ]

    def _max_sources(self) -> int:
        return int(parsed_option(self.options, MAX_SOURCES_SETTING, O.parse_positive_int, DEFAULT_MAX_SOURCES))

    def _plan_group_aggregate(self, cmd: C.GroupAggregate) -> list[LogCounts] | list[SplitScan]:
        """One payload per task: ``LogCounts`` when the log's record counts answer the plan (``count(*)``
        only, filters and groups on partition columns only), else a ``SplitScan`` per task."""
        from executor_lib import node_counters
        from executor_lib.log.pruning import prune_scan
        from indextables_contract.aggregate import AggregatePlan, partials_to_json
        from indextables_contract.errors import AggregatePlanError

        try:
            agg = AggregatePlan.from_json(cmd.plan)
        except AggregatePlanError as e:
            raise ConfigError(f"aggregate over {self.path}: {e}") from e
        snapshot = pinned_snapshot(self.path, self.options)
        schema = snapshot.arrow_schema()
        agg = _resolve_names(agg, schema.names)
        self.command = dataclasses.replace(cmd, plan=agg.to_json())  # the tasks' plan
        where = None if agg.filter is None else F.from_text(agg.filter, "option filter")
        where = None if where is None else typed_filter(where, schema, self.time_zone)
        named = {*agg.group_by, *agg.measured_columns(), *(F.columns_of(where) if where is not None else ())}
        unknown = sorted(named - set(schema.names))
        if unknown:
            raise ConfigError(f"read {self.path}: {unknown_columns_text(unknown, schema.names)}")
        if where is not None:  # a query that does not parse fails here, before any task
            check_filter(where, f"read {self.path}", schema, lambda: doc_mappings(snapshot))
        self.table_schema = snapshot.metadata.schema_string
        self.companion_root = parquet_table_root(snapshot.metadata.configuration, self.options)
        partition_columns = self.partition_columns = list(snapshot.partition_columns)
        on_partitions = set(partition_columns).issuperset
        files = snapshot.files
        if (
            agg.counts_only()
            and on_partitions(agg.group_by)
            and (where is None or (on_partitions(F.columns_of(where)) and not query_strings(where)))
            and all(a.num_records is not None for a in files)
        ):
            return [LogCounts(partials_to_json(_log_counts(snapshot, where, agg.group_by)))]
        if where is not None and prunable(F.columns_of(where), partition_columns, schema):
            files, counts = prune_scan(files, [where], snapshot.metadata.schema_string, partition_columns)
            directory = planning_counters_dir(self.options)
            if directory is not None:
                node_counters.add(directory / DATA_SKIPPING_FILE, counts)
        groups = plan_tasks(  # an aggregate reads fast fields, a small part of each split: one wave
            files,
            parsed_option(
                self.options, "spark.indextables.read.targetPartitionBytes", O.parse_size, DEFAULT_PARTITION_BYTES
            ),
            parsed_option(
                self.options,
                "spark.indextables.read.maxSplitsPerPartition",
                O.parse_positive_int,
                DEFAULT_SPLITS_PER_PARTITION,
            ),
            parsed_option(self.options, READ_PARALLELISM, O.parse_positive_int),
            light=True,
        )
        return [SplitScan([(a, snapshot.doc_mapping(a)) for a in g]) for g in groups] or [SplitScan([])]

    def partitions(self) -> list[CommandPartition]:
        return [CommandPartition(i, payload) for i, payload in enumerate(self.plan)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if not isinstance(partition, CommandPartition):
            return  # nothing was planned: Spark reads one default partition
        yield from HANDLERS[type(self.command)](self, self.command, partition.payload)

    # -- the commands (in a task) --

    def _run_history(self, cmd: C.History, _: Any) -> Iterator[tuple[Any, ...]]:
        for e in self._log().history(cmd.limit):
            ts = None if e.timestamp_ms is None else _utc(e.timestamp_ms)
            yield (
                e.version,
                ts,
                e.operation,
                e.txn_id,
                e.num_added_files,
                e.num_removed_files,
                e.num_added_records,
                e.source,
            )

    def _run_describe_state(self, cmd: C.DescribeState, _: Any) -> Iterator[tuple[Any, ...]]:
        from executor_lib.log.describe import describe_json

        doc = describe_json(self._log().snapshot())
        doc.pop("files", None)
        for key, value in doc.items():
            yield key, value if isinstance(value, str) else json.dumps(value)

    def _run_checkpoint(self, cmd: C.Checkpoint, _: Any) -> Iterator[tuple[Any, ...]]:
        txlog = self._log()
        info = txlog.checkpoint()
        yield (
            info.version,
            info.format or "json",
            info.state_dir,
            len(txlog.snapshot().files),
        )

    def _run_purge(self, cmd: C.Purge, _: Any) -> Iterator[tuple[Any, ...]]:
        from executor_lib.log.purge import purge_table

        dry = cmd.dry_run
        hours = cmd.retention_hours
        if hours is None:  # PURGE without OLDER THAN: the session's default (IndexTables4Spark's name)
            raw = self.options.get("spark.indextables.purge.defaultRetentionHours", "168")
            hours = as_duration(raw)
            if hours is None:
                raise ConfigError(f"option purge.defaultRetentionHours={raw!r}: expected hours (a number >= 0)")
        report = purge_table(self._log(), hours, cmd.tx_log_retention_hours, dry_run=dry)
        for kind, key, size in report.rows():
            yield kind, key, size, dry

    def _run_truncate_time_travel(self, cmd: C.TruncateTimeTravel, _: Any) -> Iterator[tuple[Any, ...]]:
        from executor_lib.log.cleanup import cleanup_log

        dry = cmd.dry_run
        txlog = self._log()
        if not dry:
            txlog.checkpoint()
        config = dataclasses.replace(
            txlog.config, tx_log_retention_hours=0.0, state_retention_versions=1, state_retention_hours=0.0
        )
        # All history, however young: unlike retention, this must not run while someone writes.
        report = cleanup_log(txlog.store, config, dry_run=dry, version_file_min_age_hours=0.0)
        rows = [("state", f"state-v{v}", 0) for v in report.deleted_states]
        rows += [("manifest", k, 0) for k in report.deleted_manifests]
        rows += [("log", k, 0) for k in report.deleted_version_files + report.deleted_checkpoint_files]
        for kind, key, size in rows:
            yield kind, key, size, dry

    def _run_drop_partitions(self, cmd: C.DropPartitions, _: Any) -> Iterator[tuple[Any, ...]]:
        txlog = self._log()
        snapshot = txlog.snapshot()
        where = self._where(snapshot)
        if where is None:  # (the filter argument is required: only a tree of nothing gets here)
            raise ConfigError(f"drop_partitions {self.path}: a WHERE predicate on partition columns is required")
        doomed = _matching_files(snapshot, where)
        if not doomed:
            return
        removes = removes_of(doomed, data_change=True)
        version = txlog.commit(removes, read_version=snapshot.version, operation="DROP PARTITIONS")
        for a in doomed:
            yield a.path, json.dumps(a.partition_values, sort_keys=True), a.num_records, a.size, version

    def _run_merge_plan(self, cmd: C.MergePlan, task: MergeTask) -> Iterator[tuple[Any, ...]]:
        partition_values, sources = json.dumps(task.partition_values, sort_keys=True), json.dumps(task.sources)
        yield task.group, partition_values, sources, task.size, task.version, task.sort_key, task.target

    def _run_merge_result(self, cmd: C.MergeResult, _: Any) -> Iterator[tuple[Any, ...]]:
        merge_id = cmd.merge_id
        txlog = self._log()
        latest = txlog.latest_version()
        for v in range(latest, max(-1, latest - 200), -1):
            info = txlog.commit_info(v)
            if info is None or (info.operation_parameters or {}).get(MERGE_ID_PARAMETER) != merge_id:
                continue
            actions = txlog.version_actions(v)
            removed = sum(1 for a in actions if isinstance(a, RemoveAction))
            for a in actions:
                if isinstance(a, AddAction):
                    yield v, a.path, json.dumps(a.partition_values, sort_keys=True), a.num_records, a.size, removed
            return

    def _run_companion_plan(self, cmd: C.CompanionPlan, payload: Any) -> Iterator[tuple[Any, ...]]:
        yield tuple(payload)

    def _run_companion_result(self, cmd: C.CompanionResult, _: Any) -> Iterator[tuple[Any, ...]]:
        from executor_lib.spark.companion import run_result

        yield from run_result(self.path, cmd, self.options)

    def _run_prewarm(self, cmd: C.Prewarm, payload: Any) -> Iterator[tuple[Any, ...]]:
        from executor_lib.storage import open_store

        footer_only = cmd.footer_only
        store = open_store(self.path, **O.storage_and_log_options(self.options))
        cache = node_split_cache(self.options)
        with profiled_task(cache.directory):
            for add in payload:
                t0 = time.perf_counter_ns() if profiler.ENABLED else 0
                cache.prewarm(store, add, footer_only=footer_only)
                if t0:
                    profiler.record("prewarm_components", t0)
                yield add.path, add.size, socket.gethostname(), footer_only

    def _run_aggregate(self, cmd: C.Aggregate, payload: Any) -> Iterator[tuple[Any, ...]]:
        """One split's aggregation result (avg computed as stats, so partial results merge exactly)."""
        from executor_lib.splits.query.pushdown import plan
        from executor_lib.splits.search.table_search import damage_of_split, open_searcher
        from executor_lib.storage import open_store

        request = json.loads(cmd.aggregations)
        store = open_store(self.path, **O.storage_and_log_options(self.options))
        cache = node_split_cache(self.options)
        where = F.from_text(cmd.filter, "option filter") if cmd.filter is not None else None
        snapshot = self._log().snapshot()
        snapshot_schema = snapshot.arrow_schema()
        root = parquet_table_root(snapshot.metadata.configuration, self.options)
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
                            f"aggregate: the query {F.to_json(where)} is not answered exactly by "
                            f"the index of {add.path}"
                        )
                    query = filter_plan.index
                t0 = time.perf_counter_ns() if profiler.ENABLED else 0
                with damage_of_split(cache, store, add.path):
                    result = searcher.aggregate(split_request(request), query)
                if t0:
                    profiler.record("agg_split", t0)
                yield add.path, json.dumps(result)

    def rows_at_analysis(self) -> list[tuple[Any, ...]] | None:
        """The result rows when planning answered the command (a ``group_aggregate`` the transaction
        log's record counts answer), else None: tasks must run."""
        if isinstance(self.command, C.GroupAggregate) and len(self.plan) == 1 and isinstance(self.plan[0], LogCounts):
            return self._log_rows(self.plan[0].partials)
        return None

    def _log_rows(self, partials: str) -> list[tuple[Any, ...]]:
        return [(partials, self.table_schema, 0, 0, 0, True)]

    def _run_group_aggregate(self, cmd: C.GroupAggregate, task: LogCounts | SplitScan) -> Iterator[tuple[Any, ...]]:
        """The task's splits aggregated (``executor_lib.splits.search.group_aggregate``) and merged."""
        from executor_lib.splits.search.group_aggregate import aggregate_split
        from executor_lib.splits.search.table_search import damage_of_split, open_searcher
        from executor_lib.storage import open_store
        from executor_lib.table_schema import spark_json_to_arrow
        from indextables_contract.aggregate import AggregatePlan, Partials, merge_into, partials_to_json

        if isinstance(task, LogCounts):
            yield from self._log_rows(task.partials)
            return
        body = task.splits
        agg = AggregatePlan.from_json(cmd.plan)
        schema = spark_json_to_arrow(self.table_schema)
        where = None if agg.filter is None else F.from_text(agg.filter, "option filter")
        where = None if where is None else typed_filter(where, schema, self.time_zone)
        store = open_store(self.path, **O.storage_and_log_options(self.options))
        cache = node_split_cache(self.options)
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
                    getattr(self, "companion_root", None),
                )
                constants = partition_constants(add.partition_values, self.partition_columns, schema)
                t0 = time.perf_counter_ns() if profiler.ENABLED else 0
                with damage_of_split(cache, store, add.path):
                    partials, route = aggregate_split(searcher, agg, where, schema, constants)
                if t0:
                    profiler.record("agg_split", t0)
                merge_into(merged, partials)
                routes[route] += 1
        yield partials_to_json(merged), self.table_schema, len(body), routes["index"], routes["rows"], False

    def _run_describe_cache(self, cmd: C.DescribeCache, _: Any) -> Iterator[tuple[Any, ...]]:

        yield _cache_row(node_split_cache(self.options).describe())

    def _run_flush_cache(self, cmd: C.FlushCache, _: Any) -> Iterator[tuple[Any, ...]]:

        cache = node_split_cache(self.options)
        cache.flush()
        yield _cache_row(cache.describe())

    def _run_describe_log(self, cmd: C.DescribeLog, _: Any) -> Iterator[tuple[Any, ...]]:
        """IndexTables4Spark's 47 columns per action (commitInfo lines are not actions there)."""
        from executor_lib.log.checkpoint import read_last_checkpoint
        from executor_lib.protocol.files import LOG_DIR, version_file
        from indextables_contract.errors import ObjectNotFoundError, VersionNotFoundError

        txlog = self._log()
        latest = txlog.latest_version()
        start = 0
        if not cmd.include_all:
            snapshot = txlog.snapshot()
            manifest = snapshot.state_manifest
            last = read_last_checkpoint(txlog.store)
            base = manifest.state_version if manifest is not None else last.version if last is not None else None
            if base is not None:
                at = txlog.snapshot(version=base)
                where = manifest.source if manifest is not None else txlog.store.uri_of(f"{LOG_DIR}/{base}")
                for action in [at.protocol, at.metadata, *sorted(at.files, key=lambda a: a.path)]:
                    if action is not None:
                        yield _log_row(base, where, action, True)
                start = base + 1
        for version in range(start, latest + 1):
            try:
                actions = txlog.version_actions(version)
            except (ObjectNotFoundError, VersionNotFoundError):  # before the retained history
                continue
            where = txlog.store.uri_of(f"{LOG_DIR}/{version_file(version)}")
            for action in actions:
                if not isinstance(action, CommitInfoAction):
                    yield _log_row(version, where, action, False)

    def _run_component_sizes(self, cmd: C.ComponentSizes, payload: Any) -> Iterator[tuple[Any, ...]]:
        from executor_lib.storage import open_store

        store = open_store(self.path, **O.storage_and_log_options(self.options))
        cache = node_split_cache(self.options)
        for add in payload:
            footer = cache.footer(store, add)
            sizes: dict[tuple[str, str], int] = {}
            for name, (begin, end) in footer.files.items():
                part = _component_of(name)
                sizes[part] = sizes.get(part, 0) + (end - begin)
            values = json.dumps(add.partition_values, sort_keys=True) if add.partition_values else None
            for (key, kind), size in sorted(sizes.items()):
                yield add.path, values, key, size, kind, None

    def _run_repair_log(self, cmd: C.RepairLog, _: Any) -> Iterator[tuple[Any, ...]]:
        from executor_lib.protocol.actions import actions_to_ndjson
        from executor_lib.protocol.files import LOG_DIR, encode_log_bytes, version_file
        from executor_lib.storage import open_store

        txlog = self._log()
        source = txlog.store.uri_of(LOG_DIR)
        snapshot = txlog.snapshot()
        target_parent, _, target_dir = cmd.target.rstrip("/").rpartition("/")
        target_store = open_store(target_parent or ".", **O.storage_and_log_options(self.options))
        if next(iter(target_store.list(target_dir + "/")), None) is not None:
            raise ConfigError(
                f"REPAIR INDEXFILES TRANSACTION LOG: the target {cmd.target} is not empty; the "
                "repaired log is written to a new (or empty) location only"
            )
        valid = [a for a in snapshot.files if txlog.store.exists(a.path)]
        info = CommitInfoAction(
            txn_id=uuid.uuid4().hex,
            timestamp=int(time.time() * 1000),
            operation="REPAIR",
            operation_parameters={"sourceVersion": str(snapshot.version)},
        )
        lines = [info, snapshot.protocol, snapshot.metadata, *sorted(valid, key=lambda a: a.path)]
        body = encode_log_bytes(actions_to_ndjson([a for a in lines if a is not None]), False)
        target_store.put_if_absent(f"{target_dir}/{version_file(0)}", body)
        total = len(snapshot.files)
        yield source, cmd.target, snapshot.version, total, len(valid), total - len(valid), "SUCCESS"

    def _run_invalidate_log_cache(self, cmd: C.InvalidateLogCache, _: Any) -> Iterator[tuple[Any, ...]]:
        from executor_lib.log import snapshot_cache
        from executor_lib.log.manifest_cache import MANIFEST_CACHE

        hits, misses = MANIFEST_CACHE.hits + MANIFEST_CACHE.disk_hits, MANIFEST_CACHE.misses
        rate = f"{100.0 * hits / (hits + misses):.1f}%" if hits + misses else "N/A"
        if cmd.table is None:
            kept = len(snapshot_cache.SHARED)
            snapshot_cache.SHARED.clear()
            MANIFEST_CACHE.clear()
            message = f"cleared {kept} table snapshots and the decoded manifests on {_worker()}"
            yield "GLOBAL", message, hits, misses, rate
            return
        from executor_lib.log.tables import open_log

        identity = open_log(cmd.table, **O.storage_and_log_options(self.options)).store.root_uri
        forgotten = [k for k in _snapshot_keys() if identity in k]
        for key in forgotten:
            snapshot_cache.SHARED.forget(key)
        yield cmd.table, f"invalidated the cached snapshot of the table on {_worker()}", hits, misses, rate

    def _run_flush_searcher_cache(self, cmd: C.FlushSearcherCache, _: Any) -> Iterator[tuple[Any, ...]]:
        from executor_lib.splits.search import table_search

        with table_search._OPEN_LOCK:
            searchers = len(table_search._OPEN_SEARCHERS)
            table_search._OPEN_SEARCHERS.clear()
        yield "split_searchers", "success", searchers, f"closed {searchers} open split searchers on {_worker()}"
        cache = node_split_cache(self.options)
        footers = len(cache._footers)
        cache._footers.clear()
        yield "split_footers", "success", footers, f"dropped {footers} split footers held in memory on {_worker()}"

    def _run_profiler(self, cmd: C.Profiler, payload: Any) -> Iterator[tuple[Any, ...]]:
        if payload is not None:  # the driver's node, done when planning
            yield payload
            return
        yield _profiler_row(Path(node_split_cache(self.options).directory), cmd.action, "executor")

    def _run_data_skipping(self, cmd: C.DataSkipping, payload: Any) -> Iterator[tuple[Any, ...]]:
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


# One handler per read command (tests/contract/test_commands.py checks both sides agree).
HANDLERS: dict[type[C.Command], Callable[[CommandReader, Any, Any], Iterator[tuple[Any, ...]]]] = {
    C.History: CommandReader._run_history,
    C.DescribeState: CommandReader._run_describe_state,
    C.Checkpoint: CommandReader._run_checkpoint,
    C.Purge: CommandReader._run_purge,
    C.TruncateTimeTravel: CommandReader._run_truncate_time_travel,
    C.DropPartitions: CommandReader._run_drop_partitions,
    C.MergePlan: CommandReader._run_merge_plan,
    C.MergeResult: CommandReader._run_merge_result,
    C.Prewarm: CommandReader._run_prewarm,
    C.Aggregate: CommandReader._run_aggregate,
    C.GroupAggregate: CommandReader._run_group_aggregate,
    C.DescribeCache: CommandReader._run_describe_cache,
    C.FlushCache: CommandReader._run_flush_cache,
    C.DescribeLog: CommandReader._run_describe_log,
    C.ComponentSizes: CommandReader._run_component_sizes,
    C.RepairLog: CommandReader._run_repair_log,
    C.InvalidateLogCache: CommandReader._run_invalidate_log_cache,
    C.FlushSearcherCache: CommandReader._run_flush_searcher_cache,
    C.CompanionPlan: CommandReader._run_companion_plan,
    C.CompanionResult: CommandReader._run_companion_result,
    C.Profiler: CommandReader._run_profiler,
    C.DataSkipping: CommandReader._run_data_skipping,
}


SORT_KEY_SETTING = "spark.indextables.merge.sortKey"
MAX_SOURCES_SETTING = "spark.indextables.merge.maxSourceSplitsPerMerge"
DEFAULT_MAX_SOURCES = 1000  # IndexTables4Spark's merge.maxSourceSplitsPerMerge


def merge_sort_key(snapshot: Snapshot, option: str, value: Any) -> str | None:
    """A merge's sort key (``option``'s ``value``: the ``sortKey`` option or ``spark.indextables.merge.sortKey``):
    a data column with statistics, or None when ``value`` is empty."""
    name = str(value or "").strip()
    if not name:
        return None
    types = column_types(snapshot.metadata.schema_string)
    column = next((c for c in types if c.lower() == name.lower()), None)
    data_columns = [c for c in types if c not in snapshot.partition_columns]
    if column is None or column not in data_columns:
        raise ConfigError(
            f"merge: option {option}={name!r} must name a data column of the table (data columns: {data_columns})"
        )
    if types[column] not in SORTABLE_TYPES:
        raise ConfigError(
            f"merge: option {option}={name!r}: column {column!r} is {types[column]}; a sort key "
            f"must be one of {sorted(SORTABLE_TYPES)} (types with min/max statistics)"
        )
    return column


def plan_merge_groups(
    snapshot: Snapshot,
    files: list[AddAction],
    target: int,
    sort_key: str | None,
    min_splits: int,
    max_dest_splits: int | None = None,
    max_sources: int | None = DEFAULT_MAX_SOURCES,
) -> list[Any]:
    """The merge groups of ``files`` (live in ``snapshot``): sorted by ``sort_key`` or size-tiered."""
    from executor_lib.splits.build.merge_plan import plan_merges, plan_sorted_merges

    if sort_key is not None:
        key_type = column_types(snapshot.metadata.schema_string).get(sort_key)
        return plan_sorted_merges(files, snapshot.doc_mapping, sort_key, key_type, max_dest_splits, min_splits)
    return plan_merges(files, snapshot.doc_mapping, target, max_dest_splits, max_sources, min_splits)


def merge_group(
    store: ObjectStore,
    snapshot: Snapshot,
    sources: list[AddAction],
    sort_key: str | None,
    target: int,
    cache: SplitCache,
) -> list[AddAction]:
    """Merge ``sources`` (live in ``snapshot``) into new uploaded splits (not committed)."""
    from executor_lib.splits.build.publish import merge_splits, merge_splits_sorted

    mappings = {a.path: snapshot.doc_mapping(a) for a in sources}
    if sort_key:
        return merge_splits_sorted(store, sources, snapshot.arrow_schema(), mappings, cache, sort_key, target)
    return [merge_splits(store, sources, snapshot.arrow_schema(), mappings, cache)]


def merge_now(txlog: Any, options: Mapping[str, str], target: int, min_splits: int, sort_key_value: str | None) -> int:
    """MERGE SPLITS of the whole table in this process, committed as one version (merge-on-write of a
    batch write, ``executor_lib.spark.after_write``); the number of splits merged away (0: nothing to do).
    On failure the merged splits it uploaded are deleted and the error raised."""
    snapshot = txlog.snapshot()
    sort_key = merge_sort_key(snapshot, SORT_KEY_SETTING, sort_key_value)
    max_sources = int(parsed_option(options, MAX_SOURCES_SETTING, O.parse_positive_int, DEFAULT_MAX_SOURCES))
    groups = plan_merge_groups(snapshot, list(snapshot.files), target, sort_key, min_splits, None, max_sources)
    if not groups:
        return 0
    cache = node_split_cache(options)
    removed: list[AddAction] = []
    added: list[AddAction] = []
    try:
        for group in groups:
            added += merge_group(txlog.store, snapshot, list(group.sources), group.sort_key, target, cache)
            removed += group.sources
        txlog.commit(
            [*removes_of(removed, data_change=False), *added],
            read_version=snapshot.version,
            operation="MERGE SPLITS",
            operation_parameters={
                MERGE_ID_PARAMETER: uuid.uuid4().hex,
                "numSourceSplits": str(len(removed)),
                "numMergedSplits": str(len(added)),
            },
        )
    except BaseException:
        delete_quietly(txlog.store, [a.path for a in added])
        raise
    return len(removed)


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


def _log_counts(snapshot: Snapshot, where: F.Filter | None, group_by: tuple[str, ...]) -> Any:
    """``count(*)`` per group of partition values, from the files' record counts: no split is opened."""
    from indextables_contract.aggregate import count_partials

    schema = snapshot.arrow_schema()
    counts: dict[tuple[Any, ...], int] = {}
    for add in _matching_files(snapshot, where):
        constants = partition_constants(add.partition_values, list(group_by), schema)
        key = tuple(constants[c].as_py() for c in group_by)
        counts[key] = counts.get(key, 0) + int(add.num_records or 0)
    return count_partials(counts)


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


def _worker() -> str:
    return f"{socket.gethostname()} (pid {os.getpid()})"


def _snapshot_keys() -> list[str]:
    from executor_lib.log import snapshot_cache

    with snapshot_cache.SHARED._lock:
        return list(snapshot_cache.SHARED._snapshots)


# Tantivy segment files by extension: (component key, component type) as IndexTables4Spark names them.
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


def _json_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (frozenset, set, tuple)):
        value = sorted(value)
    return json.dumps(value, sort_keys=True)


def _log_row(version: int, log_file: str, action: Any, is_checkpoint: bool) -> tuple[Any, ...]:
    """One action as IndexTables4Spark's DESCRIBE ... TRANSACTION LOG row (``C.DescribeLog.RESULT``)."""
    from executor_lib.protocol.actions import MetadataAction, ProtocolAction, SkipAction

    row: dict[str, Any] = {"version": version, "log_file_path": log_file, "is_checkpoint": is_checkpoint}
    ts = lambda ms: None if ms is None else _utc(ms)  # noqa: E731
    if isinstance(action, AddAction):
        row.update(
            action_type="add",
            path=action.path,
            partition_values=_json_or_none(dict(action.partition_values)),
            size=action.size,
            data_change=action.data_change,
            tags=_json_or_none(action.tags),
            modification_time=ts(action.modification_time),
            stats=action.stats,
            min_values=_json_or_none(action.min_values),
            max_values=_json_or_none(action.max_values),
            num_records=action.num_records,
            footer_start_offset=action.footer_start_offset,
            footer_end_offset=action.footer_end_offset,
            hotcache_start_offset=action.hotcache_start_offset,
            hotcache_length=action.hotcache_length,
            has_footer_offsets=action.has_footer_offsets,
            time_range_start=action.time_range_start,
            time_range_end=action.time_range_end,
            split_tags=_json_or_none(action.split_tags),
            delete_opstamp=action.delete_opstamp,
            num_merge_ops=action.num_merge_ops,
            doc_mapping_json=action.doc_mapping_json,
            doc_mapping_ref=action.doc_mapping_ref,
            uncompressed_size_bytes=action.uncompressed_size_bytes,
        )
    elif isinstance(action, RemoveAction):
        row.update(
            action_type="remove",
            path=action.path,
            partition_values=_json_or_none(action.partition_values),
            size=action.size,
            data_change=action.data_change,
            tags=_json_or_none(action.tags),
            deletion_timestamp=ts(action.deletion_timestamp),
            extended_file_metadata=action.extended_file_metadata,
        )
    elif isinstance(action, SkipAction):
        row.update(
            action_type="skip",
            path=action.path,
            partition_values=_json_or_none(action.partition_values),
            size=action.size,
            skip_timestamp=ts(action.skip_timestamp),
            skip_reason=action.reason,
            skip_operation=action.operation,
            skip_retry_after=ts(action.retry_after),
            skip_count=action.skip_count,
        )
    elif isinstance(action, ProtocolAction):
        row.update(
            action_type="protocol",
            protocol_min_reader_version=action.min_reader_version,
            protocol_min_writer_version=action.min_writer_version,
            protocol_reader_features=_json_or_none(action.reader_features),
            protocol_writer_features=_json_or_none(action.writer_features),
        )
    elif isinstance(action, MetadataAction):
        row.update(
            action_type="metadata",
            metadata_id=action.id,
            metadata_name=action.name,
            metadata_description=action.description,
            metadata_format_provider=action.format.get("provider"),
            metadata_format_options=_json_or_none(action.format.get("options")),
            metadata_schema_string=action.schema_string,
            metadata_partition_columns=_json_or_none(list(action.partition_columns)),
            metadata_configuration=_json_or_none(dict(action.configuration)),
            metadata_created_time=ts(action.created_time),
        )
    else:
        row["action_type"] = "unknown"
    return tuple(row.get(name) for name in _LOG_COLUMNS)


_LOG_COLUMNS = tuple(column.split()[0] for column in C.DescribeLog.RESULT.split(", "))


def _utc(ms: int) -> Any:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)


def _matching_files(snapshot: Snapshot, where: F.Filter | None) -> list[AddAction]:
    """Live files whose partition values satisfy ``where`` (exactly, evaluated with SQL semantics
    on typed partition values; numeric partitions compare as numbers)."""
    files = snapshot.files
    if where is None:
        return list(files)
    from executor_lib.splits.query.pushdown import residual_mask

    schema = snapshot.arrow_schema()
    where = typed_filter(where, schema)
    partition_columns = list(snapshot.partition_columns)
    if not files:
        return []
    columns: dict[str, list[Any]] = {c: [] for c in partition_columns}
    for add in files:
        constants = partition_constants(add.partition_values, partition_columns, schema)
        for c in partition_columns:
            columns[c].append(constants[c])
    table = pa.table({c: pa.array([s.as_py() for s in columns[c]], schema.field(c).type) for c in partition_columns})
    mask = residual_mask(where, table, lambda q: pa.array([], pa.uint64())).to_pylist()
    return [add for add, keep in zip(files, mask, strict=True) if keep]


# --- MERGE SPLITS: the write step ---------------------------------------------------------------


@dataclass
class MergeCommitMessage(WriterCommitMessage):
    read_version: int = -1
    removed: list[AddAction] = field(default_factory=list)
    added: list[AddAction] = field(default_factory=list)


class MergeWriter(DataSourceArrowWriter):
    """Writing ``merge_plan`` rows merges each group on an executor; commit is one version."""

    def __init__(self, raw_options: Mapping[str, str]) -> None:
        self.options = _options(raw_options, C.Merge.NAME)
        self.path = str(raw_options.get("path") or "")
        command = decode(raw_options)
        self.merge_id = (command.merge_id if isinstance(command, C.Merge) else None) or uuid.uuid4().hex
        self.progress_interval = interval_seconds(self.options)

    def _log(self) -> Any:
        from executor_lib.log.tables import open_log

        return open_log(self.path, **O.storage_and_log_options(self.options))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> MergeCommitMessage:
        message = MergeCommitMessage()
        progress = TaskProgress(f"merge {self.path}", self.progress_interval, verb="merged")
        txlog = self._log()
        cache = node_split_cache(self.options)
        snapshots: dict[int, Any] = {}
        try:
            for batch in iterator:
                for row in batch.to_pylist():
                    version = int(row["readVersion"])
                    if version not in snapshots:
                        snapshots[version] = txlog.snapshot(version=version)
                    snap = snapshots[version]
                    live = {a.path: a for a in snap.files}
                    sources = [live[p] for p in json.loads(row["sources"])]
                    added = merge_group(txlog.store, snap, sources, row.get("sortKey"), int(row["targetBytes"]), cache)
                    message.added += added
                    message.read_version = version if message.read_version < 0 else min(message.read_version, version)
                    message.removed += sources
                    for add in added:
                        progress.uploaded(add.size)
                    progress.indexed(sum(a.num_records or 0 for a in sources))
            progress.done()
        except BaseException:
            delete_quietly(txlog.store, [a.path for a in message.added])
            raise
        return message

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        merged = [m for m in messages if isinstance(m, MergeCommitMessage) and m.added]
        if not merged:
            return
        removes = removes_of([a for m in merged for a in m.removed], data_change=False)
        adds = [a for m in merged for a in m.added]
        txlog = self._log()
        try:
            txlog.commit(
                [*removes, *adds],
                read_version=min(m.read_version for m in merged),
                operation="MERGE SPLITS",
                operation_parameters={
                    MERGE_ID_PARAMETER: self.merge_id,
                    "numSourceSplits": str(len(removes)),
                    "numMergedSplits": str(len(adds)),
                },
            )
        except Exception:
            self.abort(messages)
            raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:

        added = [a.path for m in messages if isinstance(m, MergeCommitMessage) for a in m.added]
        if added:
            delete_quietly(self._log().store, added)


def command_reader(raw_options: Mapping[str, str]) -> CommandReader:
    return CommandReader(raw_options)


def command_writer(raw_options: Mapping[str, str]) -> MergeWriter | DataSourceArrowWriter:
    cls = _command_class(raw_options)
    if cls is C.CompanionBuild:
        from executor_lib.spark.companion import CompanionWriter

        build = decode(raw_options)
        options = _options(raw_options, cls.NAME)
        return CompanionWriter(raw_options, options, build.build_id if isinstance(build, C.CompanionBuild) else None)
    if cls is not C.Merge:
        raise ConfigError(
            f"command {cls.NAME!r} cannot be written (write {C.MergePlan.NAME} rows with command={C.Merge.NAME})"
        )
    return MergeWriter(raw_options)
