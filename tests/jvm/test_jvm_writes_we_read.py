"""Tables IndexTables4Spark 0.5.4 and 0.5.5 write (their ``df.write`` with their own options, their
MERGE SPLITS and CHECKPOINT) read by this project: every row exactly, and the same answers to the fixed
query set as the JVM gives on its own table."""

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

# The JVM's own write options: typemaps (list and per-field syntax), fast fields for the aggregates.
JVM_OPTIONS = {
    "spark.indextables.indexing.typemap.text": "txt",
    "spark.indextables.indexing.typemap.js": "json",
    "spark.indextables.indexing.fastfields": "i32,f64,ts,s,day",
}


def jvm_batch(peer: jvm_peer.JvmPeer, path: str) -> list[tuple[Any, ...]]:
    values = q.rows(60)
    peer.write(q.arrow_table(values), path, mode="overwrite", options=JVM_OPTIONS, schema=q.ddl())
    return values


def jvm_partitioned_appends(peer: jvm_peer.JvmPeer, path: str) -> list[tuple[Any, ...]]:
    first, second = q.rows(45), q.rows(36, start=45)
    peer.write(q.arrow_table(first), path, mode="overwrite", options=JVM_OPTIONS, partition_by=["day"], schema=q.ddl())
    peer.write(q.arrow_table(second), path, mode="append", options=JVM_OPTIONS, partition_by=["day"], schema=q.ddl())
    return first + second


def jvm_merged_checkpointed(peer: jvm_peer.JvmPeer, path: str) -> list[tuple[Any, ...]]:
    values = []
    for k in range(4):
        part = q.rows(15, start=15 * k)
        peer.write(q.arrow_table(part), path, mode="append", options=JVM_OPTIONS, schema=q.ddl(), repartition=2)
        values += part
    peer.sql(f"MERGE SPLITS '{path}'")
    peer.sql(f"CHECKPOINT INDEXTABLES '{path}'")
    return values


SCENARIOS: dict[str, Callable[[jvm_peer.JvmPeer, str], list[tuple[Any, ...]]]] = {
    "batch": jvm_batch,
    "partitionBy + append": jvm_partitioned_appends,
    "MERGE SPLITS + CHECKPOINT": jvm_merged_checkpointed,
}


@pytest.mark.parametrize("version", jvm_peer.VERSIONS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_we_read_what_the_jvm_writes(
    jvm_peers: PeerPool,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    scenario: str,
    version: str,
) -> None:
    peer = jvm_peers.get(version)
    spark = request.getfixturevalue("classic_spark")  # after the peer: no Spark 4.3 session for a skip
    path = str(tmp_path / "t")
    values = SCENARIOS[scenario](peer, path)
    expected = q.sort_rows(q.from_python(values))
    names = q.ARROW.names
    differences: list[str] = []
    label = f"JVM {version} wrote [{scenario}], we read:"

    their_rows = q.sort_rows(q.from_arrow(peer.read(path, select=names)))
    q.compare("every row (the JVM's own read)", expected, their_rows, differences, label)
    ours = q.sort_rows(q.from_spark(spark.read.format("indextables").load(path).select(*names).collect()))
    q.compare("every row", ours, expected, differences, label)

    def our_sql(sql: str) -> list[tuple[Any, ...]]:
        return q.from_spark(connect_plugin.sql(spark, sql.format(t=f"indextables.`{path}`")).collect())

    view = f"t_{abs(hash((path, version)))}"
    peer.view(path, view)
    their_answers = q.answer_all(lambda sql: q.from_arrow(peer.sql(sql.format(t=view))))
    q.assert_not_vacuous(their_answers)
    compared = 2 + q.compare_all(q.answer_all(our_sql), their_answers, label, differences)
    record(request, tables=1, queries=compared, differences=differences)
    assert not differences, "\n".join(differences)
