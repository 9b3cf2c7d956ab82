"""Index query + residual planning: for random filter trees over a real split, the rows
``scan_split`` returns are exactly the rows a plain Python evaluation (SQL three-valued logic)
keeps, whatever part the index answers."""

from __future__ import annotations

import datetime
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.query.pushdown import FilterPlan, Support, leaf_support, plan
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.search.table_search import scan_split
from executor_lib.splits.write.writer import write_split
from indextables_contract import filters as F
from indextables_contract.errors import FilterError

UTC = datetime.timezone.utc
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("level", pa.string()),
        ("msg", pa.string()),
        ("score", pa.float64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
    ]
)
LEVELS = ["INFO", "WARN", "ERROR", None, "info"]
WORDS = ["alpha", "beta", "gamma", "delta"]


def _rows(n: int) -> list[dict[str, Any]]:
    base = datetime.datetime(2024, 1, 1, tzinfo=UTC)
    return [
        {
            "id": i,
            "level": LEVELS[i % 5],
            "msg": f"{WORDS[i % 4]} {WORDS[(i // 4) % 4]} line{i}" if i % 11 else None,
            "score": None if i % 13 == 0 else i / 3,
            "ts": base + datetime.timedelta(seconds=i // 2, microseconds=(i % 2) * 400_000),
            "day": datetime.date(2024, 1, 1 + i % 5),
        }
        for i in range(120)
    ]


@pytest.fixture(scope="module")
def searcher(tmp_path_factory: pytest.TempPathFactory) -> SplitSearcher:
    out = tmp_path_factory.mktemp("pushdown")
    table = pa.Table.from_pylist(_rows(120), schema=SCHEMA)
    mapping = mapping_for(SCHEMA, {"spark.indextables.indexing.typemap.msg": "text"})
    written = write_split(table, mapping, out)
    return SplitSearcher(written.path, out / "work", SCHEMA, None)


def _sql(f: F.Filter, row: dict[str, Any]) -> bool | None:
    """SQL three-valued evaluation (QueryString on msg: every word must occur)."""
    if isinstance(f, F.And):
        vals = [_sql(c, row) for c in f.children]
        return False if False in vals else (None if None in vals else True)
    if isinstance(f, F.Or):
        vals = [_sql(c, row) for c in f.children]
        return True if True in vals else (None if None in vals else False)
    if isinstance(f, F.Not):
        v = _sql(f.child, row)
        return None if v is None else not v
    if isinstance(f, F.QueryString):
        text = row["msg"] or ""
        return all(w in text.split() for w in f.query.split(" AND "))
    v = row[f.column]
    if isinstance(f, F.Exists):
        return v is not None
    if v is None:
        return None
    if isinstance(f, F.Term):
        return bool(v == f.value)
    if isinstance(f, F.TermIn):
        return v in f.values
    if isinstance(f, F.Between):
        ok = True
        if f.lower is not None:
            ok = ok and (v >= f.lower if f.lower_inclusive else v > f.lower)
        if f.upper is not None:
            ok = ok and (v <= f.upper if f.upper_inclusive else v < f.upper)
        return ok
    if isinstance(f, F.Prefix):
        return bool(v.startswith(f.prefix))
    if isinstance(f, F.Contains):
        return f.substring in v
    raise AssertionError(f)


def _leaf(rng: random.Random) -> F.Filter:
    base = datetime.datetime(2024, 1, 1, tzinfo=UTC)
    choices = [
        lambda: F.Term("level", rng.choice(["INFO", "WARN", "ERROR", "info"])),
        lambda: F.TermIn("level", tuple(rng.sample(["INFO", "WARN", "ERROR"], 2))),
        lambda: F.Between("id", rng.randint(0, 60), rng.choice([None, rng.randint(60, 130)]), rng.random() < 0.5),
        lambda: F.Between("score", lower=rng.uniform(0, 40), lower_inclusive=False),
        lambda: F.Term("score", float(rng.randint(0, 119)) / 3),
        lambda: F.Between("ts", lower=base + datetime.timedelta(seconds=rng.randint(0, 60), microseconds=200_000)),
        lambda: F.Term("ts", base + datetime.timedelta(seconds=rng.randint(0, 59), microseconds=400_000)),
        lambda: F.Term("day", datetime.date(2024, 1, rng.randint(1, 5))),
        lambda: F.Exists(rng.choice(["level", "score", "msg"])),
        lambda: F.Prefix("level", rng.choice(["I", "E", "WA", "in"])),
        lambda: F.Contains("level", rng.choice(["R", "NF", "x"])),
        lambda: F.Contains("msg", rng.choice(["alpha", "line1", "ta be"])),  # tokenized: rows only
        lambda: F.Term("msg", "alpha alpha line0"),
        lambda: F.QueryString(rng.choice(["alpha", "beta AND gamma", "delta"]), "msg"),
    ]
    return rng.choice(choices)()


def _tree(rng: random.Random, depth: int) -> F.Filter:
    if depth == 0 or rng.random() < 0.35:
        return _leaf(rng)
    kind = rng.choice(["and", "or", "not"])
    if kind == "not":
        return F.Not(_tree(rng, depth - 1))
    children = tuple(_tree(rng, depth - 1) for _ in range(rng.randint(2, 3)))
    return F.And(children) if kind == "and" else F.Or(children)


def test_random_trees_match_sql_semantics(searcher: SplitSearcher) -> None:
    rows = _rows(120)
    rng = random.Random(20261121)
    used_index = used_residual = 0
    for _ in range(300):
        tree = _tree(rng, 3)
        filter_plan = plan(tree, [searcher.mapping], SCHEMA)
        used_index += filter_plan.index is not None
        used_residual += filter_plan.residual is not None
        got = scan_split(searcher, filter_plan, ["id"]).column("id").to_pylist()
        expected = [r["id"] for r in rows if _sql(tree, r) is True]
        assert sorted(got) == expected, (tree, filter_plan)
    assert used_index > 100 and used_residual > 100  # both paths were exercised


def test_support_levels(searcher: SplitSearcher) -> None:
    m = [searcher.mapping]
    assert leaf_support(F.Term("level", "INFO"), m, SCHEMA)[0] is Support.EXACT
    assert leaf_support(F.Term("msg", "x"), m, SCHEMA)[0] is Support.NONE
    assert (
        leaf_support(F.Between("ts", lower=datetime.datetime(2024, 1, 1, tzinfo=UTC)), m, SCHEMA)[0] is Support.SUPERSET
    )
    support, query = leaf_support(F.Not(F.Term("level", "INFO")), m, SCHEMA)
    assert support is Support.EXACT and query == F.And((F.Exists("level"), F.Not(F.Term("level", "INFO"))))


def test_limit_and_partition_constants(searcher: SplitSearcher) -> None:
    constants = {"region": pa.scalar("eu")}
    got = scan_split(searcher, FilterPlan(None, F.Term("region", "eu")), ["id", "region"], constants, limit=5)
    assert got.num_rows == 5 and set(got.column("region").to_pylist()) == {"eu"}
    none = scan_split(searcher, FilterPlan(None, F.Term("region", "us")), ["id"], constants)
    assert none.num_rows == 0


def test_filter_json_round_trip() -> None:
    tree = F.Or(
        (F.And((F.Term("a", 1), F.Between("ts", "2024-01-01", None, False))), F.Not(F.QueryString("x y", None)))
    )
    assert F.from_json(F.to_json(tree)) == tree
    with pytest.raises(FilterError, match=r"filter.or\[0\]: unknown op 'nope'"):
        F.from_json({"op": "or", "children": [{"op": "nope"}]})


def test_tokenized_text_is_kept_out_of_the_index(tmp_path: Path, searcher: SplitSearcher) -> None:
    # equality on a tokenized column must use the rows (Tantivy would match tokens, not the value)
    filter_plan = plan(F.Term("msg", "alpha alpha line0"), [searcher.mapping], SCHEMA)
    assert filter_plan.index is None and filter_plan.residual is not None


def test_literals_of_another_number_type_compare_as_spark_compares(tmp_path: Path) -> None:
    """``dec > 0`` on a decimal column, ``n > 0.5`` / ``n = 1.5`` / ``n IN (1.5, 2.0)`` on an integer
    column: by value, in the index and in the rows alike (issue 32, item 4)."""
    from decimal import Decimal

    from executor_lib.spark.common import typed_filter

    schema = pa.schema([("n", pa.int64()), ("dec", pa.decimal128(10, 2)), ("f", pa.float64())])
    rows = pa.table(
        {
            "n": [0, 1, 2, None],
            "dec": [Decimal("0.00"), Decimal("2.50"), Decimal("-1.25"), None],
            "f": [0.5, 1.0, 2.5, None],
        },
        schema=schema,
    )
    mapping = mapping_for(schema, {})
    searcher = SplitSearcher(write_split(rows, mapping, tmp_path / "o").path, tmp_path / "w", schema, None)
    cases = [
        (F.gt("dec", 0), [1]),
        (F.Term("dec", Decimal("2.5")), [1]),
        (F.TermIn("dec", (0, 1.555, Decimal("-1.25"))), [0, 2]),
        (F.gt("n", 0.5), [1, 2]),
        (F.Term("n", 1.5), []),
        (F.Not(F.Term("n", 1.5)), [0, 1, 2]),
        (F.Term("n", 1.0), [1]),
        (F.TermIn("n", (1.5, 2.0)), [2]),
        (F.lt("n", Decimal("1.5")), [0, 1]),
        (F.gt("n", float("nan")), []),
        (F.lt("n", float("inf")), [0, 1, 2]),
        (F.gt("n", -1e30), [0, 1, 2]),
        (F.Term("f", Decimal("2.5")), [2]),
    ]
    for f, expected in cases:
        typed = typed_filter(f, schema)
        out = scan_split(searcher, plan(typed, [mapping], schema), ["n"], row_ids=True)
        assert sorted(out.column("__row").to_pylist()) == expected, f


def test_filters_on_nested_fields_are_evaluated_on_the_rows(tmp_path: Path) -> None:
    from executor_lib.spark.common import typed_filter

    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("user", pa.struct([("name", pa.string()), ("age", pa.int32())])),
            ("attrs", pa.map_(pa.string(), pa.string())),
        ]
    )
    rows = pa.table(
        {
            "id": [1, 2, 3],
            "user": [{"name": "Alice", "age": 31}, {"name": "Bob", "age": 45}, None],
            "attrs": [[("color", "red")], [("color", "blue")], []],
        },
        schema=schema,
    )
    mapping = mapping_for(schema, {})
    searcher = SplitSearcher(write_split(rows, mapping, tmp_path / "o").path, tmp_path / "w", schema, None)
    for f, expected in [
        (F.Term("User.Name", "Alice"), [1]),
        (F.Term("t.user.name", "Bob"), [2]),
        (F.gt("user.age", 40), [2]),
        (F.Not(F.Term("attrs.color", "red")), [2]),
        (F.And((F.Term("attrs.color", "red"), F.QueryString("user.name:alice"))), [1]),
    ]:
        typed = typed_filter(f, schema)
        out = scan_split(searcher, plan(typed, [mapping], schema), ["id"])
        assert sorted(out.column("id").to_pylist()) == expected, f
