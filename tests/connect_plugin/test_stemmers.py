"""Stemmers of every language through Spark (issue 75, first part), in a classic session: a table written
with ``indexing.tokenizer.body=de_stem`` is indexed by the native writer with the German stemmer and
searched with it by ``indexquery`` (``connect_plugin.sql``), ``_score`` included; the same word on a
``default`` column finds only its own form. The write says once that IndexTables4Spark does not know the
tokenizer (``CompatibilityWarning``), through ``connect_plugin.write`` and ``df.write...save()`` alike.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import connect_plugin
from indextables_contract import FORMAT
from indextables_contract import settings as S
from indextables_contract.errors import CompatibilityWarning, ConfigError

OPTIONS = {
    S.INDEXING_TYPEMAP.prefix + "body": "text",
    S.INDEXING_TYPEMAP.prefix + "plain": "text",
    S.INDEXING_TOKENIZER.prefix + "body": "de_stem",
}
ROWS = [(0, "Haus am See"), (1, "Häuser am See"), (2, "Boote am See")]


def _said(found: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in found if issubclass(w.category, CompatibilityWarning)]


def test_de_stem_through_spark_sql(classic_spark: Any, tmp_path: Path) -> None:
    spark = classic_spark
    df = spark.createDataFrame([(i, t, t) for i, t in ROWS], "id long, body string, plain string")
    path = str(tmp_path / "de")
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        connect_plugin.write(df, path, options=OPTIONS)
    (said,) = _said(found)
    assert said.startswith("IndexTables4Spark does not know tokenizer de_stem of column body: the JVM will not")

    def ids(where: str) -> list[int]:
        rows = connect_plugin.sql(spark, f"SELECT id FROM indextables.`{path}` WHERE {where}").collect()
        return sorted(r["id"] for r in rows)

    assert ids("body indexquery 'Häuser'") == [0, 1]
    assert ids("body indexquery 'haus'") == [0, 1]
    assert ids("plain indexquery 'Häuser'") == [1]
    ranked = connect_plugin.sql(
        spark,
        f"SELECT id, _score FROM indextables.`{path}` WHERE indexqueryall('body:Häuser OR plain:Häuser') "
        "ORDER BY _score DESC LIMIT 10",
    ).collect()
    assert [r["id"] for r in ranked] == [1, 0] and ranked[0]["_score"] > ranked[1]["_score"]

    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        df.write.format(FORMAT).mode("append").options(**OPTIONS).save(path)
    assert len(_said(found)) == 1
    assert ids("body indexquery 'Haus'") == [0, 0, 1, 1]


def test_an_unknown_tokenizer_fails_before_anything_is_written(classic_spark: Any, tmp_path: Path) -> None:
    df = classic_spark.createDataFrame([(0, "Haus")], "id long, body string")
    path = tmp_path / "bad"
    options = {**OPTIONS, S.INDEXING_TOKENIZER.prefix + "body": "german"}
    options.pop(S.INDEXING_TYPEMAP.prefix + "plain")
    try:
        connect_plugin.write(df, str(path), options=options)
    except ConfigError as e:
        said = str(e)
    else:
        raise AssertionError("no ConfigError")
    assert "tokenizer.body='german'" in said and "'de_stem'" in said, said
    assert not (path / "_transaction_log").exists()
