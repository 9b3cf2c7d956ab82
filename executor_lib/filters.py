"""Structured filters (what Spark filter pushdown produces): one vocabulary for data skipping
and for search. Standard library only.

``log.pruning`` uses a filter tree to skip files and manifests by partition values and
min/max statistics (anything it cannot judge keeps the file); ``splits.searcher`` compiles
it into a Tantivy query. A filter a split's field type cannot answer exactly (a range on a
tokenized text field, equality on tokenized text, ``exists`` on a field without a fast
field) is a ``QueryError`` naming the column, so the caller can keep that predicate in Spark.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
        if child.lower is not None and (lower is None or child.lower > lower or
                                        (child.lower == lower and not child.lower_inclusive)):  # fmt: skip
            lower, lower_inc = child.lower, child.lower_inclusive
        upper, upper_inc = current.upper, current.upper_inclusive
        if child.upper is not None and (upper is None or child.upper < upper or
                                        (child.upper == upper and not child.upper_inclusive)):  # fmt: skip
            upper, upper_inc = child.upper, child.upper_inclusive
        merged[child.column] = Between(child.column, lower, upper, lower_inc, upper_inc)
    return (*merged.values(), *rest)
