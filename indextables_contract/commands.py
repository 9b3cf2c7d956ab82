"""The maintenance commands: their names, typed arguments and result schemas, written down once.

A command is a read of the ``indextables`` data source whose options are the command's
arguments (``command=<name>`` plus one option per argument, camelCase); the executors answer
with rows of the command's fixed result schema (Spark DDL). MERGE SPLITS is a read of
``MergePlan`` rows written back with ``Merge`` (a write), then a ``MergeResult`` read. The client
(``connect_plugin``) builds the dataclasses below and sends ``to_options()``; the executors
(``executor_lib.spark.commands``) decode them with ``decode_command`` and dispatch on the class.
Nothing else spells a command name or an argument's option key.

    cmd = Purge(retention_hours=24.0, dry_run=True)
    cmd.to_options()   # {'command': 'purge', 'retentionHours': '24.0', 'dryRun': 'true'}
    decode_command(cmd.to_options()) == cmd   # True

Standard library only: the thin client (no JVM, no tantivy) and the executors both import it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from indextables_contract import settings as S
from indextables_contract.errors import CommandError

COMMAND_OPTION = "command"


@dataclass(frozen=True)
class Command:
    """Base of every command: ``NAME`` on the wire, ``RESULT`` the result schema (Spark DDL; empty
    for a write). Fields are the arguments; a field ``dry_run`` travels as the option ``dryRun``."""

    NAME: ClassVar[str] = ""
    RESULT: ClassVar[str] = ""
    WRITE: ClassVar[bool] = False  # written to (``Merge``) instead of read from
    TABLE: ClassVar[bool] = True  # names a table (False: runs on every node's caches, ``TABLELESS``)

    def __post_init__(self) -> None:
        for name, kind in _field_kinds(type(self)).items():
            _check(self.NAME, name, kind, getattr(self, name))

    def to_options(self) -> dict[str, str]:
        """The Spark options of this command (arguments left at None are not sent)."""
        out = {COMMAND_OPTION: self.NAME}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[option_key(f.name)] = _text(value)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_options(), sort_keys=True)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Command:
        """This command from Spark options (keys case-insensitive; options of other kinds ignored).

        Raises:
            CommandError: an argument that is missing (required) or does not parse, named.
        """
        lower = {str(k).lower(): v for k, v in options.items()}
        kinds = _field_kinds(cls)
        args: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            key = option_key(f.name)
            raw = lower.get(key.lower())
            if raw is not None:
                args[f.name] = _parse(cls.NAME, key, kinds[f.name], raw)
        try:
            return cls(**args)
        except TypeError as e:  # a required argument missing
            missing = [option_key(f.name) for f in dataclasses.fields(cls) if f.name not in args and _required(f)]
            what = f"option {missing[0]} is" if len(missing) == 1 else f"options {', '.join(missing)} are"
            raise CommandError(f"command {cls.NAME}: {what} required") from e


# -- the commands -------------------------------------------------------------------------------

_FILE_ROWS = "kind string, path string, sizeBytes long, dryRun boolean"
_CACHE_ROWS = (
    "host string, pid long, directory string, maxBytes long, splitsCached long, bytesCached long, "
    "hits long, misses long, bytesDownloaded long"
)


@dataclass(frozen=True)
class History(Command):
    """Commits, newest first (at most ``limit``)."""

    NAME: ClassVar[str] = "history"
    RESULT: ClassVar[str] = (
        "version long, timestamp timestamp, operation string, txnId string, numAddedFiles long, "
        "numRemovedFiles long, numAddedRecords long, source string"
    )
    limit: int | None = None


@dataclass(frozen=True)
class DescribeState(Command):
    """The table's state as property/value rows (version, files, records, schema, ...)."""

    NAME: ClassVar[str] = "describe_state"
    RESULT: ClassVar[str] = "property string, value string"


@dataclass(frozen=True)
class Checkpoint(Command):
    """Write a checkpoint (a compacted state) of the latest version."""

    NAME: ClassVar[str] = "checkpoint"
    RESULT: ClassVar[str] = "version long, format string, stateDir string, numFiles long"


@dataclass(frozen=True)
class Purge(Command):
    """Delete split files no retained version needs, old log files and orphaned manifests."""

    NAME: ClassVar[str] = "purge"
    RESULT: ClassVar[str] = _FILE_ROWS
    retention_hours: float | None = None  # of split files; None: the setting purge.defaultRetentionHours
    tx_log_retention_hours: float | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class TruncateTimeTravel(Command):
    """Drop all history but the latest version (checkpoint first)."""

    NAME: ClassVar[str] = "truncate_time_travel"
    RESULT: ClassVar[str] = _FILE_ROWS
    dry_run: bool = False


