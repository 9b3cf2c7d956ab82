"""A path listed twice in one Avro state (in one manifest, or in two) is one live file: the entry read
last wins (PROTOCOL §9), and its rows are read once (issue 70, round 4)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.log.config import LogConfig
from executor_lib.log.files.live_files import last_entries
from executor_lib.log.state import avro_state
from executor_lib.log.state.state_writer import build_compacted_state, put_state
from executor_lib.splits.search.table_search import search_table

SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string())])


@pytest.mark.parametrize("backend", ["local", "s3"])  # a log reading question: local disk and moto
@pytest.mark.parametrize("per_manifest", [100, 1], ids=["one manifest", "two manifests"])
def test_a_path_twice_in_a_state_is_one_file_with_its_last_entry(
    table: tuple[str, dict[str, Any]], tmp_path: Path, per_manifest: int
) -> None:
    uri, options = table
    log = executor_lib.create_table(uri, SCHEMA, **options)
    store = log.store
    mapping = executor_lib.mapping_for(SCHEMA, {})
    first = executor_lib.write_and_upload(store, pa.table({"id": [1, 2], "msg": ["a", "b"]}), mapping)
    other = executor_lib.write_and_upload(store, pa.table({"id": [3], "msg": ["c"]}), mapping)
    log.commit([first, other])
    snap = log.snapshot()
    stale = dataclasses.replace(first, size=first.size + 1000, modification_time=1)  # the entry read first
    config = dataclasses.replace(LogConfig(), state_entries_per_manifest=per_manifest)
    manifest = build_compacted_state(store, 2, [stale, other, first], snap.metadata, dict(snap.schema_registry), config)
    put_state(store, manifest, snap.protocol, config)
    stored = avro_state.read_state_manifest(store, 2)
    assert stored is not None
    written = avro_state.read_state_chunks(store, stored, 1)
    listed = [p for c in written for p in c.paths.to_pylist()]
    assert sorted(listed) == sorted([first.path, first.path, other.path])  # the state lists it twice
    assert len(written) == (1 if per_manifest == 100 else 3)

    read = executor_lib.open_log(uri, **options).snapshot()
    paths = [a.path for a in read.files]
    assert sorted(paths) == sorted([first.path, other.path])
    assert len(read.state.files) == 2
    (entry,) = [a for a in read.files if a.path == first.path]
    assert (entry.size, entry.modification_time) == (first.size, first.modification_time)  # the last entry's
    assert read.state.files[first.path].size == first.size
    found = search_table(store, read, None, SplitCache(tmp_path / "cache"))
    assert sorted(found.column("id").to_pylist()) == [1, 2, 3]


@pytest.mark.parametrize("backend", ["local"])
def test_no_path_twice_leaves_the_chunks_as_they_are(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    log = executor_lib.create_table(uri, SCHEMA, **options)
    mapping = executor_lib.mapping_for(SCHEMA, {})
    adds = [executor_lib.write_and_upload(log.store, pa.table({"id": [i], "msg": ["x"]}), mapping) for i in range(3)]
    log.commit(adds)
    snap = log.snapshot()
    config = dataclasses.replace(LogConfig(), state_entries_per_manifest=2)
    manifest = build_compacted_state(log.store, 2, adds, snap.metadata, dict(snap.schema_registry), config)
    chunks = avro_state.read_state_chunks(log.store, manifest, 1)
    kept = last_entries(chunks)
    assert len(kept) == len(chunks) and all(a is b for a, b in zip(kept, chunks, strict=True))


def test_last_entries_keeps_each_paths_last_entry_in_any_column_form() -> None:
    """Chunks made from actions (plain or compact path columns), names of different shapes per chunk."""
    from executor_lib.log.files.file_table import FileChunk
    from executor_lib.protocol.actions import AddAction

    def add(path: str, size: int) -> AddAction:
        return AddAction(path=path, partition_values={}, size=size, modification_time=0, data_change=True)

    one = FileChunk.from_actions([add("d/a.split", 1), add("d/b.split", 2), add("d/a.split", 3)])
    two = FileChunk.from_actions([add("part-a.split", 4), add("d/b.split", 5)])
    three = FileChunk.from_actions([add("e/c.split", 6)])
    kept = last_entries([one, two, three])
    got = sorted((a.path, a.size) for c in kept for a in c.actions())
    assert got == [("d/a.split", 3), ("d/b.split", 5), ("e/c.split", 6), ("part-a.split", 4)]
    assert kept[-1] is three  # a chunk without a dropped row is kept as it is
