"""The read plan contract (``indextables_contract.read``): a client's pushed read round-trips through
its options, the executors' option parser knows every key, and the client spells none of them."""

from __future__ import annotations

from pathlib import Path

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
        str(p.relative_to(ROOT)): sorted(_string_constants(p) & camel) for p in sorted((ROOT / "connect_plugin").glob("*.py"))
    }
    assert {p: s for p, s in spelled.items() if s} == {}