@dataclass(frozen=True)
class DropPartitions(Command):
    """Remove every file of the partitions matching ``filter`` (a filter tree as JSON, partition columns only)."""

    NAME: ClassVar[str] = "drop_partitions"
    RESULT: ClassVar[str] = "path string, partitionValues string, numRecords long, sizeBytes long, version long"
    filter: str


MERGE_TARGET_SIZE = "5G"  # the split size MERGE SPLITS and IndexTable.merge_splits aim at without a target size


@dataclass(frozen=True)
class MergePlan(Command):
    """One row per merge group (see PROTOCOL.md, MERGE SPLITS); written back with ``Merge``."""

    NAME: ClassVar[str] = "merge_plan"
    RESULT: ClassVar[str] = (
        "mergeGroup int, partitionValues string, sources string, sourceBytes long, "
        "readVersion long, sortKey string, targetBytes long"
    )
    filter: str | None = None
    target_size: str | None = None  # bytes, or with a unit: "512M", "4G"; None: MERGE_TARGET_SIZE
    max_dest_splits: int | None = None
    max_source_splits_per_merge: int | None = None
    sort_key: str | None = None
    min_splits_to_merge: int | None = None


@dataclass(frozen=True)
class Merge(Command):
    """Writing ``MergePlan`` rows merges each group on an executor and commits all of them in one version."""

    NAME: ClassVar[str] = "merge"
    WRITE: ClassVar[bool] = True
    merge_id: str | None = None


@dataclass(frozen=True)
class MergeResult(Command):
    """The splits a ``Merge`` with this ``merge_id`` committed."""

    NAME: ClassVar[str] = "merge_result"
    RESULT: ClassVar[str] = (
        "version long, mergedSplit string, partitionValues string, numRecords long, "
        "sizeBytes long, numSourceSplits long"
    )
    merge_id: str


@dataclass(frozen=True)
class MatchCounts(Command):
    """The live splits holding rows ``filter`` matches (a filter tree as JSON, any column), each with how
    many, at the table's latest version (``version``, the same on every row): what a DELETE, UPDATE or
    MERGE INTO rewrites (``indextables_contract.row_changes``). Splits without a match are left out."""

    NAME: ClassVar[str] = "match_counts"
    RESULT: ClassVar[str] = "path string, matches long, numRecords long, version long"
    filter: str


@dataclass(frozen=True)
class ChangeResult(Command):
    """What the DELETE, UPDATE or MERGE INTO with this ``change_id`` committed (no row: nothing yet)."""

    NAME: ClassVar[str] = "change_result"
    RESULT: ClassVar[str] = (
        "version long, operation string, numRemovedSplits long, numAddedSplits long, "
        "numDeletedRows long, numUpdatedRows long, numInsertedRows long"
    )
    change_id: str


@dataclass(frozen=True)
class Prewarm(Command):
    """Copy the splits matching ``filter`` (partition columns) into the executors' split caches."""

    NAME: ClassVar[str] = "prewarm"
    RESULT: ClassVar[str] = "path string, sizeBytes long, host string, footerOnly boolean"
    filter: str | None = None
    footer_only: bool = False


@dataclass(frozen=True)
class Aggregate(Command):
    """Elasticsearch-style ``aggregations`` (JSON) per split, over the rows matching ``filter``."""

    NAME: ClassVar[str] = "aggregate"
    RESULT: ClassVar[str] = "path string, result string"
    aggregations: str
    filter: str | None = None


# A read's schema field metadata key: the command's result rows, when Spark's analysis of the read
# already answered it (a JSON list of rows, each a list of values in ``RESULT`` order).
RESULT_ROWS_METADATA = "indextables.resultRows"


@dataclass(frozen=True)
class GroupAggregate(Command):
    """A pushed ``GROUP BY``: ``plan`` is an ``indextables_contract.aggregate.AggregatePlan`` as JSON.

    ``request`` (a new id per call, so that no cached analysis answers) asks for the answer at
    analysis: read without a schema, the data source's schema is ``RESULT`` and, when the
    transaction log's record counts answer the plan, its first field's metadata holds the result
    rows under ``RESULT_ROWS_METADATA``: the client has them without a Spark job. Otherwise the
    read is collected as usual."""

    NAME: ClassVar[str] = "group_aggregate"
    RESULT: ClassVar[str] = (
        "partials string, tableSchema string, splits long, indexSplits long, rowSplits long, fromLog boolean"
    )
    plan: str
    request: str | None = None


