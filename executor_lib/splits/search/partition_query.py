"""A table search's query parts on partition columns (``indextables search``).

Partition columns are not fields of a split's index: their values are each split's
``partitionValues`` in the log, so Tantivy answers ``date:2024-01-01`` with "no such field".
``split_query`` takes out of a query the parts of its top level that name partition columns only
and are required (``AND``, ``+``) or excluded (``NOT``, ``-``), as contract filters (``Term``,
``TermIn``, ``Between``, ``Prefix``, ``Exists`` under ``And``/``Or``/``Not``); what is left is the
query each split's index answers. ``partition_files`` chooses the splits: the log's partition
pruning (``log.files.pruning.prune_snapshot``, what a Spark read of the table uses), then each remaining
split's partition values against the parts exactly (a null value matches no value, as a missing
field in Tantivy: ``NOT date:x`` keeps it).

A partition column inside a part that also names index fields (``date:x OR message:y``) cannot be
taken out, and is a QueryError naming the column.

Example: ``split_query("message:timeout AND date:2024-01-01", ["date"])`` is
``PartitionParts("message:timeout", (Term("date", "2024-01-01"),))``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from executor_lib.protocol.actions import AddAction
from executor_lib.splits.query.syntax import MUST, MUST_NOT, Boost, Clause, Leaf, Node, parse, wildcard_parts
from indextables_contract import filters as F
from indextables_contract.errors import QueryError, QuerySyntaxError

if TYPE_CHECKING:
    from executor_lib.log.snapshot import Snapshot


@dataclass(frozen=True)
class PartitionParts:
    """``query``: what the splits' indexes answer (None: every row); ``filters``: what a split's
    partition values must satisfy, all of them, for it to be searched."""

    query: str | None
    filters: tuple[F.Filter, ...] = ()


def split_query(query: str | None, partition_columns: Sequence[str]) -> PartitionParts:
    """``query`` with its top-level parts on partition columns only taken out as filters; a query
    naming no partition column (or not parsing: the search reports that) comes back as it is."""
    if query is None or not partition_columns:
        return PartitionParts(query)
    try:
        tree = parse(query)
    except QuerySyntaxError:
        return PartitionParts(query)
    partitions = set(partition_columns)
    if not _columns(tree) & partitions:
        return PartitionParts(query)
    if _columns(tree) <= partitions and _all_named(tree):
        return PartitionParts(None, (_filter(tree, query),))
    children = tree.children if isinstance(tree, Clause) else ((MUST, tree),)
    kept: list[tuple[str | None, Node]] = []
    found: list[F.Filter] = []
    removed_required = False
    for occur, child in children:
        named = _columns(child)
        if not named & partitions:
            kept.append((occur, child))
            continue
        if named <= partitions and _all_named(child) and occur in (MUST, MUST_NOT):
            part = _filter(child, query)
            found.append(part if occur == MUST else F.Not(part))
            removed_required |= occur == MUST
            continue
        column = sorted(named & partitions)[0]
        raise QueryError(
            f"query {query!r}: {column!r} is a partition column (its values are the splits' partition values, "
            "not index fields): it can be searched only in a part of the query naming partition columns only, "
            f"required or excluded at its top level, e.g. '{column}:value AND ...' or 'NOT {column}:value'"
        )
    if not kept:
        return PartitionParts(None, tuple(found))
    if removed_required and not any(occur == MUST for occur, _ in kept):
        # the other parts were optional beside a required one: every row stays a match
        kept.insert(0, (MUST, Leaf("all", "*")))
    if len(kept) == 1 and kept[0][0] != MUST_NOT:
        return PartitionParts(_text(kept[0][1]), tuple(found))
    return PartitionParts(" ".join(_occur_text(o, c) for o, c in kept), tuple(found))


def query_fields(query: str | None) -> set[str]:
    """The fields ``query`` names (as columns: escapes read); empty if it does not parse."""
    if query is None:
        return set()
    try:
        return _columns(parse(query))
    except QuerySyntaxError:
        return set()


def partition_files(snapshot: Snapshot, filters: Sequence[F.Filter]) -> list[AddAction]:
    """The live files whose partition values satisfy every one of ``filters`` (``split_query``'s):
    pruned as a read prunes (``prune_snapshot``), then judged exactly."""
    from executor_lib.log.files.pruning import partition_judge, prune_snapshot

    if not filters:
        return list(snapshot.files)
    files, _ = prune_snapshot(snapshot, list(filters))
    meta = snapshot.metadata
    judges: dict[F.Filter, Any] = {}

    def holds(f: F.Filter, values: Mapping[str, str]) -> bool:
        if isinstance(f, F.And):
            return all(holds(c, values) for c in f.children)
        if isinstance(f, F.Or):
            return any(holds(c, values) for c in f.children)
        if isinstance(f, F.Not):
            return not holds(f.child, values)
        column = getattr(f, "column", None)
        if column not in values:  # a null partition value matches no value
            return False
        if isinstance(f, F.Exists):
            return True
        if f not in judges:
            judges[f] = partition_judge([f], meta.schema_string, meta.partition_columns)
        return bool(judges[f](values))

    def given(add: AddAction) -> dict[str, str]:
        return {c: v for c, v in add.partition_values.items() if v is not None}

    return [a for a in files if all(holds(f, given(a)) for f in filters)]


def _column(field: str) -> str:
    return re.sub(r"\\(.)", r"\1", field)


def _leaves(node: Node) -> Iterable[Leaf]:
    if isinstance(node, Leaf):
        yield node
    elif isinstance(node, Boost):
        yield from _leaves(node.child)
    else:
        for _, child in node.children:
            yield from _leaves(child)


def _columns(node: Node) -> set[str]:
    return {_column(leaf.field) for leaf in _leaves(node) if leaf.field is not None}


def _all_named(node: Node) -> bool:
    """Every leaf names its field (a bare word searches the index's default fields)."""
    return all(leaf.field is not None for leaf in _leaves(node))


def _filter(node: Node, query: str) -> F.Filter:
    """A node naming partition columns only as a filter tree, with Tantivy's meaning of its clauses:
    the required parts and none of the excluded ones; the optional ones count only beside no required
    part (then one of them must hold)."""
    if isinstance(node, Boost):
        return _filter(node.child, query)
    if isinstance(node, Leaf):
        return _leaf_filter(node, query)
    required = [_filter(c, query) for o, c in node.children if o == MUST]
    excluded = [F.Not(_filter(c, query)) for o, c in node.children if o == MUST_NOT]
    optional = [_filter(c, query) for o, c in node.children if o not in (MUST, MUST_NOT)]
    parts = required + excluded
    if optional and not required:
        parts.insert(0, optional[0] if len(optional) == 1 else F.Or(tuple(optional)))
    return parts[0] if len(parts) == 1 else F.And(tuple(parts))


_SET = re.compile(r"^IN\s*\[(.*)\]$", re.DOTALL)
_SET_VALUE = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'|(\S+)')
_COMPARISON = re.compile(r"^(>=|<=|<|>)\s*(\S+)$")
_RANGE = re.compile(r"^([\[{])\s*(\S+)\s+TO\s+(\S+)\s*([\]}])$")


def _leaf_filter(leaf: Leaf, query: str) -> F.Filter:
    column = _column(leaf.field or "")
    if leaf.kind == "exists":
        return F.Exists(column)
    if leaf.kind == "literal":
        if leaf.prefix:
            return F.Prefix(column, leaf.text)
        parts = wildcard_parts(leaf.text) if leaf.is_wildcard else None
        if parts is None:
            return F.Term(column, leaf.text)
        if len(parts) == 2 and parts[0][0] == "text" and parts[1][0] == "*":
            return F.Prefix(column, parts[0][1])
    elif leaf.kind == "set":
        found = _SET.match(leaf.source)
        if found is not None:
            values = [next(g for g in m.groups() if g is not None) for m in _SET_VALUE.finditer(found.group(1))]
            return F.TermIn(column, tuple(_column(v) for v in values))
    elif leaf.kind == "range":
        compared = _COMPARISON.match(leaf.source)
        if compared is not None:
            sign, value = compared.groups()
            if sign.startswith(">"):
                return F.Between(column, lower=value, lower_inclusive=sign == ">=")
            return F.Between(column, upper=value, upper_inclusive=sign == "<=")
        ranged = _RANGE.match(leaf.source)
        if ranged is not None:
            opener, low, high, closer = ranged.groups()
            return F.Between(
                column,
                lower=None if low == "*" else low,
                upper=None if high == "*" else high,
                lower_inclusive=opener == "[",
                upper_inclusive=closer == "]",
            )
    raise QueryError(
        f"query {query!r}: {leaf.field}:{leaf.source} cannot search partition column {column!r} (its values "
        "are the splits' partition values): give a value, a set (IN [a b]), a range, a prefix (value*) or *"
    )


def _text(node: Node) -> str:
    """Query text that parses back to ``node``."""
    if isinstance(node, Leaf):
        return node.source if node.field is None else f"{node.field}:{node.source}"
    if isinstance(node, Boost):
        return f"({_text(node.child)})^{node.boost}"
    return "(" + " ".join(_occur_text(o, c) for o, c in node.children) + ")"


def _occur_text(occur: str | None, node: Node) -> str:
    return {MUST: "+", MUST_NOT: "-"}.get(occur or "", "") + _text(node)
