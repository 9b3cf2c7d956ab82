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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lark.exceptions import UnexpectedInput

from connect_plugin.failures import project_error_first
from connect_plugin.grammar import (
    BUCKET_FUNCTION,
    BUCKET_ITEM,
    COMMAND_START,
    INDEX_OPERATOR_USE,
    MEASURE_ITEM,
    NAME_PATTERN,
    STATEMENT_PARSER,
    command_hint,
    parse_bucket_call,
    parse_statement,
    parse_with,
    split_commas,
    split_spark_part,
    to_predicate,
    unquote_name,
    unsupported_reason,
)
from connect_plugin.lexer import lex, line_and_column, unclosed, unquote
from connect_plugin.merge_into import merge_into_statement
from connect_plugin.plan import AggregateRead, BucketRead, OrderKey, OutputColumn, TableRead, options_tuple
from connect_plugin.row_change_sql import row_change_statement, statement_target
from connect_plugin.statement import StatementPlan, find_table_refs, names_in, plan_general, view_name
from connect_plugin.statements import OnSession, OnTable, build_statement
from connect_plugin.time_travel import time_travel
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract.aggregate import AggregatePlan, Measure
from indextables_contract.errors import IndexTablesSQLError
from indextables_contract.read import SCORE_COLUMN, SNIPPET_PREFIX, ReadPlan
from indextables_contract.redaction import redact_uri

if TYPE_CHECKING:
    from types import ModuleType

    from pyspark.sql import DataFrame, SparkSession

    from connect_plugin.table import IndexTable


def _target(spark: SparkSession, tree: Any) -> str:
    """The path a target names: a (back-)quoted path as written, a table name through the session."""
    token = tree.children[-1]
    if token.type == "TABLE_NAME":
        from connect_plugin.session import resolve_table

        return resolve_table(spark, str(token))
    return unquote(str(token))


def sql(spark: SparkSession, text: str, options: dict[str, Any] | None = None) -> DataFrame:
    """Run one statement: an IndexTables command, a SELECT over IndexTables tables (pushed down as
    far as it goes: see ``explain``), or anything else via ``spark.sql``.

    Args:
        spark: the session.
        text: the statement. Tables are ``indextables.`<path>```, a quoted path or a registered name.
        options: data source options for every table read (over the session's ``spark.indextables.*``).

    Raises:
        IndexTablesSQLError: a statement that does not parse (line and column named), or an index
            operator in a place no table read can answer it.

    Example: ``sql(spark, "SELECT level, count(*) FROM logs WHERE msg indexquery 'timeout' GROUP BY level")``
    """
    with project_error_first():
        plan = plan_statement(spark, text, options)
        if plan is None:
            return spark.sql(text)
        if isinstance(plan, StatementPlan):
            return plan.dataframe(spark)
        return plan()


def explain(spark: SparkSession, text: str, options: dict[str, Any] | None = None) -> str:
    """What running ``text`` would push to each table read: columns, the filter tree (the index
    answers it first, the rest is checked on the rows), limit, a pushed aggregate and, for an
    aggregate, how the executors answered it (running it: its result is small).

    Raises:
        IndexTablesSQLError: as ``sql``.

    Example: ``print(explain(spark, "SELECT id FROM logs WHERE id < 10 LIMIT 5"))``
    """
    plan = plan_statement(spark, text, options)
    if plan is None:
        return "no IndexTables table: Spark runs the statement as it is"
    if not isinstance(plan, StatementPlan):
        return redact_uri("an IndexTables command: " + " ".join(text.split())[:200])
    if plan.aggregate is not None:
        plan.dataframe(spark)  # fills in how it was answered
    return redact_uri(plan.explain())  # a table URI may carry a key (s3://KEY:SECRET@bucket/t)


