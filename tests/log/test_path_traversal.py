"""A log line naming a file outside the table (``../other/...``) is refused before any store call on every
backend (issue 70, N4: the Azure client resolved ``..`` into another table's blob, and with SAS auth a
search of one table returned the other's rows)."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.protocol.actions import actions_to_ndjson
from executor_lib.protocol.files import LOG_DIR, version_file
from indextables_contract.errors import CorruptLogError, InvalidActionError, InvalidPathError

SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string())])


def test_a_log_line_reaching_into_a_sibling_table_is_refused(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    parent = uri.rsplit("/", 1)[0]
    mine = executor_lib.create_table(uri, SCHEMA, **options)
    sibling_name = f"sibling-{uuid.uuid4().hex[:8]}"
    sibling = executor_lib.create_table(f"{parent}/{sibling_name}", SCHEMA, **options)
    theirs = executor_lib.write_and_upload(
        sibling.store, pa.table({"id": [666], "msg": ["theirs"]}), executor_lib.mapping_for(SCHEMA, {})
    )
    sibling.commit([theirs])
    escaping = dataclasses.replace(theirs, path=f"../{sibling_name}/{theirs.path}")
    mine.store.put(f"{LOG_DIR}/{version_file(1)}", actions_to_ndjson([escaping]))
    # the reader refuses the line itself, naming its version file (it used to list it, and the search then
    # refused the key): no snapshot holds a file outside the table
    with pytest.raises(CorruptLogError, match=rf"{version_file(1)}: add '\.\./{sibling_name}/.*no '\.\.'"):
        executor_lib.open_log(uri, **options).snapshot()
    for call in (mine.store.read, mine.store.head, mine.store.exists, mine.store.delete):
        with pytest.raises(InvalidPathError):
            call(escaping.path)
    assert sibling.store.exists(theirs.path)  # the delete above never reached it
    with pytest.raises(InvalidActionError, match="no leading"):  # and a commit of it is refused
        mine.commit([escaping])
