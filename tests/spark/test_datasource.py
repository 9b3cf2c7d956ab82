"""``format("indextables")`` in real Spark sessions (classic local and local Spark Connect):
writes, appends, overwrites, partitions, reads, pushed filters, Tantivy queries, time travel,
bad input, and every table IndexTables4Spark 0.5.4 wrote."""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
import executor_lib
from connect_plugin.table import IndexTable
from tests.conftest import COMPAT_ROOT

UTC = datetime.timezone.utc
LEVELS = ["INFO", "WARN", "ERROR", None]


def log_rows(n: int, start: int = 0) -> list[tuple[Any, ...]]:
    rows = []
    for i in range(start, start + n):
        level = LEVELS[i % 4]
        msg = f"request {i} from host-{i % 7} " + ("failed with timeout" if i % 5 == 0 else "served ok")
        ts = datetime.datetime(2024, 1, 1, tzinfo=UTC) + datetime.timedelta(seconds=i * 90 + 0.25)
        rows.append((i, level, msg, float(i) / 4, ts, f"2024-01-0{1 + i % 3}"))
    return rows


SCHEMA = "id long, level string, msg string, score double, ts timestamp, day string"


def make_df(spark: Any, n: int, start: int = 0) -> Any:
    return spark.createDataFrame(log_rows(n, start), SCHEMA)


def write(df: Any, path: Path, mode: str = "append", **options: Any) -> None:
    writer = df.write.format("indextables").mode(mode)
    for k, v in options.items():
        writer = writer.option(k, v)
    writer.save(str(path))


def read(spark: Any, path: Path, **options: Any) -> Any:
    reader = spark.read.format("indextables")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


def ids(df: Any) -> list[int]:
    return sorted(r["id"] for r in df.select("id").collect())


TEXT_OPTS = {"spark.indextables.indexing.typemap.msg": "text"}


