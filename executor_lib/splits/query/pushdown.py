"""Which part of a filter the index answers, and the exact rest evaluated on Arrow rows.

A filter leaf on a column is, for the doc mappings of the splits being read:

* ``EXACT``: the Tantivy query returns exactly the rows Spark's predicate keeps (equality,
  IN, ranges and null checks on numeric/bool/date fields, equality/IN/prefix/contains/regex
  on exact ``string`` fields, ``Not`` of those guarded by an existence check);
* ``SUPERSET``: a (widened) Tantivy query returns every matching row and some others (timestamp
  fields, indexed at second precision; equality on ``ip`` fields, which compares addresses, not
  strings): the predicate must still be evaluated on the rows;
* ``NONE``: the index cannot help (tokenized text, float32, decimals, JSON fields, columns some
  split lacks): the predicate is evaluated on the rows only.

``plan`` splits a filter tree into an index query and a residual filter such that
``rows matching index query`` filtered by ``residual`` are exactly the rows matching the
tree. ``residual_mask`` evaluates a residual with Arrow compute kernels (Kleene logic, so
NULL comparisons drop the row as Spark does); Tantivy query strings inside a residual are
answered by the index through a callback that returns matching row ids.

No tantivy here: this reasons over doc mappings only.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum

import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.splits.doc_mapping import DocMapping, FieldMapping
from executor_lib.table_schema import nested_path
from indextables_contract import filters as F
from indextables_contract.errors import ConfigError

ROW_ID_COLUMN = "__row"


class Support(Enum):
    EXACT = "exact"
    SUPERSET = "superset"
    NONE = "none"


@dataclass(frozen=True)
class FilterPlan:
    index: F.Filter | None  # run by Tantivy; None = every row
    residual: F.Filter | None  # evaluated on the rows the index returned; None = nothing left


def _fields(column: str, mappings: Sequence[DocMapping]) -> list[FieldMapping] | None:
    found = [m.field(column) for m in mappings]
    if not mappings or any(f is None or not f.indexed for f in found):
        return None
    return [f for f in found if f is not None]


def _exact_string(fields: list[FieldMapping]) -> bool:
    return all(f.type == "text" and f.tokenizer == "raw" for f in fields)


def _is_timestamp(t: pa.DataType | None) -> bool:
    return t is not None and pa.types.is_timestamp(t)


def _numeric_support(fields: list[FieldMapping], t: pa.DataType | None, exact_kinds: set[str]) -> Support:
    """Support of a comparison on integer-like ``exact_kinds``, f64 (exact for float64 and integer
    columns only: a float32 value widened to f64 is not the literal Spark compares) and dates."""
    kinds = {f.type for f in fields}
    if kinds <= exact_kinds:
        return Support.EXACT
    if kinds == {"f64"} and t is not None and (pa.types.is_float64(t) or pa.types.is_integer(t)):
        return Support.EXACT
    if kinds == {"datetime"}:
        return Support.SUPERSET if _is_timestamp(t) else Support.EXACT
    return Support.NONE


def _equality_support(fields: list[FieldMapping], t: pa.DataType | None) -> Support:
    if _exact_string(fields):
        return Support.EXACT
    if all(f.type == "ip" for f in fields):
        # the index compares addresses ("::ffff:10.0.0.1" = "10.0.0.1"), Spark compares strings
        return Support.SUPERSET
    return _numeric_support(fields, t, {"i64", "u64", "bool"})


def _range_support(fields: list[FieldMapping], t: pa.DataType | None) -> Support:
    return _numeric_support(fields, t, {"i64", "u64"})


def _floor_second(value: object) -> object:
    if isinstance(value, datetime.datetime):
        return value.replace(microsecond=0)
    return value


def _ceil_stored_second(value: object) -> object:
    """The latest whole second the index may store for ``value``: Tantivy truncates toward the epoch, so
    a sub-second time before 1970 (``1969-12-31 23:59:59.999999``) is stored as the next second."""
    if isinstance(value, datetime.datetime) and value.microsecond:
        epoch = datetime.datetime(1970, 1, 1, tzinfo=value.tzinfo) if value.tzinfo else datetime.datetime(1970, 1, 1)
        if value < epoch:
            return value.replace(microsecond=0) + datetime.timedelta(seconds=1)
    return _floor_second(value)


def _widened(f: F.Filter) -> F.Filter:
    """A timestamp predicate as a range on whole seconds (what the index stores) that keeps every match."""
    if isinstance(f, F.Term):
        return F.Between(f.column, _floor_second(f.value), _ceil_stored_second(f.value))
    if isinstance(f, F.TermIn):
        return F.Or(tuple(_widened(F.Term(f.column, v)) for v in f.values))
    if isinstance(f, F.Between):
        lower = _floor_second(f.lower) if f.lower is not None else None
        upper = _ceil_stored_second(f.upper) if f.upper is not None else None
        return F.Between(f.column, lower, upper, True, True)
    return f


def leaf_support(f: F.Filter, mappings: Sequence[DocMapping], schema: pa.Schema) -> tuple[Support, F.Filter | None]:
    """How the index answers one non-boolean filter, and the query to give it."""
    if isinstance(f, F.QueryString):
        if f.column is not None and _fields(f.column, mappings) is None:
            raise ConfigError(f"query {f.query!r}: column {f.column!r} is not an indexed field of every split")
        return Support.EXACT, f
    if isinstance(f, F.Not):
        return _not_support(f, mappings, schema)
    column = getattr(f, "column", None)
    fields = _fields(column, mappings) if column is not None else None
    if fields is None:
        return Support.NONE, None
    t = schema.field(column).type if column in schema.names else None
    if t is not None and (pa.types.is_string(t) or pa.types.is_large_string(t)) and {x.type for x in fields} == {"u64"}:
        # tantivy4java's exact_only: the index holds the strings' xxHash64; equality finds the hash (a
        # superset, should two strings share one), nothing else can be asked of it
        exact_only = isinstance(f, (F.Term, F.TermIn)) and all(
            isinstance(v, str) for v in ([f.value] if isinstance(f, F.Term) else f.values)
        )
        return (Support.SUPERSET, f) if exact_only else (Support.NONE, None)
    if isinstance(f, (F.Term, F.TermIn)):
        values = [f.value] if isinstance(f, F.Term) else list(f.values)
        if not values or any(v is None for v in values):
            return Support.NONE, None
        support = _equality_support(fields, t)
    elif isinstance(f, F.Between):
        support = _range_support(fields, t)
    elif isinstance(f, (F.Prefix, F.Contains, F.Regex)):
        support = Support.EXACT if _exact_string(fields) else Support.NONE
    elif isinstance(f, F.Exists):
        support = Support.EXACT if all(x.fast for x in fields) else Support.NONE
    else:
        support = Support.NONE
    if support is Support.NONE:
        return support, None
    if t is not None and pa.types.is_floating(t) and isinstance(f, (F.Term, F.TermIn, F.Between)):
        return _float_query(f, support)
    return support, (_widened(f) if support is Support.SUPERSET and _is_timestamp(t) else f)


def _float_query(f: F.Term | F.TermIn | F.Between, support: Support) -> tuple[Support, F.Filter | None]:
    """The index query of a comparison on a float field, as Spark compares: ``-0.0 = 0.0`` (the index
    holds them as two terms, ordered -0.0 < 0.0), and a NaN bound is left to the rows."""
    if isinstance(f, F.Between):
        if _is_nan(f.lower) or _is_nan(f.upper):
            return Support.NONE, None
        lower, upper = f.lower, f.upper
        if lower is not None and lower == 0:  # >= 0 takes -0.0 too; > 0 leaves both out
            lower = -0.0 if f.lower_inclusive else 0.0
        if upper is not None and upper == 0:  # <= 0 takes 0.0 too; < 0 leaves both out
            upper = 0.0 if f.upper_inclusive else -0.0
        return support, F.Between(f.column, lower, upper, f.lower_inclusive, f.upper_inclusive)
    values = [f.value] if isinstance(f, F.Term) else list(f.values)
    if any(v == 0 for v in values):
        values = [v for v in values if v != 0] + [0.0, -0.0]
    return support, (F.TermIn(f.column, tuple(values)) if len(values) > 1 else F.Term(f.column, values[0]))


def _not_support(f: F.Not, mappings: Sequence[DocMapping], schema: pa.Schema) -> tuple[Support, F.Filter | None]:
    child = f.child
    if isinstance(child, F.Exists):  # IS NULL
        support, _ = leaf_support(child, mappings, schema)
        return (support, f) if support is Support.EXACT else (Support.NONE, None)
    column = getattr(child, "column", None)
    if column is None or isinstance(child, (F.And, F.Or, F.Not, F.QueryString)):
        return Support.NONE, None
    support, query = leaf_support(child, mappings, schema)
    exists, _ = leaf_support(F.Exists(column), mappings, schema)
    if support is not Support.EXACT or exists is not Support.EXACT or query is None:
        return Support.NONE, None
    # NOT(a = 1) keeps no NULL rows in Spark; Tantivy's NOT would keep them.
    return Support.EXACT, F.And((F.Exists(column), F.Not(query)))


def plan(f: F.Filter, mappings: Sequence[DocMapping], schema: pa.Schema) -> FilterPlan:
    """Index query + residual that together select exactly the rows matching ``f``."""
    if isinstance(f, F.And):
        parts = [plan(c, mappings, schema) for c in f.children]
        index = [p.index for p in parts if p.index is not None]
        residual = [p.residual for p in parts if p.residual is not None]
        return FilterPlan(_all(index), _all(residual))
    if isinstance(f, F.Or):
        parts = [plan(c, mappings, schema) for c in f.children]
        if any(p.index is None for p in parts):
            return FilterPlan(None, f)  # some branch needs every row: decide on the rows
        either = F.Or(tuple(p.index for p in parts if p.index is not None))
        exact = all(p.residual is None for p in parts)
        return FilterPlan(either, None if exact else f)
    support, query = leaf_support(f, mappings, schema)
    if support is Support.EXACT:
        return FilterPlan(query, None)
    return FilterPlan(query, f)


def _all(items: list[F.Filter]) -> F.Filter | None:
    if not items:
        return None
    return items[0] if len(items) == 1 else F.And(tuple(items))


# --- evaluating a residual on Arrow rows ------------------------------------------------------

QueryRows = Callable[[F.QueryString], pa.Array]  # row ids (uint64) matching a Tantivy query


def residual_mask(f: F.Filter, table: pa.Table, query_rows: QueryRows) -> pa.ChunkedArray | pa.Array:
    """Boolean mask (NULL = unknown) of the rows of ``table`` matching ``f``."""
    if isinstance(f, (F.And, F.Or)):
        masks = [residual_mask(c, table, query_rows) for c in f.children]
        combine = pc.and_kleene if isinstance(f, F.And) else pc.or_kleene
        out = masks[0]
        for m in masks[1:]:
            out = combine(out, m)
        return out
    if isinstance(f, F.Not):
        return pc.invert(residual_mask(f.child, table, query_rows))
    if isinstance(f, F.QueryString):
        return pc.is_in(table.column(ROW_ID_COLUMN), value_set=query_rows(f))
    column = nested_column(table, f.column)
    if isinstance(f, F.Exists):
        return pc.is_valid(column)
    if isinstance(f, F.Term):
        if pa.types.is_floating(column.type) and _is_nan(f.value):
            return pc.is_nan(column)  # Spark: NaN = NaN
        return pc.equal(column, _scalar(f.value, column.type))
    if isinstance(f, F.TermIn):
        values = pa.array(_set_values(f.values, column.type), column.type)
        found = pc.is_in(column, value_set=values)
        if pa.types.is_floating(column.type):  # Spark: NaN = NaN and -0.0 = 0.0 (a hash set says neither)
            if any(_is_nan(v) for v in f.values):
                found = pc.or_(found, pc.is_nan(column))
            if any(isinstance(v, (int, float, Decimal)) and v == 0 for v in f.values):
                found = pc.or_(found, pc.equal(column, pa.scalar(0.0, column.type)))
        return pc.if_else(pc.is_valid(column), found, pa.scalar(None, pa.bool_()))
    if isinstance(f, F.Between):
        return _between_mask(f, column)
    if isinstance(f, F.Prefix):
        return pc.starts_with(column, f.prefix)
    if isinstance(f, F.Contains):
        return pc.match_substring(column, f.substring)
    if isinstance(f, F.Regex):
        return pc.match_substring_regex(column, f"^(?:{f.pattern})$")
    raise ConfigError(f"unsupported filter {f!r}")


def nested_column(table: pa.Table, name: str) -> pa.ChunkedArray:
    """The values a filter's column name reaches in ``table``: a column, or a struct field / map value
    inside one (``user.name``, ``attrs.color``: null where the struct is null or the key absent)."""
    path = nested_path(name, table.schema)
    if path is None:
        raise ConfigError(f"filter column {name!r} is not in the rows (columns: {table.column_names})")
    values: pa.ChunkedArray = table.column(path[0])
    for part in path[1:]:
        t = values.type
        if pa.types.is_struct(t):
            values = pc.struct_field(values, [t.get_field_index(part)])
        else:
            try:
                key = pa.scalar(part).cast(t.key_type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise ConfigError(f"filter column {name!r}: {part!r} is not a key of {t}") from e
            values = pc.map_lookup(values, key, "first")
    return values


def _between_mask(f: F.Between, column: pa.ChunkedArray) -> pa.ChunkedArray:
    # NULL stays NULL (not FALSE): NOT(x > 1) must drop a NULL x, as in SQL.
    mask = pc.if_else(pc.is_valid(column), True, pa.scalar(None, pa.bool_()))
    if f.lower is not None:
        mask = pc.and_kleene(mask, _bound(column, f.lower, f.lower_inclusive, lower=True))
    if f.upper is not None:
        mask = pc.and_kleene(mask, _bound(column, f.upper, f.upper_inclusive, lower=False))
    return mask


def _bound(column: pa.ChunkedArray, value: object, inclusive: bool, lower: bool) -> pa.ChunkedArray:
    """``column >[=] value`` (``lower``) or ``column <[=] value``, with Spark's NaN on float columns:
    NaN is above every number and equal to itself (IEEE, and so Arrow, says every comparison with
    NaN is false)."""
    ops = {(True, True): pc.greater_equal, (True, False): pc.greater, (False, True): pc.less_equal}
    op = ops.get((lower, inclusive), pc.less)
    if not pa.types.is_floating(column.type):
        return op(column, _scalar(value, column.type))
    is_nan = pc.is_nan(column)
    if _is_nan(value):
        if lower:  # x >= NaN: only NaN; x > NaN: nothing
            return is_nan if inclusive else pc.and_(is_nan, False)
        return pc.or_(pc.invert(is_nan), inclusive)  # x < NaN: every number; x <= NaN: everything
    compared = op(column, _scalar(value, column.type))
    return pc.or_(compared, is_nan) if lower else compared  # NaN > any number; NaN < none


def _is_nan(value: object) -> bool:
    return isinstance(value, (float, Decimal)) and value != value


def _is_number_type(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _set_values(values: Sequence[object], t: pa.DataType) -> list[object]:
    """IN values as the column's type; a number the type cannot hold (``1.555`` for decimal(10,2))
    equals no value of the column and is left out."""
    out = []
    for v in values:
        if _is_number_type(t) and isinstance(v, (int, float, Decimal)) and not isinstance(v, bool):
            exact = Decimal(repr(v)) if pa.types.is_decimal(t) and isinstance(v, float) else v
            try:
                out.append(pa.scalar(Decimal(exact) if pa.types.is_decimal(t) else v).cast(t).as_py())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                continue
            if out[-1] != v:
                out.pop()
            continue
        out.append(_scalar(v, t).as_py())
    return out


def _scalar(value: object, t: pa.DataType) -> pa.Scalar:
    """``value`` as an Arrow scalar to compare with a column of type ``t``: cast to ``t``, except
    that a number meets a number column as it is (Arrow compares them by value, as Spark does:
    ``dec > 0`` on a decimal(10,2) column; casting 0 to decimal(10,2) would overflow)."""
    if _is_number_type(t) and isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return pa.scalar(value)
    try:
        return pa.scalar(value).cast(t) if not isinstance(value, pa.Scalar) else value.cast(t)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise ConfigError(f"value {value!r} cannot be compared with a column of type {t}: {e}") from e


def filter_rows(table: pa.Table, residual: F.Filter | None, query_rows: QueryRows) -> pa.Table:
    """``table`` rows whose residual is TRUE (NULL and FALSE drop the row)."""
    if residual is None or table.num_rows == 0:
        return table
    mask = residual_mask(residual, table, query_rows)
    return table.filter(pc.fill_null(mask, False))
