"""DELETE and UPDATE beside other writers (``indextables_contract.row_changes``): appends racing a row
change both commit (they commute); a MERGE SPLITS that removed a split the change read makes the
change's commit fail with a conflict naming the split, nothing lost, nothing committed by the loser."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
import executor_lib
from connect_plugin.plan import TableRead, command_frame, options_tuple
from connect_plugin.table import IndexTable
from indextables_contract import FORMAT
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract import row_changes as RC
from indextables_contract.errors import CommitConflictError, error_class_in
from indextables_contract.read import ReadPlan
from tests.conftest import BUCKET, SharedS3, s3_options
from tests.connect_plugin.test_table import _thread
from tests.spark.test_datasource import TEXT_OPTS, make_df


def _is_conflict(e: BaseException) -> bool:
    return isinstance(e, CommitConflictError) or error_class_in(str(e)) is CommitConflictError


def _ids(t: IndexTable) -> list[int]:
    return sorted(r["id"] for r in t.to_df(columns=["id"]).collect())


def test_a_merge_between_finding_and_committing_makes_the_delete_conflict(classic_spark: Any, tmp_path: Path) -> None:
    """The change's three steps run by hand with a MERGE SPLITS committed between the first and the
    last: its commit is refused naming a split it read, and the table is the merge's, every row once."""
    spark = classic_spark
    table = str(tmp_path / "m")
    for i in range(3):
        connect_plugin.write(make_df(spark, 6, start=i * 6), table, options=TEXT_OPTS)
    t = IndexTable.for_path(spark, table)
    condition = F.Term("id", 4)
    counts = command_frame(spark, C.MatchCounts(filter=F.to_text(condition)), {}, table).collect()
    assert [r["matches"] for r in counts] == [1]
    version, replaced = counts[0]["version"], (counts[0]["path"],)
    t.merge_splits(target_size="1G").collect()  # removes every split, the one the change found too
    change = RC.RowChange("DELETE", uuid.uuid4().hex, version, replaced, (("numDeletedRows", 1),))
    plan = ReadPlan(splits=replaced, match_columns=((RC.MATCH_COLUMN, condition),))
    rows = TableRead(table, plan, options_tuple({"versionAsOf": str(version)})).dataframe(spark)
    kept = rows.where(f"NOT {RC.MATCH_COLUMN}").drop(RC.MATCH_COLUMN)
    before = t.history(1).collect()[0]["version"]
    with pytest.raises(Exception) as failure:
        kept.write.format(FORMAT).mode("append").options(**change.to_options()).save(table)
    assert _is_conflict(failure.value)
    assert replaced[0] in str(failure.value) and "already removed" in str(failure.value)
    assert t.history(1).collect()[0]["version"] == before
    assert _ids(t) == list(range(18))  # the merge's table: the row the loser meant to delete is there


