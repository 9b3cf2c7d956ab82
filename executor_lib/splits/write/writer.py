"""Split writer: Arrow rows -> one Tantivy index -> one ``.split`` bundle, plus its statistics.

Where the rows are kept, once (PROTOCOL.md §15):

* **in the doc stores** (``indextables.docstore-rows.arrow`` names the stored columns' Arrow
  types), when every stored column's values come back exactly from Tantivy's stored values
  (``stored_docs.decodable``: strings, integers, floats, booleans, timestamps, dates, bytes). The
  doc stores are zstd blocks with frame checksums, which the JVM reads too; rows are read from
  them by ``store_rows.DocStoreRows``, row ``n`` being the ``n``-th document;
* **in a columnar copy** otherwise (``indextables.columns.arrow``, zstd-compressed Arrow IPC, see
  ``columnar_copy``), and for companion splits' locators: every document carries its row number
  in a fast field (``__row``), and a search maps hits to rows through it.

``SplitBuilder`` takes the rows batch by batch and hands each Arrow batch to the native index
writer (``indextables_native.IndexWriter``, ``native/src/writer.rs``), which indexes it in Rust on
Tantivy's threads with the GIL released: no Python object per row. Its commit writes the term
dictionaries as SSTables and compresses the doc stores (``native/src/store.rs``); the columnar
copy is appended on disk batch by batch, so a builder holds one batch in Python plus Tantivy's
indexing heap, never the whole split.
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

import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.format.quickwit.bundle import ROWS_IN_STORE_MEMBER, BundleFooter, write_bundle
from executor_lib.format.store import blocks as store_blocks
from executor_lib.format.store.documents import decodable
from executor_lib.format.termdict.convert import with_sstable_terms
from executor_lib.log.files.pruning import timestamp_key
from executor_lib.splits.doc_mapping import DocMapping, FieldMapping
from executor_lib.splits.native_module import native_module
from executor_lib.splits.panics import guarded
from executor_lib.splits.rows.columnar import ColumnarCopy, ColumnarCopyWriter, PartedCopy
from executor_lib.splits.write.index_schema import ROW_FIELD, in_index, schema_json  # ROW_FIELD, in_index: re-exported
from executor_lib.table_schema import column_name_problem
from indextables_contract.errors import ConfigError, CorruptSplitError, InvalidDataError

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


def native_index_writer(
    index_dir: Path, schema: str, heap_bytes: int, threads: int, block_bytes: int, row_field: str | None
) -> Any:
    """A native index writer creating its index in the empty ``index_dir`` (``indextables_native.IndexWriter``)."""
    try:
        return native_module().IndexWriter(str(index_dir), schema, heap_bytes, threads, block_bytes, row_field)
    except ValueError as e:  # a schema Tantivy refuses: a doc mapping built by hand
        raise ConfigError(f"split writer: the index of doc mapping {schema} cannot be created: {e}") from e


def _settings_as_before(index_dir: Path) -> None:
    """Write the index settings of the committed ``meta.json`` as splits written through the
    ``tantivy`` package said them (lz4, 16 KB blocks): the doc stores are zstd blocks (the native
    writer's commit), and the ``tantivy`` package, which opens a split's index on the read side, is
    built without zstd and refuses a ``meta.json`` naming it. Readers take the compressor of a doc
    store from its own footer."""
    meta_path = index_dir / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["index_settings"] = {"docstore_compression": "lz4", "docstore_blocksize": 16384}
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")  # as Tantivy writes it (serde_json's pretty form)


def writer_heap(heap_bytes: int | None, threads: int) -> int:
    """Tantivy's indexing heap for ``threads`` threads: the setting (default 256 MB), at least 15 MB a thread."""
    return max(heap_bytes or _WRITER_HEAP, MIN_HEAP_PER_THREAD * threads)


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
        self._extremes: list[pa.Table] = []
        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.work = Path(tempfile.mkdtemp(prefix="split-", dir=out_dir))
        self.index_dir = self.work / "index"
        self.index_dir.mkdir()
        self.heap_bytes, self.threads = heap_bytes, max(1, threads)
        self.writer: Any = None  # the native index writer, made with the first rows (_start)
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
        copy = self._copy
        batches = data.to_batches(FEED_BATCH_ROWS) if isinstance(data, pa.Table) else [data]
        for batch in batches:
            for start in range(0, batch.num_rows, FEED_BATCH_ROWS):
                self._add_batch(batch.slice(start, FEED_BATCH_ROWS), copy)

    def _start(self) -> None:
        """The native index writer: with the hidden ``__row`` field only when the rows go to a
        columnar copy (rows kept in the doc stores are document ordinals, ``store_rows``)."""
        row_field = self._rows_schema is None
        self.writer = native_index_writer(
            self.index_dir,
            schema_json(self.mapping, row_field=row_field),
            writer_heap(self.heap_bytes, self.threads),
            self.threads,
            store_blocks.ZSTD_BLOCK_BYTES,  # read now: a test sets it smaller
            ROW_FIELD if row_field else None,
        )

    def _add_batch(self, batch: pa.RecordBatch, copy: ColumnarCopyWriter) -> None:
        if batch.num_rows == 0:
            return
        first_row = self.num_rows if self._rows_schema is None else None  # no __row: rows in the doc stores
        try:  # the GIL is released while Rust indexes the batch
            self.writer.add(batch.select(self.indexed_columns), first_row)
        except ValueError as e:  # e.g. "row 3 of the batch cannot be indexed: column ip: "x" is not an IP address"
            raise InvalidDataError(str(e)) from e
        if self._rows_schema is None:
            copy.write(batch.select(self.copied_columns))
        self._extremes.append(_extremes(batch, self.mapping))
        self.num_rows += batch.num_rows
        self.nbytes += batch.nbytes

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
            self.writer.commit(store_blocks.ZSTD_LEVEL)  # doc stores in zstd blocks with frame checksums
            _settings_as_before(self.index_dir)
            index_files: dict[str, bytes | Path] = {
                p.name: p for p in sorted(self.index_dir.iterdir()) if p.is_file() and not p.name.endswith(".lock")
            }
            path = self.out_dir / (name or f"split-{uuid.uuid4()}.split")
            # SSTable .term as the native writer wrote them (FSTs, in splits of earlier versions, converted)
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
