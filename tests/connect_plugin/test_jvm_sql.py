"""IndexTables4Spark's SQL as its reference docs write it (sql-commands.md, features.md), run through
``connect_plugin.sql``: one case per documented statement form, adapted to this test's tables and
checked for its effect and its documented output columns; and the bucket-aggregation functions,
checked against ``IndexTable.aggregate`` and a plain Spark computation over the same rows in Parquet.

One classic Spark session for the module (the statements run the same way over Spark Connect:
tests/connect_plugin/test_sql.py runs the command path on both).
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from connect_plugin import IndexTable
from connect_plugin.sql import sql
from indextables_contract import commands as C
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
    got = sql(
        spark,
        f"SELECT indextables_histogram(score, 5.0) AS bucket, COUNT(*) AS cnt, SUM(id) AS total "
        f"FROM '{table}' GROUP BY indextables_histogram(score, 5.0) ORDER BY bucket",
    )
    assert [(f.name, f.dataType.simpleString()) for f in got.schema.fields] == [
        ("bucket", "double"),
        ("cnt", "bigint"),
        ("total", "bigint"),
    ]
    baseline = spark.read.parquet(parquet).groupBy((fn.floor(fn.col("score") / 5) * 5.0).alias("b"))
    expected = _rows(baseline.agg(fn.count("*"), fn.sum("id")).orderBy("b"))
    assert _rows(got) == expected
    direct = IndexTable.for_path(spark, table).aggregate(
        {"h": {"histogram": {"field": "score", "interval": 5.0}, "aggs": {"s": {"sum": {"field": "id"}}}}}
    )
    assert [(b["key"], b["doc_count"], b["s"]["value"]) for b in direct["h"]["buckets"]] == expected
    # the tantivy4spark_ alias, a WHERE the index answers, GROUP BY the output name
    filtered = sql(
        spark,
        f"SELECT tantivy4spark_histogram(score, 5.0) AS b, avg(score), max(id) FROM '{table}' "
        f"WHERE msg indexquery 'timeout' GROUP BY b",
    )
    base = spark.read.parquet(parquet).filter("msg LIKE '%timeout%'")
    expected = _rows(
        base.groupBy((fn.floor(fn.col("score") / 5) * 5.0).alias("b")).agg(fn.avg("score"), fn.max("id")).orderBy("b")
    )
    assert [(b, pytest.approx(a), m) for b, a, m in _rows(filtered)] == expected


def test_date_histogram_equals_aggregate_and_spark(spark: Any, logs: tuple[str, str]) -> None:
    from pyspark.sql import functions as fn

    table, parquet = logs
    got = sql(
        spark,
        f"SELECT indextables_date_histogram(ts, '30m') AS half_hour, COUNT(*) AS cnt FROM '{table}' "
        f"GROUP BY indextables_date_histogram(ts, '30m')",
    )
    assert [(f.name, f.dataType.simpleString()) for f in got.schema.fields] == [
        ("half_hour", "timestamp"),
        ("cnt", "bigint"),
    ]
    bucket = fn.timestamp_seconds(fn.floor(fn.unix_seconds("ts") / 1800) * 1800).alias("b")
    expected = _rows(spark.read.parquet(parquet).groupBy(bucket).agg(fn.count("*")).orderBy("b"))
    assert _rows(got) == expected and len(expected) == 3
    direct = IndexTable.for_path(spark, table).aggregate(
        {"d": {"date_histogram": {"field": "ts", "fixed_interval": "30m"}}}
    )
    utc = datetime.timezone.utc
    keys = [
        (datetime.datetime.fromtimestamp(b["key"] / 1000, utc).replace(tzinfo=None), b["doc_count"])
        for b in direct["d"]["buckets"]
    ]
    assert keys == [(k.replace(tzinfo=None), n) for k, n in expected]
    alias = sql(spark, f"SELECT tantivy4spark_date_histogram(ts, '1h'), count(*) FROM '{table}' GROUP BY 1")
    assert [n for _, n in _rows(alias)] == [40, 20]
    with pytest.raises(Exception, match="invalid interval '1 day'"):
        sql(spark, f"SELECT indextables_date_histogram(ts, '1 day'), count(*) FROM '{table}' GROUP BY 1")


def test_range_equals_aggregate_and_spark(spark: Any, logs: tuple[str, str]) -> None:
    table, parquet = logs
    got = sql(
        spark,
        f"SELECT indextables_range(score, 'low', NULL, 5.0, 'mid', 5.0, 10.0, 'high', 10.0, NULL) AS tier, "
        f"COUNT(*) AS cnt, min(id) AS first FROM '{table}' "
        f"GROUP BY indextables_range(score, 'low', NULL, 5.0, 'mid', 5.0, 10.0, 'high', 10.0, NULL)",
    )
    assert [(f.name, f.dataType.simpleString()) for f in got.schema.fields] == [
        ("tier", "string"),
        ("cnt", "bigint"),
        ("first", "bigint"),
    ]
    case = "CASE WHEN score < 5 THEN 'low' WHEN score < 10 THEN 'mid' ELSE 'high' END"
    spark.read.parquet(parquet).createOrReplaceTempView("jvm_sql_parquet")
    expected = _rows(spark.sql(f"SELECT {case} AS t, count(*), min(id) FROM jvm_sql_parquet GROUP BY 1"))
    assert sorted(_rows(got)) == sorted(expected)
    assert [r[0] for r in _rows(got)] == ["low", "mid", "high"]  # in the order the call names them
    direct = IndexTable.for_path(spark, table).aggregate(
        {
            "r": {
                "range": {
                    "field": "score",
                    "ranges": [
                        {"key": "low", "to": 5.0},
                        {"key": "mid", "from": 5.0, "to": 10.0},
                        {"key": "high", "from": 10.0},
                    ],
                }
            }
        }
    )
    assert {b["key"]: b["doc_count"] for b in direct["r"]["buckets"]} == {t: n for t, n, _ in expected}
    with pytest.raises(Exception, match=r"a bucket function .* works in SELECT"):
        sql(
            spark,
            f"SELECT indextables_range(score, 'a', 0, 6), count(*) FROM '{table}' JOIN '{table}' USING (id) GROUP BY 1",
        )
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


# --- the documented statements, one case per form -------------------------------------------------------

EVENT_SCHEMA = (
    "id long, title string, content string, price double, quantity long, event_time timestamp, "
    "region string, year string, date string"
)
EVENT_OPTS = {"spark.indextables.indexing.typemap.content": "text", "spark.indextables.indexing.typemap.title": "text"}
EVENT_PARTITIONS = ["region", "year", "date"]


def _events(spark: Any, start: int, n: int) -> Any:
    base = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    rows = []
    for i in range(start, start + n):
        date = ["2023-12-31", "2024-01-01"][i % 2]
        rows.append(
            (
                i,
                f"title {i}",
                f"content about item {i} " + ("error timeout" if i % 3 == 0 else "ok"),
                float(i * 7 % 150),
                i % 5,
                base + datetime.timedelta(hours=i),
                ["us-east", "us-west"][i // 2 % 2],
                date[:4],
                date,
            )
        )
    return spark.createDataFrame(rows, EVENT_SCHEMA)


def _write_events(spark: Any, path: str, start: int, n: int = 8) -> None:
    connect_plugin.write(_events(spark, start, n), path, partition_by=EVENT_PARTITIONS, options=EVENT_OPTS)


@pytest.fixture(scope="module")
def events(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A partitioned table (region, year, date), two commits: 2 splits per partition; named ``my_table``
    and ``my_catalog.my_database.my_table`` (how the docs name a table)."""
    path = str(tmp_path_factory.mktemp("jvm-sql-events") / "events")
    _write_events(spark, path, 0)
    _write_events(spark, path, 8)
    connect_plugin.register_table(spark, "my_table", path)
    connect_plugin.register_table(spark, "my_catalog.my_database.my_table", path)
    return path


