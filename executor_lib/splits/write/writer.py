"""Split writer: Arrow rows -> one Tantivy index -> one ``.split`` bundle, plus its statistics.

Where the rows are kept, once (PROTOCOL.md §15):

* **in the doc stores** (``indextables.docstore-rows.arrow`` names the stored columns' Arrow
  types), when every stored column's values come back exactly from Tantivy's stored values
  (``stored_docs.decodable``: strings, integers, floats, booleans, timestamps, dates, bytes). The
  doc stores are re-written with zstd (``doc_store.to_zstd``), which the JVM reads too; rows are
  read from them by ``store_rows.DocStoreRows``, row ``n`` being the ``n``-th document;
* **in a columnar copy** otherwise (``indextables.columns.arrow``, zstd-compressed Arrow IPC, see
  ``columnar_copy``), and for companion splits' locators: every document carries its row number
  in a fast field (``__row``), and a search maps hits to rows through it.

``SplitBuilder`` takes the rows batch by batch: each batch becomes one JSON document per row,
built column-wise by Arrow compute (no per-row Python dicts), handed to Tantivy's
``add_json``, and is appended to the columnar copy on disk, so a builder holds one batch
in Python plus Tantivy's indexing heap, never the whole split. Tantivy indexes on its own
threads while Python builds the next batch. Columns the JSON form cannot carry (binary,
nested, decimal; non-finite floats) take the slower ``Document.from_dict`` path, for that
batch only.
"""

from __future__ import annotations

import datetime
import json
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tantivy

from executor_lib.format.quickwit.bundle import ROWS_IN_STORE_MEMBER, BundleFooter, write_bundle
from executor_lib.format.store.blocks import to_zstd
from executor_lib.format.store.documents import decodable
from executor_lib.format.termdict.convert import with_sstable_terms
from executor_lib.log.pruning import timestamp_key
from executor_lib.splits.doc_mapping import ARRAY_KEY, DocMapping, FieldMapping  # ARRAY_KEY: also re-exported
from executor_lib.splits.panics import guarded
from executor_lib.splits.rows.columnar import ColumnarCopy, ColumnarCopyWriter, PartedCopy
from executor_lib.splits.tokenizers import analyzer_name
from executor_lib.splits.tokenizers import register as register_analyzers
from executor_lib.table_schema import column_name_problem
from indextables_contract.errors import ConfigError, CorruptSplitError, InvalidDataError

ROW_FIELD = "__row"
COLUMNS_MEMBER = "indextables.columns.arrow"
DOC_MAPPING_MEMBER = "indextables.docmapping.json"
SEGMENTS_MEMBER = "indextables.segments.json"  # merged splits: row offset of each segment (see splits.write.merge)
SEGMENTED_COLUMNS_MEMBER = "indextables.columns-by-segment.arrow"  # merged splits' columnar copy
# a merged split's columnar copy as the sources' copies, each a part: "<prefix><5 digits>.arrow"
COLUMN_PART_PREFIX = "indextables.columns-by-segment."
_COLUMN_PART = re.compile(re.escape(COLUMN_PART_PREFIX) + r"(\d+)\.arrow")
STATS_TRUNCATION_LENGTH = 32
_WRITER_HEAP = 256 * 1024 * 1024
MIN_HEAP_PER_THREAD = 15_000_000  # Tantivy refuses less per indexing thread
FEED_BATCH_ROWS = 65_536  # rows turned into Python strings at once


@dataclass(frozen=True)
class WrittenSplit:
    path: Path
    footer: BundleFooter
    num_records: int
    uncompressed_size: int
    min_values: dict[str, str]
    max_values: dict[str, str]
    doc_mapping_json: str


def in_index(f: FieldMapping) -> bool:
    """Whether the field is in the Tantivy index. Store-only text and json fields are not: Tantivy cannot
    store them without indexing them, and this project reads stored values from the columnar copy."""
    return f.indexed or f.fast or f.type not in ("text", "json")


def in_columnar_copy(f: FieldMapping) -> bool:
    """Whether the field's values are in the columnar copy: index-only fields' are not."""
    return f.stored