@dataclass(frozen=True)
class DescribeCache(Command):
    """The split cache of the executors that run ``tasks`` tasks (no table)."""

    NAME: ClassVar[str] = "describe_cache"
    TABLE: ClassVar[bool] = False
    RESULT: ClassVar[str] = _CACHE_ROWS
    tasks: int = 1


@dataclass(frozen=True)
class FlushCache(Command):
    """Empty the split caches of the executors that run ``tasks`` tasks (no table)."""

    NAME: ClassVar[str] = "flush_cache"
    TABLE: ClassVar[bool] = False
    RESULT: ClassVar[str] = _CACHE_ROWS
    tasks: int = 1


# IndexTables4Spark's DESCRIBE INDEXTABLES TRANSACTION LOG columns (its 47, in its order and types).
_LOG_ACTION_ROWS = (
    "version long, log_file_path string, action_type string, path string, partition_values string, size long, "
    "data_change boolean, tags string, modification_time timestamp, stats string, min_values string, "
    "max_values string, num_records long, footer_start_offset long, footer_end_offset long, "
    "hotcache_start_offset long, hotcache_length long, has_footer_offsets boolean, time_range_start string, "
    "time_range_end string, split_tags string, delete_opstamp long, num_merge_ops int, doc_mapping_json string, "
    "doc_mapping_ref string, uncompressed_size_bytes long, deletion_timestamp timestamp, "
    "extended_file_metadata boolean, skip_timestamp timestamp, skip_reason string, skip_operation string, "
    "skip_retry_after timestamp, skip_count int, protocol_min_reader_version int, protocol_min_writer_version int, "
    "protocol_reader_features string, protocol_writer_features string, metadata_id string, metadata_name string, "
    "metadata_description string, metadata_format_provider string, metadata_format_options string, "
    "metadata_schema_string string, metadata_partition_columns string, metadata_configuration string, "
    "metadata_created_time timestamp, is_checkpoint boolean"
)


@dataclass(frozen=True)
class DescribeLog(Command):
    """Every action of the log, one row each: from the latest checkpoint on (its live files as
    ``is_checkpoint`` rows, then the versions after it), or with ``include_all`` every retained
    version from 0. The columns are IndexTables4Spark's ``DESCRIBE ... TRANSACTION LOG``."""

    NAME: ClassVar[str] = "describe_log"
    RESULT: ClassVar[str] = _LOG_ACTION_ROWS
    include_all: bool = False


@dataclass(frozen=True)
class ComponentSizes(Command):
    """Bytes per index component of every split matching ``filter`` (partition columns): the split
    bundle's members summed by kind (``_term_total``, ``_postings_total``, ``_positions_total``,
    ``_store``, ``_fastfield_total``, ``_fieldnorm_total``, ``_other``)."""

    NAME: ClassVar[str] = "component_sizes"
    RESULT: ClassVar[str] = (
        "split_path string, partition_values string, component_key string, size_bytes long, "
        "component_type string, field_name string"
    )
    filter: str | None = None


@dataclass(frozen=True)
class RepairLog(Command):
    """Write a fresh log at ``target`` (a ``_transaction_log`` directory that is empty or absent) holding
    the table's protocol, metadata and the live splits that exist in storage; the source is only read."""

    NAME: ClassVar[str] = "repair_log"
    RESULT: ClassVar[str] = (
        "source_path string, target_path string, source_version long, total_splits int, "
        "valid_splits int, missing_splits int, status string"
    )
    target: str


@dataclass(frozen=True)
class InvalidateLogCache(Command):
    """Drop the transaction-log caches of the Python workers ``tasks`` tasks land on (the latest
    snapshot per table and the decoded Avro manifests): of ``table`` only, or all of them."""

    NAME: ClassVar[str] = "invalidate_log_cache"
    TABLE: ClassVar[bool] = False
    RESULT: ClassVar[str] = (
        "table_path string, result string, cache_hits_before long, cache_misses_before long, hit_rate_before string"
    )
    table: str | None = None
    tasks: int = 1


@dataclass(frozen=True)
class FlushSearcherCache(Command):
    """Close the open split searchers and the split footers held in memory by the Python workers
    ``tasks`` tasks land on (the split files on disk stay: FLUSH ... DISK CACHE empties those)."""

    NAME: ClassVar[str] = "flush_searcher_cache"
    TABLE: ClassVar[bool] = False
    RESULT: ClassVar[str] = "cache_type string, status string, cleared_entries long, message string"
    tasks: int = 1


