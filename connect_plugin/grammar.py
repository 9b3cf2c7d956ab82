"""The IndexTables SQL grammar and what its parts mean, for the client (no Spark here).

``GRAMMAR`` (lark) covers the IndexTables commands, the single-table SELECT and SQL predicates;
``parse_predicate`` turns a predicate (comparisons, IN, IS NULL, LIKE, BETWEEN, the index operators
``indexquery`` / ``indexqueryall`` / ``textsearch`` / ``fieldmatch``, ``* indexquery '...'`` over every
field, AND/OR/NOT) into contract filter
nodes (``indextables_contract.filters``), keeping parts over function calls or arithmetic as
``SparkCondition`` text for Spark; ``parse_measure`` reads ``count(*)``/``sum(col)``... Syntax errors
(``IndexTablesSQLError``) name the line and column. ``connect_plugin.sql`` plans statements with it.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from dataclasses import dataclass
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, VisitError

from connect_plugin.lexer import lex, unquote
from indextables_contract import filters as F
from indextables_contract.aggregate import Measure
from indextables_contract.errors import IndexTablesSQLError

# Every IndexTables command, one rule each. ``?command`` (their alternation) and the keyword terminals
# they and PART_RULES use (``_MERGE: /merge\b/i``) are derived from the rules (``grammar_of``), and so are
# ``COMMAND_HEADS`` and ``COMMAND_START``: a new command is its rule here and nothing else in this file.
# A rule named after a contract command builds it (``connect_plugin.statements``) with no code of its own.
COMMAND_RULES = r"""
merge: _MERGE _SPLITS target [_WHERE predicate] merge_opt*
purge: _PURGE (_INDEXTABLE | _INDEXTABLES) target purge_opt*
checkpoint: (_CHECKPOINT | _COMPACT) _INDEXTABLES target
truncate: _TRUNCATE _INDEXTABLES _TIME _TRAVEL target [dry]
drop: _DROP _INDEXTABLES _PARTITIONS _FROM target _WHERE predicate
prewarm: _PREWARM _INDEXTABLES _CACHE target prewarm_opt* [_WHERE predicate] [_ASYNC _MODE]
describe_state: _DESCRIBE _INDEXTABLES _STATE target
describe_transaction_log: _DESCRIBE _INDEXTABLES _TRANSACTION _LOG target [include_all]
describe_cache: _DESCRIBE _INDEXTABLES _DISK _CACHE
flush_cache: _FLUSH _INDEXTABLES _DISK _CACHE
describe_storage: _DESCRIBE _INDEXTABLES _STORAGE _STATS
describe_environment: _DESCRIBE _INDEXTABLES _ENVIRONMENT
describe_merge_jobs: _DESCRIBE _INDEXTABLES _MERGE _JOBS
describe_components: _DESCRIBE _INDEXTABLES _COMPONENT _SIZES target [_WHERE predicate]
describe_prewarm_jobs: _DESCRIBE _INDEXTABLES _PREWARM _JOBS
wait_prewarm: _WAIT _FOR _INDEXTABLES _PREWARM _JOBS [target] [job_id] [timeout]
flush_searcher: _FLUSH _INDEXTABLES _SEARCHER _CACHE
invalidate_log: _INVALIDATE _INDEXTABLES _TRANSACTION _LOG _CACHE [_FOR target]
repair: _REPAIR _INDEXFILES _TRANSACTION _LOG STRING _AT _LOCATION STRING
build_companion: _BUILD _INDEXTABLES _COMPANION _FOR NAME STRING companion_opt* _AT _LOCATION STRING [dry] [streaming]
enable_profiler: _ENABLE _INDEXTABLES _PROFILER
disable_profiler: _DISABLE _INDEXTABLES _PROFILER
describe_profiler: _DESCRIBE _INDEXTABLES _PROFILER [profiler_cache]
reset_profiler: _RESET _INDEXTABLES _PROFILER [profiler_cache]
describe_skipping: _DESCRIBE _INDEXTABLES _DATA _SKIPPING _STATS
flush_skipping: (_FLUSH | _RESET) _INDEXTABLES _DATA _SKIPPING _STATS
invalidate_skipping: _INVALIDATE _INDEXTABLES _DATA _SKIPPING _CACHE
history: _DESCRIBE _INDEXTABLES _HISTORY target [limit]
"""
# What the commands and SELECT are made of: their options, the target, predicates, and the terminals that
# are not plain keywords.
PART_RULES = r"""
merge_opt: _TARGET _SIZE SIZE                         -> target_size
         | _MAX _DEST _SPLITS INT                     -> max_dest
         | _MAX _SOURCE _SPLITS _PER _MERGE INT       -> max_sources
         | _SORT _BY (NAME | BACKQUOTED)              -> sort_by
