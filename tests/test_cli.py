"""The `indextables` command line: demo, describe, history, checkpoint, errors."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import executor_lib
from executor_lib.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_then_describe_history_and_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(tmp_path / "events")
    code, out, _ = run(capsys, "demo", "--path", table, "--cache-dir", str(tmp_path / "cache"))
    assert code == 0 and "records:           3000" in out
    code, out, _ = run(capsys, "describe", table, "--json")
    doc = json.loads(out)
    assert (doc["version"], doc["numFiles"], doc["numRecords"]) == (3, 3, 3000)
    assert (doc["stateFormat"], doc["stateDir"], doc["numManifests"], doc["numTombstones"]) == (
        "avro-state",
        "state-v00000000000000000003",
        3,
        0,
    )
    assert {f["partitionValues"]["date"] for f in doc["files"]} == {"2024-01-01", "2024-01-02", "2024-01-03"}
    code, out, _ = run(capsys, "describe", table, "--version", "1", "--json")
    assert json.loads(out)["numFiles"] == 1
    code, out, _ = run(capsys, "history", table, "--json")
    entries = json.loads(out)
    assert [e["version"] for e in entries] == [3, 2, 1, 0]
    assert entries[-1]["operation"] == "CREATE TABLE"
    code, out, _ = run(capsys, "history", table)
    assert code == 0 and "CREATE TABLE" in out
    code, out, _ = run(capsys, "checkpoint", table)
    assert json.loads(out) == {"version": 3, "format": "avro-state", "numFiles": 3}
    assert (Path(table) / "_transaction_log" / "state-v00000000000000000003" / "_manifest.avro").is_file()


def test_demo_writes_real_splits_that_search_finds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every add of the demo names a split file that exists with the recorded size, and a search
    over them returns exactly the rows of the demo data that match (computed here with Arrow)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from executor_lib.cli import demo_rows

    table, cache = tmp_path / "events", str(tmp_path / "cache")
    code, out, _ = run(capsys, "demo", "--path", str(table), "--cache-dir", cache)
    files = executor_lib.open_log(str(table)).snapshot().files
    assert code == 0 and len(files) == 3
    for add in files:
        assert (table / add.path).stat().st_size == add.size, add.path
    data = pa.concat_tables(demo_rows(i) for i in range(3))
    wanted = data.filter(pc.and_(pc.match_substring(data["message"], "timeout"), pc.equal(data["level"], "ERROR")))
    assert f"hits for 'message:timeout AND level:ERROR': {wanted.num_rows}" in out
    code, out, _ = run(capsys, "search", str(table), "message:timeout AND level:ERROR", "--json", "--cache-dir", cache)
    found = sorted(json.loads(line)["id"] for line in out.splitlines())
    assert code == 0 and wanted.num_rows > 0 and found == sorted(wanted["id"].to_pylist())


def test_errors_are_one_line_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "describe", str(tmp_path / "nothing-here"))
    assert code == 2
    assert "nothing-here" in err and "not an IndexTables table" in err and "Traceback" not in err
    code, _, err = run(capsys, "describe", "hdfs://bucket/t")
    assert code == 2 and "unsupported storage scheme" in err


def test_bad_flag_after_a_subcommand_shows_that_subcommands_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["search", str(tmp_path), "*", "--limt", "5"])
    _, err = capsys.readouterr()
    assert exc.value.code == 2
    assert "usage: indextables search" in err and "unrecognized arguments: --limt 5" in err
    with pytest.raises(SystemExit):
        main(["search", str(tmp_path), "*", "--limit", "-1"])
    assert "-1 is negative" in capsys.readouterr().err


def test_search_prints_rows_shown_and_total_hits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pyarrow as pa

    import executor_lib
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.publish import write_and_upload

    table, schema = str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("msg", pa.string())])
    log = executor_lib.create_table(table, schema)
    for start in (0, 30):  # two splits: the total counts both
        rows = pa.table({"id": list(range(start, start + 30)), "msg": ["a"] * 30}, schema=schema)
        log.commit([write_and_upload(log.store, rows, mapping_for(schema, {}))])
    cache = str(tmp_path / "cache")
    code, out, _ = run(capsys, "search", table, "*", "--limit", "5", "--cache-dir", cache)
    assert code == 0 and out.rstrip().endswith("(5 rows shown of 60 hits)"), out[-200:]
    code, out, _ = run(capsys, "search", table, "id:[0 TO 9]", "--limit", "0", "--cache-dir", cache)
    assert code == 0 and out.rstrip().endswith("(0 rows shown of 10 hits)"), out[-200:]


def test_history_shows_the_records_a_merge_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from executor_lib.protocol.actions import RemoveAction

    table = str(tmp_path / "events")
    run(capsys, "demo", "--path", table)
    log = executor_lib.open_log(table)
    olds = [a for a in log.snapshot().files if a.partition_values["date"] == "2024-01-01"]
    merged = dataclasses.replace(olds[0], path="date=2024-01-01/splits/merged.split")
    log.commit(
        [*(RemoveAction(a.path, 1, partition_values={"date": "2024-01-01"}) for a in olds), merged],
        operation="MERGE SPLITS",
    )
    code, out, _ = run(capsys, "history", table)
    header, merge_line = out.splitlines()[:2]
    assert code == 0 and header.split()[-2:] == ["+records", "-records"]
    assert merge_line.split()[-5:] == ["SPLITS", "1", "1", "1000", "1000"], merge_line
    assert out.splitlines()[2].split()[-2:] == ["1000", "0"]  # an append removes nothing


def test_a_jvm_only_option_is_accepted_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A key from an IndexTables4Spark configuration that only tunes its JVM does not stop a command."""
    import logging

    from executor_lib.cli import main as cli_main
    from indextables_contract import settings

    assert cli_main(["demo", "--path", str(tmp_path / "d")]) == 0
    table = next(p.parent for p in (tmp_path / "d").rglob("_transaction_log"))
    settings._warned.discard("spark.indextables.cache.disk.enabled")
    with caplog.at_level(logging.WARNING, logger="indextables.settings"):
        for _ in range(2):
            assert cli_main(["describe", str(table), "-o", "spark.indextables.cache.disk.enabled=true"]) == 0
    assert [r.getMessage().split()[0] for r in caplog.records] == ["spark.indextables.cache.disk.enabled"]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """``indextables --version`` prints the one version (pyproject.toml's) and exits 0 (issue 76)."""
    from indextables_contract.version import VERSION

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"indextables {VERSION}"


