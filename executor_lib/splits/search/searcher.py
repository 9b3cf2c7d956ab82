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
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import tantivy

from executor_lib.arrow_arrays import as_numpy, empty_table, numbers
from executor_lib.cache.entry_checksums import record_checksums
from executor_lib.cache.split_pieces import SplitPieces, query_needs
from executor_lib.file_lock import entry_lock, exclusive_lock
from executor_lib.format.quickwit.bundle import (
    ROWS_IN_STORE_MEMBER,
    check_stand_ins,
)
from executor_lib.format.tantivy4java.parquet_manifest import MANIFEST_MEMBER, deserialize_manifest
from executor_lib.format.termdict.convert import ensure_fst_terms, fields_to_build
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.panics import guarded
from executor_lib.splits.query.check import hashed_columns, list_columns
from executor_lib.splits.query.compile import compile_query
from executor_lib.splits.query.filter_compile import FilterCompiler
from executor_lib.splits.query.plan import PLAN
from executor_lib.splits.rows.columnar import RowCopy
from executor_lib.splits.rows.companion import COMPANION_MEMBER, CompanionRows, companion_rows
from executor_lib.splits.rows.doc_store_rows import DocStoreRows, Fetch, open_doc_store_rows
from executor_lib.splits.rows.take import rows_schema, take_rows
from executor_lib.splits.search.native import Hits, NativeParser, NativeSplit
from executor_lib.splits.search.scoring import (
    ScoreStats,
    SplitFiles,
    Unsupported,
    marked_snippets,
    split_stats,
    table_scores,
)
from executor_lib.splits.search.split_source import SplitSource, open_split_source
from executor_lib.splits.tokenizers import register as register_analyzers
from executor_lib.splits.write.writer import (
    DOC_MAPPING_MEMBER,
    ROW_FIELD,
    SEGMENTS_MEMBER,
    columns_members,
)
from indextables_contract import filters
from indextables_contract.errors import ConfigError, CorruptSplitError, QueryError

log = logging.getLogger(__name__)


