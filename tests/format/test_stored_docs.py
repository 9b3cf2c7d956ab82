"""``format.store.documents``: the doc store's blocks as Arrow columns. Real bytes: splits written by
``splits.write.writer`` (the ``tantivy`` package), their ``.store`` blocks found through the store's skip
index (``format.store.blocks``, lz4 or zstd); compared with the Arrow rows written and with
Tantivy's own reading of the stored documents. Hand-built blocks (the format as
``src/schema/document/se.rs`` writes it) for shapes the writer does not produce and for corruption."""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import tantivy

from executor_lib.format.directory import encode_vint
from executor_lib.format.quickwit.bundle import read_member
from executor_lib.format.store import blocks as doc_store
from executor_lib.format.store.documents import StoredColumn, decodable, decode_blocks, decode_docs
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.query.check import tantivy_schema
from executor_lib.splits.write.writer import WrittenSplit, write_split
from indextables_contract.errors import CorruptSplitError, SplitSchemaError

SOURCE = "test.split:store"

# --- reading a written split's doc store ----------------------------------------------------------


def store_blocks(store: bytes) -> list[bytes]:
    """The decompressed blocks of a ``.store`` file (lz4 as the ``tantivy`` package writes it, zstd
    as ``splits.write.writer`` re-writes it), found through its skip index (``format.store.blocks``)."""
    parsed = doc_store.parse_store(store, "store")
    assert parsed.version == 2, "doc store version 2"
    return [parsed.block(i, "store") for i in range(len(parsed.start))]


def member(written: WrittenSplit, name: str) -> bytes:
    data = read_member(written.path, written.footer, name)
    assert data is not None, name
    return data


def split_blocks(written: WrittenSplit) -> list[bytes]:
    (store,) = [n for n in written.footer.files if n.endswith(".store")]
    return store_blocks(member(written, store))


def stored_columns(written: WrittenSplit, table: pa.Table) -> list[StoredColumn]:
    """The table's columns that the split's doc store holds, with their field ids from meta.json."""
    schema = json.loads(member(written, "meta.json"))["schema"]
    ids = {f["name"]: i for i, f in enumerate(schema)}
    mapping = json.loads(written.doc_mapping_json)
    types = {f["name"]: f["type"] for f in mapping if f["stored"]}
    return [
        StoredColumn(ids[f.name], f.name, types[f.name], f.type)
        for f in table.schema
        if f.name in ids and f.name in types and decodable(types[f.name], f.type)
    ]


