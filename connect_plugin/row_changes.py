"""DELETE and UPDATE of a table's rows, as Spark work (``indextables_contract.row_changes`` says how):
find the splits holding a matching row (``match_counts``), read exactly those at that version with
the matching rows marked, drop or change the marked rows in Spark, and write what comes out as a
row change, whose commit replaces the splits read with the splits written in one version.

Only splits that hold a match are rewritten; the others are not read. An earlier version still
shows the old rows (time travel), and PURGE reclaims the replaced splits after its retention.

    t = IndexTable.for_path(spark, "/t")
    delete(t, "level = 'DEBUG' AND msg indexquery 'heartbeat'").show()
    update(t, "id = 7", {"level": "'WARN'", "latency": "latency * 2"}).show()
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from connect_plugin.failures import project_error_first
from connect_plugin.grammar import parse_predicate, split_spark_part
from connect_plugin.plan import TableRead, command_frame, local_frame, options_tuple
from connect_plugin.settings import merged_options
from connect_plugin.where import Where
from connect_plugin.where import to_filter as _where
from indextables_contract import FORMAT
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract import row_changes as RC
from indextables_contract.errors import ConfigError
from indextables_contract.read import ReadPlan

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


class Table(Protocol):
    """What a row change needs of a table (``connect_plugin.table.IndexTable`` has it)."""

    spark: SparkSession
    path: str
    options: dict[str, Any]


def delete(table: Table, where: Where, alias: str | None = None) -> DataFrame:
    """Delete the rows ``where`` matches (a filter tree or SQL predicate text, as a read's WHERE:
    ``indexquery``, filters on any column, partition columns, and parts Spark evaluates: function
    calls, arithmetic); returns one row of what was done (``ChangeResult``'s columns; ``version``
    null when no row matched and nothing was committed). ``alias``: a name the Spark parts may
    qualify the table's columns with.

    Raises:
        FilterError / IndexTablesSQLError: a malformed condition (here, before anything runs).
        ConfigError: a column the table lacks, a companion index, a table with index-only columns.
        CommitConflictError: a MERGE SPLITS, PURGE or row change removed one of the splits first.

    Example: ``delete(IndexTable.for_path(spark, "/t"), "user_id = 42").show()``
    """
    condition, spark_part = _condition(table, where, alias)
    with project_error_first():
        return _change(table, "DELETE", (condition, spark_part), _unmatched, alias)


def update(
    table: Table, where: Where | None, assignments: Mapping[str, str | Column], alias: str | None = None
) -> DataFrame:
    """Set the columns of ``assignments`` (column -> Spark SQL expression text over the row, or a
    Column) on the rows ``where`` matches (None: every row); returns one row of what was done.
    Each value is cast to its column's type; a type that cannot be assigned is refused. ``alias``:
    a name the expressions may qualify the table's columns with (``t.latency * 2``).

    Raises:
        ConfigError: an unknown column, an expression whose type does not fit its column (both before
            anything is written), or as ``delete``.

    Example: ``update(t, "level = 'warn'", {"level": "upper(level)"}).show()``
    """
    if not assignments:
        raise ConfigError(f"update of {table.path}: SET needs at least one column")
    condition, spark_part = _condition(table, where, alias)
    with project_error_first():
        assign = lambda rows: _assigned(table.path, rows, assignments)  # noqa: E731
        return _change(table, "UPDATE", (condition, spark_part), assign, alias)


def _condition(table: Table, where: Where | None, alias: str | None) -> tuple[F.Filter, str | None]:
    """(the filter tree that finds the splits and marks the rows, the SQL condition Spark applies to
    the marked rows, if any) of a statement's ``where``: SQL text's parts over function calls or
    arithmetic go to Spark (``grammar.split_spark_part``), the rest to the index."""
    if where is None:
        return _everything(table), None
    if not isinstance(where, str):
        return _where(where), None
    index_part, spark_part = split_spark_part(parse_predicate(where))
    if index_part is None:
        return _everything(table), spark_part
    return _unqualified(index_part, alias), spark_part


def _unqualified(where: F.Filter, alias: str | None) -> F.Filter:
    """``where`` with its columns' table qualifier (``t.id``: the alias, or the table's name) taken off."""
    if alias is None:
        return where
    prefix = alias.lower() + "."
    return F.map_columns(where, lambda c: c[len(prefix) :] if c.lower().startswith(prefix) else c)


def _everything(table: Table) -> F.Filter:
    """A condition every row meets (an UPDATE without WHERE): a value in the first column, or none."""
    first = TableRead(table.path, ReadPlan(), options_tuple(dict(table.options))).dataframe(table.spark).columns[0]
    return F.Or((F.Exists(first), F.Not(F.Exists(first))))


def _unmatched(rows: DataFrame) -> DataFrame:
    """The rows the statement's predicate does not match (what a DELETE writes back)."""
    return rows.where(~functions_of(rows).col(f"`{RC.MATCH_COLUMN}`"))


def functions_of(rows: DataFrame) -> Any:
    """PySpark's functions for the session of ``rows``: Spark Connect's own for a remote session (the
    classic module builds JVM columns when a process also has a classic session)."""
    if type(rows).__module__.startswith("pyspark.sql.connect"):
        from pyspark.sql.connect import functions as connect_functions

        return connect_functions
    from pyspark.sql import functions as classic_functions

    return classic_functions


