"""The filter tree contract (``indextables_contract.filters``): every node round-trips through its JSON
form, a malformed tree is named part by part, and the client builds trees only from the contract's
nodes — it never spells the JSON form itself."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import pytest

from connect_plugin.grammar import parse_predicate, split_spark_part
from connect_plugin.where import to_filter
from indextables_contract import filters as F
from indextables_contract.errors import FilterError, QueryError
from tests.contract.test_commands import _string_constants

ROOT = Path(__file__).resolve().parents[2]

SAMPLES: list[F.Filter] = [
    F.Term("level", "ERROR"),
    F.TermIn("code", (200, 404)),
    F.Between("latency", 10, 20.5, lower_inclusive=False),
    F.Between("ts", upper="2024-01-01T00:00:00", upper_inclusive=False),
    F.Prefix("host", "web-"),
    F.Contains("msg", "time out"),
    F.Regex("msg", "(?s).*x.*"),
    F.Exists("trace"),
    F.QueryString("timeout AND db"),
    F.QueryString("time*", "msg", "text"),
    F.QueryString("a b", "tag", "exact"),
    F.And((F.Term("a", 1), F.Or((F.Term("b", True), F.Not(F.Exists("c")))))),
]


@pytest.mark.parametrize("tree", SAMPLES, ids=[repr(s)[:60] for s in SAMPLES])
def test_every_node_round_trips_through_its_json_form(tree: F.Filter) -> None:
    assert F.from_json(F.to_json(tree)) == tree
    assert F.from_json(json.loads(F.to_text(tree))) == tree
    assert F.as_filter(tree) is tree and F.as_filter(F.to_json(tree)) == tree


def test_the_samples_cover_every_node_type() -> None:
    """A node type added to the contract must get a JSON form (and a sample here)."""
    covered = set()
    for tree in SAMPLES:
        stack: list[F.Filter] = [tree]
        while stack:
            node = stack.pop()
            covered.add(type(node))
            stack += list(getattr(node, "children", ())) + ([node.child] if isinstance(node, F.Not) else [])
    assert covered == set(F.FILTER_TYPES)


def test_dates_travel_as_iso_text() -> None:
    tree = F.Between("day", datetime.date(2024, 1, 2), datetime.datetime(2024, 1, 3, 4, 5))
    assert F.to_json(tree) == {"op": "range", "column": "day", "lower": "2024-01-02", "upper": "2024-01-03T04:05:00"}


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        ({"op": "nope"}, "filter: unknown op 'nope'"),
        (
            {"op": "and", "children": [{"op": "term", "column": "a", "value": 1}, {"op": "term"}]},
            "filter.and[1]: 'term' is missing 'column'",
        ),
        ({"op": "or", "children": []}, "'or' needs a non-empty 'children' list"),
        ({"op": "not", "child": {"op": "prefix", "column": "a", "value": 3}}, "filter.not: expected a string, got 3"),
        ({"op": "query", "query": "x", "kind": "fuzzy"}, "query kind must be 'text' or 'exact'"),
        ("level = 'x'", "expected an object with an 'op'"),
    ],
)
def test_a_malformed_tree_names_its_part(tree: Any, message: str) -> None:
    with pytest.raises(FilterError) as e:
        F.from_json(tree)
    assert message in str(e.value) and isinstance(e.value, QueryError)


def test_the_client_turns_conditions_into_contract_nodes() -> None:
    assert to_filter("level = 'ERROR' AND latency > 100") == F.And(
        (F.Term("level", "ERROR"), F.Between("latency", lower=100, lower_inclusive=False))
    )
    assert to_filter("msg indexquery 'a OR b' OR host LIKE 'web-%'") == F.Or(
        (F.QueryString("a OR b", "msg"), F.Prefix("host", "web-"))
    )
    assert to_filter("x NOT IN (1, 2) AND y IS NULL AND z BETWEEN 1 AND 2 AND t != 'a'") == F.And(
        (F.Not(F.TermIn("x", (1, 2))), F.Not(F.Exists("y")), F.Between("z", 1, 2), F.Not(F.Term("t", "a")))
    )
    assert to_filter({"op": "exists", "column": "x"}) == F.Exists("x")
    with pytest.raises(FilterError, match="filter: unknown op 'spark'"):
        to_filter({"op": "spark", "sql": "length(x) > 1"})
    with pytest.raises(ValueError, match="function calls and arithmetic are not supported here"):
        to_filter("length(msg) > 3")


def test_function_calls_stay_with_spark_and_never_enter_the_tree() -> None:
    where = parse_predicate("msg indexquery 'error' AND length(msg) > 3 AND id < 5")
    tree, condition = split_spark_part(where)
    assert tree == F.And((F.QueryString("error", "msg"), F.Between("id", upper=5, upper_inclusive=False)))
    assert condition == "(length(msg) > 3)"


def test_the_client_never_spells_the_json_form() -> None:
    """The client builds nodes and sends ``to_text`` of them: no ``"op"`` keys of its own."""
    spelled = {
        str(p.relative_to(ROOT)): sorted(_string_constants(p) & {"op", "children", "child"})
        for p in sorted((ROOT / "connect_plugin").glob("*.py"))
    }
    assert {p: s for p, s in spelled.items() if s} == {}
