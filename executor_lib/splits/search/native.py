"""The native engine (``native/``, the ``indextables_native`` extension) for one split: opened in
place, it scores a query's best k with the table's BM25 statistics at Tantivy's own speed.

What it does today (issue 69): ranked search (``_score``): ``stats`` gives a split's share of the
table's statistics and ``top_k`` its best hits scored with the table's, so no hit comes back to
Python to be rescored; filters: ``count``, the matching documents as arrays (``matches``, or the
first by a fast field, ``first_by``) and the values of a numeric fast field for them
(``fast_values``), with no Python object per hit; aggregations (``aggregate``: Tantivy's, their
request and results as JSON); snippets (``snippets``: Tantivy's ``SnippetGenerator``, marked in
Rust). A split is opened from its local file (a local table's split, the split cache's whole copy of
a remote one) or from its files as the cache lays out a split fetched by the piece (``open_files``,
after the query's sections are fetched).

    >>> split = NativeSplit.open(Path("t/splits/part-0.split"))
    >>> stats = split.stats(plan)                       # ScoreStats, summed over the table's splits
    >>> ords, docs, scores, rows = split.top_k(plan, 10, stats, "__row")
    >>> hits = split.matches(plan, None)                # every match, in document order
    >>> split.fast_values("id", "i64", hits)            # an Arrow array, nulls where a doc has none
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from executor_lib.splits.native_module import native_module
from executor_lib.splits.query.plan import Plan, plan_json
from executor_lib.splits.search.scoring import ScoreStats
from indextables_contract.errors import QueryError


def _bits(flags: bytes) -> pa.Buffer:
    """One byte a value (0 or 1) as Arrow's bitmap."""
    return pa.py_buffer(np.packbits(np.frombuffer(flags, np.bool_), bitorder="little"))


@dataclasses.dataclass(frozen=True)
class Hits:
    """Documents of a split: segment ordinals and doc ids (uint32), one each a hit."""

    ords: np.ndarray
    docs: np.ndarray

    def __len__(self) -> int:
        return len(self.docs)

    def take(self, order: np.ndarray) -> Hits:
        return Hits(self.ords[order], self.docs[order])


_FAST_KINDS = {"i64": pa.int64(), "u64": pa.uint64(), "f64": pa.float64(), "bool": pa.bool_()}


