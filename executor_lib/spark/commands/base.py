"""What every command shares: the typed command decoded from a read's options, its result schema,
the reader that plans it on the driver side and runs it in tasks, and the registry each family
module (``log``, ``maintenance``, ``merge``, ``cache``, ``aggregate``, ``profiler``, ``companion``)
adds its commands to: a run function (in a task), optionally a plan function (the per-task
payloads, on the driver side) and a writer for the commands that are written.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceReader, InputPartition

from executor_lib.log.files.live_files import LiveFiles, partition_strings
from executor_lib.log.files.partition_index import present_values
from executor_lib.protocol.actions import (
    AddAction,
)
from executor_lib.spark import options as O
from executor_lib.spark.common import (
    typed_filter,
)
from executor_lib.spark.reader import (
    query_strings,
)
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract.errors import CommandError, ConfigError

if TYPE_CHECKING:
    from executor_lib.log.snapshot import Snapshot


# Options a command read may carry beyond its arguments (a pinned version; the read settings of
# a pushed aggregate's tasks).
COMMAND_KEYS = (*C.option_keys(), "versionAsOf", "timestampAsOf")

Rows = Iterator[tuple[Any, ...]]


@dataclass(frozen=True)
class Handler:
    """How a read command runs: ``run(reader, command, payload)`` yields its rows in a task;
    ``plan(reader, command)`` lists the tasks' payloads (default: one task, or ``tasks`` of a
    tableless command); ``at_analysis(reader)`` gives the rows when planning already answered."""

    run: Callable[[CommandReader, Any, Any], Rows]
    plan: Callable[[CommandReader, Any], list[Any]] | None = None
    at_analysis: Callable[[CommandReader], list[tuple[Any, ...]] | None] | None = None


# Filled by the family modules (imported by ``executor_lib.spark.commands``); tests/contract checks
# that it holds exactly the contract's read commands.
REGISTRY: dict[type[C.Command], Handler] = {}
WRITERS: dict[type[C.Command], Callable[[Mapping[str, str]], DataSourceArrowWriter]] = {}


CommandT = TypeVar("CommandT", bound=C.Command)


def register(
    cls: type[CommandT],
    run: Callable[[CommandReader, CommandT, Any], Rows],
    plan: Callable[[CommandReader, CommandT], list[Any]] | None = None,
    at_analysis: Callable[[CommandReader], list[tuple[Any, ...]] | None] | None = None,
) -> None:
    """Make ``cls`` (a read command of the contract) runnable: ``run(reader, command, payload)``
    yields a task's rows, ``plan(reader, command)`` lists the tasks' payloads. Both are checked
    against ``cls`` by mypy (a handler of another command's fields does not type-check).

    Example:
        >>> register(C.History, lambda reader, cmd, payload: iter(()))  # doctest: +SKIP
    """
    REGISTRY[cls] = Handler(run, plan, at_analysis)


def register_writer(cls: type[C.Command], writer: Callable[[Mapping[str, str]], DataSourceArrowWriter]) -> None:
    """Make ``cls`` (a written command of the contract) writable with ``writer(raw_options)``."""
    WRITERS[cls] = writer


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


def command_options(raw: Mapping[str, str], name: str) -> dict[str, str]:
    return O.canonical_options(raw, (*O.READ_KEYS, *COMMAND_KEYS), (), (), f"command {name}")


class CommandPartition(InputPartition):
    def __init__(self, index: int, payload: Any = None) -> None:
        super().__init__(index)
        self.payload = payload


class CommandReader(DataSourceReader):
    """Plans a command on the driver side (its registered plan function); runs it in tasks."""

    def __init__(self, raw_options: Mapping[str, str]) -> None:
        self.command = decode(raw_options)
        if self.command.WRITE:
            raise ConfigError(f"command {self.command.NAME} is written, not read (write merge_plan rows with it)")
        self.name = self.command.NAME
        self.options = command_options(raw_options, self.name)
        self.time_zone = self.options.get("sessionTimeZone")  # of timestamp literals without an offset
        if isinstance(self.command, C.TABLELESS):
            self.path = ""
        else:
            self.path = str(raw_options.get("path") or "")
            if not self.path:
                raise ConfigError(f"command {self.name}: no table path")
            if not isinstance(self.command, (C.GroupAggregate, C.CompanionPlan)):  # (a companion may not exist yet)
                self.table_log().latest_version()  # TableNotFoundError before any task runs
        # What a group aggregate's planning hands its tasks (``aggregate.plan_group_aggregate``).
        self.table_schema = ""
        self.companion_root: str | None = None
        self.partition_columns: list[str] = []
        self.plan: list[Any] = self._plan()

    def table_log(self) -> Any:
        """The transaction log of the command's table, opened with the command's storage options."""
        from executor_lib.log.tables import open_log

        return open_log(self.path, **O.storage_and_log_options(self.options))

    def partition_filter(self, snapshot: Snapshot) -> F.Filter | None:
        """The command's WHERE (its ``filter`` argument) checked against ``snapshot``'s partition columns
        (None: no WHERE).

        Raises:
            ConfigError: the WHERE uses an index operator, or (DROP PARTITIONS, MERGE SPLITS) names a column
                that is not a partition column.
        """
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
        handler = REGISTRY[type(self.command)]
        if handler.plan is not None:
            return handler.plan(self, self.command)
        tasks = getattr(self.command, "tasks", None)
        if isinstance(self.command, C.TABLELESS) and tasks is not None:
            return list(range(tasks))
        return [None]

    def partitions(self) -> list[CommandPartition]:
        return [CommandPartition(i, payload) for i, payload in enumerate(self.plan)]

    def read(self, partition: InputPartition) -> Rows:
        if not isinstance(partition, CommandPartition):
            return  # nothing was planned: Spark reads one default partition
        yield from REGISTRY[type(self.command)].run(self, self.command, partition.payload)

    def rows_at_analysis(self) -> list[tuple[Any, ...]] | None:
        """The result rows when planning answered the command (a ``group_aggregate`` the transaction
        log's record counts answer), else None: tasks must run."""
        at_analysis = REGISTRY[type(self.command)].at_analysis
        return None if at_analysis is None else at_analysis(self)


def commit_with(txlog: Any, parameter: str, value: str, depth: int = 200) -> tuple[int, Any] | None:
    """(version, commitInfo) of the newest of the last ``depth`` versions whose commitInfo records
    ``parameter`` = ``value`` (a MERGE SPLITS' merge id, a row change's change id), else None."""
    latest = txlog.latest_version()
    for v in range(latest, max(-1, latest - depth), -1):
        info = txlog.commit_info(v)
        if info is not None and (info.operation_parameters or {}).get(parameter) == value:
            return v, info
    return None


def worker() -> str:
    return f"{socket.gethostname()} (pid {os.getpid()})"


def utc(ms: int) -> Any:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)


def matching_files(snapshot: Snapshot, where: F.Filter | None) -> list[AddAction]:
    """Live files whose partition values satisfy ``where`` (exactly, evaluated with SQL semantics
    on typed partition values; numeric partitions compare as numbers). ``where`` is judged once per
    distinct partition, and only the files it keeps become objects."""
    if where is None:
        return snapshot.files
    columns = list(snapshot.partition_columns)
    keep = partition_keep(snapshot, where)
    files = snapshot.state.files
    if isinstance(files, LiveFiles):
        return files.select_partitions(keep, columns)
    return [a for a in files.values() if keep(present_values(a.partition_values, columns))]


def partition_keep(snapshot: Snapshot, where: F.Filter) -> Callable[[Mapping[str, str]], bool]:
    """``keep(values)``: whether the partition ``values`` (column -> value as the log writes it; a
    column left out: null) satisfy ``where`` exactly; judged up front for every live partition."""
    columns = list(snapshot.partition_columns)
    table = snapshot.file_columns(["partition_values"])
    distinct = pa.table(partition_strings(table.column("partition_values"), columns)).group_by(columns).aggregate([])
    mask = partition_mask(snapshot, where, distinct)
    accepted = {tuple(row[c] for c in columns) for row, ok in zip(distinct.to_pylist(), mask, strict=True) if ok}
    return lambda values: tuple(values.get(c) for c in columns) in accepted


def partition_mask(snapshot: Snapshot, where: F.Filter | None, partitions: pa.Table) -> list[bool]:
    """For each row of ``partitions`` (a string column per partition column, as the log writes the
    values), whether ``where`` holds on its values typed as the table's columns."""
    if where is None:
        return [True] * partitions.num_rows
    from executor_lib.splits.query.pushdown import residual_mask

    schema = snapshot.arrow_schema()
    where = typed_filter(where, schema)
    typed = typed_partitions(partitions, schema)
    return [bool(v) for v in residual_mask(where, typed, lambda q: pa.array([], pa.uint64())).to_pylist()]


def typed_partitions(partitions: pa.Table, schema: pa.Schema) -> pa.Table:
    """The partition columns of ``partitions`` cast from the log's strings to the table's types."""
    return pa.table({c: partitions.column(c).cast(schema.field(c).type) for c in partitions.column_names})


def command_reader(raw_options: Mapping[str, str]) -> CommandReader:
    """The reader of a read command's options."""
    return CommandReader(raw_options)


def command_writer(raw_options: Mapping[str, str]) -> DataSourceArrowWriter:
    """The writer of a written command's options (``merge``, ``companion_build``)."""
    cls = _command_class(raw_options)
    writer = WRITERS.get(cls)
    if writer is None:
        raise ConfigError(
            f"command {cls.NAME!r} cannot be written (write {C.MergePlan.NAME} rows with command={C.Merge.NAME})"
        )
    return writer(raw_options)
