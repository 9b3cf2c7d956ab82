"""DELETE and UPDATE (``connect_plugin.row_changes``) in classic and Spark Connect sessions: the rows
change exactly, only the splits holding a match are rewritten, one commit replaces them, time travel
still shows the old rows, and bad input is refused before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import executor_lib
from connect_plugin.table import IndexTable
from indextables_contract.errors import ConfigError, IndexTablesSQLError
from tests.connect_plugin.test_table import small_appends
from tests.spark.test_datasource import log_rows


def _rows(t: IndexTable, version: int | None = None) -> dict[int, tuple[Any, ...]]:
    return {r["id"]: tuple(r) for r in t.to_df(version_as_of=version).collect()}


def _split_paths(table: Path) -> set[str]:
    return {a.path for a in executor_lib.open_log(str(table)).snapshot().files}


def test_delete_rewrites_only_the_splits_holding_a_match(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "d"
    small_appends(spark, table, 4, per=10)  # 4 appends x 3 day partitions: 12 splits, ids 0..39
    t = IndexTable.for_path(spark, str(table))
    before, version_before, splits_before = _rows(t), t.history(1).collect()[0]["version"], _split_paths(table)
    # ids 3 and 27: two splits of the 12 (3 is day 1 of the first append, 27 day 1 of the third)
    result = t.delete("id = 3 OR id = 27").collect()
    assert len(result) == 1
    row = result[0]
    assert (row["operation"], row["numDeletedRows"], row["numRemovedSplits"]) == ("DELETE", 2, 2)
    # (the two are of one partition: their kept rows may be written as one split)
    assert row["numAddedSplits"] in (1, 2) and row["version"] == version_before + 1
    after = _rows(t)
    assert after == {k: v for k, v in before.items() if k not in (3, 27)}
    splits_after = _split_paths(table)
    assert len(splits_before - splits_after) == 2 and len(splits_after - splits_before) == row["numAddedSplits"]
    assert _rows(t, version_before) == before  # time travel still shows them
    history = t.history(1).collect()[0]
    assert history["operation"] == "DELETE"


def test_delete_by_index_query_and_partition_and_nothing_matching(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "q"
    small_appends(spark, table, 2, per=15)  # ids 0..29; msg "failed with timeout" on multiples of 5
    t = IndexTable.for_path(spark, str(table))
    before = _rows(t)
    gone = {i for i, r in before.items() if i % 5 == 0 and r[5] == "2024-01-02"}
    assert gone
    row = t.delete("msg indexquery 'timeout' AND day = '2024-01-02'").collect()[0]
    assert row["numDeletedRows"] == len(gone)
    assert set(_rows(t)) == set(before) - gone
    version = t.history(1).collect()[0]["version"]
    nothing = t.delete("msg indexquery 'nosuchword'").collect()[0]
    assert (nothing["version"], nothing["numDeletedRows"], nothing["numRemovedSplits"]) == (None, 0, 0)
    assert t.history(1).collect()[0]["version"] == version  # nothing committed


def test_delete_every_row_of_a_split_leaves_no_empty_split(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "e"
    small_appends(spark, table, 2, per=6)
    t = IndexTable.for_path(spark, str(table))
    day_one = [
        a for a in executor_lib.open_log(str(table)).snapshot().files if a.partition_values["day"] == "2024-01-01"
    ]
    row = t.delete("day = '2024-01-01'").collect()[0]
    assert (row["numAddedSplits"], row["numRemovedSplits"], row["numDeletedRows"]) == (0, len(day_one), 4)
    assert all(r[5] != "2024-01-01" for r in _rows(t).values()) and len(_rows(t)) == 8
    snapshot = executor_lib.open_log(str(table)).snapshot()
    assert all(a.partition_values.get("day") != "2024-01-01" for a in snapshot.files)


def test_update_sets_expressions_on_matching_rows_only(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "u"
    small_appends(spark, table, 3, per=8)
    t = IndexTable.for_path(spark, str(table))
    before = _rows(t)
    row = t.update("id < 4", set={"level": "'FIXED'", "score": "score * 100 + id"}).collect()[0]
    assert (row["operation"], row["numUpdatedRows"]) == ("UPDATE", 4)
    after = _rows(t)
    assert set(after) == set(before)
    for i, r in after.items():
        if i < 4:
            assert r[1] == "FIXED" and r[3] == before[i][3] * 100 + i and r[2] == before[i][2]
        else:
            assert r == before[i]
    assert t.count("level:FIXED") == 4  # the index of the rewritten splits knows the new values


def test_update_moves_rows_between_partitions(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "p"
    small_appends(spark, table, 1, per=9)
    t = IndexTable.for_path(spark, str(table))
    t.update("day = '2024-01-01'", set={"day": "'2024-02-01'"}).collect()
    days = sorted({r[5] for r in _rows(t).values()})
    assert days == ["2024-01-02", "2024-01-03", "2024-02-01"]
    parts = {a.partition_values.get("day") for a in executor_lib.open_log(str(table)).snapshot().files}
    assert parts == set(days)


def test_bad_row_changes_are_refused_before_anything_is_written(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "b"
    small_appends(spark, table, 1, per=6)
    t = IndexTable.for_path(spark, str(table))
    version = t.history(1).collect()[0]["version"]
    with pytest.raises(ConfigError, match="SET nosuch: no such column"):
        t.update("id = 1", set={"nosuch": "1"})
    with pytest.raises(ConfigError, match=r"SET id = 'abc'.*a string value cannot be stored in a bigint column"):
        t.update("id = 1", set={"id": "'abc'"})
    with pytest.raises(Exception, match="nosuch"):
        t.delete("nosuch = 1")
    with pytest.raises(IndexTablesSQLError):
        t.delete("id = = 1")
    assert t.history(1).collect()[0]["version"] == version
    assert len(_rows(t)) == 6


def test_row_changes_agree_with_the_rows_spark_computes(classic_spark: Any, tmp_path: Path) -> None:
    """DELETE and UPDATE against Spark's own evaluation of the same predicates on the same rows."""
    table = tmp_path / "s"
    small_appends(classic_spark, table, 3, per=20)
    t = IndexTable.for_path(classic_spark, str(table))
    expected = [r for r in log_rows(60) if not (r[3] > 5.0 and r[1] == "WARN")]
    t.delete("score > 5.0 AND level = 'WARN'").collect()
    assert sorted(_rows(t)) == sorted(r[0] for r in expected)
    t.update("level IS NULL", set={"level": "'NONE'"}).collect()
    assert all(r[1] is not None for r in _rows(t).values())
    assert sum(1 for r in _rows(t).values() if r[1] == "NONE") == sum(1 for r in expected if r[1] is None)