def _columns(df: Any) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def _ddl(ddl: str) -> list[tuple[str, str]]:
    names = {
        "long": "bigint",
        "boolean": "boolean",
        "string": "string",
        "int": "int",
        "double": "double",
        "timestamp": "timestamp",
    }
    return [(c.split()[0], names[c.split()[1]]) for c in ddl.split(", ")]


def _ids(spark: Any, path: str) -> list[int]:
    return sorted(r["id"] for r in connect_plugin.read(spark, path).select("id").collect())


def _splits(path: str) -> int:
    import executor_lib

    return len(executor_lib.open_log(path).snapshot().files)


def test_merge_splits_forms(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "merge")
    _write_events(spark, path, 0)
    statements = [
        f"MERGE SPLITS '{path}' WHERE date = '2024-01-01' TARGET SIZE 100M",
        f"MERGE SPLITS '{path}' TARGET SIZE 100M",
        f"MERGE SPLITS '{path}' MAX DEST SPLITS 10",
        f"MERGE SPLITS '{path}' MAX SOURCE SPLITS PER MERGE 500",
        f"MERGE SPLITS '{path}' TARGET SIZE 1G MAX DEST SPLITS 5 MAX SOURCE SPLITS PER MERGE 100",
    ]
    for n, statement in enumerate(statements):
        _write_events(spark, path, 100 + n * 8)  # a second split in every partition
        before = _splits(path)
        merged = sql(spark, statement).collect()
        assert merged and _splits(path) < before, statement
        if "WHERE" in statement:
            assert {r["partitionValues"] for r in merged} <= {
                json_dumps({"date": "2024-01-01", "region": r, "year": "2024"}) for r in ("us-east", "us-west")
            }
    assert _ids(spark, path) == sorted([*range(8), *(100 + i for i in range(40))])


def json_dumps(d: dict[str, Any]) -> str:
    import json

    return json.dumps(d, sort_keys=True)


def test_purge_forms(spark: Any, tmp_path: Path) -> None:
    import os
    import time

    path = tmp_path / "purge"
    _write_events(spark, str(path), 0)
    orphan = path / "region=us-east" / "orphan-0123.split"
    orphan.write_bytes(b"x" * 10)
    ten_days_ago = time.time() - 10 * 86400
    os.utime(orphan, (ten_days_ago, ten_days_ago))
    t = f"'{path}'"
    for statement in (
        f"PURGE INDEXTABLE {t} DRY RUN",
        f"PURGE INDEXTABLE {t} OLDER THAN 14 DAYS DRY RUN",
        f"PURGE INDEXTABLE {t} OLDER THAN 168 HOURS DRY RUN",
    ):
        listed = sql(spark, statement).filter("kind = 'split'").collect()
        assert orphan.exists()
        assert [r["path"].endswith("orphan-0123.split") for r in listed] == ([] if "14 DAYS" in statement else [True])
    assert sql(spark, f"PURGE INDEXTABLE {t} OLDER THAN 14 DAYS").filter("kind = 'split'").count() == 0
    assert orphan.exists()  # younger than 14 days
    assert sql(spark, f"PURGE INDEXTABLE {t} OLDER THAN 7 DAYS").filter("kind = 'split'").count() == 1
    assert not orphan.exists()
    orphan.write_bytes(b"x")
    os.utime(orphan, (ten_days_ago, ten_days_ago))
    done = sql(spark, f"PURGE INDEXTABLE {t} OLDER THAN 168 HOURS").filter("kind = 'split'").count()
    assert done == 1 and not orphan.exists()
    sql(spark, f"PURGE INDEXTABLE {t} OLDER THAN 7 DAYS TRANSACTION LOG RETENTION 30 DAYS").collect()
    assert _ids(spark, str(path)) == list(range(8))


DROP_ROWS = [  # (id, region, year, month, date): each DROP below removes exactly one row, in this order
    (0, "us-east", "2023", 3, "2023-03-01"),
    (1, "us-west", "2024", 1, "2024-01-01"),
    (2, "us-west", "2019", 5, "2019-05-01"),
    (3, "us-west", "2019", 6, "2019-06-01"),
    (4, "us-east", "2022", 8, "2022-08-01"),
    (5, "us-west", "2022", 9, "2022-09-01"),
    (6, "us-west", "2021", 10, "2021-10-01"),
    (7, "us-west", "2019", 11, "2019-11-01"),
]


def test_drop_partitions_forms(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "drop")
    df = spark.createDataFrame(DROP_ROWS, "id long, region string, year string, month int, date string")
    connect_plugin.write(df, path, partition_by=["region", "year", "month", "date"])
    connect_plugin.register_table(spark, "drop_table", path)
    t = f"'{path}'"
    statements = [
        (f"DROP INDEXTABLES PARTITIONS FROM {t} WHERE year = '2023'", 0),
        ("DROP INDEXTABLES PARTITIONS FROM drop_table WHERE date = '2024-01-01'", 1),
        (f"DROP INDEXTABLES PARTITIONS FROM {t} WHERE month < 6", 2),
        (f"DROP INDEXTABLES PARTITIONS FROM {t} WHERE month BETWEEN 1 AND 6", 3),
        (f"DROP INDEXTABLES PARTITIONS FROM {t} WHERE region = 'us-east' AND year > '2020'", 4),
        (f"DROP INDEXTABLES PARTITIONS FROM {t} WHERE year = '2022' OR year = '2023'", 5),
        (f"DROP TANTIVY4SPARK PARTITIONS FROM {t} WHERE year > '2020'", 6),
    ]
    remaining = [r[0] for r in DROP_ROWS]
    for statement, dropped in statements:
        rows = sql(spark, statement).collect()
        assert [r["numRecords"] for r in rows] == [1], statement
        remaining.remove(dropped)
        assert _ids(spark, path) == remaining, statement
    with pytest.raises(Exception, match="partition columns only"):
        sql(spark, f"DROP INDEXTABLES PARTITIONS FROM {t} WHERE id = 7")


def test_checkpoint_compact_and_state(spark: Any, events: str) -> None:
    from connect_plugin.command_outputs import CHECKPOINT_COLUMNS, STATE_COLUMNS

    for statement in (
        f"CHECKPOINT INDEXTABLES '{events}'",
        "CHECKPOINT INDEXTABLES my_table",
        f"COMPACT INDEXTABLES '{events}'",
    ):
        df = sql(spark, statement)
        assert _columns(df) == _ddl(CHECKPOINT_COLUMNS)
        row = df.collect()[0]
        assert (row["table_path"], row["status"], row["num_files"]) == (events, "SUCCESS", _splits(events))
        state = sql(spark, f"DESCRIBE INDEXTABLES STATE '{events}'")
        assert _columns(state) == _ddl(STATE_COLUMNS)
        s = state.collect()[0]
        assert (s["format"], s["version"], s["num_files"], s["num_tombstones"]) == (
            "avro-state",
            row["checkpoint_version"],
            row["num_files"],
            0,
        )


def test_truncate_time_travel_forms(spark: Any, tmp_path: Path) -> None:
    import executor_lib
    from connect_plugin.command_outputs import TRUNCATE_COLUMNS

    path = str(tmp_path / "truncate")
    for i in range(3):
        _write_events(spark, path, i * 8)
    dry = sql(spark, f"TRUNCATE INDEXTABLES TIME TRAVEL '{path}' DRY RUN")
    assert _columns(dry) == _ddl(TRUNCATE_COLUMNS)
    d = dry.collect()[0]
    assert d["status"] == "DRY_RUN" and d["versions_deleted"] >= 3 and d["files_preserved"] == 24
    assert executor_lib.open_log(path).history()[-1].version == 0  # nothing deleted yet
    done = sql(spark, f"TRUNCATE INDEXTABLES TIME TRAVEL '{path}'").collect()[0]
    assert done["status"] == "SUCCESS" and done["versions_deleted"] >= 3
    # every version file but the table's creation (version 0, which this project never deletes) is gone
    assert [e.version for e in executor_lib.open_log(path).history()] == [done["checkpoint_version"], 0]
    assert _ids(spark, path) == list(range(24))


