"""A split whose schema differs from its table's is refused by every commit, and a search that meets
one anyway names it (issue 20, hole 2).

Before the fix ``write_and_upload`` + ``log.commit`` committed such splits, and every later search
of the table failed with ``ArrowInvalid: Schema at index 1 was different``, naming no split.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.protocol.actions import actions_to_ndjson
from executor_lib.protocol.files import LOG_DIR, version_file
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from indextables_contract.errors import InvalidActionError, SplitSchemaError

SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string())])
GOOD = pa.table({"id": [1], "msg": ["a"]})

BAD = {
    "extra": (pa.table({"id": [2], "msg": ["b"], "extra": [1.0]}), r"columns not in the table \['extra'\]"),
    "missing": (pa.table({"id": [2]}), r"missing columns \['msg'\]"),
    "renamed": (pa.table({"id": [2], "message": ["b"]}), r"missing columns \['msg'\].*not in the table \['message'\]"),
    "retyped": (pa.table({"id": [2], "msg": [5]}), r"retyped columns \['msg \(table: string, split: i64\)'\]"),
}


def _table(tmp_path: Path) -> Any:
    log = executor_lib.create_table(str(tmp_path / "t"), SCHEMA)
    log.commit([write_and_upload(log.store, GOOD, mapping_for(SCHEMA, {}))])
    return log


@pytest.mark.parametrize("case", sorted(BAD))
def test_commit_refuses_a_split_of_another_schema(tmp_path: Path, case: str) -> None:
    log = _table(tmp_path)
    rows, message = BAD[case]
    add = write_and_upload(log.store, rows, mapping_for(rows.schema, {}))
    with pytest.raises(InvalidActionError, match=message) as e:
        log.commit([add])
    assert add.path in str(e.value)
    assert log.latest_version() == 1
    # the table still searches fine
    assert search_table(log.store, log.snapshot(), "*", SplitCache(tmp_path / "c")).num_rows == 1


def test_one_commit_of_many_splits_checks_each_mapping_and_names_the_split_that_differs(tmp_path: Path) -> None:
    """The check runs once per distinct doc mapping of a commit (a 100K-split commit shares one): a
    split of another mapping after many fitting ones is still refused, by its own path."""
    log = _table(tmp_path)
    fitting = [write_and_upload(log.store, GOOD, mapping_for(SCHEMA, {})) for _ in range(4)]
    rows, message = BAD["retyped"]
    bad = write_and_upload(log.store, rows, mapping_for(rows.schema, {}))
    with pytest.raises(InvalidActionError, match=message) as e:
        log.commit([*fitting[:3], bad, fitting[3]])
    assert bad.path in str(e.value) and not any(a.path in str(e.value) for a in fitting)
    assert log.latest_version() == 1


def test_a_narrower_integer_split_is_committed_and_read_as_the_tables_type(tmp_path: Path) -> None:
    log = _table(tmp_path)
    narrow = pa.table({"id": pa.array([2], pa.int32()), "msg": ["b"]})
    log.commit([write_and_upload(log.store, narrow, mapping_for(narrow.schema, {}))])
    rows = search_table(log.store, log.snapshot(), "*", SplitCache(tmp_path / "c"))
    assert rows.schema.field("id").type == pa.int64()
    assert sorted(rows.column("id").to_pylist()) == [1, 2]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("retyped", r"column 'msg' holds int64, the table's type is string"),
        ("missing", r"the split lacks the table's columns \['msg'\]"),
    ],
)
def test_a_search_that_meets_a_mismatching_split_names_it(tmp_path: Path, case: str, message: str) -> None:
    """A split committed by a writer without the check (here: a version file written directly)."""
    log = _table(tmp_path)
    rows, _ = BAD[case]
    bad = write_and_upload(log.store, rows, mapping_for(rows.schema, {}))
    log.store.put_if_absent(f"{LOG_DIR}/{version_file(2)}", actions_to_ndjson([bad]))
    snap = executor_lib.open_log(log.uri).snapshot()
    with pytest.raises(SplitSchemaError, match=rf"split .*{bad.path} of table file://.*: {message}"):
        search_table(log.store, snap, "*", SplitCache(tmp_path / "c"))