def plan_statement(
    spark: SparkSession, text: str, options: dict[str, Any] | None = None
) -> StatementPlan | Callable[[], DataFrame] | None:
    """A ``StatementPlan`` for a SELECT over IndexTables tables, a callable running an IndexTables
    command, or None (a statement that names no IndexTables table: Spark's own)."""
    parse_text, code = lex(text)
    given: dict[str, Any] = options or {}
    return _plan(spark, text, parse_text, code, given)


def _plan(
    spark: SparkSession, text: str, parse_text: str, code: str, options: dict[str, Any]
) -> StatementPlan | Callable[[], DataFrame] | None:
    open_at = unclosed(text)
    if open_at is not None and _names_indextables(spark, parse_text, code[: open_at[0]]):
        raise IndexTablesSQLError(_unclosed_message(text, *open_at))
    starts_ours = COMMAND_START.match(code)
    if starts_ours and unsupported_reason(code) is not None:
        raise IndexTablesSQLError(f"{' '.join(text.split())[:80]!r} is not supported here: {unsupported_reason(code)}")
    hint = command_hint(code)  # MERGE SPLIT, DESCRIBE INDEXTABLES STAT: Spark's error or a caret would not say
    if hint is not None:
        line, column = line_and_column(text, hint[0])
        raise IndexTablesSQLError(f"syntax error at line {line}, column {column}: {hint[1]}")
    if starts_ours:
        tree = parse_with(STATEMENT_PARSER, parse_text)
        return lambda: _run(spark, tree, parse_text, options)
    change = row_change_statement(spark, parse_text, code, options)  # DELETE FROM / UPDATE of an IndexTables table
    if change is not None:
        return change
    merge_into = _MERGE_INTO.match(code)  # MERGE INTO an IndexTables table (connect_plugin.merge_into)
    if merge_into is not None and statement_target(spark, parse_text, code, merge_into.end()) is not None:
        return lambda: _merged(merge_into_statement(spark, text, options))
    parse_text, code, options = time_travel(spark, parse_text, code, options)  # VERSION / TIMESTAMP AS OF
    refs = find_table_refs(spark, parse_text, code)
    if refs:
        _check_operator_spelling(text, code)
    if not refs:
        if INDEX_OPERATOR_USE.search(code):  # e.g. an unknown table name: the grammar names the problem
            tree = parse_with(STATEMENT_PARSER, parse_text)
            return _simple_select(spark, tree, parse_text, code, options) or _no_table(text)
        return None
    if len(refs) == 1:
        try:
            tree = parse_statement(parse_text)
        except UnexpectedInput:
            tree = None
        if tree is not None and tree.data == "select":
            simple = _simple_select(spark, tree, parse_text, code, options)
            if simple is not None:
                return simple
    if BUCKET_FUNCTION.search(code):
        raise IndexTablesSQLError(
            f"{' '.join(text.split())[:120]!r}: a bucket function (indextables_histogram, _date_histogram, _range) "
            "works in SELECT <function>, <measures> FROM <one IndexTables table> [WHERE ...] GROUP BY <function>"
        )
    return plan_general(spark, parse_text, code, refs, options)


_MERGE_INTO = re.compile(r"^\s*merge\s+into\s+", re.IGNORECASE)


def _merged(result: DataFrame | None) -> DataFrame:
    assert result is not None  # its target was checked to be an IndexTables table
    return result


def _names_indextables(spark: SparkSession, text: str, code: str) -> bool:
    """Whether a statement's ``code`` (up to an unclosed quote) is IndexTables': a command, a table, an
    index operator, or a table reference the quote opens (``FROM `/path``, ``indextables.`...``)."""
    return bool(
        COMMAND_START.match(code)
        or INDEX_OPERATOR_USE.search(code)
        or re.search(r"(?:\bindextables\s*\.|\b(?:from|join))\s*$", code, re.IGNORECASE)
        or find_table_refs(spark, text[: len(code)], code)
    )


def _unclosed_message(text: str, position: int, what: str) -> str:
    """``syntax error at line L, column C: <what>``, then the line and a caret under the quote."""
    line, column = line_and_column(text, position)
    source = text.split("\n")[line - 1]
    start = max(0, column - 1 - 40)
    shown = source[start : column - 1 + 40]
    return f"syntax error at line {line}, column {column}: {what}\n{shown}\n{' ' * (column - 1 - start)}^"


