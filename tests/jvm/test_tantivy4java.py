"""Splits both ways between this project and tantivy4java (IndexTables4Spark's search engine, the real native
library from Maven Central, driven by this project's own peer ``harness/tantivy4java_peer``):

- we write (``executor_lib.create_table`` + ``write_and_upload``, every column type), tantivy4java's
  SplitSearcher opens each split by its AddAction (path, footer offsets, doc mapping) and answers the query
  set: hit counts and every hit's stored values equal this project's ``search_table`` answers;
- tantivy4java writes (IndexWriter + ``QuickwitSplit.convertIndexFromPath``), we commit its splits into a
  table with an AddAction each and read them back: every row, and the same answers to the query set.

Answers are compared per row id (``id``), value by value, after normalizing both sides to Python values."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib import AddAction
from harness import tantivy4java_peer as t4j
from tests.conftest import BUCKET, s3_options
from tests.jvm.conftest import record_tantivy4java

pytestmark = pytest.mark.jvm

UTC = datetime.timezone.utc

# --- we write: every column type this project's writer stores in a split

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.string()),
        ("txt", pa.string()),
        ("i32", pa.int32()),
        ("i16", pa.int16()),
        ("i8", pa.int8()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("dec", pa.decimal128(10, 2)),
        ("b", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("bin", pa.binary()),
        ("st", pa.struct([("name", pa.string()), ("n", pa.int32())])),
    ]
)
OPTIONS = {"spark.indextables.indexing.typemap.txt": "text"}
_WORDS = ["alpha", "beta", "gamma", None]
_MESSAGES = [
    "upstream timeout while calling payments",
    "connection reset by peer",
    "request served ok",
    "disk error on volume and timeout",
    "retry scheduled after connection reset",
]


def rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "s": _WORDS[i % 4],
            "txt": f"{_MESSAGES[i % 5]} host{i % 7}",
            "i32": i % 40 - 5,
            "i16": i % 300 - 100,
            "i8": i % 200 - 100,
            "f32": (i % 16) * 0.5,
            "f64": i / 4 - 3.0,
            "dec": decimal.Decimal(i * 7 % 1000) / 100,
            "b": i % 3 == 0,
            "d": datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 3),
            "ts": datetime.datetime(2024, 1, 1, tzinfo=UTC) + datetime.timedelta(seconds=i * 61, microseconds=i),
            "bin": bytes([i % 256, 7, 0]) if i % 5 else None,
            "st": {"name": f"user{i % 9}", "n": i % 11} if i % 6 else None,
        }
        for i in range(start, start + n)
    ]


# The query set (Tantivy query syntax, which both engines parse): each finds rows in each table made.
QUERIES = [
    "*",
    "id:7",
    "s:alpha",
    "s:beta OR s:gamma",
    "txt:timeout",
    'txt:"connection reset"',
    "i32:[0 TO 10]",
    "i16:{-50 TO 50}",
    "i8:[* TO 0]",
    "f32:[1.0 TO 3.0]",
    "f64:[0 TO 5.5]",
    "dec:[1 TO 3]",
    "b:true",
    "b:false AND s:alpha",
    "txt:timeout AND NOT s:gamma",
    "(s:alpha OR s:beta) AND i32:[0 TO 20]",
    "d:[2024-01-02T00:00:00Z TO 2024-01-03T00:00:00Z}",
    "ts:[2024-01-01T00:10:00Z TO 2024-01-01T00:40:00Z]",
    "st.name:user3",
    "st.n:[2 TO 4]",
]


@pytest.fixture(scope="module")
def peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[t4j.Tantivy4JavaPeer]:
    """One tantivy4java peer for the module (jars fetched by scripts/tantivy4java.sh when missing)."""
    if t4j.missing():
        try:
            t4j.install()
        except t4j.Tantivy4JavaBlocked:
            record_tantivy4java(blocked=f"tantivy4java cannot be fetched: {t4j.blocked_reason()}")
            pytest.skip(f"tantivy4java cannot be fetched: {t4j.blocked_reason()}")
    with t4j.Tantivy4JavaPeer(tmp_path_factory.mktemp("tantivy4java")) as p:
        record_tantivy4java(startup_s=p.startup_s)
        yield p


# --- normalizing both sides' values


def norm(value: Any, arrow_type: pa.DataType) -> Any:
    """A stored value as both sides are compared: ints, floats, bools, text, bytes, UTC datetimes, dicts."""
    if value is None:
        return None
    if pa.types.is_date(arrow_type):
        if isinstance(value, datetime.datetime):
            return value.astimezone(UTC)
        return datetime.datetime.combine(value, datetime.time(), UTC)
    if pa.types.is_timestamp(arrow_type):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if pa.types.is_decimal(arrow_type) or pa.types.is_floating(arrow_type):
        return float(value)
    if pa.types.is_struct(arrow_type):  # tantivy4java gives a JSON field's stored value as JSON text
        return {k: v for k, v in dict(json.loads(value) if isinstance(value, str) else value).items() if v is not None}
    return value


def ours_by_id(table: pa.Table, schema: pa.Schema) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for row in table.to_pylist():
        out[row["id"]] = {name: norm(row.get(name), schema.field(name).type) for name in schema.names}
    return out


def theirs_by_id(docs: list[dict[str, list[Any]]], schema: pa.Schema) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for doc in docs:
        row = {}
        for name in schema.names:
            values = doc.get(name) or []
            row[name] = norm(values[0] if values else None, schema.field(name).type)
        out[row["id"]] = row
    return out


def compare(label: str, ours: dict[int, dict[str, Any]], theirs: dict[int, dict[str, Any]], out: list[str]) -> None:
    if sorted(ours) != sorted(theirs):
        only_ours, only_theirs = sorted(set(ours) - set(theirs)), sorted(set(theirs) - set(ours))
        out.append(f"{label}: ids only this project found {only_ours[:10]}, only tantivy4java {only_theirs[:10]}")
    for i in sorted(set(ours) & set(theirs)):
        for name, value in ours[i].items():
            if theirs[i].get(name) != value:
                out.append(
                    f"{label}: id {i} column {name}: this project {value!r}, tantivy4java {theirs[i].get(name)!r}"
                )


def their_answer(
    peer: t4j.Tantivy4JavaPeer,
    table: str,
    snapshot: executor_lib.Snapshot,
    query: str,
    storage: dict[str, Any] | None = None,
) -> tuple[list[dict[str, list[Any]]], int, int]:
    """tantivy4java's hits for ``query`` over every split of the snapshot (each opened by its AddAction):
    the hits' stored fields, the sum of the hit counts and the bytes values given as debug text."""
    docs: list[dict[str, list[Any]]] = []
    count = as_text = 0
    for add in sorted(snapshot.files, key=lambda a: a.path):
        assert add.footer_start_offset is not None and add.footer_end_offset is not None
        answer = peer.search(
            f"{table.rstrip('/')}/{add.path}",
            add.footer_start_offset,
            add.footer_end_offset,
            snapshot.doc_mapping(add),
            query,
            num_docs=add.num_records or 0,
            storage=storage,
        )
        docs += answer.docs
        count += answer.count
        as_text += answer.bytes_as_text
    return docs, count, as_text


