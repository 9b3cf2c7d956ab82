"""The third census's holes 11 and 12 (issue 50), one test each that failed before its fix.

* hole 12, errors that lead with the answer, tried as a new user would, in classic and Connect sessions:
  a. an unknown column in ``connect_plugin.sql`` was followed by PySpark's multi-kilobyte
     ``SQLQueryContextLogger`` ERROR line with a Java stack, after the project's clear error;
  b. a misspelt write option gave Spark's ``[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data
     source writer`` with the project's line 36th of 37, no did-you-mean;
  c. an unbalanced ``'`` said ``Syntax error at or near 'indexquery'`` and echoed an internal view name;
  d. a missing table's clear message was line 54 of 55;
  e. did-you-mean suggested ``indexqueryall`` for ``indexquerry.message`` and lower-cased the key it echoed;
* hole 11: nothing checked a split's Quickwit hotcache against the members it caches (a whole split's
  read, then a split's read by the piece, which fetched the hotcache with its footer and never looked at it).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from indextables_contract import errors

SCHEMA = "id long, message string, level string"
_VIEW = re.compile(r"indextables_[0-9a-f]{12}")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory, classic_spark: Any) -> str:
    path = tmp_path_factory.mktemp("round3-errors") / "logs"
    rows = [(i, f"disk error {i}", "INFO" if i % 2 else "ERROR") for i in range(20)]
    connect_plugin.write(classic_spark.createDataFrame(rows, SCHEMA), str(path))
    return str(path)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def query_context_logs() -> Iterator[list[logging.LogRecord]]:
    """What PySpark's query-context loggers log (they do not propagate: a handler of their own)."""
    from pyspark.logger import PySparkLogger

    handler = _Records()
    loggers = [PySparkLogger.getLogger(n) for n in ("SQLQueryContextLogger", "DataFrameQueryContextLogger")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler.records
    for logger in loggers:
        logger.removeHandler(handler)


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0]


def test_hole12a_an_unknown_column_is_told_once_without_sparks_error_log(
    spark: Any, table: str, query_context_logs: list[logging.LogRecord]
) -> None:
    target = f"indextables.`{table}`"
    for statement in (
        f"SELECT nosuch FROM {target} WHERE message indexquery 'disk'",
        f"SELECT id FROM {target} ORDER BY nosuch",
        f"SELECT upper(nosuch) FROM {target}",
    ):
        with pytest.raises(errors.StatementError) as failure:
            connect_plugin.sql(spark, statement).collect()
        assert _first_line(failure.value).startswith("[INDEXTABLES_SQL_STATEMENT] column 'nosuch' is not in the table")
        assert not query_context_logs, [r.getMessage()[:200] for r in query_context_logs]
    # Spark's own statements keep Spark's error and its log
    with pytest.raises(Exception, match="UNRESOLVED_COLUMN") as failure:
        connect_plugin.sql(spark, "SELECT nosuch FROM range(3)").collect()
    assert not isinstance(failure.value, errors.IndexTablesError)
    assert len(query_context_logs) == 1


def test_hole12b_a_misspelt_write_option_leads_with_the_project_line(spark: Any, table: str) -> None:
    df = spark.createDataFrame([(1, "x", "INFO")], SCHEMA)
    with pytest.raises(errors.ConfigError) as failure:
        connect_plugin.write(df, table, options={"spark.indextables.indexWriter.heapszie": "100M"})
    assert str(failure.value) == (
        "[INDEXTABLES_CONFIG] write: unknown option 'spark.indextables.indexWriter.heapszie' (did you mean "
        "spark.indextables.indexWriter.heapSize?); the known spark.indextables.* settings are listed in "
        "docs/settings.md"
    )
    # Spark's own API (which lower-cases option names): once connect_plugin.install hooked
    # DataFrameWriter.save (issue 76), the same error in the user's spelling, not Spark's
    # "[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data source writer: " before it
    expected = str(failure.value)
    writer = df.write.format("indextables").mode("append").option("spark.indextables.indexWriter.heapszie", "100M")
    with pytest.raises(errors.ConfigError) as failure:
        writer.save(table)
    assert str(failure.value) == expected


