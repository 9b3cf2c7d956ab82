"""Data skipping by partition values and min/max statistics."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.log.pruning import bounds_may_match
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
    from executor_lib.log.pruning import prune_files, prune_scan

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
