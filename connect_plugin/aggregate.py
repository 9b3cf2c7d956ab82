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
        "count": count,
        "sum": total,
        "min": min(mins) if mins else None,
        "max": max(maxs) if maxs else None,
        "avg": total / count if count else None,
    }


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


# --- bucket functions in SQL (indextables_histogram / _date_histogram / _range) -------------------


def bucket_request(call: Any, measures: Sequence[Any]) -> dict[str, Any]:
    """The Tantivy aggregation request of ``SELECT <bucket call>, <measures> ... GROUP BY <bucket call>``:
    one bucket aggregation named ``bucket`` with a ``stats`` sub-aggregation per measured column.

    ``call`` is a ``connect_plugin.grammar.BucketCall``; ``measures`` are ``Measure``s. Splits return only
    non-empty buckets (``bucket_rows`` fills the gaps where the call's ``min_doc_count`` is 0, over the
    whole table's key range, as one Tantivy aggregation over all rows would)."""
    if call.kind == "range":
        ranges = []
        for key, low, high in call.ranges:
            r: dict[str, Any] = {"key": key}
            if low is not None:
                r["from"] = low
            if high is not None:
                r["to"] = high
            ranges.append(r)
        spec: dict[str, Any] = {"range": {"field": call.column, "ranges": ranges}}
    elif call.kind == "histogram":
        body: dict[str, Any] = {"field": call.column, "interval": call.interval, "min_doc_count": 1}
        if call.offset is not None:
            body["offset"] = call.offset
        spec = {"histogram": body}
    else:
        body = {"field": call.column, "fixed_interval": call.interval, "min_doc_count": 1}
        if call.offset is not None:
            body["offset"] = call.offset
        spec = {"date_histogram": body}
    subs = {f"c_{column}": {"stats": {"field": column}} for column in _measured(measures)}
    if subs:
        spec["aggs"] = subs
    return {"bucket": spec}


def _measured(measures: Sequence[Any]) -> list[str]:
    return list(dict.fromkeys(m.column for m in measures if m.column is not None))


def bucket_rows(call: Any, measures: Sequence[Any], result: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """(bucket key, measure values...) per bucket of a merged ``bucket_request`` result: a histogram's
    key is its lower bound (a float), a date histogram's a UTC datetime, a range's its name (ranges in
    the order the call names them, empty ones included, as Tantivy returns them)."""
    import datetime

    buckets = list(result["bucket"]["buckets"])
    if call.kind == "range":
        by_key = {b["key"]: b for b in buckets}
        buckets = [by_key.get(key, {"key": key, "doc_count": 0}) for key, _, _ in call.ranges]
    else:
        buckets = _fill_gaps(call, buckets)
    rows = []
    for b in buckets:
        if call.kind == "histogram":
            key: Any = float(b["key"])
        elif call.kind == "date_histogram":
            key = datetime.datetime.fromtimestamp(float(b["key"]) / 1000, datetime.timezone.utc)
        else:
            key = b["key"]
        values: list[Any] = []
        for m in measures:
            if m.column is None:
                values.append(int(b["doc_count"]))
                continue
            stats = b.get(f"c_{m.column}") or {"count": 0}
            n = int(stats.get("count") or 0)
            if m.func == "count":
                values.append(n)
            elif n == 0:
                values.append(None)
            else:
                values.append(
                    {
                        "sum": stats.get("sum"),
                        "avg": stats.get("avg"),
                        "min": stats.get("min"),
                        "max": stats.get("max"),
                    }[m.func]
                )
        rows.append((key, *values))
    return rows


def _fill_gaps(call: Any, buckets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Histogram buckets in key order; with ``min_doc_count`` 0 every bucket between the lowest and the
    highest key (empty ones with doc_count 0), else those with at least ``min_doc_count`` rows."""
    if call.kind == "histogram":
        step: float = float(call.interval)
        offset = float(call.offset or 0.0)
    else:
        step = float(call.interval_ms)
        offset = float(_offset_ms(call.offset))
    by_index = {round((float(b["key"]) - offset) / step): b for b in buckets}
    if call.min_doc_count > 0 or not by_index:
        kept = [b for b in buckets if int(b["doc_count"]) >= max(call.min_doc_count, 1)]
        return sorted(kept, key=lambda b: float(b["key"]))
    out = []
    for n in range(min(by_index), max(by_index) + 1):
        out.append(by_index.get(n) or {"key": offset + n * step, "doc_count": 0})
    return out


def _offset_ms(offset: str | None) -> int:
    if not offset:
        return 0
    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    number = offset.rstrip("msdh")
    return int(number) * units[offset[len(number) :]]