def compare_query_set(
    peer: t4j.Tantivy4JavaPeer,
    table: str,
    label: str,
    schema: pa.Schema,
    queries: list[str],
    storage: dict[str, Any] | None = None,
) -> tuple[int, list[str], int]:
    """Both engines answer each query on the table: (queries compared, differences, bytes given as text)."""
    log = executor_lib.open_log(table, **(storage or {}))
    snapshot = log.snapshot()
    differences: list[str] = []
    as_text = 0
    for query in queries:
        ours = ours_by_id(executor_lib.search_table(log.store, snapshot, query, executor_lib.default_cache()), schema)
        assert ours, f"{label} {query!r}: this project finds no row (the query set must find rows)"
        try:
            docs, count, n_text = their_answer(peer, table, snapshot, query, storage)
        except t4j.Tantivy4JavaJobError as e:
            differences.append(f"{label} {query!r}: tantivy4java failed: {e.error}")
            continue
        as_text += n_text
        if count != len(ours):
            differences.append(f"{label} {query!r}: this project {len(ours)} hits, tantivy4java {count}")
        compare(f"{label} {query!r}", ours, theirs_by_id(docs, schema), differences)
    return len(queries), differences, as_text


def make_table(path: str, batches: list[list[dict[str, Any]]], storage: dict[str, Any] | None = None) -> None:
    log = executor_lib.create_table(path, SCHEMA, **(storage or {}))
    mapping = executor_lib.mapping_for(SCHEMA, OPTIONS)
    for batch in batches:
        log.commit([executor_lib.write_and_upload(log.store, pa.Table.from_pylist(batch, schema=SCHEMA), mapping)])


