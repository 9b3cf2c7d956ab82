"""A split's bytes behind ``SplitSource``: a searcher over a source answers as one opened by path,
and the source gives the split's members as the bundle holds them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from executor_lib.format.quickwit.bundle import read_footer, read_member
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.search.split_source import LocalSplit, open_split_source
from executor_lib.splits.write.writer import DOC_MAPPING_MEMBER, write_split

ROWS = pa.table({"id": list(range(50)), "msg": [f"w{i % 7} common" for i in range(50)]})


def test_a_searcher_over_a_local_source_answers_as_one_opened_by_path(tmp_path: Path) -> None:
    mapping = mapping_for(ROWS.schema, {"spark.indextables.indexing.typemap.msg": "text"})
    written = write_split(ROWS, mapping, tmp_path / "out")
    source = open_split_source(written.path, tmp_path / "w1", ROWS.schema, None)
    assert isinstance(source, LocalSplit) and source.pieces is None and source.bundle == written.path
    assert source.member_bytes(DOC_MAPPING_MEMBER) == read_member(
        written.path, read_footer(written.path), DOC_MAPPING_MEMBER
    )
    assert source.complete and not source.ensure_fields(None, None)
    over = SplitSearcher.over(source, ROWS.schema)
    by_path = SplitSearcher(written.path, tmp_path / "w2", ROWS.schema, None)
    for query in ("w3", "common AND w1", "*"):
        assert over.count(query) == by_path.count(query) > 0
        assert over.search(query).to_pylist() == by_path.search(query).to_pylist()
