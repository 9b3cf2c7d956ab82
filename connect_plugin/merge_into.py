"""MERGE INTO a table's rows, as Spark work on the row-change machinery (``connect_plugin.row_changes``,
``indextables_contract.row_changes``): the splits holding a key of the source are found
(``MatchCounts``), read at that version, full-outer-joined with the source on the keys, turned by the
WHEN clauses into the rows written in their place, and written as one row change (operation MERGE)
whose commit replaces the splits read. With no split matching, only the inserted rows are written.

    t = IndexTable.for_path(spark, "/t")
    (t.merge(updates, on="t.id = s.id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()).show()

The target is called ``t`` and the source ``s`` in ``on``, conditions and expressions. Clauses apply
in order, the first whose condition holds wins, as in Delta. The ON condition is any boolean Spark SQL
expression over ``t`` and ``s``. Its top-level conjuncts that are equalities between a target and a
source column (``t.a = s.a AND t.b = s.b AND s.ts > t.ts``: the first two) are its keys: only the
splits holding a key of the source are read and rewritten. Without a key (``t.id BETWEEN s.lo AND
s.hi``) every split is read and rewritten (unless the clauses only insert).

The SQL form (``merge_into_statement``)::

    MERGE INTO indextables.`/t` [AS] t USING <view or table> [AS] s ON t.id = s.id
    WHEN MATCHED [AND <cond>] THEN UPDATE SET a = <expr>, ... | UPDATE SET * | DELETE
    WHEN NOT MATCHED [AND <cond>] THEN INSERT (a, ...) VALUES (<expr>, ...) | INSERT *
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from connect_plugin.failures import project_error_first
from connect_plugin.grammar import split_commas
from connect_plugin.lexer import lex, unquote
from connect_plugin.plan import TableRead, command_frame, local_frame, options_tuple
from connect_plugin.row_change_sql import set_assignments, statement_error, statement_target
from connect_plugin.row_changes import Table, assignment_problem, functions_of, result_schema
from connect_plugin.settings import merged_options
from indextables_contract import FORMAT
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract import row_changes as RC
from indextables_contract.errors import ConfigError, IndexTablesSQLError
from indextables_contract.read import ReadPlan

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_NAME = r"(?:`(?:[^`]|``)*`|[A-Za-z_]\w*)"
_EQUALITY = re.compile(rf"^\s*({_NAME})\s*\.\s*({_NAME})\s*=(?!=)\s*({_NAME})\s*\.\s*({_NAME})\s*$", re.DOTALL)
# marker columns of the joined rows (writes refuse names starting with "_indextables_")
_IN_TARGET = "_indextables_merge_target"
_IN_SOURCE = "_indextables_merge_source"
_ACTION = "_indextables_merge_action"
_ROW = "_indextables_merge_row"  # a target row's number, to count its matches
_UNCHANGED, _DROPPED = -1, -2  # actions besides a clause's index: unchanged, not written
_INSERTS = 1000  # an insert clause's action: this plus its index


@dataclass(frozen=True)
class _Clause:
    kind: str  # "update", "delete" or "insert"
    condition: str | Column | None = None
    values: Mapping[str, str | Column] | None = None  # None: every column from the source's (update/insert all)


@dataclass
class MergeBuilder:
    """A MERGE INTO of ``source`` into ``table`` on ``on``; add clauses, then ``execute()``.

    Example: ``t.merge(df, "t.id = s.id").when_matched_update(set={"n": "t.n + s.n"}).execute()``
    """

    table: Table
    source: DataFrame
    on: str
    target_alias: str = "t"
    source_alias: str = "s"
    matched: list[_Clause] = field(default_factory=list)
    not_matched: list[_Clause] = field(default_factory=list)

    def when_matched_update(
        self, set: Mapping[str, str | Column], condition: str | Column | None = None
    ) -> MergeBuilder:
        """Matched pairs (meeting ``condition``): set each column of ``set`` to its expression (Spark SQL
        text over ``t`` and ``s``, or a Column), cast to the column's type."""
        if not set:
            raise ConfigError(f"merge into {self.table.path}: when_matched_update needs at least one column")
        self.matched.append(_Clause("update", condition, dict(set)))
        return self

    def when_matched_update_all(self, condition: str | Column | None = None) -> MergeBuilder:
        """Matched pairs (meeting ``condition``): every column set to the source's column of that name."""
        self.matched.append(_Clause("update", condition, None))
        return self

    def when_matched_delete(self, condition: str | Column | None = None) -> MergeBuilder:
        """Matched pairs (meeting ``condition``): the target row deleted."""
        self.matched.append(_Clause("delete", condition))
        return self

    def when_not_matched_insert(
        self, values: Mapping[str, str | Column], condition: str | Column | None = None
    ) -> MergeBuilder:
        """Source rows matching no target row (meeting ``condition``): a row inserted, each column of the
        table given by ``values`` (every column is required)."""
        self.not_matched.append(_Clause("insert", condition, dict(values)))
        return self

    def when_not_matched_insert_all(self, condition: str | Column | None = None) -> MergeBuilder:
        """Source rows matching no target row (meeting ``condition``): inserted as they are (the source
        must have every column of the table)."""
        self.not_matched.append(_Clause("insert", condition, None))
        return self

    def execute(self, txn_app_id: str | None = None, txn_version: int | None = None) -> DataFrame:
        """Run the MERGE: one row of what was done (``ChangeResult``'s columns; ``version`` null when
        nothing changed and nothing was committed).

        ``txn_app_id`` and ``txn_version`` make it idempotent (the write options ``txnAppId`` and
        ``txnVersion``, as Delta's): committed only if the table holds no version of that application
        id as high, so a ``foreachBatch`` batch replayed after a failure merges once
        (``execute(txn_app_id="orders-upsert", txn_version=batch_id)``). A MERGE that writes no row
        (deletes only) records nothing.

        Raises:
            ConfigError: an ON condition that is not a boolean over ``t`` and ``s``, an unknown column,
                an insert missing a column, a value whose type does not fit, a source
                row matching two or more target rows (all before anything is written).
            CommitConflictError: a MERGE SPLITS, PURGE or row change removed one of the splits first.
        """
        if (txn_app_id is None) != (txn_version is None):
            raise ConfigError(f"merge into {self.table.path}: txn_app_id and txn_version go together")
        txn = {} if txn_app_id is None else {RC.TXN_APP_ID: txn_app_id, RC.TXN_VERSION: str(txn_version)}
        with project_error_first():
            return _merge(self, txn)


