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
from tests.conftest import COMPAT_ROOT, requires_compat

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


@requires_compat
def test_time_travel_on_jvm_state_versions(capsys: pytest.CaptureFixture[str]) -> None:
    table = COMPAT_ROOT / "03_with_removes"
    counts = [describe(table, capsys, "--version", str(v))["numFiles"] for v in range(5)]
    assert counts == [0, 2, 4, 6, 1]


@requires_compat
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


@pytest.mark.parametrize("name", TABLES)
def test_append_to_a_copy_and_read_back(name: str, tmp_path: Path) -> None:
    """This code appends to (and removes from) every JVM-written table; the result reads back right."""
    import dataclasses

    import executor_lib
    from executor_lib.log.snapshot import SnapshotLoader
    from executor_lib.protocol.actions import RemoveAction

    copy = tmp_path / name
    shutil.copytree(COMPAT_ROOT / name, copy)
    log = executor_lib.open_log(str(copy))
    before = log.snapshot()
    template = before.files[0] if before.files else None
    partition = dict(template.partition_values) if template else {c: "x" for c in before.partition_columns}
    new = [
        executor_lib.AddAction(
            f"part-new-{i}.split",
            partition,
            size=100 + i,
            modification_time=1,
            data_change=True,
            num_records=7,
            doc_mapping_ref=template.doc_mapping_ref if template else None,
        )
        for i in range(3)
    ]
    v1 = log.commit(new)
    assert v1 == before.version + 1
    removed = before.files[:1]
    v2 = log.commit([RemoveAction(f.path, 1, partition_values=f.partition_values, size=f.size) for f in removed])
    fresh = executor_lib.open_log(str(copy)).snapshot()
    assert fresh.version == v2
    assert fresh.base == f"state-v{v2:020d}", "each commit to a v4 table writes its Avro state"
    expected = {f.path for f in before.files} - {f.path for f in removed} | {a.path for a in new}
    assert {f.path for f in fresh.files} == expected
    assert fresh.num_records == before.num_records - sum(f.num_records or 0 for f in removed) + 21
    assert fresh.metadata.id == before.metadata.id
    if template is not None:
        assert fresh.doc_mapping(next(f for f in fresh.files if f.path == new[0].path)) == before.doc_mapping(template)
    # the state at v1 (written incrementally on the JVM's state) agrees with replaying the log
    at_v1 = SnapshotLoader(log.store, log.config).load(v1)
    assert {f.path for f in at_v1.files} == {f.path for f in before.files} | {a.path for a in new}
    assert dataclasses.replace(fresh.files[0]) == fresh.files[0]
