"""``columnar_copy``: a copy written in fixed compressed batches reads back equal to its rows, by
batch (``take`` equals Arrow's ``take`` in every case), and copies written before compression
(uncompressed, batches of any size) read the same way."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from executor_lib.splits.rows import columnar as columnar_copy
from executor_lib.splits.rows.columnar import ColumnarCopy, ColumnarCopyWriter

WANTED = [[], [0], [99], [3, 4, 5, 6, 7], list(range(100)), [0, 16, 32, 48, 99], [7, 3, 3, 99, 0], [5, 5, 7]]


def rows(n: int = 100) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "msg": [f"m{i}" if i % 4 else None for i in range(n)]})


def written(tmp_path: Path, table: pa.Table, monkeypatch: pytest.MonkeyPatch, batch_rows: int = 16) -> ColumnarCopy:
    monkeypatch.setattr(columnar_copy, "MAX_BATCH_ROWS", batch_rows)
    monkeypatch.setattr(columnar_copy, "COPY_BATCH_BYTES", 1 << 30)
    path = tmp_path / "copy.arrow"
    writer = ColumnarCopyWriter(path, table.schema)
    for batch in table.to_batches(max_chunksize=7):  # given in batches of another size
        writer.write(batch)
    writer.close()
    return ColumnarCopy(pa.memory_map(str(path)).read_buffer(), str(path))


def legacy(table: pa.Table, sizes: list[int]) -> ColumnarCopy:
    """An uncompressed copy of batches of ``sizes`` rows, as written before compression."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        start = 0
        for size in sizes:
            w.write_batch(table.slice(start, size).combine_chunks().to_batches()[0])
            start += size
    return ColumnarCopy(sink.getvalue(), "legacy")


@pytest.mark.parametrize("wanted", WANTED, ids=["none", "first", "last", "run", "all", "sparse", "unsorted", "dups"])
def test_take_equals_arrow_take(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wanted: list[int]) -> None:
    table = rows()
    ids = pa.array(wanted, pa.uint64())
    for copy in (written(tmp_path, table, monkeypatch), legacy(table, [30, 1, 50, 19])):
        assert copy.num_rows == 100
        assert copy.take(ids).to_pylist() == table.take(ids).to_pylist(), copy.source
        assert copy.select(["msg"]).take(ids).to_pylist() == table.select(["msg"]).take(ids).to_pylist()


def test_random_takes_and_read_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = rows(1_000)
    copy = written(tmp_path, table, monkeypatch, batch_rows=64)
    assert copy.read_all().equals(table)
    rng = random.Random(5)
    for _ in range(50):
        wanted = sorted(rng.sample(range(1_000), rng.randint(1, 40)))
        ids = pa.array(wanted, pa.uint64())
        assert copy.take(ids).equals(table.take(ids))


def test_columns_the_copy_lacks_read_as_nulls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = written(tmp_path, rows(), monkeypatch).with_schema(
        pa.schema([("id", pa.int64()), ("secret", pa.string()), ("msg", pa.string())])
    )
    got = copy.take(pa.array([1, 2], pa.uint64()))
    assert got.column_names == ["id", "secret", "msg"] and got.column("secret").null_count == 2
    assert copy.read_all().column("id").to_pylist() == list(range(100))


def test_a_row_out_of_range_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(IndexError, match="row 100 is out of range"):
        written(tmp_path, rows(), monkeypatch).take(pa.array([2, 100], pa.uint64()))


def test_an_empty_copy(tmp_path: Path) -> None:
    path = tmp_path / "empty.arrow"
    writer = ColumnarCopyWriter(path, rows().schema)
    writer.close()
    copy = ColumnarCopy(pa.memory_map(str(path)).read_buffer(), str(path))
    assert copy.num_rows == 0 and copy.read_all().num_rows == 0
    assert copy.take(pa.array([], pa.uint64())).column_names == ["id", "msg"]


def test_batches_read_by_range_are_fetched_at_once_before_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy read through a file that only has what was fetched (``cache/split_pieces.py``): ``ipc_blocks``
    finds each batch's bytes from the footer, and a ``take`` fetches exactly the batches it decodes
    (every byte outside them and the footer is garbage), then answers as Arrow's ``take``."""
    table = rows()
    written(tmp_path, table, monkeypatch)
    data = (tmp_path / "copy.arrow").read_bytes()
    blocks = columnar_copy.ipc_blocks(len(data), lambda s, e: data[s:e])
    assert blocks is not None and len(blocks) == 7  # 100 rows in batches of 16
    for start, stop in blocks:
        assert pa.ipc.read_message(pa.BufferReader(data[start:stop])).type == "record batch"
    visible = bytearray(random.randbytes(len(data)))
    visible[blocks[-1][1] :] = data[blocks[-1][1] :]  # the footer (and schema) were fetched
    visible[: blocks[0][0]] = data[: blocks[0][0]]
    fetched: list[tuple[int, int]] = []

    def fetch(ranges: list[tuple[int, int]]) -> None:
        fetched.extend(ranges)
        for start, stop in ranges:
            visible[start:stop] = data[start:stop]

    last = blocks[-1]
    visible[last[0] : last[1]] = data[last[0] : last[1]]  # the row count reads the last batch at open
    copy = ColumnarCopy(pa.py_buffer(visible), "copy", prefetch=(blocks, fetch))
    assert copy.take(pa.array([3, 40, 41], pa.uint64())).equals(table.take([3, 40, 41]))
    assert sorted(fetched) == [blocks[0], blocks[2]]
    assert copy.read_all().equals(table)
    assert columnar_copy.ipc_blocks(len(data), lambda s, e: b"\0" * (e - s)) is None


def test_a_parted_copy_reads_as_its_parts_concatenated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``PartedCopy`` (a merged split's sources' copies, kept as they were) answers ``take``,
    ``read_all``, ``select`` and ``with_schema`` as the concatenated table does, ids in any order."""
    from executor_lib.splits.rows.columnar import PartedCopy

    table = rows(100)
    sizes = [30, 1, 69]
    parts = []
    start = 0
    for k, size in enumerate(sizes):
        (tmp_path / str(k)).mkdir()
        parts.append(written(tmp_path / str(k), table.slice(start, size), monkeypatch, batch_rows=8))
        start += size
    copy = PartedCopy(parts, "parted")
    assert copy.num_rows == 100 and copy.read_all().equals(table)
    shuffled = list(range(100))
    random.Random(7).shuffle(shuffled)
    for wanted in [*WANTED, shuffled, [99, 30, 29, 0, 31], [30]]:
        got = copy.take(pa.array(wanted, pa.uint64()))
        assert got.equals(table.take(pa.array(wanted, pa.int64()))), wanted
    assert copy.select(["msg"]).take(pa.array([31, 0], pa.uint64())).column_names == ["msg"]
    wider = pa.schema([*table.schema, pa.field("extra", pa.string())])
    assert copy.with_schema(wider).take(pa.array([99, 1], pa.uint64())).column("extra").null_count == 2
    with pytest.raises(IndexError, match="row 100 is out of range"):
        copy.take(pa.array([5, 100], pa.uint64()))
