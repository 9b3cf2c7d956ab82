"""Searching one split: a Tantivy query string in, Arrow rows out.

This project's splits carry a columnar copy of their rows: hits become row numbers through
the ``__row`` fast field and the rows are taken from the copy (``take_rows``: a zero-copy slice
for a run of rows, else a vectorized take from each record batch that holds some).

Splits written by IndexTables4Spark have no columnar copy, and the ``tantivy`` Python
package cannot run term or range queries on them (their term dictionaries are SSTables;
term queries fail and range queries silently match nothing). Such a split is therefore
*transcoded* on first use: its rows are read once through the doc store and re-indexed,
with the split's own doc mapping, into a split of this project's format next to it in the
work directory. Queries then have exactly Tantivy's semantics on both kinds of split.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import functools
import json
import mmap
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tantivy

from executor_lib.cache.split_pieces import SplitPieces, query_needs
from executor_lib.file_lock import entry_lock, exclusive_lock
from executor_lib.protocol.bundle import (
    LOCAL_STORE_SUFFIX,
    ROWS_IN_STORE_MEMBER,
    STORE_SUFFIX,
    BundleFooter,
    extract_bundle,
    read_footer,
    read_member,
)
from executor_lib.splits.columnar_copy import ColumnarCopy, PartedCopy, RowCopy, ipc_blocks
from executor_lib.splits.companion import COMPANION_MEMBER, CompanionRows, companion_rows, transcode_jvm_companion
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.panics import guarded
from executor_lib.splits.parquet_manifest import MANIFEST_MEMBER, deserialize_manifest, hash_string_value
from executor_lib.splits.query_compile import compile_query
from executor_lib.splits.store_rows import DocStoreRows, Fetch, open_doc_store_rows
from executor_lib.splits.term_convert import ensure_fst_terms, fields_to_build
from executor_lib.splits.tokenizers import register as register_analyzers
from executor_lib.splits.writer import (
    ARRAY_KEY,
    DOC_MAPPING_MEMBER,
    ROW_FIELD,
    SEGMENTS_MEMBER,
    columns_members,
    open_columns,
    tantivy_schema,
    write_split,
)
from indextables_contract import filters
from indextables_contract.errors import CorruptSplitError, QueryError

_RANGE_TYPES = {
    "i64": tantivy.FieldType.Integer,
    "u64": tantivy.FieldType.Unsigned,
    "f64": tantivy.FieldType.Float,
    "datetime": tantivy.FieldType.Date,
}


def list_columns(schema: pa.Schema | None) -> frozenset[str]:
    """The columns holding lists of scalars (indexed as ``{"_values": [...]}``, see ``writer.json_value``)."""
    if schema is None:
        return frozenset()
    lists = (f for f in schema if pa.types.is_list(f.type) or pa.types.is_large_list(f.type))
    return frozenset(f.name for f in lists if not pa.types.is_struct(f.type.value_type))


@guarded(lambda query, mapping, schema=None: f"query {query.query!r}")
def check_query(query: filters.QueryString, mapping: DocMapping, schema: pa.Schema | None = None) -> None:
    """QueryError if ``query`` does not parse against a split of ``mapping`` (checked before any task runs;
    ``schema``, the table's, tells which columns are lists)."""
    index = register_analyzers(tantivy.Index(tantivy_schema(mapping)), mapping.fields)
    if query.column is not None:
        field = mapping.field(query.column)
        if field is None or not field.indexed:
            raise QueryError(f"query {query.query!r}: column {query.column!r} is not an indexed field")
        if query.column in hashed_columns(mapping, schema):
            return  # any text: the term of its hash (SplitSearcher._hashed_query)
    compile_query(index, mapping, query, mapping.default_query_fields(), list_columns(schema))


def hashed_columns(mapping: DocMapping, schema: pa.Schema | None) -> frozenset[str]:
    """Columns indexed as tantivy4java's ``exact_only`` mode does: a u64 field over a string column."""
    if schema is None:
        return frozenset()
    strings = {f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)}
    return frozenset(f.name for f in mapping.fields if f.type == "u64" and f.name in strings)