def test_prewarm_forms(spark: Any, events: str) -> None:
    from connect_plugin.command_outputs import PREWARM_COLUMNS

    t = f"'{events}'"
    cases = [
        (f"PREWARM INDEXTABLES CACHE {t}", 16, "TERM_DICT,POSTINGS", "all"),
        (f"PREWARM INDEXTABLES CACHE {t} FOR SEGMENTS (TERM_DICT, FAST_FIELD)", 16, "TERM_DICT,FAST_FIELD", "all"),
        (
            f"PREWARM INDEXTABLES CACHE {t} ON FIELDS (title, content, event_time)",
            16,
            "TERM_DICT,POSTINGS",
            "title,content,event_time",
        ),
        (f"PREWARM INDEXTABLES CACHE {t} WHERE date >= '2024-01-01'", 8, "TERM_DICT,POSTINGS", "all"),
        (f"PREWARM INDEXTABLES CACHE {t} WITH PERWORKER PARALLELISM OF 5", 16, "TERM_DICT,POSTINGS", "all"),
        (
            f"PREWARM INDEXTABLES CACHE {t}\n  FOR SEGMENTS (TERM_DICT, FAST_FIELD, POSTINGS, FIELD_NORM)\n"
            f"  ON FIELDS (title, content)\n  WITH PERWORKER PARALLELISM OF 4\n  WHERE region = 'us-east'",
            8,
            "TERM_DICT,FAST_FIELD,POSTINGS,FIELD_NORM",
            "title,content",
        ),
    ]
    for statement, splits, segments, fields in cases:
        df = sql(spark, statement)
        assert _columns(df) == _ddl(PREWARM_COLUMNS)
        rows = df.collect()
        assert sum(r["splits_prewarmed"] for r in rows) == splits, statement
        assert {(r["segments"], r["fields"], r["status"]) for r in rows} == {(segments, fields, "success")}
    with pytest.raises(Exception, match=r"fields \['nope'\] are not columns"):
        sql(spark, f"PREWARM INDEXTABLES CACHE {t} ON FIELDS (nope)")


def test_describe_and_flush_caches(spark: Any, events: str, tmp_path: Path) -> None:
    # a split cache of its own: the test processes of ``pytest -n`` share the default one, so another's
    # reads could fill it between the FLUSH and the DESCRIBE below
    # and the local table's splits copied into it, as downloads are (read in place, they fetch nothing)
    spark.conf.set("spark.indextables.cache.localSplits", "copy")
    try:
        with own_node_directory(spark, tmp_path / "cache"):
            _describe_and_flush_caches(spark, events)
    finally:
        spark.conf.unset("spark.indextables.cache.localSplits")


def _describe_and_flush_caches(spark: Any, events: str) -> None:
    from connect_plugin.command_outputs import DISK_CACHE_COLUMNS, STORAGE_STATS_COLUMNS

    sql(spark, "FLUSH INDEXTABLES DISK CACHE").collect()
    before = sql(spark, "DESCRIBE INDEXTABLES STORAGE STATS").collect()[0]
    sql(spark, f"PREWARM INDEXTABLES CACHE '{events}'").collect()
    disk = sql(spark, "DESCRIBE INDEXTABLES DISK CACHE")
    assert _columns(disk) == _ddl(DISK_CACHE_COLUMNS)
    assert disk.collect()[0]["splits_cached"] >= 16
    stats = sql(spark, "DESCRIBE INDEXTABLES STORAGE STATS")
    assert _columns(stats) == _ddl(STORAGE_STATS_COLUMNS)
    after = stats.collect()[0]
    assert after["bytes_fetched"] > before["bytes_fetched"] and after["requests"] >= before["requests"] + 16
    searcher = sql(spark, "FLUSH INDEXTABLES SEARCHER CACHE")
    assert _columns(searcher) == [
        ("cache_type", "string"),
        ("status", "string"),
        ("cleared_entries", "bigint"),
        ("message", "string"),
    ]
    assert {r["status"] for r in searcher.collect()} == {"success"}
    assert sql(spark, "FLUSH INDEXTABLES DISK CACHE").collect()[0]["splitsCached"] == 0
    assert sql(spark, "DESCRIBE INDEXTABLES DISK CACHE").collect()[0]["splits_cached"] == 0
    assert _ids(spark, events) == sorted(range(16))  # reads fetch again


def test_invalidate_transaction_log_cache_forms(spark: Any, events: str) -> None:
    expected = [
        ("table_path", "string"),
        ("result", "string"),
        ("cache_hits_before", "bigint"),
        ("cache_misses_before", "bigint"),
        ("hit_rate_before", "string"),
    ]
    for statement, table in (
        ("INVALIDATE INDEXTABLES TRANSACTION LOG CACHE", "GLOBAL"),
        (f"INVALIDATE INDEXTABLES TRANSACTION LOG CACHE FOR '{events}'", events),
        ("INVALIDATE INDEXTABLES TRANSACTION LOG CACHE FOR my_table", events),
    ):
        df = sql(spark, statement)
        assert _columns(df) == expected
        assert [r["table_path"] for r in df.collect()] == [table]
    assert _ids(spark, events) == sorted(range(16))


def test_describe_transaction_log_forms(spark: Any, tmp_path: Path) -> None:
    import executor_lib
    from indextables_contract.commands import DescribeLog

    path = str(tmp_path / "txlog")
    for i in range(2):
        _write_events(spark, path, i * 8)
    connect_plugin.register_table(spark, "my_catalog.my_database.txlog", path)
    everything = sql(spark, f"DESCRIBE INDEXTABLES TRANSACTION LOG '{path}' INCLUDE ALL")
    assert _columns(everything) == _ddl(DescribeLog.RESULT) and len(everything.columns) == 47
    rows = everything.collect()
    assert {r["action_type"] for r in rows} == {"protocol", "metadata", "add"}
    assert sum(1 for r in rows if r["action_type"] == "add") == 16 and not any(r["is_checkpoint"] for r in rows)
    assert sum(r["num_records"] for r in rows if r["action_type"] == "add") == 16
    executor_lib.open_log(path).checkpoint()
    _write_events(spark, path, 16)
    current = sql(spark, "DESCRIBE INDEXTABLES TRANSACTION LOG my_catalog.my_database.txlog").collect()
    # from the latest state on (an Avro state is written with every commit here: it holds all 24 files)
    adds = [r for r in current if r["action_type"] == "add"]
    assert {r["path"] for r in adds} == {a.path for a in executor_lib.open_log(path).snapshot().files}
    assert any(r["is_checkpoint"] for r in adds) and len(adds) == 24
    plain = sql(spark, f"DESCRIBE INDEXTABLES TRANSACTION LOG '{path}'").collect()
    assert len(plain) == len(current)


