"""MERGE SPLITS planning sorted by a key (``plan_sorted_merges``): which splits form level 0 and
which level-1 splits a merge must take so that level 1 stays non-overlapping."""

from __future__ import annotations

import random

import pytest

from executor_lib.protocol.actions import AddAction
from executor_lib.splits.write.merge_plan import SORT_KEY_TAG, level_of, plan_sorted_merges


def split(name: str, low: int | None, high: int | None, level: int = 0, day: str = "d1") -> AddAction:
    stats = {} if low is None else {"ts": str(low)}
    top = {} if high is None else {"ts": str(high)}
    return AddAction(
        path=f"day={day}/splits/{name}.split",
        partition_values={"day": day},
        size=1000,
        modification_time=0,
        data_change=level == 0,
        min_values=stats,
        max_values=top,
        num_records=10,
        tags={SORT_KEY_TAG: "ts"} if level else None,
    )


def plan(files: list[AddAction]) -> list[list[str]]:
    groups = plan_sorted_merges(files, lambda a: "mapping", "ts", "long")
    assert all(g.sort_key == "ts" for g in groups)
    return [sorted(a.path.split("/")[-1].removesuffix(".split") for a in g.sources) for g in groups]


def test_fresh_splits_are_level_0_and_merge_together() -> None:
    files = [split("a", 0, 50), split("b", 10, 90), split("c", 5, 60)]
    assert [level_of(f, "ts") for f in files] == [0, 0, 0]
    assert plan(files) == [["a", "b", "c"]]


def test_only_level_1_splits_overlapping_the_level_0_hull_are_rewritten() -> None:
    level1 = [split("l1a", 0, 99, 1), split("l1b", 100, 199, 1), split("l1c", 200, 299, 1)]
    fresh = [split("n1", 250, 320), split("n2", 290, 400)]
    assert plan(level1 + fresh) == [["l1c", "n1", "n2"]]


def test_a_level_1_split_inside_the_hull_gap_is_taken_too() -> None:
    """Two fresh splits at both ends: the sorted output spans the gap, so the split there is rewritten."""
    level1 = [split("l1a", 0, 99, 1), split("l1b", 100, 199, 1), split("l1c", 200, 299, 1)]
    fresh = [split("n1", 50, 60), split("n2", 250, 260)]
    assert plan(level1 + fresh) == [["l1a", "l1b", "l1c", "n1", "n2"]]


def test_one_fresh_split_merges_only_when_it_overlaps_level_1() -> None:
    level1 = [split("l1a", 0, 99, 1)]
    assert plan([*level1, split("n1", 150, 160)]) == []
    assert plan([*level1, split("n1", 90, 160)]) == [["l1a", "n1"]]
    assert plan(level1) == []


def test_numeric_keys_compare_as_numbers_not_strings() -> None:
    level1 = [split("l1a", 9, 9, 1), split("l1b", 100, 900, 1)]  # as strings "9" > "100"
    assert plan([*level1, split("n1", 10, 20), split("n2", 30, 40)]) == [["n1", "n2"]]


def test_each_partition_is_planned_on_its_own_and_splits_of_another_key_are_level_0() -> None:
    other_key = AddAction(
        path="day=d2/splits/x.split",
        partition_values={"day": "d2"},
        size=1,
        modification_time=0,
        data_change=False,
        min_values={"ts": "0"},
        max_values={"ts": "5"},
        tags={SORT_KEY_TAG: "latency"},
    )
    files = [split("a", 0, 5), split("b", 3, 8), split("c", 0, 5, day="d2"), other_key]
    assert level_of(other_key, "ts") == 0
    assert sorted(plan(files)) == [["a", "b"], ["c", "x"]]


def test_fresh_splits_without_statistics_merge_without_pulling_in_level_1() -> None:
    level1 = [split("l1a", 0, 99, 1)]
    assert plan([*level1, split("n1", None, None), split("n2", None, None)]) == [["n1", "n2"]]


def _random_files(rng: random.Random, n: int) -> list[AddAction]:
    mappings = ['{"m":1}', '{"m":2}', None]
    out = []
    for i in range(n):
        values: dict[str, str | None] = {"day": rng.choice(["d1", "d2", "d3", None]), "hour": str(rng.randrange(3))}
        out.append(
            AddAction(
                path=f"p/{rng.randrange(10**6):06d}-{i}.split",
                partition_values=values,
                size=rng.choice([rng.randrange(1, 400), 100, 100, 950]),
                modification_time=0,
                data_change=True,
                doc_mapping_json=rng.choice(mappings),
            )
        )
    return out


@pytest.mark.parametrize("seed", range(12))
def test_size_tiered_planning_on_columns_equals_planning_on_actions(seed: int) -> None:
    """The same groups, in the same order, from the files' Arrow columns as from their actions (equal
    sizes and paths decide ties; buckets of partition values and doc mappings; every limit)."""
    from executor_lib.log.files.file_table import FileChunk
    from executor_lib.log.files.live_files import LiveFiles
    from executor_lib.splits.write.merge_plan import plan_merges, plan_merges_columns

    rng = random.Random(seed)
    files = _random_files(rng, rng.randrange(0, 400))
    target, min_splits = rng.choice([300, 1000, 5000]), rng.choice([2, 3, 10])
    max_dest, max_sources = rng.choice([None, 1, 5]), rng.choice([None, 2, 7])
    expected = plan_merges(files, lambda a: a.doc_mapping_json, target, max_dest, max_sources, min_splits)
    columns = ["path", "size", "partition_values"]
    table = LiveFiles([FileChunk.from_actions(files)]).columns(columns) if files else None  # the logical columns
    if table is None:
        import pyarrow as pa

        table = pa.table(
            {
                "path": pa.array([], pa.string()),
                "size": pa.array([], pa.int64()),
                "partition_values": pa.array([], pa.map_(pa.string(), pa.string())),
            }
        )
    table = table.select(columns).append_column("mapping", pa_strings([a.doc_mapping_json for a in files]))
    got = plan_merges_columns(table, ["day", "hour"], target, max_dest, max_sources, min_splits)
    assert [(g.partition_values, [a.path for a in g.sources], g.size) for g in expected] == [
        (g.partition_values, list(g.paths), g.size) for g in got
    ]


def pa_strings(values: list[str | None]) -> object:
    import pyarrow as pa

    return pa.array(values, pa.string())