def test_tantivy4java_reads_what_we_write(
    peer: t4j.Tantivy4JavaPeer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    path = str(tmp_path / "t")
    batches = [rows(30), rows(25, start=30), rows(20, start=55)]
    make_table(path, batches)
    snapshot = executor_lib.open_log(path).snapshot()
    assert len(snapshot.files) == 3
    compared, differences, as_text = compare_query_set(peer, path, "we wrote, tantivy4java read:", SCHEMA, QUERIES)
    record_tantivy4java(request, splits=len(snapshot.files), queries=compared, differences=differences)
    if as_text:
        record_tantivy4java(request, notes=[f"tantivy4java {t4j.VERSION} returns stored bytes as debug text"])
    assert not differences, "\n".join(differences)


@pytest.mark.s3
def test_tantivy4java_reads_what_we_write_on_s3(
    peer: t4j.Tantivy4JavaPeer, moto_server: Any, request: pytest.FixtureRequest
) -> None:
    storage = s3_options(moto_server)
    path = f"s3://{BUCKET}/tantivy4java/{uuid.uuid4().hex}"
    make_table(path, [rows(40), rows(35, start=40)], storage)
    snapshot = executor_lib.open_log(path, **storage).snapshot()
    compared, differences, _ = compare_query_set(
        peer, path, "we wrote on S3, tantivy4java read:", SCHEMA, QUERIES, storage
    )
    record_tantivy4java(request, splits=len(snapshot.files), queries=compared, differences=differences)
    assert not differences, "\n".join(differences)


# --- tantivy4java writes, we read

# The columns tantivy4java writes (its schema), the table's Arrow schema and the doc mapping are its own:
# the AddAction carries the doc mapping JSON tantivy4java made.
T4J_FIELDS: list[dict[str, Any]] = [
    {"name": "id", "type": "i64", "fast": True},
    {"name": "s", "type": "text", "tokenizer": "raw", "fast": True},
    {"name": "txt", "type": "text", "tokenizer": "default"},
    {"name": "i32", "type": "i64", "fast": True},
    {"name": "f64", "type": "f64", "fast": True},
    {"name": "b", "type": "bool", "fast": True},
    {"name": "d", "type": "date", "fast": True},
    {"name": "ts", "type": "date", "fast": True},
    {"name": "bin", "type": "bytes"},
]
T4J_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.string()),
        ("txt", pa.string()),
        ("i32", pa.int32()),
        ("f64", pa.float64()),
        ("b", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("bin", pa.binary()),
    ]
)
T4J_QUERIES = [
    q
    for q in QUERIES
    if not any(q.startswith(c) or f" {c}" in q or f"({c}" in q for c in ("i16", "i8", "f32", "dec", "st."))
]


def tantivy_json(row: dict[str, Any]) -> dict[str, Any]:
    """A row as a tantivy JSON document (dates RFC 3339, bytes base64, nulls left out)."""
    doc: dict[str, Any] = {}
    for name in T4J_SCHEMA.names:
        value = row[name]
        if value is None:
            continue
        if isinstance(value, datetime.datetime):
            value = value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        elif isinstance(value, datetime.date):
            value = f"{value.isoformat()}T00:00:00Z"
        elif isinstance(value, bytes):
            value = base64.b64encode(value).decode()
        doc[name] = value
    return doc


def test_we_read_what_tantivy4java_writes(
    peer: t4j.Tantivy4JavaPeer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    path = tmp_path / "t"
    executor_lib.create_table(str(path), T4J_SCHEMA)
    (path / "splits").mkdir()
    batches = [rows(30), rows(25, start=30)]
    adds = []
    for batch in batches:
        name = f"splits/t4j-{uuid.uuid4().hex}.split"
        made = tmp_path / Path(name).name
        meta = peer.write(made, T4J_FIELDS, [tantivy_json(r) for r in batch])
        assert meta["num_docs"] == len(batch)
        shutil.copy(made, path / name)
        adds.append(
            AddAction(
                path=name,
                partition_values={},
                size=made.stat().st_size,
                modification_time=int(time.time() * 1000),
                data_change=True,
                num_records=int(meta["num_docs"]),
                footer_start_offset=int(meta["footer_start"]),
                footer_end_offset=int(meta["footer_end"]),
                has_footer_offsets=True,
                doc_mapping_json=str(meta["doc_mapping_json"]),
                uncompressed_size_bytes=int(meta["uncompressed_size_bytes"]),
            )
        )
    log = executor_lib.open_log(str(path))
    log.commit(adds)
    snapshot = log.snapshot()
    # every row, as written
    everything = ours_by_id(
        executor_lib.search_table(log.store, snapshot, None, executor_lib.default_cache()), T4J_SCHEMA
    )
    expected = {
        r["id"]: {n: norm(r[n], T4J_SCHEMA.field(n).type) for n in T4J_SCHEMA.names} for b in batches for r in b
    }
    differences: list[str] = []
    compare("tantivy4java wrote, we read every row:", expected, everything, differences)
    compared, more, _ = compare_query_set(peer, str(path), "tantivy4java wrote, both read:", T4J_SCHEMA, T4J_QUERIES)
    differences += more
    record_tantivy4java(request, splits=len(adds), queries=compared + 1, differences=differences)
    assert not differences, "\n".join(differences)


def test_the_doc_mapping_tantivy4java_writes_is_ours(peer: t4j.Tantivy4JavaPeer, tmp_path: Path) -> None:
    """tantivy4java's doc mapping JSON for a split reads as this project's DocMapping, field for field."""
    meta = peer.write(tmp_path / "one.split", T4J_FIELDS, [tantivy_json(r) for r in rows(3)])
    mapping = executor_lib.DocMapping.from_json(str(meta["doc_mapping_json"]))
    assert [f.name for f in mapping.fields] == [f["name"] for f in T4J_FIELDS]
    ours = json.loads(
        executor_lib.mapping_for(T4J_SCHEMA, {"spark.indextables.indexing.typemap.txt": "text"}).to_json()
    )
    theirs = {f["name"]: f for f in json.loads(str(meta["doc_mapping_json"]))}
    for field in ours:
        assert theirs[field["name"]]["type"] == field["type"], field["name"]
