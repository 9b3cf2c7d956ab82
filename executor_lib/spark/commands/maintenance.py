"""Commands that delete: PURGE INDEXTABLE (files no version needs) and DROP INDEXTABLES PARTITIONS."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from executor_lib.protocol.actions import (
    removes_of,
)
from executor_lib.spark.commands.base import (
    CommandReader,
    matching_files,
    register,
)
from indextables_contract import commands as C
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError


def run_purge(r: CommandReader, cmd: C.Purge, _: Any) -> Iterator[tuple[Any, ...]]:
    from executor_lib.log.maintenance.purge import purge_table

    dry = cmd.dry_run
    hours = cmd.retention_hours
    if hours is None:  # PURGE without OLDER THAN: the session's default (IndexTables4Spark's name)
        hours = S.PURGE_DEFAULT_RETENTION_HOURS.get(r.options)
    report = purge_table(r.table_log(), hours, cmd.tx_log_retention_hours, dry_run=dry)
    for kind, key, size in report.rows():
        yield kind, key, size, dry


def run_drop_partitions(r: CommandReader, cmd: C.DropPartitions, _: Any) -> Iterator[tuple[Any, ...]]:
    txlog = r.table_log()
    snapshot = txlog.snapshot()
    where = r.partition_filter(snapshot)
    if where is None:  # (the filter argument is required: only a tree of nothing gets here)
        raise ConfigError(f"drop_partitions {r.path}: a WHERE predicate on partition columns is required")
    doomed = matching_files(snapshot, where)
    if not doomed:
        return
    removes = removes_of(doomed, data_change=True)
    version = txlog.commit(removes, read_version=snapshot.version, operation="DROP PARTITIONS")
    for a in doomed:
        yield a.path, json.dumps(a.partition_values, sort_keys=True), a.num_records, a.size, version


register(C.Purge, run_purge)
register(C.DropPartitions, run_drop_partitions)
