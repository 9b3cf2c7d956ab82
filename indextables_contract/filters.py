"""The filter tree: one vocabulary for data skipping, for search and for the client/cluster contract.

The client (``connect_plugin``: SQL WHERE clauses, ``filter=`` arguments) builds these nodes and
sends their JSON form (``to_json``) as the ``filter`` read option or a command's ``filter``
argument; the executors decode it (``from_json``, which names the malformed part) and turn
Spark's pushed filters into the same nodes. Standard library only.

``log.files.pruning`` uses a filter tree to skip files and manifests by partition values and
min/max statistics (anything it cannot judge keeps the file); ``splits.search.searcher`` compiles
it into a Tantivy query. A filter a split's field type cannot answer exactly (a range on a
tokenized text field, equality on tokenized text, ``exists`` on a field without a fast
field) is a ``QueryError`` naming the column, so the caller can keep that predicate in Spark.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from indextables_contract.errors import FilterError


@dataclass(frozen=True)
class Term:
    column: str
    value: Any


@dataclass(frozen=True)
class TermIn:
    column: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class Between:
    """``lower <(=) column <(=) upper``; a None bound is open. Paired bounds on one column under
    ``And`` are combined into one range query."""

    column: str
    lower: Any = None
    upper: Any = None
    lower_inclusive: bool = True
    upper_inclusive: bool = True


@dataclass(frozen=True)
class Prefix:
    column: str
    prefix: str


@dataclass(frozen=True)
class Contains:
    column: str
    substring: str


@dataclass(frozen=True)
class Regex:
    column: str
    pattern: str


@dataclass(frozen=True)
class Exists:
    column: str


@dataclass(frozen=True)
class QueryString:
    """Tantivy query syntax; ``column`` None searches every string field (``_indexall``)."""

    query: str
    column: str | None = None
    kind: str | None = None  # "text" (textsearch: tokenized field) or "exact" (fieldmatch: string field)
    # The project's extension (SQL ``fuzzyquery``): ``word~1`` / ``word~2`` are fuzzy terms (edit
    # distance, a transposition one edit), ``word~N*`` fuzzy prefixes. Query text without it keeps
    # IndexTables4Spark's meaning, where ``word~1`` is refused.
    fuzzy: bool = False
    # With ``fuzzy``: whether a transposition (``hte`` for ``the``) is one edit (True, Tantivy's and
    # Lucene's default) or two. Set from ``spark.indextables.query.fuzzyTranspositions`` by the executors
    # (``fuzzy_transpositions``); JSON ``"transpositions": false`` only when False.
    transpositions: bool = True


@dataclass(frozen=True)
class And:
    children: tuple[Filter, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Filter, ...]


@dataclass(frozen=True)
class Not:
    child: Filter


Filter = Term | TermIn | Between | Prefix | Contains | Regex | Exists | QueryString | And | Or | Not
FILTER_TYPES = (Term, TermIn, Between, Prefix, Contains, Regex, Exists, QueryString, And, Or, Not)


def gt(column: str, value: Any) -> Between:
    """``column > value``."""
    return Between(column, lower=value, lower_inclusive=False)


def ge(column: str, value: Any) -> Between:
    """``column >= value``."""
    return Between(column, lower=value)


def lt(column: str, value: Any) -> Between:
    """``column < value``."""
    return Between(column, upper=value, upper_inclusive=False)


def le(column: str, value: Any) -> Between:
    """``column <= value``."""
    return Between(column, upper=value)


def combine_ranges(children: tuple[Filter, ...]) -> tuple[Filter, ...]:
    """Merge ``Between`` filters on the same column (``a > 1 AND a < 5`` -> one range)."""
    merged: dict[str, Between] = {}
    rest: list[Filter] = []
    for child in children:
        if not isinstance(child, Between):
            rest.append(child)
            continue
        current = merged.get(child.column)
        if current is None:
            merged[child.column] = child
            continue
        lower, lower_inc = current.lower, current.lower_inclusive
        if child.lower is not None and (
            lower is None or child.lower > lower or (child.lower == lower and not child.lower_inclusive)
        ):
            lower, lower_inc = child.lower, child.lower_inclusive
        upper, upper_inc = current.upper, current.upper_inclusive
        if child.upper is not None and (
            upper is None or child.upper < upper or (child.upper == upper and not child.upper_inclusive)
        ):
            upper, upper_inc = child.upper, child.upper_inclusive
        merged[child.column] = Between(child.column, lower, upper, lower_inc, upper_inc)
    return (*merged.values(), *rest)


_REGEX_META = set("\\.+*?()|[]{}^$#&-~")


def regex_escape(text: str) -> str:
    """``text`` as a literal inside a Tantivy (Rust ``regex``) or RE2 pattern."""
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


def prefix_pattern(prefix: str) -> str:
    return "(?s)" + regex_escape(prefix) + ".*"


def suffix_pattern(suffix: str) -> str:
    return "(?s).*" + regex_escape(suffix)


def contains_pattern(substring: str) -> str:
    return "(?s).*" + regex_escape(substring) + ".*"


# --- JSON form ------------------------------------------------------------------------------
# What the Spark Connect client sends in the ``filter`` read option (it has no executor_lib):
#   {"op": "and"|"or", "children": [...]}, {"op": "not", "child": {...}},
#   {"op": "term", "column": c, "value": v}, {"op": "in", "column": c, "values": [...]},
#   {"op": "range", "column": c, "lower": v, "upper": v, "lowerInclusive": b, "upperInclusive": b},
#   {"op": "prefix"|"contains"|"regex", "column": c, "value": s}, {"op": "exists", "column": c},
#   {"op": "query", "query": q, "column": c or null}
# Values are JSON scalars; dates and timestamps are ISO-8601 strings, typed by the column
# (see ``coerce_values``).


def to_json(f: Filter) -> dict[str, Any]:
    """The JSON form of a filter tree."""
    if isinstance(f, (And, Or)):
        return {"op": "and" if isinstance(f, And) else "or", "children": [to_json(c) for c in f.children]}
    if isinstance(f, Not):
        return {"op": "not", "child": to_json(f.child)}
    if isinstance(f, Term):
        return {"op": "term", "column": f.column, "value": _json_value(f.value)}
    if isinstance(f, TermIn):
        return {"op": "in", "column": f.column, "values": [_json_value(v) for v in f.values]}
    if isinstance(f, Between):  # open bounds and default (inclusive) flags are left out
        out: dict[str, Any] = {"op": "range", "column": f.column}
        if f.lower is not None:
            out["lower"] = _json_value(f.lower)
            if not f.lower_inclusive:
                out["lowerInclusive"] = False
        if f.upper is not None:
            out["upper"] = _json_value(f.upper)
            if not f.upper_inclusive:
                out["upperInclusive"] = False
        return out
    if isinstance(f, Prefix):
        return {"op": "prefix", "column": f.column, "value": f.prefix}
    if isinstance(f, Contains):
        return {"op": "contains", "column": f.column, "value": f.substring}
    if isinstance(f, Regex):
        return {"op": "regex", "column": f.column, "value": f.pattern}
    if isinstance(f, Exists):
        return {"op": "exists", "column": f.column}
    query: dict[str, Any] = {"op": "query", "query": f.query, "column": f.column}
    if f.kind is not None:
        query["kind"] = f.kind
    if f.fuzzy:
        query["fuzzy"] = True
    if not f.transpositions:
        query["transpositions"] = False
    return query


def to_text(f: Filter) -> str:
    """The JSON form as compact text with sorted keys (the value of a ``filter`` option)."""
    try:
        return json.dumps(to_json(f), sort_keys=True, separators=(",", ":"))
    except RecursionError:
        raise FilterError(f"the filter nests deeper than {MAX_DEPTH} levels") from None


def as_filter(tree: Filter | Mapping[str, Any], where: str = "filter") -> Filter:
    """A filter tree given as nodes or in its JSON form, checked; ``FilterError`` names a malformed part.

    Example: ``as_filter({"op": "term", "column": "level", "value": "ERROR"}) == Term("level", "ERROR")``
    """
    if isinstance(tree, FILTER_TYPES):
        return tree
    return from_json(tree, where)


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):  # JSON has numbers; readers take fractional ones as decimals
        return int(value) if value == value.to_integral_value() else float(value)
    return value.isoformat() if hasattr(value, "isoformat") else value


_OPS = {"and", "or", "not", "query", "term", "in", "range", "prefix", "contains", "regex", "exists"}


MAX_DEPTH = 256  # nesting a filter tree may have (AND/OR/NOT): deeper is refused, not a RecursionError


def from_json(obj: Any, where: str = "filter", depth: int = 0) -> Filter:
    """Parse the JSON form; ``FilterError`` names the offending part (``where`` is its path)."""
    if depth > MAX_DEPTH:
        raise FilterError(f"{where[:80]}...: the filter nests deeper than {MAX_DEPTH} levels")
    if not isinstance(obj, dict) or not isinstance(obj.get("op"), str):
        raise FilterError(f"{where}: expected an object with an 'op', got {obj!r}")
    op = obj["op"]
    if op not in _OPS:
        raise FilterError(f"{where}: unknown op {op!r} (expected one of {sorted(_OPS)})")
    try:
        if op in ("and", "or"):
            kids = obj["children"]
            if not isinstance(kids, list) or not kids:
                raise FilterError(f"{where}: '{op}' needs a non-empty 'children' list")
            children = tuple(from_json(c, f"{where}.{op}[{i}]", depth + 1) for i, c in enumerate(kids))
            return And(children) if op == "and" else Or(children)
        if op == "not":
            return Not(from_json(obj["child"], f"{where}.not", depth + 1))
        if op == "query":
            kind = obj.get("kind")
            if kind not in (None, "text", "exact"):
                raise FilterError(f"{where}: query kind must be 'text' or 'exact', not {kind!r}")
            fuzzy = obj.get("fuzzy", False)
            if not isinstance(fuzzy, bool):
                raise FilterError(f"{where}: query 'fuzzy' must be true or false, not {fuzzy!r}")
            transpositions = obj.get("transpositions", True)
            if not isinstance(transpositions, bool):
                raise FilterError(f"{where}: query 'transpositions' must be true or false, not {transpositions!r}")
            return QueryString(_text(obj["query"], where), obj.get("column"), kind, fuzzy, transpositions)
        column = _text(obj["column"], where)
        if op == "term":
            return Term(column, obj["value"])
        if op == "in":
            if not isinstance(obj["values"], list):
                raise FilterError(f"{where}: 'in' needs a 'values' list, got {obj['values']!r}")
            return TermIn(column, tuple(obj["values"]))
        if op == "range":
            return Between(
                column,
                obj.get("lower"),
                obj.get("upper"),
                bool(obj.get("lowerInclusive", True)),
                bool(obj.get("upperInclusive", True)),
            )
        if op in ("prefix", "contains", "regex"):
            value = _text(obj["value"], where)
            if op == "prefix":
                return Prefix(column, value)
            return Contains(column, value) if op == "contains" else Regex(column, value)
        if op == "exists":
            return Exists(column)
    except KeyError as e:
        raise FilterError(f"{where}: '{op}' is missing {e}") from e
    raise FilterError(f"{where}: unknown op {op!r}")


def from_text(text: str, where: str = "filter") -> Filter:
    """A filter tree from its JSON text (the value of a ``filter`` option): the one decoder of filter
    text, used by reads, commands and aggregates. A fractional number is read as a ``Decimal``, as
    Spark SQL reads ``2.5`` (an exact decimal literal), so ``dec = 0.1`` on a decimal column compares
    exactly (the executors make it a float for float columns).

    Raises:
        FilterError: not JSON, nested deeper than ``MAX_DEPTH``, or a malformed part (``where`` names it).

    Example: ``from_text('{"op":"term","column":"level","value":"ERROR"}') == Term("level", "ERROR")``
    """
    try:
        tree = json.loads(text, parse_float=Decimal)
    except json.JSONDecodeError as e:
        raise FilterError(f"{where}: not JSON ({e})") from e
    except RecursionError:
        raise FilterError(f"{where}: nests deeper than {MAX_DEPTH} levels") from None
    return from_json(tree, where)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise FilterError(f"{where}: expected a string, got {value!r}")
    return value


def columns_of(f: Filter) -> set[str]:
    """Every column a filter tree names (``QueryString`` over all fields names none)."""
    if isinstance(f, (And, Or)):
        return set().union(*(columns_of(c) for c in f.children))
    if isinstance(f, Not):
        return columns_of(f.child)
    column = getattr(f, "column", None)
    return {column} if column is not None else set()


def map_columns(f: Filter, rename: Any) -> Filter:
    """The same tree with every column name replaced by ``rename(name)``."""
    if isinstance(f, (And, Or)):
        return type(f)(tuple(map_columns(c, rename) for c in f.children))
    if isinstance(f, Not):
        return Not(map_columns(f.child, rename))
    column = getattr(f, "column", None)
    return f if column is None else dataclasses.replace(f, column=rename(column))


def resolve_columns(f: Filter, columns: Any) -> Filter:
    """The tree with its column names matched case-insensitively to ``columns`` (as Spark resolves
    names); names that match none are kept for the caller to report."""
    by_lower = {c.lower(): c for c in columns}
    return map_columns(f, lambda name: by_lower.get(name.lower(), name))


def fuzzy_transpositions(f: Filter, one_edit: bool) -> Filter:
    """The tree with each fuzzy query string's transpositions counted as one edit (``one_edit``) or two.

    Example: ``fuzzy_transpositions(QueryString("hte~1", "m", fuzzy=True), False).transpositions`` is False.
    """
    if isinstance(f, (And, Or)):
        return type(f)(tuple(fuzzy_transpositions(c, one_edit) for c in f.children))
    if isinstance(f, Not):
        return Not(fuzzy_transpositions(f.child, one_edit))
    if isinstance(f, QueryString) and f.fuzzy and f.transpositions != one_edit:
        return dataclasses.replace(f, transpositions=one_edit)
    return f


def map_values(f: Filter, convert: Any) -> Filter:
    """The same tree with every comparison value replaced by ``convert(column, value)``."""
    if isinstance(f, (And, Or)):
        return type(f)(tuple(map_values(c, convert) for c in f.children))
    if isinstance(f, Not):
        return Not(map_values(f.child, convert))
    if isinstance(f, Term):
        return Term(f.column, convert(f.column, f.value))
    if isinstance(f, TermIn):
        return TermIn(f.column, tuple(convert(f.column, v) for v in f.values))
    if isinstance(f, Between):
        lower = None if f.lower is None else convert(f.column, f.lower)
        upper = None if f.upper is None else convert(f.column, f.upper)
        return Between(f.column, lower, upper, f.lower_inclusive, f.upper_inclusive)
    return f