def merge(table: Table, source: DataFrame, on: str) -> MergeBuilder:
    """A MERGE INTO builder of ``source`` (called ``s``) into ``table`` (called ``t``) on ``on``."""
    return MergeBuilder(table, source, on)


def _conjuncts(text: str) -> list[str]:
    """The top-level ``AND`` operands of a condition (an ``AND`` inside parentheses, a string or
    ``BETWEEN x AND y`` does not split it)."""
    _, code = lex(text)
    parts, depth, start, between = [], 0, 0, 0
    for m in re.finditer(r"[()]|\b(?:and|between)\b", code, re.IGNORECASE):
        word = m.group().lower()
        if word in "()":
            depth += 1 if word == "(" else -1
        elif depth == 0 and word == "between":
            between += 1
        elif depth == 0 and between:
            between -= 1  # the AND of BETWEEN x AND y
        elif depth == 0:
            parts.append(text[start : m.start()])
            start = m.end()
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _on_parts(b: MergeBuilder) -> tuple[list[tuple[str, str]], list[str]]:
    """The ON condition's keys, (target column, source column) of each top-level conjunct that is an
    equality between them, and its other conjuncts, as written."""
    keys, rest = [], []
    for part in _conjuncts(b.on):
        if not part:
            raise ConfigError(f"merge into {b.table.path}: ON {b.on!r}: an AND without an operand")
        _, code = lex(part)
        m = _EQUALITY.match(code)
        names = [_bare(part[m.start(i) : m.end(i)]) for i in range(1, 5)] if m else []
        sides = {names[0].lower(): names[1], names[2].lower(): names[3]} if m else {}
        if set(sides) == {b.target_alias.lower(), b.source_alias.lower()}:
            keys.append((sides[b.target_alias.lower()], sides[b.source_alias.lower()]))
        else:
            rest.append(part)
    return keys, rest


def _bare(name: str) -> str:
    """A column or alias name as written, back-quotes taken off."""
    return unquote(name) if name.startswith("`") else name


def _analysed(b: MergeBuilder, frame: DataFrame, value: str | Column, what: str) -> tuple[Column, Any]:
    """``value`` as a Column over ``frame`` and its type, analysed here (ConfigError naming ``what``)."""
    sf = functions_of(frame)
    column = sf.expr(value) if isinstance(value, str) else value
    try:
        return column, frame.select(column.alias("v")).schema.fields[0].dataType
    except Exception as e:  # AnalysisException, classic or Connect
        first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        raise ConfigError(f"merge into {b.table.path}: {what}: {first}") from None


