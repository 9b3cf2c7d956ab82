"""MERGE SPLITS in two steps: ``command=merge_plan`` reads one row per merge group (one input
partition each, planned on the driver side at one pinned version), and writing those rows with
``command=merge`` merges the groups in parallel on executors; the writer's commit then removes
all sources and adds all merged splits in one version (a concurrent merge of the same splits
makes it fail with a conflict; concurrent appends commute). Also the merge of a whole table in
this process (``merge_now``, merge-on-write) and MERGE SPLITS' result (``merge_result``)."""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from executor_lib import failpoints
from executor_lib.log.files.live_files import LiveFiles
from executor_lib.log.files.partition_index import present_values
from executor_lib.log.files.pruning import column_types
from executor_lib.protocol.actions import (
    AddAction,
    RemoveAction,
    removes_of,
)
from executor_lib.spark import options as O
from executor_lib.spark.commands.base import (
    CommandReader,
    command_options,
    commit_with,
    decode,
    partition_keep,
    register,
    register_writer,
)
from executor_lib.spark.common import (
    delete_quietly,
    delete_uncommitted,
    delete_uncommitted_in,
    node_split_cache,
)
from executor_lib.spark.progress import TaskProgress, interval_seconds
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError

if TYPE_CHECKING:
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.log.snapshot import Snapshot
    from executor_lib.storage.base import ObjectStore


# The commitInfo operation parameter that records a merge's id: the Merge command's option name.
MERGE_ID_PARAMETER = C.option_key("merge_id")
# The commitInfo operation parameter that records how many source splits went into each merged split
# (JSON: merged split path -> count), so each MERGE SPLITS result row says its own; a version without
# it (IndexTables4Spark's, or older) shows the commit-wide numSourceSplits on every row.
SOURCES_PARAMETER = "sourceSplitsPerMergedSplit"
# Spark types a merge sort key may have: those split statistics (min/max) are kept for (not byte and
# short: IndexTables4Spark compares their statistics as text, so none are written; writer._has_stats).
SORTABLE_TYPES = frozenset({"integer", "long", "float", "double", "string", "date", "timestamp", "timestamp_ntz"})


class MergeTask(NamedTuple):
    """A ``merge_plan`` task's payload, planned on the driver side: one merge group (its row, as the
    client writes it back with ``command=merge``). A planned group travels compactly, as its first
    source and number of sources (``first``, ``num_sources``; ``sources`` empty): its task plans its
    partition again at ``version`` (size-tiered, or sorted by ``sort_key``) and takes the group that
    starts there, so a plan over millions of splits ships a few hundred bytes a group, not every path
    through the driver."""

    group: int
    partition_values: dict[str, str | None]
    sources: list[str]  # the split paths merged (empty: named by first and num_sources)
    size: int  # their bytes
    version: int  # the snapshot the plan read
    sort_key: str | None
    target: int  # the target split size in bytes
    first: str | None = None  # the group's first source
    num_sources: int = 0  # and its number of sources


def plan_merge(r: CommandReader, cmd: C.MergePlan) -> list[MergeTask]:
    from executor_lib.splits.write.merge_plan import DEFAULT_TARGET_BYTES

    snapshot = r.table_log().snapshot()
    where = r.partition_filter(snapshot)
    target = DEFAULT_TARGET_BYTES
    if cmd.target_size is not None:
        target = O.parse_size(C.option_key("target_size"), cmd.target_size)
    option = C.option_key("sort_key") if cmd.sort_key is not None else SORT_KEY_SETTING
    value = cmd.sort_key if cmd.sort_key is not None else S.MERGE_SORT_KEY.get(r.options)
    sort_key = merge_sort_key(snapshot, option, value)
    max_sources, min_splits = _limits(r, cmd)
    version = snapshot.version
    if sort_key is None:  # size-tiered: planned on the files' columns, no object per file
        planned = plan_size_tiered(snapshot, where, target, min_splits, cmd.max_dest_splits, max_sources)
        return [
            MergeTask(i, g.partition_values, [], g.size, version, None, target, g.first, g.count)
            for i, g in enumerate(planned)
        ]
    keep = None if where is None else partition_keep(snapshot, where)
    ranked = []  # sorted: planned a partition at a time (one partition's objects held), kept compactly
    key_type = column_types(snapshot.metadata.schema_string).get(sort_key)
    for files in _partition_files(snapshot, keep):
        for g in _sorted_groups(snapshot, files, sort_key, key_type, min_splits):
            bucket = str((tuple(sorted(g.partition_values.items())), snapshot.doc_mapping(g.sources[0])))
            ranked.append((-len(g.sources), g.size, bucket, g.partition_values, g.sources[0].path))
    ranked.sort(key=lambda r: r[:3])  # plan_sorted_merges' order over all buckets: most sources first
    return [
        MergeTask(i, values, [], size, version, sort_key, target, first, -negative_count)
        for i, (negative_count, size, _, values, first) in enumerate(ranked[: cmd.max_dest_splits])
    ]


