"""Tables IndexTables4Spark (0.5.3) writes (their ``df.write`` with their own options, their
MERGE SPLITS and CHECKPOINT) read by this project: every row exactly, and the same answers to the fixed
query set as the JVM gives on its own table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from harness import jvm_peer
from tests.jvm import known
from tests.jvm import queries as q
from tests.jvm.conftest import PeerPool, record

pytestmark = pytest.mark.jvm

# The JVM's own write options: typemaps (list and per-field syntax), fast fields for the aggregates.
JVM_OPTIONS = {
    "spark.indextables.indexing.typemap.text": "txt",
    "spark.indextables.indexing.typemap.js": "json",
    "spark.indextables.indexing.fastfields": "i32,f64,ts,s,day",
}


# 0.5.3 refuses to write byte, short and decimal columns (tests/jvm/known.py NARROW_TYPES;
# test_the_jvm_refuses_narrow_types checks the refusal is clear): its tables have the other columns, and
# the queries on those three are not asked of them.
NARROW = ("i16", "i8", "dec")
COLUMNS = [c for c in q.ARROW.names if c not in NARROW]
NARROW_QUERIES = ("short <", "byte IN")


def table(values: list[tuple[Any, ...]]) -> Any:
    return q.arrow_table(values, COLUMNS)


def jvm_batch(peer: jvm_peer.JvmPeer, path: str) -> list[tuple[Any, ...]]:
    values = q.rows(60)
    peer.write(table(values), path, mode="overwrite", options=JVM_OPTIONS, schema=q.ddl(COLUMNS))
    return values


def jvm_partitioned_appends(peer: jvm_peer.JvmPeer, path: str) -> list[tuple[Any, ...]]:
    first, second = q.rows(45), q.rows(36, start=45)
    peer.write(table(first), path, mode="overwrite", options=JVM_OPTIONS, partition_by=["day"], schema=q.ddl(COLUMNS))
    peer.write(table(second), path, mode="append", options=JVM_OPTIONS, partition_by=["day"], schema=q.ddl(COLUMNS))
    return first + second


def jvm_merged_checkpointed(peer: jvm_peer.JvmPeer, path: str) -> list[tuple[Any, ...]]:
    values = []
    for k in range(4):
        part = q.rows(15, start=15 * k)
        peer.write(table(part), path, mode="append", options=JVM_OPTIONS, schema=q.ddl(COLUMNS), repartition=2)
        values += part
    peer.sql(f"MERGE SPLITS '{path}'")
    peer.sql(f"CHECKPOINT INDEXTABLES '{path}'")
    return values


SCENARIOS: dict[str, Callable[[jvm_peer.JvmPeer, str], list[tuple[Any, ...]]]] = {
    "batch": jvm_batch,
    "partitionBy + append": jvm_partitioned_appends,
    "MERGE SPLITS + CHECKPOINT": jvm_merged_checkpointed,
}


# (scenario, comparison) -> why: IndexTables4Spark 0.5.3's own differences on its own tables (tests/jvm/known.py)
KNOWN: dict[tuple[str, str], str] = {
    **{(s, c): known.RANGE_NOT_FAST for s in SCENARIOS for c in ("float >", "date =")},
    **{(s, c): known.NULL_GROUP for s in SCENARIOS for c in ("GROUP BY string", "GROUP BY + indexquery")},
    **{(s, "indextables_range"): known.RANGE_BUCKETS for s in SCENARIOS},
    ("partitionBy + append", "long IN"): known.IN_STRING_ORDER,
}
COMPARED: dict[tuple[str, str], dict[str, tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]]] = {}


def their_sql(peer: jvm_peer.JvmPeer, sql: str) -> list[tuple[Any, ...]]:
    """The JVM's answer; a query it fails is answered by one ("error", first line of the error) row, so the
    failure is a difference (a known one where KNOWN says so) and not the end of the comparison."""
    try:
        return q.from_arrow(peer.sql(sql))
    except jvm_peer.JvmPeerError as e:
        lines = [ln for ln in str(e).splitlines() if "Exception" in ln or "failed" in ln]
        return [("error", (lines or [str(e)])[-1][:300])]


def compare_scenario(
    jvm_peers: PeerPool, base: Path, request: pytest.FixtureRequest, scenario: str, version: str
) -> tuple[int, list[str]]:
    """The JVM writes the scenario's table; both sides answer the query set. (queries, unknown differences);
    every comparison's answers go into COMPARED."""
    peer = jvm_peers.get(version)
    spark = request.getfixturevalue("classic_spark")  # after the peer: no Spark 4.3 session for a skip
    path = str(base / "t")
    values = q.project(SCENARIOS[scenario](peer, path), COLUMNS)
    expected = q.sort_rows(q.from_python(values))
    differences: list[str] = []
    label = f"JVM {version} wrote [{scenario}], we read:"
    known_here = [c for (s, c) in KNOWN if s == scenario]

    their_rows = q.sort_rows(q.from_arrow(peer.read(path, select=COLUMNS)))
    found: list[str] = []
    q.compare_columns(expected, their_rows, COLUMNS, found, label.replace("we read:", "the JVM read:"))
    ours = q.sort_rows(q.from_spark(spark.read.format("indextables").load(path).select(*COLUMNS).collect()))
    columns = q.compare_columns(ours, expected, COLUMNS, found, label)
    differences += [d for d in found if not any(f"{label} {c!r}" in d for c in known_here)]

    def our_sql(sql: str) -> list[tuple[Any, ...]]:
        return q.from_spark(connect_plugin.sql(spark, sql.format(t=f"indextables.`{path}`")).collect())

    view = f"t_{abs(hash((path, version)))}"
    peer.view(path, view)
    their_answers = q.answer_all(lambda sql: their_sql(peer, sql.format(t=view)), skip=NARROW_QUERIES)
    q.assert_not_vacuous(their_answers)
    our_answers = q.answer_all(our_sql, skip=NARROW_QUERIES)
    compared = 2 + q.compare_all(our_answers, their_answers, label, differences, known=known_here)
    COMPARED[(scenario, version)] = {
        **columns,
        **{name: (rows_, their_answers[name]) for name, rows_ in our_answers.items()},
    }
    return compared, differences