def _merge(b: MergeBuilder, txn: Mapping[str, str]) -> DataFrame:
    table, spark = b.table, b.table.spark
    path, ta, sa = table.path, b.target_alias, b.source_alias
    if not b.matched and not b.not_matched:
        raise ConfigError(f"merge into {path}: add a WHEN MATCHED or WHEN NOT MATCHED clause")
    keys, conditions = _on_parts(b)
    latest = TableRead(path, ReadPlan(), options_tuple(dict(table.options))).dataframe(spark)
    fields = {f.name.lower(): f for f in latest.schema.fields}
    source_columns = {c.lower(): c for c in b.source.columns}
    for target_key, source_key in keys:
        if target_key.lower() not in fields or source_key.lower() not in source_columns:
            raise ConfigError(
                f"merge into {path}: ON {b.on!r}: no column "
                f"{target_key if target_key.lower() not in fields else source_key!r}"
                f" (target columns: {[f.name for f in fields.values()]}, source columns: {b.source.columns})"
            )
    target_keys = [fields[k.lower()].name for k, _ in keys]
    source_keys = [source_columns[s.lower()] for _, s in keys]
    sf = functions_of(b.source)

    probe = latest.where(sf.lit(False)).alias(ta).crossJoin(b.source.alias(sa))
    on_conditions = [_condition(b, probe, text, f"ON {text}") for text in conditions]

    def joined_of(target: DataFrame, how: str = "full_outer") -> DataFrame:
        t = target.withColumn(_IN_TARGET, sf.lit(True)).alias(ta)
        s = b.source.withColumn(_IN_SOURCE, sf.lit(True)).alias(sa)
        on = None
        for tk, sk in zip(target_keys, source_keys, strict=True):
            eq = sf.col(f"{ta}.`{tk}`") == sf.col(f"{sa}.`{sk}`")
            on = eq if on is None else on & eq
        for condition in on_conditions:
            on = condition if on is None else on & condition
        return t.join(s, on=on, how=how)

    # Everything checked against the plan of a join with the latest schema, before anything runs
    action, values = _plan_actions(b, joined_of(latest.where(sf.lit(False))), fields, source_columns)

    # The target splits holding a source key (no key: every split)
    distinct = [tuple(r) for r in b.source.select(*source_keys).distinct().collect()] if keys else []
    distinct = [k for k in distinct if all(v is not None for v in k)]  # a null key matches nothing
    counts = []
    if not keys:
        everything = F.QueryString("*")
        counts = command_frame(spark, C.MatchCounts(filter=F.to_text(everything)), table.options, path).collect()
    elif distinct:
        if len(target_keys) == 1:
            condition: F.Filter = F.TermIn(target_keys[0], tuple(k[0] for k in distinct))
        else:
            condition = F.Or(
                tuple(F.And(tuple(F.Term(c, v) for c, v in zip(target_keys, k, strict=True))) for k in distinct)
            )
        counts = command_frame(spark, C.MatchCounts(filter=F.to_text(condition)), table.options, path).collect()
    if counts:
        version = int(counts[0]["version"])
        replaced = tuple(str(r["path"]) for r in counts)
        extra = {**table.options, "versionAsOf": str(version)}
    else:
        version = int(command_frame(spark, C.History(limit=1), table.options, path).collect()[0]["version"])
        replaced = ()

    def target_rows() -> DataFrame:
        """A fresh read of the target's rows for each action: Spark 4.3 plans every query of one
        DataFrame with the reader of its first, filters pushed then included (a semi join's inferred
        ``IS NOT NULL`` on the key would drop the rows with a null key from the rewrite)."""
        if not counts:
            return latest.where(sf.lit(False))
        return TableRead(path, ReadPlan(splits=replaced), options_tuple(extra)).dataframe(spark)

    target = target_rows()

    # A source row matching two or more target rows: refused (as Delta)
    shown = _twice_matched(b, target, target_keys, source_keys, joined_of if on_conditions else None)
    if shown is not None:
        raise ConfigError(
            f"merge into {path}: multiple source rows matched the same target row ({shown}): "
            "a MERGE may change a target row once only; make the source's keys unique; nothing was written"
        )

    counted_rows = joined_of(target_rows()).withColumn(_ACTION, action)
    counted = {int(r[_ACTION]): int(r["count"]) for r in counted_rows.groupBy(_ACTION).count().collect()}
    acted = joined_of(target_rows()).withColumn(_ACTION, action)
    kinds = {i: c.kind for i, c in enumerate(b.matched)} | {_INSERTS + j: "insert" for j in range(len(b.not_matched))}
    metrics = {"numUpdatedRows": 0, "numDeletedRows": 0, "numInsertedRows": 0}
    for code, rows in counted.items():
        kind = kinds.get(code)
        if kind is not None:
            metrics[{"update": "numUpdatedRows", "delete": "numDeletedRows", "insert": "numInsertedRows"}[kind]] += rows
    schema = result_schema()
    if not any(metrics.values()):
        return local_frame(spark, [(None, "MERGE", 0, 0, 0, 0, 0)], schema)
    marker = sf.col(f"`{_ACTION}`")
    if b.matched:
        dropped = [_DROPPED, *(i for i, c in enumerate(b.matched) if c.kind == "delete")]
        kept = acted.where(~marker.isin(dropped))
    else:  # inserts only: the splits read are left as they are, only the new rows written
        replaced = ()
        kept = acted.where(marker >= _INSERTS)
    change = RC.RowChange("MERGE", uuid.uuid4().hex, version, replaced, tuple(sorted(metrics.items())))
    written = kept.select(*(_value_of(sf, ta, f, values.get(f.name, []), marker) for f in latest.schema.fields))
    opts = merged_options(spark, table.options)
    written.write.format(FORMAT).mode("append").options(**opts, **txn, **change.to_options()).save(path)
    result = command_frame(spark, C.ChangeResult(change_id=change.change_id), table.options, path).collect()
    if not result:  # an idempotent MERGE the table already holds: nothing committed
        return local_frame(spark, [(None, "MERGE", 0, 0, 0, 0, 0)], schema)
    return local_frame(spark, [tuple(r) for r in result], schema)


