"""Logical plans of reads over IndexTables tables: one machinery for the SQL front end
(``connect_plugin.sql``), the table API (``IndexTable``) and ``explain``.

* ``TableRead`` is one indexed read: a table, its options and the contract's ``ReadPlan`` — the
  columns it returns (exact ``columns``, or the table's columns among the names a statement uses,
  ``required_columns``), the filter tree the executors apply (the index answers what it can, the
  rest is checked on the rows), a LIMIT each task stops at, and boolean *match columns* (whether
  each row matches an index query — how ``indexquery`` works anywhere in a statement, e.g. under
  OR or in a join).
* ``AggregateRead`` is a pushed ``GROUP BY``: the ``group_aggregate`` command runs an
  ``AggregatePlan`` (``indextables_contract.aggregate``) on every split — from the transaction
  log's record counts when only ``count(*)`` over partition values is asked, else with Tantivy
  aggregations or Arrow on the executors — and the merged result becomes a small DataFrame
  with the names and types Spark gives the same statement (ORDER BY / LIMIT on its output
  columns are applied to it).

Nothing here parses SQL, imports tantivy or touches storage.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from connect_plugin.query_warnings import warn_for_read
from indextables_contract import FORMAT
from indextables_contract import filters as F
from indextables_contract.aggregate import AggregatePlan, Measure, finalize, merge_json
from indextables_contract.commands import RESULT_ROWS_METADATA, Command, GroupAggregate
from indextables_contract.read import ReadPlan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType


def _session_options(spark: SparkSession, options: Mapping[str, Any] | None) -> dict[str, str]:
    from connect_plugin.settings import read_options

    return read_options(spark, options)


@dataclass(frozen=True)
class TableRead:
    """One indexed read of the table at ``path`` (see the module docstring)."""

    path: str
    plan: ReadPlan = field(default_factory=ReadPlan)
    options: tuple[tuple[str, str], ...] = ()

    def read_options(self, spark: SparkSession) -> dict[str, str]:
        return {**_session_options(spark, dict(self.options)), **self.plan.to_options()}

    def dataframe(self, spark: SparkSession) -> DataFrame:
        """A fresh DataFrame of this read (a new plan per call: see ``connect_plugin.read``); an
        ``indexquery`` that cannot find what it says warns (``connect_plugin.query_warnings``)."""
        df = self.load(spark)
        warn_for_read(spark, self.path, self.plan.filter, lambda: df)
        if self.plan.limit is None:
            return df
        # a bare LIMIT is one task of at most `limit` rows: Spark reads it to its end under `limit + 1`
        return df.limit(self.plan.limit + 1 if self.plan.one_task(dict(self.options)) else self.plan.limit)

    def load(self, spark: SparkSession) -> DataFrame:
        """The read's DataFrame as Spark gives it (no limit, no warnings)."""
        return spark.read.format(FORMAT).options(**self.read_options(spark)).load(self.path)

    def describe(self) -> str:
        plan, required = self.plan, self.plan.required_columns
        columns = (
            ", ".join(plan.columns)
            if plan.columns is not None
            else "all"
            if required is None or "*" in required
            else "the table's columns among: " + ", ".join(sorted(set(required), key=str.lower))
        )
        lines = [f"read {self.path}", f"  columns: {columns}"]
        shown = "none" if plan.filter is None else F.to_text(plan.filter)
        lines.append(f"  filter (index first, the rest on the rows): {shown}")
        for name, tree in plan.match_columns:
            lines.append(f"  match column {name}: {F.to_text(tree)}")
        lines.append(f"  limit per task: {plan.limit if plan.limit is not None else 'none'}")
        if plan.top_k is not None and plan.top_k_order is not None:
            column, descending, nulls_first = plan.top_k_order
            how = f"{column} {'DESC' if descending else 'ASC'} NULLS {'FIRST' if nulls_first else 'LAST'}"
            lines.append(f"  best rows by {how} per task: {plan.top_k} (a number, date or timestamp column)")
        elif plan.top_k is not None:
            lines.append(f"  best rows by _score per task: {plan.top_k} (table-wide BM25 statistics)")
        return "\n".join(lines)