def test_sql_delete_and_update(spark: Any, tmp_path: Path) -> None:
    from connect_plugin.sql import sql

    table = tmp_path / "sql"
    small_appends(spark, table, 2, per=10)
    t = IndexTable.for_path(spark, str(table))
    before = _rows(t)
    ref = f"indextables.`{table}`"
    row = sql(spark, f"DELETE FROM {ref} t WHERE t.msg indexquery 'timeout' AND id > 4").collect()[0]
    gone = {i for i in before if i % 5 == 0 and i > 4}
    assert row["numDeletedRows"] == len(gone) and set(_rows(t)) == set(before) - gone
    # a string literal holding the keywords counts as a value, not as SQL
    done = sql(
        spark, f"UPDATE {ref} AS t SET msg = 'where set = 1, x', score = t.score + 1 WHERE t.id IN (1, 2)"
    ).collect()
    assert done[0]["numUpdatedRows"] == 2
    after = _rows(t)
    assert after[1][2] == "where set = 1, x" and after[2][3] == before[2][3] + 1 and after[3] == before[3]
    with pytest.raises(IndexTablesSQLError, match="needs a WHERE"):
        sql(spark, f"DELETE FROM {ref}")
    with pytest.raises(IndexTablesSQLError, match="expected <column> = <expression>"):
        sql(spark, f"UPDATE {ref} SET msg WHERE id = 1")


def test_the_docs_statements_run_as_written(spark: Any, tmp_path: Path) -> None:
    """docs/row-changes.md's block, on a local table with the columns it names (only the path swapped)."""
    import connect_plugin
    from tests.test_readme import runnable_blocks

    (block,) = runnable_blocks("docs/row-changes.md", "## The statements")
    path = str(tmp_path / "logs")
    rows = [
        (i, i % 50, ["debug ssn 123", "ok", "debug heartbeat"][i % 3], ["warn", "info"][i % 2], i * 10, "web-1", day)
        for i, day in zip(range(120), ["2024-05-01", "2024-05-02"] * 60, strict=True)
    ]
    schema = "id long, user_id long, msg string, level string, latency long, host string, day string"
    options = {"spark.indextables.indexing.typemap.msg": "text"}
    connect_plugin.write(spark.createDataFrame(rows, schema), path, partition_by=["day"], options=options)
    exec(compile(block.replace("s3://bucket/logs", path), "docs/row-changes.md", "exec"), {"spark": spark})
    after = {r["id"]: r for r in IndexTable.for_path(spark, path).to_df().collect()}
    expected = {
        r[0] for r in rows if not (r[1] == 42 or "ssn" in r[2]) and not (r[6] == "2024-05-01" and "debug" in r[2])
    }
    assert set(after) == expected
    assert all(r["level"] in ("WARN", "info") for r in after.values())
    assert (after[7]["latency"], after[7]["host"]) == (140, "web-2")


def test_predicates_spark_evaluates_narrow_the_index_part(spark: Any, tmp_path: Path) -> None:
    """Top-level AND parts over function calls or arithmetic are applied by Spark to the rows the index
    part marks: only their rows change, and a statement none of them holds on commits nothing."""
    from connect_plugin.sql import sql

    table = tmp_path / "f"
    small_appends(spark, table, 2, per=15)
    t = IndexTable.for_path(spark, str(table))
    before = _rows(t)
    gone = {i for i in before if i % 5 == 0 and i % 2 == 0}  # "timeout" rows are the multiples of 5
    row = t.delete("msg indexquery 'timeout' AND id % 2 = 0").collect()[0]
    assert row["numDeletedRows"] == len(gone) and set(_rows(t)) == set(before) - gone
    version = t.history(1).collect()[0]["version"]
    assert t.delete("id % 2 = 0 AND upper(level) = 'NOPE'").collect()[0]["version"] is None
    assert t.history(1).collect()[0]["version"] == version
    done = sql(spark, f"UPDATE indextables.`{table}` t SET level = lower(t.level) WHERE t.id * 2 > 50").collect()
    assert done[0]["numUpdatedRows"] == sum(1 for i in set(before) - gone if i * 2 > 50)
    after = _rows(t)
    assert all(r[1] == (before[i][1].lower() if before[i][1] and i > 25 else before[i][1]) for i, r in after.items())
