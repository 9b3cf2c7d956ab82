"""Every SELECT through ``connect_plugin.sql`` equals Spark over the same data as Parquet, pushed or not.

One table (two commits, the second with fewer fast fields; partitioned by ``region``, NULLs in several columns) and the same rows as
a Parquet view; statements generated from templates with a fixed seed — projections, WHERE with
comparisons and index operators (also under OR), GROUP BY aggregates, LIMIT, subqueries, CTEs,
joins and unions — run in classic and Spark Connect sessions. Then what the pushdown promises:
``count(*)`` opens no split, a pushed aggregate ships no row, a projection reads only its columns.
"""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from connect_plugin.sql import explain, plan_statement

WORDS = ["alpha", "beta", "gamma", "delta", "error", "timeout", "disk", "cache", "user", "node"]
LEVELS = ["INFO", "WARN", "ERROR", None]
SERVICES = ["api", "db", "web"]


def _rows(n: int, seed: int) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        words = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(2, 6)))
        out.append(
            (
                i + seed * 10_000,
                rnd.choice(LEVELS),
                rnd.choice(SERVICES),
                None if rnd.random() < 0.1 else rnd.randint(0, 500),
                round(rnd.uniform(0, 10), 3),
                words,
                rnd.choice(["eu", "us"]),
            )
        )
    return out


SCHEMA = "id long, level string, service string, latency int, score double, message string, region string"


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory, classic_spark: Any) -> dict[str, Any]:
    """Paths of the IndexTables table and its Parquet twin (written once, through the classic session)."""
    spark = classic_spark
    root = tmp_path_factory.mktemp("select")
    it, pq = str(root / "it"), str(root / "pq")
    # the second commit's splits narrow the fast fields: aggregates over level, service or score
    # run in Tantivy on the first commit's splits and over Arrow rows on the second's
    for seed, fast in ((1, {}), (2, {"spark.indextables.indexing.fastfields": "id,latency"})):
        df = spark.createDataFrame(_rows(300, seed), SCHEMA)
        connect_plugin.write(
            df,
            it,
            mode="append",
            partition_by=["region"],
            options={"spark.indextables.indexing.typemap.message": "text", **fast},
        )
        df.write.mode("append").parquet(pq)
    return {"it": it, "pq": pq}


def _normal(rows: list[Any]) -> list[tuple[Any, ...]]:
    def value(v: Any) -> Any:
        if isinstance(v, float):
            return None if math.isnan(v) else round(v, 6)
        return v

    return sorted((tuple(value(v) for v in r) for r in rows), key=repr)