def test_hole12c_an_unbalanced_quote_points_at_the_quote(spark: Any, table: str) -> None:
    target = f"indextables.`{table}`"
    statement = f"SELECT id FROM {target}\nWHERE message indexquery 'disk AND level = 'INFO'"
    column = statement.splitlines()[1].rindex("'") + 1  # the quote that never closes
    with pytest.raises(errors.IndexTablesSQLError) as failure:
        connect_plugin.sql(spark, statement).collect()
    text = str(failure.value)
    assert _first_line(failure.value) == (
        f"[INDEXTABLES_SQL] syntax error at line 2, column {column}: the string literal that starts here is "
        "never closed (a ' without its closing ')"
    ), text
    assert not _VIEW.search(text) and "indexquery'" not in text
    for statement, what in (
        (f"SELECT id FROM {target} WHERE message indexquery 'disk", "line 1"),
        (f"SELECT id FROM `{table} WHERE id = 1", "back-quoted name"),
        (f"SELECT id FROM {target} /* WHERE id = 1", "comment"),
    ):
        with pytest.raises(errors.IndexTablesSQLError, match=what) as failure:
            connect_plugin.sql(spark, statement).collect()
        assert not _VIEW.search(str(failure.value)), failure.value


def test_hole12c_sparks_syntax_errors_name_the_users_table_not_a_view(spark: Any, table: str) -> None:
    statement = f"SELECT id, FROM indextables.`{table}` WHERE id = 1 OR message indexquery 'disk'"
    with pytest.raises(errors.IndexTablesError) as failure:
        connect_plugin.sql(spark, statement).collect()
    chain, seen = [], failure.value
    while seen is not None:
        chain.append(str(seen))
        seen = seen.__cause__ or seen.__context__
    assert not any(_VIEW.search(t) for t in chain), chain


def test_hole12d_a_missing_table_is_the_projects_error(spark: Any, tmp_path: Path) -> None:
    missing = str(tmp_path / "nosuch")
    for call in (
        lambda: connect_plugin.read(spark, missing).collect(),
        lambda: connect_plugin.sql(spark, f"SELECT id FROM indextables.`{missing}`").collect(),
        lambda: connect_plugin.sql(spark, f"SELECT count(*) FROM indextables.`{missing}`").collect(),
        lambda: connect_plugin.sql(spark, f"DESCRIBE INDEXTABLES STATE '{missing}'").collect(),
    ):
        with pytest.raises(errors.TableNotFoundError) as failure:
            call()
        first = _first_line(failure.value)
        assert first.startswith("[INDEXTABLES_TABLE_NOT_FOUND] ") and "nosuch" in first, first
        assert "check the path" in first, first


def test_hole12e_did_you_mean_keeps_the_users_spelling_and_compares_whole_keys(spark: Any, table: str) -> None:
    with pytest.raises(errors.ConfigError) as failure:
        connect_plugin.read(spark, table, options={"indexQuerry.message": "disk"}).collect()
    first = _first_line(failure.value)
    assert "'indexQuerry.message'" in first and "did you mean indexquery.message?" in first, first
    with pytest.raises(errors.ConfigError) as failure:
        connect_plugin.read(spark, table, options={"indexqueryal": "disk"}).collect()
    assert "did you mean indexqueryall?" in _first_line(failure.value)
    with pytest.raises(errors.ConfigError) as failure:
        connect_plugin.read(spark, table, options={"versionAsof2": "1"}).collect()
    assert "'versionAsof2'" in _first_line(failure.value) and "did you mean versionAsOf?" in _first_line(failure.value)
    with pytest.raises(errors.IndexTablesSQLError) as failure:
        connect_plugin.sql(spark, f"SELECT id FROM indextables.`{table}` WHERE message indexQuerry 'disk'").collect()
    assert "did you mean indexquery?" in _first_line(failure.value), failure.value
    assert "indexQuerry" in _first_line(failure.value)


def _written_split(tmp_path: Path) -> tuple[Any, Any, Path]:
    import pyarrow as pa

    import executor_lib
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.publish import write_and_upload

    schema = pa.schema([("id", pa.int64()), ("msg", pa.string())])
    log = executor_lib.create_table(str(tmp_path / "t"), schema)
    data = pa.table({"id": list(range(50)), "msg": [f"row {i}" for i in range(50)]})
    log.commit([write_and_upload(log.store, data, mapping_for(schema, {}))])
    (add,) = log.snapshot().files
    return log, add, tmp_path / "t" / add.path


