"""``partition_index.combinations``: the distinct value combinations of some columns and each row's,
vectorized; checked against Python's own tuples, including when the radix key outgrows an int64."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from executor_lib.log.files.partition_index import combinations


def _check(columns: list[list[str | None]]) -> list[tuple[str | None, ...]]:
    rows = len(columns[0])
    combos, inverse = combinations([pa.array(c, pa.string()) for c in columns], rows)
    expected = list(zip(*columns, strict=True))
    assert [combos[i] for i in inverse.tolist()] == expected
    assert sorted(combos, key=repr) == sorted(set(expected), key=repr)  # each once
    return combos


def test_combinations_of_values_and_nulls_in_code_order() -> None:
    combos = _check([["b", "a", None, "b", "a"], ["x", None, "y", "x", None]])
    assert combos == [("b", "x"), ("a", None), (None, "y")]  # by codes: first seen first, null last


@pytest.mark.parametrize("distinct", [3, 5_000])
def test_combinations_stay_exact_when_the_mixed_radix_would_overflow_an_int64(distinct: int) -> None:
    rng = random.Random(distinct)
    rows = 5_000
    columns = [[rng.choice([None, *map(str, range(distinct))]) for _ in range(rows)] for _ in range(6)]
    _check(columns)  # 6 columns of up to 5,001 codes each: a product of about 1.6e22, past 2**62


def test_combinations_of_no_rows_and_of_no_columns() -> None:
    assert combinations([pa.array([], pa.string())], 0)[0] == []
    combos, inverse = combinations([], 3)
    assert combos == [()] and inverse.tolist() == [0, 0, 0]
