"""Per-split aggregates (``executor_lib.splits.search.group_aggregate``) on real splits: the index route and
the rows route give exactly what plain Python computes over the same rows, with SQL's NULL rules;
the index route is taken where it is exact and declined where it would not be."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.group_aggregate import aggregate_split
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.write.writer import write_split
from indextables_contract import filters as F
from indextables_contract.aggregate import (
    AggregatePlan,
    Measure,
    finalize,
    merge_json,
    partials_from_json,
    partials_to_json,
)

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("level", pa.string()),
        ("service", pa.string()),
        ("lat", pa.int32()),
        ("score", pa.float64()),
        ("msg", pa.string()),
    ]
)
WORDS = ["alpha", "beta", "gamma", "delta"]


def _rows(n: int, seed: int, levels_with_null: bool) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    levels = ["INFO", "WARN", "ERROR"] + ([None] if levels_with_null else [])
    return [
        {
            "id": i,
            "level": rnd.choice(levels),
            "service": rnd.choice(["api", "db"]),
            "lat": None if rnd.random() < 0.2 else rnd.randint(-50, 500),
            "score": rnd.uniform(0, 1),
            "msg": " ".join(rnd.choice(WORDS) for _ in range(3)),
        }
        for i in range(n)
    ]


def _searcher(tmp: Path, rows: list[dict[str, Any]]) -> SplitSearcher:
    mapping = mapping_for(SCHEMA, {"spark.indextables.indexing.typemap.msg": "text"})
    written = write_split(pa.Table.from_pylist(rows, schema=SCHEMA), mapping, tmp)
    return SplitSearcher(written.path, tmp / "work", SCHEMA, None)


def _expected(rows: list[dict[str, Any]], agg: AggregatePlan, keep: Any) -> list[tuple[Any, ...]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        if keep(r):
            groups.setdefault(tuple(r[c] for c in agg.group_by), []).append(r)
    if not agg.group_by and not groups:
        groups[()] = []
    out = []
    for key, members in groups.items():
        values = []
        for m in agg.measures:
            present = [r[m.column] for r in members if m.column is not None and r[m.column] is not None]
            if m.column is None:
                values.append(len(members))
            elif m.func == "count":
                values.append(len(present))
            elif not present:
                values.append(None)
            else:
                values.append({"sum": sum, "min": min, "max": max, "avg": lambda v: sum(v) / len(v)}[m.func](present))
        out.append(key + tuple(values))
    return out


def _normal(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in rows), key=repr)


PLANS = [
    AggregatePlan((), (Measure("count"),)),
    AggregatePlan(("level",), (Measure("count"), Measure("sum", "lat"), Measure("avg", "lat"))),
    AggregatePlan(("service", "level"), (Measure("min", "lat"), Measure("max", "score"), Measure("count", "lat"))),
    AggregatePlan(("service",), (Measure("max", "msg"), Measure("count"))),  # a string measure: rows route
]
WHERES: list[tuple[F.Filter | None, Any]] = [
    (None, lambda r: True),
    (F.QueryString("alpha", "msg"), lambda r: "alpha" in r["msg"].split()),
    (F.Between("lat", lower=100), lambda r: r["lat"] is not None and r["lat"] >= 100),
    (F.Term("service", "api"), lambda r: r["service"] == "api"),
]


@pytest.mark.parametrize("nulls", [False, True], ids=["no-null-keys", "null-keys"])
def test_both_routes_equal_python(tmp_path: Path, nulls: bool) -> None:
    rows = _rows(400, 3, nulls)
    searcher = _searcher(tmp_path, rows)
    for agg in PLANS:
        for where, keep in WHERES:
            partials, route = aggregate_split(searcher, agg, where, SCHEMA, {})
            again = partials_from_json(partials_to_json(partials))
            got = _normal(finalize(agg, again))
            assert got == _normal(_expected(rows, agg, keep)), (agg, where, route)
            numeric = all(m.column in (None, "lat", "score") for m in agg.measures)
            null_keys = nulls and "level" in agg.group_by
            assert route == ("index" if numeric and not null_keys else "rows"), (agg, where)


def test_partials_merge_across_splits(tmp_path: Path) -> None:
    first, second = _rows(200, 1, True), _rows(300, 2, False)
    agg = AggregatePlan(("level",), (Measure("count"), Measure("avg", "lat"), Measure("min", "lat")))
    texts = []
    for i, rows in enumerate((first, second)):
        partials, _ = aggregate_split(_searcher(tmp_path / str(i), rows), agg, None, SCHEMA, {})
        texts.append(partials_to_json(partials))
    assert _normal(finalize(agg, merge_json(texts))) == _normal(_expected(first + second, agg, lambda r: True))


def test_integer_sums_beyond_float_precision_take_the_rows_route(tmp_path: Path) -> None:
    big = [
        {"id": 2**60 + i, "level": "INFO", "service": "api", "lat": 1, "score": 0.0, "msg": "alpha"} for i in range(3)
    ]
    agg = AggregatePlan(("level",), (Measure("sum", "id"),))
    partials, route = aggregate_split(_searcher(tmp_path, big), agg, None, SCHEMA, {})
    assert route == "rows"
    assert finalize(agg, partials) == [("INFO", 3 * 2**60 + 3)]


def test_plan_round_trip() -> None:
    agg = AggregatePlan(("a", "b"), (Measure("count"), Measure("avg", "x")), json.dumps({"op": "term"}))
    assert AggregatePlan.from_json(agg.to_json()) == AggregatePlan(agg.group_by, agg.measures, '{"op": "term"}')
    with pytest.raises(ValueError, match="median"):
        Measure("median", "x")
