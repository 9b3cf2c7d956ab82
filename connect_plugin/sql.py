"""IndexTables SQL for Spark Connect clients: maintenance commands and the ``indexquery`` operators.

``sql(spark, text)`` parses the IndexTables commands (grammar below, with lark) and runs them
through ``IndexTable``; a ``SELECT ... FROM indextables.`<path>` WHERE ...`` whose WHERE uses
``indexquery`` / ``indexqueryall`` / ``textsearch`` / ``fieldmatch`` becomes an indexed read
whose WHERE clause travels as the ``filter`` tree (the index answers what it can, the rest is
evaluated on the rows on the executors), except top-level AND parts over function calls or
arithmetic, which Spark applies to the rows read; anything else goes to ``spark.sql``. Only
real uses count: the operator words inside string literals, comments or back-quoted names, or
used as names, leave a statement to Spark. Quoted paths, names and literals follow Spark's
lexer (doubled back-quotes, doubled quotes, backslash escapes, r'..' raw strings, ".." strings).
Syntax errors name the line and column.
"""

from __future__ import annotations

import json
import re
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, VisitError

from connect_plugin.lexer import lex, unquote
from connect_plugin.plan import AggregateRead, OrderKey, OutputColumn, TableRead, options_tuple
from connect_plugin.statement import StatementPlan, find_table_refs, names_in, plan_general, view_name
from indextables_contract import commands as C
from indextables_contract.aggregate import AggregatePlan, Measure