# IndexTables4Spark's BUILD INDEXTABLES COMPANION output columns (SyncToExternalCommand.output).
COMPANION_OUTPUT = (
    "table_path string, source_path string, status string, source_version long, splits_created int, "
    "splits_invalidated int, parquet_files_indexed int, parquet_bytes_downloaded long, "
    "split_bytes_uploaded long, duration_ms long, message string"
)


@dataclass(frozen=True)
class CompanionPlan(Command):
    """BUILD INDEXTABLES COMPANION, planned: one row per companion split to build (its source files),
    planned on the driver side from the source's live files and the companion's live splits (which
    need not exist yet); written back with ``CompanionBuild``. A plan with nothing to index but splits
    to invalidate has one row without files; with nothing to do, one row without files or
    invalidations (``settings`` then says what the source is)."""

    NAME: ClassVar[str] = "companion_plan"
    RESULT: ClassVar[str] = (
        "groupIndex int, partitionValues string, files string, sourceBytes long, "
        "sourceVersion long, readVersion long, invalidated string, settings string"
    )
    source_format: str
    source: str
    schema_source: str | None = None
    catalog: str | None = None
    catalog_type: str | None = None
    warehouse: str | None = None
    include_columns: str | None = None  # a JSON list
    exclude_columns: str | None = None  # a JSON list
    indexing_modes: str | None = None  # a JSON object: column -> mode
    fast_field_mode: str | None = None  # HYBRID (default), DISABLED, PARQUET_ONLY
    hashed_fastfields_include: str | None = None  # HASHED FASTFIELDS INCLUDE: a JSON list
    hashed_fastfields_exclude: str | None = None  # HASHED FASTFIELDS EXCLUDE: a JSON list
    target_input_size: str | None = None  # bytes, or with a unit: "1G"
    from_version: str | None = None  # FROM VERSION / FROM SNAPSHOT
    filter: str | None = None  # WHERE over partition columns: a filter tree as JSON
    where_sql: str | None = None  # the WHERE as written (recorded in the companion's metadata)
    invalidate_all: bool = False  # INVALIDATE ALL PARTITIONS: rebuild every split
    dry_run: bool = False


@dataclass(frozen=True)
class CompanionBuild(Command):
    """Writing ``CompanionPlan`` rows indexes each row's source files into a companion split on an
    executor; the commit removes the invalidated splits, adds the new ones and records the
    companion metadata in one version. Its commitInfo carries ``buildId``."""

    NAME: ClassVar[str] = "companion_build"
    WRITE: ClassVar[bool] = True
    build_id: str | None = None


@dataclass(frozen=True)
class CompanionResult(Command):
    """What the ``CompanionBuild`` with this ``build_id`` committed (from its commitInfo)."""

    NAME: ClassVar[str] = "companion_result"
    RESULT: ClassVar[str] = (
        "version long, splitsCreated int, splitsInvalidated int, filesIndexed int, "
        "bytesDownloaded long, bytesUploaded long, sourceVersion long"
    )
    build_id: str


PROFILER_ACTIONS = ("enable", "disable", "describe", "reset_sections", "reset_caches")


@dataclass(frozen=True)
class Profiler(Command):
    """The read-path profiler of the nodes ``tasks`` tasks land on and of the driver's node
    (``executor_lib.profiler``): ``action`` one of ``PROFILER_ACTIONS`` (enable resets the node's
    counters, disable keeps them; reset_* return the counters before zeroing them). One row per
    task and one for the driver's node (``role``), the node's counters as JSON; the client merges
    the nodes (IndexTables4Spark's ``ENABLE/DISABLE/DESCRIBE/RESET INDEXTABLES PROFILER [CACHE]``)."""

    NAME: ClassVar[str] = "profiler"
    TABLE: ClassVar[bool] = False
    RESULT: ClassVar[str] = "host string, directory string, role string, enabled boolean, counters string"
    action: str
    tasks: int = 1


DATA_SKIPPING_ACTIONS = ("describe", "flush", "invalidate")


@dataclass(frozen=True)
class DataSkipping(Command):
    """The data-skipping counts of scan planning on the driver's node (files considered, pruned by
    partition values, skipped by min/max statistics, scanned; see ``executor_lib.log.files.pruning.prune_scan``):
    ``describe`` reads them, ``flush`` and ``invalidate`` zero them (returning them as they were).
    One row, the counts as JSON."""

    NAME: ClassVar[str] = "data_skipping"
    TABLE: ClassVar[bool] = False
    RESULT: ClassVar[str] = "host string, directory string, counters string"
    action: str = "describe"