def test_hole11_every_bit_flip_of_a_hotcache_that_parses_is_caught(tmp_path: Path) -> None:
    import random
    import struct

    from executor_lib.format.quickwit.bundle import check_hotcache, read_footer, read_hotcache

    _, _, split = _written_split(tmp_path)
    good = split.read_bytes()
    footer = read_footer(split)
    members = {name: good[s:e] for name, (s, e) in footer.files.items()}
    check_hotcache(split, footer, "s")  # a written split's hotcache is its members' bytes
    (length,) = struct.unpack("<I", good[-4:])
    start = len(good) - 4 - length
    rng = random.Random(11)
    parsed, wrong, silent = 0, 0, []
    for i in range(start, len(good) - 4):  # every byte of the hotcache, one bit of each
        flipped = bytearray(good)
        flipped[i] ^= 1 << rng.randrange(8)
        split.write_bytes(bytes(flipped))
        try:
            cache = read_hotcache(split)
        except errors.CorruptSplitError:
            continue
        parsed += 1
        # what the JVM's HotDirectory would serve differs from the member (a shorter slice of the same
        # bytes, or none, is only less cached)
        differs = any(
            name not in members or any(piece.data != members[name][piece.start : piece.stop] for piece in file.slices)
            for name, file in cache.slice_caches.items()
        ) or any(name not in members or n != len(members[name]) for name, n in cache.file_lengths.items())
        wrong += differs
        try:
            check_hotcache(split, footer, "s")
        except errors.CorruptSplitError as e:
            assert str(e).startswith("[INDEXTABLES_CORRUPT_SPLIT] s: ") and "member " in str(e), e
        else:
            if differs:
                silent.append(i - start)
    split.write_bytes(good)
    assert wrong > parsed // 2, (wrong, parsed)  # most flips that parse change what a slice serves
    assert not silent, f"{len(silent)} of {wrong} flips that parse and serve other bytes were not caught"


def test_hole11_a_damaged_hotcache_slice_fails_a_read_naming_split_and_member(tmp_path: Path) -> None:
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.format.quickwit.bundle import read_hotcache
    from executor_lib.splits.search.table_search import search_table

    log, add, split = _written_split(tmp_path)
    good = split.read_bytes()
    name, file = next((n, f) for n, f in read_hotcache(split).slice_caches.items() if n.endswith(".idx") and f.slices)
    piece = file.slices[0]
    at = good.rindex(piece.data)  # the slice's bytes in the hotcache, at the split's end (the member's come first)
    assert at > len(good) // 2
    damaged = bytearray(good)
    damaged[at] ^= 0x01
    split.write_bytes(bytes(damaged))
    with pytest.raises(errors.CorruptSplitError, match=rf"{re.escape(add.path)}.*member {re.escape(name)}.*hotcache"):
        search_table(log.store, log.snapshot(), "*", SplitCache(tmp_path / "cache"))
    split.write_bytes(good)
    assert search_table(log.store, log.snapshot(), "*", SplitCache(tmp_path / "cache2")).num_rows == 50


@pytest.mark.parametrize("member", [".idx", ".fast", "meta.json"])
def test_hole11_a_damaged_hotcache_slice_fails_a_read_by_the_piece(
    moto_server: Any, tmp_path: Path, member: str
) -> None:
    import uuid

    import executor_lib
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.format.quickwit.bundle import read_hotcache
    from executor_lib.splits.search.table_search import search_table
    from tests.conftest import BUCKET, s3_options

    local, add, split = _written_split(tmp_path)
    uri = f"s3://{BUCKET}/tables/{uuid.uuid4().hex}"
    log = executor_lib.create_table(uri, local.snapshot().arrow_schema(), **s3_options(moto_server))
    good = split.read_bytes()
    log.store.put(add.path, good)
    log.commit([add])
    cache = SplitCache(tmp_path / "cache")
    assert search_table(log.store, log.snapshot(), "*", cache).num_rows == 50  # fetched by the piece
    assert cache.pieces(log.store, add.path, add.size, add.footer_start_offset) is not None
    name, file = next((n, f) for n, f in read_hotcache(split).slice_caches.items() if n.endswith(member) and f.slices)
    at = good.rindex(file.slices[-1].data)  # the slice's bytes in the hotcache, at the split's end
    assert at > add.footer_start_offset
    damaged = bytearray(good)
    damaged[at] ^= 0x01
    log.store.put(add.path, bytes(damaged))
    cache.flush()
    with pytest.raises(errors.CorruptSplitError, match=rf"{re.escape(add.path)}.*member {re.escape(name)}.*hotcache"):
        search_table(log.store, log.snapshot(), "*", cache)
    log.store.put(add.path, good)  # repaired: the same cache reads it
    assert search_table(log.store, log.snapshot(), "*", cache).num_rows == 50