GRAMMAR = r"""
?start: command

?command: merge | purge | checkpoint | truncate | drop | prewarm
        | describe_state | describe_log | describe_cache | flush_cache | select

merge: _MERGE _SPLITS target [_WHERE predicate] merge_opt*
merge_opt: _TARGET _SIZE SIZE                         -> target_size
         | _MAX _DEST _SPLITS INT                     -> max_dest
         | _MAX _SOURCE _SPLITS _PER _MERGE INT       -> max_sources
         | _SORT _BY (NAME | BACKQUOTED)              -> sort_by
purge: _PURGE _INDEXTABLE target purge_opt*
purge_opt: _OLDER _THAN duration                       -> older_than
         | _TRANSACTION _LOG _RETENTION duration       -> log_retention
         | _DRY _RUN                                   -> dry_run
duration: NUMBER UNIT
checkpoint: _CHECKPOINT _INDEXTABLES target
truncate: _TRUNCATE _INDEXTABLES _TIME _TRAVEL target [dry]
dry: _DRY _RUN
drop: _DROP _INDEXTABLES _PARTITIONS _FROM target _WHERE predicate
prewarm: _PREWARM _INDEXTABLES _CACHE target [_WHERE predicate]
describe_state: _DESCRIBE _INDEXTABLES _STATE target
describe_log: _DESCRIBE _INDEXTABLES _TRANSACTION _LOG target
describe_cache: _DESCRIBE _INDEXTABLES _DISK _CACHE
flush_cache: _FLUSH _INDEXTABLES _DISK _CACHE

select: _SELECT PROJECTION _FROM target [[_AS] ALIAS] [_WHERE predicate] [TAIL]

// a quoted or back-quoted path, indextables.`path`, or a table name (spark.indextables.table.<name>)
target: STRING | BACKQUOTED | _INDEXTABLES "." BACKQUOTED | TABLE_NAME

?predicate: or_expr
?or_expr: and_expr (_OR and_expr)*
?and_expr: not_expr (_AND not_expr)*
?not_expr: _NOT not_expr -> not_
         | atom
?atom: "(" predicate ")"
     | column OP literal                              -> compare
     | column [NEG] _IN "(" literal ("," literal)* ")" -> in_
     | column _IS [NEG] _NULL                         -> is_null
     | column [NEG] _LIKE STRING                      -> like
     | column _BETWEEN literal _AND literal           -> between
     | column _INDEXQUERY STRING                      -> indexquery
     | _INDEXQUERYALL "(" STRING ")"                  -> indexqueryall
     | column _TEXTSEARCH STRING                      -> textsearch
     | column _FIELDMATCH STRING                      -> fieldmatch
     | spark_pred
// A predicate over function calls or arithmetic is evaluated by Spark on the rows the index returns.
spark_pred: call OP value
          | column OP call
          | arith OP (value | arith)
          | value OP arith
          | call [NEG] _IN "(" value ("," value)* ")"
          | call _IS [NEG] _NULL
          | call [NEG] _LIKE STRING
          | call _BETWEEN value _AND value
          | call
call: FUNC "(" [(value | arith) ("," (value | arith))*] ")"
arith: value (ARITH value)+
?value: call | column | literal
column: [_QUALIFIER] (NAME | BACKQUOTED)
_QUALIFIER: /([a-z_][a-z0-9_]*|`([^`]|``)+`)\s*\.\s*(?=[a-z_`])/i
?literal: STRING -> string
        | NUMBER -> number
        | _TRUE -> true
        | _FALSE -> false
        | _DATE STRING -> string
        | _TIMESTAMP STRING -> string

OP: "=" | "==" | "!=" | "<>" | "<=" | ">=" | "<" | ">"
ARITH: "+" | "-" | "*" | "/" | "%"
SIZE: /\d+(\.\d+)?\s*[kmgt]?b?/i
UNIT: /days?|hours?/i
ALIAS.-1: /(?!(where|as)\b)[a-z_][a-z0-9_]*/i
PROJECTION: /.+?(?=\s+from\s)/is
TABLE_NAME.-2: /(?!(where|as|indextables)\b)[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*/i
TAIL: /(group|order|limit|having)\b.*/is
NAME.-1: /[a-z_][a-z0-9_]*/i
FUNC: /(?!(indexqueryall|not|in|and|or)\b)[a-z_][a-z0-9_.]*(?=\s*\()/i
BACKQUOTED: /`([^`]|``)+`/
STRING: /[rR]'[^']*'|[rR]"[^"]*"|'([^'\\]|\\.|'')*'|"([^"\\]|\\.|"")*"/
NUMBER: /-?\d+(\.\d+)?([eE][-+]?\d+)?/
INT: /\d+/

_MERGE: /merge\b/i
_SPLITS: /splits\b/i
_WHERE: /where\b/i
_TARGET: /target\b/i
_SIZE: /size\b/i
_MAX: /max\b/i
_DEST: /dest\b/i
_SOURCE: /source\b/i
_SORT: /sort\b/i
_BY: /by\b/i
_PER: /per\b/i
_PURGE: /purge\b/i
_INDEXTABLE: /indextable\b/i
_INDEXTABLES: /indextables\b/i
_OLDER: /older\b/i
_THAN: /than\b/i
_TRANSACTION: /transaction\b/i
_LOG: /log\b/i
_RETENTION: /retention\b/i
_DRY: /dry\b/i
_RUN: /run\b/i
_CHECKPOINT: /checkpoint\b/i
_TRUNCATE: /truncate\b/i
_TIME: /time\b/i
_TRAVEL: /travel\b/i
_DROP: /drop\b/i
_PARTITIONS: /partitions\b/i
_FROM: /from\b/i
_PREWARM: /prewarm\b/i
_CACHE: /cache\b/i
_DESCRIBE: /describe\b/i
_STATE: /state\b/i
_DISK: /disk\b/i
_FLUSH: /flush\b/i
_SELECT: /select\b/i
_AS: /as\b/i
_OR: /or\b/i
_AND: /and\b/i
_NOT: /not\b/i
NEG: /not\b/i
_IN: /in\b/i
_IS: /is\b/i
_NULL: /null\b/i
_LIKE: /like\b/i
_BETWEEN: /between\b/i
_INDEXQUERY: /indexquery\b/i
_INDEXQUERYALL: /indexqueryall\b/i
_TEXTSEARCH: /textsearch\b/i
_FIELDMATCH: /fieldmatch\b/i
_TRUE: /true\b/i
_FALSE: /false\b/i
_DATE: /date\b/i
_TIMESTAMP: /timestamp\b/i

%import common.WS
%ignore WS
"""


