"""``spark.sql`` with IndexTables' SQL points at ``connect_plugin.sql`` (issue 76, item 3): after
``connect_plugin.install``, a statement Spark refuses that uses ``indexquery`` (or is an IndexTables command)
is one ``IndexTablesSQLError`` line naming ``connect_plugin.sql``; Spark's own statements and errors stay
Spark's. Classic and Spark Connect sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from indextables_contract.errors import IndexTablesSQLError


def test_spark_sql_with_indexquery_names_connect_plugin_sql(spark: Any, tmp_path: Path) -> None:
    connect_plugin.install(spark)
    path = str(tmp_path / "t")
    connect_plugin.write(spark.createDataFrame([(1, "a timeout")], "id long, message string"), path)
    with pytest.raises(IndexTablesSQLError) as failure:
        spark.sql(f"SELECT id FROM indextables.`{path}` WHERE message indexquery 'timeout'")
    text = str(failure.value)
    assert text.startswith("[INDEXTABLES_SQL] spark.sql does not know IndexTables' SQL") and len(text.splitlines()) == 1
    assert "connect_plugin.sql(spark, text)" in text
    with pytest.raises(IndexTablesSQLError, match=r"connect_plugin\.sql"):
        spark.sql(f"MERGE SPLITS '{path}' TARGET SIZE 100M")
    assert spark.sql("SELECT 'indexquery' AS x").collect()[0]["x"] == "indexquery"  # Spark's own, untouched
    with pytest.raises(Exception) as other:
        spark.sql("SELEC 1")
    assert not isinstance(other.value, IndexTablesSQLError)
