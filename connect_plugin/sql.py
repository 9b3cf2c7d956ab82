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

import re
import uuid
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, VisitError

GRAMMAR = r"""
?start: command

?command: merge | purge | checkpoint | truncate | drop | prewarm
        | describe_state | describe_log | describe_cache | flush_cache | select

merge: _MERGE _SPLITS target [_WHERE predicate] merge_opt*
merge_opt: _TARGET _SIZE SIZE                         -> target_size
         | _MAX _DEST _SPLITS INT                     -> max_dest
         | _MAX _SOURCE _SPLITS _PER _MERGE INT       -> max_sources
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
column: NAME | BACKQUOTED
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
# What starts a comment, a string literal (r'..' raw) or a back-quoted name, as Spark's lexer reads them.
_LEXEME_START = re.compile(r"--|/\*|['\"`]|(?<![\w`])[rR](?=['\"])")
_QUOTED = {
    "'": re.compile(r"'(?:[^'\\]|\\.|'')*'", re.DOTALL),
    '"': re.compile(r'"(?:[^"\\]|\\.|"")*"', re.DOTALL),
    "`": re.compile(r"`(?:[^`]|``)*`"),
}


class IndexTablesSQLError(ValueError):
    """A statement that does not parse, with the position that stopped the parser."""


def _blank(text: str) -> str:
    """``text`` with every character but line breaks replaced by a space (positions stay put)."""
    return re.sub(r"[^\n]", " ", text)


def _lex(text: str) -> tuple[str, str]:
    """(``text`` with its comments blanked, ``text`` with comments and the insides of string literals
    and back-quoted names blanked too), read as Spark's lexer reads them: ``--`` line comments,
    nested ``/* */`` comments, '..' and ".." strings with backslash escapes and doubled quotes,
    r'..' raw strings, `..` names with doubled back-quotes. Both keep every position of ``text``."""
    parse, code = [], []
    i = 0
    while (m := _LEXEME_START.search(text, i)) is not None:
        start = m.start()
        parse.append(text[i:start])
        code.append(text[i:start])
        end = _lexeme_end(text, start)
        lexeme = text[start:end]
        if lexeme.startswith(("--", "/*")):
            parse.append(_blank(lexeme))
            code.append(_blank(lexeme))
        else:
            opening = 2 if lexeme[0] in "rR" else 1
            parse.append(lexeme)
            code.append(lexeme[:opening] + _blank(lexeme[opening:-1]) + lexeme[-1:])
        i = end
    parse.append(text[i:])
    code.append(text[i:])
    return "".join(parse), "".join(code)


def _lexeme_end(text: str, start: int) -> int:
    """Where the comment, string or quoted name at ``start`` ends (the end of ``text`` if it does not)."""
    if text.startswith("--", start):
        end = text.find("\n", start)
        return len(text) if end < 0 else end
    if text.startswith("/*", start):
        depth, i = 0, start
        while (m := re.compile(r"/\*|\*/").search(text, i)) is not None:
            depth += 1 if m.group() == "/*" else -1
            i = m.end()
            if depth == 0:
                return i
        return len(text)
    if text[start] in "rR":  # raw string: no escapes, ends at the next quote of its kind
        end = text.find(text[start + 1], start + 2)
        return len(text) if end < 0 else end + 1
    m = _QUOTED[text[start]].match(text, start)
    return m.end() if m else len(text)


_SPARK_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}
_ESCAPES = {  # per quote: a backslash escape, or the doubled quote (one pass, left to right, as Spark reads)
    q: re.compile(r"\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-3][0-7]{2})|(.))|(" + q + q + ")", re.DOTALL)
    for q in "'\""
}


def _unquote(token: str) -> str:
    """The value of a quoted token by Spark's rules: `a``b` is a name with a back-quote; r'..' is
    raw; in '..' and "..", a doubled quote is the quote and backslash escapes are Spark's
    (\\n, \\t, \\uXXXX, octal \\101; \\% and \\_ keep their backslash; any other char stands for itself)."""
    if token.startswith("`"):
        return token[1:-1].replace("``", "`")
    if token[0] in "rR":
        return token[2:-1]
    return _ESCAPES[token[0]].sub(_unescape, token[1:-1])


def _unescape(m: re.Match[str]) -> str:
    unicode4, unicode8, octal, char, doubled = m.groups()
    if doubled:
        return doubled[0]
    if unicode4 or unicode8:
        return chr(int(unicode4 or unicode8, 16))
    if octal:
        return chr(int(octal, 8))
    return _SPARK_ESCAPES.get(char, char)


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

    def column(self, token: Token) -> str:
        return _unquote(str(token)) if str(token).startswith("`") else str(token)

    def string(self, token: Token) -> str:
        return _unquote(str(token))

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
        f = _like_filter(column, _unquote(str(pattern)))
        return {"op": "not", "child": f} if negated is not None else f

    def between(self, column: str, low: Any, high: Any) -> dict[str, Any]:
        return {"op": "range", "column": column, "lower": low, "upper": high}

    def indexquery(self, column: str, query: Token) -> dict[str, Any]:
        if column.lower() == "_indexall":
            return {"op": "query", "query": _unquote(str(query)), "column": None}
        return {"op": "query", "query": _unquote(str(query)), "column": column}

    def indexqueryall(self, query: Token) -> dict[str, Any]:
        return {"op": "query", "query": _unquote(str(query)), "column": None}

    def textsearch(self, column: str, query: Token) -> dict[str, Any]:
        return {"op": "query", "query": _unquote(str(query)), "column": column, "kind": "text"}

    def fieldmatch(self, column: str, query: Token) -> dict[str, Any]:
        return {"op": "query", "query": _unquote(str(query)), "column": column, "kind": "exact"}


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
        from connect_plugin import resolve_table

        return resolve_table(spark, str(token))
    return _unquote(str(token))


def _duration_hours(tree: Any) -> float:
    number, unit = tree.children
    return float(number) * (24 if str(unit).lower().startswith("day") else 1)


def sql(spark: Any, text: str, options: dict[str, Any] | None = None) -> Any:
    """Run one statement: an IndexTables command, an indexed SELECT, or anything else via ``spark.sql``."""
    if not is_indextables_statement(text):
        return spark.sql(text)
    parse_text = _lex(text)[0]  # the grammar knows no comments: they are blanked
    return _run(spark, _parse(_PARSER, parse_text), parse_text, options or {})


def is_indextables_statement(text: str) -> bool:
    """An IndexTables command, or a statement that uses an index operator — outside string literals,
    comments and back-quoted names (``SELECT 'textsearch' AS x`` is Spark's)."""
    code = _lex(text)[1]
    return bool(_COMMAND_START.match(code) or _INDEX_OPERATOR_USE.search(code))


def _where(tree: Any, text: str) -> dict[str, Any] | None:
    """The WHERE of a maintenance command: partition predicates only, no function calls."""
    for child in tree.children:
        if (
            hasattr(child, "data")
            and child.data not in ("target", "merge_opt", "purge_opt", "dry")
            and not str(child.data).startswith(("target_size", "max_", "older_than", "log_retention", "dry_run"))
        ):
            result = _to_filter(child, text)
            if _has(result, "spark"):
                raise IndexTablesSQLError(f"{text!r}: function calls are not supported in the WHERE of {tree.data}")
            return result
    return None


def _run(spark: Any, tree: Any, text: str, options: dict[str, Any]) -> Any:
    from connect_plugin.table import IndexTable, _cache_command

    kind = tree.data
    if kind == "describe_cache":
        return _cache_command(spark, "describe_cache", 1, options)
    if kind == "flush_cache":
        return _cache_command(spark, "flush_cache", 1, options)
    if kind == "select":
        return _select(spark, tree, text, options)
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
        )
    raise IndexTablesSQLError(f"unsupported statement: {text!r}")


def _select(spark: Any, tree: Any, text: str, options: dict[str, Any]) -> Any:
    import connect_plugin

    projection, target, alias, where_tree, tail = tree.children
    where, spark_condition = split_spark_part(_to_filter(where_tree, text)) if where_tree is not None else (None, None)
    df = connect_plugin.read(spark, _target(spark, target), filter=where, options=options)
    view = f"indextables_{uuid.uuid4().hex[:12]}"
    df.createOrReplaceTempView(view)
    statement = f"SELECT {projection} FROM {view}"
    if alias is not None:
        statement += f" AS {alias}"
    if spark_condition is not None:
        statement += f" WHERE {spark_condition}"
    if tail is not None:
        statement += f" {tail}"
    return spark.sql(statement)
