"""Edge values compare as Spark compares them (issue 33, hole 6): every filter below returns the same
rows from an IndexTables table as from the same rows in Parquet, read by the same Spark session —
through Spark's own filters (pushed into the data source) and through ``connect_plugin.sql`` (the
filter tree the executors answer). Before the fix ``-0.0`` and ``0.0`` differed in ``=``, ``IN`` and
``<>``, and ``ts = '1969-12-31 23:59:59.999999'`` returned nothing."""

from __future__ import annotations

import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import connect_plugin
from connect_plugin.sql import sql

FILTERS = [
    "d = 0.0",
    "d = -0.0",
    "d <> 0.0",
    "d IN (0.0, 1.5)",
    "d >= 0.0",
    "d > 0.0",
    "d < 0.0",
    "d <= 0.0",
    "d = CAST('NaN' AS DOUBLE)",
    "d > 1.0",
    "d < CAST('NaN' AS DOUBLE)",
    "d >= CAST('Infinity' AS DOUBLE)",
    "f = 0.0",
    "f <> 0.0",
    "f > 1.0",
    "f IN (0.0)",
    "ts = TIMESTAMP '1969-12-31 23:59:59.999999'",
    "ts < TIMESTAMP '1970-01-01 00:00:00'",
    "ts >= TIMESTAMP '1969-12-31 23:59:59.5'",
    "dec > 0",
    "dec = 0",
    "n > 0.5",
    "n = 1.0",
]
# What connect_plugin's SQL reads (its literals: numbers, strings; no CAST): the same comparisons.
SQL_FILTERS = [
    "d = 0.0",
    "d = -0.0",
    "d <> 0.0",
    "d IN (0.0, 1.5)",
    "d >= 0.0",
    "d > 0.0",
    "d < 0.0",
    "d <= 0.0",
    "d > 1.0",
    "f = 0.0",
    "f <> 0.0",
    "f IN (0.0)",
    "ts = '1969-12-31 23:59:59.999999'",
    "ts < '1970-01-01 00:00:00'",
    "dec > 0",
    "dec = 0",
    "n > 0.5",
    "n = 1.0",
]
ROWS = [
    (0, 0.0, 0.0, datetime.datetime(1969, 12, 31, 23, 59, 59, 999999), Decimal("0.00"), 0),
    (1, -0.0, -0.0, datetime.datetime(1969, 12, 31, 23, 59, 59, 500000), Decimal("-0.50"), 1),
    (2, float("nan"), float("nan"), datetime.datetime(1970, 1, 1, 0, 0, 0, 1), Decimal("2.50"), 2),
    (3, float("inf"), float("inf"), datetime.datetime(1969, 12, 31, 23, 59, 58), Decimal("0.01"), -1),
    (4, float("-inf"), float("-inf"), datetime.datetime(2024, 5, 1, 12, 0, 0, 123456), None, None),
    (5, 1.5, 1.5, None, Decimal("1.00"), 1),
    (6, None, None, datetime.datetime(1970, 1, 1), Decimal("-0.00"), 0),
]
SCHEMA = "id int, d double, f float, ts timestamp_ntz, dec decimal(10,2), n int"


def _ids(rows: list[Any]) -> list[int]:
    return sorted(r["id"] for r in rows)


def test_edge_values_filter_as_in_parquet(spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame(ROWS, SCHEMA)
    parquet, table = str(tmp_path / "p"), str(tmp_path / "t")
    df.write.parquet(parquet)
    connect_plugin.write(df, table)
    baseline = spark.read.parquet(parquet)
    indexed = connect_plugin.read(spark, table)
    for where in FILTERS:
        expected = _ids(baseline.filter(where).collect())
        assert _ids(indexed.filter(where).collect()) == expected, where
    spark.read.parquet(parquet).createOrReplaceTempView("edge_parquet")
    for where in SQL_FILTERS:
        expected = _ids(spark.sql(f"SELECT id FROM edge_parquet WHERE {where}").collect())
        assert _ids(sql(spark, f"SELECT id FROM indextables.`{table}` WHERE {where}").collect()) == expected, where
