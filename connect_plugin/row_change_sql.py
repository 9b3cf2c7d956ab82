"""``DELETE FROM`` and ``UPDATE`` statements on IndexTables tables, for ``connect_plugin.sql``:

    DELETE FROM indextables.`/data/logs` [[AS] t] [WHERE <predicate>]
    UPDATE indextables.`/data/logs` [[AS] t] SET level = 'WARN', latency = latency * 2 [WHERE <predicate>]

The table is ``indextables.`<path>```, a quoted path or a name registered with
``connect_plugin.register_table``; a statement on any other table is Spark's own (None here). The
predicate is what a read's WHERE accepts (``indexquery`` included); each SET value is a Spark SQL
expression over the row. Both run through ``connect_plugin.row_changes``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_plugin.grammar import parse_predicate, split_commas
from connect_plugin.lexer import line_and_column, unquote
from connect_plugin.row_changes import delete, update
from indextables_contract.errors import IndexTablesSQLError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_HEAD = re.compile(r"^\s*(delete\s+from|update)\s+", re.IGNORECASE)
_PATH = re.compile(r"indextables\s*\.\s*(`[^`]*`)|('[^']*'|\"[^\"]*\"|`[^`]*`)", re.IGNORECASE)
_NAME = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)")
_ALIAS = re.compile(r"\s+(?:as\s+)?([A-Za-z_]\w*)", re.IGNORECASE)
_KEYWORD = re.compile(r"\b(where|set)\b", re.IGNORECASE)
_ASSIGNMENT = re.compile(r"^\s*(?:[A-Za-z_]\w*\s*\.\s*)?(`[^`]*`|[A-Za-z_]\w*)\s*=(?!=)(.*)$", re.DOTALL)


@dataclass
class _Table:
    spark: Any
    path: str
    options: dict[str, Any]


def row_change_statement(
    spark: SparkSession, text: str, code: str, options: Mapping[str, Any]
) -> Callable[[], DataFrame] | None:
    """A callable running ``text`` (``code``: it with literals blanked, ``lexer.lex``) if it is a DELETE
    or UPDATE of an IndexTables table, else None.

    Raises:
        IndexTablesSQLError: a statement of an IndexTables table that does not parse (line and column).

    Example: ``row_change_statement(spark, "DELETE FROM indextables.`/t` WHERE id = 1", ...)()``
    """
    head = _HEAD.match(code)
    if head is None:
        return None
    target = statement_target(spark, text, code, head.end())
    if target is None:
        return None
    path, alias, rest = target
    table = _Table(spark, path, dict(options))
    body_code = code[rest:]
    if head.group(1).lower().startswith("delete"):
        if not body_code.strip().rstrip(";"):
            raise IndexTablesSQLError(
                "DELETE FROM <table> without WHERE would delete every row: overwrite the table with an empty "
                "DataFrame (mode('overwrite')) or DROP INDEXTABLES PARTITIONS; a DELETE needs a WHERE"
            )
        where = _where_clause(text, code, rest, required=True)
        return lambda: delete(table, where, alias)
    keyword = _KEYWORD.search(body_code)
    if keyword is None or keyword.group(1).lower() != "set":
        raise statement_error(text, rest, "expected SET <column> = <expression>, ...")
    start = rest + keyword.end()
    where_at = _KEYWORD.search(code, start)
    while where_at is not None and where_at.group(1).lower() != "where":
        where_at = _KEYWORD.search(code, where_at.end())
    end = where_at.start() if where_at is not None else len(text)
    assignments = set_assignments(text, code, start, end)
    where = None if where_at is None else _where_clause(text, code, where_at.start(), True)
    return lambda: update(table, where, assignments, alias)


def statement_target(spark: SparkSession, text: str, code: str, at: int) -> tuple[str, str | None, int] | None:
    """The path of the IndexTables table named at ``at``, what the statement calls it (its alias, or
    its registered name) and where the statement goes on after it, or None for a table that is not
    IndexTables'."""
    from connect_plugin.settings import TABLE_NAME_PREFIX

    m = _PATH.match(code, at)
    if m is not None:
        group = 1 if m.group(1) is not None else 2
        path, called = unquote(text[m.start(group) : m.end(group)]), None
        if group == 2 and "/" not in path and ":" not in path:
            return None
        end = m.end()
    else:
        name = _NAME.match(code, at)
        if name is None:
            return None
        registered = spark.conf.get(TABLE_NAME_PREFIX + name.group(1), None)
        if not registered:
            return None
        path, called, end = str(registered), name.group(1).split(".")[-1], name.end()
    alias = _ALIAS.match(code, end)
    if alias is not None and alias.group(1).lower() not in ("where", "set"):
        called, end = alias.group(1), alias.end()
    return path, called, end


def _where_clause(text: str, code: str, at: int, required: bool) -> Any:
    """The predicate of ``WHERE <predicate>`` starting at ``at`` (None if there is none and not ``required``)."""
    m = re.compile(r"\s*where\b", re.IGNORECASE).match(code, at)
    if m is None:
        if required:
            raise statement_error(text, at, "expected WHERE <predicate>")
        return None
    predicate = text[m.end() :].strip().rstrip(";")
    if not predicate:
        raise statement_error(text, m.end(), "WHERE needs a predicate")
    parse_predicate(predicate)  # a syntax error is named here, before anything runs
    return predicate


def set_assignments(text: str, code: str, start: int, end: int) -> dict[str, str]:
    """``column = expression`` pairs of a SET list (``text[start:end]``), cut at top-level commas."""
    out: dict[str, str] = {}
    position = start
    for part, part_code in zip(
        split_commas(text[start:end], code[start:end]), split_commas(code[start:end], code[start:end]), strict=True
    ):
        m = _ASSIGNMENT.match(part_code)
        if m is None or not m.group(2).strip():
            raise statement_error(text, position, f"expected <column> = <expression>, not {part.strip()[:60]!r}")
        column = unquote(part[m.start(1) : m.end(1)]) if part[m.start(1)] == "`" else m.group(1)
        if column.lower() in (c.lower() for c in out):
            raise statement_error(text, position, f"column {column!r} is SET twice")
        out[column] = part[m.start(2) :].strip()
        position += len(part) + 1
    return out


def statement_error(text: str, position: int, what: str) -> IndexTablesSQLError:
    line, column = line_and_column(text, position)
    return IndexTablesSQLError(f"syntax error at line {line}, column {column}: {what}")