def rows_fit_doc_store(mapping: DocMapping, schema: pa.Schema) -> bool:
    """Whether the rows of ``schema`` are kept in the doc stores alone (no columnar copy): every
    stored column is in the index and its stored values give back its Arrow values exactly."""
    stored = [f for f in mapping.fields if in_columnar_copy(f)]
    return bool(stored) and all(
        in_index(f) and f.name in schema.names and decodable(f.type, schema.field(f.name).type) for f in stored
    )


def rows_schema_member(schema: pa.Schema) -> bytes:
    """The ``indextables.docstore-rows.arrow`` member: ``schema`` as an Arrow IPC stream of no batch."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema):
        pass
    return sink.getvalue().to_pybytes()


@guarded(lambda mapping, *a, **k: f"Tantivy schema of doc mapping {[f.name for f in mapping.fields]}")
def tantivy_schema(mapping: DocMapping, row_field: bool = True) -> Any:
    """The Tantivy schema of a doc mapping, plus (``row_field``) the hidden row-number fast field."""
    sb = tantivy.SchemaBuilder()
    for f in mapping.fields:
        if not in_index(f):
            continue
        if f.type == "text":
            sb.add_text_field(
                f.name,
                stored=f.stored,
                tokenizer_name=analyzer_name(f.tokenizer or "default", f.max_token_length),
                index_option=f.record,
                fast=f.fast,
            )
        elif f.type == "json":
            sb.add_json_field(
                f.name,
                stored=f.stored,
                tokenizer_name=analyzer_name(f.tokenizer or "default", f.max_token_length),
                index_option=f.record,
                fast=f.fast,
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
    if row_field:
        sb.add_unsigned_field(ROW_FIELD, stored=False, indexed=False, fast=True)
    return sb.build()


def _coerce_floats(index_dir: Path) -> None:
    """Set ``coerce`` on the f64 fields of a new index's ``meta.json``, so that Tantivy parses their
    JSON values from strings, with Rust's exact ``f64::from_str``. The ``tantivy`` package parses
    JSON numbers with serde_json's fast path (``significand / 10^k``), which is one ulp off for about
    one float64 value in nine (tested): such values were indexed, stored and aggregated wrong, and
    an equality query on them found nothing. ``coerce`` changes nothing for readers."""
    meta_path = index_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    for field in meta["schema"]:
        if field.get("type") == "f64":
            field.setdefault("options", {})["coerce"] = True
    meta_path.write_text(json.dumps(meta))


def _doc_store_compression(index_dir: Path, compression: str) -> str:
    """Set the ``docstore_compression`` of the index's ``meta.json``; the one it replaces. A split is
    built with ``"none"``: ``to_zstd`` re-compresses every doc store block anyway, so Tantivy's lz4
    (compressing each 16 KB block while indexing, then decompressed by ``to_zstd``) was work thrown
    away. The block boundaries do not change, so the zstd doc store is the same bytes; the setting
    is put back before the bundle is written, so its ``meta.json`` says what it said before."""
    meta_path = index_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    settings = meta.setdefault("index_settings", {})
    previous = str(settings.get("docstore_compression", "lz4"))
    settings["docstore_compression"] = compression
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")  # as Tantivy writes it (serde_json's pretty form)
    return previous


def writer_heap(heap_bytes: int | None, threads: int) -> int:
    """Tantivy's indexing heap for ``threads`` threads: the setting (default 256 MB), at least 15 MB a thread."""
    return max(heap_bytes or _WRITER_HEAP, MIN_HEAP_PER_THREAD * threads)


def _index_ready(table: pa.Table | pa.RecordBatch) -> pa.Table:
    """Columns as tantivy's Python API takes them (dates as datetimes)."""
    columns = []
    for col in table.columns:
        if pa.types.is_date(col.type):
            col = col.cast(pa.timestamp("us"))
        columns.append(col)
    return pa.table(columns, names=table.column_names)


# --- JSON documents built column-wise ---------------------------------------------------------