_OPERATORS = ("indexquery", "textsearch", "fieldmatch", "fuzzyquery")
_WORD_BEFORE_STRING = re.compile(r"(?<![\w`.])([A-Za-z_]\w*)\s*(?=[rR]?['\"])")


def _check_operator_spelling(text: str, code: str) -> None:
    """IndexTablesSQLError for a word right before a string literal that is an index operator misspelt
    (``message indexQuerry 'disk'``): Spark's error would be ``Syntax error at or near`` it."""
    import difflib

    for m in _WORD_BEFORE_STRING.finditer(code):
        word = m.group(1)
        if word.lower() in _OPERATORS:
            continue
        close = difflib.get_close_matches(word.lower(), _OPERATORS, n=1, cutoff=0.8)
        if close:
            line, column = line_and_column(text, m.start(1))
            raise IndexTablesSQLError(
                f"syntax error at line {line}, column {column}: {word!r} is not an index operator "
                f"(did you mean {close[0]}?)"
            )


def _no_table(text: str) -> Any:
    raise IndexTablesSQLError(f"{text!r} uses an index operator but names no IndexTables table")


def is_indextables_statement(text: str) -> bool:
    """An IndexTables command, or a statement that uses an index operator — outside string literals,
    comments and back-quoted names (``SELECT 'textsearch' AS x`` is Spark's)."""
    code = lex(text)[1]
    return bool(COMMAND_START.match(code) or INDEX_OPERATOR_USE.search(code))


def _run(spark: SparkSession, tree: Any, text: str, options: dict[str, Any]) -> DataFrame:
    """Run a parsed statement: a SELECT or BUILD COMPANION planned here, any other built into a
    statement (``connect_plugin.statements``) and run by its runner below, or by ``IndexTable``."""
    from connect_plugin.plan import command_frame
    from connect_plugin.table import IndexTable, _run_once

    if tree.data == "select":
        plan = _simple_select(spark, tree, text, lex(text)[1], options)
        if plan is None:
            raise IndexTablesSQLError(f"unsupported statement: {text!r}")
        return plan.dataframe(spark)
    statement = build_statement(tree, text, lambda target: _target(spark, target))
    if isinstance(statement, OnSession):
        session_runner = _session_runners().get(statement.kind)
        if session_runner is None:
            raise IndexTablesSQLError(f"unsupported statement: {text!r}")
        return session_runner(spark, options, *statement.args)
    if statement.path is None:  # a tableless command: every node's caches
        return _run_once(command_frame(spark, statement.command, options))
    table = IndexTable.for_path(spark, statement.path, options)
    table_runner = _table_runners().get(type(statement.command))
    if table_runner is None:  # a command whose rows are its result: run once (it may change things)
        return _run_once(table._command(statement.command))
    return table_runner(table, statement)


def _filter_of(text: str | None) -> F.Filter | None:
    return None if text is None else F.from_text(text, "the WHERE")


