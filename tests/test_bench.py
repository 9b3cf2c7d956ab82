"""``python -m bench`` at a tiny size: the state benchmark only (no timings are asserted)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from bench.__main__ import main


def test_bench_state_at_tiny_sizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, png = tmp_path / "bench.json", tmp_path / "png"
    argv = ["--quick", "--only", "state", "--state-sizes", "100", "300", "--out", str(out), "--png", str(png)]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    assert doc["failed"] == [] and set(doc["results"]) == {"state"}
    names = [r["name"] for r in doc["ratios"]]
    assert len(names) == 5 and "warm snapshot load, 300 files: Avro state vs JSON checkpoint" in names
    assert all(r["ratio"] > 0 for r in doc["ratios"])
    assert doc["results"]["state"]["pruning"]["manifestsRead"] < doc["results"]["state"]["pruning"]["manifestsTotal"]
    printed = capsys.readouterr().out
    assert "warm snapshot load" in printed and "met?" in printed
    if importlib.util.find_spec("matplotlib") is None:
        assert "matplotlib is not installed" in printed
    else:
        assert (png / "ratios.png").is_file() and (png / "state.png").is_file()


def test_bench_names_a_bad_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--only", "state,disk"])
    assert "--only: unknown benchmark ['disk']" in capsys.readouterr().err
