"""N-gram tokenizers through Spark (issue 75, search-as-you-type), in a classic session: a table written with
``indexing.tokenizer.title=edge_ngram_2_10`` and ``...sub=ngram_3_5`` is indexed with the words' grams by the
native writer, and ``indexquery`` (``connect_plugin.sql``) searches a word as one gram: a prefix finds the
longer words, an inner gram only on the n-gram column, ``_score`` included. The write says once per column that
IndexTables4Spark does not know the tokenizer; a bad spec fails before anything is written.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from indextables_contract import settings as S
from indextables_contract.errors import CompatibilityWarning, ConfigError

OPTIONS = {
    S.INDEXING_TYPEMAP.prefix + "title": "text",
    S.INDEXING_TYPEMAP.prefix + "sub": "text",
    S.INDEXING_TOKENIZER.prefix + "title": "edge_ngram_2_10",
    S.INDEXING_TOKENIZER.prefix + "sub": "ngram_3_5",
}
ROWS = [(0, "Error in module"), (1, "two errors found"), (2, "terror strikes"), (3, "nothing here")]


def test_edge_ngram_and_ngram_through_spark_sql(classic_spark: Any, tmp_path: Path) -> None:
    spark = classic_spark
    df = spark.createDataFrame([(i, t, t) for i, t in ROWS], "id long, title string, sub string")
    path = str(tmp_path / "grams")
    with warnings.catch_warnings(record=True) as found:
        warnings.simplefilter("always")
        connect_plugin.write(df, path, options=OPTIONS)
    said = [str(w.message) for w in found if issubclass(w.category, CompatibilityWarning)]
    assert len(said) == 2 and "tokenizer edge_ngram_2_10 of column title" in said[0], said

    def ids(where: str) -> list[int]:
        rows = connect_plugin.sql(spark, f"SELECT id FROM indextables.`{path}` WHERE {where}").collect()
        return sorted(r["id"] for r in rows)

    assert ids("title indexquery 'erro'") == [0, 1]  # a prefix: no wildcard, not terror
    assert ids("title indexquery 'rro'") == []
    assert ids("sub indexquery 'rro'") == [0, 1, 2]  # an inner substring
    ranked = connect_plugin.sql(
        spark,
        f"SELECT id, _score FROM indextables.`{path}` WHERE indexqueryall('title:erro OR sub:rors') "
        "ORDER BY _score DESC LIMIT 10",
    ).collect()
    assert [r["id"] for r in ranked] == [1, 0] and ranked[0]["_score"] > ranked[-1]["_score"] > 0

    bad = {**OPTIONS, S.INDEXING_TOKENIZER.prefix + "title": "edge_ngram_5_2"}
    with warnings.catch_warnings(), pytest.raises(ConfigError, match=r"column 'title'.*max 2 is below min 5"):
        warnings.simplefilter("ignore", CompatibilityWarning)  # sub's, said before the write is refused
        connect_plugin.write(df, str(tmp_path / "bad"), options=bad)
    assert not (tmp_path / "bad" / "_transaction_log").exists()
