"""Searching one split: a Tantivy query string in, Arrow rows out.

This project's splits carry a columnar copy of their rows: hits become row numbers through
the ``__row`` fast field and the rows are taken from the copy in one vectorized ``take``.

Splits written by IndexTables4Spark have no columnar copy, and the ``tantivy`` Python
package cannot run term or range queries on them (their term dictionaries are SSTables;
term queries fail and range queries silently match nothing). Such a split is therefore
*transcoded* on first use: its rows are read once through the doc store and re-indexed,
with the split's own doc mapping, into a split of this project's format next to it in the
work directory. Queries then have exactly Tantivy's semantics on both kinds of split.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import tantivy

from executor_lib.errors import IndexTablesError
from executor_lib.splits.bundle import CorruptSplitError, extract_bundle, read_footer, read_member
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.writer import COLUMNS_MEMBER, DOC_MAPPING_MEMBER, ROW_FIELD, write_split


class QueryError(IndexTablesError):
    """A query that cannot run: bad syntax, unknown column, a field type that cannot answer it."""


class SplitSearcher:
    """Search one local split file. ``work_dir`` holds its extracted (or transcoded) index."""

    def __init__(self, split: Path, work_dir: Path, arrow_schema: pa.Schema, doc_mapping: str | None) -> None:
        self.split = split
        self.work_dir = work_dir
        footer = read_footer(split)
        if COLUMNS_MEMBER not in footer.files:
            split, footer = self._transcode(split, footer, arrow_schema, doc_mapping)
        index_dir = work_dir / "index"
        if not (index_dir / "meta.json").exists():
            tmp = work_dir / "index.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            extract_bundle(split, footer, tmp)
            tmp.rename(index_dir)
        columns = read_member(split, footer, COLUMNS_MEMBER)
        mapping_json = read_member(split, footer, DOC_MAPPING_MEMBER)
        if columns is None or mapping_json is None:
            raise CorruptSplitError(f"{split}: split lacks its columnar copy or doc mapping")
        self.rows = pa.ipc.open_file(pa.BufferReader(columns)).read_all()
        self.mapping = DocMapping.from_json(mapping_json.decode())
        try:
            self.index = tantivy.Index.open(str(index_dir))
        except (OSError, ValueError) as e:
            raise CorruptSplitError(f"{self.split}: the split's index does not open ({e})") from e
        self.searcher = self.index.searcher()
        self.text_fields = [
            name
            for name, t in zip(self.rows.column_names, self.rows.schema.types, strict=True)
            if pa.types.is_string(t)
        ]

    def _transcode(self, split: Path, footer: Any, schema: pa.Schema, doc_mapping: str | None) -> tuple[Path, Any]:
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
        mapping = DocMapping.from_json(doc_mapping)
        raw_dir = self.work_dir / "source"
        shutil.rmtree(raw_dir, ignore_errors=True)
        extract_bundle(split, footer, raw_dir)
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
            columns[f.name] = pa.array(values, type=arrow_type)
        written = write_split(pa.table(columns), mapping, out)
        shutil.rmtree(raw_dir, ignore_errors=True)
        return written.path, written.footer

    @property
    def num_docs(self) -> int:
        return int(self.searcher.num_docs)

    def _query(self, query: str | None) -> Any:
        if query is None or query.strip() in ("", "*"):
            return tantivy.Query.all_query()
        try:
            return self.index.parse_query(query, self.text_fields)
        except ValueError as e:
            raise QueryError(f"query {query!r} does not parse: {e}") from e

    def count(self, query: str | None = None) -> int:
        return int(self.searcher.search(self._query(query), 1, count=True).count)  # type: ignore[attr-defined]

    def aggregate(self, aggregations: Mapping[str, Any], query: str | None = None) -> dict[str, Any]:
        """Elasticsearch-style aggregations (count/sum/avg/min/max/stats, terms, histogram,
        date_histogram, range) over the rows matching ``query``, computed on fast fields."""
        self._check_aggregation_fields(aggregations, "")
        try:
            return dict(self.searcher.aggregate(self._query(query), dict(aggregations)))
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

    def search(
        self, query: str | None = None, columns: Sequence[str] | None = None, limit: int | None = None
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
            hits = self.searcher.search(self._query(query), n, count=False).hits
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on this split: {e}") from e
        row_ids = self.searcher.fast_field_values(ROW_FIELD, [address for _, address in hits])
        table = self.rows.take(pa.array(row_ids, type=pa.uint64()))
        return table.select(list(columns)) if columns is not None else table