def test_repair_transaction_log(spark: Any, tmp_path: Path) -> None:
    import os

    path = tmp_path / "repair"
    for i in range(2):
        _write_events(spark, str(path), i * 8)
    lost = next(iter(sorted(path.rglob("*.split"))))
    os.remove(lost)
    target = tmp_path / "repair" / "_transaction_log_repaired"
    df = sql(spark, f"REPAIR INDEXFILES TRANSACTION LOG '{path}/_transaction_log'\n  AT LOCATION '{target}'")
    assert _columns(df) == [
        ("source_path", "string"),
        ("target_path", "string"),
        ("source_version", "bigint"),
        ("total_splits", "int"),
        ("valid_splits", "int"),
        ("missing_splits", "int"),
        ("status", "string"),
    ]
    row = df.collect()[0]
    assert (row["total_splits"], row["valid_splits"], row["missing_splits"], row["status"]) == (16, 15, 1, "SUCCESS")
    (path / "_transaction_log").rename(path / "_transaction_log_broken")
    target.rename(path / "_transaction_log")
    assert len(_ids(spark, str(path))) == 15  # readable, without the lost split


def test_component_sizes_forms(spark: Any, events: str) -> None:
    expected = [
        ("split_path", "string"),
        ("partition_values", "string"),
        ("component_key", "string"),
        ("size_bytes", "bigint"),
        ("component_type", "string"),
        ("field_name", "string"),
    ]
    for statement, splits in (
        (f"DESCRIBE INDEXTABLES COMPONENT SIZES '{events}'", 16),
        ("DESCRIBE INDEXTABLES COMPONENT SIZES my_table", 16),
        (f"DESCRIBE INDEXTABLES COMPONENT SIZES '{events}' WHERE year = '2024'", 8),
    ):
        df = sql(spark, statement)
        assert _columns(df) == expected
        rows = df.collect()
        assert len({r["split_path"] for r in rows}) == splits, statement
        assert {"_term_total", "_postings_total", "_store"} <= {r["component_key"] for r in rows}
        assert all(r["size_bytes"] > 0 for r in rows)


def test_jobs_and_environment(spark: Any, events: str) -> None:
    from connect_plugin.command_outputs import (
        ENVIRONMENT_COLUMNS,
        MERGE_JOBS_COLUMNS,
        PREWARM_JOBS_COLUMNS,
        REDACTED,
        WAIT_COLUMNS,
    )

    spark.conf.set("spark.indextables.aws.secretKey", "very-secret")
    try:
        env = sql(spark, "DESCRIBE INDEXTABLES ENVIRONMENT")
        assert _columns(env) == _ddl(ENVIRONMENT_COLUMNS)
        props = {r["property_name"]: r["property_value"] for r in env.collect()}
        assert props["spark.sql.session.timeZone"] == "UTC" and props["spark.indextables.aws.secretKey"] == REDACTED
    finally:
        spark.conf.unset("spark.indextables.aws.secretKey")
    merge_jobs = sql(spark, "DESCRIBE INDEXTABLES MERGE JOBS")
    assert _columns(merge_jobs) == _ddl(MERGE_JOBS_COLUMNS) and merge_jobs.count() == 0
    prewarm_jobs = sql(spark, "DESCRIBE INDEXTABLES PREWARM JOBS")
    assert _columns(prewarm_jobs) == _ddl(PREWARM_JOBS_COLUMNS) and prewarm_jobs.count() == 0
    waits = [
        ("WAIT FOR INDEXTABLES PREWARM JOBS", None, None),
        (f"WAIT FOR INDEXTABLES PREWARM JOBS '{events}'", events, None),
        ("WAIT FOR INDEXTABLES PREWARM JOBS my_table", events, None),
        ("WAIT FOR INDEXTABLES PREWARM JOBS JOB 'abc-123-def-456'", None, "abc-123-def-456"),
        ("WAIT FOR INDEXTABLES PREWARM JOBS TIMEOUT 300", None, None),
        (f"WAIT FOR INDEXTABLES PREWARM JOBS '{events}' JOB 'job-123' TIMEOUT 1800", events, "job-123"),
    ]
    for statement, table, job in waits:
        df = sql(spark, statement)
        assert _columns(df) == _ddl(WAIT_COLUMNS)
        assert [(r["table_path"], r["job_id"], r["status"]) for r in df.collect()] == [(table, job, "not_found")]


def test_textsearch_over_a_named_table(spark: Any, events: str) -> None:
    connect_plugin.register_table(spark, "events", events)
    got = sql(spark, "SELECT * FROM events WHERE content TEXTSEARCH 'error timeout'").collect()
    assert sorted(r["id"] for r in got) == [i for i in range(16) if i % 3 == 0]
    assert sql(spark, "SELECT * FROM events WHERE content TEXTSEARCH 'connection timeout'").count() == len(got)


# Documented statements that need what only the JVM (or a feature not built here yet) has: (statement, why).
UNSUPPORTED = [
    (
        "BUILD INDEXTABLES COMPANION FOR DELTA 'my_schema.events' CATALOG 'unity' TYPE 'rest' AT LOCATION '/i'",
        "Unity Catalog's REST API",
    ),
    (
        "BUILD INDEXTABLES COMPANION FOR DELTA '/d' AT LOCATION '/i' WITH STREAMING POLL INTERVAL 30 SECONDS",
        "companion manager",
    ),
]


@pytest.mark.parametrize(("statement", "why"), UNSUPPORTED)
def test_jvm_only_statements_fail_naming_why(spark: Any, statement: str, why: str) -> None:
    from indextables_contract.errors import IndexTablesSQLError

    with pytest.raises(IndexTablesSQLError, match=f"is not supported here: .*{why}"):
        sql(spark, statement)


