"""A word search that cannot find what its text says (issue 76): ``indexquery`` with a word of two or more
characters, a phrase or a wildcard inside a word, against an exact-string column.

A string column is indexed, as IndexTables4Spark indexes it, as one exact value per row (``text`` with the
``raw`` tokenizer, or a hash of the value in tantivy4java's ``exact_only`` mode) unless the write set
``spark.indextables.indexing.typemap.<col>=text``. ``message indexquery 'timeout'`` then finds only rows
whose whole message is ``timeout``: usually none, and nothing says why. ``exact_word_warning`` names the
column, its type and the option; the read turns it into a warning on the client (the schema's
``QUERY_WARNINGS_METADATA``), or, with ``spark.indextables.read.strictQueries=true``, into a ``QueryError``.

``fieldmatch`` (the operator for whole values) and ``=`` are never warned about, nor a one-character
term. The default stays a warning because IndexTables4Spark runs the same query and answers the same rows.
"""

from __future__ import annotations

import re

import pyarrow as pa

from executor_lib.splits.doc_mapping import DocMapping
from indextables_contract import filters as F
from indextables_contract import settings as S

_OPERATORS = frozenset({"AND", "OR", "NOT", "TO", "&&", "||", "!"})
# a quoted phrase, a range ([a TO b] / {a TO b}: values, not words), or a bare term
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[{][^\]}]*[\]}]|[^\s()"]+')


def word_in(text: str) -> str | None:
    """What in Tantivy query text is a search for words, as a user sees it: ``the word 'timeout'``, ``the
    phrase "connection reset"``, ``the wildcard 'time*'``; None if its terms are single characters,
    ranges or operators only."""
    for token in _TOKEN.findall(text):
        if token[0] in "[{" or token in _OPERATORS:
            continue
        if token.startswith('"'):
            inner = token[1:-1].strip()
            if len(inner.split()) > 1:
                return f"the phrase {token}"
            if len(inner) >= 2:
                return f"the word {inner!r}"
            continue
        term = re.sub(r"(\^[\d.]+|~\d*)$", "", token.lstrip("+-"))  # a boost, a fuzzy or slop suffix
        if ("*" in term or "?" in term) and term.strip("*?"):
            return f"the wildcard {term!r}"
        if len(term) >= 2 and term not in _OPERATORS:
            return f"the word {term!r}"
    return None


def exact_kind(column: str, mapping: DocMapping, table_arrow: pa.Schema | None) -> str | None:
    """How ``column`` is indexed if it is an exact-string column of ``mapping`` (words in it not
    searchable), else None."""
    from executor_lib.splits.query.check import hashed_columns

    field = mapping.field(column)
    if field is None:
        return None
    if field.type == "text" and field.tokenizer == "raw":
        return "string, indexed as one exact value per row"
    if column in hashed_columns(mapping, table_arrow):
        return "string, indexed as a hash of each whole value (exact_only)"
    return None


def exact_word_warning(
    query: F.QueryString, mapping: DocMapping, table_arrow: pa.Schema | None, strict: bool = False
) -> str | None:
    """The warning (``strict``: the error's text) for an ``indexquery`` of words against an exact-string
    column, or None.

    Example: ``exact_word_warning(F.QueryString("timeout", "message"), mapping, schema)`` on a table written
    without ``typemap.message=text``: ``indexquery 'timeout' on column 'message' (string, indexed as one
    exact value per row) matches whole values only: ...``
    """
    if query.kind is not None or query.column is None:  # textsearch / fieldmatch say what they mean
        return None
    kind = exact_kind(query.column, mapping, table_arrow)
    if kind is None:
        return None
    found = word_in(query.query)
    if found is None:
        return None
    shown = query.query if len(query.query) <= 80 else query.query[:80] + "..."
    text = (
        f"indexquery {shown!r} on column {query.column!r} ({kind}) matches whole values only: {found} finds "
        f"a row only if its whole {query.column} is that, not rows containing it; to search words, write the "
        f"table with {S.INDEXING_TYPEMAP.prefix}{query.column}=text"
    )
    if strict:
        return f"{text}; fieldmatch or = match whole values ({S.READ_STRICT_QUERIES.key}=true)"
    strict_key = S.READ_STRICT_QUERIES.key
    return f"{text} (fieldmatch or = match whole values without this warning; {strict_key}=true makes it an error)"