# Every command class of this module, by its NAME: a new command is its class above.
COMMANDS: dict[str, type[Command]] = {c.NAME: c for c in Command.__subclasses__() if c.__module__ == __name__}
# commands that name no table
TABLELESS: tuple[type[Command], ...] = tuple(c for c in COMMANDS.values() if not c.TABLE)


def merge_counters(into: dict[str, Any], deltas: Mapping[str, Any]) -> dict[str, Any]:
    """Add counters (``Profiler`` and ``DataSkipping`` results; a node's counter file) to ``into``, in
    place and returned: integers summed, timings ``[count, total_ns, min_ns, max_ns]`` combined (the
    least minimum, the greatest maximum), objects merged key by key.

    Example:
        >>> merge_counters({"a": 1, "t": [1, 5, 5, 5]}, {"a": 2, "t": [1, 3, 3, 3]})
        {'a': 3, 't': [2, 8, 3, 5]}
    """
    for key, value in deltas.items():
        old = into.get(key)
        if isinstance(value, Mapping):
            into[key] = merge_counters(old if isinstance(old, dict) else {}, value)
        elif isinstance(value, (list, tuple)):
            if isinstance(old, list) and len(old) == 4 and old[0]:
                into[key] = [old[0] + value[0], old[1] + value[1], min(old[2], value[2]), max(old[3], value[3])]
            else:
                into[key] = list(value)
        else:
            into[key] = (old if isinstance(old, int) else 0) + int(value)
    return into


def decode_command(options: Mapping[str, Any]) -> Command:
    """The command the options carry (``command=<name>`` and its arguments).

    Raises:
        CommandError: no or an unknown command name, or a bad argument (named).

    Example:
        >>> decode_command({"command": "history", "limit": "5"})
        History(limit=5)
    """
    name = command_name(options)
    return COMMANDS[name].from_options(options)


def command_name(options: Mapping[str, Any]) -> str:
    """The ``command`` option, checked against the known commands."""
    raw = next((v for k, v in options.items() if str(k).lower() == COMMAND_OPTION), "")
    name = str(raw or "").strip().lower()
    if name not in COMMANDS:
        raise CommandError(f"unknown command {name!r} (commands: {sorted(COMMANDS)})")
    return name


def option_keys() -> tuple[str, ...]:
    """Every option key a command may carry (``command`` and each argument's key)."""
    keys = {COMMAND_OPTION}
    for cls in COMMANDS.values():
        keys.update(option_key(f.name) for f in dataclasses.fields(cls))
    return tuple(sorted(keys))


def option_key(field_name: str) -> str:
    """``max_dest_splits`` -> ``maxDestSplits``."""
    head, *rest = field_name.split("_")
    return head + "".join(part.capitalize() for part in rest)


# -- argument codecs ----------------------------------------------------------------------------

_KINDS = (bool, int, float, str)


def _field_kinds(cls: type[Command]) -> dict[str, type]:
    hints = typing.get_type_hints(cls)
    out: dict[str, type] = {}
    for f in dataclasses.fields(cls):
        kinds = [k for k in typing.get_args(hints[f.name]) or (hints[f.name],) if k in _KINDS]
        out[f.name] = kinds[0]
    return out


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def _check(command: str, name: str, kind: type, value: Any) -> None:
    if value is None:
        return
    key = option_key(name)
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise CommandError(f"command {command}: option {key}={value!r}: expected {kind.__name__}")
    if kind is int and value < 1:
        raise CommandError(f"command {command}: option {key}={value!r}: expected a positive integer")
    if kind is float and not (math.isfinite(value) and value >= 0):
        raise CommandError(f"command {command}: option {key}={value!r}: expected a finite number >= 0")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse(command: str, key: str, kind: type, raw: Any) -> Any:
    text = str(raw).strip()
    if kind is str:
        return str(raw)
    if kind is bool:  # the registry's booleans (indextables_contract.settings.boolean)
        try:
            return S.boolean(text)
        except ValueError as e:
            raise CommandError(f"command {command}: option {key}={raw!r}: {e}") from None
    try:
        return kind(text)
    except ValueError as e:
        raise CommandError(f"command {command}: option {key}={raw!r}: expected {kind.__name__}") from e
