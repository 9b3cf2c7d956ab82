"""The native engine (``native/``, the ``indextables_native`` extension) for one split: opened in
place, it scores a query's best k with the table's BM25 statistics at Tantivy's own speed.

What it does today (issue 69): ranked search (``_score``): ``stats`` gives a split's share of the
table's statistics and ``top_k`` its best hits scored with the table's, so no hit comes back to
Python to be rescored. A split is opened from its local file (a local table's split, the split
cache's whole copy of a remote one) or from its files as the cache lays out a split fetched by the
piece (``open_files``, after the query's sections are fetched).

    >>> split = NativeSplit.open(Path("t/splits/part-0.split"))
    >>> stats = split.stats(plan)                       # ScoreStats, summed over the table's splits
    >>> ords, docs, scores, rows = split.top_k(plan, 10, stats, "__row")
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from executor_lib.splits.native_module import native_module
from executor_lib.splits.query.plan import Plan, plan_json
from executor_lib.splits.search.scoring import ScoreStats
from indextables_contract.errors import QueryError


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

    def stats(self, plan: Plan, query: Any) -> ScoreStats:
        """This split's BM25 statistics for ``plan`` (keys as ``ScoreStats``'s: the field and the
        term's text or number; other terms as "\\x00" and their value's hex)."""
        try:
            num_docs, tokens, freqs = self._split.stats(self._text(plan, query))
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on split {self.name}: {e}") from e
        return ScoreStats(int(num_docs), dict(tokens), dict(freqs))

    def top_k(
        self, plan: Plan, query: Any, k: int, stats: ScoreStats | None, row_field: str | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """The best ``k`` hits of ``plan``, best first: (segment ordinals, doc ids, scores as float32,
        the u64 fast field ``row_field`` of each or None), scored with ``stats`` (None: the split's own)."""
        table = None if stats is None else (stats.num_docs, stats.field_tokens, stats.doc_freqs)
        try:
            ords, docs, scores, rows = self._split.top_k(self._text(plan, query), k, table, row_field)
        except ValueError as e:
            raise QueryError(f"query {query!r} cannot run on split {self.name}: {e}") from e
        return (
            np.frombuffer(ords, np.uint32),
            np.frombuffer(docs, np.uint32),
            np.frombuffer(scores, np.float32),
            None if rows is None else np.frombuffer(rows, np.uint64),
        )

    @staticmethod
    def _text(plan: Plan, query: Any) -> str:
        try:
            return plan_json(plan)
        except ValueError as e:
            raise QueryError(f"query {query!r}: {e}") from e
