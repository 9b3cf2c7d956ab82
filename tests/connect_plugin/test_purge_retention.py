"""Every way of purging keeps the same retention: an explicit one (SQL ``OLDER THAN``, ``older_than_hours``)
wins; without one, SQL ``PURGE INDEXTABLE`` and ``IndexTable.purge()`` both fall back to the setting
``spark.indextables.purge.defaultRetentionHours`` (168 unless set), on real sessions."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from connect_plugin import IndexTable
from connect_plugin.sql import sql
from indextables_contract import settings as S
from tests.spark.test_datasource import TEXT_OPTS, make_df

ORPHAN_AGE_HOURS = 100  # between the 24-hour minimum and the 168-hour default


@pytest.fixture
def orphaned(spark: Any, tmp_path: Path) -> Iterator[str]:
    """A table with one split file no version names (an upload whose commit never came), 100 hours old;
    the session's default retention is unset again afterwards."""
    table = tmp_path / "t"
    connect_plugin.write(make_df(spark, 5), str(table), options=TEXT_OPTS)
    orphan = table / "orphan-upload.split"
    orphan.write_bytes(b"never committed")
    then = time.time() - ORPHAN_AGE_HOURS * 3600
    os.utime(orphan, (then, then))
    try:
        yield str(table)
    finally:
        spark.conf.unset(S.PURGE_DEFAULT_RETENTION_HOURS.key)


def _orphans(df: Any) -> list[str]:
    return [os.path.basename(r["path"]) for r in df.filter("kind = 'split'").collect()]


def test_sql_purge_without_older_than_reads_the_default_retention(spark: Any, orphaned: str) -> None:
    statement = f"PURGE INDEXTABLE '{orphaned}' DRY RUN"
    assert _orphans(sql(spark, statement)) == []  # 100 hours old, kept by the default 168
    spark.conf.set(S.PURGE_DEFAULT_RETENTION_HOURS.key, "48")
    assert _orphans(sql(spark, statement)) == ["orphan-upload.split"]


def test_sql_purge_older_than_wins_over_the_default(spark: Any, orphaned: str) -> None:
    spark.conf.set(S.PURGE_DEFAULT_RETENTION_HOURS.key, "48")
    assert _orphans(sql(spark, f"PURGE INDEXTABLE '{orphaned}' OLDER THAN 7 DAYS DRY RUN")) == []
    spark.conf.set(S.PURGE_DEFAULT_RETENTION_HOURS.key, "500")
    assert _orphans(sql(spark, f"PURGE INDEXTABLE '{orphaned}' OLDER THAN 48 HOURS DRY RUN")) == ["orphan-upload.split"]


def test_table_purge_reads_the_default_retention_unless_given(spark: Any, orphaned: str) -> None:
    t = IndexTable.for_path(spark, orphaned)
    assert _orphans(t.purge(dry_run=True)) == []
    assert _orphans(t.purge(older_than_hours=48, dry_run=True)) == ["orphan-upload.split"]
    spark.conf.set(S.PURGE_DEFAULT_RETENTION_HOURS.key, "48")
    assert _orphans(IndexTable.for_path(spark, orphaned).purge(dry_run=True)) == ["orphan-upload.split"]
    assert _orphans(IndexTable.for_path(spark, orphaned).purge(older_than_hours=168, dry_run=True)) == []
    # and a real purge (not a dry run) deletes it
    assert _orphans(IndexTable.for_path(spark, orphaned).purge()) == ["orphan-upload.split"]
    assert not os.path.exists(os.path.join(orphaned, "orphan-upload.split"))
