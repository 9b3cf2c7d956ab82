"""``_score`` through Spark (classic and Connect): SQL with ``ORDER BY _score DESC LIMIT k`` pushed as a
per-task top k, the DataFrame API, ``IndexTable.search``; the same top 20 and scores (1e-4) as one
independent tantivy-py index over the rows, whether the table is one split, 20 splits or merged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tantivy

import connect_plugin
from connect_plugin.table import IndexTable
from executor_lib.cache.split_cache import SplitCache
from tests.splits.search.test_scores import assert_same_top, merge_all, ranked, reference, rows, write_table

QUERY = "timeout upstream"
SQL = "SELECT id, message, _score FROM indextables.`{}` WHERE message indexquery '{}' ORDER BY _score DESC LIMIT 20"


def frame_table(df: Any) -> Any:
    import pyarrow as pa

    got = df.collect()
    return pa.table({"id": [r["id"] for r in got], "_score": [r["_score"] for r in got]})


@pytest.fixture(scope="module")
def expected() -> list[tuple[int, float]]:
    index, searcher = reference(rows())
    hits = searcher.search(index.parse_query(QUERY, ["message"]), 40).hits
    return ranked([(searcher.doc(a)["id"][0], s) for s, a in hits])


def test_sql_scores_one_split_twenty_and_merged_alike(
    spark: Any, tmp_path: Path, expected: list[tuple[int, float]]
) -> None:
    for splits in (1, 20):
        log = write_table(str(tmp_path / f"t{splits}"), {}, rows(), splits)
        path = str(tmp_path / f"t{splits}")
        text = SQL.format(path, QUERY)
        assert "best rows by _score per task: 20" in connect_plugin.explain(spark, text)
        df = connect_plugin.sql(spark, text)
        assert df.columns == ["id", "message", "_score"]
        assert_same_top(frame_table(df), expected, 20)
        if splits == 20:
            merge_all(log, SplitCache(tmp_path / "merge-cache"))
            assert_same_top(frame_table(connect_plugin.sql(spark, text)), expected, 20)


def test_dataframe_api_and_table_search(spark: Any, tmp_path: Path, expected: list[tuple[int, float]]) -> None:
    path = str(tmp_path / "t")
    write_table(path, {}, rows(), 20)
    df = (
        spark.read.format("indextables")
        .option("indexquery.message", QUERY)
        .option("columns", "id,_score")
        .load(path)
        .orderBy("_score", ascending=False)
        .limit(20)
    )
    assert_same_top(frame_table(df), expected, 20)
    read = connect_plugin.read(spark, path, columns=["id", "_score"], filter=f"message indexquery '{QUERY}'")
    assert_same_top(frame_table(read.orderBy("_score", ascending=False).limit(20)), expected, 20)
    found = IndexTable.for_path(spark, path).search(f"message:({QUERY})", limit=20)
    assert found.columns == ["id", "message", "_score"]
    assert_same_top(frame_table(found), expected, 20)
    scores = [r["_score"] for r in found.collect()]
    assert scores == sorted(scores, reverse=True)
    picked = IndexTable.for_path(spark, path).search(f"message:({QUERY})", columns=["id"], limit=5)
    assert picked.columns == ["id", "_score"] and picked.count() == 5


def test_score_without_an_index_query_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_table(path, {}, rows(50), 2)
    with pytest.raises(Exception, match=r"column _score is the BM25 score of an index query, and this read has none"):
        connect_plugin.sql(spark, f"SELECT id, _score FROM indextables.`{path}` WHERE id < 5").collect()
    with pytest.raises(Exception, match=r"_score .*add one \(WHERE col indexquery"):
        connect_plugin.read(spark, path, columns=["id", "_score"], filter="id < 5").collect()


def test_a_column_named_score_is_refused_at_write(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    df = spark.createDataFrame([(1, 0.5)], "id long, _Score double")
    with pytest.raises(Exception, match=r"column '_Score'.*BM25 score.*rename the column; nothing was written"):
        connect_plugin.write(df, str(path))
    assert not (path / "_transaction_log").exists()


def test_group_by_columns_that_are_not_fast_fields(classic_spark: Any, tmp_path: Path) -> None:
    """IndexTables4Spark fails a GROUP BY on a column that is not a fast field (its issue #140); here the
    split's rows answer it (Arrow's group-by), with Spark's answer: a tokenized text column and an
    exact string column left out of the fast fields."""
    import collections

    import pyarrow as pa

    import executor_lib

    data = rows(300)
    levels = [("ERROR", "WARN", "INFO")[i % 3] for i in range(data.num_rows)]
    data = data.append_column("level", pa.array(levels)).append_column(
        "short", pa.array([m.split()[0] for m in data["message"].to_pylist()])
    )
    path = str(tmp_path / "t")
    log = executor_lib.create_table(path, data.schema)
    options = {**{"spark.indextables.indexing.fastfields": "id"}, "spark.indextables.indexing.typemap.message": "text"}
    mapping = executor_lib.mapping_for(data.schema, options)
    level, short = mapping.field("level"), mapping.field("short")
    assert level is not None and short is not None and not level.fast and not short.fast
    log.commit([executor_lib.write_and_upload(log.store, data.slice(i, 100), mapping, {}) for i in (0, 100, 200)])
    got = connect_plugin.sql(
        classic_spark,
        f"SELECT short, level, count(*) AS n, max(id) AS top FROM indextables.`{path}` "
        "WHERE message indexquery 'retry' GROUP BY short, level",
    ).collect()
    hit = [r for r in data.to_pylist() if "retry" in r["message"].split()]
    want = collections.Counter((r["short"], r["level"]) for r in hit)
    top = {k: max(r["id"] for r in hit if (r["short"], r["level"]) == k) for k in want}
    assert {(r["short"], r["level"]): (r["n"], r["top"]) for r in got} == {k: (n, top[k]) for k, n in want.items()}


def reference_snippet(query: str, text: str, tags: tuple[str, str] = ("<b>", "</b>")) -> str:
    """The fragment tantivy-py's own SnippetGenerator makes from an independent index of ``text``."""
    index, searcher = reference(rows())
    generator = tantivy.SnippetGenerator.create(
        searcher, index.parse_query(query, ["message"]), index.schema, "message"
    )
    html = generator.snippet_from_doc(tantivy.Document(message=text)).to_html()  # <b>...</b>, text has no < & >
    return html.replace("<b>", tags[0]).replace("</b>", tags[1])


