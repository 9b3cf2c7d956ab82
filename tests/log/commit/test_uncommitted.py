"""``committed_among``: which of a job's uploads a version after its read version names, in every
spelling of the path, on every store; a failed job's cleanup deletes only the others."""

from __future__ import annotations

import dataclasses
from typing import Any

from executor_lib.log.commit.uncommitted import committed_among
from executor_lib.protocol.actions import removes_of
from executor_lib.spark.common import delete_uncommitted_in
from tests.log.helpers import add, make_table


def test_committed_among_finds_adds_and_removes_after_the_read_version(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    log = make_table(uri, options)
    before = add()
    log.commit([before])
    read_version = log.latest_version()
    committed, merged_away, spelled_as_uri, never = add(), add(), add(), add()
    log.commit([committed, merged_away])
    log.commit([*removes_of([merged_away], data_change=False)], operation="MERGE SPLITS")
    log.commit([dataclasses.replace(spelled_as_uri, path=f"{log.uri}/{spelled_as_uri.path}")])
    keys = [before.path, committed.path, merged_away.path, spelled_as_uri.path, never.path]
    assert committed_among(log, keys, read_version) == {committed.path, merged_away.path, spelled_as_uri.path}
    # ``before`` was committed at or before the read version: a job's uploads are never named there
    assert committed_among(log, keys, -1) == {before.path, committed.path, merged_away.path, spelled_as_uri.path}
    assert committed_among(log, [], read_version) == set()


def test_delete_uncommitted_deletes_only_what_no_version_names(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    log = make_table(uri, options)
    read_version = log.latest_version()
    committed, orphan = add(), add()
    for a in (committed, orphan):
        log.store.put(a.path, b"split bytes")
    log.commit([committed])
    deleted = delete_uncommitted_in(log, [committed.path, orphan.path], read_version)
    assert deleted == [orphan.path]
    assert log.store.exists(committed.path) and not log.store.exists(orphan.path)
