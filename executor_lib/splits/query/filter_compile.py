"""A structured filter (``indextables_contract.filters``) compiled into a Tantivy query for one split,
through a query builder: ``plan.TANTIVY`` (the ``tantivy`` package's ``Query``) or ``plan.PLAN`` (the
native engine's plan). Query strings go to ``compile.compile_query``; equalities, ranges, prefixes,
regexes and ``exists`` become term, range, regex and exists queries of the split's field types, and
tantivy4java's hashed string columns (``exact_only``, ``text_*_exactonly``) are searched by hash.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping
from typing import Any

import tantivy

from executor_lib.format.tantivy4java.parquet_manifest import hash_string_value
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.query.compile import compile_query
from executor_lib.splits.query.plan import PLAN, TANTIVY
from indextables_contract import filters
from indextables_contract.errors import QueryError

_RANGE_TYPES = {
    "i64": tantivy.FieldType.Integer,
    "u64": tantivy.FieldType.Unsigned,
    "f64": tantivy.FieldType.Float,
    "datetime": tantivy.FieldType.Date,
}


class FilterCompiler:
    """Compiles the filters of one split (its doc mapping, hashed columns and default query fields).

    ``index_for(q)``: what ``compile_query`` asks of an index for the builder ``q`` (its ``schema``,
    ``parse_query``): the native engine's parser for ``PLAN``, the ``tantivy`` package's index else.

    Example: ``FilterCompiler(mapping, set(), {}, ["msg"], set(), index_for).compile(Term("level", "ERROR"))``
    """

    def __init__(
        self,
        mapping: DocMapping,
        hashed: frozenset[str] | set[str],
        pattern_fields: Mapping[str, tuple[str, str]],
        text_fields: list[str],
        list_columns: Any,
        index_for: Callable[[Any], Any],
    ) -> None:
        self.mapping, self.hashed, self.pattern_fields = mapping, hashed, pattern_fields
        self.text_fields, self.list_columns, self.index_for = text_fields, list_columns, index_for

    def hashed_query(self, column: str, text: str, q: Any = TANTIVY) -> Any:
        """tantivy4java's ``rewrite_query_for_string_indexing`` of a query on one column: on an
        ``exact_only`` column, the term of the text's hash; on a ``text_*_exactonly`` column whose pattern
        the text matches, the term of the first match's hash in ``<column>__uuids``; else None."""
        schema = self.index_for(q).schema
        if column in self.hashed:
            return q.term_query(schema, column, hash_string_value(text), "freq")
        if column in self.pattern_fields:
            name, pattern = self.pattern_fields[column]
            found = re.search(pattern, text)
            if found is not None:
                return q.term_query(schema, name, hash_string_value(found.group(0)), "freq")
        return None

    def field(self, column: str, what: str) -> Any:
        field = self.mapping.field(column)
        if field is None:
            raise QueryError(f"{what}: column {column!r} is not in the split")
        return field

    @staticmethod
    def _value(field: Any, value: Any) -> Any:
        if field.type == "datetime" and hasattr(value, "isoformat") and not hasattr(value, "hour"):
            return datetime.datetime(value.year, value.month, value.day)
        return value

    def compile(self, f: filters.Filter, scoring: bool = False, q: Any = TANTIVY) -> Any:
        """A structured filter as a Tantivy query (QueryError if the field type cannot answer it).
        ``scoring``: the parts that are not query strings (comparisons, NOT) score 0, so that a score
        ranks by the query text alone, as a search engine's filter context. ``q``: the builder
        (``plan.TANTIVY``, or ``plan.PLAN`` for the native engine)."""
        if scoring and isinstance(f, (filters.And, filters.Or)):
            children = filters.combine_ranges(f.children) if isinstance(f, filters.And) else f.children
            occur = q.Must if isinstance(f, filters.And) else q.Should
            return q.boolean_query([(occur, self.compile(c, True, q)) for c in children])
        if scoring and not isinstance(f, filters.QueryString):
            return q.const_score_query(self.compile(f, False, q), 0.0)
        schema = self.index_for(q).schema
        if isinstance(f, filters.QueryString):
            if f.column is not None:
                self.field(f.column, f"query {f.query!r}")
                hashed = self.hashed_query(f.column, f.query, q)
                if hashed is not None:
                    return hashed
            return compile_query(self.index_for(q), self.mapping, f, self.text_fields, self.list_columns, q is PLAN)
        if isinstance(f, (filters.And, filters.Or)):
            children = filters.combine_ranges(f.children) if isinstance(f, filters.And) else f.children
            occur = q.Must if isinstance(f, filters.And) else q.Should
            return q.boolean_query([(occur, self.compile(c, False, q)) for c in children])
        if isinstance(f, filters.Not):
            return q.boolean_query([(q.Must, q.all_query()), (q.MustNot, self.compile(f.child, False, q))])
        field = self.field(f.column, type(f).__name__)
        exact_text = field.type == "text" and field.tokenizer == "raw"
        if isinstance(f, (filters.Term, filters.TermIn)):
            if field.type == "text" and not exact_text:
                raise QueryError(f"equality on tokenized text column {f.column!r}: use a query string")
            values = [f.value] if isinstance(f, filters.Term) else list(f.values)
            values = [self._value(field, v) for v in values]
            if f.column in self.hashed:  # exact_only: the index holds the values' hashes
                values = [hash_string_value(str(v)) for v in values]
            if isinstance(f, filters.Term):
                return q.term_query(schema, f.column, values[0], "freq")  # no positions read
            return q.term_set_query(schema, f.column, values)
        if isinstance(f, filters.Between):
            kind = _RANGE_TYPES.get(field.type)
            if kind is None:
                raise QueryError(f"range on column {f.column!r} of type {field.type}: not answerable by the index")
            return q.range_query(
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
            return q.regex_query(schema, f.column, pattern)
        if isinstance(f, filters.Exists):
            if not field.fast:
                raise QueryError(f"exists on column {f.column!r}: needs a fast field")
            return q.exists_query(f.column)
        raise QueryError(f"unsupported filter {f!r}")