def _rows_schema(stored: pa.Schema, mapping: DocMapping, schema: pa.Schema) -> pa.Schema:
    """The rows' schema: the copy's columns, and index-only columns (values not stored, read as
    nulls), in the mapping's order."""
    fields = []
    for f in mapping.fields:
        if f.name in stored.names:
            fields.append(stored.field(f.name))
        else:
            fields.append(pa.field(f.name, schema.field(f.name).type if f.name in schema.names else pa.null()))
    return pa.schema(fields)


def take_rows(rows: pa.Table | RowCopy | CompanionRows, ids: pa.Array) -> pa.Table:
    """``rows.take(ids)``, fast for ascending ``ids`` (what ``SplitSearcher.row_ids`` returns).
    A ``ColumnarCopy`` (or ``PartedCopy``) reads only the batches holding ``ids``.

    A columnar copy is a table of many record batches, and Arrow's ``take`` over such a table first
    joins each column's chunks: a query returning 20 rows of a split copied its whole message column
    (1.2 ms a split; a scan's ``take`` of every row, 29 ms). Here a run of consecutive rows is a
    zero-copy slice, and other ascending ids are taken from each batch that holds some of them.

    Example: ``take_rows(searcher.rows, pa.array([3, 4, 5], pa.uint64()))`` is ``searcher.rows.slice(3, 3)``.
    """
    if not isinstance(rows, pa.Table):  # a ColumnarCopy, or a companion split's CompanionRows
        return rows.take(ids)
    n = len(ids)
    if n == 0:
        return rows.slice(0, 0)
    wanted = ids.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if n > 1 and not bool(np.all(wanted[1:] > wanted[:-1])):
        return rows.take(ids)
    if wanted[0] < 0 or wanted[-1] >= rows.num_rows:
        return rows.take(ids)  # Arrow names the bad index
    if wanted[-1] - wanted[0] == n - 1:
        return rows.slice(int(wanted[0]), n)
    batches = rows.to_batches()
    if len(batches) <= 1:
        return rows.take(ids)
    starts = np.cumsum([0] + [b.num_rows for b in batches[:-1]])
    bounds = np.searchsorted(wanted, np.append(starts, rows.num_rows))  # ids of batch c: bounds[c]:bounds[c+1]
    parts = [
        batches[c].take(pa.array(wanted[bounds[c] : bounds[c + 1]] - starts[c]))
        for c in range(len(batches))
        if bounds[c + 1] > bounds[c]
    ]
    return pa.Table.from_batches(parts, schema=rows.schema)


def _fetch_member(pieces: SplitPieces, member: str, ranges: list[tuple[int, int]]) -> None:
    pieces.fetch({member: ranges})


def _ranged_copy(pieces: SplitPieces, footer: BundleFooter, member: str, split: str | Path) -> ColumnarCopy:
    """The columnar copy (or part) ``member`` of a split fetched by the piece: the batches a take
    needs are fetched at once, by range."""
    length = footer.files[member][1] - footer.files[member][0]
    blocks = ipc_blocks(length, functools.partial(pieces.read, member))
    fetch = functools.partial(_fetch_member, pieces, member)
    return ColumnarCopy(
        pa.PythonFile(pieces.member_file(member), mode="r"),
        f"{split}:{member}",
        prefetch=None if blocks is None else (blocks, fetch),
    )


_DECIMALS = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_EVEN)  # room for decimal256's 76 digits


def _needs_conversion(t: pa.DataType) -> bool:
    return pa.types.is_decimal(t) or pa.types.is_nested(t)


