"""PURGE never deletes another table's files: a table created inside a table's directory keeps every
split, live or not, when the outer table is purged (issue 70, N3), on every store; the outer
table's own orphans still go."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

import executor_lib
from executor_lib.log.maintenance.purge import purge_table
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.write.publish import write_and_upload

SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string())])
DAY = 24 * 3600


def _split(log: Any, i: int) -> Any:
    return write_and_upload(log.store, pa.table({"id": [i], "msg": [f"m{i}"]}), mapping_for(SCHEMA, {}))


def test_purge_of_a_table_keeps_the_files_of_a_table_inside_it(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    outer = executor_lib.create_table(uri, SCHEMA, **options)
    outer.commit([_split(outer, 1)])
    orphan = _split(outer, 2)  # never committed: the outer table's to collect
    inner = executor_lib.create_table(f"{uri}/nested/inner", SCHEMA, **options)
    inner_live = _split(inner, 3)
    inner.commit([inner_live])
    inner_orphan = _split(inner, 4)  # the inner table's orphan: its own PURGE decides, not the outer's
    report = purge_table(outer, now_ms=int((time.time() + 8 * DAY) * 1000))
    assert [k for k, _ in report.deleted_splits] == [orphan.path]
    assert inner.store.exists(inner_live.path) and inner.store.exists(inner_orphan.path)
    assert executor_lib.open_log(f"{uri}/nested/inner", **options).snapshot().num_records == 1
    inner_report = purge_table(inner, now_ms=int((time.time() + 8 * DAY) * 1000))
    assert [k for k, _ in inner_report.deleted_splits] == [inner_orphan.path]
    assert inner.store.exists(inner_live.path)