def write(table: pa.Table, tmp: Path, options: dict[str, str] | None = None) -> WrittenSplit:
    """``table`` written by ``splits.write.writer``, in zstd blocks of Tantivy's 16 KB (many blocks)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(doc_store, "ZSTD_BLOCK_BYTES", 16 << 10)
        return write_split(table, mapping_for(table.schema, options or {}), tmp)


def same(got: pa.Table, expected: pa.Table) -> None:
    """Equal column by column, NaN equal to NaN (by bits)."""
    assert got.column_names == expected.column_names
    for name in expected.column_names:
        a, e = got.column(name), expected.column(name)
        assert a.type == e.type, name
        if pa.types.is_floating(e.type):
            assert a.is_null().equals(e.is_null()), name
            width = np.uint32 if pa.types.is_float32(e.type) else np.uint64
            bits = [c.to_numpy(zero_copy_only=False).astype(e.type.to_pandas_dtype()).view(width) for c in (a, e)]
            valid = ~e.is_null().to_numpy(zero_copy_only=False)
            assert np.array_equal(bits[0][valid], bits[1][valid]), name
        else:
            assert a.equals(e), name


# --- the rows written -----------------------------------------------------------------------------

# Columns read as the large types (the writer's JSON path does not take a large_string column).
READ_AS = {"large_text": pa.large_string(), "large_raw": pa.large_binary()}
LONG = "ü" * 40_000  # 80 000 bytes: a VInt of three bytes, a document larger than a block
ROWS = 3_000


def typed_rows(n: int = ROWS, non_finite: bool = True) -> pa.Table:
    """Every decodable type, with nulls; a binary column and NaN / infinities send the writer down
    its ``Document.from_dict`` path, without them its JSON path."""
    rng = np.random.default_rng(5)
    i = np.arange(n)
    null = i % 7 == 3
    words = np.array(["", "a", "héllo wörld", "日本語テキスト", 'quote " back \\ slash', "tab\tnew\nline\x01", "🙂"])
    text = words[i % len(words)].astype(object)
    text[18] = LONG
    text[ROWS // 2] = "x" * 70_000
    f32 = (rng.standard_normal(n) * 1e3).astype(np.float32)
    f32[:3] = [np.nan, np.inf, -np.inf] if non_finite else [0.0, -0.0, 1e-40]
    micros = rng.integers(-(2**50), 2**50, n)
    columns = {
        "text": pa.array(text, pa.string(), mask=null),
        "large_text": pa.array(words[(i + 3) % len(words)], pa.string()),  # read as READ_AS says
        "i64": pa.array(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64), mask=null),
        "i8": pa.array((i % 256 - 128).astype(np.int8)),
        "i16": pa.array(-i.astype(np.int16), mask=i % 5 == 0),
        "i32": pa.array(np.full(n, -(2**31), np.int32)),
        "u8": pa.array((i % 256).astype(np.uint8)),
        "u32": pa.array(np.full(n, 2**32 - 1, np.uint32), mask=null),
        "u64": pa.array(rng.integers(0, 2**64 - 1, n, dtype=np.uint64)),
        "f32": pa.array(f32, mask=i % 11 == 4),
        "flag": pa.array(i % 3 == 0, mask=i % 4 == 1),
        "ts_us": pa.array(micros, pa.timestamp("us", "America/New_York"), mask=null),
        "ts_ms": pa.array(micros // 1000, pa.timestamp("ms")),
        "ts_s": pa.array(micros // 10**6, pa.timestamp("s", "UTC")),
        "ts_ns": pa.array(micros * 1000, pa.timestamp("ns", "+05:30")),
        "day": pa.array((i - 1000).astype(np.int32), pa.date32(), mask=i % 9 == 2),
        "day64": pa.array((i - 500) * 86_400_000, pa.date64()),
    }
    if non_finite:
        blob = [bytes(rng.integers(0, 256, int(k % 40), dtype=np.uint8)) for k in i]
        columns["raw"] = pa.array(blob, pa.binary(), mask=null)
        columns["large_raw"] = pa.array(blob[::-1], pa.binary())
        columns["f64"] = pa.array(np.where(i % 13 == 0, np.nan, rng.standard_normal(n) * 1e200))
    return pa.table(columns)


@pytest.fixture(scope="module")
def dict_split(tmp_path_factory: pytest.TempPathFactory) -> tuple[pa.Table, WrittenSplit]:
    table = typed_rows()
    return table, write(table, tmp_path_factory.mktemp("dict"))


@pytest.fixture(scope="module")
def json_split(tmp_path_factory: pytest.TempPathFactory) -> tuple[pa.Table, WrittenSplit]:
    table = typed_rows(non_finite=False)
    return table, write(table, tmp_path_factory.mktemp("json"))


@pytest.mark.parametrize("path", ["dict_split", "json_split"])
def test_every_decodable_type_round_trips(path: str, request: pytest.FixtureRequest) -> None:
    table, written = request.getfixturevalue(path)
    columns = [replace(c, arrow_type=READ_AS.get(c.name, c.arrow_type)) for c in stored_columns(written, table)]
    assert len(columns) == table.num_columns
    blocks = split_blocks(written)
    assert len(blocks) > 10
    got = decode_blocks(blocks, columns, SOURCE)
    assert got.num_rows == ROWS
    expected = table.select([c.name for c in columns])
    same(got, expected.cast(pa.schema([pa.field(c.name, c.arrow_type) for c in columns])))
    assert got.column("text")[18].as_py() == LONG


def test_blocks_as_memoryviews_and_one_by_one(dict_split: tuple[pa.Table, WrittenSplit]) -> None:
    table, written = dict_split
    columns = stored_columns(written, table)
    blocks = split_blocks(written)
    whole = decode_blocks([memoryview(b) for b in blocks], columns, SOURCE)
    parts = pa.concat_tables([decode_blocks([b], columns, SOURCE) for b in blocks])
    same(parts, whole)


def test_float64_round_trips_though_json_numbers_would_not(tmp_path: Path) -> None:
    """f64 read as float64 is what Tantivy stored (its own ``doc()`` agrees). Handed as JSON numbers
    (serde_json without ``float_roundtrip``) some values land a unit or two in the last place off;
    the native writer hands Tantivy the Arrow values themselves: exact."""
    values = np.random.default_rng(3).standard_normal(2_000) * 10.0 ** np.arange(-10, 10).repeat(100)
    table = pa.table({"x": pa.array(values), "y": pa.array(values.astype(np.float32))})
    mapping = mapping_for(table.schema, {})
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    index = tantivy.Index(tantivy_schema(mapping), path=str(index_dir))
    writer = index.writer(15_000_000, 1)
    for row, (x, y) in enumerate(zip(table.column("x").to_pylist(), table.column("y").to_pylist(), strict=True)):
        writer.add_json(json.dumps({"x": x, "y": y, "__row": row}))  # JSON numbers
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    (store,) = index_dir.glob("*.store")
    columns = [StoredColumn(0, "x", "f64", pa.float64()), StoredColumn(1, "y", "f64", pa.float32())]
    got = decode_blocks(store_blocks(store.read_bytes()), columns, SOURCE)
    searcher = index.searcher()
    tantivy_x = [searcher.doc(tantivy.DocAddress(0, d))["x"][0] for d in range(table.num_rows)]
    assert got.column("x").to_pylist() == tantivy_x
    ulps = np.abs(got.column("x").to_numpy().view(np.int64) - values.view(np.int64))
    assert 0 < np.count_nonzero(ulps) < len(values) / 2  # JSON numbers: not exact ...
    assert ulps.max() <= 2  # ... by a unit or two in the last place
    same(got.select(["y"]), table.select(["y"]))  # float32 rounds back exactly
    written = write(table, tmp_path / "split")
    assert decodable("f64", pa.float64())
    same(decode_blocks(split_blocks(written), columns, SOURCE), table)  # the writer's path: exact


def test_json_fields_are_skipped(tmp_path: Path) -> None:
    """Stored JSON fields (objects, arrays, nested) between the scalar ones: skipped value by value."""
    n = 500
    i = np.arange(n)
    attrs = [{"k": int(k), "tags": ["a", "b"][: k % 3], "inner": {"deep": [[1, 2], [], [None]]}} for k in i]
    table = pa.table(
        {
            "a": pa.array(i),
            "attrs": pa.array(attrs),
            "m": pa.array([[("x", int(k))] * (k % 4) for k in i], pa.map_(pa.string(), pa.int64())),
            "l": pa.array([list(range(k % 5)) for k in i]),
            "s": pa.array([f"row {k}" if k % 6 else None for k in i]),
        }
    )
    written = write(table, tmp_path)
    columns = stored_columns(written, table)
    assert [c.name for c in columns] == ["a", "s"]
    got = decode_blocks(split_blocks(written), columns, SOURCE)
    same(got, table.select(["a", "s"]))


def test_decode_docs_any_order_with_repeats(dict_split: tuple[pa.Table, WrittenSplit]) -> None:
    table, written = dict_split
    columns = stored_columns(written, table)
    blocks = split_blocks(written)
    first = 0
    for k, block in enumerate(blocks[:6]):
        count = struct.unpack_from("<I", block, len(block) - 4)[0]
        for docs in ([count - 1, 0, 3, 3, count - 1, 1], [2], [], list(range(count))[::-1]):
            wanted = [d for d in docs if d < count]
            got = decode_docs(block, np.array(wanted, dtype=np.int64), columns, f"{SOURCE} block {k}")
            expected = table.select([c.name for c in columns]).take(pa.array(np.array(wanted, dtype=np.int64) + first))
            same(got, expected)
        first += count


def test_no_columns_keeps_the_row_count(json_split: tuple[pa.Table, WrittenSplit]) -> None:
    blocks = split_blocks(json_split[1])
    assert decode_blocks(blocks, [], SOURCE).num_rows == ROWS
    assert decode_docs(blocks[0], np.array([1, 1, 0]), [], SOURCE).num_rows == 3
    assert decode_blocks([], [StoredColumn(0, "t", "text", pa.string())], SOURCE).num_rows == 0


# --- hand-built blocks: the format as se.rs writes it ------------------------------------------------


def vint(value: int) -> bytes:
    out = bytearray()
    encode_vint(value, out)
    return bytes(out)


def text(value: str | bytes, code: int = 0) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return bytes([code]) + vint(len(data)) + data


def i64(value: int) -> bytes:
    return b"\x02" + struct.pack("<q", value)


def u64(value: int) -> bytes:
    return b"\x01" + struct.pack("<Q", value)


def f64(value: float) -> bytes:
    bits = struct.unpack("<Q", struct.pack("<d", value))[0]
    return b"\x06" + struct.pack("<Q", bits ^ (1 << 63) if value >= 0 else bits ^ (2**64 - 1))  # common's f64_to_u64


def date(value: int) -> bytes:
    return b"\x05" + struct.pack("<q", value)


def boolean(value: int) -> bytes:
    return b"\x09" + bytes([value])


NULL = b"\x0b"


def array(*values: bytes) -> bytes:
    return b"\x0c" + vint(len(values)) + b"".join(values)


def obj(*pairs: tuple[str, bytes]) -> bytes:
    return b"\x0d" + vint(2 * len(pairs)) + b"".join(text(k) + v for k, v in pairs)


def doc(*values: tuple[int, bytes]) -> bytes:
    return vint(len(values)) + b"".join(struct.pack("<I", f) + v for f, v in values)


def block(*docs: bytes) -> bytes:
    starts = np.cumsum([0, *map(len, docs)])[:-1]
    return b"".join(docs) + struct.pack(f"<{len(docs)}I", *starts) + struct.pack("<I", len(docs))


COLUMNS = [
    StoredColumn(0, "name", "text", pa.string()),
    StoredColumn(2, "n", "i64", pa.int64()),
    StoredColumn(5, "when", "datetime", pa.timestamp("us")),
]


def test_hand_built_block_any_field_order_nested_and_nulls() -> None:
    docs = [
        doc((0, text("a")), (2, i64(-1)), (5, date(1_000))),
        doc((5, date(-2_000)), (9, obj(("k", array(NULL, obj(("z", u64(1))))), ("e", array()))), (0, text(""))),
        doc(),
        doc((7, text(b"\xff\xfe not text: an unwanted bytes field", code=4)), (2, NULL), (1, boolean(1))),
        doc((300_000, i64(5)), (2, i64(2**63 - 1)), (0, text("é" * 200))),  # a field id past every column's
    ]
    got = decode_blocks([block(*docs[:2]), block(), block(*docs[2:])], COLUMNS, SOURCE)  # an empty block too
    assert got.to_pydict() == {
        "name": ["a", "", None, None, "é" * 200],
        "n": [-1, None, None, None, 2**63 - 1],
        "when": [
            np.datetime64(1, "us").astype(object),
            np.datetime64(-2, "us").astype(object),
            None,
            None,
            None,
        ],
    }


@pytest.mark.parametrize(
    ("arrow_type", "ticks"),
    [
        (pa.timestamp("us"), [7, -(2**62)]),
        (pa.timestamp("ns"), [7_000, -(2**62) * 1000]),
        (pa.timestamp("s", "UTC"), None),
        (pa.date32(), None),
    ],
)
def test_doc_store_version_1_dates_are_microseconds(arrow_type: pa.DataType, ticks: list[int] | None) -> None:
    data = block(doc((5, date(7))), doc((5, date(-(2**62)))))
    columns = [StoredColumn(5, "when", "datetime", arrow_type)]
    if ticks is None or ticks[1] < -(2**63):
        with pytest.raises(CorruptSplitError, match=r"not a whole|does not fit"):
            decode_blocks([data], columns, SOURCE, version=1)
    else:
        got = decode_blocks([data], columns, SOURCE, version=1)
        assert got.column("when").cast(pa.int64()).to_pylist() == ticks
    whole_days = block(doc((5, date(86_400 * 10**6 * 3))))
    got = decode_blocks([whole_days], [StoredColumn(5, "d", "datetime", pa.date64())], SOURCE, version=1)
    assert got.column("d").cast(pa.int64()).to_pylist() == [86_400_000 * 3]


@pytest.mark.parametrize(
    ("blocks", "columns", "message"),
    [
        ([b"\x01\x00"], COLUMNS, "block 0 does not parse"),
        ([block(doc((0, text("ok"))))[:-1]], COLUMNS, "does not parse"),
        ([block(doc((0, text("ok"))))[:-5] + struct.pack("<I", 1)], COLUMNS, "does not parse"),  # offset table cut
        ([block(doc((0, text("long")))[:-2])], COLUMNS, "runs past its end"),
        ([block(doc((0, text("ok"))) + b"\x00")], COLUMNS, "bytes left after its last value"),
        ([block(doc((0, text("a")), (0, text("b"))))], COLUMNS, "more than one value"),
        ([block(doc((2, i64(1)), (2, NULL)))], COLUMNS, "more than one value"),
        ([block(doc((2, u64(1))))], COLUMNS, "holds a value of type u64, not i64"),
        ([block(doc((0, array(text("a")))))], COLUMNS, "holds a value of type array, not text"),
        ([block(doc((0, text(b"\xff\xfe"))))], COLUMNS, "not UTF-8"),
        ([block(doc((1, boolean(2))))], [StoredColumn(1, "b", "bool", pa.bool_())], "not 0 or 1"),
        ([block(doc((2, i64(300))))], [StoredColumn(2, "n", "i64", pa.int8())], "does not fit int8"),
        ([block(doc((2, u64(2**32))))], [StoredColumn(2, "n", "u64", pa.uint32())], "does not fit uint32"),
        (
            [block(doc((2, f64(1e39))))],
            [StoredColumn(2, "x", "f64", pa.float32())],
            "does not fit float",
        ),
        ([block(doc((2, date(1_500))))], [StoredColumn(2, "t", "datetime", pa.timestamp("us"))], "not a whole"),
        ([block(doc((2, date(86_400 * 10**9 + 1))))], [StoredColumn(2, "d", "datetime", pa.date32())], "not a whole"),
        ([block(doc((3, b"\x07\x00" + text("pre-tokenized"))))], COLUMNS, "pre-tokenized text"),
        ([block(doc((3, b"\x2a")))], COLUMNS, "unknown type code 42"),
        ([block(doc((3, b"\x00" + b"\x01" * 9)))], COLUMNS, "a length does not parse"),  # no last byte
        ([block(b"\x00\x00\x00\x00\x00\x00\x00\x00\x00")], COLUMNS, "value count does not parse"),
        ([block(doc((3, b"\x0c" + vint(3) + i64(1))))], COLUMNS, "does not parse"),  # an array of 3 holding 1
    ],
)
def test_corrupt_blocks_raise_naming_the_source(
    blocks: Sequence[bytes], columns: list[StoredColumn], message: str
) -> None:
    with pytest.raises(CorruptSplitError, match=message) as e:
        decode_blocks(blocks, columns, SOURCE)
    assert SOURCE in str(e.value)


def test_a_damaged_last_document_raises_or_leaves_the_others(json_split: tuple[pa.Table, WrittenSplit]) -> None:
    """Zeroing a real block's last document's tail: a CorruptSplitError, never another error, and
    never other values for the documents before it."""
    table, written = json_split
    columns = stored_columns(written, table)
    real = split_blocks(written)[1]
    count = struct.unpack_from("<I", real, len(real) - 4)[0]
    body_end = len(real) - 4 - 4 * count
    for cut in range(1, 200, 7):
        broken = real[: body_end - cut] + bytes(cut) + real[body_end:]  # the last document's tail zeroed
        try:
            got = decode_blocks([broken], columns, SOURCE)
        except CorruptSplitError as e:
            assert SOURCE in str(e)
        else:
            assert got.slice(0, count - 1).equals(decode_blocks([real], columns, SOURCE).slice(0, count - 1))


def test_decode_docs_outside_the_block() -> None:
    with pytest.raises(CorruptSplitError, match="has 1 documents") as e:
        decode_docs(block(doc()), np.array([0, 1]), COLUMNS, SOURCE)
    assert SOURCE in str(e.value)


def test_columns_that_cannot_be_read() -> None:
    with pytest.raises(SplitSchemaError, match="cannot be read as"):
        decode_blocks([block(doc())], [StoredColumn(0, "x", "ip", pa.string())], SOURCE)
    with pytest.raises(SplitSchemaError, match="named twice"):
        decode_blocks([block(doc())], [COLUMNS[0], StoredColumn(0, "again", "text", pa.large_string())], SOURCE)


@pytest.mark.parametrize(
    ("tantivy_type", "arrow_type", "expected"),
    [
        ("text", pa.string(), True),
        ("text", pa.large_string(), True),
        ("text", pa.binary(), False),
        ("i64", pa.int8(), True),
        ("i64", pa.int64(), True),
        ("i64", pa.uint64(), False),
        ("u64", pa.uint8(), True),
        ("u64", pa.uint64(), True),
        ("u64", pa.int64(), False),
        ("f64", pa.float32(), True),
        ("f64", pa.float64(), True),
        ("f64", pa.float16(), False),
        ("f64", pa.decimal128(10, 2), False),
        ("bool", pa.bool_(), True),
        ("datetime", pa.timestamp("s"), True),
        ("datetime", pa.timestamp("ns", "Europe/Paris"), True),
        ("datetime", pa.date32(), True),
        ("datetime", pa.date64(), True),
        ("datetime", pa.int64(), False),
        ("bytes", pa.binary(), True),
        ("bytes", pa.large_binary(), True),
        ("json", pa.struct([("a", pa.int64())]), False),
        ("json", pa.list_(pa.int64()), False),
        ("json", pa.map_(pa.string(), pa.int64()), False),
        ("ip", pa.string(), False),
        ("text", pa.list_(pa.string()), False),
    ],
)
def test_decodable(tantivy_type: str, arrow_type: pa.DataType, expected: bool) -> None:
    assert decodable(tantivy_type, arrow_type) is expected


def test_hand_built_blocks_match_tantivys(tmp_path: Path) -> None:
    """The test's block builder writes what Tantivy writes (so the hand-built cases are real shapes)."""
    schema = tantivy.SchemaBuilder()
    schema.add_text_field("name", stored=True)
    schema.add_integer_field("n", stored=True)
    index = tantivy.Index(schema.build(), path=str(tmp_path))
    writer = index.writer(15_000_000, 1)
    writer.add_document(tantivy.Document(name=["héllo"], n=[-3]))
    writer.add_document(tantivy.Document(n=[7]))
    writer.commit()
    writer.wait_merging_threads()
    (store,) = tmp_path.glob("*.store")
    (real,) = store_blocks(store.read_bytes())
    orders = [
        block(doc((0, text("héllo")), (1, i64(-3))), doc((1, i64(7)))),
        block(doc((1, i64(-3)), (0, text("héllo"))), doc((1, i64(7)))),
    ]
    assert real in orders


