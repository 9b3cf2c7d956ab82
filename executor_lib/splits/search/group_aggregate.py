"""One split's answer to an ``AggregatePlan``: exact partial aggregates, from Tantivy where it can.

``aggregate_split`` runs the plan on one split and returns its ``Partials``
(``indextables_contract.aggregate``), by one of two routes:

* **index**: the split's index answers the filter exactly and every column is a fast field of
  a kind Tantivy aggregates exactly: group keys on exact strings and integers (nested ``terms``
  aggregations), measures on integer and float columns (``stats``), partition columns as the
  split's constants. Tantivy sums in float64, so an integer bucket is taken only while
  ``max(|min|, |max|) * count < 2**53`` (every partial sum is then exact); a group column
  with a document lacking the value (a NULL key), or more buckets than asked for, also sends
  the split to the rows route. No row leaves the index.
* **rows**: the matching rows of the columns the plan names are taken from the split's columnar
  copy (filter residual applied) and aggregated by Arrow's hash group-by, with SQL's NULL rules
  (NULL keys form a group; NULL values are not counted, summed or compared).

Both give the same partials; which route ran is returned for ``explain`` and tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.splits.doc_mapping import FieldMapping
from executor_lib.splits.query.pushdown import FilterPlan, plan
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.search.table_search import scan_split
from indextables_contract import filters as F
from indextables_contract.aggregate import AggregatePlan, ColumnPartial, GroupPartial, Partials

EXACT_FLOAT_INTEGERS = 2**53
MAX_BUCKETS = 65_536  # per level of a terms aggregation; more sends the split to the rows route
_GROUP = "g"
_NAN = "__indextables_nan_"  # a float measure's is-NaN column (rows route)


def aggregate_split(
    searcher: SplitSearcher,
    agg: AggregatePlan,
    where: F.Filter | None,
    schema: pa.Schema,
    constants: Mapping[str, pa.Scalar],
) -> tuple[Partials, str]:
    """(partials, route) of the split's rows matching ``where``; route is ``"index"`` or ``"rows"``."""
    filter_plan = FilterPlan(None, None) if where is None else plan(where, [searcher.mapping], schema)
    if filter_plan.residual is None and _index_can_answer(searcher, agg, schema, constants):
        partials = _index_partials(searcher, agg, filter_plan.index, schema, constants)
        if partials is not None:
            return partials, "index"
    return _row_partials(searcher, agg, filter_plan, constants), "rows"


# --- the index route ----------------------------------------------------------------------------


def _index_can_answer(
    searcher: SplitSearcher, agg: AggregatePlan, schema: pa.Schema, constants: Mapping[str, pa.Scalar]
) -> bool:
    for column in agg.group_by:
        if column in constants:
            continue
        field = searcher.mapping.field(column)
        if field is None or not _exact_key_field(field, schema.field(column).type):
            return False
    for column in agg.measured_columns():
        field = searcher.mapping.field(column)
        if column in constants or field is None or not _numeric_field(field, schema.field(column).type):
            return False
    return True


def _exact_key_field(field: FieldMapping, t: pa.DataType) -> bool:
    if not field.fast:
        return False
    if field.type == "text":
        return field.tokenizer == "raw" and (pa.types.is_string(t) or pa.types.is_large_string(t))
    return field.type in ("i64", "u64") and pa.types.is_integer(t)


def _numeric_field(field: FieldMapping, t: pa.DataType) -> bool:
    if not field.fast:
        return False
    if field.type in ("i64", "u64"):
        return pa.types.is_integer(t)
    return field.type == "f64" and pa.types.is_floating(t)