def stored_value(value: Any, t: pa.DataType, top: bool = True) -> Any:
    """A value as a split's doc store holds it (IndexTables4Spark's, as ``writer.json_value`` builds
    it) as a Python value of Arrow type ``t``: a decimal (indexed as f64) from its float, rounded to
    the type's scale; a list from ``{"_values": [...]}`` at the top of a JSON field; a map from its
    object (keys back to the key type); a struct from its object, field by field.

    Example: ``stored_value({"_values": [1, 2]}, pa.list_(pa.int64()))`` is ``[1, 2]``.
    """
    if value is None:
        return None
    if pa.types.is_decimal(t) and isinstance(value, (float, int)) and not isinstance(value, bool):
        return _DECIMALS.quantize(decimal.Decimal(repr(value)), decimal.Decimal(1).scaleb(-t.scale))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        if top and isinstance(value, dict) and set(value) == {ARRAY_KEY}:
            value = value[ARRAY_KEY]
        if isinstance(value, list) and _needs_conversion(t.value_type):
            return [stored_value(v, t.value_type, False) for v in value]
        return value
    if pa.types.is_map(t) and isinstance(value, dict):
        return [(_map_key(k, t.key_type), stored_value(v, t.item_type, False)) for k, v in value.items()]
    if pa.types.is_struct(t) and isinstance(value, dict):
        fields = [t.field(i) for i in range(t.num_fields)]
        return {f.name: stored_value(value.get(f.name), f.type, False) for f in fields}
    return value


def _map_key(key: str, t: pa.DataType) -> Any:
    """A map key as JSON holds it (text) as a value of the key type ``t``."""
    if pa.types.is_integer(t):
        return int(key)
    if pa.types.is_floating(t):
        return float(key)
    if pa.types.is_boolean(t):
        return key.lower() == "true"
    return key