def _race(spark: Any, jobs: list[Any]) -> list[BaseException]:
    """Run ``jobs`` in threads released together at a barrier; the errors they raised."""
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(job: Any) -> Any:
        def body() -> None:
            barrier.wait(timeout=60)
            try:
                job()
            except BaseException as e:  # reported by the test
                errors.append(e)

        return body

    threads = [_thread(spark, run(job)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert not any(thread.is_alive() for thread in threads)
    return errors


def test_appends_racing_a_delete_on_s3_both_commit(classic_spark: Any, moto_server: SharedS3) -> None:
    spark = classic_spark
    storage = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in s3_options(moto_server).items()}
    uri = f"s3://{BUCKET}/row-change-race-{uuid.uuid4().hex[:8]}"
    connect_plugin.write(make_df(spark, 30), uri, options={**TEXT_OPTS, **storage})
    t = IndexTable.for_path(spark, uri, options=storage)
    deleted = [i for i in range(30) if i % 3 == 0]

    def appends() -> None:
        for i in range(3):
            connect_plugin.write(make_df(spark, 5, start=100 + 5 * i), uri, options=storage)

    errors = _race(spark, [lambda: t.delete(F.TermIn("id", tuple(deleted))).collect(), appends])
    assert errors == [], errors
    expected = sorted(set(range(30)) - set(deleted) | set(range(100, 115)))
    assert _ids(t) == expected  # lost=0: every append and the delete
    operations = [r["operation"] for r in t.history().collect()]
    assert operations.count("DELETE") == 1 and operations.count("WRITE") >= 4
    log = executor_lib.open_log(uri, **s3_options(moto_server))
    assert sum(a.num_records or 0 for a in log.snapshot().files) == len(expected)


def test_a_merge_racing_a_delete_never_loses_a_change(classic_spark: Any, tmp_path: Path) -> None:
    """Released together: whichever commits second either conflicts (reported) or planned after the
    first; the rows are exactly the delete's result if it committed, else every row."""
    spark = classic_spark
    table = str(tmp_path / "r")
    for i in range(4):
        connect_plugin.write(make_df(spark, 10, start=i * 10), table, options=TEXT_OPTS)
    t = IndexTable.for_path(spark, table)
    errors = _race(spark, [lambda: t.delete("id >= 35").collect(), lambda: t.merge_splits(target_size="1G").collect()])
    assert all(_is_conflict(e) for e in errors), errors
    operations = [r["operation"] for r in t.history().collect()]
    deleted = "DELETE" in operations
    assert deleted or errors  # the delete committed, or its conflict was reported
    assert _ids(t) == (list(range(35)) if deleted else list(range(40)))


def test_two_row_changes_of_one_split_never_lose_a_change(classic_spark: Any, tmp_path: Path) -> None:
    """A DELETE and an UPDATE of rows in the same split, released together: each rewrites that split, so
    the one committing second conflicts naming it (reported) unless it found its split after the first
    committed; every change acknowledged is in the table, none is applied twice or half."""
    spark = classic_spark
    table = str(tmp_path / "two")
    connect_plugin.write(make_df(spark, 20).coalesce(1), table, options=TEXT_OPTS)
    t = IndexTable.for_path(spark, table)
    (split,) = [a.path for a in executor_lib.open_log(table).snapshot().files]
    acknowledged: list[str] = []

    def delete() -> None:
        t.delete(F.Term("id", 3)).collect()
        acknowledged.append("DELETE")

    def update() -> None:
        t.update(F.Term("id", 4), set={"level": "'CHANGED'"}).collect()
        acknowledged.append("UPDATE")

    errors = _race(spark, [delete, update])
    assert all(_is_conflict(e) for e in errors), errors
    assert all(split in str(e) for e in errors), errors  # the conflict names the split both rewrote
    assert len(acknowledged) + len(errors) == 2 and acknowledged
    operations = [r["operation"] for r in t.history().collect()]
    assert sorted(o for o in operations if o in ("DELETE", "UPDATE")) == sorted(acknowledged)
    rows = {r["id"]: r["level"] for r in t.to_df(columns=["id", "level"]).collect()}
    assert sorted(rows) == [i for i in range(20) if not (i == 3 and "DELETE" in acknowledged)]
    assert (rows[4] == "CHANGED") == ("UPDATE" in acknowledged)
    assert all(rows[i] != "CHANGED" for i in rows if i != 4)


def test_appends_racing_a_merge_into_both_commit_and_a_merge_splits_first_conflicts(
    classic_spark: Any, tmp_path: Path
) -> None:
    """MERGE INTO commits like DELETE: appends released with it at a barrier commute (every row of both
    lands); a MERGE SPLITS released with it either lands first and makes it a reported conflict, or not."""
    spark = classic_spark
    table = str(tmp_path / "mi")
    for i in range(3):
        connect_plugin.write(make_df(spark, 10, start=i * 10), table, options=TEXT_OPTS)
    t = IndexTable.for_path(spark, table)
    source = make_df(spark, 10, start=25).cache()  # 25..29 update, 30..34 insert
    source.count()

    def upsert() -> None:
        t.merge(source, "t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute().collect()

    def appends() -> None:
        for i in range(2):
            connect_plugin.write(make_df(spark, 5, start=100 + 5 * i), table)

    assert _race(spark, [upsert, appends]) == []
    assert _ids(t) == sorted([*range(35), *range(100, 110)])
    errors = _race(spark, [upsert, lambda: t.merge_splits(target_size="1G").collect()])
    assert all(_is_conflict(e) for e in errors), errors
    assert _ids(t) == sorted([*range(35), *range(100, 110)])  # the upsert again changes no id set
