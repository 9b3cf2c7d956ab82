"""IndexTables SQL: the grammar (pure parsing) and every statement run through real sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import connect_plugin
import executor_lib
from connect_plugin.grammar import IndexTablesSQLError, parse_predicate, split_spark_part
from connect_plugin.sql import is_indextables_statement, sql
from indextables_contract import filters as F
from tests.spark.test_datasource import TEXT_OPTS, ids, log_rows, make_df


def test_predicates_become_filter_trees() -> None:
    tree = parse_predicate("day = '2024-01-01' AND (n >= 5 OR msg indexquery 'a AND b') AND NOT lvl IN ('x', 'y')")
    assert tree == F.And(
        (
            F.Term("day", "2024-01-01"),
            F.Or((F.Between("n", lower=5), F.QueryString("a AND b", "msg"))),
            F.Not(F.TermIn("lvl", ("x", "y"))),
        )
    )
    assert parse_predicate("s LIKE 'ab%'") == F.Prefix("s", "ab")
    assert parse_predicate("s LIKE '%ab%'") == F.Contains("s", "ab")
    assert parse_predicate("s LIKE 'a_c%'") == F.Regex("s", "(?s)a.c.*")
    assert parse_predicate("s LIKE 'a.b'") == F.Term("s", "a.b")
    assert parse_predicate("_indexall indexquery 'x'") == F.QueryString("x")
    assert parse_predicate("indexqueryall('x y')") == F.QueryString("x y")
    assert parse_predicate("m textsearch 'x'") == F.QueryString("x", "m", "text")
    assert parse_predicate("m fieldmatch 'x'") == F.QueryString("x", "m", "exact")
    assert parse_predicate("n BETWEEN 1 AND 2.5") == F.Between("n", 1, 2.5)
    assert parse_predicate("n < 3") == F.Between("n", upper=3, upper_inclusive=False)
    assert parse_predicate("x IS NULL") == F.Not(F.Exists("x"))
    assert parse_predicate("x IS NOT NULL") == F.Exists("x")


def test_function_calls_become_spark_conditions() -> None:
    tree = parse_predicate("msg indexquery 'a' AND (length(msg) > 3 OR id = 2) AND lower(level) IN ('x')")
    assert split_spark_part(tree) == (
        F.QueryString("a", "msg"),
        "(length(msg) > 3 OR id = 2) AND (lower(level) IN ('x'))",
    )
    assert split_spark_part(parse_predicate("indexqueryall('x') AND day = '1'"))[1] is None
    assert parse_predicate("NOT (id = 1)") == F.Not(F.Term("id", 1))
    with pytest.raises(IndexTablesSQLError, match="column 1: a predicate with function calls can be combined"):
        parse_predicate("msg indexquery 'a' OR lower(x) = 'y'")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("a = = 3", "line 1, column 5"),
        ("a indexquery error", "line 1, column 14"),
        ("a = 1 AND\n  b >", "line 2, column 6"),
    ],
)
def test_syntax_errors_name_the_position(text: str, where: str) -> None:
    with pytest.raises(IndexTablesSQLError, match=where):
        parse_predicate(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("MERGE SPLIT '/t'", r"line 1, column 7: 'SPLIT' is not a keyword .*\(did you mean MERGE SPLITS\?\)"),
        (
            "-- state\nDESCRIBE INDEXTABLES STAT `/t`",
            r"line 2, column 22: 'STAT' is not a keyword .*\(did you mean DESCRIBE INDEXTABLES STATE\?\)",
        ),
        ("describe indextable state '/t'", r"column 10: 'indextable' .*\(did you mean DESCRIBE INDEXTABLES STATE\?\)"),
        ("DESCRIBE INDEXTABLES '/t'", r"column 21: a keyword is missing after DESCRIBE INDEXTABLES \(one of STATE, "),
        ("WAIT FOR INDEXTABLES", r"\(did you mean WAIT FOR INDEXTABLES PREWARM JOBS\?\)"),
    ],
)
def test_a_command_keyword_misspelt_names_the_command(text: str, message: str) -> None:
    """Issue 76: MERGE SPLIT went to Spark's generic parse error, DESCRIBE INDEXTABLES STAT got a caret."""
    from connect_plugin.sql import plan_statement

    with pytest.raises(IndexTablesSQLError, match=message):
        plan_statement(None, text)  # type: ignore[arg-type]  # raises before the session is used


