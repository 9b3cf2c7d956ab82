"""Real tables written by IndexTables4Spark 0.5.4: `indextables describe` must report them right.

Expected values are derived independently of the log reader: the version and file
count from the JVM's own ``_last_checkpoint``, the record count from the Tantivy
``meta.json`` inside each live split file (sum of ``max_doc`` over its segments), and
the live files must exist on disk with the recorded size.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from executor_lib.cli import main as cli_main
from tests.conftest import COMPAT_ROOT

TABLES = sorted(p.name for p in COMPAT_ROOT.iterdir()) if COMPAT_ROOT.is_dir() else []


def split_doc_count(split: Path) -> int:
    """Documents in a Quickwit split bundle, read from the Tantivy meta.json it contains."""
    data = split.read_bytes()
    hotcache_len = struct.unpack("<I", data[-4:])[0]
    footer_end = len(data) - 4 - hotcache_len
    offsets_len = struct.unpack("<I", data[footer_end - 4 : footer_end])[0]
    offsets = json.loads(data[footer_end - 4 - offsets_len + 8 : footer_end - 4])  # 8 = magic + version
    meta_range = offsets["files"]["meta.json"]
    meta = json.loads(data[meta_range["start"] : meta_range["end"]])
    return sum(seg["max_doc"] - (seg["deletes"] or {}).get("num_deleted_docs", 0) for seg in meta["segments"])


def describe(table: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    assert cli_main(["describe", str(table), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_all_compat_tables_present(compat_root: Path) -> None:
    assert len(TABLES) >= 13


@pytest.mark.parametrize("name", TABLES)
def test_describe_reports_version_files_and_records(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    table = COMPAT_ROOT / name
    hint = json.loads((table / "_transaction_log" / "_last_checkpoint").read_text())
    doc = describe(table, capsys)
    assert doc["version"] == hint["version"]
    assert doc["numFiles"] == hint["numFiles"] == len(doc["files"])
    assert doc["sizeInBytes"] == hint["sizeInBytes"]
    expected_records = 0
    for f in doc["files"]:
        split = table / f["path"]
        assert split.is_file(), f"live file {f['path']} missing"
        assert split.stat().st_size == f["size"]
        docs = split_doc_count(split)
        assert f["numRecords"] == docs
        expected_records += docs
        partition = {k: v for k, v in (part.split("=", 1) for part in f["path"].split("/")[:-1])}
        assert f["partitionValues"] == partition
    assert doc["numRecords"] == expected_records
    schema = json.loads(json.dumps(doc["schema"]))
    assert schema["type"] == "struct" and schema["fields"]


def test_time_travel_on_jvm_state_versions(capsys: pytest.CaptureFixture[str]) -> None:
    table = COMPAT_ROOT / "03_with_removes"
    counts = [describe(table, capsys, "--version", str(v))["numFiles"] for v in range(5)]
    assert counts == [0, 2, 4, 6, 1]


def test_describe_as_installed_console_script() -> None:
    script = Path(sys.executable).parent / "indextables"
    assert script.is_file(), "the indextables console script is not installed"
    out = subprocess.run(
        [str(script), "describe", str(COMPAT_ROOT / "10_large_batch"), "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    doc = json.loads(out)
    assert (doc["version"], doc["numFiles"], doc["numRecords"]) == (1, 2, 500)


def test_checkpoint_of_a_v4_table_is_refused_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "02_five_appends"
    shutil.copytree(COMPAT_ROOT / "02_five_appends", copy)
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    hint = (copy / "_transaction_log" / "_last_checkpoint").read_bytes()
    assert cli_main(["checkpoint", str(copy)]) == 2
    assert "writer version 4" in capsys.readouterr().err
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == before
    assert (copy / "_transaction_log" / "_last_checkpoint").read_bytes() == hint