def _value_bytes(col: pa.Array) -> np.ndarray:
    """The bytes of a string array's values (of null slots too), as a numpy view (no copy)."""
    if len(col) == 0 or col.buffers()[2] is None:
        return np.zeros(0, np.uint8)
    offsets = np.frombuffer(col.buffers()[1], np.int32, len(col) + 1, col.offset * 4)
    return np.frombuffer(col.buffers()[2], np.uint8)[offsets[0] : offsets[-1]]


def _needs_escape(col: pa.Array) -> bool:
    """Whether a value of the string array holds a backslash, a double quote or a control
    character: three vectorized passes over its bytes (about 10x Arrow's regex match)."""
    data = _value_bytes(col)
    return bool(len(data)) and (bool(data.min() < 0x20) or bool((data == 0x22).any()) or bool((data == 0x5C).any()))


def _escaped(col: pa.Array) -> pa.Array:
    """String values as the inside of JSON string literals: ``col`` itself when no value holds a
    character to escape (one scan; log text rarely does), else escaped by three more passes."""
    if not _needs_escape(col):
        return col
    col = pc.replace_substring(col, "\\", "\\\\")
    col = pc.replace_substring(col, '"', '\\"')
    if pc.any(pc.match_substring_regex(col, "[\x00-\x1f]")).as_py():
        for code in range(32):
            col = pc.replace_substring(col, chr(code), f"\\u{code:04x}")
    return col


def _json_fragment(name: str, col: pa.Array) -> pa.Array | None:
    """``"name":value`` per row (null where the value is null), or None if JSON cannot carry this column."""
    t = col.type
    key = json.dumps(name) + ":"
    if pa.types.is_string(t) or pa.types.is_large_string(t):  # a batch's strings: well under 2 GB
        return pc.binary_join_element_wise(key + '"', _escaped(col.cast(pa.string())), '"', "")
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        plain = col.cast(pa.timestamp("us", "UTC")).cast(pa.timestamp("us"))  # UTC wall time
        text = pc.replace_substring(plain.cast(pa.string()), " ", "T", max_replacements=1)
        return pc.binary_join_element_wise(key + '"', text, 'Z"', "")
    if pa.types.is_floating(t):
        if not pc.all(pc.is_finite(col)).as_py():
            return None  # NaN and infinities have no JSON form
        # a string (shortest round-trip digits), which a coerced f64 field parses exactly (_coerce_floats)
        return pc.binary_join_element_wise(key + '"', col.cast(pa.string()), '"', "")
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return pc.binary_join_element_wise(key, col.cast(pa.string()), "")
    return None


def json_documents(batch: pa.RecordBatch, first_row: int | None) -> pa.Array | None:
    """One JSON object per row of ``batch`` (nulls left out, ``__row`` numbered from ``first_row``;
    None: no ``__row``), built by Arrow compute; None if a column needs the ``Document.from_dict`` path."""
    fragments = []
    for name, col in zip(batch.schema.names, batch.columns, strict=True):
        fragment = _json_fragment(name, col)
        if fragment is None:
            return None
        fragments.append(fragment)
    if first_row is not None:
        rows = pa.array(range(first_row, first_row + batch.num_rows), pa.int64()).cast(pa.string())
        fragments.append(pc.binary_join_element_wise(f'"{ROW_FIELD}":', rows, ""))
    body = pc.binary_join_element_wise(*fragments, ",", null_handling="skip")
    return pc.binary_join_element_wise("{", body, "}", "")


RAW_KEY = "_raw"  # a JSON-string value that is not JSON: {"_raw": text} (IndexTables4Spark's fallback)


