"""The cluster's side of DELETE, UPDATE and MERGE INTO (``indextables_contract.row_changes``): the
``match_counts`` command that finds the splits a change rewrites (pruned by partition values and
min/max statistics, then counted through each split's index), ``change_result``, and what a row
change's write commits (``commit_row_change``: the replaced splits removed, the written ones added,
in one version at the change's read version)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executor_lib.log.files.live_files import LiveFiles
from executor_lib.protocol.actions import COMPANION_ENABLED, AddAction, removes_of
from executor_lib.spark import options as O
from executor_lib.spark.commands.base import CommandReader, commit_with, register
from executor_lib.spark.common import node_split_cache, parsed_option, partition_constants, typed_filter
from executor_lib.spark.read_planning import plan_tasks
from executor_lib.spark.reader import check_filter, doc_mappings, prunable
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract import row_changes as RC
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError
from indextables_contract.read import PARALLELISM as READ_PARALLELISM

if TYPE_CHECKING:
    from executor_lib.log.snapshot import Snapshot


@dataclass(frozen=True)
class CountTask:
    """A ``match_counts`` task: the candidate splits it counts (with their doc mappings) at ``version``."""

    version: int
    splits: list[tuple[AddAction, str | None]]


def plan_match_counts(r: CommandReader, cmd: C.MatchCounts) -> list[CountTask]:
    """The candidate splits of ``cmd.filter`` at the latest version, in one wave of tasks: the table
    checked rewritable and the filter checked against it first, before any task."""
    snapshot = r.table_log().snapshot()
    check_rewritable(snapshot, r.path)
    schema = snapshot.arrow_schema()
    where = typed_filter(F.from_text(cmd.filter, "option filter"), schema, r.time_zone)
    check_filter(
        where,
        f"row change of {r.path}",
        schema,
        lambda: doc_mappings(snapshot),
        strict=S.READ_STRICT_QUERIES.get(r.options),
    )
    files = candidate_splits(snapshot, where)
    groups = plan_tasks(
        files,
        S.READ_TARGET_PARTITION_BYTES.get(r.options),
        S.READ_MAX_SPLITS_PER_PARTITION.get(r.options),
        parsed_option(r.options, READ_PARALLELISM, O.parse_positive_int),
        light=True,
    )
    return [CountTask(snapshot.version, [(a, snapshot.doc_mapping(a)) for a in g]) for g in groups]


def check_rewritable(snapshot: Snapshot, path: str) -> None:
    """ConfigError unless a row change can rewrite ``snapshot``'s splits without losing a value: not a
    companion index (its rows live in the source table) and no index-only column (values not stored)."""
    if snapshot.metadata.configuration.get(COMPANION_ENABLED) == "true":
        raise ConfigError(
            f"row change of {path}: the table is a companion index, whose rows live in its source table; "
            "change the source's rows and run BUILD INDEXTABLES COMPANION again to sync it"
        )
    index_only = sorted({f.name for m in doc_mappings(snapshot) for f in m.fields if not f.stored})
    if index_only:
        raise ConfigError(
            f"row change of {path}: columns {index_only} are index-only (spark.indextables.indexing.indexonly): "
            "their values are not stored, so a rewritten split would lose them; nothing was changed"
        )


def candidate_splits(snapshot: Snapshot, where: F.Filter) -> list[AddAction]:
    """The live files that may hold a row ``where`` matches: pruned by the conjuncts min/max statistics
    and partition values can judge (``reader.prunable``), as a read of ``where`` is."""
    from executor_lib.log.files.pruning import prune_snapshot

    schema = snapshot.arrow_schema()
    parts = where.children if isinstance(where, F.And) else (where,)
    judged = [p for p in parts if prunable(F.columns_of(p), snapshot.partition_columns, schema)]
    files, _ = prune_snapshot(snapshot, judged)
    return list(files)


def run_match_counts(r: CommandReader, cmd: C.MatchCounts, task: CountTask) -> Iterator[tuple[Any, ...]]:
    """Each of the task's splits holding a match: (path, matches, its rows, version)."""
    from executor_lib.splits.query.pushdown import plan
    from executor_lib.splits.search.split_opening import damage_of_split, open_searcher
    from executor_lib.splits.search.table_search import scan_split
    from executor_lib.storage import open_store

    store = open_store(r.path, **O.storage_and_log_options(r.options))
    cache = node_split_cache(r.options)
    snapshot = r.table_log().snapshot(version=task.version)
    schema = snapshot.arrow_schema()
    where = O.with_fuzzy_setting(typed_filter(F.from_text(cmd.filter, "option filter"), schema, r.time_zone), r.options)
    assert where is not None
    for add, mapping in task.splits:
        searcher = open_searcher(cache, store, add.path, schema, mapping, add.size, add.footer_start_offset, None)
        filter_plan = plan(where, [searcher.mapping], schema)
        with damage_of_split(cache, store, add.path):
            if filter_plan.residual is None:
                matches = len(searcher.row_ids(filter_plan.index))
            else:
                constants = partition_constants(add.partition_values, snapshot.partition_columns, schema)
                matches = scan_split(searcher, filter_plan, [], constants).num_rows
        if matches:
            yield add.path, matches, add.num_records, task.version


def run_change_result(r: CommandReader, cmd: C.ChangeResult, _: Any) -> Iterator[tuple[Any, ...]]:
    """The version the change ``cmd.change_id`` committed, found among the last 200 versions."""
    found = commit_with(r.table_log(), RC.CHANGE_ID_PARAMETER, cmd.change_id)
    if found is None:
        return
    v, info = found
    params = info.operation_parameters or {}
    yield (v, info.operation, *(int(params.get(k, 0)) for k in ("numRemovedSplits", "numAddedSplits", *RC.METRICS)))


def live_actions(snapshot: Snapshot, paths: Sequence[str]) -> list[AddAction]:
    """The live files of ``snapshot`` at ``paths``, found column-wise (no index of every path).

    Raises:
        ConfigError: a path that is not live there, named.
    """
    files = snapshot.state.files
    try:
        if isinstance(files, LiveFiles):
            return files.actions_of(list(paths))
        return [files[p] for p in paths]
    except KeyError as e:
        raise ConfigError(f"row change: split {e.args[0]!r} is not live at version {snapshot.version}") from None


def commit_row_change(
    txlog: Any,
    change: RC.RowChange,
    adds: list[AddAction],
    txn: Any = None,
    txn_parameters: Mapping[str, str] | None = None,
) -> int:
    """Commit ``change``: its replaced splits removed and ``adds`` added, in one version read at
    ``change.read_version`` (CommitConflictError if a version after it removed one of them).
    ``txn``: the idempotent write's ``StreamingTxn`` (BatchAlreadyCommittedError if the table holds it),
    recorded in the commitInfo as ``txn_parameters``."""
    snapshot = txlog.snapshot(version=change.read_version)
    removes = removes_of(live_actions(snapshot, change.replaced), data_change=True)
    return int(
        txlog.commit(
            [*removes, *adds],
            read_version=change.read_version,
            operation=change.operation,
            operation_parameters={**change.parameters(len(removes), len(adds)), **(txn_parameters or {})},
            streaming_txn=txn,
            new_files=True,  # uploaded by this job's tasks under new names
        )
    )


register(C.MatchCounts, run_match_counts, plan=plan_match_counts)
register(C.ChangeResult, run_change_result)
