"""The `indextables` command line: demo, describe, history, checkpoint, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from executor_lib.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_demo_then_describe_history_and_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = str(tmp_path / "events")
    code, out, _ = run(capsys, "demo", "--path", table)
    assert code == 0 and "records:           3000" in out
    code, out, _ = run(capsys, "describe", table, "--json")
    doc = json.loads(out)
    assert (doc["version"], doc["numFiles"], doc["numRecords"]) == (3, 3, 3000)
    assert (doc["stateFormat"], doc["stateDir"], doc["numManifests"], doc["numTombstones"]) == (
        "avro-state", "state-v00000000000000000003", 3, 0,
    )  # fmt: skip
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


def test_errors_are_one_line_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "describe", str(tmp_path / "nothing-here"))
    assert code == 2
    assert "nothing-here" in err and "not an IndexTables table" in err and "Traceback" not in err
    code, _, err = run(capsys, "describe", "gs://bucket/t")
    assert code == 2 and "unsupported storage scheme" in err
