"""A whole-split cache entry's checksums (``executor_lib.cache.entry_checksums``): a check that found the
files as written is trusted node-wide for ``REVERIFY_SECONDS`` while their ``stat`` stays the same (a
new Python worker does not read the split again), and never once a file was rewritten."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from executor_lib.cache import entry_checksums as checks
from tests.census.sweeps import flip_in_place


def _entry(tmp_path: Path) -> Path:
    entry = tmp_path / "entry"
    (entry / "index").mkdir(parents=True)
    (entry / checks.DATA_FILE).write_bytes(os.urandom(300_000))
    (entry / "index" / "seg.idx").write_bytes(os.urandom(50_000))
    checks.record_checksums(
        entry, {checks.DATA_FILE: entry / checks.DATA_FILE, "index/seg.idx": entry / "index" / "seg.idx"}
    )
    return entry


def _new_process() -> None:
    """What a freshly started worker remembers: nothing of this process's checks."""
    checks._VERIFIED.clear()


def _rot(path: Path, offset: int) -> None:
    """A bit flipped at rest: the file's modification time is left as it was (bit rot changes no stat)."""
    st = path.stat()
    flip_in_place(path, offset, 3)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_check_is_remembered_across_processes_until_the_window_ends(tmp_path: Path) -> None:
    entry = _entry(tmp_path)
    assert checks.damaged_files(entry) == []
    assert (entry / checks.VERIFIED).is_file()
    _rot(entry / checks.DATA_FILE, 1234)
    _new_process()
    assert checks.damaged_files(entry) == []  # within the window: trusted, the split is not read again
    memo = json.loads((entry / checks.VERIFIED).read_text())
    memo["at"] -= checks.REVERIFY_SECONDS + 1  # the node's last check is older than the window
    (entry / checks.VERIFIED).write_text(json.dumps(memo))
    _new_process()
    assert checks.damaged_files(entry) == [checks.DATA_FILE]
    assert checks.damaged_files(entry) == [checks.DATA_FILE]  # and it stays found: nothing remembered


def test_the_same_process_looks_again_once_its_window_ends(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    entry = _entry(tmp_path)
    assert checks.damaged_files(entry) == []
    _rot(entry / "index" / "seg.idx", 77)
    assert checks.damaged_files(entry) == []
    monkeypatch.setattr(checks, "REVERIFY_SECONDS", 0.0)  # every check is out of its window at once
    assert checks.damaged_files(entry) == ["index/seg.idx"]


def test_a_rewritten_file_is_read_again_whatever_was_remembered(tmp_path: Path) -> None:
    entry = _entry(tmp_path)
    assert checks.damaged_files(entry) == []
    flip_in_place(entry / checks.DATA_FILE, 99, 0)  # written: its modification time moves
    assert checks.damaged_files(entry) == [checks.DATA_FILE]
    _new_process()
    assert checks.damaged_files(entry) == [checks.DATA_FILE]


@pytest.mark.parametrize(
    "memo",
    ["{not json", '{"at": 1}', '{"stats": 3, "at": 1}', '{"stats": [[1, 2, 3]], "at": "x"}', "[]"],
)
def test_a_damaged_memo_means_the_files_are_read(tmp_path: Path, memo: str) -> None:
    entry = _entry(tmp_path)
    assert checks.damaged_files(entry) == []
    _rot(entry / checks.DATA_FILE, 5)
    (entry / checks.VERIFIED).write_text(memo)
    _new_process()
    assert checks.damaged_files(entry) == [checks.DATA_FILE]


def test_a_memo_from_the_future_is_not_trusted(tmp_path: Path) -> None:
    entry = _entry(tmp_path)
    assert checks.damaged_files(entry) == []
    _rot(entry / checks.DATA_FILE, 5)
    memo = json.loads((entry / checks.VERIFIED).read_text())
    memo["at"] += 10 * checks.REVERIFY_SECONDS  # a flipped bit in the time, or a clock set back
    (entry / checks.VERIFIED).write_text(json.dumps(memo))
    _new_process()
    assert checks.damaged_files(entry) == [checks.DATA_FILE]
