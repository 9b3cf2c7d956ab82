"""``format("indextables")``: the PySpark Python data source of IndexTables, and where each hook goes.

``IndexTablesDataSource`` runs in a Python process beside the driver, before any task (see
``docs/notes/pyspark-python-datasource.md``): ``schema`` checks the read options against the
table's pinned snapshot, then hands over to

* ``executor_lib.spark.reader`` (batch reads) and ``executor_lib.spark.writer`` (batch writes);
* ``executor_lib.spark.streaming`` (``readStream`` / ``writeStream``);
* ``executor_lib.spark.commands`` when the options carry ``command=<name>`` (maintenance
  commands and pushed aggregates, defined in ``indextables_contract.commands``).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
)
from pyspark.sql.types import BooleanType, FloatType, StringType, StructField, StructType

from executor_lib.spark import options as O
from executor_lib.spark.common import pinned_snapshot, require_path
from executor_lib.spark.reader import IndexTablesReader, doc_mappings, option_filters, query_strings
from executor_lib.spark.writer import IndexTablesWriter
from indextables_contract import FORMAT
from indextables_contract.errors import IndexTablesError
from indextables_contract.read import QUERY_WARNINGS_METADATA, SCORE_COLUMN

NAME = FORMAT
# IndexTables4Spark's documented format names: the same data source under each (registered statically
# by pyspark_indextables_provider and pyspark_indextables_spark, or by connect_plugin.install).
PROVIDER_NAME = "io.indextables.provider.IndexTablesProvider"
TABLE_PROVIDER_NAME = "io.indextables.spark.core.IndexTables4SparkTableProvider"


def _spark_schema(schema_string: str, columns: Sequence[str] | None) -> StructType:
    schema = StructType.fromJson(json.loads(schema_string))
    if columns is None:
        return schema
    by_name = {f.name: f for f in schema.fields}
    return StructType([by_name[c] for c in columns])


_Hook = TypeVar("_Hook", bound=Callable[..., Any])


def _headline(error: IndexTablesError) -> BaseException:
    """An exception that a Python traceback prints as ``error``'s message alone: a class named by it
    (in ``builtins``, so no module is printed) and no arguments, never raised (no frames)."""
    return type(str(error), (Exception,), {"__module__": "builtins"})()


def leads_with_the_error(hook: _Hook) -> _Hook:
    """A data source hook whose IndexTables error is the first line of what Spark reports.

    PySpark puts the worker's formatted traceback after its own prefix (``[PYTHON_DATA_SOURCE_ERROR]
    Failed to initialize Python data source writer: Traceback (most recent call last): ...``), so the
    error's own line came last, 30 lines down. A traceback prints an exception's cause first: the
    error is raised with a frameless cause that prints as its message alone, so the text Spark
    reports starts with ``[INDEXTABLES_*] ...``, then the traceback (which still ends with the error,
    where ``indextables_contract.errors.error_in`` finds it). PySpark's simplified tracebacks
    (``SPARK_SIMPLIFIED_TRACEBACK``, on by default) drop the cause (``pyspark.util.handle_worker_exception``):
    this worker process shows its tracebacks whole from then on.
    """

    @functools.wraps(hook)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return hook(*args, **kwargs)
        except IndexTablesError as e:
            failure = e
        failure.__cause__ = _headline(failure)
        os.environ.pop("SPARK_SIMPLIFIED_TRACEBACK", None)
        tb = failure.__traceback__
        raise failure.with_traceback(tb.tb_next if tb is not None else None)  # this frame is added again

    return run  # type: ignore[return-value]


class IndexTablesDataSource(DataSource):
    """``spark.read.format("indextables").load(path)`` / ``df.write.format("indextables").save(path)``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    @leads_with_the_error
    def schema(self) -> StructType | str:
        if _is_command(self.options):
            from executor_lib.spark.commands import command_schema

            return command_schema(self.options)
        path = require_path(self.options, "read")
        _, options = O.split_keys(self.options, O.STREAM_READ_KEYS)  # readStream's own options
        snapshot = pinned_snapshot(path, options)
        table_fields = json.loads(snapshot.metadata.schema_string)["fields"]
        table_columns = [f["name"] for f in table_fields]
        opts = O.canonical_options(options, O.READ_KEYS, O.READ_COLUMN_PREFIXES, table_columns, "read")
        types = {f["name"]: f["type"] for f in table_fields if isinstance(f["type"], str)}
        plan = O.read_plan(opts, table_columns, f"read {path}")
        schema = _spark_schema(snapshot.metadata.schema_string, O.output_columns(plan, table_columns, types))
        match = dict(plan.match_columns)
        snippets = O.snippet_columns(opts, table_columns)
        score = O.reads_score(opts, table_columns)
        if score or snippets:  # what a read's index query adds to its rows: never in the log's schema
            found = [*O.query_filters(opts), *([plan.filter] if plan.filter is not None else []), *match.values()]
            queries = [q for f in found for q in query_strings(f)]
            if score:
                O.check_score_query(queries, f"read {path}")
                schema = schema.add(SCORE_COLUMN, FloatType(), nullable=False)  # BM25, a float
            for name, _ in snippets:
                O.check_score_query(queries, f"read {path}", name)
                O.snippet_settings(opts)
                schema = schema.add(name, StringType(), nullable=True)
        for name in match:
            schema = schema.add(name, BooleanType(), nullable=False)
        if match or plan.filter is not None or O.query_filters(opts):  # a bad query fails at analysis, before any job
            warnings: list[str] = []
            table_arrow = snapshot.arrow_schema()
            option_filters(path, opts, table_arrow, lambda: doc_mappings(snapshot), match, plan.filter, warnings)
            schema = _with_warnings(schema, warnings)
        return schema

    @leads_with_the_error
    def reader(self, schema: StructType) -> DataSourceReader:
        if _is_command(self.options):
            from executor_lib.spark.commands import command_reader

            return command_reader(dict(self.options))
        return IndexTablesReader(dict(self.options), schema)

    @leads_with_the_error
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if _is_command(self.options):
            from executor_lib.spark.commands import command_writer

            return command_writer(dict(self.options))
        return IndexTablesWriter(dict(self.options), schema, overwrite)

    @leads_with_the_error
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from executor_lib.spark.streaming import IndexTablesStreamWriter

        return IndexTablesStreamWriter(dict(self.options), schema, overwrite)

    @leads_with_the_error
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from executor_lib.spark.streaming import IndexTablesStreamReader

        return IndexTablesStreamReader(dict(self.options), schema)


