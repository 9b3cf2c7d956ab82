"""Data skipping by partition values and min/max statistics."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.log.files.pruning import bounds_may_match
from executor_lib.protocol.actions import AddAction, RemoveAction
from indextables_contract.errors import ConfigError
from indextables_contract.filters import Between, Term, TermIn, ge, gt, le, lt
from tests.conftest import COMPAT_ROOT, requires_compat


def paths(files: list[AddAction]) -> set[str]:
    return {f.path.split("/")[0] for f in files}


@requires_compat
def test_partition_pruning_on_a_real_jvm_table() -> None:
    snap = executor_lib.open_log(str(COMPAT_ROOT / "09_partitioned_multi_append")).snapshot()
    assert len(snap.list_files()) == 10
    assert paths(snap.list_files([Term("date", "2024-03-01")])) == {"date=2024-03-01"}
    assert paths(snap.list_files([TermIn("date", ("2024-01-01", "2024-05-01", "2030-01-01"))])) == {
        "date=2024-01-01",
        "date=2024-05-01",
    }
    assert paths(snap.list_files([ge("date", "2024-02-01"), lt("date", "2024-04-01")])) == {
        "date=2024-02-01",
        "date=2024-03-01",
    }
    assert snap.list_files([Term("date", "1999-01-01")]) == []


@requires_compat
def test_min_max_skipping_on_a_real_jvm_table() -> None:
    snap = executor_lib.open_log(str(COMPAT_ROOT / "05_many_transactions")).snapshot()
    files = snap.files
    bounds = {f.path: (int(f.min_values["id"]), int(f.max_values["id"])) for f in files}  # type: ignore[index]
    top = max(hi for _, hi in bounds.values())
    assert snap.list_files([gt("id", top)]) == []
    for f in files:
        low, high = bounds[f.path]
        selected = snap.list_files([Term("id", low)])
        assert f in selected and len(selected) < len(files)
        expected = {p for p, (lo, hi) in bounds.items() if lo <= high and hi >= low}
        assert {a.path for a in snap.list_files([ge("id", low), le("id", high)])} == expected
    assert len(snap.list_files([Between("id", lower=top, lower_inclusive=False)])) == 0


def make(tmp_path: Path) -> tuple[executor_lib.TransactionLog, dict[str, AddAction]]:
    schema = pa.schema([("bucket", pa.int32()), ("score", pa.float64()), ("name", pa.string())])
    log = executor_lib.create_table(str(tmp_path / "t"), schema, ["bucket"])
    base = AddAction("x", {}, 1, 1, True)
    files = {
        "b9": dataclasses.replace(
            base,
            path="bucket=9/a.split",
            partition_values={"bucket": "9"},
            min_values={"score": "2.5", "name": "apple"},
            max_values={"score": "9.5", "name": "kiwi"},
        ),
        "b10": dataclasses.replace(
            base,
            path="bucket=10/b.split",
            partition_values={"bucket": "10"},
            min_values={"score": "10", "name": "a" * 32},
            max_values={"score": "100", "name": "m" * 32},
        ),
        "nostats": dataclasses.replace(base, path="bucket=10/c.split", partition_values={"bucket": "10"}),
    }
    log.commit(list(files.values()))
    return log, files


def test_numeric_partitions_compare_as_numbers_and_stats_are_typed(tmp_path: Path) -> None:
    log, f = make(tmp_path)
    snap = log.snapshot()

    def names(*preds: object) -> set[str]:
        selected = {a.path for a in snap.list_files(list(preds))}  # type: ignore[arg-type]
        return {k for k, a in f.items() if a.path in selected}

    assert names(gt("bucket", 9)) == {"b10", "nostats"}  # as strings "10" < "9"
    assert names(lt("bucket", 10)) == {"b9"}
    assert names(Term("bucket", "10")) == {"b10", "nostats"}
    # score is a double: a float column may hold NaN above its recorded maximum (issue 33, hole 6), so
    # its maximum never skips a file; its minimum still does
    assert names(gt("score", 9.5)) == {"b9", "b10", "nostats"}
    assert names(lt("score", 9.5)) == {"b9", "nostats"}  # as strings "10" < "9.5"
    assert names(ge("score", 9.5)) == {"b9", "b10", "nostats"}
    assert names(Term("name", "banana")) == {"b9", "b10", "nostats"}
    assert names(Term("name", "zebra")) == {"nostats"}
    # a truncated maximum is a prefix: "mmm…m" (32) may really be "mmm…mz", so keep the file
    assert names(Term("name", "m" * 32 + "z")) == {"b10", "nostats"}
    assert names(Term("score", "not a number")) == set(f)


def test_bad_predicates_are_rejected(tmp_path: Path) -> None:
    log, _ = make(tmp_path)
    with pytest.raises(ConfigError, match="unknown column 'nope'"):
        log.snapshot().list_files([Term("nope", 1)])
    with pytest.raises(ConfigError, match="unsupported predicate"):
        log.snapshot().list_files(["bucket = 1"])  # type: ignore[list-item]


def test_manifest_bounds() -> None:
    types = {"date": "string", "bucket": "integer"}
    bounds = {"date": {"min": "2024-01-01", "max": "2024-01-31"}, "bucket": {"min": "2", "max": "10"}}
    assert bounds_may_match(bounds, [Term("date", "2024-01-15")], types)
    assert not bounds_may_match(bounds, [Term("date", "2024-02-01")], types)
    assert bounds_may_match(bounds, [gt("bucket", 10)], types)  # numeric: pruned per file only
    assert bounds_may_match(bounds, [Term("bucket", 9)], types)
    assert bounds_may_match(None, [Term("date", "x")], types)


def test_listing_skips_manifests_by_partition_bounds(tmp_path: Path) -> None:
    from tests.log.helpers import add, make_table

    uri = str(tmp_path / "parts")
    log = make_table(uri, {}, **{"spark.indextables.state.entriesPerManifest": "6"})
    days = [f"2024-01-{d:02d}" for d in range(1, 11)]
    for day in days:  # one commit, hence one manifest, per partition
        log.commit([add(day) for _ in range(3)])
    listing = executor_lib.open_log(uri).list_files([Term("date", "2024-01-04")])
    assert (listing.manifests_total, listing.manifests_read) == (10, 1)
    assert {f.partition_values["date"] for f in listing.files} == {"2024-01-04"} and len(listing.files) == 3
    ranged = executor_lib.open_log(uri).list_files([ge("date", "2024-01-09")])
    assert ranged.manifests_read == 2 and len(ranged.files) == 6
    # after compaction manifests are clustered by partition: 31 files, 6 per manifest
    compacting = {
        "spark.indextables.state.entriesPerManifest": "6",
        "spark.indextables.state.compaction.largeRemoveThreshold": "1",  # any remove compacts
    }
    executor_lib.open_log(uri).commit([add("2024-01-11"), add("2024-01-11")])
    extra = next(f for f in executor_lib.open_log(uri).snapshot().files if f.partition_values["date"] == "2024-01-11")
    removal = RemoveAction(extra.path, 1, size=extra.size, partition_values=extra.partition_values)
    executor_lib.open_log(uri, **compacting).commit([removal])
    compacted = executor_lib.open_log(uri).list_files([Term("date", "2024-01-04")])
    assert compacted.manifests_total == 6 and compacted.manifests_read <= 2
    assert len(compacted.files) == 3
    assert len(executor_lib.open_log(uri).list_files().files) == 31


def test_numeric_partitions_are_not_pruned_by_string_ordered_manifest_bounds(tmp_path: Path) -> None:
    schema = pa.schema([("p", pa.int32()), ("x", pa.string())])
    log = executor_lib.create_table(str(tmp_path / "n"), schema, ["p"])
    base = AddAction("x", {}, 1, 1, True)
    log.commit([dataclasses.replace(base, path=f"p={v}/a.split", partition_values={"p": str(v)}) for v in (9, 10, 100)])
    for value in (9, 10, 100):
        listing = executor_lib.open_log(str(tmp_path / "n")).list_files([Term("p", value)])
        assert [f.path for f in listing.files] == [f"p={value}/a.split"]
    assert bounds_may_match({"p": {"min": "10", "max": "9"}}, [Term("p", 50)], {"p": "integer"})


@requires_compat
def test_boolean_trees_and_prefixes_prune_from_the_same_filters_search_uses() -> None:
    from indextables_contract import filters as f

    snap = executor_lib.open_log(str(COMPAT_ROOT / "09_partitioned_multi_append")).snapshot()

    def days(*preds: f.Filter) -> set[str]:
        return {a.partition_values["date"] for a in snap.list_files(list(preds))}  # type: ignore[misc]

    all_days = days()
    assert days(f.Or((f.Term("date", "2024-01-01"), f.Term("date", "2024-05-01")))) == {"2024-01-01", "2024-05-01"}
    assert days(f.Prefix("date", "2024-0"), f.Prefix("date", "2024-03")) == {"2024-03-01"}
    assert days(f.And((f.Prefix("date", "2024"), f.Between("date", upper="2024-02-01")))) == {
        "2024-01-01",
        "2024-02-01",
    }
    assert days(f.Not(f.Term("date", "2024-01-01"))) == all_days  # never skips: not judged from bounds
    assert days(f.QueryString("text:anything")) == all_days
    with pytest.raises(ConfigError, match="unknown column 'nope'"):
        snap.list_files([f.Or((f.Term("date", "x"), f.Prefix("nope", "y")))])


@requires_compat
def test_prune_scan_counts_what_each_stage_skips() -> None:
    """The data-skipping counts of a scan (DESCRIBE INDEXTABLES DATA SKIPPING STATS): the same files as
    prune_files, the partition stage and the statistics stage counted apart, skipped files per filter."""
    from executor_lib.log.files.pruning import prune_files, prune_scan

    snap = executor_lib.open_log(str(COMPAT_ROOT / "09_partitioned_multi_append")).snapshot()
    files, schema, columns = snap.files, snap.metadata.schema_string, snap.partition_columns
    by_date = [f for f in files if f.partition_values["date"] == "2024-03-01"]
    top = max(int(f.max_values["id"]) for f in by_date)  # type: ignore[index]
    late = [f for f in by_date if int(f.min_values["id"]) <= top]  # type: ignore[index]
    predicates = [Term("date", "2024-03-01"), gt("id", top)]
    kept, counts = prune_scan(files, predicates, schema, columns)
    assert kept == prune_files(files, predicates, schema, columns) == []
    assert counts == {
        "scans": 1,
        "total_files": len(files),
        "partition_pruned_files": len(files) - len(by_date),
        "data_skipped_files": len(late),
        "final_files": 0,
        "filter_types": {"Between": len(late)},
    }
    kept, counts = prune_scan(files, [], schema, columns)
    assert kept == list(files) and counts["final_files"] == len(files) and counts["filter_types"] == {}


def _random_stats_table(tmp_path: Path, n: int, seed: int) -> executor_lib.TransactionLog:
    """A table of ``n`` files (an Avro state: the snapshot holds them as columns) in 4 days, with
    statistics of an integer, a float and a string column that are sometimes missing, not numbers,
    NaN, infinite or equal to a predicate's bound."""
    import random

    rng = random.Random(seed)
    schema = pa.schema([("day", pa.string()), ("id", pa.int64()), ("score", pa.float64()), ("name", pa.string())])
    log = executor_lib.create_table(str(tmp_path / f"t{seed}"), schema, ["day"])
    odd = ["", "x", "1_000", " 5", "NaN", "inf", "-inf", "1e400", "7.0"]

    def stat(low: float, high: float) -> tuple[str | None, str | None]:
        if rng.random() < 0.1:
            return None, None
        if rng.random() < 0.08:
            return rng.choice(odd), rng.choice(odd)
        return str(int(low)) if rng.random() < 0.7 else str(low), str(int(high))

    adds = []
    for i in range(n):
        low = rng.randrange(0, 200)
        lows, highs = {}, {}
        for column, (a, b) in {
            "id": stat(low, low + rng.randrange(0, 40)),
            "score": stat(low / 4, low / 4 + 3),
        }.items():
            if a is not None:
                lows[column] = a
            if b is not None:
                highs[column] = b
        lows["name"], highs["name"] = "a" * rng.randrange(1, 40), "m" * rng.randrange(1, 40)
        day = f"2024-01-0{1 + i % 4}"
        adds.append(AddAction(f"day={day}/f{i}.split", {"day": day}, 1, 1, True, min_values=lows, max_values=highs))
    log.commit(adds)
    return log


