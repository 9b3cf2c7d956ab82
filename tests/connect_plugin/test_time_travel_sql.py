"""Time travel in SQL (issue 76, item 5): ``SELECT ... FROM indextables.`<t>` VERSION AS OF n`` and
``TIMESTAMP AS OF '...'`` through ``connect_plugin.sql`` read the table as it was (a pushed count, an index
query, a registered name with an alias), and the errors speak the user's time format, not epoch
milliseconds. Classic and Spark Connect sessions.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
import executor_lib
from indextables_contract.errors import IndexTablesSQLError, VersionNotFoundError

TEXT = {"spark.indextables.indexing.typemap.message": "text"}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory, classic_spark: Any) -> tuple[str, dict[int, int]]:
    """Two appends of 5 rows (ids 0-4 with 'timeout' in rows 0 and 3, then ids 5-9); its versions' times."""
    path = str(tmp_path_factory.mktemp("time-travel") / "logs")
    for start in (0, 5):
        rows = [(i, "timeout upstream" if i % 3 == 0 else "fine") for i in range(start, start + 5)]
        connect_plugin.write(classic_spark.createDataFrame(rows, "id long, message string"), path, options=TEXT)
    stamps = {e.version: e.timestamp_ms or 0 for e in executor_lib.open_log(path).history()}
    return path, stamps


def _utc(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def test_version_as_of(spark: Any, table: tuple[str, dict[int, int]]) -> None:
    path, stamps = table
    first, last = sorted(stamps)[-2:]
    count = f"SELECT count(*) AS n FROM indextables.`{path}` VERSION AS OF {first}"
    assert connect_plugin.sql(spark, count).collect()[0]["n"] == 5
    assert connect_plugin.sql(spark, f"SELECT count(*) AS n FROM indextables.`{path}`").collect()[0]["n"] == 10
    query = (
        f"SELECT id FROM indextables.`{path}` FOR SYSTEM_VERSION AS OF {first} t WHERE t.message indexquery 'timeout'"
    )
    assert sorted(r["id"] for r in connect_plugin.sql(spark, query).collect()) == [0, 3]
    connect_plugin.register_table(spark, "tt_logs", path)
    named = f"SELECT id FROM tt_logs VERSION AS OF {last} WHERE message indexquery 'timeout' ORDER BY id"
    assert [r["id"] for r in connect_plugin.sql(spark, named).collect()] == [0, 3, 6, 9]


def test_timestamp_as_of(spark: Any, table: tuple[str, dict[int, int]]) -> None:
    path, stamps = table
    first = sorted(stamps)[-2]
    moment = _utc(stamps[first])
    rows = connect_plugin.sql(spark, f"SELECT id FROM indextables.`{path}` TIMESTAMP AS OF '{moment}' ORDER BY id")
    assert [r["id"] for r in rows.collect()] == [0, 1, 2, 3, 4]


def test_errors_speak_the_users_time_format(spark: Any, table: tuple[str, dict[int, int]]) -> None:
    path, _ = table
    with pytest.raises(VersionNotFoundError) as early:
        connect_plugin.sql(
            spark, f"SELECT id FROM indextables.`{path}` TIMESTAMP AS OF '2001-02-03 04:05:06'"
        ).collect()
    first = str(early.value).splitlines()[0]
    assert first.startswith("[INDEXTABLES_VERSION_NOT_FOUND] timestampAsOf '2001-02-03 04:05:06': "), first
    assert "2001-02-03 04:05:06 UTC is before the earliest retained version" in first, first
    assert "981173106000" not in str(early.value)  # no epoch milliseconds
    with pytest.raises(IndexTablesSQLError, match=r"VERSION AS OF takes a version number"):
        connect_plugin.sql(spark, f"SELECT id FROM indextables.`{path}` VERSION AS OF 'x'")
    with pytest.raises(IndexTablesSQLError, match=r"TIMESTAMP AS OF takes a quoted timestamp"):
        connect_plugin.sql(spark, f"SELECT id FROM indextables.`{path}` TIMESTAMP AS OF current_timestamp()")


def test_the_option_form_names_the_users_timestamp_too(
    spark: Any, table: tuple[str, dict[int, int]], tmp_path: Path
) -> None:
    path, _ = table
    with pytest.raises(VersionNotFoundError) as early:
        connect_plugin.read(spark, path, timestamp_as_of="2001-02-03T04:05:06Z").collect()
    assert "timestampAsOf '2001-02-03T04:05:06Z': " in str(early.value) and "2001-02-03 04:05:06 UTC" in str(
        early.value
    )