def _statements(seed: int) -> list[tuple[str, str]]:
    """(IndexTables statement with {t}, the same over Parquet with {t}) pairs."""
    rnd = random.Random(seed)
    out: list[tuple[str, str]] = []

    def predicate() -> tuple[str, str]:
        word = rnd.choice(WORDS)
        column = (f"message indexquery '{word}'", f"array_contains(split(message, ' '), '{word}')")
        choices = [
            (f"latency > {rnd.randint(0, 500)}",) * 2,
            (f"level = '{rnd.choice(LEVELS[:3])}'",) * 2,
            (f"service IN ('api', '{rnd.choice(SERVICES)}')",) * 2,
            ("level IS NULL",) * 2,
            (f"region = '{rnd.choice(['eu', 'us'])}'",) * 2,
            (f"score BETWEEN 1 AND {rnd.randint(2, 9)}",) * 2,
            column,
            (f"({column[0]} OR latency < 50)", f"({column[1]} OR latency < 50)"),
            (f"{column[0]} AND abs(latency - 250) < 100", f"{column[1]} AND abs(latency - 250) < 100"),
            ("NOT (level = 'INFO')",) * 2,
        ]
        return rnd.choice(choices)

    for _ in range(4):
        a, b = predicate()
        cols = rnd.choice(["id, level", "*", "id, latency, region", "upper(service) AS s, id"])
        out.append((f"SELECT {cols} FROM {{t}} WHERE {a}", f"SELECT {cols} FROM {{t}} WHERE {b}"))
    for _ in range(6):
        a, b = predicate()
        group = rnd.choice(["level", "service", "region", "level, service", "region, level"])
        measures = rnd.choice(
            [
                "count(*)",
                "count(*) AS n, sum(latency)",
                "avg(latency), min(latency), max(latency)",
                "count(latency), max(score), min(message)",
                "sum(score), avg(score)",
            ]
        )
        where = rnd.choice([("", ""), (f" WHERE {a}", f" WHERE {b}")])
        out.append(
            (
                f"SELECT {group}, {measures} FROM {{t}}{where[0]} GROUP BY {group}",
                f"SELECT {group}, {measures} FROM {{t}}{where[1]} GROUP BY {group}",
            )
        )
    out += [
        ("SELECT count(*) FROM {t}",) * 2,
        ("SELECT count(*) FROM {t} WHERE region = 'eu'",) * 2,
        ("SELECT region, count(*) FROM {t} GROUP BY region ORDER BY count(*) DESC",) * 2,
        ("SELECT level, count(*) AS n FROM {t} GROUP BY level ORDER BY n DESC, level LIMIT 2",) * 2,
        ("SELECT max(latency) FROM {t} WHERE level = 'ERROR'",) * 2,
        ("SELECT count(*), sum(latency) FROM {t} WHERE latency > 100000",) * 2,
        ("SELECT level, count(*) FROM {t} WHERE latency > 100000 GROUP BY level",) * 2,
        ("SELECT level, count(*) FROM (SELECT * FROM {t} WHERE latency > 250) s GROUP BY level",) * 2,
        (
            "WITH e AS (SELECT id, service FROM {t} WHERE level = 'ERROR') SELECT service, count(*) FROM e GROUP BY service",
        )
        * 2,
        ("SELECT a.id, b.level FROM {t} a JOIN {t} b ON a.id = b.id + 1 WHERE a.latency > 400",) * 2,
        ("SELECT id FROM {t} WHERE latency < 20 UNION ALL SELECT id FROM {t} WHERE latency > 480",) * 2,
        ("SELECT level, count(*) FROM {t} GROUP BY level HAVING count(*) > 10",) * 2,
        ("SELECT DISTINCT service FROM {t}",) * 2,
        (
            "SELECT service, count(*) FROM {t} WHERE message indexquery 'error' GROUP BY service",
            "SELECT service, count(*) FROM {t} WHERE array_contains(split(message, ' '), 'error') GROUP BY service",
        ),
        (
            "SELECT x.id FROM {t} x WHERE x.message indexquery 'disk' OR x.id IN "
            "(SELECT id FROM {t} WHERE message indexquery 'cache' AND latency < 30)",
            "SELECT x.id FROM {t} x WHERE array_contains(split(x.message, ' '), 'disk') OR x.id IN "
            "(SELECT id FROM {t} WHERE array_contains(split(message, ' '), 'cache') AND latency < 30)",
        ),
    ]
    return out


@pytest.mark.timeout(1200)  # about 60 statements, each a Spark job or two
@pytest.mark.parametrize("seed", [7])
def test_generated_statements_equal_spark_over_parquet(spark: Any, tables: dict[str, Any], seed: int) -> None:
    spark.read.parquet(tables["pq"]).createOrReplaceTempView("pq_twin")
    target = f"indextables.`{tables['it']}`"
    failures = []
    for ours, theirs in _statements(seed):
        got = _normal(connect_plugin.sql(spark, ours.format(t=target)).collect())
        want = _normal(spark.sql(theirs.format(t="pq_twin")).collect())
        if got != want:
            failures.append(f"{ours}\n  got  {got[:5]} ({len(got)} rows)\n  want {want[:5]} ({len(want)} rows)")
    assert not failures, "\n".join(failures)


def test_names_and_types_are_sparks(spark: Any, tables: dict[str, Any]) -> None:
    spark.read.parquet(tables["pq"]).createOrReplaceTempView("pq_twin")
    for statement in (
        "SELECT LEVEL, COUNT(*), Sum(latency), avg(LATENCY), min(score), max(region) AS r FROM {t} GROUP BY LEVEL",
        "SELECT count(1), count(latency) FROM {t}",
    ):
        ours = connect_plugin.sql(spark, statement.format(t=f"indextables.`{tables['it']}`"))
        theirs = spark.sql(statement.format(t="pq_twin"))
        assert ours.schema.simpleString() == theirs.schema.simpleString(), statement
        assert _normal(ours.collect()) == _normal(theirs.collect()), statement