@pytest.mark.parametrize("mixed", [False, True], ids=["one field a step", "fields differ a step"])
def test_lengths_of_every_vint_width(mixed: bool) -> None:
    """Text lengths of one to four VInt bytes, in steps where every document reads the same field
    and in steps where they differ (some documents have an unwanted field first)."""
    lengths = [0, 1, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152]
    values = [("ab" * length)[:length] for length in lengths]
    docs = [
        doc(*([(4, i64(k))] if mixed and k % 3 == 0 else []), (0, text(value)), (2, i64(k)))
        for k, value in enumerate(values)
    ]
    got = decode_blocks([block(*docs[:3]), block(*docs[3:])], COLUMNS[:2], SOURCE)
    assert got.column("name").to_pylist() == values
    assert got.column("n").to_pylist() == list(range(len(values)))
    picked = decode_docs(block(*docs), np.array([7, 0, 3, 3]), COLUMNS[:2], SOURCE)
    assert picked.column("name").to_pylist() == [values[7], values[0], values[3], values[3]]


def test_damaged_bytes_raise_only_corrupt_split_errors(dict_split: tuple[pa.Table, WrittenSplit]) -> None:
    """Random bytes of a real block overwritten (documents and trailer): it decodes, or raises a
    CorruptSplitError; never another exception."""
    table, written = dict_split
    columns = [replace(c, arrow_type=READ_AS.get(c.name, c.arrow_type)) for c in stored_columns(written, table)]
    real = split_blocks(written)[2]
    rng = np.random.default_rng(11)
    outcomes = {"decoded": 0, "corrupt": 0}
    for _ in range(400):
        damaged = bytearray(real)
        for at in rng.integers(0, len(real), rng.integers(1, 4)):
            damaged[at] = int(rng.integers(0, 256))
        try:
            decode_blocks([bytes(damaged)], columns, SOURCE)
            decode_docs(bytes(damaged), np.array([0, 0]), columns, SOURCE)
            outcomes["decoded"] += 1
        except CorruptSplitError as e:
            assert SOURCE in str(e)
            outcomes["corrupt"] += 1
    assert outcomes["corrupt"] > 100
