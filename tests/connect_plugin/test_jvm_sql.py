"""IndexTables4Spark's SQL as its reference docs write it (sql-commands.md, features.md), run through
``connect_plugin.sql``: one case per documented statement form, adapted to this test's tables and
checked for its effect and its documented output columns; and the bucket-aggregation functions,
checked against ``IndexTable.aggregate`` and a plain Spark computation over the same rows in Parquet.

One classic Spark session for the module (the statements run the same way over Spark Connect:
tests/connect_plugin/test_sql.py runs the command path on both).
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

import connect_plugin
from connect_plugin import IndexTable
from connect_plugin.sql import sql
from tests.spark.test_datasource import TEXT_OPTS, log_rows, make_df


@pytest.fixture(scope="module")
def spark(classic_spark: Any) -> Any:
    return classic_spark


@pytest.fixture(scope="module")
def logs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(IndexTables table, Parquet copy) of the same 60 log rows, written in 3 commits (several splits)."""
    root = tmp_path_factory.mktemp("jvm-sql")
    table, parquet = root / "logs", root / "logs-parquet"
    for i in range(3):
        connect_plugin.write(make_df(spark, 20, start=i * 20), str(table), options=TEXT_OPTS)
    make_df(spark, 60).write.parquet(str(parquet))
    return str(table), str(parquet)


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.collect()]


# --- bucket aggregations ----------------------------------------------------------------------------


def test_histogram_equals_aggregate_and_spark(spark: Any, logs: tuple[str, str]) -> None:
    from pyspark.sql import functions as fn

    table, parquet = logs
    got = sql(spark, f"SELECT indextables_histogram(score, 5.0) AS bucket, COUNT(*) AS cnt, SUM(id) AS total "
                     f"FROM '{table}' GROUP BY indextables_histogram(score, 5.0) ORDER BY bucket")  # fmt: skip
    assert [(f.name, f.dataType.simpleString()) for f in got.schema.fields] == [
        ("bucket", "double"), ("cnt", "bigint"), ("total", "bigint")]  # fmt: skip
    baseline = spark.read.parquet(parquet).groupBy((fn.floor(fn.col("score") / 5) * 5.0).alias("b"))
    expected = _rows(baseline.agg(fn.count("*"), fn.sum("id")).orderBy("b"))
    assert _rows(got) == expected
    direct = IndexTable.for_path(spark, table).aggregate(
        {"h": {"histogram": {"field": "score", "interval": 5.0}, "aggs": {"s": {"sum": {"field": "id"}}}}})
    assert [(b["key"], b["doc_count"], b["s"]["value"]) for b in direct["h"]["buckets"]] == expected
    # the tantivy4spark_ alias, a WHERE the index answers, GROUP BY the output name
    filtered = sql(spark, f"SELECT tantivy4spark_histogram(score, 5.0) AS b, avg(score), max(id) FROM '{table}' "
                          f"WHERE msg indexquery 'timeout' GROUP BY b")  # fmt: skip
    base = spark.read.parquet(parquet).filter("msg LIKE '%timeout%'")
    expected = _rows(base.groupBy((fn.floor(fn.col("score") / 5) * 5.0).alias("b"))
                     .agg(fn.avg("score"), fn.max("id")).orderBy("b"))  # fmt: skip
    assert [(b, pytest.approx(a), m) for b, a, m in _rows(filtered)] == expected