def test_limit_reads_at_most_the_limit(spark: Any, tables: dict[str, Any]) -> None:
    text = f"SELECT id, level FROM indextables.`{tables['it']}` WHERE latency > 10 LIMIT 7"
    plan = plan_statement(spark, text)
    assert plan.reads[0][1].plan.limit == 7
    rows = connect_plugin.sql(spark, text).collect()
    every = {r.id for r in connect_plugin.sql(spark, text.replace(" LIMIT 7", "")).collect()}
    assert len(rows) == 7 and {r.id for r in rows} <= every


def test_projection_reads_only_the_columns_used(spark: Any, tables: dict[str, Any]) -> None:
    table = f"indextables.`{tables['it']}`"
    pushed = f"SELECT id, upper(level) FROM {table} t WHERE t.latency > 3 AND message indexquery 'disk' ORDER BY id"
    ((_, read),) = plan_statement(spark, pushed).reads
    assert read.dataframe(spark).columns == ["id", "level"]  # the WHERE runs on the executors
    assert "columns: the table's columns among" in explain(spark, pushed)
    in_spark = f"SELECT id FROM {table} WHERE abs(latency) > 3"
    ((_, read),) = plan_statement(spark, in_spark).reads
    assert read.dataframe(spark).columns == ["id", "latency"]
    joined = f"SELECT a.id FROM {table} a JOIN {table} b ON a.id = b.id WHERE b.score > 1"
    assert [r.dataframe(spark).columns for _, r in plan_statement(spark, joined).reads] == [["id", "score"]] * 2