def _partition_files(snapshot: Snapshot, keep: Any) -> Iterator[list[AddAction]]:
    """The live files of the partitions ``keep`` accepts (all if None), a list per partition."""
    files, columns = snapshot.state.files, list(snapshot.partition_columns)
    accept = keep if keep is not None else (lambda values: True)
    if isinstance(files, LiveFiles):
        yield from files.by_partition(accept, columns)
        return
    parts: dict[tuple[str | None, ...], list[AddAction]] = {}
    for a in files.values():
        if accept(present_values(a.partition_values, columns)):
            parts.setdefault(tuple(a.partition_values.get(c) for c in columns), []).append(a)
    yield from parts.values()


def _sorted_groups(
    snapshot: Snapshot, files: list[AddAction], sort_key: str, key_type: str | None, min_splits: int
) -> list[Any]:
    from executor_lib.splits.write.merge_plan import plan_sorted_merges

    return plan_sorted_merges(files, snapshot.doc_mapping, sort_key, key_type, None, min_splits)


def plan_size_tiered(
    snapshot: Snapshot,
    where: F.Filter | None,
    target: int,
    min_splits: int,
    max_dest_splits: int | None,
    max_sources: int | None,
) -> list[Any]:
    """``plan_merges_columns`` over the live files of the partitions ``where`` selects (exactly)."""
    keep = None if where is None else partition_keep(snapshot, where)
    return _plan_columns(snapshot, keep, target, min_splits, max_dest_splits, max_sources)


def _plan_columns(
    snapshot: Snapshot,
    keep: Any,
    target: int,
    min_splits: int,
    max_dest_splits: int | None,
    max_sources: int | None,
) -> list[Any]:
    from executor_lib.log.files.live_files import file_columns
    from executor_lib.splits.write.merge_plan import plan_merges_columns

    attributes = ["path", "size", "partition_values", "doc_mapping_json", "doc_mapping_ref"]
    columns = list(snapshot.partition_columns)
    table = file_columns(snapshot.state.files, attributes, keep, columns)
    table = table.append_column("mapping", snapshot.doc_mapping_column(table))
    return plan_merges_columns(table, columns, target, max_dest_splits, max_sources, min_splits)


def _limits(r: CommandReader, cmd: C.MergePlan) -> tuple[int, int]:
    """A plan's most sources per group and fewest splits to merge (the command's, else the settings')."""
    return cmd.max_source_splits_per_merge or S.MERGE_MAX_SOURCE_SPLITS.get(r.options), cmd.min_splits_to_merge or 2


def run_merge_plan(r: CommandReader, cmd: C.MergePlan, task: MergeTask) -> Iterator[tuple[Any, ...]]:
    sources = task.sources if task.first is None else _planned_sources(r, cmd, task)
    partition_values = json.dumps(task.partition_values, sort_keys=True)
    yield task.group, partition_values, json.dumps(sources), task.size, task.version, task.sort_key, task.target