class IndexTablesSQLError(ValueError):
    """A statement that does not parse, with the position that stopped the parser."""


_PARSER = Lark(GRAMMAR, start="start", parser="earley", ambiguity="resolve", propagate_positions=True)
_PREDICATE_PARSER = Lark(GRAMMAR, start="predicate", parser="earley", ambiguity="resolve", propagate_positions=True)

_COMMAND_START = re.compile(
    r"^\s*(merge\s+splits|purge\s+indextable|checkpoint\s+indextables|truncate\s+indextables|drop\s+indextables"
    r"|prewarm\s+indextables|describe\s+indextables|flush\s+indextables)\b",
    re.IGNORECASE,
)
# A use of an index operator (in the text with comments, literals and quoted names blanked): an infix
# operator before a string literal, or indexqueryall( — not the same words as names or inside strings.
_INDEX_OPERATOR_USE = re.compile(
    r"(?<![\w`])(?:(?:indexquery|textsearch|fieldmatch)\s*(?:[rR](?=['\"]))?['\"]|indexqueryall\s*\()",
    re.IGNORECASE,
)


def _like_filter(column: str, pattern: str) -> dict[str, Any]:
    """SQL LIKE as a filter: 'abc%' -> prefix, '%abc%' -> contains, otherwise an anchored regex."""
    if "_" not in pattern and "\\" not in pattern:
        inner = pattern.strip("%")
        if "%" not in inner:
            if pattern == inner:
                return {"op": "term", "column": column, "value": inner}
            if pattern == inner + "%":
                return {"op": "prefix", "column": column, "value": inner}
            if pattern == "%" + inner + "%":
                return {"op": "contains", "column": column, "value": inner}
    regex = "(?s)" + "".join(".*" if c == "%" else "." if c == "_" else _regex_literal(c) for c in pattern)
    return {"op": "regex", "column": column, "value": regex}


def _regex_literal(c: str) -> str:
    return "\\" + c if c in "\\.+*?()|[]{}^$#&-~" else c


def _has(node: Any, op: str) -> bool:
    if not isinstance(node, dict):
        return False
    return node.get("op") == op or any(_has(c, op) for c in node.get("children", [node.get("child")]))


