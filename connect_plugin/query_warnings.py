"""The warnings of a read's queries, shown on the client (issue 76): an ``indexquery`` word, phrase or
wildcard against an exact-string column matches whole values only, and would answer 0 rows silently.

The data source finds them at analysis (``executor_lib.splits.query.exact_words``) and puts their text in
the read's schema (``QUERY_WARNINGS_METADATA`` on its first field); here each becomes one
``QueryWarning`` (``warnings.warn``). A read's schema is asked only for a read whose filter holds an
``indexquery`` on a column, and what it said is kept per session, table and filter for
``CACHE_TTL_S`` seconds, so a query run again costs no request. ``spark.indextables.read.strictQueries=true``
makes such a query an error on the cluster instead.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from indextables_contract import filters as F
from indextables_contract.errors import QueryWarning
from indextables_contract.read import QUERY_WARNINGS_METADATA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

CACHE_TTL_S = 300.0
_said: dict[tuple[str, str, str], tuple[float, tuple[str, ...]]] = {}


def column_queries(tree: F.Filter | None) -> list[F.QueryString]:
    """The ``indexquery`` strings on a column in ``tree`` (not textsearch/fieldmatch, not ``indexqueryall``)."""
    if tree is None:
        return []
    if isinstance(tree, F.QueryString):
        return [tree] if tree.column is not None and tree.kind is None else []
    if isinstance(tree, (F.And, F.Or)):
        return [q for c in tree.children for q in column_queries(c)]
    if isinstance(tree, F.Not):
        return column_queries(tree.child)
    return []


def warnings_in(schema: Any) -> list[str]:
    """The query warnings a read's schema carries."""
    found: list[str] = []
    for f in getattr(schema, "fields", ()):
        text = (f.metadata or {}).get(QUERY_WARNINGS_METADATA)
        if text:
            found.extend(w for w in json.loads(text) if w not in found)
    return found


def show(texts: Iterable[str], stacklevel: int = 3) -> None:
    for text in texts:
        warnings.warn(QueryWarning(text), stacklevel=stacklevel)


def _key(spark: SparkSession) -> str:
    return str(getattr(spark, "session_id", None) or id(spark))


def warn_for_read(spark: SparkSession, path: str, tree: F.Filter | None, read: Callable[[], DataFrame]) -> None:
    """Show the warnings of a read of ``path`` filtered by ``tree``; ``read()`` gives that read's DataFrame
    (only asked when nothing is kept for them: a classic session has its schema already, a Connect one
    asks the server). Once per session, table and filter in ``CACHE_TTL_S`` seconds; ``warnings``' own
    rules then show each text once per process."""
    if not column_queries(tree):
        return
    assert tree is not None
    key = (_key(spark), path, F.to_text(tree))
    now = time.monotonic()
    seen = _said.get(key)
    if seen is None or now - seen[0] > CACHE_TTL_S:
        schema = _schema_or_none(read)
        if schema is None:
            return
        seen = _said[key] = (now, tuple(warnings_in(schema)))
        if len(_said) > 1000:
            _said.pop(next(iter(_said)))
    show(seen[1], stacklevel=4)


def warn_for_options(option_names: Iterable[str], df: DataFrame) -> None:
    """The query warnings of a ``spark.read.format("indextables")...load()`` with ``indexquery.<col>``
    options (``connect_plugin.install`` hooks ``load``): its schema says them (a Connect session asks)."""
    if any(str(name).lower().startswith("indexquery.") for name in option_names):
        schema = _schema_or_none(lambda: df)
        show(warnings_in(schema), stacklevel=4)


def _schema_or_none(read: Callable[[], DataFrame]) -> Any:
    """The read's schema, or None where its analysis fails: the check for warnings never moves an error,
    which the read reports where it always did (a Spark Connect DataFrame at its first action)."""
    try:
        return read().schema
    except Exception:
        return None