def _needs_json_conversion(t: pa.DataType) -> bool:
    """Whether values of type ``t`` in a JSON field need ``json_value`` (maps, lists, JSON text)."""
    if pa.types.is_struct(t):
        return any(_needs_json_conversion(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return not pa.types.is_struct(t.value_type) or _needs_json_conversion(t.value_type)
    return pa.types.is_map(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


def json_value(value: Any, t: pa.DataType, top: bool = True) -> Any:
    """A column value (as ``to_pylist`` gives it) as the object a Tantivy JSON field indexes, as
    IndexTables4Spark builds it: a map becomes an object with its keys as text, a list of scalars at
    the top ``{"_values": [...]}`` (a list of structs stays a list of objects: Tantivy indexes each),
    and a string (a column with ``typemap.<col>=json``) is parsed: an object as itself, any other
    JSON value as ``{"_values": ...}``, text that is not JSON as ``{"_raw": text}``.

    Example: ``json_value([("color", "red")], pa.map_(pa.string(), pa.string()))`` is ``{"color": "red"}``.
    """
    if value is None:
        return None
    if pa.types.is_map(t):
        return {str(k): json_value(v, t.item_type, False) for k, v in value}
    if pa.types.is_struct(t):
        fields = [t.field(i) for i in range(t.num_fields)]
        return {f.name: json_value(value.get(f.name), f.type, False) for f in fields}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        items = [json_value(v, t.value_type, False) for v in value]
        return {ARRAY_KEY: items} if top and not pa.types.is_struct(t.value_type) else items
    if top and (pa.types.is_string(t) or pa.types.is_large_string(t)):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {RAW_KEY: value}
        return parsed if isinstance(parsed, dict) else {ARRAY_KEY: parsed if isinstance(parsed, list) else [parsed]}
    return value


def column_part_member(index: int) -> str:
    """The name of part ``index`` of a parted columnar copy (``columnar_copy.PartedCopy``)."""
    return f"{COLUMN_PART_PREFIX}{index:05d}.arrow"


def columns_members(footer: BundleFooter) -> list[str] | None:
    """The members of the split's columnar copy, in row order: one (per-split row numbers, or by
    segment in a merged split), or a merged split's parts; None: a JVM split (no copy)."""
    for name in (COLUMNS_MEMBER, SEGMENTED_COLUMNS_MEMBER):
        if name in footer.files:
            return [name]
    parts = sorted((int(m.group(1)), name) for name in footer.files if (m := _COLUMN_PART.fullmatch(name)))
    return [name for _, name in parts] or None


def open_columns(split: Path, footer: BundleFooter, output: pa.Schema | None = None) -> ColumnarCopy | PartedCopy:
    """The columnar copy of the local split, memory-mapped (``ColumnarCopy``, or a ``PartedCopy``
    of its parts). CorruptSplitError if it has none (a JVM split)."""
    members = columns_members(footer)
    if members is None:
        raise CorruptSplitError(f"{split}: the split has no columnar copy")
    copies = [ColumnarCopy.open(split, footer, member, output) for member in members]
    return copies[0] if len(copies) == 1 else PartedCopy(copies, str(split))


def mapped_columns(split: Path, footer: BundleFooter) -> pa.Table:
    """Every row of the local split's columnar copy (a search reads by batch through ``open_columns``)."""
    return open_columns(split, footer).read_all()


# --- building one split ------------------------------------------------------------------------


class SplitBuilder:
    """Index rows batch by batch into one split; ``finish`` writes the bundle.

    Memory: one batch at a time in Python, Tantivy's heap (``heap_bytes``), and the columnar
    copy streamed to a file in the work directory (at most one copy batch held back, see
    ``columnar_copy``). Index-only columns are indexed but left out
    of the columnar copy; store-only text and json columns go to the copy only."""

    def __init__(
        self,
        mapping: DocMapping,
        out_dir: Path,
        heap_bytes: int | None = None,
        threads: int = 1,
        copy_columns: list[str] | None = None,
        columnar_copy: bool | None = None,
    ) -> None:
        """``copy_columns``: the columns of the rows given that the columnar copy holds instead of the
        mapping's stored fields (a companion split's source locators, ``splits.rows.companion``).
        ``columnar_copy``: keep the rows in a columnar copy (True), or in the doc stores where
        every stored column fits them (None, the default; ``rows_fit_doc_store``)."""
        problems = [p for p in (column_name_problem(f.name) for f in mapping.fields) if p is not None]
        if problems:  # a doc mapping built by hand (mapping_for checks the table's columns)
            raise ConfigError(f"split writer: doc mapping {[f.name for f in mapping.fields]}: {problems[0]}")
        self.mapping = mapping
        self.extra_columns = [c for c in copy_columns or () if mapping.field(c) is None]
        self.columns = [f.name for f in mapping.fields] + self.extra_columns
        self.indexed_columns = [f.name for f in mapping.fields if in_index(f)]
        self.copied_columns = (
            list(copy_columns) if copy_columns is not None else [f.name for f in mapping.fields if in_columnar_copy(f)]
        )
        self.json_fields = {f.name: f.type == "json" and in_index(f) for f in mapping.fields}
        self.has_json_strings = False  # set from the first rows: a string column indexed as JSON
        self._extremes: list[pa.Table] = []
        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="split-", dir=out_dir))
        self.index_dir = self.work / "index"
        self.index_dir.mkdir()
        self.heap_bytes, self.threads = heap_bytes, max(1, threads)
        self._doc_store_compression = "lz4"  # the new index's setting, put back in its meta.json (finish)
        self.schema: Any = None  # the Tantivy schema, and its writer, made with the first rows (_start)
        self.writer: Any = None
        self.columns_path = self.work / COLUMNS_MEMBER
        self.copy_given = copy_columns is not None or bool(columnar_copy)
        self._copy: ColumnarCopyWriter | None = None
        self._rows_schema: pa.Schema | None = None  # the rows kept in the doc stores: their schema
        self.num_rows = 0
        self.nbytes = 0

    @guarded(lambda self, rows: f"indexing {rows.num_rows} rows (columns {rows.column_names}) into a split")
    def add(self, rows: pa.Table | pa.RecordBatch) -> None:
        """Index ``rows`` (the mapping's columns are taken; others are ignored) and append them to the copy."""
        data = rows.select(self.columns)
        if self._copy is None:
            copied = data.select(self.copied_columns).schema
            if not self.copy_given and rows_fit_doc_store(self.mapping, copied):
                self._rows_schema = copied
            self._copy = ColumnarCopyWriter(self.columns_path, copied)
            self._start()
            self.has_json_strings = any(
                self.json_fields.get(f.name) and (pa.types.is_string(f.type) or pa.types.is_large_string(f.type))
                for f in data.schema
            )
        copy = self._copy
        batches = data.to_batches(FEED_BATCH_ROWS) if isinstance(data, pa.Table) else [data]
        for batch in batches:
            for start in range(0, batch.num_rows, FEED_BATCH_ROWS):
                self._add_batch(batch.slice(start, FEED_BATCH_ROWS), copy)

    def _start(self) -> None:
        """The Tantivy index and its writer: with the hidden ``__row`` field only when the rows go to
        a columnar copy (rows kept in the doc stores are document ordinals, ``store_rows``)."""
        self.schema = tantivy_schema(self.mapping, row_field=self._rows_schema is None)
        tantivy.Index(self.schema, path=str(self.index_dir))
        _coerce_floats(self.index_dir)
        self._doc_store_compression = _doc_store_compression(self.index_dir, "none")
        index = register_analyzers(tantivy.Index.open(str(self.index_dir)), self.mapping.fields)
        self.writer = index.writer(writer_heap(self.heap_bytes, self.threads), self.threads)

    def _add_batch(self, batch: pa.RecordBatch, copy: ColumnarCopyWriter) -> None:
        if batch.num_rows == 0:
            return
        indexed = batch.select(self.indexed_columns)
        first_row = self.num_rows if self._rows_schema is None else None  # no __row: rows in the doc stores
        documents = None if self.has_json_strings else json_documents(indexed, first_row)
        if documents is None:
            self._add_dicts(indexed)
        else:
            self._add_json(documents.to_pylist())
        # Tantivy indexes the batch meanwhile, on its own threads
        if self._rows_schema is None:
            copy.write(batch.select(self.copied_columns))
        self._extremes.append(_extremes(batch, self.mapping))
        self.num_rows += batch.num_rows
        self.nbytes += batch.nbytes

    def _add_json(self, documents: list[str]) -> None:
        add = self.writer.add_json
        row = self.num_rows
        try:
            for row, document in enumerate(documents, self.num_rows):  # noqa: B007 (row names a failure)
                add(document)
        except ValueError as e:  # e.g. "The field '"ip"' could not be parsed: ..."
            raise InvalidDataError(f"row {row} of the batch cannot be indexed: {e}") from e

    def _add_dicts(self, batch: pa.RecordBatch) -> None:
        has_nulls = any(c.null_count for c in batch.columns)
        converted = {
            f.name: f.type for f in batch.schema if self.json_fields.get(f.name) and _needs_json_conversion(f.type)
        }
        for row, doc in enumerate(_index_ready(batch).to_pylist(), self.num_rows):  # row dicts built by Arrow
            if has_nulls:
                doc = {k: v for k, v in doc.items() if v is not None}
            for name, arrow_type in converted.items():
                if name in doc:
                    doc[name] = json_value(doc[name], arrow_type)
            if self._rows_schema is None:
                doc[ROW_FIELD] = row
            try:
                self.writer.add_document(tantivy.Document.from_dict(doc, self.schema))
            except ValueError as e:  # e.g. "Expected IpAddr type for field ip, got 'x'"
                raise InvalidDataError(f"row {row} of the batch cannot be indexed: {e}") from e

    @guarded("finishing a split (Tantivy commit)")
    def finish(
        self,
        name: str | None = None,
        members: dict[str, bytes] | None = None,
        late_members: Callable[[Path], dict[str, bytes]] | None = None,
    ) -> WrittenSplit:
        """Commit the index and write ``out_dir/<name or split-<uuid>.split>`` (plus ``members``, more
        bundle files, and ``late_members(index_dir)``'s, computed from the committed index); the work
        files are removed."""
        try:
            if self._copy is None:
                raise InvalidDataError("split builder: finish() before any rows were added (not even an empty table)")
            self._copy.close()
            self.writer.commit()
            self.writer.wait_merging_threads()
            _doc_store_compression(self.index_dir, self._doc_store_compression)
            index_files: dict[str, bytes | Path] = {
                p.name: p for p in sorted(self.index_dir.iterdir()) if p.is_file() and not p.name.endswith(".lock")
            }
            path = self.out_dir / (name or f"split-{uuid.uuid4()}.split")
            for member, store in list(index_files.items()):  # zstd doc stores: the JVM reads them
                if member.endswith(".store") and isinstance(store, Path):
                    zstd_store = index_files[member] = self.work / f"{member}.zstd"
                    to_zstd(store, zstd_store)
            # SSTable .term for the JVM; read here through FSTs built from it (term_convert)
            files = with_sstable_terms(index_files, str(path))
            if self._rows_schema is None:
                files[COLUMNS_MEMBER] = self.columns_path
            else:
                files[ROWS_IN_STORE_MEMBER] = rows_schema_member(self._rows_schema)
            files[DOC_MAPPING_MEMBER] = self.mapping.to_json().encode()
            files.update(members or {})
            if late_members is not None:
                files.update(late_members(self.index_dir))
            footer = write_bundle(files, path)
            mins, maxs = _stats(pa.concat_tables(self._extremes), self.mapping) if self._extremes else ({}, {})
        finally:
            self.close()
        return WrittenSplit(
            path=path,
            footer=footer,
            num_records=self.num_rows,
            uncompressed_size=footer.footer_start,
            min_values=mins,
            max_values=maxs,
            doc_mapping_json=self.mapping.to_json(),
        )

    def close(self) -> None:
        """Drop the work files (after ``finish``, or to abandon the split)."""
        if self._copy is not None:
            self._copy.abandon()
        self.writer = None
        shutil.rmtree(self.work, ignore_errors=True)


def _has_stats(t: pa.DataType) -> bool:
    """Whether a column gets min/max statistics: the types IndexTables4Spark collects them for
    (``StatisticsCalculator.ELIGIBLE_DATA_TYPES``: int, long, float, double, string, date,
    timestamp; booleans left out). Not byte and short: its reader compares their statistics as text
    (``"10" < "9"``), so a file with them would be skipped wrongly."""
    if pa.types.is_integer(t):
        return t.bit_width >= 32
    return pa.types.is_floating(t) or pa.types.is_string(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)


def _extremes(batch: pa.RecordBatch, mapping: DocMapping) -> pa.Table:
    """Two rows, the minimum and maximum of each column with statistics: the min/max of the
    concatenated extremes of every batch are those of all the rows."""
    columns = {}
    for f in mapping.fields:
        col = batch.column(f.name)
        if _has_stats(col.type):
            columns[f.name] = pa.array(list(_min_max(col)), col.type)
    return pa.table(columns) if columns else pa.table({"_": pa.nulls(2)})


def _min_max(col: pa.Array | pa.ChunkedArray) -> tuple[Any, Any]:
    """A column's minimum and maximum in Spark's order, where NaN is above every number (Arrow's
    ``min_max`` leaves NaN out): a float column holding NaN has the maximum NaN."""
    result = pc.min_max(col)
    low, high = result["min"].as_py(), result["max"].as_py()
    if pa.types.is_floating(col.type) and pc.any(pc.is_nan(col)).as_py():
        high = float("nan")
        low = high if low is None else low
    return low, high


def _stat_text(value: Any) -> str:
    """A statistic as the JVM writes it: a timestamp as microseconds since the epoch (``Long``'s
    text), a date as ISO ``yyyy-mm-dd``, NaN as ``NaN``, anything else as its text."""
    if isinstance(value, float) and value != value:
        return "NaN"  # as Java's Double.toString writes it (and parses it back)
    if isinstance(value, datetime.datetime):
        return str(timestamp_key(value))
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def stat_values(texts: Sequence[str], t: pa.DataType) -> pa.Array:
    """Statistics (``_stat_text``'s, or an earlier version's) read back as a column of type ``t``: a
    timestamp as microseconds, or as the ISO text this project wrote before; ArrowInvalid (or another
    Arrow error) when one does not parse."""
    if not pa.types.is_timestamp(t):
        return pa.array(texts, pa.string()).cast(t)
    micros = [timestamp_key(v) for v in texts]
    if None in micros:
        raise pa.ArrowInvalid(f"a timestamp statistic does not parse: {texts[micros.index(None)]!r}")
    return pa.array(micros, pa.int64()).cast(pa.timestamp("us", t.tz)).cast(t)


def _stats(table: pa.Table, mapping: DocMapping) -> tuple[dict[str, str], dict[str, str]]:
    mins: dict[str, str] = {}
    maxs: dict[str, str] = {}
    for f in mapping.fields:
        if f.name not in table.column_names or not _has_stats(table.column(f.name).type):
            continue
        col = table.column(f.name)
        t = col.type
        low, high = _min_max(col)
        if low is None:
            continue
        low_s, high_s = (_stat_text(v) for v in (low, high))
        if pa.types.is_string(t):
            low_s, high_s = low_s[:STATS_TRUNCATION_LENGTH], high_s[:STATS_TRUNCATION_LENGTH]
        mins[f.name], maxs[f.name] = low_s, high_s
    return mins, maxs


@guarded(lambda table, mapping, *a, **k: f"indexing {table.num_rows} rows (columns {table.column_names}) into a split")
def write_split(
    table: pa.Table,
    mapping: DocMapping,
    out_dir: Path,
    heap_bytes: int | None = None,
    threads: int = 1,
    columnar_copy: bool | None = None,
) -> WrittenSplit:
    """Index ``table`` (only the mapping's columns) into ``out_dir/split-<uuid>.split``
    (``columnar_copy``: as ``SplitBuilder``'s)."""
    builder = SplitBuilder(mapping, out_dir, heap_bytes, threads, columnar_copy=columnar_copy)
    try:
        builder.add(table)
    except BaseException:
        builder.close()
        raise
    return builder.finish()
