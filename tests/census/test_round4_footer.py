"""A footerStartOffset past the split's end is a typed error on every store (issue 70, MED: a bare
ValueError on S3 and Azure)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.splits.search.table_search import search_table
from indextables_contract.errors import IndexTablesError

SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string())])


@pytest.mark.parametrize("shift", [1, 10_000, 2**40])
def test_a_footer_offset_past_the_end_is_a_typed_error(
    backend: str, table: tuple[str, dict[str, Any]], tmp_path: Path, shift: int
) -> None:
    uri, options = table
    log = executor_lib.create_table(uri, SCHEMA, **options)
    add = executor_lib.write_and_upload(
        log.store, pa.table({"id": [1], "msg": ["a"]}), executor_lib.mapping_for(SCHEMA, {})
    )
    bad = dataclasses.replace(add, footer_start_offset=add.size + shift, footer_end_offset=add.size + shift + 100)
    log.commit([bad])
    try:  # typed, naming the split, or right: a local split is opened whole, its offsets unused
        rows = search_table(log.store, log.snapshot(), None, SplitCache(tmp_path / "cache"))
    except IndexTablesError as e:
        assert add.path in str(e) and "footer offsets" in str(e)
    else:
        assert backend == "local" and rows.column("id").to_pylist() == [1]