class SplitSearcher:
    """Search one split, whose bytes a ``SplitSource`` gives (a local split file read in place, or a
    split fetched by the piece): the searcher never asks which."""

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
        """Open the local split ``split`` (read in place; ``work_dir`` keeps what is made of it: the
        record of its checked CRCs, a transcoded copy, an index extracted for the ``tantivy`` package),
        or, with ``pieces``, a split fetched by the piece (``split`` then only names it): its
        members are laid out in ``pieces.directory`` and its rows read by range. ``companion_root``:
        the source root of a companion table (``companion.sync.parquet_table_root``), needed to read
        a companion split in tantivy4java's layout only (it names no root itself). The bytes come
        through a ``SplitSource`` (``split_source.open_split_source``); ``over`` takes one."""
        source = open_split_source(split, work_dir, arrow_schema, doc_mapping, pieces, companion_root)
        self._open(source, arrow_schema, companion_root)

    @classmethod
    def over(cls, source: SplitSource, arrow_schema: pa.Schema, companion_root: str | None = None) -> SplitSearcher:
        """A searcher of the split ``source`` gives the bytes of.

        Example: ``SplitSearcher.over(open_split_source(path, work, schema, None), schema)``
        """
        searcher = cls.__new__(cls)
        searcher._open(source, arrow_schema, companion_root)
        return searcher

    @guarded(lambda self, source, *a, **k: f"opening split {source.name}")
    def _open(self, source: SplitSource, arrow_schema: pa.Schema, companion_root: str | None) -> None:
        self.source = source
        self.split = source.origin
        split = source.name
        self.pieces, self.bundle = source.pieces, source.bundle  # (reused by the searcher cache and merges)
        footer = source.footer
        mapping_json = source.member_bytes(DOC_MAPPING_MEMBER)
        segments = source.member_bytes(SEGMENTS_MEMBER)
        members = columns_members(footer)
        rows_member = source.member_bytes(ROWS_IN_STORE_MEMBER)
        if (members is None and rows_member is None) or mapping_json is None:
            raise CorruptSplitError(f"{split}: split lacks its columnar copy or doc mapping")
        self._read_meta(source.member_bytes("meta.json"))
        try:
            self.mapping = DocMapping.from_json(mapping_json.decode())
        except (ConfigError, ValueError) as e:  # the split's own member: damage, not the user's configuration
            raise CorruptSplitError(f"{split}: the split's doc mapping does not parse ({e})") from e
        self._segment_starts: np.ndarray | None = None  # rows in the doc stores: each segment's first row
        try:
            copy: RowCopy
            if rows_member is not None:  # rows kept in the doc stores (store_rows)
                copy = self._store_rows(rows_member)
                self._segment_starts = copy.segment_starts
            else:  # the columnar copy: in place, or by range (the batches a take needs fetched at once)
                copy = source.row_copy()
            companion = source.member_bytes(COMPANION_MEMBER)
            self.rows: RowCopy | CompanionRows
            if companion is not None:  # rows come from the source's Parquet files
                self.rows = companion_rows(copy, companion, arrow_schema, str(split))
                if source.jvm_companion and companion_root:  # the table's root, as given now
                    info = dataclasses.replace(self.rows.info, source_root=companion_root)
                    self.rows = CompanionRows(copy, info, self.rows.schema)
            else:
                self.rows = copy.with_schema(rows_schema(copy.schema, self.mapping, arrow_schema))
        except (ValueError, OSError) as e:  # ArrowInvalid is a ValueError
            raise CorruptSplitError(f"{split}: the split's columnar copy does not read ({e})") from e
        self.companion = companion is not None
        self.hashed = hashed_columns(self.mapping, arrow_schema)  # exact_only columns: their values' hashes
        self.pattern_fields: dict[str, tuple[str, str]] = {}  # text_*_exactonly column -> (hash field, regex)
        if self.companion:
            raw = source.member_bytes(MANIFEST_MEMBER)
            if raw is not None:
                manifest = deserialize_manifest(raw, str(split))
                for name, info in manifest.get("companion_hash_fields", {}).items():
                    self.pattern_fields[str(info["original_field_name"])] = (name, str(info["regex_pattern"]))
        self.index_only = [] if self.companion else [f.name for f in self.mapping.fields if not f.stored]
        self._index: Any = None  # the tantivy package's index, opened for the jobs left on it (_open_index)
        self.text_fields = self.mapping.default_query_fields()
        self.list_columns = list_columns(arrow_schema)
        self._files: SplitFiles | None = None  # what scoring reads of the index files (_split_files)
        self._native: NativeSplit | None = None  # the split as the native engine opens it (_native_split)
        self._no_native = False  # the native engine cannot read this split's layout
        self.row_offsets: dict[str, int] | None = None  # merged splits: segment id -> first row of its source
        self._offsets_by_ordinal: list[int] | None = None
        if segments is not None:
            self._load_row_offsets(segments)
        self.filters = FilterCompiler(
            self.mapping, self.hashed, self.pattern_fields, self.text_fields, self.list_columns, self._index_for
        )

    def _read_meta(self, raw: bytes | None) -> None:
        """The index's ``meta.json`` (the split's member): Tantivy's field ids are positions in its
        schema, segment ordinals positions in its segment list."""
        try:
            if raw is None:
                raise ValueError("no meta.json member")
            meta = json.loads(raw)
            self._field_names = [str(f["name"]) for f in meta["schema"]]
            self._segment_ids = [str(seg["segment_id"]) for seg in meta["segments"]]
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptSplitError(f"{self.split}: the split's meta.json does not parse ({e})") from e
        self._meta_json = raw

    @property
    def index_dir(self) -> Path:
        """The directory the ``tantivy`` package opens (a local split's index is extracted into it
        the first time a job left on that package asks)."""
        return self.source.index_dir

    @property
    def index(self) -> Any:
        """The ``tantivy`` package's index of the split, opened the first time a job left on it asks
        (a split whose layout the native engine cannot read; scoring on a split read by the piece)."""
        if self._index is None:
            self._open_index()
        return self._index

    @property
    def searcher(self) -> Any:
        """The ``tantivy`` package's searcher (``index``)."""
        if self._index is None:
            self._open_index()
        return self._searcher

    def _open_index(self) -> None:
        check_stand_ins(self.index_dir, str(self.split))  # the files built in the cache entry: no member's CRC
        try:
            index = register_analyzers(tantivy.Index.open(str(self.index_dir)), self.mapping.fields)
        except (OSError, ValueError) as e:
            raise CorruptSplitError(f"{self.split}: the split's index does not open ({e})") from e
        self._index, self._searcher = index, index.searcher()
        # the fields whose FST term dictionaries the index just opened lacks (built as queries need them)
        self._to_build = fields_to_build(self.index_dir)

    @property
    def _fields_to_build(self) -> set[int]:
        """The fields whose FST term dictionaries the ``tantivy`` package's index lacks (it opens first)."""
        if self._index is None:
            self._open_index()
        return self._to_build

    def _store_rows(self, rows_member: bytes) -> DocStoreRows:
        """The rows of a split that keeps them in its doc stores, each read in place, memory-mapped:
        a local split's in the split file itself, a split read by the piece's as laid out in
        ``index_dir`` (``<segment>.docstore``, ``bundle.local_files``), fetching the blocks a take
        needs first."""
        types = {f.name: f.type for f in self.mapping.fields}
        return open_doc_store_rows(
            rows_member, self._meta_json, types, self._segment_store, str(self.split), self.source.unpacked_store
        )

    def _segment_store(self, stem: str) -> tuple[memoryview, Fetch | None]:
        return self.source.segment_store(stem)

    def _load_row_offsets(self, member: bytes) -> None:
        """Row offsets of a merged split, by segment ordinal (the order of the index's ``meta.json``)."""
        try:
            offsets = {str(k): int(v) for k, v in json.loads(member)["row_offsets"].items()}
            self._offsets_by_ordinal = [offsets[segment_id] for segment_id in self._segment_ids]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise CorruptSplitError(f"{self.split}: the split's segment row offsets do not parse ({e})") from e
        self.row_offsets = offsets

    def _rows_of(self, addresses: Sequence[Any]) -> pa.Array:
        """Row numbers (into ``rows``) of documents: document ordinals (rows in the doc stores), else
        from the ``__row`` fast field and segment offsets."""
        if self._segment_starts is not None:
            docs = np.fromiter((a.doc for a in addresses), np.int64, len(addresses))
            ordinals = np.fromiter((a.segment_ord for a in addresses), np.int64, len(addresses))
            return numbers(self._segment_starts[ordinals] + docs, pa.uint64())
        rows = pa.array(self.searcher.fast_field_values(ROW_FIELD, list(addresses)), pa.uint64())
        if self._offsets_by_ordinal is None:
            return rows
        by_ordinal = pa.array(self._offsets_by_ordinal, pa.uint64())
        ordinals = pa.array([a.segment_ord for a in addresses], pa.uint32())
        return pc.add(rows, by_ordinal.take(ordinals))

    @property
    def num_docs(self) -> int:
        native = self._native_split()
        return native.num_docs if native is not None else int(self.searcher.num_docs)

    def _query(self, query: str | filters.Filter | None, scoring: bool = False) -> Any:
        """``query`` compiled, with what it reads made ready first (and the index opened again over
        it): on a split fetched by the piece, the index sections of its fields; the FST term
        dictionaries of its fields, built from the split's SSTable ones (``term_convert``).
        ``scoring``: only the query strings of a filter tree score (comparisons score 0)."""
        if query is None or (isinstance(query, str) and query.strip() in ("", "*")):
            return tantivy.Query.all_query()
        compiled = self.filters.compile(query, scoring) if not isinstance(query, str) else self._query_text(query)
        if self.source.complete and not self._fields_to_build:
            return compiled  # every index section present, every dictionary built: nothing to make ready
        fields, positions = query_needs(compiled, self._field_names)
        fetched = self.source.ensure_fields(fields, positions)
        if self._ensure_terms(fields) or fetched:
            self._open_index()
        return compiled

    def _query_text(self, query: str) -> Any:
        """The ``tantivy`` query of a query string (None for every row)."""
        if query.strip() in ("", "*"):
            return None
        return compile_query(self.index, self.mapping, filters.QueryString(query), self.text_fields)

    def _ensure_terms(self, fields: set[int] | None) -> bool:
        """Build the FST term dictionaries of ``fields`` (None: all) that the open index lacks, under
        the cache entry's lock (processes of a node share the directory). True when the index has to
        be opened again (built now, or by another process since it was opened)."""
        wanted = set(self._fields_to_build) if fields is None else fields & self._fields_to_build
        if not wanted:
            return False
        with exclusive_lock(entry_lock(self.source.lock_dir)):
            built = ensure_fst_terms(self.index_dir, wanted)
            if built:  # checked with the files built beside the index (SplitSource.built_damaged)
                record_checksums(self.index_dir, {p.name: p for p in built})
        return True

    def _index_for(self, q: Any) -> Any:
        """What the query compiler asks of an index: for a plan (``q`` is ``PLAN``), the native engine's
        parser, so no ``tantivy`` package index is opened; else that package's index."""
        native = self._native_split() if q is PLAN else None
        return NativeParser(native) if native is not None else self.index

    @guarded(lambda self, *a, **k: f"count on split {self.split}")
    def count(self, query: str | filters.Filter | None = None) -> int:
        if query is None or (isinstance(query, str) and query.strip() in ("", "*")):
            return self.num_docs
        native = self._native_split()
        if native is not None:
            return native.count(self._plan(query, scoring=False), query)
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
        native = self._native_split()
        if native is not None:
            plan = PLAN.all_query() if query is None else self._plan(query, scoring=False)
            return native.aggregate(plan, query, aggregations)
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
            return numbers(np.arange(n), pa.uint64())
        if n <= 0:
            return numbers([], pa.uint64())
        native = self._native_split()
        if native is not None:
            rows, _ = self._native_row_hits(native, query, n)
            return numbers(np.sort(rows)[:n], pa.uint64())
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

    def _split_files(self) -> SplitFiles:
        """The split's segments and members as ``scoring`` reads them (fieldnorms, token counts); read
        once (a split never changes; a split fetched by the piece fetches the ranges read)."""
        if self._files is None:
            self._files = self._read_split_files()
        return self._files

    def _read_split_files(self) -> SplitFiles:
        return self.source.split_files(self._field_names)

    def _native_split(self) -> NativeSplit | None:
        """The split opened by the native engine (``SplitSource.native_split``: in place, or as a split
        fetched by the piece is laid out); None for the layout it cannot read (FST term dictionaries of
        an earlier version of this project), scored by ``scoring``."""
        if self._native is None and not self._no_native:
            try:
                self._native = self.source.native_split()
            except (OSError, ValueError) as e:
                raise CorruptSplitError(f"{self.split}: the split's index does not open ({e})") from e
            self._no_native = self._native is None
        return self._native

    def _plan(self, query: str | filters.Filter, scoring: bool = True) -> Any:
        """``query`` as a plan for the native engine, as ``_query(query, scoring)`` compiles it; on a
        split fetched by the piece, the index sections it reads fetched first (as ``_query`` does,
        but no FST term dictionary built: the native engine reads the SSTables)."""
        if not self.source.complete:
            compiled = self.filters.compile(query, scoring) if not isinstance(query, str) else self._query_text(query)
            if compiled is not None:
                self.source.ensure_fields(*query_needs(compiled, self._field_names))
        if isinstance(query, str):
            if query.strip() in ("", "*"):
                return PLAN.all_query()
            index = self._index_for(PLAN)
            return compile_query(index, self.mapping, filters.QueryString(query), self.text_fields, plan=True)
        return self.filters.compile(query, scoring, PLAN)

    def _native_row_hits(self, native: NativeSplit, query: str | filters.Filter, n: int) -> tuple[np.ndarray, Hits]:
        """Documents matching ``query`` through the native engine, among them the ``n`` of lowest row
        (all when rows do not follow ``__row``): (their rows as uint64, in the order of the hits; the hits)."""
        plan = self._plan(query, scoring=False)
        if self._segment_starts is None and self._offsets_by_ordinal is None and n < self.num_docs:
            hits, rows = native.first_by(plan, query, n, ROW_FIELD)  # the n lowest by __row, in Tantivy
            return rows, hits
        # rows are document ordinals (the first n in document order are the lowest), else every match
        hits = native.matches(plan, query, n if self._segment_starts is not None else None)
        return as_numpy(self._native_rows(native, hits)).astype(np.uint64), hits

    def _native_rows(self, native: NativeSplit, hits: Hits) -> pa.Array:
        """Row numbers (into ``rows``) of ``hits``, as ``_rows_of`` gives them."""
        if self._segment_starts is not None:
            return numbers(self._segment_starts[hits.ords] + hits.docs, pa.uint64())
        rows = native.fast_values(ROW_FIELD, "u64", hits)
        if self._offsets_by_ordinal is None:
            return rows
        offsets = np.asarray(self._offsets_by_ordinal, np.uint64)[hits.ords]
        return numbers(as_numpy(rows).astype(np.uint64) + offsets, pa.uint64())

    @guarded(lambda self, query=None, *a, **k: f"score statistics of query {query!r} on split {self.split}")
    def score_stats(self, query: str | filters.Filter) -> ScoreStats | None:
        """This split's BM25 statistics for ``query`` (None: a query part whose score is not modelled,
        ``scoring``, on a split read by the piece): summed over the splits a query reads, they score
        each split as one index would."""
        native = self._native_split()
        if native is not None:
            return native.stats(self._plan(query), query)
        return self._modelled_stats(query)

    def _modelled_stats(self, query: str | filters.Filter) -> ScoreStats | None:
        """``score_stats`` through ``scoring`` (the ``tantivy`` package's split, a split read by the piece)."""
        try:
            compiled = self._query(query, scoring=True)
            return split_stats(self.searcher, compiled, self._split_files(), self._field_names)
        except Unsupported as e:
            log.warning("_score: split-local BM25 scores for query %r (%s)", query, e)
            return None
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on this split: {e}") from e

    @guarded(lambda self, query=None, *a, **k: f"scored query {query!r} on split {self.split}")
    def scored(
        self,
        query: str | filters.Filter,
        limit: int | None = None,
        stats: ScoreStats | None = None,
        floor: float | None = None,
    ) -> tuple[pa.Array, np.ndarray]:
        """Row numbers (into ``rows``) and BM25 scores (float32) of the documents matching ``query``,
        best first (ties by row), at most ``limit``. ``stats``: the table's statistics
        (``score_stats`` summed over the splits read): scores as one index over the table gives;
        None: this split's own. On a local split the native engine keeps only the best ``limit``
        (Tantivy's top-k with the table's statistics); on one read by the piece every hit is
        rescored (``scoring.table_scores``). ``floor``: a score the caller needs no hit at or below
        (the table's ``limit``-th best so far): the native engine skips them while it searches; other
        splits may return them."""
        native = self._native_split()
        if native is not None:
            return self._native_scored(native, query, limit, stats, floor)
        return self._rescored(query, limit, stats)

    def _rescored(
        self, query: str | filters.Filter, limit: int | None, stats: ScoreStats | None
    ) -> tuple[pa.Array, np.ndarray]:
        """``scored`` through ``scoring``: every hit of the ``tantivy`` package rescored with ``stats``."""
        n = self.num_docs if limit is None or stats is not None else min(limit, self.num_docs)
        if n <= 0:
            return numbers([], pa.uint64()), np.zeros(0, np.float32)
        try:
            compiled = self._query(query, scoring=True)  # first: it may open the index again
            hits = self.searcher.search(compiled, n, count=False).hits
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on this split: {e}") from e
        scores = np.fromiter((s for s, _ in hits), np.float32, len(hits))
        if stats is not None and hits:
            rescored = table_scores(
                self.searcher, self.index.schema, compiled, hits, self._split_files(), self._field_names, stats
            )
            if rescored is not None:
                scores = rescored
        rows = as_numpy(self._rows_of([address for _, address in hits])).astype(np.int64)
        return _best_first(rows, scores, limit)

    def _native_scored(
        self,
        native: NativeSplit,
        query: str | filters.Filter,
        limit: int | None,
        stats: ScoreStats | None,
        floor: float | None = None,
    ) -> tuple[pa.Array, np.ndarray]:
        n = self.num_docs if limit is None else min(limit, self.num_docs)
        if n <= 0:
            return numbers([], pa.uint64()), np.zeros(0, np.float32)
        row_field = None if self._segment_starts is not None else ROW_FIELD
        ords, docs, scores, fast_rows = native.top_k(self._plan(query), query, n, stats, row_field, floor)
        if self._segment_starts is not None:
            rows = self._segment_starts[ords] + docs.astype(np.int64)
        else:
            assert fast_rows is not None
            rows = fast_rows.astype(np.int64)
            if self._offsets_by_ordinal is not None:
                rows = rows + np.asarray(self._offsets_by_ordinal, np.int64)[ords]
        return _best_first(rows, scores, limit)

    @guarded(lambda self, query=None, column=None, *a, **k: f"snippets of {column!r} for query {query!r}")
    def snippets(
        self,
        query: str | filters.Filter,
        column: str,
        texts: Sequence[str | None],
        tags: tuple[str, str] = ("<b>", "</b>"),
        max_chars: int = 150,
    ) -> pa.Array:
        """For each of ``texts`` (values of the text or string ``column``), the fragment of at most
        ``max_chars`` around the terms of ``query`` on that column, each match between ``tags``, as
        Tantivy's ``SnippetGenerator`` picks it (the text as it is, not HTML-escaped; no match: the
        text's start, unmarked). None stays None."""
        field = self.mapping.field(column)
        if field is None or field.type != "text":
            raise QueryError(f"_snippet_{column}: column {column!r} is not a text or string field of the split")
        native = self._native_split()
        if native is not None:
            return pa.array(native.snippets(self._plan(query), query, column, texts, tags, max_chars), pa.string())
        try:
            compiled = self._query(query, scoring=True)
            generator = tantivy.SnippetGenerator.create(self.searcher, compiled, self.index.schema, column)
        except ValueError as e:
            raise QueryError(f"_snippet_{column}: query {query!r} cannot make snippets: {e}") from e
        generator.set_max_num_chars(max_chars)
        return pa.array(marked_snippets(generator, column, texts, tags), pa.string())

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
            return empty_table(self.rows.schema).select(
                list(columns) if columns is not None else self.rows.column_names
            )
        wanted = list(columns) if columns is not None else self.rows.column_names
        native = self._native_split()
        if native is not None:  # best first by the split's own scores, as Tantivy's search gives them
            plan = PLAN.all_query() if query is None else self._plan(query, scoring=False)
            ords, docs, _, _ = native.top_k(plan, query, n, None, None)
            return self._hit_rows(Hits(ords, docs), wanted)
        try:
            compiled = self._query(query)  # first: it may open the index again
            hits = self.searcher.search(compiled, n, count=False).hits
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on this split: {e}") from e
        return self._hit_rows([address for _, address in hits], wanted)

    def fast_columns(self, columns: Sequence[str]) -> list[str]:
        """Those of ``columns`` whose values a query's hits read from Tantivy's fast fields rather than
        the rows: stored numeric and boolean fast fields (``tantivy``'s ``fast_field_values`` reads
        i64, u64, f64 and bool) of a column of integers, floats or booleans. Not a companion split's
        (its rows are the source's), not an index-only column (it reads as null), not a string
        column indexed by its hash."""
        if self.companion:
            return []
        found = []
        for name in columns:
            field = self.mapping.field(name)
            if field is None or not field.fast or not field.stored or field.type not in _FAST_VALUE_TYPES:
                continue
            if name in self.hashed or name not in self.rows.column_names:
                continue
            t = self.rows.schema.field(name).type
            if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t):
                found.append(name)
        return found

    @guarded(lambda self, query=None, *a, **k: f"query {query!r} on split {self.split}")
    def row_hits(
        self, query: str | filters.Filter, limit: int | None = None
    ) -> tuple[pa.Array, list[Any] | Hits, np.ndarray]:
        """``row_ids(query, limit)`` with the hits' documents: (the row ids, ascending; the documents
        (``Hits`` of the native engine, else the ``tantivy`` package's addresses), in the order the
        search returned them; the positions in them of each row id), for reading fast fields
        (``fast_values``)."""
        n = self.num_docs if limit is None else min(limit, self.num_docs)
        if n <= 0:
            return numbers([], pa.uint64()), [], np.zeros(0, np.int64)
        native = self._native_split()
        if native is not None:
            rows, hits = self._native_row_hits(native, query, n)
            order = np.argsort(rows, kind="stable")[:n]
            return numbers(rows[order], pa.uint64()), hits, order
        try:
            compiled = self._query(query)  # first: it may open the index again
            if self._segment_starts is not None:  # rows are document ordinals: any n matches
                hits = self.searcher.search(compiled, n, count=False).hits
            elif self._offsets_by_ordinal is not None:  # row order is not __row order: every match
                hits = self.searcher.search(compiled, self.num_docs, count=False).hits
            else:
                hits = self.searcher.search(
                    compiled, n, count=False, order_by_field=ROW_FIELD, order=tantivy.Order.Asc
                ).hits
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on this split: {e}") from e
        addresses = [address for _, address in hits]
        rows = self._rows_of(addresses)
        order = np.argsort(as_numpy(rows), kind="stable")[:n]
        return rows.take(numbers(order, pa.int64())), addresses, order

    def fast_values(
        self, columns: Sequence[str], addresses: list[Any] | Hits, order: np.ndarray
    ) -> dict[str, pa.Array]:
        """The values of the fast-field ``columns`` (``fast_columns``) of the documents at
        ``addresses[order]`` (``row_hits``'s), each in the rows' type (nulls where a document has none)."""
        out = {}
        for name in columns:
            field = self.mapping.field(name)
            assert field is not None
            if isinstance(addresses, Hits):
                native = self._native_split()
                assert native is not None
                values = native.fast_values(name, field.type, addresses.take(order))
                out[name] = values.cast(self.rows.schema.field(name).type)
                continue
            values = pa.array(self.searcher.fast_field_values(name, addresses), _FAST_VALUE_TYPES[field.type])
            out[name] = values.take(numbers(order, pa.int64())).cast(self.rows.schema.field(name).type)
        return out

    def _hit_rows(self, addresses: list[Any] | Hits, columns: list[str]) -> pa.Table:
        """The rows of the documents at ``addresses``, in that order: fast-field columns
        (``fast_columns``) from the fast fields, the others from the rows."""
        fast = self.fast_columns(columns)
        if not fast:
            return take_rows(self.rows, self._hit_ids(addresses)).select(columns)
        values = self.fast_values(fast, addresses, np.arange(len(addresses)))
        ids = self._hit_ids(addresses) if len(fast) < len(columns) else numbers(np.zeros(len(addresses)), pa.uint64())
        return self.rows_with(ids, columns, values)

    def _hit_ids(self, addresses: list[Any] | Hits) -> pa.Array:
        if isinstance(addresses, Hits):
            native = self._native_split()
            assert native is not None
            return self._native_rows(native, addresses)
        return self._rows_of(addresses)

    def rows_at(self, ids: pa.Array, columns: Sequence[str]) -> pa.Table:
        """The rows ``ids`` (uint64, ascending) as ``columns``: the fast-field ones (``fast_columns``)
        from Tantivy's fast fields when the native engine reads the split and its rows are document
        ordinals (a row's segment and doc follow from ``segment_starts``), the others from the rows. A
        scored search's best rows of a split: 10 ids cost 1 ms from the doc store's blocks, a few
        microseconds from the fast fields.

        Example: ``searcher.rows_at(pa.array([3, 70], pa.uint64()), ["id", "message"])``
        """
        native = self._native_split() if self._segment_starts is not None and len(ids) else None
        fast = self.fast_columns(columns) if native is not None else []
        if not fast:
            return take_rows(self.rows.select(list(columns)), ids)
        assert self._segment_starts is not None
        rows = as_numpy(ids).astype(np.int64)
        starts = np.asarray(self._segment_starts, np.int64)
        ords = np.searchsorted(starts, rows, side="right") - 1  # an empty segment shares the next one's start
        hits = Hits(ords.astype(np.uint32), (rows - starts[ords]).astype(np.uint32))
        return self.rows_with(ids, columns, self.fast_values(fast, hits, np.arange(len(hits))))

    def rows_with(self, ids: pa.Array, columns: Sequence[str], values: Mapping[str, pa.Array]) -> pa.Table:
        """The rows ``ids`` as ``columns``: those in ``values`` as given (one value a row), index-only
        ones as nulls, the others taken from the rows (nothing is read when there are none)."""
        if not values:
            return take_rows(self.rows.select(list(columns)), ids)
        read = [c for c in columns if c not in values and c not in self.index_only]
        taken = take_rows(self.rows.select(read), ids) if read else None
        fields, arrays = [], []
        for name in columns:
            if taken is not None and name in read:
                fields.append(taken.schema.field(name))
                arrays.append(taken.column(name))
            else:
                column = values[name] if name in values else pa.nulls(len(ids), self.rows.schema.field(name).type)
                fields.append(pa.field(name, column.type))
                arrays.append(column)
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _best_first(rows: np.ndarray, scores: np.ndarray, limit: int | None) -> tuple[pa.Array, np.ndarray]:
    """Rows and scores best first, ties by row, at most ``limit``."""
    order = np.lexsort((rows, -scores.astype(np.float64)))
    if limit is not None:
        order = order[:limit]
    return numbers(rows[order], pa.uint64()), scores[order]


_FAST_VALUE_TYPES = {"i64": pa.int64(), "u64": pa.uint64(), "f64": pa.float64(), "bool": pa.bool_()}