def test_snippets_in_sql_dataframe_and_table_search(spark: Any, tmp_path: Path) -> None:
    """Tantivy picks the fragment by its terms' document frequencies in the split: one split here, so
    the reference index over the same rows picks the same one."""
    path = str(tmp_path / "t")
    write_table(path, {}, rows(), 1)
    got = connect_plugin.sql(
        spark,
        f"SELECT id, message, _snippet_message FROM indextables.`{path}` WHERE message indexquery 'retry miss' "
        "ORDER BY _score DESC LIMIT 5",
    ).collect()
    assert len(got) == 5
    for r in got:
        assert r["_snippet_message"] == reference_snippet("retry miss", r["message"])
        assert "<b>retry</b>" in r["_snippet_message"] or "<b>miss</b>" in r["_snippet_message"]
    found = IndexTable.for_path(spark, path).search(
        "message:retry", columns=["id", "message"], limit=3, snippets=["message"], snippet_tags=("[", "]")
    )
    assert found.columns == ["id", "message", "_score", "_snippet_message"]
    for r in found.collect():
        assert r["_snippet_message"] == reference_snippet("retry", r["message"], ("[", "]"))
    with pytest.raises(Exception, match=r"column _snippet_message is the fragment around the matches"):
        connect_plugin.sql(spark, f"SELECT id, _snippet_message FROM indextables.`{path}` WHERE id < 3").collect()


def test_fuzzyquery_in_sql_and_indexquery_keeps_the_jvm_meaning(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    data = rows(400)
    write_table(path, {}, data, 3)
    index, searcher = reference(data)
    fuzzy = tantivy.Query.fuzzy_term_query(index.schema, "message", "gatewya", 1, True, False)  # a transposition
    want = sorted(searcher.doc(a)["id"][0] for _, a in searcher.search(fuzzy, 1000).hits)
    got = connect_plugin.sql(spark, f"SELECT id FROM indextables.`{path}` WHERE message fuzzyquery 'gatewya~1'")
    assert sorted(r["id"] for r in got.collect()) == want and want
    with pytest.raises(Exception, match="looks like a fuzzy term"):
        connect_plugin.sql(spark, f"SELECT id FROM indextables.`{path}` WHERE message indexquery 'gatewya~1'").collect()