def _twice_matched(
    b: MergeBuilder, target: DataFrame, target_keys: list[str], source_keys: list[str], joined_of: Any
) -> str | None:
    """The target row two or more source rows match, shown (``id=3``), or None. On keys alone: a key
    of the target that two source rows have. With other conditions (``joined_of`` given): each
    target row numbered and the matches of each counted."""
    sf = functions_of(b.source)
    if joined_of is None:
        twice = (
            b.source.groupBy(*source_keys)
            .count()
            .where(sf.col("count") > 1)
            .alias("d")
            .join(
                target.select(*target_keys).distinct().alias("k"),
                on=[
                    sf.col(f"d.`{sk}`") == sf.col(f"k.`{tk}`") for tk, sk in zip(target_keys, source_keys, strict=True)
                ],
                how="left_semi",
            )
            .limit(1)
            .collect()
        )
        if not twice:
            return None
        return ", ".join(f"{k}={twice[0][s]!r}" for k, s in zip(target_keys, source_keys, strict=True))
    shown = target_keys or target.columns[:3]
    numbered = target.withColumn(_ROW, sf.monotonically_increasing_id())
    matches = joined_of(numbered, how="inner").groupBy(sf.col(f"{b.target_alias}.`{_ROW}`").alias(_ROW))
    picked = [sf.first(sf.col(f"{b.target_alias}.`{c}`")).alias(c) for c in shown]
    twice = matches.agg(sf.count(sf.lit(1)).alias("n"), *picked).where(sf.col("n") > 1).limit(1).collect()
    if not twice:
        return None
    return ", ".join(f"{c}={twice[0][c]!r}" for c in shown)


def _condition(b: MergeBuilder, frame: DataFrame, value: str | Column, what: str) -> Column:
    """A boolean condition over ``frame``, analysed (ConfigError naming ``what`` otherwise)."""
    column, kind = _analysed(b, frame, value, what)
    if kind.typeName() not in ("boolean", "null"):
        raise ConfigError(f"merge into {b.table.path}: {what}: not a boolean")
    return column


def _value_of(sf: Any, ta: str, f: Any, cases: list[tuple[int, Column]], marker: Column) -> Column:
    """Column ``f`` of a written row: the value of the clause that acted on it, else the target's."""
    value = None
    for code, expression in cases:
        value = sf.when(marker == code, expression) if value is None else value.when(marker == code, expression)
    kept: Column = sf.col(f"{ta}.`{f.name}`")
    out: Column = kept if value is None else value.otherwise(kept)
    return out.alias(f.name)