def _index_partials(
    searcher: SplitSearcher,
    agg: AggregatePlan,
    query: F.Filter | None,
    schema: pa.Schema,
    constants: Mapping[str, pa.Scalar],
) -> Partials | None:
    """The partials from Tantivy aggregations, or None where they would not be exact."""
    data_groups = [c for c in agg.group_by if c not in constants]
    for column in data_groups:  # a document without the value is a NULL key: Tantivy drops it
        missing = F.Not(F.Exists(column))
        if searcher.count(missing if query is None else F.And((query, missing))):
            return None
    metrics = {f"m{i}": {"stats": {"field": c}} for i, c in enumerate(agg.measured_columns())}
    request: dict[str, Any] = metrics
    for column in reversed(data_groups):
        request = {_GROUP: {"terms": {"field": column, "size": MAX_BUCKETS}, **({"aggs": request} if request else {})}}
    leaves: list[tuple[tuple[Any, ...], int, Mapping[str, Any]]]
    if not data_groups and not metrics:
        leaves = [((), searcher.count(query), dict[str, Any]())]
    else:
        result: Mapping[str, Any] = searcher.aggregate(request, query)
        if not data_groups:
            leaves = [((), searcher.count(query), result)]
        else:
            walked = _leaves(result, len(data_groups))
            if walked is None:
                return None
            leaves = walked
    integer_columns = {c for c in agg.measured_columns() if pa.types.is_integer(schema.field(c).type)}
    out: Partials = {}
    for data_key, rows, result in leaves:
        if rows == 0 and data_groups:
            continue
        keys = iter(data_key)
        key = tuple(constants[c].as_py() if c in constants else next(keys) for c in agg.group_by)
        part = GroupPartial(rows)
        for i, column in enumerate(agg.measured_columns()):
            column_part = _column_partial(result[f"m{i}"], column in integer_columns)
            if column_part is None:
                return None
            part.columns[column] = column_part
        out[key] = part
    return out


def _leaves(result: Mapping[str, Any], depth: int) -> list[tuple[tuple[Any, ...], int, Mapping[str, Any]]] | None:
    """(key values, doc count, metrics) per innermost bucket; None if a level was cut at its size."""
    terms = result[_GROUP]
    if terms.get("sum_other_doc_count", 0):
        return None
    out: list[tuple[tuple[Any, ...], int, Mapping[str, Any]]] = []
    for bucket in terms["buckets"]:
        key = bucket["key"]
        if isinstance(key, float):
            if abs(key) >= EXACT_FLOAT_INTEGERS:
                return None
            key = int(key)
        if depth == 1:
            out.append(((key,), int(bucket["doc_count"]), bucket))
            continue
        inner = _leaves(bucket, depth - 1)
        if inner is None:
            return None
        out.extend(((key, *k), n, r) for k, n, r in inner)
    return out


def _column_partial(stats: Mapping[str, Any], integer: bool) -> ColumnPartial | None:
    count = int(stats.get("count") or 0)
    if count == 0:
        return ColumnPartial()
    lo, hi, total = stats["min"], stats["max"], stats["sum"]
    if not integer:
        return ColumnPartial(count, float(total), float(lo), float(hi))
    if max(abs(lo), abs(hi)) * count >= EXACT_FLOAT_INTEGERS:
        return None
    return ColumnPartial(count, int(total), int(lo), int(hi))


# --- the rows route -----------------------------------------------------------------------------


def _row_partials(
    searcher: SplitSearcher, agg: AggregatePlan, filter_plan: FilterPlan, constants: Mapping[str, pa.Scalar]
) -> Partials:
    measured = agg.measured_columns()
    columns = list(dict.fromkeys([*agg.group_by, *measured]))
    rows = scan_split(searcher, filter_plan, columns, constants)
    if rows.num_rows == 0:
        return {}
    return table_partials(rows, agg.group_by, measured)


def table_partials(rows: pa.Table, group_by: Sequence[str], measured: Sequence[str]) -> Partials:
    """Partials of an Arrow table (Arrow's hash group-by; NULL keys are a group of their own)."""
    aggregations: list[tuple[Any, str]] = [([], "count_all")]
    floats = [c for c in measured if pa.types.is_floating(rows.schema.field(c).type)]
    for column in measured:
        aggregations += [(column, "count"), (column, "min"), (column, "max")]
        if _summable(rows.schema.field(column).type):
            aggregations.append((column, "sum"))
    for i, column in enumerate(floats):  # Arrow's min and max skip NaN; Spark's NaN is above every number
        rows = rows.append_column(f"{_NAN}{i}", pc.is_nan(rows[column]))
        aggregations += [(f"{_NAN}{i}", "min"), (f"{_NAN}{i}", "max")]
    result = rows.group_by(list(group_by), use_threads=False).aggregate(aggregations).to_pylist()
    out: Partials = {}
    for r in result:
        part = GroupPartial(int(r["count_all"]))
        for column in measured:
            low, high = r[f"{column}_min"], r[f"{column}_max"]
            if column in floats:
                i = floats.index(column)
                high = math.nan if r[f"{_NAN}{i}_max"] else high  # a NaN: the max
                low = math.nan if r[f"{_NAN}{i}_min"] else low  # only NaN: the min too
            part.columns[column] = ColumnPartial(int(r[f"{column}_count"]), r.get(f"{column}_sum"), low, high)
        out[tuple(r[c] for c in group_by)] = part
    return out


def _summable(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