def _table_runners() -> dict[type[C.Command], Callable[[IndexTable, OnTable], DataFrame]]:
    """Commands on a table whose SQL output IndexTables4Spark shapes its own way."""
    from connect_plugin import command_outputs as out

    def prewarm(t: IndexTable, s: OnTable) -> DataFrame:
        assert isinstance(s.command, C.Prewarm)
        return out.prewarm(t, _filter_of(s.command.filter), s.arg("segments"), s.arg("fields"), s.arg("parallelism"))

    def purge(t: IndexTable, s: OnTable) -> DataFrame:
        c = s.command
        assert isinstance(c, C.Purge)
        return t.purge(
            older_than_hours=c.retention_hours, tx_log_retention_hours=c.tx_log_retention_hours, dry_run=c.dry_run
        )

    def merge(t: IndexTable, s: OnTable) -> DataFrame:
        c = s.command
        assert isinstance(c, C.MergePlan)
        return t.merge_splits(
            where=_filter_of(c.filter),
            target_size=c.target_size,
            max_dest_splits=c.max_dest_splits,
            max_source_splits_per_merge=c.max_source_splits_per_merge,
            sort_key=c.sort_key,
        )

    def drop(t: IndexTable, s: OnTable) -> DataFrame:
        assert isinstance(s.command, C.DropPartitions)
        return t.drop_partitions(F.from_text(s.command.filter, "the WHERE"))

    def truncate(t: IndexTable, s: OnTable) -> DataFrame:
        assert isinstance(s.command, C.TruncateTimeTravel)
        return out.truncate_time_travel(t, dry_run=s.command.dry_run)

    return {
        C.DescribeState: lambda t, s: out.describe_state(t),
        C.Checkpoint: lambda t, s: out.checkpoint(t),
        C.ComponentSizes: lambda t, s: t._command(s.command),  # read only: a lazy DataFrame
        C.TruncateTimeTravel: truncate,
        C.DropPartitions: drop,
        C.Prewarm: prewarm,
        C.Purge: purge,
        C.MergePlan: merge,
    }


def _session_runners() -> dict[str, Callable[..., DataFrame]]:
    """Statements the session answers, by grammar rule: ``runner(spark, options, *args)``."""
    from connect_plugin import command_outputs as out

    return {
        "describe_cache": out.describe_disk_cache,
        "describe_storage": out.describe_storage_stats,
        "describe_environment": lambda spark, options: out.describe_environment(spark),
        "describe_merge_jobs": lambda spark, options: out.describe_merge_jobs(spark),
        "describe_prewarm_jobs": lambda spark, options: out.describe_prewarm_jobs(spark),
        "enable_profiler": lambda spark, options: out.profiler_switch(spark, True, options),
        "disable_profiler": lambda spark, options: out.profiler_switch(spark, False, options),
        "describe_profiler": lambda spark, options, caches: _profiler(out, spark, False, caches, options),
        "reset_profiler": lambda spark, options, caches: _profiler(out, spark, True, caches, options),
        "describe_skipping": out.describe_data_skipping,
        "flush_skipping": out.flush_data_skipping,
        "invalidate_skipping": out.invalidate_data_skipping,
        "repair": lambda spark, options, source, target: out.repair_log(spark, source, target, options),
        "wait_prewarm": lambda spark, options, table, job, timeout: out.wait_prewarm_jobs(spark, table, job, timeout),
        "build_companion": _build_companion,
    }


def _build_companion(
    spark: SparkSession, options: dict[str, Any], kind: str, source: str, location: str, arguments: Any
) -> DataFrame:
    """BUILD INDEXTABLES COMPANION, as ``connect_plugin.statements`` built it."""
    from connect_plugin.companion import build_companion

    return build_companion(spark, kind, source, location, options=options, **dict(arguments))


def _profiler(out: ModuleType, spark: SparkSession, reset: bool, caches: bool, options: dict[str, Any]) -> DataFrame:
    result: DataFrame = (
        out.profiler_caches(spark, reset, options) if caches else out.profiler_sections(spark, reset, options)
    )
    return result