def test_date_histogram_equals_aggregate_and_spark(spark: Any, logs: tuple[str, str]) -> None:
    from pyspark.sql import functions as fn

    table, parquet = logs
    got = sql(spark, f"SELECT indextables_date_histogram(ts, '30m') AS half_hour, COUNT(*) AS cnt FROM '{table}' "
                     f"GROUP BY indextables_date_histogram(ts, '30m')")  # fmt: skip
    assert [(f.name, f.dataType.simpleString()) for f in got.schema.fields] == [
        ("half_hour", "timestamp"), ("cnt", "bigint")]  # fmt: skip
    bucket = fn.timestamp_seconds(fn.floor(fn.unix_seconds("ts") / 1800) * 1800).alias("b")
    expected = _rows(spark.read.parquet(parquet).groupBy(bucket).agg(fn.count("*")).orderBy("b"))
    assert _rows(got) == expected and len(expected) == 3
    direct = IndexTable.for_path(spark, table).aggregate({"d": {"date_histogram": {"field": "ts",
                                                                                    "fixed_interval": "30m"}}})
    utc = datetime.timezone.utc
    keys = [(datetime.datetime.fromtimestamp(b["key"] / 1000, utc).replace(tzinfo=None), b["doc_count"])
            for b in direct["d"]["buckets"]]  # fmt: skip
    assert keys == [(k.replace(tzinfo=None), n) for k, n in expected]
    alias = sql(spark, f"SELECT tantivy4spark_date_histogram(ts, '1h'), count(*) FROM '{table}' GROUP BY 1")
    assert [n for _, n in _rows(alias)] == [40, 20]
    with pytest.raises(Exception, match="invalid interval '1 day'"):
        sql(spark, f"SELECT indextables_date_histogram(ts, '1 day'), count(*) FROM '{table}' GROUP BY 1")


def test_range_equals_aggregate_and_spark(spark: Any, logs: tuple[str, str]) -> None:
    table, parquet = logs
    got = sql(spark, f"SELECT indextables_range(score, 'low', NULL, 5.0, 'mid', 5.0, 10.0, 'high', 10.0, NULL) AS tier, "
                     f"COUNT(*) AS cnt, min(id) AS first FROM '{table}' "
                     f"GROUP BY indextables_range(score, 'low', NULL, 5.0, 'mid', 5.0, 10.0, 'high', 10.0, NULL)")  # fmt: skip
    assert [(f.name, f.dataType.simpleString()) for f in got.schema.fields] == [
        ("tier", "string"), ("cnt", "bigint"), ("first", "bigint")]  # fmt: skip
    case = "CASE WHEN score < 5 THEN 'low' WHEN score < 10 THEN 'mid' ELSE 'high' END"
    spark.read.parquet(parquet).createOrReplaceTempView("jvm_sql_parquet")
    expected = _rows(spark.sql(f"SELECT {case} AS t, count(*), min(id) FROM jvm_sql_parquet GROUP BY 1"))
    assert sorted(_rows(got)) == sorted(expected)
    assert [r[0] for r in _rows(got)] == ["low", "mid", "high"]  # in the order the call names them
    direct = IndexTable.for_path(spark, table).aggregate({"r": {"range": {"field": "score", "ranges": [
        {"key": "low", "to": 5.0}, {"key": "mid", "from": 5.0, "to": 10.0}, {"key": "high", "from": 10.0}]}}})
    assert {b["key"]: b["doc_count"] for b in direct["r"]["buckets"]} == {t: n for t, n, _ in expected}
    with pytest.raises(Exception, match="overlap"):
        sql(spark, f"SELECT tantivy4spark_range(score, 'a', 0, 6, 'b', 5, NULL), count(*) FROM '{table}' GROUP BY 1")


def test_star_searches_every_field(spark: Any, logs: tuple[str, str]) -> None:
    table, _ = logs
    rows = log_rows(60)
    timeouts = sorted(r[0] for r in rows if "timeout" in r[2])
    for operator in ("indexquery", "textsearch"):
        got = sql(spark, f"SELECT id FROM '{table}' WHERE * {operator} 'timeout' ORDER BY id")
        assert [r["id"] for r in got.collect()] == timeouts
    either = sql(spark, f"SELECT id FROM '{table}' WHERE * indexquery 'timeout' OR id = 1 ORDER BY id")
    assert [r["id"] for r in either.collect()] == sorted({*timeouts, 1})