def _is_command(options: Mapping[str, Any]) -> bool:
    from indextables_contract.commands import COMMAND_OPTION

    return any(k.lower() == COMMAND_OPTION for k in options)


class IndexTablesProvider(IndexTablesDataSource):
    """``format("io.indextables.provider.IndexTablesProvider")``: IndexTables4Spark's provider name."""

    @classmethod
    def name(cls) -> str:
        return PROVIDER_NAME


class IndexTables4SparkTableProvider(IndexTablesDataSource):
    """``format("io.indextables.spark.core.IndexTables4SparkTableProvider")``: IndexTables4Spark's class name."""

    @classmethod
    def name(cls) -> str:
        return TABLE_PROVIDER_NAME


# Every name of the data source: the short name, then IndexTables4Spark's long names.
DATA_SOURCES: tuple[type[IndexTablesDataSource], ...] = (
    IndexTablesDataSource,
    IndexTablesProvider,
    IndexTables4SparkTableProvider,
)


def _with_warnings(schema: StructType, warnings: list[str]) -> StructType:
    """``schema`` with a read's query warnings in its first field's metadata (``QUERY_WARNINGS_METADATA``,
    a JSON list): the client shows them (``connect_plugin.query_warnings``). Unchanged without any."""
    if not warnings or not schema.fields:
        return schema
    first, *rest = schema.fields
    metadata = {**(first.metadata or {}), QUERY_WARNINGS_METADATA: json.dumps(warnings)}
    return StructType([StructField(first.name, first.dataType, first.nullable, metadata), *rest])