def _simple_select(
    spark: SparkSession, tree: Any, text: str, code: str, options: dict[str, Any]
) -> StatementPlan | None:
    """``SELECT ... FROM <one table> [alias] [WHERE ...] [GROUP BY / ORDER BY / LIMIT]``: the WHERE
    travels as the read's filter tree (top-level AND parts over function calls stay with Spark),
    a LIMIT over plain columns stops each task, and count/sum/avg/min/max with GROUP BY on
    columns become a pushed aggregate. None where the shape does not allow it (the general plan
    then runs the statement)."""
    projection, target, alias, where_tree, tail = tree.children
    try:
        where = to_predicate(where_tree, text) if where_tree is not None else None
    except IndexTablesSQLError:
        return None  # function calls under OR with index operators: match columns handle it
    index_tree, spark_condition = split_spark_part(where) if where is not None else (None, None)
    path = _target(spark, target)
    if alias is None and target.children[-1].type == "TABLE_NAME":  # `name.col` keeps resolving
        alias = str(target.children[-1]).split(".")[-1]
    opts = options_tuple(options)
    filter_json = None if index_tree is None else F.to_text(index_tree)
    tail_text = None if tail is None else str(tail)
    if BUCKET_FUNCTION.search(code[projection.start_pos : projection.end_pos]):
        if spark_condition is not None:
            raise IndexTablesSQLError(
                f"{text!r}: beside a bucket function the WHERE must be answered by the index (no function calls "
                f"or arithmetic: {spark_condition})"
            )
        bucket = bucket_shape(str(projection), code[projection.start_pos : projection.end_pos], tail_text)
        if bucket is None:
            raise IndexTablesSQLError(
                f"{text!r}: a bucket function works as SELECT <function>(...) [AS name], count(*)/sum/avg/min/max"
                f"(col)... FROM <table> [WHERE ...] GROUP BY <the same function call, its name or 1> "
                f"[ORDER BY ...] [LIMIT n]"
            )
        call, measures, outputs, order, limit = bucket
        return StatementPlan(None, aggregate=BucketRead(path, call, measures, outputs, index_tree, order, limit, opts))
    if spark_condition is None:
        shape = aggregate_shape(str(projection), code[projection.start_pos : projection.end_pos], tail_text)
        if shape is not None:
            agg_plan, outputs, order, limit = shape
            pushed = AggregateRead(
                path, AggregatePlan(agg_plan.group_by, agg_plan.measures, filter_json), outputs, order, limit, opts
            )
            return StatementPlan(
                None,
                aggregate=pushed,
                fallback=_select_over_view(path, str(projection), alias, index_tree, None, tail_text, text, code, opts),
            )
    if where_tree is not None:  # the pushed WHERE needs no column in Spark: only what Spark evaluates
        start, end = where_tree.meta.start_pos, where_tree.meta.end_pos
        code = code[:start] + " " * (end - start) + code[end:] + " " + lex(spark_condition or "")[1]
        text = text[:start] + " " * (end - start) + text[end:] + " " + (spark_condition or "")
    return _select_over_view(path, str(projection), alias, index_tree, spark_condition, tail_text, text, code, opts)


_LIMIT_ONLY = re.compile(r"^limit\s+(\d+)\s*$", re.IGNORECASE)
_SPARK_MAX_LIMIT = 2**31 - 1  # Spark's LIMIT is an int
# ORDER BY _score DESC LIMIT k: the best k rows by score are among each task's best k (a second sort
# key could want a row a task cut at a tie, so only this form)
_SCORE_TOP_K = re.compile(r"^order\s+by\s+`?_score`?\s+desc\s+limit\s+(\d+)\s*$", re.IGNORECASE)
# ORDER BY <column> [ASC|DESC] [NULLS FIRST|LAST] LIMIT k: likewise, each task sends its best k by the
# column (the executors push it for numbers, dates and timestamps; other columns send every row)
_COLUMN_TOP_K = re.compile(
    rf"^order\s+by\s+({NAME_PATTERN})(?:\s+(asc|desc))?(?:\s+nulls\s+(first|last))?\s+limit\s+(\d+)\s*$",
    re.IGNORECASE,
)


def _limit(digits: str) -> int:
    """A LIMIT's value; IndexTablesSQLError above Spark's largest (a bare Py4JError otherwise)."""
    limit = int(digits)
    if limit > _SPARK_MAX_LIMIT:
        raise IndexTablesSQLError(f"LIMIT {digits} is larger than Spark's largest limit ({_SPARK_MAX_LIMIT})")
    return limit


