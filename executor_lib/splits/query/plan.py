"""A compiled query as a plan the native engine reads (``native/src/plan.rs``), or as a query of
the ``tantivy`` package: the two builders ``compile`` and ``SplitSearcher`` compile through.

``compile.compile_query`` and ``SplitSearcher`` build a query by calling a builder's methods (the
names and arguments of ``tantivy.Query``'s static methods, and its ``Must``/``Should``/``MustNot``):
``TANTIVY`` returns ``tantivy`` queries, ``PLAN`` nested lists, one node each, as ``plan.rs``
documents (``["bool", [["must", ["term", "message", "error"]], ...]]``), serialized by
``plan_json``. So one compiler gives both, and a query means the same in each.

    >>> plan_json(PLAN.boolean_query([(PLAN.Must, PLAN.term_query(None, "level", "ERROR"))]))
    '["bool",[["must",["term","level","ERROR"]]]]'
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Sequence
from typing import Any

Plan = list[Any]
_EPOCH = datetime.datetime(1970, 1, 1)


def _value(value: Any) -> Any:
    """A term's value as the plan carries it: dates as ``{"date_us": microseconds since the epoch}``
    (naive datetimes are UTC, as the ``tantivy`` package reads them), bytes as ``{"bytes_hex": ...}``,
    a NaN or infinite float as ``{"f64": "NaN" | "inf" | "-inf"}``."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return {"date_us": (value - _EPOCH) // datetime.timedelta(microseconds=1)}
    if isinstance(value, datetime.date):
        return _value(datetime.datetime(value.year, value.month, value.day))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes_hex": bytes(value).hex()}
    if isinstance(value, float) and not math.isfinite(value):  # JSON has no NaN nor infinity
        return {"f64": "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    return value


class _PlanBuilder:
    """``tantivy.Query``'s static methods, building plan nodes (the ``schema`` arguments unused)."""

    Must, Should, MustNot = "must", "should", "must_not"

    @staticmethod
    def all_query() -> Plan:
        return ["all"]

    @staticmethod
    def empty_query() -> Plan:
        return ["empty"]

    @staticmethod
    def boolean_query(parts: Sequence[tuple[str, Plan]]) -> Plan:
        return ["bool", [[occur, q] for occur, q in parts]]

    @staticmethod
    def boost_query(query: Plan, boost: float) -> Plan:
        return ["boost", query, float(boost)]

    @staticmethod
    def const_score_query(query: Plan, score: float) -> Plan:
        return ["const", query, float(score)]

    @staticmethod
    def term_query(schema: Any, field: str, value: Any, index_option: str = "position") -> Plan:
        return ["term", field, _value(value)]

    @staticmethod
    def phrase_query(schema: Any, field: str, words: Sequence[str], slop: int = 0) -> Plan:
        return ["phrase", field, list(words), int(slop)]

    @staticmethod
    def term_set_query(schema: Any, field: str, values: Sequence[Any]) -> Plan:
        return ["terms", field, [_value(v) for v in values]]

    @staticmethod
    def range_query(
        schema: Any,
        field: str,
        field_type: Any,
        lower: Any,
        upper: Any,
        include_lower: bool = True,
        include_upper: bool = True,
    ) -> Plan:
        lo = None if lower is None else _value(lower)
        hi = None if upper is None else _value(upper)
        return ["range", field, lo, hi, bool(include_lower), bool(include_upper)]

    @staticmethod
    def regex_query(schema: Any, field: str, pattern: str) -> Plan:
        return ["regex", field, pattern]

    @staticmethod
    def exists_query(field: str) -> Plan:
        return ["exists", field]

    @staticmethod
    def fuzzy_term_query(
        schema: Any, field: str, text: str, distance: int = 1, transposition_cost_one: bool = True, prefix: bool = False
    ) -> Plan:
        return ["fuzzy", field, text, int(distance), bool(transposition_cost_one), bool(prefix)]

    @staticmethod
    def parsed(index: Any, text: str, fields: Sequence[str]) -> Plan:
        """A leaf for Tantivy's query parser; checked first by the ``tantivy`` package's parser (the
        errors users know: ValueError)."""
        index.parse_query(text, list(fields), allow_regexes=True)
        return ["parse", text, list(fields)]


class _TantivyBuilder:
    """``tantivy.Query``'s static methods as they are, and ``parsed`` through ``Index.parse_query``."""

    def __init__(self) -> None:
        import tantivy

        self._query = tantivy.Query
        self.Must, self.Should, self.MustNot = tantivy.Occur.Must, tantivy.Occur.Should, tantivy.Occur.MustNot

    def __getattr__(self, name: str) -> Any:
        return getattr(self._query, name)

    @staticmethod
    def parsed(index: Any, text: str, fields: Sequence[str]) -> Any:
        return index.parse_query(text, list(fields), allow_regexes=True)


PLAN = _PlanBuilder()


class _Lazy:
    """``TANTIVY``, built at first use (importing this module does not import tantivy)."""

    _builder: _TantivyBuilder | None = None

    def __getattr__(self, name: str) -> Any:
        if _Lazy._builder is None:
            _Lazy._builder = _TantivyBuilder()
        return getattr(_Lazy._builder, name)


TANTIVY: Any = _Lazy()


def plan_json(plan: Plan) -> str:
    """The plan as the native engine reads it (compact JSON)."""
    return json.dumps(plan, separators=(",", ":"), allow_nan=False)
