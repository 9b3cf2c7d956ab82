"""The native writer (``indextables_native.IndexWriter``, ``native/src/writer.rs``): Arrow batches
indexed in Rust into the schema ``splits.write.index_schema`` gives, searched back through the
read path."""

from __future__ import annotations

import datetime
import decimal
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import tantivy

from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.query.check import tantivy_schema
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.write.index_schema import schema_fields
from executor_lib.splits.write.writer import SplitBuilder, write_split
from indextables_contract.errors import InvalidDataError

_TYPED = pa.table(
    {
        "s": ["a"],
        "t": ["hello world"],
        "i": pa.array([1], pa.int64()),
        "u": pa.array([1], pa.uint32()),
        "f": [1.5],
        "b": [True],
        "d": pa.array([1], pa.timestamp("us")),
        "by": [b"x"],
        "ip": ["1.2.3.4"],
        "j": [{"a": 1}],
        "m": pa.array([[("k", "v")]], pa.map_(pa.string(), pa.string())),
        "only": ["index only"],
        "kept": ["stored only"],
    }
)


@pytest.mark.parametrize("row_field", [True, False])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {
            "spark.indextables.indexing.typemap.t": "text",
            "spark.indextables.indexing.typemap.only": "text",
            "spark.indextables.indexing.typemap.ip": "ip",
            "spark.indextables.indexing.fastfields": "t,j,s,i",
            "spark.indextables.indexing.tokenizer.t": "en_stem",
            "spark.indextables.indexing.indexrecordoption.t": "freq",
            "spark.indextables.indexing.indexonlyfields": "only",
            "spark.indextables.indexing.storeonlyfields": "kept",
        },
    ],
)
def test_the_schema_is_the_one_the_tantivy_package_builds(
    options: dict[str, str], row_field: bool, tmp_path: Path
) -> None:
    """Every field type and option gives the schema the ``tantivy`` package built for the same doc
    mapping (the query checker's), so a split written natively reads as one written before."""
    mapping = mapping_for(_TYPED.schema, options)
    tantivy.Index(tantivy_schema(mapping, row_field=row_field), path=str(tmp_path))
    theirs = json.loads((tmp_path / "meta.json").read_text())["schema"]
    assert schema_fields(mapping, row_field) == theirs


def _searcher(rows: pa.Table, tmp_path: Path, options: dict[str, str] | None = None) -> SplitSearcher:
    written = write_split(rows, mapping_for(rows.schema, options or {}), tmp_path / "split")
    return SplitSearcher(written.path, tmp_path / "w", rows.schema, None)


def _ids(searcher: SplitSearcher, query: str) -> list[int]:
    return sorted(searcher.search(query, ["id"]).column("id").to_pylist())


def test_json_fields_take_structs_maps_lists_and_json_text_in_the_jvms_forms(tmp_path: Path) -> None:
    """Structs and maps are objects (map keys as text), a list of scalars ``{"_values": [...]}``, a
    list of structs one object per element, JSON text an object as itself, another value under
    ``_values``, text that is not JSON under ``_raw``; a timestamp inside a struct is a date."""
    when = datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc)
    rows = pa.table(
        {
            "id": pa.array([0, 1, 2], pa.int64()),
            "st": pa.array(
                [{"a": 1, "w": "red fox", "at": when}, {"a": None, "w": "blue", "at": None}, None],
                pa.struct([("a", pa.int64()), ("w", pa.string()), ("at", pa.timestamp("us", "UTC"))]),
            ),
            "mp": pa.array([[(7, "seven")], [], [(8, "eight")]], pa.map_(pa.int32(), pa.string())),
            "nums": pa.array([[1, 2], [3], None], pa.list_(pa.int64())),
            "people": pa.array(
                [[{"name": "ann"}, {"name": "bob"}], [{"name": "cy"}], []], pa.list_(pa.struct([("name", pa.string())]))
            ),
            "doc": ['{"k": "v", "n": 5}', "[1, 2]", "not json at all"],
        }
    )
    searcher = _searcher(rows, tmp_path, {"spark.indextables.indexing.typemap.doc": "json"})
    assert _ids(searcher, "st.a:1") == [0]
    assert _ids(searcher, "st.w:fox") == [0]
    assert _ids(searcher, "st.at:[2024-01-01T00:00:00Z TO 2025-01-01T00:00:00Z]") == [0]
    assert _ids(searcher, "mp.8:eight") == [2]
    assert _ids(searcher, "nums._values:3") == [1]
    assert _ids(searcher, "people.name:bob") == [0] and _ids(searcher, "people.name:cy") == [1]
    assert _ids(searcher, "doc.n:5") == [0]
    assert _ids(searcher, "doc._values:2") == [1]
    assert _ids(searcher, "doc._raw:json") == [2]
    assert searcher.search("*").to_pylist() == rows.to_pylist(), "rows read back as written"