def _orders_a_column(projection: str, code: str, name: str) -> bool:
    """Whether ``ORDER BY name`` in a plain projection orders by the table's column ``name``: not a
    ``_score`` or snippet (their own order), not an alias of another column (Spark orders by the alias)."""
    low = name.lower()
    if low == SCORE_COLUMN or low.startswith(SNIPPET_PREFIX):
        return False
    for item in _split_commas(projection, projection):
        m = _COLUMN_ITEM.match(item)
        aliased = m is not None and m.group(2) is not None and unquote_name(m.group(2)).lower() == low
        if aliased and m is not None and unquote_name(m.group(1)).lower() != low:
            return False
    return True


_PLAIN_PROJECTION = re.compile(
    r"^\s*(\*|[\w`.]+(\s+(as\s+)?[\w`]+)?)(\s*,\s*(\*|[\w`.]+(\s+(as\s+)?[\w`]+)?))*\s*$", re.IGNORECASE
)


def _select_over_view(
    path: str,
    projection: str,
    alias: Any,
    index_tree: F.Filter | None,
    spark_condition: str | None,
    tail: str | None,
    text: str,
    code: str,
    opts: tuple[tuple[str, str], ...],
) -> StatementPlan:
    limit = top_k = None
    m = _LIMIT_ONLY.match(tail) if tail is not None and spark_condition is None else None
    plain = _PLAIN_PROJECTION.match(projection) and not re.match(r"\s*distinct\b", projection, re.I)
    if m is not None and plain:
        limit = _limit(m.group(1))
    top = _SCORE_TOP_K.match(tail) if tail is not None and spark_condition is None else None
    if top is not None and plain:  # each task sends its best k by score; Spark sorts and cuts them
        top_k = _limit(top.group(1))
    by = _COLUMN_TOP_K.match(tail) if tail is not None and spark_condition is None and top is None else None
    top_k_order = None
    if by is not None and plain and _orders_a_column(projection, code, unquote_name(by.group(1))):
        descending = (by.group(2) or "asc").lower() == "desc"
        nulls_first = not descending if by.group(3) is None else by.group(3).lower() == "first"
        top_k, top_k_order = _limit(by.group(4)), (unquote_name(by.group(1)), descending, nulls_first)
    view = view_name()
    plan = ReadPlan(
        required_columns=names_in(text, code), filter=index_tree, limit=limit, top_k=top_k, top_k_order=top_k_order
    )
    read = TableRead(path, plan, opts)
    if limit is not None and read.plan.one_task(dict(opts)):
        tail = f"LIMIT {limit + 1}"  # one task of at most `limit` rows: Spark reads it to its end (ReadPlan.one_task)
    statement = f"SELECT {projection} FROM {view}"
    if alias is not None:
        statement += f" AS {alias}"
    if spark_condition is not None:
        statement += f" WHERE {spark_condition}"
    if tail is not None:
        statement += f" {tail}"
    return StatementPlan(statement, reads=[(view, read)])


# --- the aggregate shape: SELECT g..., f(x)... GROUP BY g... [ORDER BY ...] [LIMIT n] --------------