def test_search_filters_on_partition_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Partition columns are no fields of a split's index: a query part on them chooses the splits by their
    partition values (issue 76), alone, beside index fields, excluded, as a range or a set; the hits are
    the demo data's (computed here with Arrow). A field no column has is an error naming it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from executor_lib.cli import demo_rows

    table, cache = str(tmp_path / "events"), str(tmp_path / "cache")
    run(capsys, "demo", "--path", table, "--cache-dir", cache)
    days = ("2024-01-01", "2024-01-02", "2024-01-03")
    data = pa.concat_tables(demo_rows(i).append_column("date", pa.array([d] * 1000)) for i, d in enumerate(days))
    timeout, error = pc.match_substring(data["message"], "timeout"), pc.equal(data["level"], "ERROR")
    day = data["date"]
    cases = {
        "date:2024-01-02": pc.equal(day, "2024-01-02"),
        "message:timeout AND date:2024-01-01": pc.and_(timeout, pc.equal(day, "2024-01-01")),
        "level:ERROR AND NOT date:2024-01-02": pc.and_(error, pc.not_equal(day, "2024-01-02")),
        "date:[2024-01-02 TO *] AND level:ERROR": pc.and_(error, pc.greater_equal(day, "2024-01-02")),
        "date:IN [2024-01-01 2024-01-03] AND message:timeout": pc.and_(timeout, pc.not_equal(day, "2024-01-02")),
        "+date:2024-01-03 message:timeout": pc.equal(day, "2024-01-03"),  # an optional part beside a required one
        "(date:2024-01-01 OR date:2024-01-03) AND -level:ERROR": pc.and_(
            pc.invert(error), pc.not_equal(day, "2024-01-02")
        ),
    }
    for query, wanted in cases.items():
        code, out, err = run(capsys, "search", table, query, "--json", "--cache-dir", cache)
        rows = [json.loads(line) for line in out.splitlines()]
        expected = data.filter(wanted)
        assert code == 0 and expected.num_rows > 0, (query, err)
        assert sorted((r["id"], r["date"]) for r in rows) == sorted(
            zip(expected["id"].to_pylist(), expected["date"].to_pylist(), strict=True)
        ), query
        code, out, _ = run(capsys, "search", table, query, "--limit", "1", "--cache-dir", cache)
        assert out.rstrip().endswith(f"(1 rows shown of {expected.num_rows} hits)"), (query, out[-200:])

    code, _, err = run(capsys, "search", table, "date:2024-01-01 OR message:timeout", "--cache-dir", cache)
    assert code == 2 and "'date' is a partition column" in err and "required or excluded" in err
    code, _, err = run(capsys, "search", table, "mesage:timeout", "--cache-dir", cache)
    assert code == 2 and "field 'mesage' is not a column of the table (did you mean 'message'?" in err