def test_every_arrow_width_and_unit_is_indexed_by_value(tmp_path: Path) -> None:
    """Integers of every width, float32, decimals, dates and timestamps of every unit and zone,
    large and view strings: each found by its value, each read back as written."""
    rows = pa.table(
        {
            "id": pa.array([0, 1], pa.int64()),
            "i8": pa.array([-5, 6], pa.int8()),
            "u16": pa.array([65535, 1], pa.uint16()),
            "f32": pa.array([2.5, -1.25], pa.float32()),
            "dec": pa.array([decimal.Decimal("1.10"), decimal.Decimal("-3.33")], pa.decimal128(5, 2)),
            "day": pa.array([datetime.date(2020, 2, 29), datetime.date(1960, 1, 1)]),
            "sec": pa.array([0, 86_400], pa.timestamp("s")),
            "ns": pa.array([1_500_000_000_000_000_000, -1], pa.timestamp("ns", "America/New_York")),
            "big": pa.array(["x", "big text"], pa.large_string()),
        }
    )
    searcher = _searcher(rows, tmp_path, {"spark.indextables.indexing.typemap.big": "text"})
    assert _ids(searcher, "i8:-5") == [0] and _ids(searcher, "u16:65535") == [0]
    assert _ids(searcher, "f32:2.5") == [0] and _ids(searcher, "dec:[-4 TO 0]") == [1]
    assert _ids(searcher, 'day:"2020-02-29T00:00:00Z"') == [0]
    assert _ids(searcher, 'sec:"1970-01-02T00:00:00Z"') == [1]
    assert _ids(searcher, "ns:[2017-07-14T00:00:00Z TO 2017-07-15T00:00:00Z]") == [0]
    assert _ids(searcher, "big:text") == [1]
    assert searcher.rows.read_all().equals(rows)


def test_a_value_that_cannot_be_indexed_names_its_row_and_column_and_nothing_is_left(tmp_path: Path) -> None:
    """An address that does not parse in an ``ip`` column: InvalidDataError naming the row of its
    batch, the column and the value; the builder's work files go."""
    rows = pa.table({"id": [0, 1, 2], "addr": ["10.0.0.1", "::1", "10.0.0.300"]})
    builder = SplitBuilder(mapping_for(rows.schema, {"spark.indextables.indexing.typemap.addr": "ip"}), tmp_path)
    with pytest.raises(InvalidDataError, match=r'row 2 of the batch cannot be indexed: column addr: "10.0.0.300"'):
        builder.add(rows)
    builder.close()
    assert list(tmp_path.iterdir()) == []


def test_row_numbers_run_on_across_batches_and_threads(tmp_path: Path) -> None:
    """Rows added in several batches to a builder of two indexing threads keep their order: the
    hidden row numbers continue from batch to batch (a columnar copy's split), so every hit maps
    to its own row."""
    rows = pa.table({"id": pa.array(range(30_000), pa.int64()), "v": pa.array([[i % 7] for i in range(30_000)])})
    builder = SplitBuilder(mapping_for(rows.schema, {}), tmp_path, threads=2)
    for start in range(0, rows.num_rows, 7_000):
        builder.add(rows.slice(start, 7_000))
    written = builder.finish()
    searcher = SplitSearcher(written.path, tmp_path / "w", rows.schema, None)
    found = searcher.search("v._values:3", ["id", "v"])
    assert found.num_rows == len(range(3, 30_000, 7))
    pairs = zip(found.column("id").to_pylist(), found.column("v").to_pylist(), strict=True)
    assert all(v == [3] and i % 7 == 3 for i, v in pairs)


def test_buffers_less_aligned_than_their_type_are_indexed(tmp_path: Path) -> None:
    """A decimal column whose buffer starts 8 bytes into an allocation (as Spark's Arrow batches
    hand them) is indexed and read back, not refused by the import."""
    n = 5
    raw = b"".join(int(v * 100).to_bytes(16, "little", signed=True) for v in range(n))
    whole = pa.allocate_buffer(8 + len(raw))  # 64-byte aligned: 8 bytes in is not 16-aligned
    np.frombuffer(whole, np.uint8)[8:] = np.frombuffer(raw, np.uint8)
    buffer = whole.slice(8)
    assert buffer.address % 16 == 8
    dec = pa.Array.from_buffers(pa.decimal128(10, 2), n, [None, buffer])
    rows = pa.table({"id": pa.array(range(n), pa.int64()), "dec": dec})
    searcher = _searcher(rows, tmp_path)
    assert _ids(searcher, "dec:[2 TO 3]") == [2, 3]
    assert searcher.rows.read_all().equals(rows)