def test_build_companion_forms(spark: Any, tmp_path: Path) -> None:
    """The documented BUILD INDEXTABLES COMPANION forms, adapted: a Delta table and a Parquet directory
    here, and for Iceberg a pyiceberg SQL catalog on SQLite (``TYPE 'sql'``: a REST catalog is a live
    service). tests/companion/ checks what they build against the sources."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    deltalake = pytest.importorskip("deltalake")
    pytest.importorskip("pyiceberg")
    from pyiceberg.catalog.sql import SqlCatalog

    rows = pa.table(
        {
            "content": [f"event {i} {'error' if i % 4 == 0 else 'ok'}" for i in range(40)],
            "status": ["500" if i % 4 == 0 else "200" for i in range(40)],
            "message": [f"message {i}" for i in range(40)],
            "trace_id": [f"t-{i}" for i in range(40)],
            "raw_payload": ["x" * 10] * 40,
            "level": ["ERROR" if i % 4 == 0 else "INFO" for i in range(40)],
            "year": ["2024" if i < 30 else "2023" for i in range(40)],
        }
    )
    delta, parquet = str(tmp_path / "delta"), tmp_path / "data"
    deltalake.write_deltalake(delta, rows, partition_by=["year"])
    parquet.mkdir()
    pq.write_table(rows, parquet / "part-00000.parquet")
    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'warehouse'}"
    catalog = SqlCatalog("uc_catalog", uri=uri, warehouse=warehouse)
    catalog.create_namespace("analytics")
    catalog.create_table("analytics.web_events", schema=rows.schema).append(rows)
    options = {"spark.indextables.iceberg.uri": uri}

    def build(statement: str) -> tuple[Any, ...]:
        df = sql(spark, statement, options)
        assert _columns(df) == _ddl(C.COMPANION_OUTPUT)
        row = df.collect()[0]
        return row["status"], row["parquet_files_indexed"]

    index = tmp_path / "index"
    assert build(f"BUILD INDEXTABLES COMPANION FOR DELTA '{delta}' AT LOCATION '{index}/delta_table'") == ("success", 2)
    assert build(f"BUILD INDEXTABLES COMPANION FOR DELTA '{delta}' AT LOCATION '{index}/delta_table'") == (
        "no_action",
        0,
    )  # the incremental sync: run the same command again
    options_form = (
        f"BUILD INDEXTABLES COMPANION FOR DELTA '{delta}' INDEXING MODES ('content':'text', "
        "'status':'string') FASTFIELDS MODE PARQUET_ONLY TARGET INPUT SIZE 1G WRITER HEAP SIZE 512M "
        f"FROM VERSION 0 WHERE year = '2024' AT LOCATION '{index}/delta'"
    )
    assert build(options_form + " DRY RUN") == ("dry_run", 1)
    assert build(
        f"BUILD INDEXTABLES COMPANION FOR DELTA '{delta}' INDEXING MODES ('content':'text', "
        "'status':'string') FASTFIELDS MODE PARQUET_ONLY TARGET INPUT SIZE 1G WRITER HEAP SIZE 512M "
        f"WHERE year = '2024' AT LOCATION '{index}/delta'"
    ) == ("success", 1)
    got = sql(spark, f"SELECT count(*) FROM indextables.`{index}/delta` WHERE content indexquery 'error'").collect()
    assert got[0][0] == 8  # year 2024 only (WHERE), the text mode tokenized 'content'
    assert build(
        f"BUILD INDEXTABLES COMPANION FOR PARQUET '{parquet}' SCHEMA SOURCE "
        f"'{parquet}/part-00000.parquet' AT LOCATION '{index}/parquet'"
    ) == ("success", 1)
    for clauses in (
        "",
        "INCLUDE COLUMNS ('message', 'level', 'trace_id')",
        "EXCLUDE COLUMNS ('raw_payload', 'trace_id')",
    ):
        location = f"{index}/iceberg-{len(clauses)}"
        assert build(
            f"BUILD INDEXTABLES COMPANION FOR ICEBERG 'analytics.web_events' CATALOG 'uc_catalog' "
            f"TYPE 'sql' WAREHOUSE '{warehouse}' {clauses} AT LOCATION '{location}'"
        ) == ("success", 1)
        found = sql(spark, f"SELECT trace_id FROM indextables.`{location}` WHERE level = 'ERROR'").collect()
        assert sorted(r["trace_id"] for r in found) == sorted(f"t-{i}" for i in range(0, 40, 4))
    # the compact string modes (features.md: exact_only hashes trace ids)
    for kind, source in (("DELTA", delta), ("PARQUET", str(parquet))):
        location = f"{index}/exact-{kind}"
        assert (
            build(
                f"BUILD INDEXTABLES COMPANION FOR {kind} '{source}' INDEXING MODES ('trace_id':'exact_only') "
                f"AT LOCATION '{location}'"
            )[0]
            == "success"
        )
        found = sql(spark, f"SELECT level FROM indextables.`{location}` WHERE trace_id = 't-8'").collect()
        assert [r["level"] for r in found] == ["ERROR"]
    assert build(
        f"BUILD INDEXTABLES COMPANION FOR ICEBERG 'analytics.web_events' CATALOG 'uc_catalog' TYPE 'sql' "
        f"WAREHOUSE '{warehouse}' INDEXING MODES ('trace_id':'exact_only') AT LOCATION '{index}/exact-ice'"
    ) == ("success", 1)


def test_results_as_temp_views(spark: Any, events: str) -> None:
    """The docs query command results through temp views: plain Spark SQL over them."""
    sql(spark, "DESCRIBE INDEXTABLES ENVIRONMENT").createOrReplaceTempView("env_props")
    env = sql(spark, "SELECT * FROM env_props WHERE property_name LIKE 'spark.indextables%'").collect()
    assert any(r["property_name"] == "spark.indextables.table.my_table" for r in env)
    sql(spark, "DESCRIBE INDEXTABLES MERGE JOBS").createOrReplaceTempView("merge_jobs")
    assert sql(spark, "SELECT COUNT(*) FROM merge_jobs WHERE status = 'RUNNING'").head()[0] == 0
    sql(spark, f"DESCRIBE INDEXTABLES TRANSACTION LOG '{events}'").createOrReplaceTempView("txlog")
    by_type = sql(spark, "SELECT version, action_type, COUNT(*) AS n FROM txlog GROUP BY version, action_type")
    assert sum(r["n"] for r in by_type.collect() if r["action_type"] == "add") == 16
    sql(spark, f"DESCRIBE INDEXTABLES COMPONENT SIZES '{events}'").createOrReplaceTempView("components")
    sizes = sql(spark, "SELECT component_type, SUM(size_bytes) AS b FROM components GROUP BY component_type")
    assert {"term", "postings", "store"} <= {r["component_type"] for r in sizes.collect()}


# --- the read-path profiler and the data-skipping statistics, in classic and Connect sessions -----------

MY_INDEX_ROWS = [
    (1, "example", "machine learning at scale", 4.0, "tech"),
    (2, "other", "cooking", 2.0, "food"),
    (3, "example", "deep learning machines", 3.0, "tech"),
]


def _my_index(session: Any, path: str, commits: int = 1) -> None:
    """``my_index`` of the profiler's example workflow: ``commits`` splits of the same 3 rows."""
    df = session.createDataFrame(MY_INDEX_ROWS, "id long, title string, content string, score double, category string")
    for _ in range(commits):
        connect_plugin.write(df, path, options={"spark.indextables.indexing.typemap.content": "text"})
    connect_plugin.register_table(session, "my_index", path)


def _table(df: Any) -> dict[str, tuple[Any, ...]]:
    return {r[0]: tuple(r)[1:] for r in df.collect()}


@contextlib.contextmanager
def own_node_directory(session: Any, directory: Path) -> Iterator[None]:
    """The profiler's switch and counters and the data-skipping counts are per node (kept in the
    node's split-cache directory), which the test processes of ``pytest -n`` share: the session
    uses a split cache of its own meanwhile."""
    key = "spark.indextables.cache.directoryPath"
    session.conf.set(key, str(directory))
    try:
        yield
    finally:
        session.conf.unset(key)