class SplitSearcher:
    """Search one local split file. ``work_dir`` holds its extracted (or transcoded) index."""

    @guarded(lambda self, split, *a, **k: f"opening split {split}")
    def __init__(
        self,
        split: Path | str,
        work_dir: Path,
        arrow_schema: pa.Schema,
        doc_mapping: str | None,
        pieces: SplitPieces | None = None,
        companion_root: str | None = None,
    ) -> None:
        """Open the local split ``split`` (its index extracted, or transcoded, into ``work_dir``),
        or, with ``pieces``, a split fetched by the piece (``split`` then only names it): its
        members are laid out in ``pieces.directory`` and its rows read by range. ``companion_root``:
        the source root of a companion table (``companion.sync.parquet_table_root``), needed to read
        a companion split in tantivy4java's layout only (it names no root itself)."""
        self.split = split
        self.work_dir = work_dir
        self.pieces = pieces
        self.bundle: Path | None = None  # the local split file read (None: read by the piece)
        jvm_companion = False  # a companion split in tantivy4java's layout only (transcoded here)
        if pieces is not None:
            footer = pieces.footer
            self.index_dir = pieces.directory
            mapping_json = pieces.member_bytes(DOC_MAPPING_MEMBER)
            segments = pieces.member_bytes(SEGMENTS_MEMBER)
        else:
            split = Path(split)
            footer = read_footer(split)
            index_dir = self.index_dir = work_dir / "index"
            # Several Python workers of a node may open the same split at once: one extracts (or
            # transcodes), under the cache entry's lock, and the others wait and reuse its result.
            work_dir.mkdir(parents=True, exist_ok=True)
            with exclusive_lock(entry_lock(work_dir)):
                jvm_companion = columns_members(footer) is None and MANIFEST_MEMBER in footer.files
                if columns_members(footer) is None and ROWS_IN_STORE_MEMBER not in footer.files:
                    split, footer = self._transcode(split, footer, arrow_schema, doc_mapping, companion_root)
                self.bundle = split  # the local split read: this one, or its transcoded version
                if not (index_dir / "meta.json").exists():
                    shutil.rmtree(index_dir, ignore_errors=True)  # a partial extraction from a killed process
                    tmp = Path(tempfile.mkdtemp(dir=work_dir, prefix="index.tmp-"))
                    extract_bundle(split, footer, tmp, copy_stores=False)  # rows are read from the split file
                    tmp.rename(index_dir)
            mapping_json = read_member(split, footer, DOC_MAPPING_MEMBER)
            segments = read_member(split, footer, SEGMENTS_MEMBER)
        self._footer: BundleFooter | None = footer if pieces is None else None  # the local split file's
        members = columns_members(footer)
        rows_member = (
            pieces.member_bytes(ROWS_IN_STORE_MEMBER)
            if pieces is not None
            else read_member(Path(split), footer, ROWS_IN_STORE_MEMBER)
        )
        if (members is None and rows_member is None) or mapping_json is None:
            raise CorruptSplitError(f"{split}: split lacks its columnar copy or doc mapping")
        self.mapping = DocMapping.from_json(mapping_json.decode())
        self._segment_starts: np.ndarray | None = None  # rows in the doc stores: each segment's first row
        try:
            copy: RowCopy
            if rows_member is not None:  # rows kept in the doc stores (store_rows)
                copy = self._store_rows(rows_member)
                self._segment_starts = copy.segment_starts
            elif pieces is not None:  # read by range: the batches a take needs are fetched at once
                parts = [_ranged_copy(pieces, footer, member, split) for member in members or ()]
                copy = parts[0] if len(parts) == 1 else PartedCopy(parts, str(split))
            else:
                copy = open_columns(Path(split), footer)
            if pieces is not None:
                companion = pieces.member_bytes(COMPANION_MEMBER)
            else:
                companion = read_member(Path(split), footer, COMPANION_MEMBER)
            self.rows: RowCopy | CompanionRows
            if companion is not None:  # rows come from the source's Parquet files
                self.rows = companion_rows(copy, companion, arrow_schema, str(split))
                if pieces is None and jvm_companion and companion_root:  # the table's root, as given now
                    info = dataclasses.replace(self.rows.info, source_root=companion_root)
                    self.rows = CompanionRows(copy, info, self.rows.schema)
            else:
                self.rows = copy.with_schema(_rows_schema(copy.schema, self.mapping, arrow_schema))
        except (ValueError, OSError) as e:  # ArrowInvalid is a ValueError
            raise CorruptSplitError(f"{split}: the split's columnar copy does not read ({e})") from e
        self.companion = companion is not None
        self.hashed = hashed_columns(self.mapping, arrow_schema)  # exact_only columns: their values' hashes
        self.pattern_fields: dict[str, tuple[str, str]] = {}  # text_*_exactonly column -> (hash field, regex)
        if self.companion:
            raw = (
                pieces.member_bytes(MANIFEST_MEMBER)
                if pieces is not None
                else read_member(Path(split), footer, MANIFEST_MEMBER)
            )
            if raw is not None:
                manifest = deserialize_manifest(raw, str(split))
                for name, info in manifest.get("companion_hash_fields", {}).items():
                    self.pattern_fields[str(info["original_field_name"])] = (name, str(info["regex_pattern"]))
        self.index_only = [] if self.companion else [f.name for f in self.mapping.fields if not f.stored]
        self._open_index()
        self.text_fields = self.mapping.default_query_fields()
        self.list_columns = list_columns(arrow_schema)
        self.row_offsets: dict[str, int] | None = None  # merged splits: segment id -> first row of its source
        self._offsets_by_ordinal: list[int] | None = None
        if segments is not None:
            self._load_row_offsets(segments)

    def _open_index(self) -> None:
        try:
            self.index = register_analyzers(tantivy.Index.open(str(self.index_dir)), self.mapping.fields)
        except (OSError, ValueError) as e:
            raise CorruptSplitError(f"{self.split}: the split's index does not open ({e})") from e
        self.searcher = self.index.searcher()
        try:  # Tantivy field ids are positions in meta.json's schema
            schema = json.loads((self.index_dir / "meta.json").read_text())["schema"]
            self._field_names = [str(f["name"]) for f in schema]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CorruptSplitError(f"{self.split}: the split's meta.json does not parse ({e})") from e
        # the fields whose FST term dictionaries the index just opened lacks (built as queries need them)
        self._fields_to_build = fields_to_build(self.index_dir)

    def _store_rows(self, rows_member: bytes) -> DocStoreRows:
        """The rows of a split that keeps them in its doc stores, each read in place, memory-mapped:
        a local split's in the split file itself, a split read by the piece's as laid out in
        ``index_dir`` (``<segment>.docstore``, ``bundle.local_files``), fetching the blocks a take
        needs first."""
        try:
            meta_json = (self.index_dir / "meta.json").read_bytes()
        except OSError as e:
            raise CorruptSplitError(f"{self.split}: the split's meta.json does not read ({e})") from e
        types = {f.name: f.type for f in self.mapping.fields}
        return open_doc_store_rows(rows_member, meta_json, types, self._segment_store, str(self.split))

    def _segment_store(self, stem: str) -> tuple[memoryview, Fetch | None]:
        if self.pieces is None:  # a local split file: its doc store member in place
            assert self.bundle is not None and self._footer is not None
            start, end = self._footer.files[f"{stem}{STORE_SUFFIX}"]
            with open(self.bundle, "rb") as f:
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            return memoryview(mapped)[start:end], None
        local = f"{stem}{LOCAL_STORE_SUFFIX}"
        with open(self.index_dir / local, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return memoryview(mapped), functools.partial(_fetch_member, self.pieces, local)

    def _load_row_offsets(self, member: bytes) -> None:
        """Row offsets of a merged split, by segment ordinal (the order of the index's ``meta.json``)."""
        try:
            offsets = {str(k): int(v) for k, v in json.loads(member)["row_offsets"].items()}
            order = [seg["segment_id"] for seg in json.loads((self.index_dir / "meta.json").read_text())["segments"]]
            self._offsets_by_ordinal = [offsets[segment_id] for segment_id in order]
        except (ValueError, KeyError, TypeError, AttributeError, OSError) as e:
            raise CorruptSplitError(f"{self.split}: the split's segment row offsets do not parse ({e})") from e
        if len(order) != self.searcher.num_segments:
            raise CorruptSplitError(f"{self.split}: segment row offsets list {len(order)} segments, the index has more")
        self.row_offsets = offsets

    def _rows_of(self, addresses: Sequence[Any]) -> pa.Array:
        """Row numbers (into ``rows``) of documents: document ordinals (rows in the doc stores), else
        from the ``__row`` fast field and segment offsets."""
        if self._segment_starts is not None:
            docs = np.fromiter((a.doc for a in addresses), np.int64, len(addresses))
            ordinals = np.fromiter((a.segment_ord for a in addresses), np.int64, len(addresses))
            return pa.array(self._segment_starts[ordinals] + docs, pa.uint64())
        rows = pa.array(self.searcher.fast_field_values(ROW_FIELD, list(addresses)), pa.uint64())
        if self._offsets_by_ordinal is None:
            return rows
        by_ordinal = pa.array(self._offsets_by_ordinal, pa.uint64())
        ordinals = pa.array([a.segment_ord for a in addresses], pa.uint32())
        return pc.add(rows, by_ordinal.take(ordinals))

    def _transcode(
        self, split: Path, footer: Any, schema: pa.Schema, doc_mapping: str | None, companion_root: str | None = None
    ) -> tuple[Path, Any]:
        out = self.work_dir / "transcoded"
        for existing in sorted(out.glob("split-*.split")) if out.exists() else []:
            existing_footer = read_footer(existing)
            if DOC_MAPPING_MEMBER in existing_footer.files:
                return existing, existing_footer
            shutil.rmtree(out)  # left by an older version of this code: transcode again
            shutil.rmtree(self.work_dir / "index", ignore_errors=True)
            break
        if doc_mapping is None:
            raise CorruptSplitError(f"{split}: no doc mapping for this split; cannot read it")
        if MANIFEST_MEMBER in footer.files:  # tantivy4java's companion split: no stored rows to read
            written = transcode_jvm_companion(split, footer, schema, doc_mapping, companion_root, out)
            return written.path, written.footer
        mapping = DocMapping.from_json(doc_mapping)
        raw_dir = self.work_dir / "source"
        shutil.rmtree(raw_dir, ignore_errors=True)
        extract_bundle(split, footer, raw_dir, stores_aside=False)  # its rows are read through its doc store
        try:
            index = tantivy.Index.open(str(raw_dir))
        except (OSError, ValueError) as e:
            raise CorruptSplitError(f"{split}: the split's index does not open ({e})") from e
        searcher = index.searcher()
        hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs), count=False).hits
        docs = [searcher.doc(address).to_dict() for _, address in hits]
        columns = {}
        for f in mapping.fields:
            values = [d.get(f.name, [None])[0] for d in docs]
            arrow_type = schema.field(f.name).type if f.name in schema.names else None
            if arrow_type is not None and _needs_conversion(arrow_type):
                values = [stored_value(v, arrow_type) for v in values]
            column = pa.array(values, type=arrow_type)
            if f.type == "ip":  # Tantivy stores IPv4 as IPv4-mapped IPv6; rows show what was written
                column = pc.replace_substring_regex(column, r"^::ffff:(\d+\.\d+\.\d+\.\d+)$", r"\1")
            columns[f.name] = column
        written = write_split(pa.table(columns), mapping, out)
        shutil.rmtree(raw_dir, ignore_errors=True)
        return written.path, written.footer

    @property
    def num_docs(self) -> int:
        return int(self.searcher.num_docs)

    def _query(self, query: str | filters.Filter | None) -> Any:
        """``query`` compiled, with what it reads made ready first (and the index opened again over
        it): on a split fetched by the piece, the index sections of its fields; the FST term
        dictionaries of its fields, built from the split's SSTable ones (``term_convert``)."""
        if query is None or (isinstance(query, str) and query.strip() in ("", "*")):
            return tantivy.Query.all_query()
        if not isinstance(query, str):
            compiled = self._compile(query)
        else:
            compiled = compile_query(self.index, self.mapping, filters.QueryString(query), self.text_fields)
        if self.pieces is None and not self._fields_to_build:
            return compiled  # a local index with every dictionary built: nothing to make ready
        fields, positions = query_needs(compiled, self._field_names)
        fetched = self.pieces is not None and self.pieces.ensure_fields(fields, positions)
        if self._ensure_terms(fields) or fetched:
            self._open_index()
        return compiled

    def _ensure_terms(self, fields: set[int] | None) -> bool:
        """Build the FST term dictionaries of ``fields`` (None: all) that the open index lacks, under
        the cache entry's lock (processes of a node share the directory). True when the index has to
        be opened again (built now, or by another process since it was opened)."""
        wanted = set(self._fields_to_build) if fields is None else fields & self._fields_to_build
        if not wanted:
            return False
        entry = self.pieces.entry if self.pieces is not None else self.work_dir
        with exclusive_lock(entry_lock(entry)):
            ensure_fst_terms(self.index_dir, wanted)
        return True

    def _hashed_query(self, column: str, text: str) -> Any:
        """tantivy4java's ``rewrite_query_for_string_indexing`` of a query on one column: on an
        ``exact_only`` column, the term of the text's hash; on a ``text_*_exactonly`` column whose pattern
        the text matches, the term of the first match's hash in ``<column>__uuids``; else None."""
        schema = self.index.schema
        if column in self.hashed:
            return tantivy.Query.term_query(schema, column, hash_string_value(text), "freq")
        if column in self.pattern_fields:
            name, pattern = self.pattern_fields[column]
            found = re.search(pattern, text)
            if found is not None:
                return tantivy.Query.term_query(schema, name, hash_string_value(found.group(0)), "freq")
        return None

    def _field(self, column: str, what: str) -> Any:
        field = self.mapping.field(column)
        if field is None:
            raise QueryError(f"{what}: column {column!r} is not in the split")
        return field

    def _value(self, field: Any, value: Any) -> Any:
        if field.type == "datetime" and hasattr(value, "isoformat") and not hasattr(value, "hour"):
            return datetime.datetime(value.year, value.month, value.day)
        return value

    def _compile(self, f: filters.Filter) -> Any:
        """A structured filter as a Tantivy query (QueryError if the field type cannot answer it)."""
        schema = self.index.schema
        if isinstance(f, filters.QueryString):
            if f.column is not None:
                self._field(f.column, f"query {f.query!r}")
                hashed = self._hashed_query(f.column, f.query)
                if hashed is not None:
                    return hashed
            return compile_query(self.index, self.mapping, f, self.text_fields, self.list_columns)
        if isinstance(f, (filters.And, filters.Or)):
            children = filters.combine_ranges(f.children) if isinstance(f, filters.And) else f.children
            occur = tantivy.Occur.Must if isinstance(f, filters.And) else tantivy.Occur.Should
            return tantivy.Query.boolean_query([(occur, self._compile(c)) for c in children])
        if isinstance(f, filters.Not):
            return tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, tantivy.Query.all_query()), (tantivy.Occur.MustNot, self._compile(f.child))]
            )
        field = self._field(f.column, type(f).__name__)
        exact_text = field.type == "text" and field.tokenizer == "raw"
        if isinstance(f, (filters.Term, filters.TermIn)):
            if field.type == "text" and not exact_text:
                raise QueryError(f"equality on tokenized text column {f.column!r}: use a query string")
            values = [f.value] if isinstance(f, filters.Term) else list(f.values)
            values = [self._value(field, v) for v in values]
            if f.column in self.hashed:  # exact_only: the index holds the values' hashes
                values = [hash_string_value(str(v)) for v in values]
            if isinstance(f, filters.Term):
                return tantivy.Query.term_query(schema, f.column, values[0], "freq")  # no positions read
            return tantivy.Query.term_set_query(schema, f.column, values)
        if isinstance(f, filters.Between):
            kind = _RANGE_TYPES.get(field.type)
            if kind is None:
                raise QueryError(f"range on column {f.column!r} of type {field.type}: not answerable by the index")
            return tantivy.Query.range_query(
                schema,
                f.column,
                kind,
                self._value(field, f.lower),
                self._value(field, f.upper),
                include_lower=f.lower_inclusive,
                include_upper=f.upper_inclusive,
            )
        if isinstance(f, (filters.Prefix, filters.Contains, filters.Regex)):
            if not exact_text:
                raise QueryError(f"{type(f).__name__.lower()} on column {f.column!r}: needs an exact (string) field")
            if isinstance(f, filters.Prefix):
                pattern = filters.prefix_pattern(f.prefix)
            elif isinstance(f, filters.Contains):
                pattern = filters.contains_pattern(f.substring)
            else:
                pattern = f.pattern
            return tantivy.Query.regex_query(schema, f.column, pattern)
        if isinstance(f, filters.Exists):
            if not field.fast:
                raise QueryError(f"exists on column {f.column!r}: needs a fast field")
            return tantivy.Query.exists_query(f.column)
        raise QueryError(f"unsupported filter {f!r}")

    @guarded(lambda self, *a, **k: f"count on split {self.split}")
    def count(self, query: str | filters.Filter | None = None) -> int:
        try:
            compiled = self._query(query)  # first: it may open the index again
            return int(self.searcher.search(compiled, 1, count=True).count)
        except ValueError as e:  # e.g. an exists query on a field the split lacks
            raise QueryError(f"query {query!r} cannot run on this split: {e}") from e

    @guarded(lambda self, *a, **k: f"aggregation on split {self.split}")
    def aggregate(self, aggregations: Mapping[str, Any], query: str | filters.Filter | None = None) -> dict[str, Any]:
        """Elasticsearch-style aggregations (count/sum/avg/min/max/stats, terms, histogram,
        date_histogram, range) over the rows matching ``query``, computed on fast fields."""
        self._check_aggregation_fields(aggregations, "")
        try:
            compiled = self._query(query)  # first: it may open the index again
            return dict(self.searcher.aggregate(compiled, dict(aggregations)))
        except ValueError as e:
            raise QueryError(f"aggregation {json.dumps(aggregations)} failed: {e}") from e

    def _check_aggregation_fields(self, aggregations: Mapping[str, Any], path: str) -> None:
        if not isinstance(aggregations, Mapping):
            raise QueryError(f"aggregation {path or 'request'} must be an object")
        for name, spec in aggregations.items():
            if not isinstance(spec, Mapping):
                raise QueryError(f"aggregation {path}{name} must be an object")
            for kind, body in spec.items():
                if kind in ("aggs", "aggregations"):
                    self._check_aggregation_fields(body, f"{path}{name}.")
                    continue
                column = body.get("field") if isinstance(body, Mapping) else None
                if column is None:
                    raise QueryError(f"aggregation {path}{name} ({kind}) names no field")
                field = self.mapping.field(column)
                if field is None:
                    raise QueryError(f"aggregation {path}{name}: column {column!r} is not in the split")
                if not field.fast:
                    raise QueryError(
                        f"aggregation {path}{name}: column {column!r} is not a fast field "
                        "(add it to spark.indextables.indexing.fastfields)"
                    )

    @guarded(lambda self, query=None, *a, **k: f"query {query!r} on split {self.split}")
    def row_ids(self, query: str | filters.Filter | None = None, limit: int | None = None) -> pa.Array:
        """Row numbers (into ``rows``, ascending) of the documents matching ``query``, up to ``limit``."""
        n = self.num_docs if limit is None else min(limit, self.num_docs)
        if query is None:
            return pa.array(range(n), type=pa.uint64())
        if n <= 0:
            return pa.array([], type=pa.uint64())
        if self._segment_starts is not None:  # rows are document ordinals (no __row): any n matches, sorted
            try:
                compiled = self._query(query)  # first: it may open the index again
                hits = self.searcher.search(compiled, n, count=False).hits
            except ValueError as e:
                raise QueryError(f"query {query!r} cannot run on this split: {e}") from e
            rows = self._rows_of([address for _, address in hits])
            return rows.take(pc.array_sort_indices(rows))
        if self._offsets_by_ordinal is not None:  # row order is not __row order: sort every match
            try:
                compiled = self._query(query)
                hits = self.searcher.search(compiled, self.num_docs, count=False).hits
            except ValueError as e:
                raise QueryError(f"query {query!r} cannot run on this split: {e}") from e
            rows = self._rows_of([address for _, address in hits])
            return rows.take(pc.array_sort_indices(rows)).slice(0, n)
        try:
            compiled = self._query(query)
            hits = self.searcher.search(
                compiled, n, count=False, order_by_field=ROW_FIELD, order=tantivy.Order.Asc
            ).hits
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on this split: {e}") from e
        return pa.array([row for row, _ in hits], pa.uint64())

    @guarded(lambda self, query=None, *a, **k: f"query {query!r} on split {self.split}")
    def search(
        self, query: str | filters.Filter | None = None, columns: Sequence[str] | None = None, limit: int | None = None
    ) -> pa.Table:
        """Matching rows, best first, as Arrow (``columns`` of the split's data, all by default)."""
        if columns is not None:
            unknown = [c for c in columns if c not in self.rows.column_names]
            if unknown:
                raise QueryError(f"columns {unknown} are not in the split (columns: {self.rows.column_names})")
        n = self.num_docs if limit is None else min(limit, self.num_docs)
        if n <= 0:
            return self.rows.schema.empty_table().select(
                list(columns) if columns is not None else self.rows.column_names
            )
        try:
            compiled = self._query(query)  # first: it may open the index again
            hits = self.searcher.search(compiled, n, count=False).hits
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on this split: {e}") from e
        table = take_rows(self.rows, self._rows_of([address for _, address in hits]))
        return table.select(list(columns)) if columns is not None else table