@v_args(inline=True)
class _ToFilter(Transformer):
    """Predicate parse tree -> the JSON filter tree of the ``filter`` read option.

    A predicate over function calls or arithmetic becomes ``{"op": "spark", "sql": <its text>}``, and so does any
    AND/OR/NOT whose parts have no index operator: Spark evaluates those on the rows read.
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def _spark(self, meta: Any) -> dict[str, Any]:
        return {"op": "spark", "sql": self.text[meta.start_pos : meta.end_pos]}

    def _combine(self, meta: Any, node: dict[str, Any], children: list[Any]) -> dict[str, Any]:
        if not any(_has(c, "spark") for c in children):
            return node
        if not any(_has(c, "query") for c in children):
            return self._spark(meta)
        if node["op"] != "and":
            raise IndexTablesSQLError(
                f"at line {meta.line}, column {meta.column}: a predicate with function calls can be combined "
                f"with indexquery/textsearch/fieldmatch only through AND at the top of the WHERE clause"
            )
        return node

    @v_args(meta=True)
    def spark_pred(self, meta: Any, children: list[Any]) -> dict[str, Any]:
        return self._spark(meta)

    def call(self, *args: Any) -> None:
        return None

    def arith(self, *args: Any) -> None:
        return None

    def column(self, *tokens: Token | None) -> str:  # a qualifier (t.col) names the one table: dropped
        token = str(tokens[-1])
        return unquote(token) if token.startswith("`") else token

    def string(self, token: Token) -> str:
        return unquote(str(token))

    def number(self, token: Token) -> int | float:
        text = str(token)
        return float(text) if any(c in text for c in ".eE") else int(text)

    def true(self) -> bool:
        return True

    def false(self) -> bool:
        return False

    @v_args(meta=True)
    def or_expr(self, meta: Any, children: list[Any]) -> dict[str, Any]:
        return self._combine(meta, {"op": "or", "children": list(children)}, children)

    @v_args(meta=True)
    def and_expr(self, meta: Any, children: list[Any]) -> dict[str, Any]:
        return self._combine(meta, {"op": "and", "children": list(children)}, children)

    @v_args(meta=True)
    def not_(self, meta: Any, children: list[Any]) -> dict[str, Any]:
        return self._combine(meta, {"op": "not", "child": children[0]}, children)

    def compare(self, column: str, op: Token, value: Any) -> dict[str, Any]:
        o = str(op)
        if o in ("=", "=="):
            return {"op": "term", "column": column, "value": value}
        if o in ("!=", "<>"):
            return {"op": "not", "child": {"op": "term", "column": column, "value": value}}
        bound = "lower" if o.startswith(">") else "upper"
        inclusive = o.endswith("=")
        key = "lowerInclusive" if bound == "lower" else "upperInclusive"
        return {"op": "range", "column": column, bound: value, key: inclusive}

    def in_(self, column: str, negated: Any, *values: Any) -> dict[str, Any]:
        f = {"op": "in", "column": column, "values": list(values)}
        return {"op": "not", "child": f} if negated is not None else f

    def is_null(self, column: str, negated: Any) -> dict[str, Any]:
        exists = {"op": "exists", "column": column}
        return exists if negated is not None else {"op": "not", "child": exists}

    def like(self, column: str, negated: Any, pattern: Token) -> dict[str, Any]:
        f = _like_filter(column, unquote(str(pattern)))
        return {"op": "not", "child": f} if negated is not None else f

    def between(self, column: str, low: Any, high: Any) -> dict[str, Any]:
        return {"op": "range", "column": column, "lower": low, "upper": high}

    def indexquery(self, column: str, query: Token) -> dict[str, Any]:
        if column.lower() == "_indexall":
            return {"op": "query", "query": unquote(str(query)), "column": None}
        return {"op": "query", "query": unquote(str(query)), "column": column}

    def indexqueryall(self, query: Token) -> dict[str, Any]:
        return {"op": "query", "query": unquote(str(query)), "column": None}

    def textsearch(self, column: str, query: Token) -> dict[str, Any]:
        return {"op": "query", "query": unquote(str(query)), "column": column, "kind": "text"}

    def fieldmatch(self, column: str, query: Token) -> dict[str, Any]:
        return {"op": "query", "query": unquote(str(query)), "column": column, "kind": "exact"}


def _parse(parser: Lark, text: str) -> Any:
    try:
        return parser.parse(text)
    except UnexpectedInput as e:
        if e.line < 0:  # the statement ended too early
            lines = text.split("\n")
            raise IndexTablesSQLError(
                f"syntax error at line {len(lines)}, column {len(lines[-1]) + 1}: the statement ends too early"
            ) from None
        context = e.get_context(text, span=30).rstrip()
        raise IndexTablesSQLError(f"syntax error at line {e.line}, column {e.column}:\n{context}") from None


def _to_filter(tree: Any, text: str) -> dict[str, Any]:
    try:
        result: dict[str, Any] = _ToFilter(text).transform(tree)
    except VisitError as e:
        raise IndexTablesSQLError(f"{text!r}: {e.orig_exc}") from e
    return result


def parse_predicate(text: str) -> dict[str, Any]:
    """A SQL predicate (comparisons, IN, IS NULL, LIKE, BETWEEN, index operators, AND/OR/NOT) as a filter
    tree; parts over function calls are ``{"op": "spark", "sql": ...}`` nodes (see ``split_spark_part``)."""
    return _to_filter(_parse(_PREDICATE_PARSER, text), text)


def split_spark_part(where: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(filter tree for the indexed read, SQL condition Spark applies to its rows) of a WHERE tree."""
    conjuncts = _conjuncts(where)
    spark = [c["sql"] for c in conjuncts if c["op"] == "spark"]
    index = [c for c in conjuncts if c["op"] != "spark"]
    tree = None if not index else index[0] if len(index) == 1 else {"op": "and", "children": index}
    return tree, (" AND ".join(f"({s})" for s in spark) or None)


