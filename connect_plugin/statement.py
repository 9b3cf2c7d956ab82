"""Any SELECT over IndexTables tables, as Spark SQL over indexed reads.

``plan_general`` finds every IndexTables table a statement names — ``indextables.`<path>```, a
quoted path after FROM/JOIN, or a name registered as ``spark.indextables.table.<name>`` — and
every use of an index operator (``col indexquery '...'``, ``indexqueryall('...')``,
``textsearch``, ``fieldmatch``). Each table becomes a temporary view over a ``TableRead`` that
returns only the table's columns the statement names (all of them where it selects ``*``), and
each index operator becomes a boolean *match column* of its table's read, so the operators work
anywhere a boolean does: under OR, in subqueries, CTEs, joins and unions. Spark pushes its
own comparisons (and ``WHERE <match column>``) into the reads.

The single-table fast path (filters, LIMIT and aggregates pushed) is ``connect_plugin.sql``'s.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from connect_plugin.failures import query_context_logs_held, release
from connect_plugin.lexer import unquote
from connect_plugin.plan import AggregateRead, BucketRead, TableRead
from indextables_contract import filters as F
from indextables_contract.errors import StatementError
from indextables_contract.read import ReadPlan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_IDENT = r"(?:[A-Za-z_][A-Za-z0-9_]*|`[^`]*`)"
_PATH_REF = re.compile(r"(?<![\w.`])indextables\s*\.\s*(`[^`]*`)", re.IGNORECASE)
_FROM_QUOTED = re.compile(r"\b(?:from|join)\s+('[^']*'|\"[^\"]*\"|`[^`]*`)(?!\s*\.)", re.IGNORECASE)
_FROM_NAME = re.compile(r"\b(?:from|join)\s+([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?![\w.`(]|\s*\()", re.IGNORECASE)
_NEXT_NAME = re.compile(r"\s*,\s*([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?![\w.`(]|\s*\()")
_CTE_NAME = re.compile(r"(?:\bwith|,)\s*(?:recursive\s+)?([A-Za-z_]\w*)\s+as\s*\(", re.IGNORECASE)
_ALIAS = re.compile(r"\s+(?:as\s+)?([A-Za-z_]\w*|`[^`]*`)", re.IGNORECASE)
_OPERATOR = re.compile(
    rf"(?<![\w`.])((?:{_IDENT}\s*\.\s*)?{_IDENT}|\*)\s*(?<=\*|\s)(indexquery|textsearch|fieldmatch|fuzzyquery)\s*([rR]?'[^']*'|[rR]?\"[^\"]*\")",
    re.IGNORECASE,
)
_OPERATOR_ALL = re.compile(r"(?<![\w`])indexqueryall\s*\(\s*([rR]?'[^']*'|[rR]?\"[^\"]*\")\s*\)", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUOTED_NAME = re.compile(r"`[^`]*`")
_STAR = re.compile(r"(?:\bselect(?:\s+(?:distinct|all))?|,|\.)\s*\*", re.IGNORECASE)
# Words that follow a table reference without being its alias.
_NOT_ALIAS = frozenset(
    (
        "where",
        "join",
        "inner",
        "left",
        "right",
        "full",
        "outer",
        "cross",
        "natural",
        "on",
        "using",
        "group",
        "order",
        "limit",
        "having",
        "union",
        "intersect",
        "except",
        "minus",
        "window",
        "lateral",
        "pivot",
        "unpivot",
        "tablesample",
        "cluster",
        "distribute",
        "sort",
        "qualify",
        "semi",
        "anti",
        "offset",
        "for",
        "select",
        "from",
    )
)
_KINDS = {"indexquery": None, "textsearch": "text", "fieldmatch": "exact", "fuzzyquery": "fuzzy"}


@dataclass(frozen=True)
class TableRef:
    start: int
    end: int  # the reference's span in the statement (without its alias)
    path: str
    alias: str | None  # what the statement calls the table (its alias, else a registered name)
    has_alias: bool


@dataclass(frozen=True)
class OperatorUse:
    start: int
    end: int
    qualifier: str | None
    column: str | None  # None: every text field
    query: str
    kind: str | None


@dataclass
class StatementPlan:
    """How a statement runs: indexed reads as views, then Spark SQL over them (or a pushed aggregate)."""

    sql: str | None
    reads: list[tuple[str, TableRead]] = field(default_factory=list)
    aggregate: AggregateRead | BucketRead | None = None
    fallback: StatementPlan | None = None  # where the pushed aggregate declines (types it cannot produce)
    notes: list[str] = field(default_factory=list)

    def dataframe(self, spark: SparkSession) -> DataFrame:
        if self.aggregate is not None:
            df = self.aggregate.run(spark)
            if df is not None or self.fallback is None:
                if df is None:
                    raise StatementError(f"aggregate over {self.aggregate.path} cannot be pushed")
                return df
            self.notes.append("the pushed aggregate declined (a measure's type); Spark aggregates the pruned read")
            return self.fallback.dataframe(spark)
        assert self.sql is not None  # a plan has a pushed aggregate or a statement
        bare = self._bare_read(spark)
        if bare is not None:
            return bare
        for view, read in self.reads:
            read.dataframe(spark).createOrReplaceTempView(view)
        failure = None
        with query_context_logs_held() as held:  # PySpark's ERROR log of the exception: not before ours
            try:
                result = spark.sql(self.sql)
            except Exception as e:
                failure = self._in_user_terms(spark, str(e))
                if failure is None:
                    release(held)  # Spark's error, as Spark tells it
                    raise
            else:
                release(held)
                return result
        # Spark's exception (its text names the internal views, its SQL is the rewritten statement) stays
        # out of the chain: the project's error says what the user's statement did wrong
        assert failure is not None
        raise failure from None

    def _bare_read(self, spark: SparkSession) -> DataFrame | None:
        """The read itself for ``SELECT * | col, ... FROM t [alias] [LIMIT n]`` of one table, as a
        statement whose index queries went into the read is left (``SELECT id FROM t WHERE message
        indexquery 'x'``; a first look): the same rows as Spark SQL over its view, without a view to
        register and a statement to analyze (~25-40 ms of a 0.2 s query). Columns are plain names of
        the table's, spelled as it spells them (any other spelling, an expression, a qualifier:
        Spark SQL, which tells an unknown column in the statement's terms). None for any other
        statement."""
        if len(self.reads) != 1 or self.sql is None:
            return None
        view, read = self.reads[0]
        found = _BARE_SELECT.fullmatch(self.sql.strip().rstrip(";").strip())
        if found is None or found.group("view") != view:
            return None
        df = read.dataframe(spark)
        if found.group("columns") != "*":
            names = [c.strip() for c in found.group("columns").split(",")]
            if not set(names) <= set(df.columns):
                return None
            df = df.select(*names)
        return df if found.group("limit") is None else df.limit(int(found.group("limit")))

    def _in_user_terms(self, spark: SparkSession, text: str) -> StatementError | None:
        """Spark's analysis error over the views, told in the statement's terms: an unknown column named
        with every column of the table(s) (Spark suggests among the pruned view's), and no view name."""
        if not self.reads or not any(view in text for view, _ in self.reads):
            return None
        unresolved = _UNRESOLVED.search(text)
        if unresolved is not None:
            name = unresolved.group(1).split("`.`")[-1]
            tables = []
            for _, read in self.reads:
                columns = TableRead(read.path, ReadPlan(), read.options).dataframe(spark).columns
                if any(c.lower() == name.lower() for c in columns):
                    return None  # another cause: Spark's own message says it
                tables.append((read.path, columns))
            return StatementError(_unknown_column(name, tables))
        first = text.strip().splitlines()[0]
        for view, read in self.reads:
            first = first.replace(f"`{view}`", f"indextables.`{read.path}`").replace(view, f"indextables.`{read.path}`")
        # a position in the statement as rewritten over the views is not one in the user's statement
        first = re.sub(r"\s*\(line \d+, pos \d+\)", "", first)
        return StatementError(first)

    def explain(self) -> str:
        parts = [self.aggregate.describe()] if self.aggregate is not None else []
        parts += [f"{read.describe()}\n  as view {view}" for view, read in self.reads]
        if self.sql is not None:
            parts.append(f"Spark SQL over the reads:\n  {self.sql}")
        parts += self.notes
        return "\n".join(parts)


_CLAUSE = (
    r"(?:LIMIT|WHERE|GROUP|ORDER|HAVING|UNION|EXCEPT|INTERSECT|MINUS|JOIN|CROSS|NATURAL|LEFT|RIGHT|FULL|INNER|SORT"
    r"|CLUSTER|DISTRIBUTE|WINDOW|OFFSET|TABLESAMPLE|LATERAL|PIVOT|UNPIVOT)\b"
)
# a statement that is one table's rows as they are (an alias is no clause): StatementPlan._bare_read
_BARE_SELECT = re.compile(
    rf"SELECT\s+(?P<columns>\*|\w+(?:\s*,\s*\w+)*)\s+FROM\s+(?P<view>\w+)"
    rf"(?:\s+(?:AS\s+)?(?!{_CLAUSE})\w+)?(?:\s+LIMIT\s+(?P<limit>\d+))?",
    re.IGNORECASE,
)
_UNRESOLVED = re.compile(r"\[UNRESOLVED_COLUMN[.\w]*\] A column[^`]* with name `(.+?)` cannot be resolved")


def _unknown_column(name: str, tables: list[tuple[str, list[str]]]) -> str:
    """``column 'x' is not in the table /t (did you mean 'y'?; its columns: a, b)`` (every table of a join)."""
    import difflib

    every = [c for _, columns in tables for c in columns]
    close = difflib.get_close_matches(name, every, n=1) or difflib.get_close_matches(name.lower(), every, n=1)
    hint = f"did you mean {close[0]!r}?; " if close else ""
    if len(tables) == 1:
        path, columns = tables[0]
        return f"column {name!r} is not in the table {path} ({hint}its columns: {', '.join(columns)})"
    listed = "; ".join(f"{path}: {', '.join(columns)}" for path, columns in tables)
    return f"column {name!r} is not in any of the statement's tables ({hint}their columns: {listed})"


def view_name() -> str:
    return f"indextables_{uuid.uuid4().hex[:12]}"


def find_table_refs(spark: SparkSession, text: str, code: str) -> list[TableRef]:
    """The IndexTables tables ``text`` names (``code``: the text with literal insides blanked)."""
    from connect_plugin.settings import TABLE_NAME_PREFIX

    found: list[tuple[int, int, str, bool]] = []  # start, end, path, is a name
    for m in _PATH_REF.finditer(code):
        found.append((m.start(), m.end(), unquote(text[m.start(1) : m.end(1)]), False))
    for m in _FROM_QUOTED.finditer(code):
        path = unquote(text[m.start(1) : m.end(1)])
        if "/" in path or ":" in path:
            found.append((m.start(1), m.end(1), path, False))
    ctes = {n.lower() for n in _CTE_NAME.findall(code)}
    names = []
    for m in _FROM_NAME.finditer(code):
        names.append((m.start(1), m.end(1), m.group(1)))
        position = _skip_alias(code, m.end(1))
        while (more := _NEXT_NAME.match(code, position)) is not None:
            names.append((more.start(1), more.end(1), more.group(1)))
            position = _skip_alias(code, more.end(1))
    for start, end, name in names:
        if name.lower() in ctes or name.lower() in _NOT_ALIAS or name.lower() == "indextables":
            continue
        registered = spark.conf.get(TABLE_NAME_PREFIX + name, None)
        if registered:
            found.append((start, end, str(registered), True))
    refs = []
    for start, end, path, is_name in sorted(found):
        alias = _alias_at(text, code, end)
        name = text[start:end].split(".")[-1] if is_name else None
        refs.append(TableRef(start, end, path, alias or name, alias is not None))
    return refs


def _skip_alias(code: str, position: int) -> int:
    m = _ALIAS.match(code, position)
    return m.end() if m is not None and m.group(1).lower() not in _NOT_ALIAS else position


def _alias_at(text: str, code: str, position: int) -> str | None:
    m = _ALIAS.match(code, position)
    if m is None or m.group(1).lower() in _NOT_ALIAS:
        return None
    return unquote(text[m.start(1) : m.end(1)]) if m.group(1).startswith("`") else m.group(1)


def find_operator_uses(text: str, code: str) -> list[OperatorUse]:
    uses = []
    for m in _OPERATOR.finditer(code):
        token = text[m.start(1) : m.end(1)]
        qualifier, written = (None, "*") if token == "*" else _column_parts(token)
        column = None if written.lower() in ("_indexall", "*") else written
        query = unquote(text[m.start(3) : m.end(3)])
        uses.append(OperatorUse(m.start(), m.end(), qualifier, column, query, _KINDS[m.group(2).lower()]))
    for m in _OPERATOR_ALL.finditer(code):
        uses.append(OperatorUse(m.start(), m.end(), None, None, unquote(text[m.start(1) : m.end(1)]), None))
    return sorted(uses, key=lambda u: u.start)


def _column_parts(token: str) -> tuple[str | None, str]:
    parts = [p.strip() for p in re.findall(rf"{_IDENT}", token)]
    names = [unquote(p) if p.startswith("`") else p for p in parts]
    return (names[0], names[1]) if len(names) == 2 else (None, names[-1])


def names_in(text: str, code: str) -> tuple[str, ...]:
    """Every name the statement could mean a column by (``*`` where it selects all columns)."""
    names = set(_WORD.findall(code))
    names |= {unquote(text[m.start() : m.end()]) for m in _QUOTED_NAME.finditer(code)}
    if _STAR.search(code):
        names.add("*")
    return tuple(sorted(names))


def plan_general(
    spark: SparkSession, text: str, code: str, refs: list[TableRef], options: Mapping[str, Any] | None
) -> StatementPlan:
    """Every table a view over its pruned read, every index operator a match column (module docstring)."""
    from connect_plugin.plan import options_tuple

    uses = find_operator_uses(text, code)
    matches: dict[int, list[tuple[str, F.Filter]]] = {i: [] for i in range(len(refs))}
    replacements: list[tuple[int, int, str]] = []
    for n, use in enumerate(uses):
        i = _owner(use, refs, text, code)
        name = f"__indextables_match_{n}"
        fuzzy = use.kind == "fuzzy"
        matches[i].append((name, F.QueryString(use.query, use.column, None if fuzzy else use.kind, fuzzy)))
        replacements.append((use.start, use.end, f"{use.qualifier}.{name}" if use.qualifier else name))
    required = names_in(text, code)
    plan = StatementPlan(sql=None)
    for i, ref in enumerate(refs):
        view = view_name()
        read_plan = ReadPlan(required_columns=required, match_columns=tuple(matches[i]))
        plan.reads.append((view, TableRead(ref.path, read_plan, options_tuple(options))))
        replacement = view if ref.has_alias or ref.alias is None else f"{view} AS {ref.alias}"
        replacements.append((ref.start, ref.end, replacement))
    plan.sql = _replace(text, replacements)
    return plan


def _owner(use: OperatorUse, refs: list[TableRef], text: str, code: str) -> int:
    """The table an index operator is about: the one its qualifier names, else the table of its own
    query block (the nearest enclosing parentheses, outwards, that read exactly one table)."""
    if use.qualifier is not None:
        owners = [i for i, r in enumerate(refs) if r.alias is not None and r.alias.lower() == use.qualifier.lower()]
        if len(owners) == 1:
            return owners[0]
        raise StatementError(
            f"{text[use.start : use.end]!r}: {use.qualifier!r} names no IndexTables table of the statement "
            f"(tables: {[r.alias or r.path for r in refs]})"
        )
    ref_scopes = [_scopes(code, r.start)[0] for r in refs]
    for scope in _scopes(code, use.start):
        owners = [i for i, s in enumerate(ref_scopes) if s == scope]
        if len(owners) == 1:
            return owners[0]
        if owners:
            break
    raise StatementError(
        f"{text[use.start : use.end]!r}: its query block reads several IndexTables tables; qualify the column "
        "with its table's alias (t.col indexquery '...')"
    )


def _scopes(code: str, position: int) -> list[int]:
    """Where the parentheses enclosing ``position`` open, innermost first, then -1 (the statement)."""
    stack: list[int] = []
    for i, c in enumerate(code[:position]):
        if c == "(":
            stack.append(i)
        elif c == ")" and stack:
            stack.pop()
    return [*reversed(stack), -1]


def _replace(text: str, replacements: list[tuple[int, int, str]]) -> str:
    out, position = [], 0
    for start, end, new in sorted(replacements):
        if start < position:
            raise StatementError(f"overlapping table references in {text!r}")
        out += [text[position:start], new]
        position = end
    out.append(text[position:])
    return "".join(out)
