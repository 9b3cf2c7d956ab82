"""The read plan contract (``indextables_contract.read``): a client's pushed read round-trips through
its options, the executors' option parser knows every key, and the client spells none of them."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from executor_lib.spark import options as O
from indextables_contract import filters as F
from indextables_contract.errors import ConfigError, FilterError
from indextables_contract.read import KEYS, ReadPlan
from tests.contract.test_commands import _string_constants

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "plan",
    [
        ReadPlan(),
        ReadPlan(columns=("id", "level"), limit=10),
        ReadPlan(required_columns=("*",), filter=F.And((F.Term("level", "ERROR"), F.QueryString("timeout", "msg")))),
        ReadPlan(match_columns=(("__m0", F.QueryString("a", "msg", "text")), ("__m1", F.Exists("x")))),
    ],
)
def test_a_read_plan_round_trips_through_its_options(plan: ReadPlan) -> None:
    options = plan.to_options()
    assert all(isinstance(v, str) for v in options.values()) and set(options) <= set(KEYS)
    assert ReadPlan.from_options(options) == plan


def test_the_executors_know_every_read_plan_key() -> None:
    assert set(KEYS) <= set(O.READ_KEYS)


def test_bad_read_plans_are_named() -> None:
    with pytest.raises(ConfigError, match="read option limit=-1"):
        ReadPlan(limit=-1)
    with pytest.raises(FilterError, match=r"matchColumns.m: unknown op 'x'"):
        ReadPlan.from_options({"matchColumns": '{"m": {"op": "x"}}'})


def test_the_client_spells_no_read_plan_key() -> None:
    camel = {k for k in KEYS if any(c.isupper() for c in k)}
    spelled = {
        str(p.relative_to(ROOT)): sorted(_string_constants(p) & camel)
        for p in sorted((ROOT / "connect_plugin").glob("*.py"))
    }
    assert {p: s for p, s in spelled.items() if s} == {}


# --- every plan the client can build goes through the executors' decoder unchanged ---------------

TABLE = ["id", "Level", "msg", "a b", "名前"]
_VALUES: list[Any] = ["ERROR", "", 'q"uote,comma', 0, -7, 2**53 + 1, 2.5, 0.1, -1e-300, True, False, Decimal("12.50")]
_LEAVES: list[F.Filter] = [
    *(F.Term("Level", v) for v in _VALUES),
    F.TermIn("id", (1, 2, 3)),
    F.TermIn("msg", ("a", "b")),
    F.TermIn("id", (0.5, 2)),
    F.Between("id", 1, None),
    F.Between("id", None, 9.75, upper_inclusive=False),
    F.Between("id", -3, 3, lower_inclusive=False),
    F.gt("msg", "m"),
    F.le("id", 0),
    F.Prefix("msg", "time"),
    F.Contains("msg", "out"),
    F.Regex("msg", "t.*t"),
    F.Exists("a b"),
    F.QueryString("timeout"),
    F.QueryString("msg:timeout AND a", "msg"),
    F.QueryString("x", "msg", "text"),
    F.QueryString("x", "msg", "exact"),
]
_TREES: list[F.Filter] = [
    *_LEAVES,
    F.Not(F.Term("id", 1)),
    F.And((F.Term("Level", "ERROR"), F.QueryString("timeout", "msg"))),
    F.Or((F.Exists("id"), F.Not(F.And((F.Prefix("msg", "a"), F.Term("id", 2.5)))))),
]
_COLUMNS: list[tuple[str, ...] | None] = [None, ("id",), ("id", "Level"), ("a b", "名前"), ("id", "id")]
_REQUIRED: list[tuple[str, ...] | None] = [None, (), ("*",), ("id", "nope"), ("a,b", 'q"', "名前", "")]
_LIMITS: list[int | None] = [None, 0, 1, 7, 2147483647]
_MATCHES: list[tuple[tuple[str, F.Filter], ...]] = [
    (),
    (("__m0", F.QueryString("a", "msg", "text")),),
    (("__m0", F.Term("id", 0.1)), ("__m1", F.Not(F.Exists("x")))),
]


def _on_the_wire(value: Any) -> Any:
    """A literal as the executors read it back: JSON numbers with a fraction are exact decimals (as Spark
    SQL reads ``2.5``), integral decimals are integers; the rest is unchanged."""
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else Decimal(repr(float(value)))
    return value


def _expected(plan: ReadPlan) -> ReadPlan:
    def wire(f: F.Filter) -> F.Filter:
        return F.map_values(f, lambda _, v: _on_the_wire(v))

    return ReadPlan(
        columns=plan.columns,
        required_columns=plan.required_columns,
        filter=None if plan.filter is None else wire(plan.filter),
        limit=plan.limit,
        match_columns=tuple((name, wire(tree)) for name, tree in plan.match_columns),
    )


def _plans() -> Iterator[ReadPlan]:
    # every combination of parts (a filter-free and a filter-only axis keep the product small,
    # then every tree once with every other part)
    for columns, required, limit, matches in itertools.product(_COLUMNS, _REQUIRED, _LIMITS, _MATCHES):
        yield ReadPlan(columns=columns, required_columns=required, limit=limit, match_columns=matches)
    for tree, limit in itertools.product([None, *_TREES], _LIMITS):
        yield ReadPlan(filter=tree, limit=limit, match_columns=((("__m", tree),) if tree is not None else ()))


def test_every_plan_the_client_builds_reaches_the_executors_unchanged() -> None:
    checked = 0
    for plan in _plans():
        options = plan.to_options()
        assert all(isinstance(v, str) for v in options.values()) and set(options) <= set(KEYS)
        expected = _expected(plan)
        assert ReadPlan.from_options(options) == expected, options
        # the executors' decoder: the same plan, its column names matched to the table's (a column
        # asked for twice is returned once, as before)
        if expected.columns is not None:
            expected = dataclasses.replace(expected, columns=tuple(dict.fromkeys(expected.columns)))
        assert O.read_plan(options, TABLE, "read t") == expected, options
        # as Spark hands them over: lower-cased keys, canonical again, then decoded
        raw = {k.lower(): v for k, v in options.items()} | {"path": "/t"}
        canonical = O.canonical_options(raw, O.READ_KEYS, O.READ_COLUMN_PREFIXES, TABLE, "read")
        assert O.read_plan(canonical, TABLE, "read t") == expected, options
        checked += 1
    assert checked == len(_COLUMNS) * len(_REQUIRED) * len(_LIMITS) * len(_MATCHES) + (1 + len(_TREES)) * len(_LIMITS)


def test_limit_zero_is_accepted_on_both_sides_and_negative_on_neither() -> None:
    assert O.read_plan({"limit": "0"}, TABLE, "read t").limit == 0
    for bad in ("-1", "1.5", "ten", "", " ", "+3", "²"):
        with pytest.raises(ConfigError, match=r"read option limit=.*expected an integer >= 0"):
            O.read_plan({"limit": bad}, TABLE, "read t")
    with pytest.raises(ConfigError, match="read option limit=-1"):
        ReadPlan(limit=-1)
    with pytest.raises(ConfigError, match="read option limit=True"):
        ReadPlan(limit=True)


def test_plans_that_could_not_travel_are_refused_when_built() -> None:
    for columns in [("a,b",), (" id",), ("",)]:
        with pytest.raises(ConfigError, match="cannot be sent in a comma-separated list"):
            ReadPlan(columns=columns)
    with pytest.raises(ConfigError, match="expected at least one column"):
        ReadPlan(columns=())
    with pytest.raises(ConfigError, match="match column is named twice"):
        ReadPlan(match_columns=(("m", F.Exists("a")), ("m", F.Exists("b"))))


def test_the_executors_check_names_against_the_table() -> None:
    assert O.read_plan({"columns": " ID , level,,msg"}, TABLE, "read t").columns == ("id", "Level", "msg")
    with pytest.raises(ConfigError, match=r"option columns: columns \['nope'\] are not in the table"):
        O.read_plan({"columns": "id,nope"}, TABLE, "read t")
    with pytest.raises(ConfigError, match="read t: match column 'msg' is a column of the table"):
        O.read_plan({"matchColumns": '{"msg": {"op": "exists", "column": "id"}}'}, TABLE, "read t")
    with pytest.raises(ConfigError, match=r"read option requiredColumns=.*expected a JSON list of names"):
        O.read_plan({"requiredColumns": '"id"'}, TABLE, "read t")
    with pytest.raises(ConfigError, match=r"read option matchColumns=.*expected a JSON object"):
        O.read_plan({"matchColumns": "[1]"}, TABLE, "read t")
    with pytest.raises(FilterError, match="read option filter: not JSON"):
        O.read_plan({"filter": "{"}, TABLE, "read t")
    with pytest.raises(FilterError, match="read option filter: nests deeper than 256"):
        O.read_plan({"filter": '{"op":"not","child":' * 5000 + "{}" + "}" * 5000}, TABLE, "read t")
    types = {"id": "long", "Level": "string"}
    assert O.output_columns(ReadPlan(required_columns=("level", "x")), TABLE, types) == ["Level"]
    assert O.output_columns(ReadPlan(required_columns=("x",)), TABLE, types) == ["id"]
    assert O.output_columns(ReadPlan(columns=("msg", "id"), required_columns=("*",)), TABLE, types) == ["msg", "id"]
    assert O.output_columns(ReadPlan(), TABLE, types) is None