def _conjuncts(node: dict[str, Any]) -> list[dict[str, Any]]:
    if node["op"] == "and":
        return [c for child in node["children"] for c in _conjuncts(child)]
    return [node]


def _target(spark: Any, tree: Any) -> str:
    """The path a target names: a (back-)quoted path as written, a table name through the session."""
    token = tree.children[-1]
    if token.type == "TABLE_NAME":
        from connect_plugin.session import resolve_table

        return resolve_table(spark, str(token))
    return unquote(str(token))


def _duration_hours(tree: Any) -> float:
    number, unit = tree.children
    return float(number) * (24 if str(unit).lower().startswith("day") else 1)


def sql(spark: Any, text: str, options: dict[str, Any] | None = None) -> Any:
    """Run one statement: an IndexTables command, a SELECT over IndexTables tables (pushed down as
    far as it goes: see ``explain``), or anything else via ``spark.sql``."""
    plan = plan_statement(spark, text, options)
    if plan is None:
        return spark.sql(text)
    if isinstance(plan, StatementPlan):
        return plan.dataframe(spark)
    return plan()


def explain(spark: Any, text: str, options: dict[str, Any] | None = None) -> str:
    """What running ``text`` would push to each table read: columns, the filter tree (the index
    answers it first, the rest is checked on the rows), limit, a pushed aggregate and, for an
    aggregate, how the executors answered it (running it: its result is small)."""
    plan = plan_statement(spark, text, options)
    if plan is None:
        return "no IndexTables table: Spark runs the statement as it is"
    if not isinstance(plan, StatementPlan):
        return "an IndexTables command: " + " ".join(text.split())[:200]
    if plan.aggregate is not None:
        plan.dataframe(spark)  # fills in how it was answered
    return plan.explain()


def plan_statement(spark: Any, text: str, options: dict[str, Any] | None = None) -> Any:
    """A ``StatementPlan`` for a SELECT over IndexTables tables, a callable running an IndexTables
    command, or None (a statement that names no IndexTables table: Spark's own)."""
    parse_text, code = lex(text)
    options = options or {}
    if _COMMAND_START.match(code):
        tree = _parse(_PARSER, parse_text)
        return lambda: _run(spark, tree, parse_text, options)
    refs = find_table_refs(spark, parse_text, code)
    if not refs:
        if _INDEX_OPERATOR_USE.search(code):  # e.g. an unknown table name: the grammar names the problem
            return _simple_select(spark, _parse(_PARSER, parse_text), parse_text, code, options) or _no_table(text)
        return None
    if len(refs) == 1:
        try:
            tree = _PARSER.parse(parse_text)
        except UnexpectedInput:
            tree = None
        if tree is not None and tree.data == "select":
            simple = _simple_select(spark, tree, parse_text, code, options)
            if simple is not None:
                return simple
    return plan_general(spark, parse_text, code, refs, options)


def _no_table(text: str) -> Any:
    raise IndexTablesSQLError(f"{text!r} uses an index operator but names no IndexTables table")


def is_indextables_statement(text: str) -> bool:
    """An IndexTables command, or a statement that uses an index operator — outside string literals,
    comments and back-quoted names (``SELECT 'textsearch' AS x`` is Spark's)."""
    code = lex(text)[1]
    return bool(_COMMAND_START.match(code) or _INDEX_OPERATOR_USE.search(code))


_OPTION_RULES = ("target_size", "max_", "sort_by", "older_than", "log_retention", "dry_run")