purge_opt: _OLDER _THAN duration                       -> older_than
         | _TRANSACTION _LOG _RETENTION duration       -> log_retention
         | _DRY _RUN                                   -> dry_run
duration: NUMBER UNIT
dry: _DRY _RUN
prewarm_opt: _FOR _SEGMENTS "(" NAME ("," NAME)* ")"             -> segments
           | _ON _FIELDS "(" field_name ("," field_name)* ")"    -> fields
           | _WITH _PERWORKER _PARALLELISM _OF INT              -> parallelism
field_name: NAME | BACKQUOTED
limit: _LIMIT INT
include_all: _INCLUDE _ALL
job_id: _JOB STRING
timeout: _TIMEOUT INT
companion_opt: _SCHEMA _SOURCE STRING                                   -> schema_source
             | _CATALOG STRING [_TYPE STRING]                           -> catalog
             | _WAREHOUSE STRING                                        -> warehouse
             | _INCLUDE _COLUMNS "(" STRING ("," STRING)* ")"           -> include_columns
             | _EXCLUDE _COLUMNS "(" STRING ("," STRING)* ")"           -> exclude_columns
             | _INDEXING _MODES "(" mode_item ("," mode_item)* ")"      -> indexing_modes
             | _FASTFIELDS _MODE NAME                                   -> fastfields_mode
             | _HASHED _FASTFIELDS NAME "(" STRING ("," STRING)* ")"    -> hashed_fastfields
             | _TARGET _INPUT _SIZE (SIZE | STRING)                     -> target_input_size
             | _WRITER _HEAP _SIZE (SIZE | STRING)                      -> writer_heap_size
             | _FROM _VERSION INT                                       -> from_version
             | _FROM _SNAPSHOT INT                                      -> from_snapshot
             | _WHERE predicate                                         -> companion_where
             | _INVALIDATE _ALL _PARTITIONS                             -> invalidate_all
             | _TABLE _ROOTS "(" STRING "=" STRING ("," STRING "=" STRING)* ")" -> table_roots