def test_numeric_statistics_judged_column_wise_skip_what_the_objects_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At scale (``COLUMNAR_STATS_FILES``), a scan's comparisons on numeric columns are judged on the
    state's statistics columns before any file becomes an object: the same files are kept, and the
    same counts made, as judging every file's object (``prune_scan``); only the survivors are built."""
    from executor_lib.log.files import live_files, pruning
    from executor_lib.log.files.live_files import LiveFiles

    monkeypatch.setattr(live_files, "REJECTS_MIN_ROWS", 0)
    log = _random_stats_table(tmp_path, 3000, seed=3)
    snapshot = log.snapshot()
    assert isinstance(snapshot.state.files, LiveFiles)
    cases = [
        [Term("id", 57)],
        [Term("id", "57")],
        [TermIn("id", (3, 150, 400))],
        [TermIn("id", ())],
        [gt("id", 180)],
        [lt("id", 20), Term("day", "2024-01-02")],
        [ge("score", 40.0)],
        [le("score", 2.0)],
        [Between("id", 50, 60, lower_inclusive=False, upper_inclusive=False)],
        [Between("score", 10.5, 12.25), gt("id", 30)],
        [Between("id", "x", 60)],
        [gt("id", 100), Term("name", "zzz")],
        [Term("id", True)],
        [Term("day", "2024-01-03")],
    ]
    schema, columns = snapshot.metadata.schema_string, snapshot.partition_columns
    built: list[int] = []
    exact_scan = pruning.prune_scan
    monkeypatch.setattr(pruning, "prune_scan", lambda files, *a: built.append(len(files)) or exact_scan(files, *a))
    for predicates in cases:
        expected, expected_counts = exact_scan(snapshot.files, predicates, schema, columns)
        monkeypatch.setattr(pruning, "COLUMNAR_STATS_FILES", 0)
        built.clear()
        got, counts = pruning.prune_snapshot(snapshot, predicates)
        assert paths(got) == paths(expected), predicates
        same = ("total_files", "partition_pruned_files", "data_skipped_files", "final_files")
        assert {k: counts[k] for k in same} == {k: expected_counts[k] for k in same}, predicates
        # per kind, the skipped files a conjunct rejects: the same where one conjunct judges the statistics;
        # with several, a file skipped column-wise is counted for the conjuncts that rejected it there
        kinds, exact = counts["filter_types"], expected_counts["filter_types"]
        if len([p for p in predicates if p.column != "day"]) == 1:
            assert kinds == exact, predicates
        assert all(kinds.get(k, 0) <= n for k, n in exact.items()), predicates
        assert sum(kinds.values()) >= counts["data_skipped_files"], predicates
        numeric = pruning._columnar_conjuncts(predicates, pruning.column_types(schema), columns)
        if numeric and expected_counts["data_skipped_files"]:
            assert built and built[0] < len(snapshot.files) - expected_counts["partition_pruned_files"], (
                f"{predicates}: every file of the partitions became an object"
            )
        monkeypatch.setattr(pruning, "COLUMNAR_STATS_FILES", 10_000)
        assert paths(snapshot.list_files(predicates)) == paths(expected), predicates