def _where(tree: Any, text: str) -> dict[str, Any] | None:
    """The WHERE of a maintenance command: partition predicates only, no function calls."""
    for child in tree.children:
        if (
            hasattr(child, "data")
            and child.data not in ("target", "merge_opt", "purge_opt", "dry")
            and not str(child.data).startswith(_OPTION_RULES)
        ):
            result = _to_filter(child, text)
            if _has(result, "spark"):
                raise IndexTablesSQLError(f"{text!r}: function calls are not supported in the WHERE of {tree.data}")
            return result
    return None


def _run(spark: Any, tree: Any, text: str, options: dict[str, Any]) -> Any:
    from connect_plugin.plan import command_frame
    from connect_plugin.table import IndexTable, _run_once

    kind = tree.data
    if kind == "describe_cache":
        return _run_once(command_frame(spark, C.DescribeCache(), options))
    if kind == "flush_cache":
        return _run_once(command_frame(spark, C.FlushCache(), options))
    if kind == "select":
        plan = _simple_select(spark, tree, text, lex(text)[1], options)
        if plan is None:
            raise IndexTablesSQLError(f"unsupported statement: {text!r}")
        return plan.dataframe(spark)
    target = next(c for c in tree.children if hasattr(c, "data") and c.data == "target")
    table = IndexTable.for_path(spark, _target(spark, target), options)
    if kind == "describe_state":
        return table.describe_state()
    if kind == "describe_log":
        return table.history()
    if kind == "checkpoint":
        return table.checkpoint()
    if kind == "truncate":
        return table.truncate_time_travel(dry_run=any(hasattr(c, "data") and c.data == "dry" for c in tree.children))
    if kind == "drop":
        where = _where(tree, text)
        assert where is not None
        return table.drop_partitions(where)
    if kind == "prewarm":
        return table.prewarm(_where(tree, text))
    if kind == "purge":
        opts = {c.data: c for c in tree.children if hasattr(c, "data")}
        older = _duration_hours(opts["older_than"].children[0]) if "older_than" in opts else 168.0
        log = _duration_hours(opts["log_retention"].children[0]) if "log_retention" in opts else None
        return table.purge(older_than_hours=older, tx_log_retention_hours=log, dry_run="dry_run" in opts)
    if kind == "merge":
        opts = {c.data: c for c in tree.children if hasattr(c, "data")}
        return table.merge_splits(
            where=_where(tree, text),
            target_size=str(opts["target_size"].children[0]).replace(" ", "") if "target_size" in opts else "5G",
            max_dest_splits=int(opts["max_dest"].children[0]) if "max_dest" in opts else None,
            max_source_splits_per_merge=int(opts["max_sources"].children[0]) if "max_sources" in opts else None,
            sort_key=_name(str(opts["sort_by"].children[0])) if "sort_by" in opts else None,
        )
    raise IndexTablesSQLError(f"unsupported statement: {text!r}")


