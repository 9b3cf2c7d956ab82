"""How a read's splits become Spark tasks: an index query, a LIMIT or a pushed aggregate runs as one
wave of tasks (the cluster's parallelism, which the client sends); a scan is cut by bytes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.datasource import GreaterThan
from pyspark.sql.types import StructType

import connect_plugin
import executor_lib
from connect_plugin.settings import cluster_parallelism, read_options
from executor_lib.protocol.actions import AddAction
from executor_lib.spark.read_planning import OPEN_COST_BYTES, plan_tasks
from executor_lib.spark.reader import IndexTablesReader
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage import open_store
from indextables_contract import filters as F
from indextables_contract.read import PARALLELISM

MB = 1 << 20


def add(path: str, size: int, day: str = "d1") -> AddAction:
    return AddAction(path, {"day": day}, size, 0, True)


def test_light_reads_run_one_wave_balanced_by_size() -> None:
    files = [add(f"s{i:02}.split", (i % 4 + 1) * 50 * MB) for i in range(32)]
    groups = plan_tasks(files, 256 * MB, 64, parallelism=2, light=True)
    assert len(groups) == 2
    assert sorted(a.path for g in groups for a in g) == sorted(a.path for a in files)
    loads = [sum(a.size for a in g) for g in groups]
    assert max(loads) - min(loads) <= 200 * MB  # no more than the largest split apart
    for g in groups:  # each group keeps the table's order
        assert [a.path for a in g] == sorted(a.path for a in g)


def test_light_reads_keep_the_split_cap_and_never_make_empty_tasks() -> None:
    files = [add(f"s{i:03}.split", MB) for i in range(100)]
    groups = plan_tasks(files, 256 * MB, 16, parallelism=2, light=True)
    assert len(groups) == 7 and max(len(g) for g in groups) <= 16  # ceil(100 / 16)
    skewed = [add("big.split", 10_000 * MB)] + [add(f"s{i}.split", MB) for i in range(5)]
    groups = plan_tasks(skewed, 256 * MB, 3, parallelism=2, light=True)
    assert all(0 < len(g) <= 3 for g in groups) and sum(map(len, groups)) == 6
    assert plan_tasks(files[:1], 256 * MB, 64, parallelism=8, light=True) == [files[:1]]
    assert plan_tasks([], 256 * MB, 64, parallelism=8, light=True) == []


def test_scans_are_cut_by_bytes_and_spread_over_the_slots_when_small() -> None:
    files = [add(f"s{i:02}.split", 56 * MB) for i in range(32)]
    by_bytes = plan_tasks(files, 256 * MB, 64, parallelism=2, light=False)
    assert len(by_bytes) == 7 and all(sum(a.size + OPEN_COST_BYTES for a in g) >= 256 * MB for g in by_bytes[:-1])
    small = files[:4]  # 224 MB: two slots get two splits each rather than one task taking all
    assert [len(g) for g in plan_tasks(small, 256 * MB, 64, parallelism=2, light=False)] == [2, 2]
    # Without the cluster's parallelism a light read is planned as a scan (bytes only).
    assert plan_tasks(files, 256 * MB, 64, None, light=True) == plan_tasks(files, 256 * MB, 64, None, light=False)


SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string()), ("day", pa.string())])


@pytest.fixture(scope="module")
def eight_splits(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("planning") / "t"
    log = executor_lib.create_table(str(path), SCHEMA, ["day"])
    mapping = mapping_for(SCHEMA, {"spark.indextables.indexing.typemap.msg": "text"}, ["day"])
    store = open_store(str(path))
    adds = []
    for i in range(8):
        rows = pa.table({"id": [i * 10 + j for j in range(10)], "msg": [f"word{j} common" for j in range(10)]})
        adds.append(write_and_upload(store, rows, mapping, {"day": f"d{i % 2}"}))
    log.commit(adds)
    return path


def reader(path: Path, **options: str) -> IndexTablesReader:
    snap = executor_lib.open_log(str(path)).snapshot()
    return IndexTablesReader(
        {"path": str(path), **options}, StructType.fromJson(json.loads(snap.metadata.schema_string))
    )


def test_reader_plans_an_index_query_or_a_limit_as_one_wave(eight_splits: Path) -> None:
    few_bytes = {"spark.indextables.read.targetPartitionBytes": "1", PARALLELISM: "3"}
    assert len(reader(eight_splits, **few_bytes).partitions()) == 8  # a scan: one split per task here
    assert len(reader(eight_splits, **few_bytes, **{"indexquery.msg": "word3"}).partitions()) == 3
    assert len(reader(eight_splits, **few_bytes, limit="5").partitions()) == 1  # a bare LIMIT: one task
    assert len(reader(eight_splits, **few_bytes, limit="5", **{"indexquery.msg": "word3"}).partitions()) == 3
    tree = F.to_text(F.QueryString("common", "msg"))
    assert len(reader(eight_splits, **few_bytes, filter=tree).partitions()) == 3
    r = reader(eight_splits, **few_bytes)
    assert list(r.pushFilters([GreaterThan(("id",), -1)])) == []
    assert len(r.partitions()) == 3  # a pushed filter the index answers (no split pruned)
    no_hint = {"spark.indextables.read.targetPartitionBytes": "1", "indexquery.msg": "word3"}
    assert len(reader(eight_splits, **no_hint).partitions()) == 8  # no parallelism known: bytes alone


def test_client_sends_the_cluster_parallelism(spark: Any) -> None:
    """Both kinds of session find local[2]'s two slots (Connect: from the plan, without a job)."""
    assert cluster_parallelism(spark) == 2
    assert read_options(spark, None)[PARALLELISM] == "2"
    assert read_options(spark, {PARALLELISM: "7"})[PARALLELISM] == "7"  # a user's setting wins