@pytest.mark.parametrize("version", jvm_peer.VERSIONS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_we_read_what_the_jvm_writes(
    jvm_peers: PeerPool,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    scenario: str,
    version: str,
) -> None:
    compared, differences = compare_scenario(jvm_peers, tmp_path, request, scenario, version)
    record(request, tables=1, queries=compared, differences=differences)
    assert not differences, "\n".join(differences)


@pytest.mark.parametrize("version", jvm_peer.VERSIONS)
@pytest.mark.parametrize(
    ("scenario", "comparison"),
    known.strict_xfails(KNOWN),
)
def test_known_jvm_difference(
    jvm_peers: PeerPool,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    scenario: str,
    comparison: str,
    version: str,
) -> None:
    """A known difference of IndexTables4Spark's on its own table (KNOWN, with its reason): still there."""
    if (scenario, version) not in COMPARED:
        compare_scenario(jvm_peers, tmp_path, request, scenario, version)
    ours, theirs = COMPARED[(scenario, version)][comparison]
    assert ours == theirs, f"JVM {version} wrote [{scenario}], {comparison}: ours {ours[:3]}, JVM {theirs[:3]}"


REFUSALS = {"i16": "ShortType", "i8": "ByteType", "dec": "DecimalType(10,2)"}


@pytest.mark.parametrize("column", list(REFUSALS))
def test_the_jvm_refuses_narrow_types(jvm_peers: PeerPool, tmp_path: Path, column: str) -> None:
    """0.5.3 refuses to write byte, short and decimal columns (known.NARROW_TYPES), with an error naming the
    column and its type, and commits nothing."""
    if "0.5.3" not in jvm_peer.VERSIONS:
        pytest.skip("the refusal is 0.5.3's")
    peer = jvm_peers.get("0.5.3")
    path = str(tmp_path / "t")
    columns = ["id", column]
    with pytest.raises(jvm_peer.JvmPeerError) as refused:
        peer.write(q.arrow_table(q.rows(5), columns), path, mode="overwrite", schema=q.ddl(columns))
    assert f"Unsupported field type for field {column}: {REFUSALS[column]}" in str(refused.value)
    log = Path(path) / "_transaction_log"
    versions = sorted(p.name for p in log.iterdir()) if log.exists() else []
    assert not any(n.endswith(".json") and not n.startswith("00000000000000000000") for n in versions), versions