def test_write_append_overwrite_read_back(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    write(make_df(spark, 40), table, **TEXT_OPTS)
    log = executor_lib.open_log(str(table))
    assert log.latest_version() == 1  # create + one write
    write(make_df(spark, 10, start=40), table)
    assert log.latest_version() == 2  # exactly one version per write
    df = read(spark, table)
    assert df.schema.simpleString() == spark.createDataFrame([], SCHEMA).schema.simpleString()
    assert ids(df) == list(range(50))
    got = {r["id"]: tuple(r) for r in df.collect()}
    expected = log_rows(1, 7)[0]
    assert got[7] == (*expected[:4], expected[4].replace(tzinfo=None), expected[5])  # Spark returns session-time (UTC)
    write(make_df(spark, 5, start=100), table, mode="overwrite")
    assert ids(read(spark, table)) == list(range(100, 105))
    snap = log.snapshot()
    assert len(snap.files) >= 1 and all(a.num_records for a in snap.files)
    # the appended splits kept the table's text mapping (no indexing options on the second write)
    assert all('"tokenizer":"default"' in (snap.doc_mapping(a) or "") for a in snap.files)


def test_partitioned_write_layout_and_pruned_reads(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "p"
    connect_plugin.write(make_df(spark, 30), str(table), partition_by=["day"], options=TEXT_OPTS)
    snap = executor_lib.open_log(str(table)).snapshot()
    assert snap.partition_columns == ("day",)
    assert sorted({a.partition_values["day"] for a in snap.files}) == ["2024-01-01", "2024-01-02", "2024-01-03"]
    for a in snap.files:
        assert a.path.startswith(f"day={a.partition_values['day']}/splits/") and a.path.endswith(".split")
        assert (table / a.path).exists()
    # a fresh read per query: a reused DataFrame hits Spark 4.3's stale-reader bug in classic sessions
    assert ids(read(spark, table).filter("day = '2024-01-02'")) == [i for i in range(30) if i % 3 == 1]
    assert ids(read(spark, table).filter("day = '2024-01-02' OR level = 'INFO'")) == [
        i for i in range(30) if i % 3 == 1 or i % 4 == 0
    ]
    # appending without partitionBy keeps the table's partitioning
    write(make_df(spark, 3, start=30), table)
    assert ids(read(spark, table).filter("day = '2024-01-01'")) == [i for i in range(33) if i % 3 == 0]


FILTER_CASES = [
    ("level = 'ERROR'", lambda r: r[1] == "ERROR"),
    ("level IN ('INFO', 'WARN')", lambda r: r[1] in ("INFO", "WARN")),
    ("level IS NULL", lambda r: r[1] is None),
    ("level IS NOT NULL AND id < 10", lambda r: r[1] is not None and r[0] < 10),
    ("NOT (level = 'INFO')", lambda r: r[1] is not None and r[1] != "INFO"),
    ("id > 10 AND id <= 20", lambda r: 10 < r[0] <= 20),
    ("score >= 5.5", lambda r: r[3] >= 5.5),
    ("level LIKE 'ER%'", lambda r: r[1] is not None and r[1].startswith("ER")),
    ("level LIKE '%RN'", lambda r: r[1] is not None and r[1].endswith("RN")),
    ("msg LIKE '%timeout%'", lambda r: "timeout" in r[2]),
    ("msg = 'request 3 from host-3 served ok'", lambda r: r[2] == "request 3 from host-3 served ok"),
    ("ts > TIMESTAMP '2024-01-01 00:30:00'", lambda r: r[4] > datetime.datetime(2024, 1, 1, 0, 30, tzinfo=UTC)),
    (
        "ts = TIMESTAMP '2024-01-01 00:01:30.25'",
        lambda r: r[4] == datetime.datetime(2024, 1, 1, 0, 1, 30, 250000, tzinfo=UTC),
    ),
    ("id = 3 OR level = 'WARN'", lambda r: r[0] == 3 or r[1] == "WARN"),
    ("lower(level) = 'warn'", lambda r: r[1] == "WARN"),
]


@pytest.mark.parametrize("where", [c[0] for c in FILTER_CASES])
def test_pushed_filters_give_spark_semantics(spark: Any, tmp_path_factory: pytest.TempPathFactory, where: str) -> None:
    table = _shared_table(spark, tmp_path_factory)
    expected = sorted(r[0] for r in log_rows(60) if dict(FILTER_CASES)[where](r))
    assert ids(read(spark, table).filter(where)) == expected


_TABLES: dict[int, Path] = {}


def _shared_table(spark: Any, factory: pytest.TempPathFactory) -> Path:
    key = id(spark)
    if key not in _TABLES:
        path = factory.mktemp("shared") / "t"
        write(make_df(spark, 60).repartition(3), path, **TEXT_OPTS)
        _TABLES[key] = path
    return _TABLES[key]


def test_index_queries_and_pushed_options(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    table = _shared_table(spark, tmp_path_factory)
    rows = log_rows(60)
    timeouts = sorted(r[0] for r in rows if "timeout" in r[2])
    assert ids(read(spark, table, **{"indexquery.msg": "timeout"})) == timeouts
    assert ids(read(spark, table, indexqueryall="msg:timeout AND msg:host-0")) == sorted(
        r[0] for r in rows if "timeout" in r[2] and "host-0" in r[2]
    )
    # columns / limit / a full boolean filter: same rows as Spark computing them itself
    mixed = {
        "op": "or",
        "children": [
            {"op": "query", "query": "timeout", "column": "msg"},
            {
                "op": "and",
                "children": [
                    {"op": "term", "column": "level", "value": "WARN"},
                    {"op": "range", "column": "ts", "upper": "2024-01-01T00:30:00+00:00"},
                ],
            },
        ],
    }
    expected = sorted(
        r[0]
        for r in rows
        if "timeout" in r[2] or (r[1] == "WARN" and r[4] <= datetime.datetime(2024, 1, 1, 0, 30, tzinfo=UTC))
    )
    df = connect_plugin.read(spark, str(table), columns=["id", "level"], filter=mixed)
    assert df.columns == ["id", "level"]
    assert ids(df) == expected
    limited = connect_plugin.read(spark, str(table), columns=["id"], limit=7, filter=mixed).collect()
    assert len(limited) == 7 and {r["id"] for r in limited} <= set(expected)
    assert connect_plugin.read(spark, str(table), limit=1000).count() == 60
    # LIMIT 0: the client builds it, the executors accept it (one decoder) and read no split
    assert connect_plugin.read(spark, str(table), columns=["id"], limit=0, filter=mixed).collect() == []


def test_time_travel(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "tt"
    write(make_df(spark, 5), table)
    write(make_df(spark, 5, start=5), table)
    log = executor_lib.open_log(str(table))
    stamps = {e.version: e.timestamp_ms for e in log.history()}
    assert ids(read(spark, table, versionAsOf=1)) == list(range(5))
    assert ids(read(spark, table, versionAsOf=2)) == list(range(10))
    moment = datetime.datetime.fromtimestamp((stamps[1] or 0) / 1000, UTC).isoformat()
    assert ids(read(spark, table, timestampAsOf=moment)) == list(range(5))
    assert ids(connect_plugin.read(spark, str(table), version_as_of=1)) == list(range(5))


def test_reused_dataframe_is_not_stale(spark: Any, tmp_path: Path) -> None:
    """Spark 4.3 caches a data source's reader on the DataFrame: with connect_plugin.install
    (Connect) or connect_plugin.read per query (classic) results stay right."""
    table = tmp_path / "s"
    write(make_df(spark, 6), table)
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        r = read(spark, table)
        assert r.count() == 6
        assert r.filter("id = 2").count() == 1
        assert r.count() == 6
        write(make_df(spark, 1, start=6), table)
        assert r.count() == 7
    else:
        assert connect_plugin.read(spark, str(table)).count() == 6
        assert connect_plugin.read(spark, str(table)).filter("id = 2").count() == 1
        assert connect_plugin.read(spark, str(table)).count() == 6
        write(make_df(spark, 1, start=6), table)
        assert connect_plugin.read(spark, str(table)).count() == 7


def _error_text(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    return str(excinfo.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"spark.indextables.indexing.typemap.msg": "fulltext"}, "expected string, text, json or ip"),
        ({"spark.indextables.no.such.option": "1"}, "unknown option 'spark.indextables.no.such.option'"),
        ({"spark.indextables.indexing.fastfields": "nope"}, "columns ['nope'] are not in the schema"),
        ({"partitionBy": "nope"}, "option partitionBy: columns ['nope'] are not in the table"),
    ],
)
def test_bad_write_options_fail_before_anything_is_written(
    spark: Any, tmp_path: Path, options: dict, message: str
) -> None:
    table = tmp_path / "bad"
    with pytest.raises(Exception) as excinfo:
        write(make_df(spark, 3), table, **options)
    assert message in _error_text(excinfo)
    assert not table.exists() or not any(table.rglob("*.split"))


def test_session_settings_of_other_operations_are_ignored_and_typos_are_not(spark: Any, tmp_path: Path) -> None:
    """Clients hand every ``spark.indextables.*`` session setting to every read, write and command:
    each ignores the others' settings (a write's typemap at a read), but not a key nobody knows."""
    table = tmp_path / "t"
    write(make_df(spark, 6), table, **TEXT_OPTS)
    session = {
        "spark.indextables.indexing.typemap.msg": "text",
        "spark.indextables.indexWriter.heapSize": "64M",
        "spark.indextables.read.maxSplitsPerPartition": "1",
    }
    for key, value in session.items():
        spark.conf.set(key, value)
    try:
        assert connect_plugin.read(spark, str(table)).count() == 6
        assert IndexTable.for_path(spark, str(table)).history().count() >= 1  # a command
        connect_plugin.write(make_df(spark, 2, start=6), str(table))
        assert connect_plugin.read(spark, str(table)).count() == 8
        spark.conf.set("spark.indextables.read.maxSplitsPerPartitoin", "1")
        with pytest.raises(Exception) as excinfo:
            connect_plugin.read(spark, str(table)).count()
        assert "unknown option 'spark.indextables.read.maxsplitsperpartitoin'" in _error_text(excinfo).lower()
    finally:
        for key in (*session, "spark.indextables.read.maxSplitsPerPartitoin"):
            spark.conf.unset(key)


def test_unindexable_type_and_schema_mismatch(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "u"
    with pytest.raises(Exception) as excinfo:
        write(spark.range(2).selectExpr("id", "null as nothing"), table)
    assert "'nothing'" in _error_text(excinfo) and "cannot be indexed" in _error_text(excinfo)
    write(make_df(spark, 2), table)
    with pytest.raises(Exception) as excinfo:
        write(spark.range(2).selectExpr("id", "'x' as other"), table)
    assert "does not match the table's" in _error_text(excinfo)
    assert executor_lib.open_log(str(table)).latest_version() == 1


def test_bad_reads(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception) as excinfo:
        read(spark, tmp_path / "missing").count()
    assert "missing" in _error_text(excinfo) and "table" in _error_text(excinfo).lower()
    table = tmp_path / "r"
    write(make_df(spark, 4), table, **TEXT_OPTS)
    with pytest.raises(Exception) as excinfo:
        read(spark, table, **{"indexquery.msg": "msg:(unclosed"}).count()
    assert "does not parse" in _error_text(excinfo)
    with pytest.raises(Exception) as excinfo:
        read(spark, table, colums="id").count()
    assert "unknown option 'colums'" in _error_text(excinfo)


def test_failed_job_leaves_no_visible_change(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "f"
    write(make_df(spark, 4), table)
    before = sorted(p.name for p in table.rglob("*.split"))
    bad = (
        make_df(spark, 40)
        .selectExpr(
            "id", "level", "msg", "score", "ts", "case when id = 39 then raise_error('boom') else day end as day"
        )
        .repartition(4)
    )
    with pytest.raises(Exception) as excinfo:
        write(bad, table)
    assert "boom" in _error_text(excinfo)
    assert executor_lib.open_log(str(table)).latest_version() == 1
    assert ids(read(spark, table)) == list(range(4))
    assert sorted(p.name for p in table.rglob("*.split")) == before  # uploads of finished tasks were deleted


def test_unsupported_protocol_is_refused(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "future"
    write(make_df(spark, 2), table)
    from executor_lib.protocol.actions import ProtocolAction

    log = executor_lib.open_log(str(table))
    log.commit([ProtocolAction(min_reader_version=9, min_writer_version=9)], operation="UPGRADE PROTOCOL")
    with pytest.raises(Exception) as excinfo:
        read(spark, table).count()
    assert "9" in _error_text(excinfo) and "protocol" in _error_text(excinfo).lower()


COMPAT_TABLES = sorted(p.name for p in COMPAT_ROOT.iterdir() if p.is_dir()) if COMPAT_ROOT.exists() else []


@pytest.mark.parametrize("name", COMPAT_TABLES)
def test_reads_every_indextables4spark_table(spark: Any, tmp_path: Path, name: str) -> None:
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.splits.search.table_search import search_table
    from executor_lib.storage import open_store

    table = tmp_path / name
    shutil.copytree(COMPAT_ROOT / name, table)  # never touch the shared originals
    snap = executor_lib.open_log(str(table)).snapshot()
    df = read(spark, table)
    assert [f.name for f in df.schema.fields] == snap.arrow_schema().names
    rows = df.collect()
    assert len(rows) == sum(a.num_records or 0 for a in snap.files)
    engine = search_table(open_store(str(table)), snap, None, SplitCache(tmp_path / "cache"))
    key = snap.arrow_schema().names
    assert sorted(tuple(r[c] for c in key) for r in rows) == sorted(
        tuple(r[c] for c in key) for r in engine.to_pylist()
    )
    first = key[0]
    sample = rows[0][first]
    assert any(r[first] == sample for r in read(spark, table).filter(f"{first} = {sample!r}").collect())


def test_round_trip_on_both_backends(spark: Any, table: tuple[str, dict[str, Any]]) -> None:
    """The same write/append/partition/filter/overwrite body on the local filesystem and on S3
    (moto on 127.0.0.1; storage settings travel as data-source options)."""
    uri, storage = table
    opts = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in storage.items()}
    connect_plugin.write(make_df(spark, 20), uri, partition_by=["day"], options={**opts, **TEXT_OPTS})
    connect_plugin.write(make_df(spark, 5, start=20), uri, options=opts)
    assert ids(connect_plugin.read(spark, uri, options=opts)) == list(range(25))
    assert ids(connect_plugin.read(spark, uri, options=opts).filter("level = 'WARN' AND day = '2024-01-02'")) == [
        i for i in range(25) if i % 4 == 1 and i % 3 == 1
    ]
    timeouts = connect_plugin.read(spark, uri, options={**opts, "indexquery.msg": "timeout"})
    assert ids(timeouts) == [i for i in range(25) if i % 5 == 0]
    connect_plugin.write(make_df(spark, 2, start=50), uri, mode="overwrite", options=opts)
    assert ids(connect_plugin.read(spark, uri, options=opts)) == [50, 51]
    log = executor_lib.open_log(uri, **storage)
    assert log.latest_version() == 3 and log.snapshot().partition_columns == ("day",)


def test_session_settings_reach_the_data_source(spark: Any, tmp_path: Path) -> None:
    """Spark hands Python data sources no session settings; connect_plugin.write/read copy the
    session's spark.indextables.* settings into the options."""
    table = tmp_path / "conf"
    spark.conf.set("spark.indextables.indexing.typemap.msg", "text")
    try:
        connect_plugin.write(make_df(spark, 10), str(table))
    finally:
        spark.conf.unset("spark.indextables.indexing.typemap.msg")
    snap = executor_lib.open_log(str(table)).snapshot()
    assert all(
        '"name":"msg"' in (snap.doc_mapping(a) or "") and '"tokenizer":"default"' in (snap.doc_mapping(a) or "")
        for a in snap.files
    )
    assert ids(connect_plugin.read(spark, str(table), options={"indexquery.msg": "timeout"})) == [0, 5]


def test_session_options_are_exactly_the_sessions_indextables_settings(spark: Any) -> None:
    """What every read, write and command carries: the session's spark.indextables.* settings (values
    with any characters), not table names, and its time zone."""
    settings = {
        "spark.indextables.indexing.typemap.msg": "text",
        "spark.indextables.test.value": "a, b -> c\nd=e (f)",
        "spark.indextables.table.logs": "/data/logs",
    }
    for name, value in settings.items():
        spark.conf.set(name, value)
    try:
        options = connect_plugin.session_options(spark)
    finally:
        for name in settings:
            spark.conf.unset(name)
    mine = {k: v for k, v in options.items() if k.startswith("spark.indextables.")}
    assert mine == {k: v for k, v in settings.items() if ".table." not in k}
    assert options["sessionTimeZone"] == spark.conf.get("spark.sql.session.timeZone")
    assert "spark.indextables.test.value" not in connect_plugin.session_options(spark)


def test_empty_tables_and_pruned_reads_return_no_rows(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "empty"
    write(make_df(spark, 0), table)  # creates the table, no split
    assert executor_lib.open_log(str(table)).snapshot().files == []
    assert read(spark, table).count() == 0
    write(make_df(spark, 3), table)
    assert read(spark, table).filter("id > 100").count() == 0  # every split pruned


def test_ip_columns_through_spark(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "ips"
    rows = [(i, f"10.0.{i // 10}.{i % 10}" if i % 3 else f"192.168.0.{i}") for i in range(30)]
    df = spark.createDataFrame(rows, "id long, ip string")
    write(df, table, **{"spark.indextables.indexing.typemap.ip": "ip"})
    in_ten = sorted(i for i, ip in rows if ip.startswith("10."))
    assert ids(read(spark, table, **{"indexquery.ip": "[10.0.0.0 TO 10.255.255.255]"})) == in_ten
    assert ids(read(spark, table).where("ip = '10.0.1.3'")) == [13]
    assert ids(read(spark, table).where("ip in ('192.168.0.3', '10.0.0.1')")) == [1, 3]
    assert sorted(r["ip"] for r in read(spark, table).collect()) == sorted(ip for _, ip in rows)


def test_store_only_and_index_only_columns_in_spark(spark: Any, tmp_path: Path) -> None:
    """An index-only column reads as null and is filtered by the index; a filter Spark would have to check
    on its (unstored) values fails before any task runs. A store-only column reads back and is filtered on
    the rows."""
    table = tmp_path / "io"
    write(
        make_df(spark, 40),
        table,
        **{**TEXT_OPTS, "spark.indextables.indexing.indexonly": "level", "spark.indextables.indexing.storeonly": "msg"},
    )
    df = read(spark, table)
    assert {r["level"] for r in df.collect()} == {None}
    assert ids(df.filter("level = 'WARN'")) == [i for i in range(40) if i % 4 == 1]
    assert ids(df.filter("level in ('INFO', 'ERROR')")) == [i for i in range(40) if i % 4 in (0, 2)]
    assert ids(df.filter("msg like '%timeout%'")) == list(range(0, 40, 5))
    with pytest.raises(Exception) as excinfo:
        df.filter("level > 'INFO'").collect()
    assert "columns ['level'] are index-only" in _error_text(excinfo)