def warn_for_filter(
    spark: SparkSession, path: str, tree: F.Filter | None, options: tuple[tuple[str, str], ...]
) -> None:
    """The query warnings of a command filtered by ``tree`` (an aggregate): a read with that filter says them."""
    warn_for_read(spark, path, tree, lambda: TableRead(path, ReadPlan(filter=tree), options).load(spark))


@dataclass(frozen=True)
class OutputColumn:
    """One column of an aggregate's result: a group column (``group`` index) or a measure."""

    name: str
    group: int | None = None
    measure: int | None = None


@dataclass(frozen=True)
class OrderKey:
    output: int  # index into the outputs
    descending: bool = False
    nulls_first: bool | None = None  # None: Spark's default (first for ASC, last for DESC)


@dataclass(frozen=True)
class AggregateRead:
    """A pushed aggregate over the table at ``path`` (see the module docstring)."""

    path: str
    plan: AggregatePlan
    outputs: tuple[OutputColumn, ...]
    order_by: tuple[OrderKey, ...] = ()
    limit: int | None = None
    options: tuple[tuple[str, str], ...] = ()
    result: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)  # filled by run()

    def command(self, spark: SparkSession) -> DataFrame:
        return command_frame(spark, GroupAggregate(plan=self.plan.to_json()), dict(self.options), self.path)

    def _result_rows(self, spark: SparkSession) -> tuple[list[Any], bool]:
        """The command's rows. A ``count(*)`` asks for its answer at analysis (``GroupAggregate.request``):
        when the transaction log's record counts answer it, Spark's analysis of the read returns the
        rows in the schema and no job runs (about 0.1 s less, PySpark's floor for a query)."""
        if not self.plan.counts_only():
            return self.command(spark).collect(), False
        command = GroupAggregate(plan=self.plan.to_json(), request=uuid.uuid4().hex)
        frame = command_frame(spark, command, dict(self.options), self.path, schema_from_source=True)
        answered = frame.schema.fields[0].metadata.get(RESULT_ROWS_METADATA)
        if answered is None:
            return frame.collect(), False
        return [dict(zip(frame.schema.names, row, strict=True)) for row in json.loads(answered)], True

    def run(self, spark: SparkSession) -> DataFrame | None:
        """The aggregate's result as a small DataFrame; None if a measure's type is one this path does
        not type as Spark does (decimals, sums of non-numbers): the caller lets Spark aggregate then."""
        warn_for_filter(spark, self.path, None if not self.plan.filter else F.from_text(self.plan.filter), self.options)
        rows, at_analysis = self._result_rows(spark)
        table = _struct(rows[0]["tableSchema"])
        schema = self._schema(table)
        self.result.update(
            splits=sum(r["splits"] for r in rows),
            index_splits=sum(r["indexSplits"] for r in rows),
            row_splits=sum(r["rowSplits"] for r in rows),
            from_log=any(r["fromLog"] for r in rows),
            at_analysis=at_analysis,
        )
        if schema is None:
            return None
        resolved = {f.name.lower(): f.name for f in table.fields}
        plan = AggregatePlan(
            tuple(resolved[c.lower()] for c in self.plan.group_by),
            tuple(Measure(m.func, m.column and resolved[m.column.lower()]) for m in self.plan.measures),
            self.plan.filter,
        )
        merged = finalize(plan, merge_json([r["partials"] for r in rows]))
        n_groups = len(self.plan.group_by)
        out = [
            tuple(row[o.group] if o.group is not None else row[n_groups + (o.measure or 0)] for o in self.outputs)
            for row in merged
        ]
        out = self._ordered(out)
        if self.limit is not None:
            out = out[: self.limit]
        return local_frame(spark, out, schema)

    def _schema(self, table: StructType) -> StructType | None:
        from pyspark.sql.types import StructField, StructType

        fields = []
        for o in self.outputs:
            t = self._type(table, o)
            if t is None:
                return None
            fields.append(StructField(o.name, t, nullable=True))
        return StructType(fields)

    def _type(self, table: StructType, o: OutputColumn) -> DataType | None:
        from pyspark.sql.types import (
            ByteType,
            DoubleType,
            FloatType,
            IntegerType,
            LongType,
            ShortType,
        )

        by_lower = {f.name.lower(): f.dataType for f in table.fields}
        if o.group is not None:
            return by_lower.get(self.plan.group_by[o.group].lower())
        m = self.plan.measures[o.measure or 0]
        if m.func == "count":
            return LongType()
        column_type = by_lower.get((m.column or "").lower())
        integral = isinstance(column_type, (ByteType, ShortType, IntegerType, LongType))
        floating = isinstance(column_type, (FloatType, DoubleType))
        if m.func == "sum":
            return LongType() if integral else DoubleType() if floating else None
        if m.func == "avg":
            return DoubleType() if integral or floating else None
        return column_type  # min / max

    def _ordered(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return ordered_rows(rows, self.order_by)

    def describe(self) -> str:
        measures = ", ".join(f"{m.func}({m.column or '*'})" for m in self.plan.measures)
        lines = [f"aggregate {self.path} (pushed to the executors)"]
        lines.append(f"  group by: {', '.join(self.plan.group_by) or 'none'}")
        lines.append(f"  measures: {measures}")
        lines.append(f"  filter: {self.plan.filter or 'none'}")
        if self.order_by or self.limit is not None:
            order = ", ".join(f"{self.outputs[k.output].name}{' DESC' if k.descending else ''}" for k in self.order_by)
            lines.append(f"  then: order by {order or '-'}, limit {self.limit if self.limit is not None else '-'}")
        if self.result:
            r = self.result
            how = (
                "the transaction log's record counts while Spark analysed the read (no split opened, no task ran)"
                if r["at_analysis"]
                else "the transaction log's record counts (no split opened)"
                if r["from_log"]
                else f"{r['splits']} splits: {r['index_splits']} by Tantivy aggregations, {r['row_splits']} by Arrow "
                "over their matching rows"
            )
            lines.append(f"  answered from: {how}")
        return "\n".join(lines)


def ordered_rows(rows: list[tuple[Any, ...]], order_by: Sequence[OrderKey]) -> list[tuple[Any, ...]]:
    """``rows`` sorted as ORDER BY ``order_by`` sorts them (Spark's null ordering)."""
    for key in reversed(order_by):  # stable sorts, last key first
        nulls_first = key.nulls_first if key.nulls_first is not None else not key.descending
        present = [r for r in rows if r[key.output] is not None]
        missing = [r for r in rows if r[key.output] is None]
        present.sort(key=lambda r, i=key.output: r[i], reverse=key.descending)  # type: ignore[misc]
        rows = missing + present if nulls_first else present + missing
    return rows


@dataclass(frozen=True)
class BucketRead:
    """``SELECT <bucket function>, <measures> FROM t [WHERE ...] GROUP BY <bucket function>``: the
    bucket aggregation (histogram, date histogram, range: ``connect_plugin.grammar.BucketCall``) and the
    measures' ``stats`` run by Tantivy on the executors (the ``aggregate`` command, as
    ``IndexTable.aggregate``), merged here into one row per bucket: the bucket key (a double, a
    timestamp or the range's name, as the JVM's functions return them), then each measure."""

    path: str
    call: Any  # connect_plugin.grammar.BucketCall
    measures: tuple[Measure, ...]
    outputs: tuple[OutputColumn, ...]  # group=0: the bucket key
    filter: F.Filter | None = None
    order_by: tuple[OrderKey, ...] = ()
    limit: int | None = None
    options: tuple[tuple[str, str], ...] = ()

    def run(self, spark: SparkSession) -> DataFrame:
        """The buckets as a small DataFrame.

        Raises:
            IndexTablesSQLError: a column of the wrong type for the function or a measure (named).
        """
        from connect_plugin.aggregate import bucket_request, bucket_rows, merge_results
        from indextables_contract.commands import Aggregate

        warn_for_filter(spark, self.path, self.filter, self.options)
        table = TableRead(self.path, ReadPlan(), self.options).dataframe(spark).schema
        schema = self._schema(table)
        resolved = {f.name.lower(): f.name for f in table.fields}
        call = _replace_column(self.call, resolved.get(self.call.column.lower(), self.call.column))
        measures = tuple(Measure(m.func, m.column and resolved.get(m.column.lower(), m.column)) for m in self.measures)
        request = bucket_request(call, measures)
        command = Aggregate(
            aggregations=json.dumps(request), filter=None if self.filter is None else F.to_text(self.filter)
        )
        frame = command_frame(spark, command, dict(self.options), self.path)
        parts = [json.loads(r["result"]) for r in frame.collect()]
        merged = merge_results(request, parts)
        rows = []
        for key, *values in bucket_rows(call, measures, merged):
            typed = [_typed(v, f.dataType) for v, f in zip(values, schema.fields[1:], strict=False)]
            rows.append(tuple(key if o.group is not None else typed[o.measure or 0] for o in self.outputs))
        out = ordered_rows(rows, self.order_by)
        if self.limit is not None:
            out = out[: self.limit]
        return local_frame(spark, out, self._output_schema(schema))

    def _schema(self, table: StructType) -> StructType:
        """(bucket key, measures...) typed as Spark types them."""
        from pyspark.sql.types import (
            ByteType,
            DateType,
            DecimalType,
            DoubleType,
            FloatType,
            IntegerType,
            LongType,
            ShortType,
            StringType,
            StructField,
            StructType,
            TimestampNTZType,
            TimestampType,
        )

        from indextables_contract.errors import IndexTablesSQLError

        by_lower = {f.name.lower(): f.dataType for f in table.fields}
        numeric = (ByteType, ShortType, IntegerType, LongType, FloatType, DoubleType, DecimalType)
        column_type = by_lower.get(self.call.column.lower())
        name = f"indextables_{self.call.kind}"
        if column_type is None:
            raise IndexTablesSQLError(f"{name}: column {self.call.column!r} is not in the table {self.path}")
        if self.call.kind == "date_histogram":
            if not isinstance(column_type, (TimestampType, TimestampNTZType, DateType)):
                raise IndexTablesSQLError(
                    f"{name} needs a timestamp or date column; {self.call.column!r} is {column_type.simpleString()}"
                )
            key: Any = TimestampType()
        elif not isinstance(column_type, numeric):
            raise IndexTablesSQLError(
                f"{name} needs a numeric column; {self.call.column!r} is {column_type.simpleString()}"
            )
        else:
            key = DoubleType() if self.call.kind == "histogram" else StringType()
        fields = [StructField("key", key, nullable=False)]
        for m in self.measures:
            t = by_lower.get((m.column or "").lower()) if m.column is not None else None
            if m.column is not None and t is None:
                raise IndexTablesSQLError(f"{m.func}({m.column}): no such column in the table {self.path}")
            if m.column is not None and m.func != "count" and not isinstance(t, numeric):
                raise IndexTablesSQLError(
                    f"{m.func}({m.column}) beside a bucket function needs a numeric column (Tantivy's stats); "
                    f"{m.column!r} is {t.simpleString() if t else t}"
                )
            integral = isinstance(t, (ByteType, ShortType, IntegerType, LongType))
            if m.func == "count":
                out: Any = LongType()
            elif m.func == "sum":
                out = LongType() if integral else DoubleType()
            elif m.func == "avg":
                out = DoubleType()
            else:
                out = t
            fields.append(StructField(f"{m.func}({m.column or '*'})", out, nullable=m.func != "count"))
        return StructType(fields)

    def _output_schema(self, schema: StructType) -> StructType:
        from pyspark.sql.types import StructField, StructType

        return StructType(
            [
                StructField(
                    o.name,
                    schema.fields[0 if o.group is not None else 1 + (o.measure or 0)].dataType,
                    nullable=schema.fields[0 if o.group is not None else 1 + (o.measure or 0)].nullable,
                )
                for o in self.outputs
            ]
        )

    def describe(self) -> str:
        measures = ", ".join(f"{m.func}({m.column or '*'})" for m in self.measures)
        return "\n".join(
            [
                f"bucket aggregation {self.path} (Tantivy aggregations on the executors)",
                f"  buckets: {self.call.kind} of {self.call.column}",
                f"  measures: {measures}",
                f"  filter: {'none' if self.filter is None else F.to_text(self.filter)}",
            ]
        )


def _replace_column(call: Any, column: str) -> Any:
    import dataclasses

    return dataclasses.replace(call, column=column)


def _typed(value: Any, data_type: Any) -> Any:
    """A merged stats value (a float) as the Python value of ``data_type``."""
    from pyspark.sql.types import ByteType, DecimalType, FloatType, IntegerType, LongType, ShortType

    if value is None:
        return None
    if isinstance(data_type, (ByteType, ShortType, IntegerType, LongType)):
        return round(value)
    if isinstance(data_type, DecimalType):
        import decimal

        return decimal.Decimal(str(value))
    if isinstance(data_type, FloatType):
        return float(value)
    return float(value)


def command_frame(
    spark: SparkSession,
    command: Command,
    options: Mapping[str, Any] | None = None,
    path: str = "",
    schema_from_source: bool = False,
) -> DataFrame:
    """The read that runs ``command`` on the cluster (with the session's and ``options``' settings).

    The result schema comes from the contract, so Spark does not ask a Python worker for it, unless
    ``schema_from_source``: the data source's schema may then carry the result (see ``GroupAggregate``).
    """
    opts = _session_options(spark, options)
    opts.update(command.to_options())
    reader = spark.read.format(FORMAT).options(**opts)
    if not schema_from_source:
        reader = reader.schema(command.RESULT)
    return reader.load(path) if path else reader.load()


def local_frame(spark: SparkSession, rows: Sequence[tuple[Any, ...]], schema: StructType) -> DataFrame:
    """A DataFrame of a few rows computed here, as an Arrow local relation: Spark runs no Python worker
    to read it back (``createDataFrame`` of a list in a classic session costs a job with one, about
    0.1 s). Values are converted to Spark's internal form first (``toInternal``), so a naive
    ``datetime`` means what it means to ``createDataFrame``."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import TimestampNTZType, TimestampType

    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    columns = []
    for i, f in enumerate(schema.fields):
        values = [row[i] for row in rows]
        if isinstance(f.dataType, (TimestampType, TimestampNTZType)):
            micros = pa.array([None if v is None else f.dataType.toInternal(v) for v in values], pa.int64())
            columns.append(micros.cast(arrow_schema.field(i).type))
        else:
            columns.append(pa.array(values, arrow_schema.field(i).type))
    return spark.createDataFrame(pa.Table.from_arrays(columns, schema=arrow_schema), schema)


def _struct(schema_json: str) -> StructType:
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(schema_json))


def options_tuple(options: Mapping[str, Any] | None) -> tuple[tuple[str, str], ...]:
    from connect_plugin.settings import _option_text

    return tuple(sorted((str(k), _option_text(v)) for k, v in (options or {}).items()))


def names_used(columns: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(columns))