def _change(
    table: Table, operation: str, where: tuple[F.Filter, str | None], transform: Any, alias: str | None
) -> DataFrame:
    """Run one row change: the splits ``where``'s filter tree matches in, read with the matches marked
    (and, with a Spark condition, the marks narrowed to the rows it holds on: counted first), turned
    by ``transform`` into the rows written in their place."""
    condition, spark_part = where
    spark = table.spark
    opts = merged_options(spark, table.options)
    counts = command_frame(spark, C.MatchCounts(filter=F.to_text(condition)), table.options, table.path).collect()
    schema = result_schema()
    if not counts:
        return local_frame(spark, [(None, operation, 0, 0, 0, 0, 0)], schema)
    version = int(counts[0]["version"])
    replaced = tuple(str(r["path"]) for r in counts)
    matched = sum(int(r["matches"]) for r in counts)
    plan = ReadPlan(splits=replaced, match_columns=((RC.MATCH_COLUMN, condition),))
    extra = {**table.options, "versionAsOf": str(version)}

    def marked_rows() -> DataFrame:  # a fresh read for each action (Spark 4.3 reuses a DataFrame's pushdown)
        rows = TableRead(table.path, plan, options_tuple(extra)).dataframe(spark)
        rows = rows.alias(alias) if alias else rows
        return rows if spark_part is None else _narrowed(rows, spark_part)

    if spark_part is not None:
        matched = int(marked_rows().where(f"`{RC.MATCH_COLUMN}`").count())
        if not matched:
            return local_frame(spark, [(None, operation, 0, 0, 0, 0, 0)], schema)
    rows = marked_rows()
    metric = {"DELETE": "numDeletedRows", "UPDATE": "numUpdatedRows"}[operation]
    change = RC.RowChange(operation, uuid.uuid4().hex, version, replaced, ((metric, matched),))
    written = transform(rows).drop(RC.MATCH_COLUMN)
    written.write.format(FORMAT).mode("append").options(**opts, **change.to_options()).save(table.path)
    result = command_frame(spark, C.ChangeResult(change_id=change.change_id), table.options, table.path).collect()
    return local_frame(spark, [tuple(r) for r in result], schema)


def _narrowed(rows: DataFrame, spark_part: str) -> DataFrame:
    """``rows`` with their marks kept only where the SQL condition ``spark_part`` holds (a null: not)."""
    sf = functions_of(rows)
    marked = sf.col(f"`{RC.MATCH_COLUMN}`") & sf.coalesce(sf.expr(spark_part), sf.lit(False))
    return rows.withColumn(RC.MATCH_COLUMN, marked)


def result_schema() -> Any:
    """``ChangeResult``'s schema, built here (``StructType.fromDDL`` needs a classic session's JVM)."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    types = {"long": LongType(), "string": StringType()}
    pairs = [column.split() for column in C.ChangeResult.RESULT.split(",")]
    return StructType([StructField(name, types[kind]) for name, kind in pairs])


def _assigned(path: str, rows: DataFrame, assignments: Mapping[str, str | Column]) -> DataFrame:
    """``rows`` with each assigned column replaced, on the marked rows, by its expression cast to the
    column's type; ConfigError for an unknown column or a type that cannot be assigned."""
    sf = functions_of(rows)
    fields = {f.name.lower(): f for f in rows.schema.fields if f.name != RC.MATCH_COLUMN}
    values: dict[str, Column] = {}
    for name, value in assignments.items():
        field = fields.get(str(name).lower())
        if field is None:
            raise ConfigError(
                f"update of {path}: SET {name}: no such column (columns: {[f.name for f in fields.values()]})"
            )
        expression = sf.expr(value) if isinstance(value, str) else value
        found = rows.select(expression.alias("v")).schema.fields[0].dataType  # analysed here, before any write
        problem = assignment_problem(found, field.dataType)
        if problem is not None:
            raise ConfigError(f"update of {path}: SET {field.name} = {value}: {problem}")
        values[field.name] = expression.cast(field.dataType)
    marked = sf.col(f"`{RC.MATCH_COLUMN}`")
    return rows.select(
        *(
            sf.when(marked, values[f.name]).otherwise(sf.col(f"`{f.name}`")).alias(f.name)
            if f.name in values
            else sf.col(f"`{f.name}`")
            for f in rows.schema.fields
        )
    )


def assignment_problem(found: Any, wanted: Any) -> str | None:
    """Why a value of type ``found`` may not be stored in a column of type ``wanted`` (None: it may), by
    Spark's ANSI store assignment: the same type, a number into a number, a date or timestamp into
    either, anything into a string, a null anywhere."""
    from pyspark.sql import types as T

    numbers = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType)
    times = (T.DateType, T.TimestampType, T.TimestampNTZType)
    if (
        isinstance(found, T.NullType)
        or found == wanted
        or (isinstance(found, numbers) and isinstance(wanted, numbers))
        or (isinstance(found, times) and isinstance(wanted, times))
        or (isinstance(wanted, T.StringType) and not isinstance(found, (T.StructType, T.ArrayType, T.MapType)))
    ):
        return None
    return f"a {found.simpleString()} value cannot be stored in a {wanted.simpleString()} column"