@pytest.mark.parametrize(
    "text",
    ["MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", "DROP TABLE t", "DESCRIBE TABLE t", "RESET"],
)
def test_sparks_own_statements_get_no_command_hint(text: str) -> None:
    from connect_plugin.grammar import command_hint

    assert command_hint(text) is None


def test_commands_through_sql(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "s"
    for i in range(3):
        connect_plugin.write(make_df(spark, 6, start=i * 6), str(table), partition_by=["day"], options=TEXT_OPTS)
    t = f"'{table}'"
    assert sql(spark, f"DESCRIBE INDEXTABLES TRANSACTION LOG {t}").collect()[0]["version"] == 3
    state = sql(spark, f"describe indextables state indextables.`{table}`").collect()[0]
    assert (state["version"], state["num_files"]) == (3, len(executor_lib.open_log(str(table)).snapshot().files))
    merged = sql(spark, f"MERGE SPLITS {t} WHERE day = '2024-01-01' TARGET SIZE 100M MAX SOURCE SPLITS PER MERGE 10")
    assert {r["partitionValues"] for r in merged.collect()} == {'{"day": "2024-01-01"}'}
    assert ids(connect_plugin.read(spark, str(table))) == list(range(18))
    assert sql(spark, f"CHECKPOINT INDEXTABLES {t}").collect()[0]["checkpoint_version"] == 4
    assert sql(spark, f"PURGE INDEXTABLE {t} OLDER THAN 7 DAYS DRY RUN").filter("kind = 'split'").count() == 0
    with pytest.raises(Exception, match="below the minimum of 24h"):
        sql(spark, f"PURGE INDEXTABLE {t} OLDER THAN 2 HOURS")
    assert sql(spark, f"PREWARM INDEXTABLES CACHE {t} WHERE day = '2024-01-03'").count() >= 1
    assert sql(spark, "DESCRIBE INDEXTABLES DISK CACHE").count() == 1
    dropped = sql(spark, f"DROP INDEXTABLES PARTITIONS FROM {t} WHERE day = '2024-01-02'").collect()
    assert dropped
    assert ids(connect_plugin.read(spark, str(table))) == [i for i in range(18) if i % 3 != 1]
    assert sql(spark, f"TRUNCATE INDEXTABLES TIME TRAVEL {t} DRY RUN").count() >= 1
    assert sql(spark, "FLUSH INDEXTABLES DISK CACHE").collect()[0]["splitsCached"] == 0
    assert sql(spark, "SELECT 1 AS one").collect()[0]["one"] == 1  # anything else goes to spark.sql
    # DESCRIBE INDEXTABLES HISTORY: a grammar rule named after the contract's history command, no SQL code
    history = sql(spark, f"DESCRIBE INDEXTABLES HISTORY {t} LIMIT 2").collect()
    assert [r["version"] for r in history] == [h.version for h in executor_lib.open_log(str(table)).history(2)]
    assert len(history) == 2 and history[0]["version"] > history[1]["version"]
    assert sql(spark, f"describe indextables history {t}").count() == len(executor_lib.open_log(str(table)).history())


def test_indexquery_select_equals_spark_filtering(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "q"
    connect_plugin.write(make_df(spark, 60), str(table), options=TEXT_OPTS)
    rows = log_rows(60)
    got = sql(
        spark,
        f"SELECT id, level FROM indextables.`{table}` WHERE (msg indexquery 'timeout' OR level = 'WARN') "
        "AND NOT id IN (5, 10) AND score >= 2 ORDER BY id",
    ).collect()
    expected = [r[0] for r in rows if ("timeout" in r[2] or r[1] == "WARN") and r[0] not in (5, 10) and r[3] >= 2]
    assert [r["id"] for r in got] == expected
    spark_side = (
        connect_plugin.read(spark, str(table))
        .filter("(msg LIKE '%timeout%' OR level = 'WARN') AND NOT id IN (5, 10) AND score >= 2")
        .orderBy("id")
    )
    assert [r["id"] for r in spark_side.collect()] == expected
    all_fields = sql(spark, f"SELECT count(*) AS n FROM indextables.`{table}` WHERE indexqueryall('timeout')")
    assert all_fields.collect()[0]["n"] == sum(1 for r in rows if "timeout" in r[2])
    text = sql(spark, f"SELECT id FROM indextables.`{table}` WHERE msg textsearch 'host-3'").collect()
    assert sorted(r["id"] for r in text) == [r[0] for r in rows if "host-3 " in r[2]]
    exact = sql(spark, f"SELECT id FROM indextables.`{table}` WHERE level fieldmatch 'ERROR'").collect()
    assert sorted(r["id"] for r in exact) == [r[0] for r in rows if r[1] == "ERROR"]
    with_calls = sql(
        spark,
        f"SELECT id FROM indextables.`{table}` AS t WHERE msg indexquery 'timeout' AND lower(level) = 'error' "
        "AND id % 2 = 0 ORDER BY id",
    ).collect()
    assert [r["id"] for r in with_calls] == [
        r[0] for r in rows if "timeout" in r[2] and r[1] == "ERROR" and r[0] % 2 == 0
    ]
    assert with_calls, "the case must select some rows"
    with pytest.raises(IndexTablesSQLError, match="function calls are not supported in the WHERE of merge"):
        sql(spark, f"MERGE SPLITS '{table}' WHERE lower(day) = 'x'")
    with pytest.raises(Exception, match="textsearch on 'level': it is not a tokenized text field"):
        sql(spark, f"SELECT id FROM indextables.`{table}` WHERE level textsearch 'ERROR'").collect()
    with pytest.raises(Exception, match="fieldmatch on 'msg': it is not an exact string field"):
        sql(spark, f"SELECT id FROM indextables.`{table}` WHERE msg fieldmatch 'x'").collect()
    assert executor_lib.open_log(str(table)).latest_version() == 1  # reads never write


def test_wildcards_long_tokens_and_mixed_number_literals_through_sql(spark: Any, tmp_path: Path) -> None:
    from decimal import Decimal

    table = tmp_path / "w"
    trace = "trace" + "0123456789abcdef" * 12  # a 197-character token
    rows = [
        (1, "ConfigurationManager started", Decimal("0.00")),
        (2, f"KafkaBroker id={trace}", Decimal("2.50")),
        (3, "CONFIGURED the broker", Decimal("-1.25")),
    ]
    df = spark.createDataFrame(rows, "id long, msg string, dec decimal(10,2)")
    connect_plugin.write(df, str(table), options={"spark.indextables.indexing.typemap.msg": "text"})

    def ids_of(where: str) -> list[int]:
        return [
            r["id"] for r in sql(spark, f"SELECT id FROM indextables.`{table}` WHERE {where} ORDER BY id").collect()
        ]

    assert ids_of("msg indexquery 'Config*'") == [1, 3]
    assert ids_of("msg indexquery '*Broker*'") == [2, 3]
    assert ids_of("msg indexquery 'Con?ig*' AND dec >= 0") == [1]
    assert ids_of("indexqueryall('*configur*')") == [1, 3]
    assert ids_of(f"msg indexquery '{trace}'") == [2]
    assert ids_of("msg indexquery 'broker AND NOT kafkabroker'") == [3]
    assert ids_of("dec > 0") == [2]
    assert ids_of("dec = 2.5 OR id > 2.5") == [2, 3]
    assert ids_of("id < 1.5") == [1]
    assert ids_of("id IN (1.5, 2.0)") == [2]
    count = sql(spark, f"SELECT count(*) AS n FROM indextables.`{table}` WHERE msg indexquery '*Configur*'")
    assert count.collect()[0]["n"] == 2
    with pytest.raises(Exception, match="fuzzy matching"):
        ids_of("msg indexquery 'config~1'")


def test_nested_columns_round_trip_and_answer_nested_queries(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "nested"
    df = spark.createDataFrame(
        [
            (1, ("Alice", 31), ["red", "Blue"], {"color": "red", "size": "L"}, '{"one": "two", "n": 5}'),
            (2, ("Bob", 45), ["green"], {"color": "blue"}, "[1, 2]"),
            (3, None, None, {}, "not json"),
        ],
        "id long, user struct<name: string, age: int>, tags array<string>, attrs map<string,string>, js string",
    )
    connect_plugin.write(df, str(table), options={"spark.indextables.indexing.typemap.js": "json"})
    back = connect_plugin.read(spark, str(table)).orderBy("id").collect()
    assert [r.asDict(recursive=True) for r in back] == [r.asDict(recursive=True) for r in df.orderBy("id").collect()]

    def ids_of(where: str) -> list[int]:
        return [
            r["id"] for r in sql(spark, f"SELECT id FROM indextables.`{table}` WHERE {where} ORDER BY id").collect()
        ]

    assert ids_of("user.name = 'Alice'") == [1]
    assert ids_of("user.age > 40 AND id > 0") == [2]
    assert ids_of("attrs.color = 'blue'") == [2]
    assert ids_of("tags indexquery 'blue'") == [1]
    assert ids_of("tags indexquery 'gr*'") == [2]
    assert ids_of("_indexall indexquery 'user.name:alice'") == [1]
    assert ids_of("_indexall indexquery 'user.age:[30 TO 40]'") == [1]
    assert ids_of("_indexall indexquery 'attrs.size:l'") == [1]
    assert ids_of("_indexall indexquery 'js.one:two'") == [1]
    assert ids_of("_indexall indexquery 'js._raw:json'") == [3]
    assert ids_of("user.name = 'Alice' AND tags indexquery 'red'") == [1]
    assert ids_of("attrs['color'] = 'blue' OR tags[0] = 'red'") == [1, 2]  # Spark evaluates these
    aliased = sql(spark, f"SELECT t.id FROM indextables.`{table}` AS t WHERE t.user.name = 'Bob'").collect()
    assert [r["id"] for r in aliased] == [2]
    spark_side = connect_plugin.read(spark, str(table)).filter("user.name = 'Alice' OR attrs['color'] = 'blue'")
    assert sorted(r["id"] for r in spark_side.collect()) == [1, 2]


def test_the_jvms_indexquery_boolean_cases(spark: Any, tmp_path: Path) -> None:
    """IndexTables4Spark's IndexQueryBooleanTest: index operators under SQL OR, AND and NOT, mixed with
    plain predicates, and ``_indexall`` over several text columns."""

    def table(name: str, rows: list[tuple[Any, ...]], schema: str) -> str:
        path = str(tmp_path / name)
        df = spark.createDataFrame(rows, schema)
        text = {
            f"spark.indextables.indexing.typemap.{c}": "text" for c in ("url", "content", "tags") if c in df.columns
        }
        connect_plugin.write(df, path, options=text)
        return path

    def ids_of(path: str, where: str) -> list[Any]:
        return [r["id"] for r in sql(spark, f"SELECT id FROM indextables.`{path}` WHERE {where} ORDER BY id").collect()]

    urls = table(
        "urls",
        [
            (1, "user1", "https://community.example.com/page"),
            (2, "user2", "https://curl.example.com/download"),
            (3, "user3", "https://other.example.com/page"),
            (4, "user1", "https://community.example.com/forum"),
        ],
        "id int, uid string, url string",
    )
    assert ids_of(urls, "url indexquery 'community OR curl'") == [1, 2, 4]
    assert ids_of(urls, "(url indexquery 'community') OR (url indexquery 'curl')") == [1, 2, 4]
    mixed = table(
        "mixed",
        [
            (1, "user1", "CRITICAL", "https://one.example.com/page"),
            (2, "user1", "CLASS2", "https://two.example.com/download"),
            (3, "user1", "CLASS1", "https://two.example.com/page"),
            (4, "user1", "CLASS2", "https://one.example.com/forum"),
            (5, "user2", "CRITICAL", "https://three.example.com/page"),
        ],
        "id int, uid string, urgency string, url string",
    )
    where = (
        "uid = 'user1' AND ((urgency = 'CRITICAL' AND url indexquery 'one') "
        "OR (urgency <> 'CLASS2' AND url indexquery 'two'))"
    )
    assert ids_of(mixed, where) == [1, 3]
    nested = table(
        "nested",
        [
            (1, "term1", "active", 10),
            (2, "term2", "inactive", 5),
            (3, "term1", "inactive", 8),
            (4, "term2", "active", 3),
            (5, "other", "active", 15),
        ],
        "id int, content string, status string, priority int",
    )
    where = "((content indexquery 'term1') OR (content indexquery 'term2')) AND (status = 'active' OR priority > 5)"
    assert ids_of(nested, where) == [1, 3, 4]
    negated = table(
        "negated",
        [
            (1, "excluded term here", "active"),
            (2, "good content", "active"),
            (3, "excluded term also", "inactive"),
            (4, "another good one", "active"),
        ],
        "id int, content string, status string",
    )
    assert ids_of(negated, "NOT (content indexquery 'excluded') AND status = 'active'") == [2, 4]
    docs = table(
        "docs",
        [
            ("doc1", "apache spark", "distributed"),
            ("doc2", "machine learning", "spark"),
            ("doc3", "data engineering", "pipelines"),
            ("doc4", "streaming", "spark applications"),
        ],
        "id string, content string, tags string",
    )
    assert ids_of(docs, "_indexall indexquery 'spark'") == ["doc1", "doc2", "doc4"]


def test_tables_by_name(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "named"
    connect_plugin.write(make_df(spark, 12), str(table), options=TEXT_OPTS)
    connect_plugin.register_table(spark, "app_logs", str(table))
    try:
        state = sql(spark, "DESCRIBE INDEXTABLES STATE app_logs").collect()[0]
        assert state["num_files"] == len(executor_lib.open_log(str(table)).snapshot().files)
        got = sql(spark, "SELECT id FROM app_logs l WHERE msg indexquery 'timeout' ORDER BY id").collect()
        assert [r["id"] for r in got] == [r[0] for r in log_rows(12) if "timeout" in r[2]]
        assert connect_plugin.IndexTable.for_name(spark, "app_logs").to_df().count() == 12
        assert sql(spark, "CHECKPOINT INDEXTABLES app_logs").collect()[0]["checkpoint_version"] == 1
        with pytest.raises(connect_plugin.UnknownTableError, match=r"spark\.indextables\.table\.nope to its path"):
            sql(spark, "MERGE SPLITS nope")
    finally:
        spark.conf.unset("spark.indextables.table.app_logs")


@pytest.mark.parametrize(
    ("text", "ours"),
    [
        ("SELECT 'textsearch' AS x", False),
        ("SELECT \"msg indexquery 'a'\" AS x", False),
        ("SELECT 1 AS textsearch, 2 AS fieldmatch, 3 AS indexqueryall", False),
        ("SELECT `indexquery` FROM t", False),
        ("SELECT 1 -- WHERE msg textsearch 'x'", False),
        ("SELECT 1 /* nested /* msg fieldmatch 'x' */ still a comment */", False),
        ("SELECT 'it''s a textsearch ''x''' AS y", False),
        ("SELECT id FROM indextables.`/t` WHERE msg textsearch 'x'", True),
        ("SELECT id FROM indextables.`/t` WHERE msg INDEXQUERY r'a\\b'", True),
        ("SELECT id FROM t WHERE indexqueryall ('x')", True),
        ("-- maintenance\nMERGE SPLITS '/t'", True),
    ],
)
def test_only_real_uses_of_the_index_operators_are_ours(text: str, ours: bool) -> None:
    """Issue 20, hole 6: before the fix any text containing the words went to the plugin's parser."""
    assert is_indextables_statement(text) == ours


def test_quoting_follows_sparks_lexer() -> None:
    tree = parse_predicate("`a``b` = 'it''s' AND `c` = \"d\\\"q\" AND m indexquery r'x\\d' AND n = 'a\\tb\\u0041\\101'")
    assert tree == F.And(
        (
            F.Term("a`b", "it's"),
            F.Term("c", 'd"q'),
            F.QueryString("x\\d", "m"),
            F.Term("n", "a\tbAA"),
        )
    )


LITERALS = [
    r"'a''b'",
    r"'a\nb'",
    r"'a\'b'",
    '"d""q"',
    r'"d\"q"',
    r"r'a\nb'",
    r"'a\%b\_c'",
    r"'\u0041\101'",
    r"'x\zy'",
    r"'\''''",
    r"'tab\there'",
    r"'\U0001F600'",
]


def test_literals_and_paths_unquote_as_spark_does(spark: Any, tmp_path: Path) -> None:
    from connect_plugin.lexer import unquote as _unquote

    row = spark.sql("SELECT " + ", ".join(f"{lit} AS c{i}" for i, lit in enumerate(LITERALS))).collect()[0]
    assert [_unquote(lit) for lit in LITERALS] == list(row)
    assert spark.sql("SELECT 1 AS `a``b`").columns == [_unquote("`a``b`")]
    assert sql(spark, "SELECT 'textsearch' AS x /* msg textsearch 'y' */").collect()[0]["x"] == "textsearch"
    table = tmp_path / "odd`name"  # a back-quote in the path: doubled inside `...`
    connect_plugin.write(make_df(spark, 12), str(table), options=TEXT_OPTS)
    quoted = str(table).replace("`", "``")
    got = sql(spark, f"SELECT id FROM indextables.`{quoted}` WHERE msg indexquery 'timeout' ORDER BY id").collect()
    assert [r["id"] for r in got] == [r[0] for r in log_rows(12) if "timeout" in r[2]]
    assert sql(spark, f"DESCRIBE INDEXTABLES TRANSACTION LOG indextables.`{quoted}`").collect()[0]["version"] == 1


def test_statements_build_typed_commands() -> None:
    """Each maintenance statement becomes the contract command (and the client's own arguments) in one
    pass over its parse tree, with no Spark session."""
    from connect_plugin.grammar import STATEMENT_PARSER
    from connect_plugin.statements import OnSession, OnTable, build_statement
    from indextables_contract import commands as C

    def built(text: str) -> object:
        return build_statement(STATEMENT_PARSER.parse(text), text, lambda target: "/t")

    assert built("DESCRIBE INDEXTABLES HISTORY '/t' LIMIT 3") == OnTable("/t", C.History(limit=3))
    assert built("PURGE INDEXTABLE '/t' OLDER THAN 2 DAYS DRY RUN") == OnTable("/t", C.Purge(48.0, None, True))
    # without OLDER THAN the cluster reads spark.indextables.purge.defaultRetentionHours (tests/connect_plugin/test_purge_retention.py)
    assert built("PURGE INDEXTABLE '/t'") == OnTable("/t", C.Purge(None, None, False))
    day = '{"column":"day","op":"term","value":"x"}'
    assert built("MERGE SPLITS '/t' WHERE day = 'x' TARGET SIZE 100M") == OnTable(
        "/t", C.MergePlan(filter=day, target_size="100M")
    )
    assert built("PREWARM INDEXTABLES CACHE '/t' FOR SEGMENTS (TERM_DICT) WHERE day = 'x'") == OnTable(
        "/t", C.Prewarm(filter=day), (("segments", ["TERM_DICT"]), ("fields", None), ("parallelism", None))
    )
    assert built("FLUSH INDEXTABLES DISK CACHE") == OnTable(None, C.FlushCache())
    assert built("DESCRIBE INDEXTABLES DISK CACHE") == OnSession("describe_cache")  # IndexTables4Spark's columns
    assert built("DESCRIBE INDEXTABLES PROFILER CACHE") == OnSession("describe_profiler", (True,))
    with pytest.raises(IndexTablesSQLError, match="function calls are not supported"):
        built("DROP INDEXTABLES PARTITIONS FROM '/t' WHERE upper(day) = 'X'")


def test_a_statement_parsed_again_is_the_same_tree_and_builds_the_same_plan() -> None:
    from lark.exceptions import UnexpectedInput

    from connect_plugin.grammar import STATEMENT_PARSER, parse_statement

    text = "SELECT id, msg FROM indextables.`/t` WHERE msg indexquery 'error AND disk' LIMIT 20"
    first = parse_statement(text)
    assert parse_statement(text) is first  # remembered: not parsed again
    assert first == STATEMENT_PARSER.parse(text)
    bad = "SELECT FROM WHERE indextables.`/t`"
    for _ in range(2):  # a statement that does not parse raises every time
        with pytest.raises(UnexpectedInput):
            parse_statement(bad)