def _plan_actions(
    b: MergeBuilder, joined: DataFrame, fields: Mapping[str, Any], source_columns: Mapping[str, str]
) -> tuple[Column, dict[str, list[tuple[int, Column]]]]:
    """The action of each joined row (a clause's code, ``_UNCHANGED`` or ``_DROPPED``) and, for each
    column, the (action, value cast to its type) pairs that set it; ConfigError for an unknown column,
    an insert missing one, a value that does not fit, a condition that is not a boolean."""
    sf = functions_of(joined)
    path, ta, sa = b.table.path, b.target_alias, b.source_alias
    values: dict[str, list[tuple[int, Column]]] = {}

    def condition_of(clause: _Clause, what: str) -> Column:
        if clause.condition is None:
            always: Column = sf.lit(True)
            return always
        return _condition(b, joined, clause.condition, f"{what} condition {clause.condition}")

    def assign(code: int, clause: _Clause, what: str) -> None:
        given = clause.values
        if given is None:
            missing = [f.name for f in fields.values() if f.name.lower() not in source_columns]
            if missing:
                raise ConfigError(
                    f"merge into {path}: {what} * needs the source to have every column of the table; "
                    f"it lacks {missing} (source columns: {list(source_columns.values())})"
                )
            given = {f.name: f"{sa}.`{source_columns[f.name.lower()]}`" for f in fields.values()}
        seen = set()
        for name, value in given.items():
            bare = str(name)
            if bare.lower().startswith(ta.lower() + "."):
                bare = bare[len(ta) + 1 :]
            bare = _bare(bare)
            target_field = fields.get(bare.lower())
            if target_field is None:
                raise ConfigError(
                    f"merge into {path}: {what} {name}: no such column (columns: {[f.name for f in fields.values()]})"
                )
            column, found = _analysed(b, joined, value, f"{what} {target_field.name} = {value}")
            problem = assignment_problem(found, target_field.dataType)
            if problem is not None:
                raise ConfigError(f"merge into {path}: {what} {target_field.name} = {value}: {problem}")
            values.setdefault(target_field.name, []).append((code, column.cast(target_field.dataType)))
            seen.add(target_field.name)
        if clause.kind == "insert":
            missing = [f.name for f in fields.values() if f.name not in seen]
            if missing:
                raise ConfigError(f"merge into {path}: {what} gives no value for columns {missing}; give every column")

    matched_action: Column | None = None
    for i, clause in enumerate(b.matched):
        what = f"WHEN MATCHED {'UPDATE SET' if clause.kind == 'update' else 'DELETE'}"
        cond = condition_of(clause, what)
        if clause.kind == "update":
            assign(i, clause, what)
        matched_action = sf.when(cond, i) if matched_action is None else matched_action.when(cond, i)
    insert_action: Column | None = None
    for j, clause in enumerate(b.not_matched):
        what = "WHEN NOT MATCHED INSERT"
        cond = condition_of(clause, what)
        assign(_INSERTS + j, clause, what)
        code = _INSERTS + j
        insert_action = sf.when(cond, code) if insert_action is None else insert_action.when(cond, code)
    in_target, in_source = sf.col(f"`{_IN_TARGET}`").isNotNull(), sf.col(f"`{_IN_SOURCE}`").isNotNull()
    on_matched = sf.lit(_UNCHANGED) if matched_action is None else matched_action.otherwise(_UNCHANGED)
    on_source = sf.lit(_DROPPED) if insert_action is None else insert_action.otherwise(_DROPPED)
    action = sf.when(in_target & in_source, on_matched).when(in_source, on_source).otherwise(_UNCHANGED)
    return action, values


# ---- SQL ------------------------------------------------------------------------------------------

_HEAD = re.compile(r"^\s*merge\s+into\s+", re.IGNORECASE)
_USING = re.compile(r"\s*using\s+(`(?:[^`]|``)*`|[A-Za-z_][\w.]*)(?:\s+(?:as\s+)?([A-Za-z_]\w*))?\s+on\b", re.I)
_WHEN = re.compile(r"\bwhen\s+(not\s+matched(?:\s+by\s+target)?|matched)\b", re.IGNORECASE)
_THEN = re.compile(r"\bthen\s+(update\s+set|delete|insert)\b", re.IGNORECASE)
_INSERT_LIST = re.compile(r"^\s*\((.*)\)\s*values\s*\((.*)\)\s*$", re.IGNORECASE | re.DOTALL)


