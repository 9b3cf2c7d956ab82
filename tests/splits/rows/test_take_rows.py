"""``take_rows``: rows of a columnar copy (a table of many record batches) by row number, equal to
Arrow's ``take`` in every case, without joining the copy's chunks."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from executor_lib.splits.rows.take import take_rows


@pytest.fixture
def rows() -> pa.Table:
    batches = []
    start = 0
    for size in (5, 1, 7, 3, 9, 1, 4):
        ids = list(range(start, start + size))
        batches.append(pa.record_batch({"id": ids, "msg": [f"m{i}" if i % 4 else None for i in ids]}))
        start += size
    return pa.Table.from_batches(batches)


def ids(values: list[int]) -> pa.Array:
    return pa.array(values, pa.uint64())


@pytest.mark.parametrize(
    "wanted",
    [[], [0], [29], [3, 4, 5, 6, 7], list(range(30)), [0, 5, 6, 13, 29], [1, 2, 20, 21, 28], [7, 3, 3, 29, 0]],
    ids=["none", "first", "last", "a run across batches", "all", "one per batch", "sparse", "unsorted, repeated"],
)
def test_take_rows_equals_arrow_take(rows: pa.Table, wanted: list[int]) -> None:
    got = take_rows(rows, ids(wanted))
    assert got.schema == rows.schema
    assert got.to_pylist() == rows.take(ids(wanted)).to_pylist()


def test_take_rows_random_ascending(rows: pa.Table) -> None:
    rng = random.Random(7)
    for _ in range(200):
        wanted = sorted(rng.sample(range(rows.num_rows), rng.randint(1, rows.num_rows)))
        assert take_rows(rows, ids(wanted)).to_pylist() == rows.take(ids(wanted)).to_pylist()


def test_a_run_of_rows_is_a_zero_copy_slice(rows: pa.Table) -> None:
    got = take_rows(rows, ids([6, 7, 8, 9]))
    assert got.column("msg").chunks[0].buffers()[2].address == rows.column("msg").chunks[2].buffers()[2].address


def test_take_rows_names_a_row_out_of_range(rows: pa.Table) -> None:
    with pytest.raises(IndexError):
        take_rows(rows, ids([2, 30]))