@pytest.mark.parametrize("kind", ["classic", "connect"])
def test_profiler_forms(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> None:
    session = request.getfixturevalue(f"{kind}_spark")
    with own_node_directory(session, tmp_path / "cache"):
        _profiler_forms(session, tmp_path)


def _profiler_forms(session: Any, tmp_path: Path) -> None:
    from connect_plugin.command_outputs import (
        PROFILER_CACHE_COLUMNS,
        PROFILER_SECTION_COLUMNS,
        PROFILER_SWITCH_COLUMNS,
    )

    _my_index(session, str(tmp_path / "my_index"), commits=3)
    sql(session, "FLUSH INDEXTABLES SEARCHER CACHE").collect()  # every split opened again: searcher misses
    try:
        enabled = sql(session, "ENABLE INDEXTABLES PROFILER")
        assert _columns(enabled) == _ddl(PROFILER_SWITCH_COLUMNS)
        status, hosts, message = enabled.collect()[0]
        assert status == "enabled" and hosts >= 1 and "counters reset" in message
        assert sql(session, "DESCRIBE INDEXTABLES PROFILER").count() == 0  # ENABLE resets
        found = sql(session, "SELECT id FROM my_index WHERE content indexquery 'learning'").collect()
        assert sorted(r["id"] for r in found) == [1, 1, 1, 3, 3, 3]
        sections = sql(session, "DESCRIBE INDEXTABLES PROFILER")
        assert _columns(sections) == _ddl(PROFILER_SECTION_COLUMNS)
        timings = _table(sections)
        # one scan planned; every split opened, searched and its rows fetched
        n = _splits(str(tmp_path / "my_index"))
        assert {k: v[:2] for k, v in timings.items()} == {
            "plan_prune": ("planning", 1),
            "split_open": ("search", n),
            "query_search": ("search", n),
            "doc_batch_retrieval": ("doc_retrieval", n),
        }
        for _, calls, total_ms, avg_us, min_us, max_us in timings.values():
            assert 0 < min_us <= avg_us <= max_us and avg_us == pytest.approx(total_ms * 1000 / calls)
        caches = sql(session, "DESCRIBE INDEXTABLES PROFILER CACHE")
        assert _columns(caches) == _ddl(PROFILER_CACHE_COLUMNS)
        hits = _table(caches)
        assert hits["searcher"][:2] == (0, n)  # flushed before: each split's searcher opened once
        assert all(h + m > 0 and rate == pytest.approx(h / (h + m)) for h, m, rate in hits.values())
        # RESET returns what it zeroes (sections only), RESET ... CACHE the cache counters
        assert _table(sql(session, "RESET INDEXTABLES PROFILER")) == timings
        assert sql(session, "DESCRIBE INDEXTABLES PROFILER").count() == 0
        assert _table(sql(session, "DESCRIBE INDEXTABLES PROFILER CACHE")) == hits
        reset = sql(session, "RESET INDEXTABLES PROFILER CACHE")
        assert _columns(reset) == _ddl(PROFILER_CACHE_COLUMNS) and _table(reset) == hits
        assert sql(session, "DESCRIBE INDEXTABLES PROFILER CACHE").count() == 0
        sql(session, "SELECT id FROM my_index WHERE content indexquery 'cooking'").collect()
        again = _table(sql(session, "DESCRIBE INDEXTABLES PROFILER CACHE"))
        assert sum(again["searcher"][:2]) == n  # one lookup per split (a hit where the task's worker kept it open)
    finally:
        disabled = sql(session, "DISABLE INDEXTABLES PROFILER")
    assert _columns(disabled) == _ddl(PROFILER_SWITCH_COLUMNS)
    assert disabled.collect()[0]["status"] == "disabled"
    kept = _table(sql(session, "DESCRIBE INDEXTABLES PROFILER"))
    assert kept["split_open"][1] == n  # DISABLE keeps the counters readable ...
    sql(session, "SELECT id FROM my_index WHERE content indexquery 'cooking'").collect()
    assert _table(sql(session, "DESCRIBE INDEXTABLES PROFILER")) == kept  # ... and stops counting
    with pytest.raises(Exception, match="line 1"):
        sql(session, "DESCRIBE INDEXTABLES PROFILER CACHES")


def test_profiler_workflow(spark: Any, tmp_path: Path) -> None:
    """The profiler's documented example workflow, statement by statement."""
    with own_node_directory(spark, tmp_path / "cache"):
        _profiler_workflow(spark, tmp_path)


def _profiler_workflow(spark: Any, tmp_path: Path) -> None:
    _my_index(spark, str(tmp_path / "my_index"))
    try:
        assert sql(spark, "ENABLE INDEXTABLES PROFILER").collect()[0]["status"] == "enabled"
        rows = sql(spark, "SELECT * FROM my_index WHERE title = 'example' LIMIT 100").collect()
        assert sorted(r["id"] for r in rows) == [1, 3]
        assert tuple(sql(spark, "SELECT COUNT(*), AVG(score) FROM my_index WHERE category = 'tech'").head()) == (2, 3.5)
        timings = _table(sql(spark, "DESCRIBE INDEXTABLES PROFILER"))
        assert {"split_open", "query_search"} <= set(timings) and timings["plan_prune"][1] >= 1
        assert "searcher" in _table(sql(spark, "DESCRIBE INDEXTABLES PROFILER CACHE"))
        assert _table(sql(spark, "RESET INDEXTABLES PROFILER")) == timings
        found = sql(spark, "SELECT * FROM my_index WHERE content indexquery 'machine learning'").collect()
        assert sorted(r["id"] for r in found) == [1, 3]  # either word (the query parser's default OR)
        after = _table(sql(spark, "DESCRIBE INDEXTABLES PROFILER"))
        n = _splits(str(tmp_path / "my_index"))
        assert after["query_search"][1] == n and after["split_open"][1] == n  # each split searched once
    finally:
        assert sql(spark, "DISABLE INDEXTABLES PROFILER").collect()[0]["status"] == "disabled"


@pytest.mark.parametrize("kind", ["classic", "connect"])
def test_data_skipping_forms(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> None:
    session = request.getfixturevalue(f"{kind}_spark")
    with own_node_directory(session, tmp_path / "cache"):
        _data_skipping_forms(session, tmp_path)


def _data_skipping_forms(session: Any, tmp_path: Path) -> None:
    import executor_lib
    from connect_plugin.command_outputs import (
        DATA_SKIPPING_COLUMNS,
        FLUSH_SKIPPING_COLUMNS,
        INVALIDATE_SKIPPING_COLUMNS,
    )

    path = str(tmp_path / "skipping")
    for start in (0, 8):
        connect_plugin.write(
            session.createDataFrame(_events(session, start, 8).collect(), EVENT_SCHEMA),
            path,
            partition_by=EVENT_PARTITIONS,
            options=EVENT_OPTS,
        )
    files = executor_lib.open_log(path).snapshot().files
    flushed = sql(session, "FLUSH INDEXTABLES DATA SKIPPING STATS")
    assert _columns(flushed) == _ddl(FLUSH_SKIPPING_COLUMNS)
    assert [tuple(r) for r in flushed.collect()] == [("data_skipping_metrics", "reset")]
    # a partition predicate, then a data predicate min/max statistics answer, then both
    by_date = [f for f in files if f.partition_values["date"] == "2024-01-01"]
    late = [f for f in files if int(f.max_values["id"]) >= 12]
    t = f"'{path}'"
    assert sql(session, f"SELECT id FROM {t} WHERE date = '2024-01-01'").count() == 8
    assert sql(session, f"SELECT id FROM {t} WHERE id >= 12").count() == 4
    assert sql(session, f"SELECT id FROM {t} WHERE date = '2024-01-01' AND id >= 12").count() == 2
    both = [f for f in by_date if f in late]
    assert 0 < len(both) < len(by_date) < len(files) and len(late) < len(files)
    stats = sql(session, "DESCRIBE INDEXTABLES DATA SKIPPING STATS")
    assert _columns(stats) == _ddl(DATA_SKIPPING_COLUMNS)
    rows = [tuple(r) for r in stats.collect()]
    metrics = {name: value for kind_, name, value in rows if kind_ == "data_skipping"}
    n = len(files)
    pruned, skipped = (n - len(by_date)) * 2, (n - len(late)) + (len(by_date) - len(both))
    final = len(by_date) + len(late) + len(both)
    assert metrics == {
        "total_files_considered": str(3 * n),
        "partition_pruned_files": str(pruned),
        "data_skipped_files": str(skipped),
        "final_files_scanned": str(final),
        "partition_skip_rate": f"{100 * pruned / (3 * n):.2f}%",
        "data_skip_rate": f"{100 * skipped / (3 * n - pruned):.2f}%",
        "total_skip_rate": f"{100 * (3 * n - final) / (3 * n):.2f}%",
        "scans": "3",
    }
    assert [r for r in rows if r[0] == "filter_type_skips"] == [("filter_type_skips", "Between", str(skipped))]
    invalidated = sql(session, "INVALIDATE INDEXTABLES DATA SKIPPING CACHE")
    assert _columns(invalidated) == _ddl(INVALIDATE_SKIPPING_COLUMNS)
    assert [tuple(r) for r in invalidated.collect()] == [("data_skipping_metrics", 0)]
    zeroed = {r[1]: r[2] for r in sql(session, "DESCRIBE INDEXTABLES DATA SKIPPING STATS").collect()}
    assert zeroed["total_files_considered"] == "0" and zeroed["total_skip_rate"] == "0.00%"
    sql(session, "RESET INDEXTABLES DATA SKIPPING STATS").collect()  # the JVM's other spelling of FLUSH


# --- the tally: every statement of IndexTables4Spark's reference docs ------------------------------------
# One entry per statement in the docs' SQL blocks and spark.sql(...) calls (sql-commands.md, then
# features.md), adapted to a placeholder table: (statement, the test above that runs its form here,
# or why it cannot run here). Statements of the same form share a test.

P = "'/t'"  # a table path
RUNS = "runs"
DOCUMENTED: list[tuple[str, str]] = [
    # sql-commands.md: Merge Splits
    (f"MERGE SPLITS {P} TARGET SIZE 100M", "test_merge_splits_forms"),
    (f"MERGE SPLITS {P} MAX DEST SPLITS 10", "test_merge_splits_forms"),
    (f"MERGE SPLITS {P} MAX SOURCE SPLITS PER MERGE 500", "test_merge_splits_forms"),
    (f"MERGE SPLITS {P} WHERE date = '2024-01-01' TARGET SIZE 100M", "test_merge_splits_forms"),
    (f"MERGE SPLITS {P} TARGET SIZE 1G MAX DEST SPLITS 5 MAX SOURCE SPLITS PER MERGE 100", "test_merge_splits_forms"),
    # Purge
    (f"PURGE INDEXTABLE {P} DRY RUN", "test_purge_forms"),
    (f"PURGE INDEXTABLE {P} OLDER THAN 7 DAYS", "test_purge_forms"),
    (f"PURGE INDEXTABLE {P} OLDER THAN 168 HOURS", "test_purge_forms"),
    (f"PURGE INDEXTABLE {P} OLDER THAN 14 DAYS DRY RUN", "test_purge_forms"),
    (f"PURGE INDEXTABLE {P} OLDER THAN 7 DAYS TRANSACTION LOG RETENTION 30 DAYS", "test_purge_forms"),
    # Drop partitions, and its example workflow
    (f"DROP INDEXTABLES PARTITIONS FROM {P} WHERE year = '2023'", "test_drop_partitions_forms"),
    ("DROP INDEXTABLES PARTITIONS FROM my_table WHERE date = '2024-01-01'", "test_drop_partitions_forms"),
    (f"DROP INDEXTABLES PARTITIONS FROM {P} WHERE year > '2020'", "test_drop_partitions_forms"),
    (f"DROP INDEXTABLES PARTITIONS FROM {P} WHERE month < 6", "test_drop_partitions_forms"),
    (f"DROP INDEXTABLES PARTITIONS FROM {P} WHERE month BETWEEN 1 AND 6", "test_drop_partitions_forms"),
    (f"DROP INDEXTABLES PARTITIONS FROM {P} WHERE region = 'us-east' AND year > '2020'", "test_drop_partitions_forms"),
    (f"DROP INDEXTABLES PARTITIONS FROM {P} WHERE year = '2022' OR year = '2023'", "test_drop_partitions_forms"),
    (f"DROP INDEXTABLES PARTITIONS FROM {P} WHERE year < '2022'", "test_drop_partitions_forms"),
    (f"DESCRIBE INDEXTABLES TRANSACTION LOG {P} INCLUDE ALL", "test_describe_transaction_log_forms"),
    (f"PURGE INDEXTABLE {P} OLDER THAN 7 DAYS", "test_purge_forms"),
    # Checkpoint / Compact
    (f"CHECKPOINT INDEXTABLES {P}", "test_checkpoint_compact_and_state"),
    ("CHECKPOINT INDEXTABLES my_table", "test_checkpoint_compact_and_state"),
    (f"COMPACT INDEXTABLES {P}", "test_checkpoint_compact_and_state"),
    # Truncate time travel
    (f"TRUNCATE INDEXTABLES TIME TRAVEL {P}", "test_truncate_time_travel_forms"),
    (f"TRUNCATE INDEXTABLES TIME TRAVEL {P} DRY RUN", "test_truncate_time_travel_forms"),
    # Prewarm
    (f"PREWARM INDEXTABLES CACHE {P}", "test_prewarm_forms"),
    (f"PREWARM INDEXTABLES CACHE {P} FOR SEGMENTS (TERM_DICT, FAST_FIELD)", "test_prewarm_forms"),
    (f"PREWARM INDEXTABLES CACHE {P} ON FIELDS (title, content, event_time)", "test_prewarm_forms"),
    (f"PREWARM INDEXTABLES CACHE {P} WHERE date >= '2024-01-01'", "test_prewarm_forms"),
    (f"PREWARM INDEXTABLES CACHE {P} WITH PERWORKER PARALLELISM OF 5", "test_prewarm_forms"),
    (
        f"PREWARM INDEXTABLES CACHE {P} FOR SEGMENTS (TERM_DICT, FAST_FIELD, POSTINGS, FIELD_NORM) ON FIELDS (title) "
        "WITH PERWORKER PARALLELISM OF 4 WHERE region = 'us-east'",
        "test_prewarm_forms",
    ),
    # Describe state, and the JSON-to-Avro migration
    (f"DESCRIBE INDEXTABLES STATE {P}", "test_checkpoint_compact_and_state"),
    (f"DESCRIBE INDEXTABLES STATE {P}", "test_checkpoint_compact_and_state"),
    (f"CHECKPOINT INDEXTABLES {P}", "test_checkpoint_compact_and_state"),
    (f"DESCRIBE INDEXTABLES STATE {P}", "test_checkpoint_compact_and_state"),
    # Disk cache, storage stats
    ("DESCRIBE INDEXTABLES DISK CACHE", "test_describe_and_flush_caches"),
    ("DESCRIBE INDEXTABLES STORAGE STATS", "test_describe_and_flush_caches"),
    # Data skipping (documented as not wired into the JVM's grammar; wired here)
    ("DESCRIBE INDEXTABLES DATA SKIPPING STATS", "test_data_skipping_forms"),
    ("FLUSH INDEXTABLES DATA SKIPPING STATS", "test_data_skipping_forms"),
    ("INVALIDATE INDEXTABLES DATA SKIPPING CACHE", "test_data_skipping_forms"),
    # Environment (and the temp view over it)
    ("DESCRIBE INDEXTABLES ENVIRONMENT", "test_jobs_and_environment"),
    ("DESCRIBE INDEXTABLES ENVIRONMENT", "test_jobs_and_environment"),
    ("SELECT * FROM env_props WHERE property_name LIKE 'spark.indextables%'", "test_results_as_temp_views"),
    # Merge jobs (and the temp view over it)
    ("DESCRIBE INDEXTABLES MERGE JOBS", "test_jobs_and_environment"),
    ("DESCRIBE INDEXTABLES MERGE JOBS", "test_jobs_and_environment"),
    ("SELECT COUNT(*) FROM merge_jobs WHERE status = 'RUNNING'", "test_results_as_temp_views"),
    # Flush caches, invalidate the log cache
    ("FLUSH INDEXTABLES DISK CACHE", "test_describe_and_flush_caches"),
    ("FLUSH INDEXTABLES SEARCHER CACHE", "test_describe_and_flush_caches"),
    ("INVALIDATE INDEXTABLES TRANSACTION LOG CACHE", "test_invalidate_transaction_log_cache_forms"),
    (f"INVALIDATE INDEXTABLES TRANSACTION LOG CACHE FOR {P}", "test_invalidate_transaction_log_cache_forms"),
    ("INVALIDATE INDEXTABLES TRANSACTION LOG CACHE FOR my_table", "test_invalidate_transaction_log_cache_forms"),
    # Describe transaction log (and the temp view over it)
    (f"DESCRIBE INDEXTABLES TRANSACTION LOG {P}", "test_describe_transaction_log_forms"),
    ("DESCRIBE INDEXTABLES TRANSACTION LOG my_catalog.my_database.my_table", "test_describe_transaction_log_forms"),
    (f"DESCRIBE INDEXTABLES TRANSACTION LOG {P} INCLUDE ALL", "test_describe_transaction_log_forms"),
    (f"DESCRIBE INDEXTABLES TRANSACTION LOG {P}", "test_describe_transaction_log_forms"),
    ("SELECT version, action_type, COUNT(*) FROM txlog GROUP BY version, action_type", "test_results_as_temp_views"),
    # Repair (and its post-repair workflow)
    (
        "REPAIR INDEXFILES TRANSACTION LOG '/t/_transaction_log' AT LOCATION '/r/_transaction_log'",
        "test_repair_transaction_log",
    ),
    (
        "REPAIR INDEXFILES TRANSACTION LOG '/t/_transaction_log' AT LOCATION '/r/_transaction_log'",
        "test_repair_transaction_log",
    ),
    # Component sizes (and the temp view over it)
    (f"DESCRIBE INDEXTABLES COMPONENT SIZES {P}", "test_component_sizes_forms"),
    ("DESCRIBE INDEXTABLES COMPONENT SIZES my_table", "test_component_sizes_forms"),
    (f"DESCRIBE INDEXTABLES COMPONENT SIZES {P} WHERE year = '2024'", "test_component_sizes_forms"),
    (f"DESCRIBE INDEXTABLES COMPONENT SIZES {P}", "test_component_sizes_forms"),
    ("SELECT component_type, SUM(size_bytes) FROM components GROUP BY component_type", "test_results_as_temp_views"),
    # Prewarm jobs, wait for them
    ("DESCRIBE INDEXTABLES PREWARM JOBS", "test_jobs_and_environment"),
    ("WAIT FOR INDEXTABLES PREWARM JOBS", "test_jobs_and_environment"),
    (f"WAIT FOR INDEXTABLES PREWARM JOBS {P}", "test_jobs_and_environment"),
    ("WAIT FOR INDEXTABLES PREWARM JOBS my_table", "test_jobs_and_environment"),
    ("WAIT FOR INDEXTABLES PREWARM JOBS JOB 'abc-123-def-456'", "test_jobs_and_environment"),
    ("WAIT FOR INDEXTABLES PREWARM JOBS TIMEOUT 300", "test_jobs_and_environment"),
    (f"WAIT FOR INDEXTABLES PREWARM JOBS {P} JOB 'job-123' TIMEOUT 1800", "test_jobs_and_environment"),
    # Build companion (the 8 forms of sql-commands.md)
    *[
        (f"BUILD INDEXTABLES COMPANION FOR {kind} '/src' AT LOCATION '/index'", "test_build_companion_forms")
        for kind in ("DELTA", "DELTA")
    ],
    (
        "BUILD INDEXTABLES COMPANION FOR DELTA 'my_schema.events' CATALOG 'unity' TYPE 'rest' AT LOCATION '/index'",
        "JVM-only: Unity Catalog's REST API resolves the Delta table (a live service)",
    ),
    (
        "BUILD INDEXTABLES COMPANION FOR PARQUET '/src' SCHEMA SOURCE '/src/p.parquet' AT LOCATION '/index'",
        "test_build_companion_forms",
    ),
    *[
        (
            f"BUILD INDEXTABLES COMPANION FOR ICEBERG 'a.b' CATALOG 'c' TYPE 'rest' {c} AT LOCATION '/index'",
            "test_build_companion_forms",
        )
        for c in ("", "INCLUDE COLUMNS ('x')", "EXCLUDE COLUMNS ('x')")
    ],
    (
        "BUILD INDEXTABLES COMPANION FOR ICEBERG 'a.b' INDEXING MODES ('trace_id':'exact_only') AT LOCATION '/index'",
        "test_build_companion_forms",
    ),
    # The read-path profiler, and its example workflow
    *[
        (s, "test_profiler_forms")
        for s in (
            "ENABLE INDEXTABLES PROFILER",
            "DISABLE INDEXTABLES PROFILER",
            "DESCRIBE INDEXTABLES PROFILER",
            "DESCRIBE INDEXTABLES PROFILER CACHE",
            "RESET INDEXTABLES PROFILER",
            "RESET INDEXTABLES PROFILER CACHE",
        )
    ],
    ("ENABLE INDEXTABLES PROFILER", "test_profiler_workflow"),
    ("SELECT * FROM my_index WHERE title = 'example' LIMIT 100", "test_profiler_workflow"),
    ("SELECT COUNT(*), AVG(score) FROM my_index WHERE category = 'tech'", "test_profiler_workflow"),
    *[
        (s, "test_profiler_workflow")
        for s in ("DESCRIBE INDEXTABLES PROFILER", "DESCRIBE INDEXTABLES PROFILER CACHE", "RESET INDEXTABLES PROFILER")
    ],
    ("SELECT * FROM my_index WHERE content indexquery 'machine learning'", "test_profiler_workflow"),
    *[(s, "test_profiler_workflow") for s in ("DESCRIBE INDEXTABLES PROFILER", "DISABLE INDEXTABLES PROFILER")],
    # features.md: bucket aggregations
    (
        "SELECT indextables_histogram(price, 50.0) AS b, COUNT(*), SUM(quantity) FROM t GROUP BY "
        "indextables_histogram(price, 50.0)",
        "test_histogram_equals_aggregate_and_spark",
    ),
    (
        "SELECT indextables_date_histogram(event_time, '1d') AS d, COUNT(*) FROM t GROUP BY "
        "indextables_date_histogram(event_time, '1d')",
        "test_date_histogram_equals_aggregate_and_spark",
    ),
    (
        "SELECT indextables_range(price, 'cheap', NULL, 50.0, 'mid', 50.0, 100.0, 'expensive', 100.0, NULL) AS tier, "
        "COUNT(*) FROM t GROUP BY indextables_range(price, 'cheap', NULL, 50.0, 'mid', 50.0, 100.0, 'expensive', "
        "100.0, NULL)",
        "test_range_equals_aggregate_and_spark",
    ),
    # features.md: companion indexes, the catalog, compact string indexing
    *[
        (f"BUILD INDEXTABLES COMPANION FOR {kind} '/src' AT LOCATION '/index'", "test_build_companion_forms")
        for kind in ("DELTA", "DELTA")
    ],
    (
        "BUILD INDEXTABLES COMPANION FOR DELTA '/src' INDEXING MODES ('trace_id':'exact_only') AT LOCATION '/index'",
        "test_build_companion_forms",
    ),
    *[
        (f"BUILD INDEXTABLES COMPANION FOR {kind} '/src' AT LOCATION '/index'", "test_build_companion_forms")
        for kind in ("PARQUET", "ICEBERG")
    ],
    ("SELECT * FROM events WHERE message TEXTSEARCH 'connection timeout'", "test_textsearch_over_a_named_table"),
    (
        "ALTER TABLE uc.production.users SET TBLPROPERTIES ('indextables.companion.indexroot' = 's3://b/i')",
        "JVM-only: IndexTablesCatalog (a Spark V2 catalog; companion indexes, issue 35)",
    ),
    (
        "SELECT * FROM indextables.uc.production.users WHERE content indexquery 'machine learning'",
        "JVM-only: IndexTablesCatalog (a Spark V2 catalog; companion indexes, issue 35)",
    ),
    (
        "BUILD INDEXTABLES COMPANION FOR PARQUET '/src' INDEXING MODES ('trace_id':'exact_only') AT LOCATION '/index'",
        "test_build_companion_forms",
    ),
    ("SELECT * FROM logs WHERE message TEXTSEARCH 'error timeout'", "test_textsearch_over_a_named_table"),
]


def test_the_tally_of_documented_statements() -> None:
    """How many documented statements run here, and that each names the test that runs its form (or a reason)."""
    tests = {name for name in globals() if name.startswith("test_")}
    running = [s for s, how in DOCUMENTED if how.startswith("test_")]
    assert {how for _, how in DOCUMENTED if how.startswith("test_")} <= tests
    assert (len(DOCUMENTED), len(running)) == (106, 103)
