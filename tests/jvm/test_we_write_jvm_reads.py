"""Tables this project writes (``format("indextables")`` in a Spark 4.3 session, its SQL commands) read
by IndexTables4Spark 0.5.4 and 0.5.5: every row exactly, and the same answers to the fixed query set.

Each test builds its table and computes this project's answers first, then asks the JVM peer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from harness import jvm_peer
from tests.jvm import queries as q
from tests.jvm.conftest import PeerPool, record

pytestmark = pytest.mark.jvm


def our_write(
    spark: Any, values: list[tuple[Any, ...]], path: str, mode: str = "append", partitioned: bool = False
) -> None:
    writer = spark.createDataFrame(values, q.DDL).write.format("indextables").mode(mode)
    for key, value in q.WRITE_OPTIONS.items():
        writer = writer.option(key, value)
    if partitioned:
        writer = writer.option("partitionBy", "day")
    writer.save(path)


def batch(spark: Any, path: str) -> list[tuple[Any, ...]]:
    values = q.rows(60)
    our_write(spark, values, path)
    return values


def append(spark: Any, path: str) -> list[tuple[Any, ...]]:
    first, second = q.rows(40), q.rows(30, start=40)
    our_write(spark, first, path)
    our_write(spark, second, path)
    return first + second


def overwrite(spark: Any, path: str) -> list[tuple[Any, ...]]:
    our_write(spark, q.rows(40), path)
    values = q.rows(25, start=100)
    our_write(spark, values, path, mode="overwrite")
    return values


def partitioned(spark: Any, path: str) -> list[tuple[Any, ...]]:
    first, second = q.rows(60), q.rows(21, start=60)
    our_write(spark, first, path, partitioned=True)
    our_write(spark, second, path, partitioned=True)
    return first + second


def merged(spark: Any, path: str) -> list[tuple[Any, ...]]:
    values = []
    for k in range(4):
        part = q.rows(15, start=15 * k)
        our_write(spark, part, path)
        values += part
    connect_plugin.sql(spark, f"MERGE SPLITS '{path}'").collect()
    return values


def merged_partitioned(spark: Any, path: str) -> list[tuple[Any, ...]]:
    values = []
    for k in range(3):
        part = q.rows(20, start=20 * k)
        our_write(spark, part, path, partitioned=True)
        values += part
    connect_plugin.sql(spark, f"MERGE SPLITS '{path}' WHERE day = '2024-01-02'").collect()
    return values


def checkpointed(spark: Any, path: str) -> list[tuple[Any, ...]]:
    values = []
    for k in range(3):
        part = q.rows(12, start=12 * k)
        our_write(spark, part, path)
        values += part
    connect_plugin.sql(spark, f"CHECKPOINT INDEXTABLES '{path}'").collect()
    our_write(spark, q.rows(5, start=36), path)  # a version after the checkpoint
    return values + q.rows(5, start=36)


SCENARIOS: dict[str, Callable[[Any, str], list[tuple[Any, ...]]]] = {
    "batch": batch,
    "append": append,
    "overwrite": overwrite,
    "partitionBy": partitioned,
    "MERGE SPLITS": merged,
    "MERGE SPLITS WHERE partition": merged_partitioned,
    "CHECKPOINT": checkpointed,
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_jvm_reads_what_we_write(
    classic_spark: Any, jvm_peers: PeerPool, tmp_path: Path, request: pytest.FixtureRequest, scenario: str
) -> None:
    spark = classic_spark
    path = str(tmp_path / "t")
    values = SCENARIOS[scenario](spark, path)
    expected = q.sort_rows(q.from_python(values))
    names = q.ARROW.names
    ours = q.sort_rows(q.from_spark(spark.read.format("indextables").load(path).select(*names).collect()))
    assert ours == expected, f"{scenario}: this project does not read back what it wrote"

    def our_sql(sql: str) -> list[tuple[Any, ...]]:
        return q.from_spark(connect_plugin.sql(spark, sql.format(t=f"indextables.`{path}`")).collect())

    our_answers = q.answer_all(our_sql)

    differences: list[str] = []
    compared = 0
    for version in jvm_peer.VERSIONS:
        peer = jvm_peers.get(version)
        label = f"we wrote [{scenario}], JVM {version} read:"
        theirs = q.sort_rows(q.from_arrow(peer.read(path, select=names)))
        q.compare("every row", expected, theirs, differences, label)
        view = f"t_{abs(hash((path, version)))}"
        peer.view(path, view)
        their_answers = q.answer_all(lambda sql, view=view, peer=peer: q.from_arrow(peer.sql(sql.format(t=view))))
        compared += 1 + q.compare_all(our_answers, their_answers, label, differences)
    record(request, tables=len(jvm_peer.VERSIONS), queries=compared, differences=differences)
    assert not differences, "\n".join(differences)