def test_count_star_opens_no_split(spark: Any, tables: dict[str, Any], tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(tables["it"], copy)
    for split in copy.rglob("*.split"):
        split.unlink()  # only the transaction log is left: a split opened would fail the query
    target = f"indextables.`{copy}`"
    assert connect_plugin.sql(spark, f"SELECT count(*) FROM {target}").collect()[0][0] == 600
    by_region = connect_plugin.sql(
        spark, f"SELECT region, count(*) AS n FROM {target} WHERE region = 'eu' GROUP BY region"
    )
    expected = spark.read.parquet(tables["pq"]).where("region = 'eu'").count()
    assert [tuple(r) for r in by_region.collect()] == [("eu", expected)]
    assert "no split opened" in explain(spark, f"SELECT count(*) FROM {target}")


def test_count_star_from_the_log_is_answered_at_analysis(spark: Any, tmp_path: Path) -> None:
    """A ``count(*)`` the log answers comes from Spark's analysis of the read: no job runs (checked
    where Spark can tell: classic sessions), and each statement is analysed anew, so it sees the
    latest commit; a ``count(*)`` the log cannot answer runs its tasks."""
    table = str(tmp_path / "t")
    target = f"indextables.`{table}`"
    rows = _rows(50, 3)
    connect_plugin.write(
        spark.createDataFrame(rows, SCHEMA),
        table,
        partition_by=["region"],
        options={"spark.indextables.indexing.typemap.message": "text"},
    )
    assert connect_plugin.sql(spark, f"SELECT count(*) FROM {target}").collect()[0][0] == 50
    context = (
        getattr(spark, "sparkContext", None) if not type(spark).__module__.startswith("pyspark.sql.connect") else None
    )

    def jobs(group: str) -> list[str]:
        tracker = context.statusTracker()
        return [f"job {j}: {tracker.getJobInfo(j)}" for j in tracker.getJobIdsForGroup(group)]

    if context is not None:
        context.setJobGroup("count-at-analysis", "count(*)")
    assert connect_plugin.sql(spark, f"SELECT count(*) FROM {target}").collect()[0][0] == 50
    eu = sum(r[-1] == "eu" for r in rows)
    by_region = f"SELECT count(*) FROM {target} WHERE region = 'eu'"
    assert connect_plugin.sql(spark, by_region).collect()[0][0] == eu
    if context is not None:
        assert jobs("count-at-analysis") == []
        context.setJobGroup("count-with-tasks", "count(*)")
    api = sum(r[2] == "api" for r in rows)
    assert connect_plugin.sql(spark, f"SELECT count(*) FROM {target} WHERE service = 'api'").collect()[0][0] == api
    if context is not None:
        assert jobs("count-with-tasks") != []
        context.setJobGroup("other", "other")
    assert "no task ran" in explain(spark, f"SELECT count(*) FROM {target}")
    assert "no task ran" not in explain(spark, f"SELECT count(*) FROM {target} WHERE service = 'api'")
    connect_plugin.write(spark.createDataFrame(_rows(7, 4), SCHEMA), table, mode="append", partition_by=["region"])
    assert connect_plugin.sql(spark, f"SELECT count(*) FROM {target}").collect()[0][0] == 57


def test_pushed_aggregate_ships_no_row(spark: Any, tables: dict[str, Any]) -> None:
    text = (
        f"SELECT service, count(*), avg(latency) FROM indextables.`{tables['it']}` "
        "WHERE message indexquery 'error' GROUP BY service"
    )
    plan = plan_statement(spark, text)
    assert plan.aggregate is not None and not plan.reads
    plan.dataframe(spark).collect()
    result = plan.aggregate.result
    # the first commit's splits aggregate in Tantivy; the second's (service not fast) over their Arrow rows
    assert result["index_splits"] > 0 and result["row_splits"] > 0
    assert result["index_splits"] + result["row_splits"] == result["splits"]
    assert f"{result['index_splits']} by Tantivy aggregations, {result['row_splits']} by Arrow" in explain(spark, text)


def test_table_names_and_statements_without_tables(spark: Any, tables: dict[str, Any]) -> None:
    connect_plugin.register_table(spark, "select_logs", tables["it"])
    rows = connect_plugin.sql(spark, "SELECT select_logs.id FROM select_logs WHERE select_logs.id < 10003").collect()
    assert sorted(r.id for r in rows) == [10000, 10001, 10002]
    assert connect_plugin.sql(spark, "SELECT 1 AS one").collect()[0].one == 1
    assert plan_statement(spark, "SELECT 'indexquery' AS x FROM range(1)") is None


@pytest.mark.parametrize("time_zone", ["UTC", "America/New_York"])
def test_timestamp_literals_without_an_offset_are_in_the_session_time_zone(
    spark: Any, tmp_path: Path, time_zone: str
) -> None:
    """As Spark reads ``ts >= '2024-01-01 10:00:00'``: a wall time in ``spark.sql.session.timeZone``,
    also where the filter is pushed to the executors as a filter tree (pushed aggregates, GROUP BY)."""
    from tests.spark.test_datasource import SCHEMA as LOG_SCHEMA
    from tests.spark.test_datasource import log_rows

    it, pq = str(tmp_path / "it"), str(tmp_path / "pq")
    df = spark.createDataFrame(log_rows(400), LOG_SCHEMA)
    connect_plugin.write(df, it, options={"spark.indextables.indexing.typemap.msg": "text"})
    df.write.parquet(pq)
    statements = [
        "SELECT count(*) FROM {t} WHERE ts >= '2024-01-01 02:00:00' AND ts < '2024-01-01 03:00:00'",
        "SELECT level, count(*), max(score) FROM {t} WHERE ts < '2024-01-01T03:30:00' GROUP BY level",
        "SELECT count(*) FROM {t} WHERE ts >= '2024-01-01' AND msg indexquery 'timeout'",
        "SELECT id FROM {t} WHERE ts BETWEEN '2024-01-01 02:00:00' AND '2024-01-01 02:30:00'",
        # timestamps in a pushed aggregate's result (built here as an Arrow local relation)
        "SELECT level, min(ts), max(ts), count(*) FROM {t} WHERE ts < '2024-01-01 04:00:00' GROUP BY level",
        "SELECT ts, count(*) FROM {t} WHERE id < 5 GROUP BY ts",
    ]
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", time_zone)
    try:
        for statement in statements:
            got = connect_plugin.sql(spark, statement.format(t=f"indextables.`{it}`")).collect()
            spark_sql = statement.format(t=f"parquet.`{pq}`").replace(
                "msg indexquery 'timeout'", "msg LIKE '%timeout%'"
            )
            want = spark.sql(spark_sql).collect()
            assert _normal(got) == _normal(want), statement
            assert _normal(want) not in ([], [(0,)]), f"the statement selects nothing: {statement}"
            if "(ts)" in statement or "GROUP BY ts" in statement:
                plan = explain(spark, statement.format(t=f"indextables.`{it}`"))
                assert "(pushed to the executors)" in plan, plan
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