mode_item: STRING ":" STRING
streaming: _WITH _STREAMING _POLL _INTERVAL INT NAME
profiler_cache: _CACHE

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
     | "*" _INDEXQUERY STRING                         -> indexqueryall
     | "*" _TEXTSEARCH STRING                         -> textsearch_all
     | "*" _FIELDMATCH STRING                         -> fieldmatch_all
     | _INDEXQUERYALL "(" STRING ")"                  -> indexqueryall
     | column _TEXTSEARCH STRING                      -> textsearch
     | column _FIELDMATCH STRING                      -> fieldmatch
     | column _FUZZYQUERY STRING                      -> fuzzyquery
     | "*" _FUZZYQUERY STRING                         -> fuzzyquery_all
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
column: QUALIFIER* (NAME | BACKQUOTED)
QUALIFIER: /([a-z_][a-z0-9_]*|`([^`]|``)+`)\s*\.\s*(?=[a-z_`])/i
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
TABLE_NAME.-2: /(?!(where|as|indextables|tantivy4spark)\b|(job|timeout)\s+['"\d])[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*/i
TAIL: /(group|order|limit|having)\b.*/is
NAME.-1: /[a-z_][a-z0-9_]*/i
FUNC: /(?!(indexqueryall|not|in|and|or)\b)[a-z_][a-z0-9_.]*(?=\s*\()/i
BACKQUOTED: /`([^`]|``)+`/
STRING: /[rR]'[^']*'|[rR]"[^"]*"|'([^'\\]|\\.|'')*'|"([^"\\]|\\.|"")*"/
NUMBER: /-?\d+(\.\d+)?([eE][-+]?\d+)?/
INT: /\d+/

_INDEXTABLES: /(indextables|tantivy4spark)\b/i
NEG: /not\b/i

%import common.WS
%ignore WS
"""


def grammar_of(commands: str, parts: str) -> str:
    """The lark grammar: ``?start``, ``?command`` (every rule of ``commands`` and ``select``), the
    rules, and a keyword terminal for each ``_WORD`` the rules use that ``parts`` does not define.

    Example: ``grammar_of(COMMAND_RULES, PART_RULES) == GRAMMAR``.
    """
    names = re.findall(r"^([a-z_]+):", commands, re.MULTILINE)
    defined = set(re.findall(r"^(_[A-Z][A-Z0-9]*)\s*:", parts, re.MULTILINE))
    used = set(re.findall(r"(?<!\w)(_[A-Z][A-Z0-9]*)\b", commands + parts)) - defined
    keywords = "\n".join(f"{k}: /{k[1:].lower()}\\b/i" for k in sorted(used))
    return "\n".join(("?start: command", f"?command: {' | '.join((*names, 'select'))}", commands, parts, keywords))


GRAMMAR = grammar_of(COMMAND_RULES, PART_RULES)
STATEMENT_PARSER = Lark(GRAMMAR, start="start", parser="earley", ambiguity="resolve", propagate_positions=True)
PREDICATE_PARSER = Lark(GRAMMAR, start="predicate", parser="earley", ambiguity="resolve", propagate_positions=True)

_KEYWORD = r"(?:indextables|tantivy4spark)"
# Documented IndexTables4Spark statements that have no counterpart here: (pattern, why), checked
# before the grammar so that each fails with its reason rather than a syntax error.
UNSUPPORTED = (
    (
        re.compile(rf"^\s*(set|unset)\s+{_KEYWORD}\s+table\s+root\b|^\s*describe\s+{_KEYWORD}\s+table\s+roots\b", re.I),
        "table roots (relocating a companion's source) are not built by this project yet (issue 35)",
    ),
)


def unsupported_reason(code: str) -> str | None:
    """Why a documented IndexTables4Spark statement does not run here (None: it does, or it is not one)."""
    return next((why for pattern, why in UNSUPPORTED if pattern.match(code)), None)


def command_heads(parser: Lark) -> tuple[tuple[str, ...], ...]:
    """The keywords every IndexTables command of ``parser`` starts with, from the grammar itself
    (``MERGE SPLITS``, ``DESCRIBE INDEXTABLES STATE``, ...): each command rule's leading keyword terminals.

    Example: ``("MERGE", "SPLITS") in command_heads(STATEMENT_PARSER)`` is True.
    """
    commands = {sym.name for rule in parser.rules if rule.origin.name == "command" for sym in rule.expansion}
    commands.discard("select")
    heads: dict[tuple[str, ...], None] = {}
    for rule in parser.rules:
        if rule.origin.name not in commands:
            continue
        words = []
        for sym in rule.expansion:
            if not (sym.name.startswith("_") and not sym.name.startswith("__")):
                break
            words.append(sym.name[1:])
        heads[tuple(words)] = None
    # an optional keyword after the head (INVALIDATE ... CACHE [FOR t]) is not a command of its own
    return tuple(h for h in heads if not any(len(o) < len(h) and h[: len(o)] == o for o in heads))


COMMAND_HEADS = command_heads(STATEMENT_PARSER)


def command_start(heads: tuple[tuple[str, ...], ...]) -> re.Pattern[str]:
    """What a statement that is one of ours starts with (``heads``: ``command_heads``): a head's
    keywords up to its ``INDEXTABLES`` (or ``INDEXTABLE``), or its first two where it has none
    (``MERGE SPLITS``, ``REPAIR INDEXFILES``); the grammar then says what is wrong with the rest."""
    starts: dict[str, None] = {}
    for head in heads:
        cut = next((i + 1 for i, w in enumerate(head) if w in ("INDEXTABLES", "INDEXTABLE")), 2)
        words = [_KEYWORD if w == "INDEXTABLES" else w.lower() for w in head[:cut]]
        starts[r"\s+".join(words)] = None
    return re.compile(rf"^\s*({'|'.join(starts)})\b", re.IGNORECASE)


COMMAND_START = command_start(COMMAND_HEADS)
_HEAD_WORD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)")


def _leading_words(code: str, most: int) -> list[tuple[str, int]]:
    """Up to ``most`` words that ``code`` starts with, upper-cased, with their offsets."""
    words: list[tuple[str, int]] = []
    at = 0
    while len(words) < most:
        m = _HEAD_WORD.match(code, at)
        if m is None:
            break
        word = m.group(1).upper()
        words.append(("INDEXTABLES" if word == "TANTIVY4SPARK" else word, m.start(1)))
        at = m.end()
    return words


def command_hint(code: str) -> tuple[int, str] | None:
    """For a statement (``code``: comments and literals blanked) that starts like an IndexTables command
    with a keyword misspelt or missing (``MERGE SPLIT``, ``DESCRIBE INDEXTABLES STAT``): (the offset of
    the first wrong word, or where the keywords stop, and what is wrong, naming the closest command or
    every command the keywords given can go on to); None if it starts with a command's keywords
    exactly, or is not close to one (``MERGE INTO``, ``DROP TABLE``: Spark's).

    Example: ``command_hint("MERGE SPLIT '/t'")`` is
    ``(6, "'SPLIT' is not a keyword of an IndexTables command here (did you mean MERGE SPLITS?)")``.
    """
    import difflib

    words = _leading_words(code, max(len(h) for h in COMMAND_HEADS))
    said = tuple(w for w, _ in words)
    if not said or any(said[: len(h)] == h for h in COMMAND_HEADS):
        return None
    short = [h for h in COMMAND_HEADS if len(said) >= 2 and len(said) < len(h) and said == h[: len(said)]]
    if short:  # a command cut short (DESCRIBE INDEXTABLES): every command it can go on to
        given = " ".join(code[words[-1][1] :].split(None, 1)[:1])
        at = words[-1][1] + len(given)
        if len(short) == 1:
            return at, f"a keyword is missing after {' '.join(said)} (did you mean {' '.join(short[0])}?)"
        rests = ", ".join(" ".join(h[len(said) :]) for h in short)
        return at, f"a keyword is missing after {' '.join(said)} (one of {rests})"
    best: tuple[float, tuple[str, ...]] | None = None
    for head in COMMAND_HEADS:
        if len(said) < len(head):
            continue
        # every keyword close (SPLIT for SPLITS), not only the whole: MERGE INTO is not MERGE SPLITS
        ratios = [difflib.SequenceMatcher(None, w, k).ratio() for w, k in zip(said, head[: len(said)], strict=False)]
        if min(ratios) >= 0.75 and (best is None or sum(ratios) / len(ratios) > best[0]):
            best = (sum(ratios) / len(ratios), head)
    if best is None:
        return None
    head = best[1]
    wrong = next(i for i, k in enumerate(head) if said[i] != k)
    at = words[wrong][1]
    word = code[at:].split(None, 1)[0]
    return at, f"{word!r} is not a keyword of an IndexTables command here (did you mean {' '.join(head)}?)"


# A use of an index operator (in the text with comments, literals and quoted names blanked): an infix
# operator before a string literal, or indexqueryall( — not the same words as names or inside strings.
INDEX_OPERATOR_USE = re.compile(
    r"(?<![\w`])(?:(?:indexquery|textsearch|fieldmatch|fuzzyquery)\s*(?:[rR](?=['\"]))?['\"]|indexqueryall\s*\()",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class SparkCondition:
    """A predicate the index cannot answer (function calls, arithmetic): its SQL text, which Spark
    evaluates on the rows read. Client-side only: it never travels in a filter tree."""

    sql: str


@dataclass(frozen=True)
class PartlyIndexed:
    """An AND of index filters and ``SparkCondition``s, split by ``split_spark_part``."""

    children: tuple[Predicate, ...]


Predicate = F.Filter | SparkCondition | PartlyIndexed


def _like_filter(column: str, pattern: str) -> F.Filter:
    """SQL LIKE as a filter: 'abc%' -> prefix, '%abc%' -> contains, otherwise an anchored regex."""
    if "_" not in pattern and "\\" not in pattern:
        inner = pattern.strip("%")
        if "%" not in inner:
            if pattern == inner:
                return F.Term(column, inner)
            if pattern == inner + "%":
                return F.Prefix(column, inner)
            if pattern == "%" + inner + "%":
                return F.Contains(column, inner)
    parts = (".*" if c == "%" else "." if c == "_" else F.regex_escape(c) for c in pattern)
    return F.Regex(column, "(?s)" + "".join(parts))


def contains_node(node: Predicate, kind: type) -> bool:
    """Whether ``node`` or a node under it is a ``kind``."""
    if isinstance(node, kind):
        return True
    if isinstance(node, (F.And, F.Or, PartlyIndexed)):
        return any(contains_node(c, kind) for c in node.children)
    return isinstance(node, F.Not) and contains_node(node.child, kind)


@v_args(inline=True)
class _ToFilter(Transformer[Token, Any]):
    """Predicate parse tree -> the filter tree of the ``filter`` read option.

    A predicate over function calls or arithmetic becomes a ``SparkCondition`` (its text), and so does any
    AND/OR/NOT whose parts have no index operator: Spark evaluates those on the rows read.
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def _spark(self, meta: Any) -> SparkCondition:
        return SparkCondition(self.text[meta.start_pos : meta.end_pos])

    def _combine(self, meta: Any, op: str, children: list[Predicate]) -> Predicate:
        if not any(contains_node(c, SparkCondition) for c in children):
            filters = tuple(c for c in children if isinstance(c, F.FILTER_TYPES))
            return F.And(filters) if op == "and" else F.Or(filters) if op == "or" else F.Not(filters[0])
        if not any(contains_node(c, F.QueryString) for c in children):
            return self._spark(meta)
        if op != "and":
            raise IndexTablesSQLError(
                f"at line {meta.line}, column {meta.column}: a predicate with function calls can be combined "
                f"with indexquery/textsearch/fieldmatch only through AND at the top of the WHERE clause"
            )
        return PartlyIndexed(tuple(children))

    @v_args(meta=True)
    def spark_pred(self, meta: Any, children: list[Any]) -> SparkCondition:
        return self._spark(meta)

    def call(self, *args: Any) -> None:
        return None

    def arith(self, *args: Any) -> None:
        return None

    def column(self, *tokens: Token | None) -> str:
        """``user.name`` as written, qualifiers included: the executors resolve it against the table's
        schema (a struct field or map key, or a leading table alias: ``t.id`` is ``id``)."""
        parts = [str(t).strip().rstrip(".").strip() for t in tokens if t is not None]
        return ".".join(unquote(p) if p.startswith("`") else p for p in parts)

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
    def or_expr(self, meta: Any, children: list[Predicate]) -> Predicate:
        return self._combine(meta, "or", children)

    @v_args(meta=True)
    def and_expr(self, meta: Any, children: list[Predicate]) -> Predicate:
        return self._combine(meta, "and", children)

    @v_args(meta=True)
    def not_(self, meta: Any, children: list[Predicate]) -> Predicate:
        return self._combine(meta, "not", children)

    def compare(self, column: str, op: Token, value: Any) -> F.Filter:
        o = str(op)
        if o in ("=", "=="):
            return F.Term(column, value)
        if o in ("!=", "<>"):
            return F.Not(F.Term(column, value))
        return {">": F.gt, ">=": F.ge, "<": F.lt, "<=": F.le}[o](column, value)

    def in_(self, column: str, negated: Any, *values: Any) -> F.Filter:
        f = F.TermIn(column, tuple(values))
        return F.Not(f) if negated is not None else f

    def is_null(self, column: str, negated: Any) -> F.Filter:
        exists = F.Exists(column)
        return exists if negated is not None else F.Not(exists)

    def like(self, column: str, negated: Any, pattern: Token) -> F.Filter:
        f = _like_filter(column, unquote(str(pattern)))
        return F.Not(f) if negated is not None else f

    def between(self, column: str, low: Any, high: Any) -> F.Filter:
        return F.Between(column, low, high)

    def indexquery(self, column: str, query: Token) -> F.Filter:
        return F.QueryString(unquote(str(query)), None if column.lower() == "_indexall" else column)

    def indexqueryall(self, query: Token) -> F.Filter:
        return F.QueryString(unquote(str(query)))

    def textsearch(self, column: str, query: Token) -> F.Filter:
        return F.QueryString(unquote(str(query)), column, "text")

    def fieldmatch(self, column: str, query: Token) -> F.Filter:
        return F.QueryString(unquote(str(query)), column, "exact")

    def textsearch_all(self, query: Token) -> F.Filter:
        """``* textsearch '...'``: every field (the JVM's all-fields form)."""
        return F.QueryString(unquote(str(query)), None, "text")

    def fieldmatch_all(self, query: Token) -> F.Filter:
        return F.QueryString(unquote(str(query)), None, "exact")

    def fuzzyquery(self, column: str, query: Token) -> F.Filter:
        """``col fuzzyquery '...'``: indexquery's language plus fuzzy terms (``timout~1``), this project's."""
        return F.QueryString(unquote(str(query)), None if column.lower() == "_indexall" else column, fuzzy=True)

    def fuzzyquery_all(self, query: Token) -> F.Filter:
        return F.QueryString(unquote(str(query)), fuzzy=True)


@functools.lru_cache(maxsize=256)
def parse_statement(text: str) -> Any:
    """``STATEMENT_PARSER.parse(text)``, remembered for the last 256 statements: an Earley parse of a
    short SELECT takes 5-10 ms of a 0.2 s first look, and notebooks and dashboards run theirs again.
    The trees are never changed in place (every consumer builds new values from them).

    Example: ``parse_statement("SELECT * FROM indextables.`/t` LIMIT 20").data`` is ``"select"``.
    """
    return STATEMENT_PARSER.parse(text)


def parse_with(parser: Lark, text: str) -> Any:
    try:
        return parser.parse(text)
    except RecursionError:
        raise IndexTablesSQLError("the statement nests too deeply (parentheses or NOT) to be read") from None
    except UnexpectedInput as e:
        if e.line < 0:  # the statement ended too early
            lines = text.split("\n")
            raise IndexTablesSQLError(
                f"syntax error at line {len(lines)}, column {len(lines[-1]) + 1}: the statement ends too early"
            ) from None
        context = e.get_context(text, span=30).rstrip()
        raise IndexTablesSQLError(f"syntax error at line {e.line}, column {e.column}:\n{context}") from None


def to_predicate(tree: Any, text: str) -> Predicate:
    try:
        result: Predicate = _ToFilter(text).transform(tree)
    except VisitError as e:
        raise IndexTablesSQLError(f"{text!r}: {e.orig_exc}") from e
    except RecursionError:
        raise IndexTablesSQLError("the predicate nests too deeply (parentheses or NOT) to be read") from None
    return result


def parse_predicate(text: str) -> Predicate:
    """A SQL predicate (comparisons, IN, IS NULL, LIKE, BETWEEN, index operators, AND/OR/NOT) as a filter
    tree; parts over function calls are ``SparkCondition``s (see ``split_spark_part``).

    Example: ``parse_predicate("level = 'ERROR' AND latency > 100")`` is
    ``And((Term("level", "ERROR"), Between("latency", lower=100, lower_inclusive=False)))``.
    """
    return to_predicate(parse_with(PREDICATE_PARSER, text), text)


def index_filter(text: str) -> F.Filter:
    """A predicate the index answers entirely (no function calls or arithmetic), as a filter tree.

    Raises:
        IndexTablesSQLError: the text does not parse, or a part of it needs Spark to evaluate it.
    """
    tree = parse_predicate(text)
    if not isinstance(tree, F.FILTER_TYPES):
        raise IndexTablesSQLError(
            f"{text!r}: function calls and arithmetic are not supported here; use comparisons, IN, IS NULL, "
            f"LIKE, BETWEEN and the index operators"
        )
    return tree


def split_spark_part(where: Predicate) -> tuple[F.Filter | None, str | None]:
    """(filter tree for the indexed read, SQL condition Spark applies to its rows) of a WHERE tree."""
    conjuncts = _conjuncts(where)
    spark = [c.sql for c in conjuncts if isinstance(c, SparkCondition)]
    index = [c for c in conjuncts if isinstance(c, F.FILTER_TYPES)]
    tree = None if not index else index[0] if len(index) == 1 else F.And(tuple(index))
    return tree, (" AND ".join(f"({s})" for s in spark) or None)


def _conjuncts(node: Predicate) -> list[Predicate]:
    if isinstance(node, (F.And, PartlyIndexed)):
        return [c for child in node.children for c in _conjuncts(child)]
    return [node]


def duration_hours(tree: Any) -> float:
    number, unit = tree.children
    return float(number) * (24 if str(unit).lower().startswith("day") else 1)


# --- measures: count(*), sum(col)... ---------------------------------------------------------

NAME_PATTERN = r"(?:[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`)"
MEASURE_ITEM = re.compile(
    rf"^\s*(count|sum|avg|min|max)\s*\(\s*(\*|1|{NAME_PATTERN})\s*\)(?:\s+(?:as\s+)?({NAME_PATTERN}))?\s*$",
    re.IGNORECASE,
)


def unquote_name(token: str) -> str:
    return unquote(token) if token.startswith("`") else token


def parse_measure(text: str) -> Measure:
    """``count(*)``, ``count(col)``, ``sum(col)``, ``avg(col)``, ``min(col)`` or ``max(col)`` as a Measure."""
    m = MEASURE_ITEM.match(text)
    if m is None or m.group(3) is not None or (m.group(2) in ("*", "1") and m.group(1).lower() != "count"):
        raise IndexTablesSQLError(f"measure {text!r}: expected count(*) or count/sum/avg/min/max(<column>)")
    return Measure(m.group(1).lower(), None if m.group(2) in ("*", "1") else unquote_name(m.group(2)))


# --- bucket functions: indextables_histogram / _date_histogram / _range (and tantivy4spark_*) ------

BUCKET_FUNCTION = re.compile(r"(?<![\w`.])(?:indextables|tantivy4spark)_(date_histogram|histogram|range)\s*\(", re.I)
BUCKET_ITEM = re.compile(
    rf"^\s*((?:indextables|tantivy4spark)_(?:date_histogram|histogram|range)\s*\(.*\))"
    rf"(?:\s+(?:as\s+)?({NAME_PATTERN}))?\s*$",
    re.IGNORECASE | re.DOTALL,
)
DATE_INTERVAL = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_INTERVAL_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True)
class BucketCall:
    """One bucket function call, as the JVM defines its arguments:

    * ``indextables_histogram(col, interval [, offset [, min_doc_count]])``: numeric buckets, key a double;
    * ``indextables_date_histogram(col, 'Nms|s|m|h|d' [, 'offset' [, min_doc_count]])``: key a timestamp;
    * ``indextables_range(col, 'name', from, to, ...)``: named ranges [from, to) (NULL: unbounded), key
      the name. ``tantivy4spark_*`` are the same functions."""

    kind: str  # histogram | date_histogram | range
    column: str
    interval: float | str | None = None
    offset: float | str | None = None
    min_doc_count: int = 0
    ranges: tuple[tuple[str, float | None, float | None], ...] = ()

    @property
    def interval_ms(self) -> int:
        """A date histogram's interval in milliseconds."""
        m = DATE_INTERVAL.match(str(self.interval))
        assert m is not None  # checked by parse_bucket_call
        return int(m.group(1)) * _INTERVAL_MS[m.group(2)]

    def canonical(self) -> str:
        """The call with its arguments normalised: the same text for the same buckets."""
        return repr(self)


def _bucket_literal(text: str, code: str, what: str) -> Any:
    token = text.strip()
    if re.fullmatch(r"null", code.strip(), re.I):
        return None
    if token[:1] in "'\"" or token[:2].lower() in ("r'", 'r"'):
        return unquote(token)
    try:
        return float(token) if any(c in token for c in ".eE") else int(token)
    except ValueError:
        raise IndexTablesSQLError(f"{what}: expected a literal, got {token!r}") from None


def parse_bucket_call(text: str) -> BucketCall:
    """A bucket function call (``BucketCall``) from its SQL text.

    Raises:
        IndexTablesSQLError: a wrong number or kind of arguments, an invalid interval or overlapping ranges.

    Example: ``parse_bucket_call("indextables_histogram(price, 50.0)")`` is
    ``BucketCall("histogram", "price", 50.0)``.
    """
    parse_text, code = lex(text)
    m = BUCKET_FUNCTION.search(code)
    if m is None or not code.rstrip().endswith(")"):
        raise IndexTablesSQLError(f"{text!r} is not a bucket function call")
    kind, name = m.group(1).lower(), code[m.start() : m.end() - 1].strip()
    inner_start, inner_end = m.end(), len(code.rstrip()) - 1
    args_text = split_commas(parse_text[inner_start:inner_end], code[inner_start:inner_end])
    args_code = split_commas(code[inner_start:inner_end], code[inner_start:inner_end])
    if len(args_text) < 2 or not args_text[0].strip():
        raise IndexTablesSQLError(f"{name} needs at least 2 arguments (column, ...), got {text!r}")
    column = args_text[0].strip()
    if not re.fullmatch(NAME_PATTERN, column):
        raise IndexTablesSQLError(f"{name}: the first argument must be a column, got {column!r}")
    column = unquote_name(column)
    values = [_bucket_literal(t, c, name) for t, c in zip(args_text[1:], args_code[1:], strict=True)]
    if kind == "range":
        if len(values) % 3 != 0:
            raise IndexTablesSQLError(f"{name}(column, name1, from1, to1, ...): ranges come in threes, got {text!r}")
        ranges = []
        for key, low, high in zip(values[::3], values[1::3], values[2::3], strict=True):
            if not isinstance(key, str) or not key:
                raise IndexTablesSQLError(f"{name}: a range's name must be a non-empty string, got {key!r}")
            for bound in (low, high):
                if bound is not None and not isinstance(bound, (int, float)):
                    raise IndexTablesSQLError(f"{name}: range {key!r}: bounds must be numbers or NULL")
            if low is None and high is None:
                raise IndexTablesSQLError(f"{name}: range {key!r} must have at least one bound")
            ranges.append((key, None if low is None else float(low), None if high is None else float(high)))
        ordered = sorted(ranges, key=lambda r: -math.inf if r[1] is None else r[1])
        for a, b in itertools.pairwise(ordered):
            if a[2] is None or b[1] is None or a[2] > b[1]:
                raise IndexTablesSQLError(
                    f"{name}: ranges {a[0]!r} and {b[0]!r} overlap (Tantivy needs disjoint ranges)"
                )
        return BucketCall(kind, column, ranges=tuple(ranges))
    if len(values) > 3:
        raise IndexTablesSQLError(f"{name}(column, interval [, offset [, min_doc_count]]): too many arguments")
    interval, offset, min_docs = [*values, None, None][:3]
    if min_docs is not None and (not isinstance(min_docs, int) or min_docs < 0):
        raise IndexTablesSQLError(f"{name}: min_doc_count must be a non-negative integer, got {min_docs!r}")
    if kind == "histogram":
        if not isinstance(interval, (int, float)) or interval <= 0:
            raise IndexTablesSQLError(f"{name}: the interval must be a positive number, got {interval!r}")
        if offset is not None and not isinstance(offset, (int, float)):
            raise IndexTablesSQLError(f"{name}: the offset must be a number, got {offset!r}")
        return BucketCall(kind, column, float(interval), None if offset is None else float(offset), min_docs or 0)
    if not isinstance(interval, str) or not DATE_INTERVAL.match(interval):
        raise IndexTablesSQLError(
            f"{name}: invalid interval {interval!r}: expected a number and a unit: ms, s, m, h or d (e.g. '1d')"
        )
    if offset is not None and (not isinstance(offset, str) or not re.fullmatch(r"-?\d+(ms|s|m|h|d)", offset)):
        raise IndexTablesSQLError(f"{name}: invalid offset {offset!r}: expected e.g. '1h' or '-30m'")
    return BucketCall(kind, column, interval, offset, min_docs or 0)


def split_commas(text: str, code: str) -> list[str]:
    """``text`` cut at the commas outside parentheses (``code``: the same text, literals blanked)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(code):
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts
