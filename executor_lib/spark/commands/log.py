"""Commands on a table's transaction log: DESCRIBE HISTORY, DESCRIBE INDEXTABLES STATE and
TRANSACTION LOG, CHECKPOINT, TRUNCATE TIME TRAVEL, REPAIR INDEXFILES TRANSACTION LOG and
INVALIDATE TRANSACTION LOG CACHE."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

from executor_lib.protocol.actions import (
    AddAction,
    CommitInfoAction,
    RemoveAction,
)
from executor_lib.spark import options as O
from executor_lib.spark.commands.base import (
    CommandReader,
    register,
    utc,
    worker,
)
from indextables_contract import commands as C
from indextables_contract.errors import ConfigError


def run_history(r: CommandReader, cmd: C.History, _: Any) -> Iterator[tuple[Any, ...]]:
    for e in r.table_log().history(cmd.limit):
        ts = None if e.timestamp_ms is None else utc(e.timestamp_ms)
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


def run_describe_state(r: CommandReader, cmd: C.DescribeState, _: Any) -> Iterator[tuple[Any, ...]]:
    from executor_lib.log.maintenance.describe import describe_json

    doc = describe_json(r.table_log().snapshot(), files=False)
    for key, value in doc.items():
        yield key, value if isinstance(value, str) else json.dumps(value)


def run_checkpoint(r: CommandReader, cmd: C.Checkpoint, _: Any) -> Iterator[tuple[Any, ...]]:
    txlog = r.table_log()
    info = txlog.checkpoint()
    yield (
        info.version,
        info.format or "json",
        info.state_dir,
        txlog.snapshot().num_files,
    )


def run_truncate_time_travel(r: CommandReader, cmd: C.TruncateTimeTravel, _: Any) -> Iterator[tuple[Any, ...]]:
    from executor_lib.log.maintenance.cleanup import cleanup_log

    dry = cmd.dry_run
    txlog = r.table_log()
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


def run_describe_log(r: CommandReader, cmd: C.DescribeLog, _: Any) -> Iterator[tuple[Any, ...]]:
    """IndexTables4Spark's 47 columns per action (commitInfo lines are not actions there)."""
    from executor_lib.log.state.checkpoint import read_last_checkpoint
    from executor_lib.protocol.files import LOG_DIR, version_file
    from indextables_contract.errors import ObjectNotFoundError, VersionNotFoundError

    txlog = r.table_log()
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


def run_repair_log(r: CommandReader, cmd: C.RepairLog, _: Any) -> Iterator[tuple[Any, ...]]:
    from executor_lib.protocol.actions import actions_to_ndjson
    from executor_lib.protocol.files import LOG_DIR, encode_log_bytes, version_file
    from executor_lib.storage import open_store

    txlog = r.table_log()
    source = txlog.store.uri_of(LOG_DIR)
    snapshot = txlog.snapshot()
    target_parent, _, target_dir = cmd.target.rstrip("/").rpartition("/")
    target_store = open_store(target_parent or ".", **O.storage_and_log_options(r.options))
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


def run_invalidate_log_cache(r: CommandReader, cmd: C.InvalidateLogCache, _: Any) -> Iterator[tuple[Any, ...]]:
    from executor_lib.log import snapshot_cache
    from executor_lib.log.state.manifest_cache import MANIFEST_CACHE

    hits, misses = MANIFEST_CACHE.hits + MANIFEST_CACHE.disk_hits, MANIFEST_CACHE.misses
    rate = f"{100.0 * hits / (hits + misses):.1f}%" if hits + misses else "N/A"
    if cmd.table is None:
        kept = len(snapshot_cache.SHARED)
        snapshot_cache.SHARED.clear()
        MANIFEST_CACHE.clear()
        message = f"cleared {kept} table snapshots and the decoded manifests on {worker()}"
        yield "GLOBAL", message, hits, misses, rate
        return
    from executor_lib.log.tables import open_log

    identity = open_log(cmd.table, **O.storage_and_log_options(r.options)).store.root_uri
    forgotten = [k for k in _snapshot_keys() if identity in k]
    for key in forgotten:
        snapshot_cache.SHARED.forget(key)
    yield cmd.table, f"invalidated the cached snapshot of the table on {worker()}", hits, misses, rate


def _snapshot_keys() -> list[str]:
    from executor_lib.log import snapshot_cache

    with snapshot_cache.SHARED._lock:
        return list(snapshot_cache.SHARED._snapshots)


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
    ts = lambda ms: None if ms is None else utc(ms)  # noqa: E731
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


register(C.History, run_history)
register(C.DescribeState, run_describe_state)
register(C.Checkpoint, run_checkpoint)
register(C.TruncateTimeTravel, run_truncate_time_travel)
register(C.DescribeLog, run_describe_log)
register(C.RepairLog, run_repair_log)
register(C.InvalidateLogCache, run_invalidate_log_cache)