_COLUMN_ITEM = re.compile(
    rf"^\s*(?:{NAME_PATTERN}\s*\.\s*)?({NAME_PATTERN})(?:\s+(?:as\s+)?({NAME_PATTERN}))?\s*$", re.IGNORECASE
)
_AGG_TAIL = re.compile(
    r"^(?:group\s+by\s+(?P<group>.+?))?(?:\s*\border\s+by\s+(?P<order>.+?))?(?:\s*\blimit\s+(?P<limit>\d+))?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_ORDER_ITEM = re.compile(r"^\s*(.+?)(?:\s+(asc|desc))?(?:\s+nulls\s+(first|last))?\s*$", re.IGNORECASE | re.DOTALL)
_KEYWORDS = frozenset({"from", "where", "as", "group", "order", "limit", "having", "distinct"})


_split_commas = split_commas


def _add_measure(m: re.Match[str], measures: list[Measure], outputs: list[OutputColumn]) -> bool:
    """Append the measure of a ``MEASURE_ITEM`` match and its output column; False if it cannot be
    pushed (only ``count`` may take ``*`` or ``1``)."""
    func, arg, alias = m.group(1).lower(), m.group(2), m.group(3)
    column = None if arg in ("*", "1") else unquote_name(arg)
    if column is None and func != "count":
        return False
    measures.append(Measure(func, column))
    default = "count(1)" if column is None else f"{func}({column})"
    outputs.append(OutputColumn(unquote_name(alias) if alias else default, measure=len(measures) - 1))
    return True


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
        if not re.fullmatch(NAME_PATTERN, g):
            return None
        group_by.append(unquote_name(g))
    measures: list[Measure] = []
    outputs: list[OutputColumn] = []
    expressions: list[str] = []
    lowered = [g.lower() for g in group_by]
    for item in items:
        expressions.append(re.sub(r"\s+", "", item.split(" as ")[0].split(" AS ")[0]).lower())
        if (m := MEASURE_ITEM.match(item)) is not None:
            if not _add_measure(m, measures, outputs):
                return None
        elif (m := _COLUMN_ITEM.match(item)) is not None and unquote_name(m.group(1)).lower() in lowered:
            if m.group(1).lower() in _KEYWORDS or (m.group(2) or "").lower() in _KEYWORDS:
                return None
            column, alias = unquote_name(m.group(1)), m.group(2)
            outputs.append(OutputColumn(unquote_name(alias) if alias else column, group=lowered.index(column.lower())))
        else:
            return None
    if not measures:
        return None
    order = _order_keys(tail_match["order"], outputs, expressions)
    if order is None:
        return None
    limit = _limit(tail_match["limit"]) if tail_match["limit"] else None
    return AggregatePlan(tuple(group_by), tuple(measures)), tuple(outputs), order, limit


def bucket_shape(projection: str, projection_code: str, tail: str | None) -> Any:
    """(BucketCall, measures, output columns, order keys, limit) of ``SELECT <bucket function> [AS n],
    measures... GROUP BY <it>``, or None for any other shape."""
    tail_match = _AGG_TAIL.match(tail or "")
    if tail_match is None or not tail_match["group"]:
        return None
    call = None
    measures: list[Measure] = []
    outputs: list[OutputColumn] = []
    expressions: list[str] = []
    texts = _split_commas(projection, projection_code)
    codes = _split_commas(projection_code, projection_code)
    for item, item_code in zip(texts, codes, strict=True):
        expressions.append(re.sub(r"\s+", "", item.split(" as ")[0].split(" AS ")[0]).lower())
        if BUCKET_FUNCTION.search(item_code):
            m = BUCKET_ITEM.match(item)
            if m is None or call is not None:
                return None
            call = parse_bucket_call(m.group(1))
            name = unquote_name(m.group(2)) if m.group(2) else " ".join(m.group(1).split())
            outputs.append(OutputColumn(name, group=0))
            expressions[-1] = re.sub(r"\s+", "", m.group(1)).lower()
        elif (m := MEASURE_ITEM.match(item)) is not None:
            if not _add_measure(m, measures, outputs):
                return None
        else:
            return None
    group = tail_match["group"].strip()
    if call is None or len(_split_commas(group, lex(group)[1])) != 1:
        return None
    key_index = next(i for i, o in enumerate(outputs) if o.group is not None)
    if group.isdigit():
        if int(group) != key_index + 1:
            return None
    elif BUCKET_FUNCTION.search(lex(group)[1]):
        if parse_bucket_call(group) != call:
            return None
    elif unquote_name(group).lower() != outputs[key_index].name.lower():
        return None
    order = _order_keys(tail_match["order"], outputs, expressions)
    if order is None:
        return None
    limit = _limit(tail_match["limit"]) if tail_match["limit"] else None
    return call, tuple(measures), tuple(outputs), order, limit


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
        plain = unquote_name(expr).lower() if re.fullmatch(NAME_PATTERN, expr) else None
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
