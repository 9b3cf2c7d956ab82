"""Ranking rows as Spark orders them, with numpy: the best ``k`` scored rows over many splits
(``best_of``) and positions in ``ORDER BY`` order (``order_positions``) for the per-split top k."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.arrow_arrays import as_numpy


def best_of(
    found: Mapping[Any, tuple[np.ndarray, np.ndarray]], k: int | None
) -> dict[Any, tuple[np.ndarray, np.ndarray]]:
    """Of each split's (row ids, scores), the ``k`` best rows over all of them (all: ``k`` None), by
    split: so that only their rows are read (a table's top 20 reads 20 rows, not 20 per split)."""
    if k is None:
        return {key: v for key, v in found.items() if len(v[0])}
    keys = list(found)
    scores = np.concatenate([found[key][1] for key in keys]) if keys else np.zeros(0, np.float32)
    owner = np.concatenate([np.full(len(found[key][0]), n) for n, key in enumerate(keys)]) if keys else np.zeros(0)
    position = np.concatenate([np.arange(len(found[key][0])) for key in keys]) if keys else np.zeros(0)
    best = np.argsort(-scores.astype(np.float64), kind="stable")[:k]
    out = {}
    for n, key in enumerate(keys):
        mine = position[best[owner[best] == n]].astype(np.int64)
        if len(mine):
            out[key] = (found[key][0][mine], found[key][1][mine])
    return out


def best_scores(kept: np.ndarray, scores: np.ndarray, k: int | None) -> np.ndarray:
    """The ``k`` best of the scores ``kept`` so far and a split's ``scores`` (all of them without ``k``):
    a table's running best, so that a split searched next needs no hit scoring at or below its ``k``-th
    (``best_of`` keeps the earlier split's on a tie); O(k) a split, not O(k x splits).

    Example: ``best_scores(np.array([3.0], np.float32), np.array([2.0, 1.0], np.float32), 2)`` is ``[2.0, 3.0]``.
    """
    every = np.concatenate([kept, scores]) if len(kept) else scores
    if k is None or len(every) <= k:
        return every
    return np.partition(every, len(every) - k)[len(every) - k :]


def orderable(t: pa.DataType) -> bool:
    """Whether ``ORDER BY`` a column of type ``t`` may be pushed as a per-split top k (``scan_split_ordered``):
    integers, floats, dates and timestamps, whose order here is Spark's."""
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)


def order_positions(
    values: pa.Array | pa.ChunkedArray, descending: bool, nulls_first: bool, k: int | None = None
) -> np.ndarray:
    """The positions of ``values`` (an ``orderable`` type) in Spark's ``ORDER BY`` order, the first ``k``:
    ascending or ``descending``, nulls first or last, NaN above every number (ties in no set order).

    Example: ``order_positions(pa.array([3, None, 1]), False, True)`` is ``[1, 2, 0]``.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.nulls(0, values.type)
    t = values.type
    null = as_numpy(values.is_null())
    if pa.types.is_date32(t):
        values = values.cast(pa.int32())
    elif pa.types.is_temporal(t):
        values = values.cast(pa.int64())
    v = as_numpy(pc.fill_null(values, 0))
    nan = np.isnan(v) if pa.types.is_floating(t) else np.zeros(len(v), bool)
    if nan.any():
        v = np.where(nan, 0, v)
    present = np.flatnonzero(~null)
    ranked = present[np.lexsort((v[present], nan[present]))]  # numbers ascending, then NaN
    if descending:
        ranked = ranked[::-1]
    nulls = np.flatnonzero(null)
    out = np.concatenate([nulls, ranked] if nulls_first else [ranked, nulls])
    return out if k is None else out[:k]