def test_a_one_wave_read_returns_every_matching_row(spark: Any, eight_splits: Path) -> None:
    rows = connect_plugin.read(spark, str(eight_splits), filter=F.QueryString("common", "msg")).collect()
    assert sorted(r["id"] for r in rows) == list(range(80))
    few = connect_plugin.read(spark, str(eight_splits), filter=F.QueryString("word3", "msg"), columns=["id"])
    assert sorted(r["id"] for r in few.collect()) == [i * 10 + 3 for i in range(8)]
    got = connect_plugin.sql(
        spark, f"SELECT day, count(*) AS n FROM indextables.`{eight_splits}` WHERE msg indexquery 'word3' GROUP BY day"
    ).collect()
    assert sorted((r["day"], r["n"]) for r in got) == [("d0", 4), ("d1", 4)]


def test_a_read_task_sends_small_results_of_several_splits_as_one_batch() -> None:
    """Each batch a task yields is a round trip to the JVM: a selective search's few rows per split
    go out together, up to the batch size; large batches pass as they are; order and rows are kept."""
    from executor_lib.spark.batches import coalesced

    def batch(start: int, n: int) -> pa.RecordBatch:
        return pa.record_batch([pa.array(range(start, start + n), pa.int64())], names=["id"])

    small = [batch(i * 10, 10) for i in range(6)]
    out = list(coalesced(iter(small), 25))
    assert [b.num_rows for b in out] == [20, 20, 20]
    assert [v for b in out for v in b.column(0).to_pylist()] == list(range(60))
    big = [batch(0, 5), batch(5, 100), batch(105, 3), batch(108, 4)]
    assert [b.num_rows for b in coalesced(iter(big), 25)] == [5, 100, 7]
    assert list(coalesced(iter([]), 25)) == []
    no_columns = [batch(0, 4).select([]), batch(4, 3).select([])]  # a count reads rows without columns
    assert [b.num_rows for b in coalesced(iter(no_columns), 25)] == [7]


def _balanced_by_scanning(files: list[AddAction], count: int, most: int) -> list[list[AddAction]]:
    """The one-wave grouping as first written (each split to the lightest group with room, found by a
    scan of every group): the model the heap-based planner must equal."""
    position = {id(a): i for i, a in enumerate(files)}
    groups: list[list[AddAction]] = [[] for _ in range(count)]
    load = [0] * count
    for a in sorted(files, key=lambda a: -a.size):
        lightest = min((g for g in range(count) if len(groups[g]) < most), key=lambda g: (load[g], len(groups[g])))
        groups[lightest].append(a)
        load[lightest] += a.size + OPEN_COST_BYTES
    return [sorted(g, key=lambda a: position[id(a)]) for g in groups if g]


@pytest.mark.parametrize("seed", range(8))
def test_one_wave_groups_equal_the_scanning_model(seed: int) -> None:
    """Equal sizes (ties), a split cap that binds, more groups than slots: the same groups."""
    import random

    from executor_lib.spark.read_planning import _balanced

    rng = random.Random(seed)
    files = [
        add(f"s{i:04d}", rng.choice([1, 5, 5, 64, rng.randrange(1, 300)]) * MB) for i in range(rng.randrange(1, 300))
    ]
    count, most = rng.randrange(1, 40), rng.randrange(1, 20)
    count = max(count, -(-len(files) // most))
    assert _balanced(files, count, most) == _balanced_by_scanning(files, count, most)


def test_split_refs_from_columns_equal_the_refs_of_the_files(tmp_path: Path) -> None:
    """A full scan plans on the state's columns: the same refs (path, partition values, mapping,
    size, footer offset) as from each AddAction, in a table with a null partition value."""
    import dataclasses

    from executor_lib.spark.read_planning import SplitRef, split_refs
    from tests.log.helpers import add as log_add

    schema = pa.schema([("id", pa.int64()), ("day", pa.string()), ("hour", pa.int32())])
    log = executor_lib.create_table(
        str(tmp_path / "t"), schema, ["day", "hour"], **{"spark.indextables.state.format": "avro"}
    )
    mapping = mapping_for(pa.schema([("id", pa.int64())]), {}).to_json()
    files = [
        dataclasses.replace(
            log_add(None),
            partition_values={"day": None if i % 5 == 0 else f"d{i % 3}", "hour": str(i % 2)},
            footer_start_offset=None if i % 4 else 100 + i,
            doc_mapping_json=mapping if i % 2 else None,
        )
        for i in range(30)
    ]
    log.commit(files[:20])
    log.checkpoint()
    log.commit(files[20:])
    assert {r.doc_mapping for r in split_refs(executor_lib.open_log(str(tmp_path / "t")).snapshot())} == {mapping, None}
    snap = executor_lib.open_log(str(tmp_path / "t")).snapshot()
    expected = [
        SplitRef(a.path, dict(a.partition_values), snap.doc_mapping(a), a.size, a.footer_start_offset)
        for a in snap.files
    ]
    assert sorted(split_refs(snap), key=lambda r: r.path) == sorted(expected, key=lambda r: r.path)