class NativeSplit:
    """One split opened in place by the native engine."""

    def __init__(self, split: Any, name: str) -> None:
        self._split, self.name = split, name

    @classmethod
    def open(cls, path: Path) -> NativeSplit:
        """The split file at ``path``, memory-mapped (OSError, ValueError for a split that does not open)."""
        return cls(native_module().Split.open(str(path)), str(path))

    @classmethod
    def open_files(cls, name: str, members: list[tuple[str, Path]]) -> NativeSplit:
        """The split ``name`` laid out as files: (member, local file) of each of its Tantivy files."""
        return cls(native_module().Split.open_files(name, [(m, str(p)) for m, p in members]), name)

    @property
    def num_docs(self) -> int:
        return int(self._split.num_docs)

    def check_query(self, text: str, fields: Sequence[str]) -> None:
        """Tantivy's query parser over ``text`` with the default ``fields``, regexes allowed: a
        ValueError with the parser's message (the ``tantivy`` package's) when it does not parse."""
        self._split.check_query(text, list(fields))

    def stats(self, plan: Plan, query: Any) -> ScoreStats:
        """This split's BM25 statistics for ``plan`` (keys as ``ScoreStats``'s: the field and the
        term's text or number; other terms as "\\x00" and their value's hex)."""
        try:
            num_docs, tokens, freqs = self._split.stats(self._text(plan, query))
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on split {self.name}: {e}") from e
        return ScoreStats(int(num_docs), dict(tokens), dict(freqs))

    def top_k(
        self,
        plan: Plan,
        query: Any,
        k: int,
        stats: ScoreStats | None,
        row_field: str | None,
        floor: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """The best ``k`` hits of ``plan`` scoring above ``floor``, best first: (segment ordinals, doc ids,
        scores as float32, the u64 fast field ``row_field`` of each or None), scored with ``stats``
        (None: the split's own)."""
        table = None if stats is None else (stats.num_docs, stats.field_tokens, stats.doc_freqs)
        try:
            ords, docs, scores, rows = self._split.top_k(self._text(plan, query), k, table, row_field, floor)
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on split {self.name}: {e}") from e
        return (
            np.frombuffer(ords, np.uint32),
            np.frombuffer(docs, np.uint32),
            np.frombuffer(scores, np.float32),
            None if rows is None else np.frombuffer(rows, np.uint64),
        )

    def count(self, plan: Plan, query: Any) -> int:
        """How many documents match ``plan``."""
        try:
            return int(self._split.count(self._text(plan, query)))
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on split {self.name}: {e}") from e

    def matches(self, plan: Plan, query: Any, limit: int | None) -> Hits:
        """The documents matching ``plan`` in document order, at most ``limit`` (the first ones)."""
        try:
            ords, docs = self._split.matches(self._text(plan, query), limit)
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on split {self.name}: {e}") from e
        return Hits(np.frombuffer(ords, np.uint32), np.frombuffer(docs, np.uint32))

    def first_by(self, plan: Plan, query: Any, limit: int, field: str) -> tuple[Hits, np.ndarray]:
        """The ``limit`` documents matching ``plan`` lowest by the u64 fast field ``field``, with its values."""
        try:
            ords, docs, values = self._split.first_by(self._text(plan, query), limit, field)
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on split {self.name}: {e}") from e
        return Hits(np.frombuffer(ords, np.uint32), np.frombuffer(docs, np.uint32)), np.frombuffer(values, np.uint64)

    def aggregate(self, plan: Plan, query: Any, aggregations: Mapping[str, Any]) -> dict[str, Any]:
        """Elasticsearch-style ``aggregations`` (Tantivy's) over the documents matching ``plan``."""
        try:
            request = json.dumps(aggregations, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise QueryError(f"aggregation {aggregations!r} is not JSON: {e}") from e
        try:
            return dict(json.loads(self._split.aggregate(self._text(plan, query), request)))
        except ValueError as e:
            raise QueryError(f"aggregation {request} failed on split {self.name}: {e}") from e

    def snippets(
        self, plan: Plan, query: Any, column: str, texts: Sequence[str | None], tags: tuple[str, str], max_chars: int
    ) -> list[str | None]:
        """Each of ``texts`` as Tantivy's snippet of the text column ``column`` for ``plan``, each
        match between ``tags`` (``SplitSearcher.snippets``)."""
        try:
            return list(self._split.snippets(self._text(plan, query), column, list(texts), tags, max_chars))
        except ValueError as e:
            what = f"_snippet_{column}: query {query!r}"
            raise QueryError(f"{what} cannot make snippets on split {self.name}: {e}") from e

    def fast_values(self, field: str, kind: str, hits: Hits) -> pa.Array:
        """The fast field ``field`` ("i64", "u64", "f64" or "bool" ``kind``) of ``hits``, nulls where a
        document has none."""
        try:
            ords, docs = hits.ords.astype(np.uint32).tobytes(), hits.docs.astype(np.uint32).tobytes()
            values, present = self._split.fast_values(field, kind, ords, docs)
        except ValueError as e:
            raise QueryError(f"fast field {field!r} of split {self.name}: {e}") from e
        n = len(hits)
        mask = None if present is None else _bits(present)
        data = _bits(values) if kind == "bool" else pa.py_buffer(values)
        nulls = 0 if present is None else n - int(np.count_nonzero(np.frombuffer(present, np.uint8)))
        return pa.Array.from_buffers(_FAST_KINDS[kind], n, [mask, data], null_count=nulls)

    @staticmethod
    def _text(plan: Plan, query: Any) -> str:
        try:
            return plan_json(plan)
        except ValueError as e:
            raise QueryError(f"query {query!r}: {e}") from e


class NativeParser:
    """What the query compiler (``query.compile``) asks of an index while it builds a plan for the
    native engine: Tantivy's parser as a syntax check (``parse_query``, as ``tantivy.Index`` has it)
    and no schema (plans name their fields). No ``tantivy`` package index is opened for it.

    Example: ``compile_query(NativeParser(split), mapping, QueryString("a AND b"), ["m"], plan=True)``
    """

    schema = None

    def __init__(self, split: NativeSplit) -> None:
        self._split = split

    def parse_query(self, text: str, fields: Sequence[str], allow_regexes: bool = True) -> None:
        self._split.check_query(text, fields)
