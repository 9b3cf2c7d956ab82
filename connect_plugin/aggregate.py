"""Merging per-split Tantivy aggregation results into the table's result (pure Python).

Executors aggregate each split (``command=aggregate``, ``avg`` computed as ``stats``); this
combines them: sums and counts add, min/max take the extreme, avg = sum / count, bucket
aggregations add ``doc_count`` per key (and merge their sub-aggregations), ``terms`` keeps the
``size`` largest buckets (default 10).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from indextables_contract.errors import QueryError

_METRICS = ("sum", "min", "max", "avg", "value_count", "stats", "count")
_BUCKETS = ("terms", "histogram", "date_histogram", "range")


def merge_results(request: Mapping[str, Any], parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, spec in request.items():
        kind = next((k for k in spec if k != "aggs"), None)
        pieces = [p[name] for p in parts if name in p]
        if kind in _METRICS:
            out[name] = _merge_metric(kind, pieces)
        elif kind in _BUCKETS:
            out[name] = _merge_buckets(kind, spec, pieces)
        else:
            raise QueryError(f"aggregation {name!r}: unsupported kind {kind!r} (supported: {_METRICS + _BUCKETS})")
    return out


def _stats(pieces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    count = sum(int(p.get("count") or 0) for p in pieces)
    total = sum(float(p.get("sum") or 0) for p in pieces)
    mins = [p["min"] for p in pieces if p.get("min") is not None]
    maxs = [p["max"] for p in pieces if p.get("max") is not None]
    return {
        "count": count, "sum": total, "min": min(mins) if mins else None, "max": max(maxs) if maxs else None,
        "avg": total / count if count else None,
    }  # fmt: skip


def _merge_metric(kind: str, pieces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    if kind in ("avg", "stats"):  # executors computed stats for both
        stats = _stats(pieces)
        return stats if kind == "stats" else {"value": stats["avg"]}
    values: list[Any] = [p["value"] for p in pieces if p.get("value") is not None]
    if kind in ("sum", "value_count", "count"):
        return {"value": sum(values) if values else (0 if kind != "sum" else 0.0)}
    if not values:
        return {"value": None}
    return {"value": min(values) if kind == "min" else max(values)}


def _merge_buckets(kind: str, spec: Mapping[str, Any], pieces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    sub_request = spec.get("aggs") or {}
    merged: dict[Any, dict[str, Any]] = {}
    order: list[Any] = []
    sub_parts: dict[Any, list[Mapping[str, Any]]] = {}
    for piece in pieces:
        for bucket in piece.get("buckets", []):
            key = bucket.get("key")
            if key not in merged:
                merged[key] = {k: v for k, v in bucket.items() if k not in sub_request}
                merged[key]["doc_count"] = 0
                order.append(key)
            merged[key]["doc_count"] += int(bucket.get("doc_count", 0))
            sub_parts.setdefault(key, []).append(bucket)
    buckets = []
    for key in order:
        bucket = merged[key]
        if sub_request:
            bucket.update(merge_results(sub_request, sub_parts[key]))
        buckets.append(bucket)
    if kind == "terms":
        size = int(spec["terms"].get("size", 10))
        buckets.sort(key=lambda b: (-b["doc_count"], str(b["key"])))
        buckets = buckets[:size]
    elif kind in ("histogram", "date_histogram"):
        buckets.sort(key=lambda b: b["key"])
    return {"buckets": buckets}