def _simple_select(spark: Any, tree: Any, text: str, code: str, options: dict[str, Any]) -> StatementPlan | None:
    """``SELECT ... FROM <one table> [alias] [WHERE ...] [GROUP BY / ORDER BY / LIMIT]``: the WHERE
    travels as the read's filter tree (top-level AND parts over function calls stay with Spark),
    a LIMIT over plain columns stops each task, and count/sum/avg/min/max with GROUP BY on
    columns become a pushed aggregate. None where the shape does not allow it (the general plan
    then runs the statement)."""
    projection, target, alias, where_tree, tail = tree.children
    try:
        where = _to_filter(where_tree, text) if where_tree is not None else None
    except IndexTablesSQLError:
        return None  # function calls under OR with index operators: match columns handle it
    index_tree, spark_condition = split_spark_part(where) if where is not None else (None, None)
    path = _target(spark, target)
    if alias is None and target.children[-1].type == "TABLE_NAME":  # `name.col` keeps resolving
        alias = str(target.children[-1]).split(".")[-1]
    opts = options_tuple(options)
    filter_json = None if index_tree is None else json.dumps(index_tree)
    tail_text = None if tail is None else str(tail)
    if spark_condition is None:
        shape = aggregate_shape(str(projection), code[projection.start_pos : projection.end_pos], tail_text)
        if shape is not None:
            agg_plan, outputs, order, limit = shape
            pushed = AggregateRead(path, AggregatePlan(agg_plan.group_by, agg_plan.measures, filter_json), outputs,
                                   order, limit, opts)  # fmt: skip
            return StatementPlan(None, aggregate=pushed, fallback=_select_over_view(
                path, str(projection), alias, filter_json, None, tail_text, text, code, opts))  # fmt: skip
    if where_tree is not None:  # the pushed WHERE needs no column in Spark: only what Spark evaluates
        start, end = where_tree.meta.start_pos, where_tree.meta.end_pos
        code = code[:start] + " " * (end - start) + code[end:] + " " + lex(spark_condition or "")[1]
        text = text[:start] + " " * (end - start) + text[end:] + " " + (spark_condition or "")
    return _select_over_view(path, str(projection), alias, filter_json, spark_condition, tail_text, text, code, opts)


_LIMIT_ONLY = re.compile(r"^limit\s+(\d+)\s*$", re.IGNORECASE)
_PLAIN_PROJECTION = re.compile(r"^\s*(\*|[\w`.]+(\s+(as\s+)?[\w`]+)?)(\s*,\s*(\*|[\w`.]+(\s+(as\s+)?[\w`]+)?))*\s*$",
                               re.IGNORECASE)  # fmt: skip


def _select_over_view(
    path: str, projection: str, alias: Any, filter_json: str | None, spark_condition: str | None,
    tail: str | None, text: str, code: str, opts: tuple[tuple[str, str], ...],
) -> StatementPlan:  # fmt: skip
    limit = None
    m = _LIMIT_ONLY.match(tail) if tail is not None and spark_condition is None else None
    if m is not None and _PLAIN_PROJECTION.match(projection) and not re.match(r"\s*distinct\b", projection, re.I):
        limit = int(m.group(1))
    view = view_name()
    read = TableRead(path, required=names_in(text, code), filter=filter_json, limit=limit, options=opts)
    statement = f"SELECT {projection} FROM {view}"
    if alias is not None:
        statement += f" AS {alias}"
    if spark_condition is not None:
        statement += f" WHERE {spark_condition}"
    if tail is not None:
        statement += f" {tail}"
    return StatementPlan(statement, reads=[(view, read)])


# --- the aggregate shape: SELECT g..., f(x)... GROUP BY g... [ORDER BY ...] [LIMIT n] --------------