def test_timestamp_statistics_compare_as_time_in_either_form() -> None:
    """A timestamp's statistics are IndexTables4Spark's microseconds (what this project writes now) or
    ISO text (what it wrote before): both compare as time, with each other and with a ``datetime``, so
    a sorted merge's planner (``stats_bounds``) orders a table holding both rightly; a statistic that
    is neither compares as unknown."""
    import datetime

    from executor_lib.log.files.pruning import stats_bounds, timestamp_key

    utc = datetime.timezone.utc
    assert timestamp_key("1704067200000000") == timestamp_key("2024-01-01T00:00:00+00:00") == 1704067200000000
    assert timestamp_key(datetime.datetime(2024, 1, 1, tzinfo=utc)) == 1704067200000000
    assert timestamp_key(datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999)) == timestamp_key("-1") == -1
    assert timestamp_key("yesterday") is None and timestamp_key(3.5) is None
    old = AddAction(
        "a.split",
        {},
        1,
        0,
        True,
        min_values={"ts": "2024-01-02T00:00:00+00:00"},
        max_values={"ts": "2024-01-03T00:00:00+00:00"},
    )
    new = AddAction("b.split", {}, 1, 0, True, min_values={"ts": "999999999"}, max_values={"ts": "1704067200000000"})
    (old_low, _), (new_low, new_high) = stats_bounds(old, "ts", "timestamp"), stats_bounds(new, "ts", "timestamp")
    assert new_low < new_high < old_low, "microseconds of different lengths and ISO text, in time order"
