"""The rows both sides write and the fixed query set both sides answer, for the ``jvm`` tests.

Rows are made here (Python values, a Spark DDL schema and the Arrow schema of the same types); answers
are compared as normalized Python values (timestamps in UTC, maps as dicts, structs as dicts, binary as
bytes), row for row, after sorting where the query has no ORDER BY of its own.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa

UTC = datetime.timezone.utc

# Every column type this project's writer accepts, and the options naming the tokenized and JSON columns.
DDL = (
    "id long, s string, txt string, i32 int, i16 short, i8 byte, f32 float, f64 double, dec decimal(10,2), "
    "b boolean, d date, ts timestamp, bin binary, st struct<name:string,n:int>, m map<string,string>, "
    "arr array<string>, js string, day string"
)
ARROW = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.string()),
        ("txt", pa.string()),
        ("i32", pa.int32()),
        ("i16", pa.int16()),
        ("i8", pa.int8()),
        ("f32", pa.float32()),
        ("f64", pa.float64()),
        ("dec", pa.decimal128(10, 2)),
        ("b", pa.bool_()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("bin", pa.binary()),
        ("st", pa.struct([("name", pa.string()), ("n", pa.int32())])),
        ("m", pa.map_(pa.string(), pa.string())),
        ("arr", pa.list_(pa.string())),
        ("js", pa.string()),
        ("day", pa.string()),
    ]
)
WRITE_OPTIONS = {
    "spark.indextables.indexing.typemap.txt": "text",
    "spark.indextables.indexing.typemap.js": "json",
}
# The scalar columns (the JVM's own writes are compared on these; its JSON fields on st/m/arr are a
# matter of their own).
SCALARS = ["id", "s", "txt", "i32", "i16", "i8", "f32", "f64", "b", "d", "ts", "day"]

_WORDS = ["alpha", "beta", "gamma", None]
_MESSAGES = [
    "upstream timeout while calling payments",
    "connection reset by peer",
    "request served ok",
    "disk error on volume and timeout",
    "retry scheduled after connection reset",
]


def rows(n: int, start: int = 0) -> list[tuple[Any, ...]]:
    out = []
    for i in range(start, start + n):
        out.append(
            (
                i,
                _WORDS[i % 4],
                f"{_MESSAGES[i % 5]} host{i % 7}",
                i % 40 - 5,
                i % 300 - 100,
                i % 200 - 100,
                (i % 16) * 0.5,
                i / 4 - 3.0,
                decimal.Decimal(i * 7 % 1000) / 100,
                i % 3 == 0,
                datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 3),
                datetime.datetime(2024, 1, 1, tzinfo=UTC) + datetime.timedelta(seconds=i * 61, microseconds=i),
                bytes([i % 256, 7, 0]),
                {"name": f"user{i % 9}", "n": i % 11} if i % 6 else None,
                {"color": ["red", "green", "blue"][i % 3], "k": str(i % 4)},
                [f"tag{i % 5}", f"tag{i % 3}"] if i % 4 else [],
                f'{{"user": {{"name": "u{i % 5}", "age": {20 + i % 30}}}, "ok": {"true" if i % 2 else "false"}}}',
                f"2024-01-0{1 + i % 3}",
            )
        )
    return out


def arrow_table(values: Sequence[tuple[Any, ...]], columns: Sequence[str] | None = None) -> pa.Table:
    names = ARROW.names
    records = [dict(zip(names, row, strict=True)) for row in values]
    for record in records:
        if record["m"] is not None:
            record["m"] = list(record["m"].items())
    table = pa.Table.from_pylist(records, schema=ARROW)
    return table.select(list(columns)) if columns else table


def ddl(columns: Sequence[str] | None = None) -> str:
    parts = [p.strip() for p in _split_ddl(DDL)]
    if columns is None:
        return ", ".join(parts)
    by_name = {p.split(" ", 1)[0]: p for p in parts}
    return ", ".join(by_name[c] for c in columns)


def _split_ddl(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += ch in "<("
        depth -= ch in ">)"
        current += ch
    return [*parts, current]


def project(values: Iterable[tuple[Any, ...]], columns: Sequence[str]) -> list[tuple[Any, ...]]:
    index = [ARROW.names.index(c) for c in columns]
    return [tuple(row[i] for i in index) for row in values]


# --- normalized values


def norm(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, float) and value != value:
        return "NaN"
    if hasattr(value, "asDict"):  # a Spark Row (a struct)
        return {k: norm(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: norm(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return {k: norm(v) for k, v in value}  # an Arrow map
    if isinstance(value, list | tuple):
        return [norm(v) for v in value]
    return value


def from_arrow(table: pa.Table) -> list[tuple[Any, ...]]:
    return [tuple(norm(v) for v in row.values()) for row in table.to_pylist()]


def from_spark(rows_: Iterable[Any]) -> list[tuple[Any, ...]]:
    return [tuple(norm(v) for v in row) for row in rows_]


def from_python(values: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [tuple(norm(v) for v in row) for row in values]


def sort_rows(values: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(values, key=repr)


# --- the fixed query set: (name, SQL with {t} for the table); ORDER BY keeps row order comparable

QUERIES: list[tuple[str, str]] = [
    ("count(*)", "SELECT count(*) AS n FROM {t}"),
    ("full read", "SELECT id, s, txt, i32, f64, b, d, ts, day FROM {t} ORDER BY id"),
    ("string =", "SELECT id FROM {t} WHERE s = 'beta' ORDER BY id"),
    ("string IS NULL", "SELECT id FROM {t} WHERE s IS NULL ORDER BY id"),
    ("long IN", "SELECT id FROM {t} WHERE id IN (1, 5, 9, 50, 1000) ORDER BY id"),
    ("int range", "SELECT id FROM {t} WHERE i32 >= 10 AND i32 < 20 ORDER BY id"),
    ("short <", "SELECT id FROM {t} WHERE i16 < -50 ORDER BY id"),
    ("byte IN", "SELECT id FROM {t} WHERE i8 IN (-97, -55, 3) ORDER BY id"),
    ("float >", "SELECT id FROM {t} WHERE f32 > 5.5 ORDER BY id"),
    ("double range", "SELECT id FROM {t} WHERE f64 BETWEEN 2.5 AND 10 ORDER BY id"),
    ("boolean", "SELECT id FROM {t} WHERE b = true ORDER BY id"),
    ("date =", "SELECT id FROM {t} WHERE d = DATE'2024-01-02' ORDER BY id"),
    ("timestamp >=", "SELECT id FROM {t} WHERE ts >= TIMESTAMP'2024-01-01 00:30:00' ORDER BY id"),
    ("partition =", "SELECT id FROM {t} WHERE day = '2024-01-03' ORDER BY id"),
    ("indexquery term", "SELECT id FROM {t} WHERE txt indexquery 'timeout' ORDER BY id"),
    ("indexquery phrase", "SELECT id FROM {t} WHERE txt indexquery '\"connection reset\"' ORDER BY id"),
    ("indexquery wildcard", "SELECT id FROM {t} WHERE txt indexquery 'time*' ORDER BY id"),
    ("indexquery boolean", "SELECT id FROM {t} WHERE txt indexquery 'timeout AND NOT upstream' ORDER BY id"),
    ("indexquery OR", "SELECT id FROM {t} WHERE txt indexquery 'disk OR payments' ORDER BY id"),
    ("indexquery + field", "SELECT id FROM {t} WHERE txt indexquery 'reset' AND s = 'alpha' ORDER BY id"),
    ("_indexall", "SELECT id FROM {t} WHERE _indexall indexquery 'timeout' ORDER BY id"),
    ("indexqueryall", "SELECT id FROM {t} WHERE indexqueryall('payments') ORDER BY id"),
    (
        "GROUP BY string",
        "SELECT s, count(*) AS n, sum(i32) AS total, min(f64) AS lo, max(f64) AS hi FROM {t} GROUP BY s ORDER BY s",
    ),
    ("GROUP BY partition", "SELECT day, count(*) AS n, avg(i32) AS mean FROM {t} GROUP BY day ORDER BY day"),
    (
        "GROUP BY + indexquery",
        "SELECT s, count(*) AS n FROM {t} WHERE txt indexquery 'timeout' GROUP BY s ORDER BY s",
    ),
    # the bucket functions, grouped by the expression as IndexTables4Spark's BucketAggregationTest does
    (
        "indextables_histogram",
        "SELECT indextables_histogram(f64, 5.0) AS b, count(*) AS n FROM {t} "
        "GROUP BY indextables_histogram(f64, 5.0) ORDER BY b",
    ),
    (
        "indextables_date_histogram",
        "SELECT indextables_date_histogram(ts, '1h') AS b, count(*) AS n FROM {t} "
        "GROUP BY indextables_date_histogram(ts, '1h') ORDER BY b",
    ),
    (
        "indextables_range",
        "SELECT indextables_range(f64, 'low', NULL, 0.0, 'mid', 0.0, 5.0, 'high', 5.0, NULL) AS b, count(*) AS n "
        "FROM {t} GROUP BY indextables_range(f64, 'low', NULL, 0.0, 'mid', 0.0, 5.0, 'high', 5.0, NULL) ORDER BY b",
    ),
]


def compare(
    name: str, ours: list[tuple[Any, ...]], theirs: list[tuple[Any, ...]], differences: list[str], label: str
) -> None:
    """Record a difference (``label``: which table and side) when the two answers are not equal."""
    if ours != theirs:
        only_ours = [r for r in ours if r not in theirs][:3]
        only_theirs = [r for r in theirs if r not in ours][:3]
        differences.append(
            f"{label} {name!r}: ours {len(ours)} rows, JVM {len(theirs)} rows; "
            f"only ours {only_ours}, only JVM {only_theirs}"
        )


def compare_columns(
    ours: list[tuple[Any, ...]],
    theirs: list[tuple[Any, ...]],
    columns: Sequence[str],
    differences: list[str],
    label: str,
) -> dict[str, tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]:
    """'every row' column by column (rows matched by ``id``, the first column): one difference per
    column whose values differ, named ``column <name>``. Returns each column's (ours, theirs) (id, value)
    pairs, so a known difference can be checked on its own."""
    assert columns[0] == "id"
    ours, theirs = _json_values(ours, columns), _json_values(theirs, columns)
    if [r[0] for r in sorted(ours)] != [r[0] for r in sorted(theirs)]:
        compare("every row (ids)", sorted(r[:1] for r in ours), sorted(r[:1] for r in theirs), differences, label)
    by_column = {}
    for i, name in enumerate(columns):
        mine = sorted(((r[0], r[i]) for r in ours), key=repr)
        other = sorted(((r[0], r[i]) for r in theirs), key=repr)
        by_column[f"column {name}"] = (mine, other)
        compare(f"column {name}", mine, other, differences, label)
    return by_column


# Columns written as JSON fields (typemap json): compared as JSON values. Each side returns the value as JSON
# text of its own spelling: this project the text it was given, 0.5.3 its compact form with sorted keys
# (representation only; PROTOCOL.md "Known differences").
JSON_COLUMNS = ("js",)


def _json_values(values: list[tuple[Any, ...]], columns: Sequence[str]) -> list[tuple[Any, ...]]:
    index = [i for i, c in enumerate(columns) if c in JSON_COLUMNS]
    if not index:
        return values
    out = []
    for row in values:
        cells = list(row)
        for i in index:
            if isinstance(cells[i], str):
                cells[i] = json.loads(cells[i])
        out.append(tuple(cells))
    return out


QueryRunner = Callable[[str], list[tuple[Any, ...]]]


def answer_all(run: QueryRunner, skip: Iterable[str] = ()) -> dict[str, list[tuple[Any, ...]]]:
    """Every query of QUERIES (but ``skip``) on one side."""
    skipped = set(skip)
    return {name: run(sql) for name, sql in QUERIES if name not in skipped}


def assert_not_vacuous(answers: dict[str, list[tuple[Any, ...]]]) -> None:
    """Every query of the set finds rows in every table the tests make: equal empty answers prove little."""
    empty = [name for name, rows_ in answers.items() if not rows_]
    assert not empty, f"queries with no rows on this table: {empty}"


def compare_all(
    ours: dict[str, list[tuple[Any, ...]]],
    theirs: dict[str, list[tuple[Any, ...]]],
    label: str,
    differences: list[str],
    known: Iterable[str] = (),
) -> int:
    """Compares the two sides' answers but the ``known`` ones (each a strict xfail of its own); returns
    how many queries were compared."""
    skipped = set(known)
    for name, rows_ in ours.items():
        if name not in skipped:
            compare(name, rows_, theirs[name], differences, label)
    return len(ours)
