"""Split writer: Arrow rows -> one Tantivy index -> one ``.split`` bundle, plus its statistics.

Besides the Tantivy files, the bundle holds a columnar copy of the rows
(``indextables.columns.arrow``, Arrow IPC) and every document carries its row number in a
fast field (``__row``): a search maps hits to row numbers through the fast field and takes
the rows from the columnar copy, never going document by document through the doc store.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import tantivy

from executor_lib.errors import InvalidDataError
from executor_lib.splits.bundle import BundleFooter, write_bundle
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.panics import guarded

ROW_FIELD = "__row"
COLUMNS_MEMBER = "indextables.columns.arrow"
DOC_MAPPING_MEMBER = "indextables.docmapping.json"
STATS_TRUNCATION_LENGTH = 32
_WRITER_HEAP = 256 * 1024 * 1024


@dataclass(frozen=True)
class WrittenSplit:
    path: Path
    footer: BundleFooter
    num_records: int
    uncompressed_size: int
    min_values: dict[str, str]
    max_values: dict[str, str]
    doc_mapping_json: str


@guarded(lambda mapping: f"Tantivy schema of doc mapping {[f.name for f in mapping.fields]}")
def tantivy_schema(mapping: DocMapping) -> Any:
    """The Tantivy schema of a doc mapping, plus the hidden row-number fast field."""
    sb = tantivy.SchemaBuilder()
    for f in mapping.fields:
        if f.type == "text":
            sb.add_text_field(
                f.name, stored=f.stored, tokenizer_name=f.tokenizer or "default", index_option=f.record,
                fast=f.fast,
            )  # fmt: skip
        elif f.type == "json":
            sb.add_json_field(
                f.name, stored=f.stored, tokenizer_name=f.tokenizer or "default", index_option=f.record, fast=f.fast
            )
        elif f.type == "i64":
            sb.add_integer_field(f.name, stored=f.stored, indexed=f.indexed, fast=f.fast)
        elif f.type == "u64":
            sb.add_unsigned_field(f.name, stored=f.stored, indexed=f.indexed, fast=f.fast)
        elif f.type == "f64":
            sb.add_float_field(f.name, stored=f.stored, indexed=f.indexed, fast=f.fast)
        elif f.type == "bool":
            sb.add_boolean_field(f.name, stored=f.stored, indexed=f.indexed, fast=f.fast)
        elif f.type == "datetime":
            sb.add_date_field(f.name, stored=f.stored, indexed=f.indexed, fast=f.fast)
        elif f.type == "bytes":
            sb.add_bytes_field(f.name, stored=f.stored, indexed=f.indexed, fast=f.fast)
        elif f.type == "ip":
            sb.add_ip_addr_field(f.name, stored=f.stored, indexed=f.indexed, fast=f.fast)
    sb.add_unsigned_field(ROW_FIELD, stored=False, indexed=False, fast=True)
    return sb.build()


def _index_ready(table: pa.Table) -> pa.Table:
    """Columns as tantivy's Python API takes them (dates as datetimes)."""
    columns = []
    for col in table.columns:
        if pa.types.is_date(col.type):
            col = col.cast(pa.timestamp("us"))
        columns.append(col)
    return pa.table(columns, names=table.column_names)


def _stats(table: pa.Table, mapping: DocMapping) -> tuple[dict[str, str], dict[str, str]]:
    mins: dict[str, str] = {}
    maxs: dict[str, str] = {}
    for f in mapping.fields:
        col = table.column(f.name)
        t = col.type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t)
                or pa.types.is_date(t) or pa.types.is_timestamp(t)):  # fmt: skip
            continue
        result = pc.min_max(col)
        low, high = result["min"].as_py(), result["max"].as_py()
        if low is None:
            continue
        low_s, high_s = (v.isoformat() if hasattr(v, "isoformat") else str(v) for v in (low, high))
        if pa.types.is_string(t):
            low_s, high_s = low_s[:STATS_TRUNCATION_LENGTH], high_s[:STATS_TRUNCATION_LENGTH]
        mins[f.name], maxs[f.name] = low_s, high_s
    return mins, maxs


@guarded(lambda table, mapping, *a, **k: f"indexing {table.num_rows} rows (columns {table.column_names}) into a split")
def write_split(table: pa.Table, mapping: DocMapping, out_dir: Path, heap_bytes: int | None = None) -> WrittenSplit:
    """Index ``table`` (only the mapping's columns) into ``out_dir/split-<uuid>.split``."""
    data = table.select([f.name for f in mapping.fields])
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="split-", dir=out_dir))
    try:
        schema = tantivy_schema(mapping)
        index = tantivy.Index(schema, path=str(work))
        writer = index.writer(max(heap_bytes or _WRITER_HEAP, 15_000_000), 1)
        has_nulls = any(c.null_count for c in data.columns)
        for row, doc in enumerate(_index_ready(data).to_pylist()):  # row dicts built by Arrow, in C
            if has_nulls:
                doc = {k: v for k, v in doc.items() if v is not None}
            doc[ROW_FIELD] = row
            try:
                writer.add_document(tantivy.Document.from_dict(doc, schema))
            except ValueError as e:  # e.g. "Expected IpAddr type for field ip, got 'x'"
                raise InvalidDataError(f"row {row} of the batch cannot be indexed: {e}") from e
        writer.commit()
        writer.wait_merging_threads()
        files = {p.name: p.read_bytes() for p in sorted(work.iterdir()) if p.is_file() and not p.name.endswith(".lock")}
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, data.schema) as ipc:
            ipc.write_table(data)
        files[COLUMNS_MEMBER] = sink.getvalue().to_pybytes()
        files[DOC_MAPPING_MEMBER] = mapping.to_json().encode()
        path = out_dir / f"split-{uuid.uuid4()}.split"
        footer = write_bundle(files, path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mins, maxs = _stats(data, mapping)
    return WrittenSplit(
        path=path,
        footer=footer,
        num_records=data.num_rows,
        uncompressed_size=footer.footer_start,
        min_values=mins,
        max_values=maxs,
        doc_mapping_json=mapping.to_json(),
    )
