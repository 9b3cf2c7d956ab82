"""MERGE INTO (``connect_plugin.merge_into``) in classic and Spark Connect sessions: the final rows are
exactly those computed here in Python, clauses apply in order, only inserts are written when no split
holds a key, a source row matching two target rows and bad columns are refused before anything is
written, and the SQL form runs through the same builder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import executor_lib
from connect_plugin.merge_into import merge_into_statement
from connect_plugin.table import IndexTable
from indextables_contract.errors import ConfigError, IndexTablesSQLError
from tests.connect_plugin.test_table import small_appends
from tests.spark.test_datasource import SCHEMA, log_rows


def _rows(t: IndexTable, version: int | None = None) -> dict[int, tuple[Any, ...]]:
    return {r["id"]: tuple(r) for r in t.to_df(version_as_of=version).collect()}


def _version(t: IndexTable) -> int:
    return int(t.history(1).collect()[0]["version"])


def _source(spark: Any, ids: range, level: str = "NEW") -> Any:
    rows = [(i, level, f"merged {i}", float(i) * 10, ts, day) for i, _, _, _, ts, day in log_rows(len(ids), ids.start)]
    return spark.createDataFrame(rows, SCHEMA)


def test_upsert_half_matching_half_new(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "up"
    small_appends(spark, table, 2, per=10)  # ids 0..19 in 6 splits
    t = IndexTable.for_path(spark, str(table))
    before, version = _rows(t), _version(t)
    source = _source(spark, range(10, 30))  # 10..19 match, 20..29 are new
    incoming = {r["id"]: tuple(r) for r in source.collect()}
    row = t.merge(source, "t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute().collect()
    assert len(row) == 1
    r = row[0]
    assert (r["operation"], r["numUpdatedRows"], r["numInsertedRows"], r["numDeletedRows"]) == ("MERGE", 10, 10, 0)
    assert r["version"] == version + 1 and r["numRemovedSplits"] >= 1
    assert _rows(t) == {**before, **incoming}
    assert _rows(t, version) == before  # time travel still shows the old rows
    assert t.count("msg:merged") == 20  # the rewritten splits' index knows the new values


def test_conditional_update_and_delete_clauses_first_match_wins(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "cond"
    small_appends(spark, table, 2, per=10)
    t = IndexTable.for_path(spark, str(table))
    before = _rows(t)
    source = _source(spark, range(0, 16), level="DEL").union(_source(spark, range(16, 26), level="KEEP"))
    incoming = {r["id"]: tuple(r) for r in source.collect()}
    result = (
        t.merge(source, "s.id = t.id")
        .when_matched_delete("s.level = 'DEL' AND t.id % 2 = 0")  # first: even DEL ids deleted
        .when_matched_update({"level": "'UPD'", "score": "t.score + s.score"}, condition="t.id > 5")
        .when_not_matched_insert(
            {"id": "s.id", "level": "s.level", "msg": "s.msg", "score": "1", "ts": "s.ts", "day": "s.day"},
            condition="s.id < 24",
        )
        .execute()
        .collect()[0]
    )
    expected = dict(before)
    deleted = updated = inserted = 0
    for i, src in incoming.items():
        if i in before:
            if src[1] == "DEL" and i % 2 == 0:
                del expected[i]
                deleted += 1
            elif i > 5:
                old = before[i]
                expected[i] = (i, "UPD", old[2], old[3] + src[3], old[4], old[5])
                updated += 1
        elif i < 24:
            expected[i] = (i, src[1], src[2], 1.0, src[4], src[5])
            inserted += 1
    assert (result["numDeletedRows"], result["numUpdatedRows"], result["numInsertedRows"]) == (
        deleted,
        updated,
        inserted,
    )
    assert _rows(t) == expected


def test_insert_only_when_no_split_matches(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "ins"
    small_appends(spark, table, 1, per=6)
    t = IndexTable.for_path(spark, str(table))
    before, version = _rows(t), _version(t)
    source = _source(spark, range(100, 105))
    r = t.merge(source, "t.id = s.id").when_matched_delete().when_not_matched_insert_all().execute().collect()[0]
    assert (r["numInsertedRows"], r["numRemovedSplits"], r["numDeletedRows"], r["version"]) == (5, 0, 0, version + 1)
    assert _rows(t) == {**before, **{x["id"]: tuple(x) for x in source.collect()}}
    # inserts only, some keys present: those rows are left, the splits holding them not rewritten
    splits = {a.path for a in executor_lib.open_log(str(table)).snapshot().files}
    more = _source(spark, range(3, 9))
    r = t.merge(more, "t.id = s.id").when_not_matched_insert_all().execute().collect()[0]
    assert (r["numInsertedRows"], r["numRemovedSplits"], r["numUpdatedRows"]) == (3, 0, 0)
    assert splits <= {a.path for a in executor_lib.open_log(str(table)).snapshot().files}
    new = {x["id"]: tuple(x) for x in more.collect() if x["id"] >= 6}
    assert _rows(t) == {**before, **{x["id"]: tuple(x) for x in source.collect()}, **new}
    version += 1
    # nothing to do at all: nothing committed
    none = t.merge(source, "t.id = s.id").when_not_matched_insert_all().execute().collect()[0]
    assert none["version"] is None and _version(t) == version + 1


def test_a_source_row_matching_two_target_rows_and_bad_columns_write_nothing(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "bad"
    small_appends(spark, table, 1, per=6)
    t = IndexTable.for_path(spark, str(table))
    before, version = _rows(t), _version(t)
    twice = _source(spark, range(2, 4)).union(_source(spark, range(3, 4)))
    with pytest.raises(ConfigError, match=r"multiple source rows matched the same target row \(id=3\)"):
        t.merge(twice, "t.id = s.id").when_matched_update_all().execute()
    source = _source(spark, range(4, 8))
    with pytest.raises(ConfigError, match="UPDATE SET nosuch: no such column"):
        t.merge(source, "t.id = s.id").when_matched_update({"nosuch": "1"}).execute()
    with pytest.raises(ConfigError, match=r"condition s\.nosuch > 1"):
        t.merge(source, "t.id = s.id").when_matched_delete("s.nosuch > 1").execute()
    with pytest.raises(ConfigError, match=r"gives no value for columns \['level', 'msg', 'score', 'ts', 'day'\]"):
        t.merge(source, "t.id = s.id").when_not_matched_insert({"id": "s.id"}).execute()
    with pytest.raises(ConfigError, match=r"INSERT \* needs the source to have every column.*\['msg'\]"):
        t.merge(source.drop("msg"), "t.id = s.id").when_not_matched_insert_all().execute()
    with pytest.raises(ConfigError, match=r"SET id = 'abc'.*cannot be stored in a bigint column"):
        t.merge(source, "t.id = s.id").when_matched_update({"id": "'abc'"}).execute()
    with pytest.raises(ConfigError, match=r"ON t\.nosuch > s\.id: .*nosuch"):
        t.merge(source, "t.id = s.id AND t.nosuch > s.id").when_matched_delete().execute()
    with pytest.raises(ConfigError, match=r"ON t\.id \+ s\.id: not a boolean"):
        t.merge(source, "t.id + s.id").when_matched_delete().execute()
    with pytest.raises(ConfigError, match=r"multiple source rows matched the same target row \(id=3\)"):
        t.merge(twice, "t.id = s.id AND s.score >= 0").when_matched_update_all().execute()
    assert _version(t) == version and _rows(t) == before


def test_two_key_columns(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "two"
    small_appends(spark, table, 1, per=9)
    t = IndexTable.for_path(spark, str(table))
    before = _rows(t)
    source = _source(spark, range(0, 6))  # same id and day as the target's ids 0..5
    r = (
        t.merge(source, "t.id = s.id AND t.day = s.day")
        .when_matched_update({"msg": "concat(t.msg, ' / ', s.msg)"})
        .execute()
        .collect()[0]
    )
    assert r["numUpdatedRows"] == 6
    after = _rows(t)
    assert after == {i: (*row[:2], f"{row[2]} / merged {i}", *row[3:]) if i < 6 else row for i, row in before.items()}


def test_sql_merge_into(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "sql"
    small_appends(spark, table, 1, per=10)
    t = IndexTable.for_path(spark, str(table))
    before = _rows(t)
    _source(spark, range(5, 15)).createOrReplaceTempView("merge_updates")
    text = f"""MERGE INTO indextables.`{table}` AS tgt USING merge_updates src ON tgt.id = src.id
        WHEN MATCHED AND src.id = 5 THEN DELETE
        WHEN MATCHED THEN UPDATE SET msg = 'when matched then delete, x', score = tgt.score + 1
        WHEN NOT MATCHED AND src.id < 12 THEN INSERT (id, level, msg, score, ts, day)
            VALUES (src.id, 'I', concat('new ', src.msg), 0, src.ts, src.day)
        WHEN NOT MATCHED THEN INSERT *"""
    r = merge_into_statement(spark, text, {})
    assert r is not None
    row = r.collect()[0]
    assert (row["numDeletedRows"], row["numUpdatedRows"], row["numInsertedRows"]) == (1, 4, 5)
    after = _rows(t)
    assert 5 not in after and after[6][2] == "when matched then delete, x" and after[6][3] == before[6][3] + 1
    assert after[11][1:4] == ("I", "new merged 11", 0.0) and after[13][1:4] == ("NEW", "merged 13", 130.0)
    assert all(after[i] == before[i] for i in range(5))
    assert merge_into_statement(spark, "MERGE INTO some_delta_table t USING u s ON t.id = s.id", {}) is None
    # no aliases: the target is t, the source its view's name; a condition without a key that matches
    # a target row twice names the row
    with pytest.raises(ConfigError, match=r"multiple source rows matched the same target row \(id=\d+, level="):
        merge_into_statement(
            spark,
            f"MERGE INTO indextables.`{table}` USING merge_updates ON t.id > merge_updates.id WHEN MATCHED THEN DELETE",
            {},
        )
    with pytest.raises(IndexTablesSQLError, match="expected THEN"):
        merge_into_statement(
            spark, f"MERGE INTO indextables.`{table}` t USING merge_updates s ON t.id = s.id WHEN MATCHED DELETE", {}
        )


def test_sql_routes_merge_into_an_indextables_table(classic_spark: Any, tmp_path: Path) -> None:
    """``connect_plugin.sql`` runs MERGE INTO an IndexTables table through the builder (and leaves a
    MERGE INTO any other table to Spark)."""
    from connect_plugin.sql import plan_statement, sql

    table = tmp_path / "routed"
    small_appends(classic_spark, table, 1, per=6)
    t = IndexTable.for_path(classic_spark, str(table))
    _source(classic_spark, range(4, 8)).createOrReplaceTempView("routed_updates")
    row = sql(
        classic_spark,
        f"MERGE INTO indextables.`{table}` t USING routed_updates s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    ).collect()[0]
    assert (row["operation"], row["numUpdatedRows"], row["numInsertedRows"]) == ("MERGE", 2, 2)
    assert sorted(_rows(t)) == list(range(8))
    assert plan_statement(classic_spark, "MERGE INTO some_delta_table t USING u s ON t.id = s.id") is None


def test_target_rows_with_a_null_key_in_a_rewritten_split_are_kept(classic_spark: Any, tmp_path: Path) -> None:
    """A split the MERGE rewrites may hold rows whose key is null: they match no source row and stay
    (its duplicate check's semi join must not leave its inferred ``id IS NOT NULL`` in the rewrite)."""
    import connect_plugin
    from tests.spark.test_datasource import TEXT_OPTS

    spark = classic_spark
    table = str(tmp_path / "nulls")
    rows = [r if r[0] % 3 else (None, *r[1:]) for r in log_rows(9)]  # ids 0, 3, 6 null
    connect_plugin.write(spark.createDataFrame(rows, SCHEMA).coalesce(1), table, options=TEXT_OPTS)
    t = IndexTable.for_path(spark, table)
    r = t.merge(_source(spark, range(4, 6)), "t.id = s.id").when_matched_update_all().execute().collect()[0]
    assert r["numUpdatedRows"] == 2 and r["numRemovedSplits"] >= 1
    after = t.to_df().collect()
    assert len(after) == 9 and sum(1 for x in after if x["id"] is None) == 3
    assert {x["id"]: x["msg"] for x in after if x["id"] in (4, 5)} == {4: "merged 4", 5: "merged 5"}


def test_on_keys_with_a_condition_of_both_sides(spark: Any, tmp_path: Path) -> None:
    """``t.id = s.id AND s.score > t.score``: the key finds the splits, the condition picks the pairs;
    a source row whose condition fails is not matched, so it is inserted (as in Delta)."""
    table = tmp_path / "newer"
    small_appends(spark, table, 1, per=10)
    t = IndexTable.for_path(spark, str(table))
    before = _rows(t)
    rows = [
        (i, "NEW", f"merged {i}", before[i][3] + (1 if i % 2 else -1), before[i][4], before[i][5]) for i in range(6)
    ]
    source = spark.createDataFrame(rows, SCHEMA)
    r = (
        t.merge(source, "t.id = s.id AND s.score > t.score")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
        .collect()[0]
    )
    assert (r["numUpdatedRows"], r["numInsertedRows"]) == (3, 3)
    after = sorted(tuple(x) for x in t.to_df().collect())
    updated = {row[0]: row for row in rows if row[0] % 2}
    expected = [updated.get(i, row) for i, row in before.items()] + [row for row in rows if not row[0] % 2]
    assert after == sorted(expected)


def test_on_a_range_without_keys(spark: Any, tmp_path: Path) -> None:
    """No equality at all: every split is read; a source range deletes the rows inside it, a target
    row inside two ranges is refused, naming it, before anything is written."""
    table = tmp_path / "ranges"
    small_appends(spark, table, 2, per=10)  # ids 0..19
    t = IndexTable.for_path(spark, str(table))
    before, version = _rows(t), _version(t)
    ranges = spark.createDataFrame([(2, 4), (10, 11)], "lo long, hi long")
    with pytest.raises(ConfigError, match=r"multiple source rows matched the same target row \(id=4"):
        overlapping = ranges.union(spark.createDataFrame([(4, 5)], "lo long, hi long"))
        t.merge(overlapping, "t.id BETWEEN s.lo AND s.hi").when_matched_delete().execute()
    assert _version(t) == version
    r = t.merge(ranges, "t.id BETWEEN s.lo AND s.hi").when_matched_delete().execute().collect()[0]
    assert (r["numDeletedRows"], r["version"]) == (5, version + 1)
    assert _rows(t) == {i: row for i, row in before.items() if i not in (2, 3, 4, 10, 11)}


def test_an_idempotent_merge_replayed_merges_once(spark: Any, tmp_path: Path) -> None:
    """The streaming upsert recipe: each ``foreachBatch`` batch merged with ``txn_version=batch_id``;
    a batch replayed after a failure (here: the same call again) commits nothing, so a counter
    (``t.score + s.score``) is added once."""
    table = tmp_path / "once"
    small_appends(spark, table, 1, per=6)
    t = IndexTable.for_path(spark, str(table))
    before = _rows(t)

    def upsert(batch: Any, batch_id: int) -> Any:
        merge = t.merge(batch, "t.id = s.id").when_matched_update({"score": "t.score + s.score"})
        return merge.when_not_matched_insert_all().execute(txn_app_id="scores", txn_version=batch_id).collect()[0]

    first = upsert(_source(spark, range(4, 8)), 0)
    assert (first["numUpdatedRows"], first["numInsertedRows"]) == (2, 2)
    version, after = _version(t), _rows(t)
    replay = upsert(_source(spark, range(4, 8)), 0)
    assert replay["version"] is None and _version(t) == version and _rows(t) == after
    assert after[4][3] == before[4][3] + 40.0 and after[7][3] == 70.0
    second = upsert(_source(spark, range(7, 8)), 1)
    assert second["version"] == version + 1 and _rows(t)[7][3] == 140.0
    with pytest.raises(ConfigError, match="txn_app_id and txn_version go together"):
        t.merge(_source(spark, range(1)), "t.id = s.id").when_matched_delete().execute(txn_app_id="scores")
