"""The aggregate plan: ``SELECT g..., count(*), sum(x)... [WHERE ...] GROUP BY g...`` run split by split.

The client (``connect_plugin``) sends an ``AggregatePlan`` as the ``plan`` option of the
``group_aggregate`` command; each executor task answers its splits with ``Partials`` (per group:
the row count and, per measured column, count/sum/min/max of its non-null values), which are
exact and merge by addition and comparison; ``finalize`` turns merged partials into the rows
Spark would return (``avg`` = sum / count; NULL where a group has no non-null value; a global
aggregate over no rows is one row with count 0). Values cross as JSON; dates, timestamps,
decimals and bytes are tagged (``encode_value``) so they come back as the same Python values.

    plan = AggregatePlan(group_by=("level",), measures=(Measure("count"), Measure("avg", "latency")))
    AggregatePlan.from_json(plan.to_json()) == plan   # True
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from indextables_contract.errors import AggregatePlanError

FUNCTIONS = ("count", "sum", "avg", "min", "max")


@dataclass(frozen=True)
class Measure:
    """One aggregate: ``count`` with no column is ``count(*)``; the others need a column."""

    func: str
    column: str | None = None

    def __post_init__(self) -> None:
        if self.func not in FUNCTIONS:
            raise AggregatePlanError(f"aggregate function {self.func!r} is not one of {FUNCTIONS}")
        if self.column is None and self.func != "count":
            raise AggregatePlanError(f"{self.func}() needs a column")


@dataclass(frozen=True)
class AggregatePlan:
    """``group_by`` columns (data or partition columns), ``measures``, and an optional filter tree
    (the ``filter`` read option's JSON form) the rows must match."""

    group_by: tuple[str, ...] = ()
    measures: tuple[Measure, ...] = ()
    filter: str | None = None  # JSON text of the filter tree

    def measured_columns(self) -> tuple[str, ...]:
        """The distinct columns the measures read, in first-use order."""
        return tuple(dict.fromkeys(m.column for m in self.measures if m.column is not None))

    def counts_only(self) -> bool:
        """Only ``count(*)``: the transaction log's record counts can answer it."""
        return all(m.func == "count" and m.column is None for m in self.measures)

    def to_json(self) -> str:
        return json.dumps(
            {
                "groupBy": list(self.group_by),
                "measures": [{"func": m.func, "column": m.column} for m in self.measures],
                "filter": None if self.filter is None else json.loads(self.filter),
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> AggregatePlan:
        try:
            doc = json.loads(text)
            return cls(
                group_by=tuple(str(c) for c in doc.get("groupBy", [])),
                measures=tuple(Measure(str(m["func"]), m.get("column")) for m in doc.get("measures", [])),
                filter=None if doc.get("filter") is None else json.dumps(doc["filter"], sort_keys=True),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise AggregatePlanError(f"aggregate plan {text[:200]!r} does not decode: {e}") from e


@dataclass
class ColumnPartial:
    """Non-null values of one column in one group: how many, their sum, min and max."""

    count: int = 0
    sum: Any = None
    min: Any = None
    max: Any = None

    def add(self, other: ColumnPartial) -> None:
        self.count += other.count
        if other.sum is not None:
            self.sum = other.sum if self.sum is None else self.sum + other.sum
        if other.min is not None and (self.min is None or _before(other.min, self.min)):
            self.min = other.min
        if other.max is not None and (self.max is None or _before(self.max, other.max)):
            self.max = other.max


def _nan(value: Any) -> bool:
    return isinstance(value, float) and value != value


def _before(a: Any, b: Any) -> bool:
    """``a < b`` in Spark's order, where NaN is above every number (so max is NaN if any value is)."""
    if _nan(a) or _nan(b):
        return not _nan(a)
    return bool(a < b)


@dataclass
class GroupPartial:
    rows: int = 0
    columns: dict[str, ColumnPartial] = field(default_factory=dict)

    def add(self, other: GroupPartial) -> None:
        self.rows += other.rows
        for name, part in other.columns.items():
            self.columns.setdefault(name, ColumnPartial()).add(part)


Partials = dict[tuple[Any, ...], GroupPartial]  # group key values (in group_by order) -> partial


def merge_into(target: Partials, source: Partials) -> Partials:
    """Add ``source``'s groups into ``target`` (returned)."""
    for key, part in source.items():
        if key in target:
            target[key].add(part)
        else:
            target[key] = part
    return target


def finalize(plan: AggregatePlan, partials: Partials) -> list[tuple[Any, ...]]:
    """One row per group: the group key values, then each measure's value, as Spark computes it."""
    groups: Iterable[tuple[tuple[Any, ...], GroupPartial]] = partials.items()
    if not plan.group_by and not partials:
        groups = [((), GroupPartial())]  # a global aggregate over no rows is one row
    return [key + tuple(_measure_value(m, part) for m in plan.measures) for key, part in groups]


def _measure_value(m: Measure, part: GroupPartial) -> Any:
    if m.column is None:
        return part.rows
    col = part.columns.get(m.column, ColumnPartial())
    if m.func == "count":
        return col.count
    if col.count == 0:
        return None
    if m.func == "avg":
        return float(col.sum) / col.count
    return {"sum": col.sum, "min": col.min, "max": col.max}[m.func]


# --- JSON form of partials ----------------------------------------------------------------------


def encode_value(value: Any) -> Any:
    """A JSON value; dates, timestamps, decimals and bytes tagged so ``decode_value`` restores them."""
    if isinstance(value, datetime.datetime):
        return {"ts": value.isoformat()}
    if isinstance(value, datetime.date):
        return {"date": value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"bytes": base64.b64encode(value).decode("ascii")}
    return value


def decode_value(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    if "ts" in value:
        return datetime.datetime.fromisoformat(value["ts"])
    if "date" in value:
        return datetime.date.fromisoformat(value["date"])
    if "decimal" in value:
        return decimal.Decimal(value["decimal"])
    if "bytes" in value:
        return base64.b64decode(value["bytes"])
    raise AggregatePlanError(f"unknown tagged value {value!r}")


def partials_to_json(partials: Partials) -> str:
    return json.dumps(
        [
            [
                [encode_value(k) for k in key],
                part.rows,
                {
                    c: [p.count, encode_value(p.sum), encode_value(p.min), encode_value(p.max)]
                    for c, p in part.columns.items()
                },
            ]
            for key, part in partials.items()
        ]
    )


def partials_from_json(text: str) -> Partials:
    try:
        out: Partials = {}
        for key, rows, columns in json.loads(text):
            part = GroupPartial(
                int(rows),
                {
                    c: ColumnPartial(int(n), decode_value(s), decode_value(lo), decode_value(hi))
                    for c, (n, s, lo, hi) in columns.items()
                },
            )
            merge_into(out, {tuple(decode_value(k) for k in key): part})
        return out
    except (ValueError, TypeError) as e:
        raise AggregatePlanError(f"aggregate partials do not decode: {e}") from e


def merge_json(texts: Sequence[str]) -> Partials:
    """The merged partials of several tasks' JSON results."""
    out: Partials = {}
    for text in texts:
        merge_into(out, partials_from_json(text))
    return out


def count_partials(counts: Mapping[tuple[Any, ...], int]) -> Partials:
    """Partials holding only row counts (from the transaction log)."""
    return {key: GroupPartial(int(n)) for key, n in counts.items()}