_NAME = r"(?:[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`)"
_MEASURE_ITEM = re.compile(
    rf"^\s*(count|sum|avg|min|max)\s*\(\s*(\*|1|{_NAME})\s*\)(?:\s+(?:as\s+)?({_NAME}))?\s*$", re.IGNORECASE
)
_COLUMN_ITEM = re.compile(rf"^\s*(?:{_NAME}\s*\.\s*)?({_NAME})(?:\s+(?:as\s+)?({_NAME}))?\s*$", re.IGNORECASE)
_AGG_TAIL = re.compile(
    r"^(?:group\s+by\s+(?P<group>.+?))?(?:\s*\border\s+by\s+(?P<order>.+?))?(?:\s*\blimit\s+(?P<limit>\d+))?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_ORDER_ITEM = re.compile(r"^\s*(.+?)(?:\s+(asc|desc))?(?:\s+nulls\s+(first|last))?\s*$", re.IGNORECASE | re.DOTALL)
_KEYWORDS = frozenset({"from", "where", "as", "group", "order", "limit", "having", "distinct"})


def _name(token: str) -> str:
    return unquote(token) if token.startswith("`") else token


def _split_commas(text: str, code: str) -> list[str]:
    """``text`` cut at the commas outside parentheses (``code``: the same text, literals blanked)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(code):
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def aggregate_shape(projection: str, projection_code: str, tail: str | None) -> Any:
    """(AggregatePlan without filter, output columns, order keys, limit) of a pushable aggregate, or None."""
    tail_match = _AGG_TAIL.match(tail or "")
    if tail_match is None or re.match(r"\s*distinct\b", projection, re.IGNORECASE):
        return None
    items = _split_commas(projection, projection_code)
    group_by: list[str] = []
    for g in _split_commas(tail_match["group"], tail_match["group"]) if tail_match["group"] else []:
        g = g.strip()
        if g.isdigit():
            if not 1 <= int(g) <= len(items) or (m := _COLUMN_ITEM.match(items[int(g) - 1])) is None:
                return None
            g = m.group(1)
        if not re.fullmatch(_NAME, g):
            return None
        group_by.append(_name(g))
    measures: list[Measure] = []
    outputs: list[OutputColumn] = []
    expressions: list[str] = []
    lowered = [g.lower() for g in group_by]
    for item in items:
        expressions.append(re.sub(r"\s+", "", item.split(" as ")[0].split(" AS ")[0]).lower())
        if (m := _MEASURE_ITEM.match(item)) is not None:
            func, arg, alias = m.group(1).lower(), m.group(2), m.group(3)
            column = None if arg in ("*", "1") else _name(arg)
            if column is None and func != "count":
                return None
            measures.append(Measure(func, column))
            default = "count(1)" if column is None else f"{func}({column})"
            outputs.append(OutputColumn(_name(alias) if alias else default, measure=len(measures) - 1))
        elif (m := _COLUMN_ITEM.match(item)) is not None and _name(m.group(1)).lower() in lowered:
            if m.group(1).lower() in _KEYWORDS or (m.group(2) or "").lower() in _KEYWORDS:
                return None
            column, alias = _name(m.group(1)), m.group(2)
            outputs.append(OutputColumn(_name(alias) if alias else column, group=lowered.index(column.lower())))
        else:
            return None
    if not measures:
        return None
    order = _order_keys(tail_match["order"], outputs, expressions)
    if order is None:
        return None
    limit = int(tail_match["limit"]) if tail_match["limit"] else None
    return AggregatePlan(tuple(group_by), tuple(measures)), tuple(outputs), order, limit


def parse_measure(text: str) -> Measure:
    """``count(*)``, ``count(col)``, ``sum(col)``, ``avg(col)``, ``min(col)`` or ``max(col)`` as a Measure."""
    m = _MEASURE_ITEM.match(text)
    if m is None or m.group(3) is not None or (m.group(2) in ("*", "1") and m.group(1).lower() != "count"):
        raise IndexTablesSQLError(f"measure {text!r}: expected count(*) or count/sum/avg/min/max(<column>)")
    return Measure(m.group(1).lower(), None if m.group(2) in ("*", "1") else _name(m.group(2)))


def _order_keys(text: str | None, outputs: list[OutputColumn], expressions: list[str]) -> tuple[OrderKey, ...] | None:
    if not text:
        return ()
    keys = []
    names = [o.name.lower() for o in outputs]
    for item in _split_commas(text, text):
        m = _ORDER_ITEM.match(item)
        if m is None:
            return None
        expr = m.group(1).strip()
        plain = _name(expr).lower() if re.fullmatch(_NAME, expr) else None
        compact = re.sub(r"\s+", "", expr).lower()
        if expr.isdigit() and 1 <= int(expr) <= len(outputs):
            index = int(expr) - 1
        elif plain is not None and plain in names:
            index = names.index(plain)
        elif compact in expressions:
            index = expressions.index(compact)
        else:
            return None
        descending = (m.group(2) or "").lower() == "desc"
        nulls = None if m.group(3) is None else m.group(3).lower() == "first"
        keys.append(OrderKey(index, descending, nulls))
    return tuple(keys)