# A worker's last partitions planned again (``_planned_sources``): the groups of one partition,
# by their first source, for the next task of the same partition.
_REPLANNED: OrderedDict[tuple[Any, ...], dict[str, tuple[int, int, Any]]] = OrderedDict()
_REPLANNED_KEPT = 4


def _planned_sources(r: CommandReader, cmd: C.MergePlan, task: MergeTask) -> list[str]:
    """The sources of a compactly shipped ``task``: its partition planned again at the plan's version,
    with the plan's limits and sort key; the group starting at ``task.first`` must be the one the
    driver planned. Groups a worker kept that do not hold it (planned for a table deleted and created
    again at the same place: the same versions, other splits) are planned again, once."""
    max_sources, min_splits = _limits(r, cmd)
    values = tuple(sorted(task.partition_values.items(), key=lambda kv: kv[0]))
    key = (r.path, task.version, values, task.target, task.sort_key, max_sources, min_splits)
    groups = _REPLANNED.pop(key, None)
    wanted = (task.num_sources, task.size)
    if groups is None or groups.get(task.first or "", (None, None))[:2] != wanted:
        groups = _partition_groups(r, task, max_sources, min_splits)
    _REPLANNED[key] = groups
    while len(_REPLANNED) > _REPLANNED_KEPT:
        _REPLANNED.popitem(last=False)
    group = groups.get(task.first or "")
    if group is None or group[:2] != wanted:
        raise ConfigError(
            f"merge_plan {r.path}: group {task.group} (partition {task.partition_values}, {task.num_sources} splits "
            f"from {task.first}) is not what its partition plans at version {task.version}; "
            "the driver and this executor run different merge planners: install one executor_lib on both"
        )
    return list(group[2])


def _partition_groups(
    r: CommandReader, task: MergeTask, max_sources: int, min_splits: int
) -> dict[str, tuple[int, int, Any]]:
    """``task``'s partition planned at its version: (number of sources, bytes, paths) by first source."""
    snapshot = r.table_log().snapshot(version=task.version)  # the process's shared one when at the version
    keep = _in_partition(snapshot, task.partition_values)
    if task.sort_key is None:
        planned = _plan_columns(snapshot, keep, task.target, min_splits, None, max_sources)
        return {g.first: (g.count, g.size, g.paths) for g in planned}
    files = next(_partition_files(snapshot, keep), [])
    key_type = column_types(snapshot.metadata.schema_string).get(task.sort_key)
    sorted_groups = _sorted_groups(snapshot, files, task.sort_key, key_type, min_splits)
    return {g.sources[0].path: (len(g.sources), g.size, [a.path for a in g.sources]) for g in sorted_groups}


def run_merge_result(r: CommandReader, cmd: C.MergeResult, _: Any) -> Iterator[tuple[Any, ...]]:
    txlog = r.table_log()
    found = commit_with(txlog, MERGE_ID_PARAMETER, cmd.merge_id)
    if found is None:
        return
    v, info = found
    actions = txlog.version_actions(v)
    removed = sum(1 for a in actions if isinstance(a, RemoveAction))
    sources = _sources_per_merged_split(info.operation_parameters or {})
    for a in actions:
        if isinstance(a, AddAction):
            n = sources.get(a.path, removed)
            yield v, a.path, json.dumps(a.partition_values, sort_keys=True), a.num_records, a.size, n


def _sources_per_merged_split(parameters: Mapping[str, str]) -> dict[str, int]:
    """How many source splits each merged split of a MERGE SPLITS version came from (its commitInfo's
    ``sourceSplitsPerMergedSplit``); empty for a version that does not record it."""
    try:
        recorded = json.loads(parameters.get(SOURCES_PARAMETER) or "{}")
    except ValueError:
        return {}
    if not isinstance(recorded, dict):
        return {}
    return {str(p): n for p, n in recorded.items() if isinstance(n, int)}


