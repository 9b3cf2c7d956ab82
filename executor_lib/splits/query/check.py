"""A query checked against a split's doc mapping before any task runs (``check_query``), and what
decides how a column's query text is read: list columns (``list_columns``) and columns indexed as
hashes of their strings (``hashed_columns``, tantivy4java's ``exact_only`` mode).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import tantivy

from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.panics import guarded
from executor_lib.splits.query.compile import compile_query
from executor_lib.splits.query.syntax import check_wildcard_sizes
from executor_lib.splits.tokenizers import analyzer_name
from executor_lib.splits.tokenizers import register as register_analyzers
from executor_lib.splits.write.index_schema import ROW_FIELD, in_index
from indextables_contract import filters
from indextables_contract.errors import QueryError


def list_columns(schema: pa.Schema | None) -> frozenset[str]:
    """The columns holding lists of scalars (indexed as ``{"_values": [...]}`` by ``native/src/writer.rs``)."""
    if schema is None:
        return frozenset()
    lists = (f for f in schema if pa.types.is_list(f.type) or pa.types.is_large_list(f.type))
    return frozenset(f.name for f in lists if not pa.types.is_struct(f.type.value_type))


@guarded(lambda mapping, *a, **k: f"Tantivy schema of doc mapping {[f.name for f in mapping.fields]}")
def tantivy_schema(mapping: DocMapping, row_field: bool = True) -> Any:
    """The ``tantivy`` package's schema of a doc mapping (the one ``write.index_schema`` gives the native
    writer), plus (``row_field``) the hidden row-number fast field: queries are checked against it."""
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
    check_wildcard_sizes(query.query)
    try:
        compile_query(index, mapping, query, mapping.default_query_fields(), list_columns(schema))
    except ValueError as e:  # Tantivy refused a part (a regex past its size limit): typed, as a search gives it
        raise QueryError(f"query {_shown(query.query)!r} cannot be built: {e}") from e


def _shown(text: str) -> str:
    return text if len(text) <= 200 else f"{text[:200]}... ({len(text)} characters)"


def hashed_columns(mapping: DocMapping, schema: pa.Schema | None) -> frozenset[str]:
    """Columns indexed as tantivy4java's ``exact_only`` mode does: a u64 field over a string column."""
    if schema is None:
        return frozenset()
    strings = {f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)}
    return frozenset(f.name for f in mapping.fields if f.type == "u64" and f.name in strings)
