"""The command reader's task payloads are typed (``MergeTask``, ``LogCounts``, ``SplitScan``), planned
on the driver side over a real log (no Spark job: planning only), and read back by the tasks' handlers."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from executor_lib.log.tables import open_log
from executor_lib.spark.commands import CommandPartition, CommandReader, LogCounts, MergeTask, SplitScan
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract.aggregate import AggregatePlan, Measure
from indextables_contract.errors import ConfigError
from tests.log.helpers import add, make_table


def _table(tmp_path: Path) -> str:
    uri = str(tmp_path / "t")
    log = make_table(uri, {})
    for day, records in [("2024-01-01", 10), ("2024-01-01", 20), ("2024-01-02", 5), ("2024-01-02", 7)]:
        log.commit([add(day, records)])
    return uri


def _options(uri: str, command: C.Command) -> dict[str, str]:
    return {"path": uri, **command.to_options()}


def test_merge_plan_tasks_are_merge_tasks(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    reader = CommandReader(_options(uri, C.MergePlan(target_size="1G")))
    assert all(isinstance(t, MergeTask) for t in reader.plan) and len(reader.plan) == 2  # a group per day
    task = pickle.loads(pickle.dumps(reader.plan[0]))  # as Spark ships it to a task
    sizes = {"2024-01-01": 1010 + 1020, "2024-01-02": 1005 + 1007}  # add()'s sizes: 1000 + records
    assert task.sources == [] and task.num_sources == 2  # size-tiered: named by its first source and count
    assert task.size == sizes[str(task.partition_values["date"])]
    assert task.target == 1 << 30 and task.version == 4
    (row,) = reader.read(CommandPartition(0, task))
    day = task.partition_values["date"]
    sources = sorted(
        (a for a in open_log(uri).snapshot().files if a.partition_values["date"] == day), key=lambda a: a.size
    )
    assert task.first == sources[0].path
    assert row == (
        0,
        json.dumps(task.partition_values, sort_keys=True),
        json.dumps([a.path for a in sources]),
        task.size,
        task.version,
        None,
        1 << 30,
    )


def test_a_merge_task_ships_the_same_bytes_for_two_sources_or_three_hundred(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    log = make_table(uri, {})
    log.commit([add("2024-01-01", n) for n in (1, 2)])
    log.commit([add("2024-01-02", n) for n in range(1, 301)])
    plan = CommandReader(_options(uri, C.MergePlan(target_size="1G", max_source_splits_per_merge=1000))).plan
    small, large = sorted(plan, key=lambda t: t.num_sources)
    assert (small.num_sources, large.num_sources) == (2, 300)
    assert abs(len(pickle.dumps(large)) - len(pickle.dumps(small))) < 20
    reader = CommandReader(_options(uri, C.MergePlan(target_size="1G", max_source_splits_per_merge=1000)))
    (row,) = reader.read(CommandPartition(1, large))
    assert (
        len(json.loads(row[2])) == 300
        and sum(a.size for a in open_log(uri).snapshot().files if a.path in set(json.loads(row[2]))) == large.size
    )


def test_a_merge_task_its_partition_does_not_plan_fails_naming_the_group(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    reader = CommandReader(_options(uri, C.MergePlan(target_size="1G")))
    task = reader.plan[0]._replace(num_sources=3)
    with pytest.raises(ConfigError, match=rf"group 0 \(partition .*3 splits from {task.first}\) is not what"):
        list(reader.read(CommandPartition(0, task)))


def test_a_merge_task_of_a_table_created_again_at_the_same_place_plans_the_new_table(tmp_path: Path) -> None:
    """Found by the ingest benchmark (which deletes its table and writes it again between repeats): a
    worker kept the groups it planned for the old table at the same version and failed the new table's
    merge ("not what its partition plans"). The groups a worker keeps are the table's, by its id."""
    import shutil

    uri = _table(tmp_path)
    reader = CommandReader(_options(uri, C.MergePlan(target_size="1G")))
    assert len(list(reader.read(CommandPartition(0, reader.plan[0])))) == 1  # its groups now kept
    shutil.rmtree(uri)
    uri = _table(tmp_path)  # the same versions, other splits
    reader = CommandReader(_options(uri, C.MergePlan(target_size="1G")))
    task = reader.plan[0]
    (row,) = reader.read(CommandPartition(0, task))
    assert json.loads(row[2])[0] == task.first and len(json.loads(row[2])) == task.num_sources