def merge_into_statement(spark: SparkSession, text: str, options: Mapping[str, Any]) -> DataFrame | None:
    """Run ``text`` if it is a MERGE INTO an IndexTables table (``indextables.`<path>```, a quoted path
    or a registered name) and return its one result row; None if it is not (Spark's own statement).

    Raises:
        IndexTablesSQLError: a MERGE INTO an IndexTables table that does not parse (line and column).
        ConfigError: as ``MergeBuilder.execute``.

    Example: ``merge_into_statement(spark, "MERGE INTO indextables.`/t` t USING u s ON t.id = s.id "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *", {})``
    """
    parse_text, code = lex(text)
    head = _HEAD.match(code)
    if head is None:
        return None
    found = statement_target(spark, parse_text, code, head.end())
    if found is None:
        return None
    path, alias, rest = found
    if alias is not None and alias.lower() == "using":  # no alias: statement_target took the keyword for one
        alias, rest = None, rest - len("using")
    using = _USING.match(code, rest)
    if using is None:
        raise statement_error(text, rest, "expected USING <view or table> [AS] <alias> ON <condition>")
    source_name = parse_text[using.start(1) : using.end(1)]
    source_name = _bare(source_name)
    source_alias = using.group(2) if using.group(2) and using.group(2).lower() != "on" else source_name.split(".")[-1]
    whens = list(_WHEN.finditer(code, using.end()))
    if not whens:
        raise statement_error(text, using.end(), "expected ON <condition> WHEN [NOT] MATCHED ...")
    on = parse_text[using.end() : whens[0].start()].strip()
    if not on:
        raise statement_error(text, using.end(), "ON needs a condition")
    builder = MergeBuilder(
        _SqlTable(spark, path, dict(options)), spark.table(source_name), on, alias or "t", source_alias
    )
    ends = [w.start() for w in whens[1:]] + [len(code.rstrip().rstrip(";").rstrip())]
    for when, end in zip(whens, ends, strict=True):
        _clause(builder, parse_text, code, when, end)
    return builder.execute()


@dataclass
class _SqlTable:
    spark: Any
    path: str
    options: dict[str, Any]


def _clause(b: MergeBuilder, text: str, code: str, when: re.Match[str], end: int) -> None:
    """Add the WHEN clause ``when`` (it goes on to ``end``) to ``b``."""
    then = _THEN.search(code, when.end(), end)
    if then is None:
        raise statement_error(text, when.end(), "expected THEN UPDATE SET ... | DELETE | INSERT ...")
    matched = not when.group(1).lower().startswith("not")
    between = text[when.end() : then.start()].strip()
    condition = None
    if between:
        m = re.match(r"and\b(.*)$", between, re.IGNORECASE | re.DOTALL)
        if m is None or not m.group(1).strip():
            raise statement_error(text, when.end(), f"expected AND <condition> or THEN, not {between[:60]!r}")
        condition = m.group(1).strip()
    verb = " ".join(then.group(1).lower().split())
    body, body_code = text[then.end() : end], code[then.end() : end]
    if matched and verb == "update set":
        if body_code.strip() == "*":
            b.when_matched_update_all(condition)
        else:
            b.when_matched_update(set_assignments(text, code, then.end(), end), condition)
    elif matched and verb == "delete" and not body_code.strip():
        b.when_matched_delete(condition)
    elif not matched and verb == "insert":
        if body_code.strip() == "*":
            b.when_not_matched_insert_all(condition)
            return
        m = _INSERT_LIST.match(body_code)
        if m is None:
            raise statement_error(text, then.end(), "expected INSERT * or INSERT (<columns>) VALUES (<expressions>)")
        cols = [c.strip() for c in split_commas(body[m.start(1) : m.end(1)], m.group(1))]
        exprs = [e.strip() for e in split_commas(body[m.start(2) : m.end(2)], m.group(2))]
        if len(cols) != len(exprs) or not all(cols) or not all(exprs):
            raise statement_error(text, then.end(), f"INSERT names {len(cols)} columns and gives {len(exprs)} values")
        b.when_not_matched_insert(
            {unquote(c) if c.startswith("`") else c: e for c, e in zip(cols, exprs, strict=True)}, condition
        )
    else:
        raise IndexTablesSQLError(
            f"MERGE INTO: WHEN {when.group(1).upper()} THEN {then.group(1).upper()} is not supported "
            "(WHEN MATCHED: UPDATE SET or DELETE; WHEN NOT MATCHED: INSERT)"
        )