SORT_KEY_SETTING = S.MERGE_SORT_KEY.key
DEFAULT_MAX_SOURCES: int = S.MERGE_MAX_SOURCE_SPLITS.value  # IndexTables4Spark's merge.maxSourceSplitsPerMerge


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
    from executor_lib.splits.write.merge_plan import plan_merges, plan_sorted_merges

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
    from executor_lib.splits.write.publish import merge_splits, merge_splits_sorted

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
    max_sources = S.MERGE_MAX_SOURCE_SPLITS.get(options)
    groups = plan_merge_groups(snapshot, list(snapshot.files), target, sort_key, min_splits, None, max_sources)
    if not groups:
        return 0
    cache = node_split_cache(options)
    removed: list[AddAction] = []
    added: list[AddAction] = []
    sources: dict[str, int] = {}
    try:
        for group in groups:
            merged = merge_group(txlog.store, snapshot, list(group.sources), group.sort_key, target, cache)
            sources.update((a.path, len(group.sources)) for a in merged)
            added += merged
            removed += group.sources
        txlog.commit(
            [*removes_of(removed, data_change=False), *added],
            read_version=snapshot.version,
            operation="MERGE SPLITS",
            operation_parameters={
                MERGE_ID_PARAMETER: uuid.uuid4().hex,
                "numSourceSplits": str(len(removed)),
                "numMergedSplits": str(len(added)),
                SOURCES_PARAMETER: json.dumps(sources, sort_keys=True),
            },
        )
    except BaseException:
        delete_uncommitted_in(txlog, [a.path for a in added], snapshot.version)
        raise
    return len(removed)


def _sources(snapshot: Snapshot, paths: list[str], partition_values: dict[str, str | None]) -> list[AddAction]:
    """The live files at ``paths`` of a group of the partition ``partition_values``, found in that
    partition's rows of the snapshot's columns (no index of every path: a 10M-file table's costs GBs)."""
    files = snapshot.state.files
    if not isinstance(files, LiveFiles):
        return [files[p] for p in paths]
    return files.actions_of(paths, _in_partition(snapshot, partition_values), snapshot.partition_columns)


def _in_partition(
    snapshot: Snapshot, partition_values: Mapping[str, str | None]
) -> Callable[[Mapping[str, str]], bool]:
    """A ``keep`` function accepting exactly the partition ``partition_values`` (a column left out: null)."""
    columns = list(snapshot.partition_columns)
    wanted = tuple(partition_values.get(c) for c in columns)
    return lambda values: tuple(values.get(c) for c in columns) == wanted


@dataclass
class MergeCommitMessage(WriterCommitMessage):
    read_version: int = -1
    removed: list[AddAction] = field(default_factory=list)
    added: list[AddAction] = field(default_factory=list)


class MergeWriter(DataSourceArrowWriter):
    """Writing ``merge_plan`` rows merges each group on an executor; commit is one version."""

    def __init__(self, raw_options: Mapping[str, str]) -> None:
        self.options = command_options(raw_options, C.Merge.NAME)
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
                    sources = _sources(snap, json.loads(row["sources"]), json.loads(row["partitionValues"]))
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
        failpoints.reach("spark.commit.before")
        try:
            txlog.commit(
                [*removes, *adds],
                read_version=min(m.read_version for m in merged),
                operation="MERGE SPLITS",
                operation_parameters={
                    MERGE_ID_PARAMETER: self.merge_id,
                    "numSourceSplits": str(len(removes)),
                    "numMergedSplits": str(len(adds)),
                    SOURCES_PARAMETER: json.dumps(
                        {a.path: len(m.removed) for m in merged for a in m.added}, sort_keys=True
                    ),
                },
            )
        except Exception:
            self.abort(messages)
            raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Spark aborts a failed MERGE SPLITS, also when the worker running ``commit`` died after its
        version landed: the merged splits no version after the plan's read version names are deleted."""
        merged = [m for m in messages if isinstance(m, MergeCommitMessage) and m.added]
        if merged:
            read_version = min(m.read_version for m in merged)
            delete_uncommitted(self.path, self.options, [a.path for m in merged for a in m.added], read_version)


register(C.MergePlan, run_merge_plan, plan=plan_merge)
register(C.MergeResult, run_merge_result)
register_writer(C.Merge, MergeWriter)