def test_group_aggregate_tasks_say_whether_the_log_answers(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    by_day = AggregatePlan(("date",), (Measure("count"),))
    counted = CommandReader(_options(uri, C.GroupAggregate(plan=by_day.to_json())))
    assert [type(t) for t in counted.plan] == [LogCounts]
    rows = counted.rows_at_analysis()
    assert rows is not None and rows == list(counted.read(CommandPartition(0, counted.plan[0])))
    on_data = AggregatePlan((), (Measure("count"),), F.to_text(F.Term("message", "x")))
    scanned = CommandReader(_options(uri, C.GroupAggregate(plan=on_data.to_json())))
    assert scanned.plan and all(isinstance(t, SplitScan) for t in scanned.plan)
    assert sorted(a.num_records for t in scanned.plan for a, _ in t.splits) == [5, 7, 10, 20]
    assert scanned.rows_at_analysis() is None


def test_log_counts_group_and_filter_typed_partitions_as_each_file_would(tmp_path: Path) -> None:
    """Record counts summed per partition from the state's columns equal a per-file model: integer
    partitions compare as numbers, a null partition is its own group, a WHERE on partitions is exact;
    a file without a record count sends the count to the splits."""
    import dataclasses

    import pyarrow as pa

    import executor_lib
    from indextables_contract.aggregate import count_partials, partials_to_json

    uri = str(tmp_path / "typed")
    schema = pa.schema([("id", pa.int64()), ("day", pa.string()), ("hour", pa.int32())])
    log = executor_lib.create_table(uri, schema, ["day", "hour"], **{"spark.indextables.state.format": "avro"})
    files = []
    for i in range(40):
        values = {"day": None if i % 9 == 0 else f"2024-01-0{i % 3 + 1}", "hour": str(i % 12)}
        files.append(dataclasses.replace(add(None, records=i + 1), partition_values=values))
    log.commit(files[:30])
    log.checkpoint()  # the first 30 in the state's columns, the rest replayed on top of them
    log.commit(files[30:])

    def model(where: F.Filter | None, group_by: tuple[str, ...]) -> str:
        counts: dict[tuple[object, ...], int] = {}
        for a in files:
            day, hour = a.partition_values["day"], int(a.partition_values["hour"])
            if where is None or (day is not None and day >= "2024-01-02" and hour >= 10):
                key = tuple({"day": day, "hour": hour}[c] for c in group_by)
                counts[key] = counts.get(key, 0) + int(a.num_records or 0)
        return partials_to_json(count_partials(counts))

    late = F.And((F.Between("day", "2024-01-02", None), F.Between("hour", 10, None)))  # "9" > "10" as strings
    for where in (None, late):
        for group_by in ((), ("day",), ("hour", "day")):
            plan = AggregatePlan(group_by, (Measure("count"),), None if where is None else F.to_text(where))
            reader = CommandReader(_options(uri, C.GroupAggregate(plan=plan.to_json())))
            (task,) = reader.plan
            assert isinstance(task, LogCounts)
            assert sorted(json.loads(task.partials), key=str) == sorted(json.loads(model(where, group_by)), key=str)
    executor_lib.open_log(uri).commit(
        [dataclasses.replace(add(None), partition_values={"day": "x", "hour": "1"}, num_records=None)]
    )
    plan = AggregatePlan((), (Measure("count"),))
    reader = CommandReader(_options(uri, C.GroupAggregate(plan=plan.to_json())))
    assert reader.plan and all(isinstance(t, SplitScan) for t in reader.plan)


@pytest.mark.parametrize("max_dest", [None, 3])
def test_a_sorted_merge_plan_planned_a_partition_at_a_time_ships_the_whole_table_plans_groups(
    tmp_path: Path, max_dest: int | None
) -> None:
    """Level-0 and tagged level-1 splits over five days (with id ranges, one day holding two doc
    mappings): the tasks, planned a partition at a time and read back by their compact payload, are
    the groups ``plan_sorted_merges`` makes over every live file at once, in its order."""
    import dataclasses
    import random

    from executor_lib.splits.write.merge_plan import SORT_KEY_TAG, plan_sorted_merges

    rng = random.Random(7)
    uri = str(tmp_path / "t")
    log = make_table(uri, {})
    for batch in range(4):
        adds = []
        for i in range(30):
            low = rng.randrange(0, 1000)
            mapping = '[{"name":"message","type":"text"},{"name":"id","type":"i64"}]'
            a = add(f"2024-01-0{i % 5 + 1}", rng.randrange(1, 50), mapping if i % 7 == 0 else None)
            level1 = {SORT_KEY_TAG: "id"} if (batch + i) % 3 == 0 else None
            adds.append(
                dataclasses.replace(a, min_values={"id": str(low)}, max_values={"id": str(low + 40)}, tags=level1)
            )
        log.commit(adds)
    command = C.MergePlan(target_size="1G", sort_key="id", max_dest_splits=max_dest)
    reader = CommandReader(_options(uri, command))
    snapshot = open_log(uri).snapshot()
    expected = plan_sorted_merges(snapshot.files, snapshot.doc_mapping, "id", "long", max_dest)
    assert len(reader.plan) == len(expected) and (max_dest is None or len(expected) == max_dest)
    for i, (task, group) in enumerate(zip(reader.plan, expected, strict=True)):
        assert task.sources == [] and task.num_sources == len(group.sources) and task.sort_key == "id"
        (row,) = CommandReader(_options(uri, command)).read(CommandPartition(i, pickle.loads(pickle.dumps(task))))
        assert json.loads(row[2]) == [a.path for a in group.sources] and row[3] == group.size
