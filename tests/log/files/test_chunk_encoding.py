"""Compact physical forms of a chunk's columns (``log/files/chunk_encoding.py``): each gives back its logical
column exactly (odd paths, null maps, slices, integers past int32), survives an IPC round trip, and
a chunk built from actions answers with the actions it was built from."""

from __future__ import annotations

import pyarrow as pa
import pytest

from executor_lib.log.files.chunk_encoding import compact_column, compact_table, is_physical_form, logical_column
from executor_lib.log.files.file_table import COLUMN_TYPES, FileChunk, restore_chunk
from executor_lib.protocol.actions import AddAction

_MAP = pa.map_(pa.string(), pa.string())


def _round_trip(name: str, array: pa.Array) -> pa.Array:
    compact = compact_column(name, array, COLUMN_TYPES[name])
    compact.validate(full=True)
    assert is_physical_form(name, compact.type, COLUMN_TYPES[name])
    return logical_column(name, pa.chunked_array([compact]), COLUMN_TYPES[name])


def test_paths_split_and_joined_back_exactly() -> None:
    paths = pa.array(["a/b/c.split", "x.split", "/y", "dir/", "é/ü\nz/q", "", "a//b", "s3://bucket/t/f.split"])
    compact = compact_column("path", paths, pa.string())
    assert pa.types.is_struct(compact.type)
    assert _round_trip("path", paths).to_pylist() == paths.to_pylist()
    assert logical_column("path", pa.chunked_array([compact.slice(3, 4)]), pa.string()).to_pylist() == (
        paths.slice(3, 4).to_pylist()
    )
    for shared in (["d/ü-1ü.s", "ü-22ü.s", "e/ü-ü.s"], ["aba", "aa"], ["a", "a"], ["x/same", "y/same"], ["q"]):
        assert _round_trip("path", pa.array(shared)).to_pylist() == shared
    named = compact_column("path", pa.array(["d=1/split-a1.split", "d=2/split-b22.split"]), pa.string())
    assert named.field("middle").to_pylist() == ["a1", "b22"]  # the shared start and end held once


@pytest.mark.parametrize("start,stop", [(0, 5), (1, 4), (2, 5), (0, 0), (4, 5)])
def test_partition_maps_dictionary_encoded_with_nulls_and_slices(start: int, stop: int) -> None:
    maps = pa.array([{"a": "1"}, None, {"a": "2", "b": None}, {}, {"c": "x"}], _MAP).slice(start, stop - start)
    assert _round_trip("partition_values", maps).to_pylist() == maps.to_pylist()


def test_integers_narrowed_only_when_every_value_fits() -> None:
    small = pa.array([1, None, 2**31 - 1, -(2**31)], pa.int64())
    assert compact_column("size", small, pa.int64()).type == pa.int32()
    assert _round_trip("size", small).to_pylist() == small.to_pylist()
    big = pa.array([1, 2**31], pa.int64())
    assert compact_column("size", big, pa.int64()).type == pa.int64()
    assert compact_column("size", pa.nulls(3, pa.int64()), pa.int64()).type == pa.int64()


def test_compact_chunk_survives_ipc_and_gives_back_its_actions() -> None:
    adds = [
        AddAction(
            path=f"day=2024-01-0{i % 3}/f-{i}.split",
            partition_values={"day": f"2024-01-0{i % 3}"} if i % 4 else {"day": None},
            size=10**10 + i if i == 7 else i,
            modification_time=1_700_000_000_000 + i,
            data_change=True,
            num_records=i,
            min_values={"id": str(i)},
            max_values={"id": str(i + 1)},
            doc_mapping_ref="ref" if i % 2 else None,
        )
        for i in range(20)
    ]
    chunk = FileChunk.from_actions(adds)
    assert chunk.table.schema.field("path").type != pa.string()  # held compact
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, chunk.table.schema) as writer:
        writer.write_table(chunk.table)
    restored = restore_chunk(pa.ipc.open_file(sink.getvalue()).read_all())
    assert restored.actions() == adds
    assert restored.paths.to_pylist() == [a.path for a in adds]
    plain = pa.table({n: restored.column(n) for n in restored.column_names})  # as written before: compacted on read
    assert restore_chunk(plain).actions() == adds
    assert compact_table(restored.table, COLUMN_TYPES) is restored.table  # already compact: not copied
