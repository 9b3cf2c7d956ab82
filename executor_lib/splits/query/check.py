"""A query checked against a split's doc mapping before any task runs (``check_query``), and what
decides how a column's query text is read: list columns (``list_columns``) and columns indexed as
hashes of their strings (``hashed_columns``, tantivy4java's ``exact_only`` mode).
"""

from __future__ import annotations

import pyarrow as pa
import tantivy

from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.panics import guarded
from executor_lib.splits.query.compile import compile_query
from executor_lib.splits.query.syntax import check_wildcard_sizes
from executor_lib.splits.tokenizers import register as register_analyzers
from executor_lib.splits.write.writer import tantivy_schema
from indextables_contract import filters
from indextables_contract.errors import QueryError


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
