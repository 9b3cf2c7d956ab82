"""The README's benchmark numbers are those of the run recorded in ``docs/bench/results.json``: its
block is exactly what ``python -m bench.readme`` renders from that file (no benchmark runs here)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from bench import readme
from bench.suite import SUITES, Ratio, _ratio
from tests.conftest import REPO_ROOT


def test_the_readme_block_is_rendered_from_the_recorded_run() -> None:
    text = (REPO_ROOT / "docs" / "benchmarks.md").read_text()
    assert readme.readme_block(text) == readme.render(readme.recorded(REPO_ROOT / "docs" / "bench" / "results.json")), (
        "docs/benchmarks.md's benchmark block is not docs/bench/results.json's: run python -m bench.readme --write"
    )
    assert text.count(readme.BEGIN) == 1


def test_the_block_quotes_every_figure_of_a_recorded_run(tmp_path: Path) -> None:
    """A run's table, date, machine and times all reach the block; a changed figure changes it."""
    rows = [
        _ratio("spark", "0.1% query: indexquery vs Parquet contains", 0.883, 2.056, "s", 2.056 / 0.883, (">=", 10)),
        _ratio("ingest", "write 1,000 rows: indextables vs Parquet (throughput)", 8_612.0, 68_700.0, "rows/s", 0.125),
        _ratio(
            "analytics",
            "selective search: seconds over PySpark's trivial-query floor",
            0.177,
            0.103,
            "s",
            0.074,
            ("<=", 0.1),
            ratio_unit="s",
        ),
    ]
    doc = {
        "quick": False,
        "date": "2026-11-26T09:00:00Z",
        "machine": {"cpus": 2, "platform": "Linux-x86_64", "python": "3.11.7", "load_average": [3.5, 2.0, 1.0]},
        "seconds": {"spark": 250.4, "ingest": 130.0},
        "ratios": [r.__dict__ for r in rows],
        "failed": [],
    }
    (tmp_path / "results.json").write_text(json.dumps(doc))
    block = readme.render(readme.recorded(tmp_path / "results.json"))
    assert "2026-11-26T09:00:00Z, 2 cores, Linux-x86_64, Python 3.11.7, load average 3.5 as it started" in block
    assert "6 min 20 s in all (spark 4 min 10 s, ingest 2 min 10 s)" in block
    assert re.search(r"0\.883 s +2\.056 s +2\.33x +>= 10 +NO", block)
    assert "8.6K rows/s" in block and "68.7K rows/s" in block and "0.00M" not in block  # throughput keeps its digits
    assert re.search(r"0\.177 s +0\.103 s +\+0\.074 s +<= 0\.1 +yes", block)  # a difference in seconds, labelled so
    assert "a difference, not a ratio" in block
    assert f"runs eight benchmarks in one process: {', '.join(SUITES)}." in block and len(SUITES) == 8
    doc["ratios"][0]["measured"] = 0.884
    assert readme.render(doc) != block
    assert [Ratio(**r) for r in json.loads(json.dumps(doc))["ratios"]][2].ratio_unit == "s"


def test_readme_claims_no_benchmark_count_or_time_the_tool_does_not_print() -> None:
    text = (REPO_ROOT / "docs" / "benchmarks.md").read_text()
    section = text[text.index("# Benchmarks\n") : text.index("Each benchmark also runs on its own")]
    assert "three benchmarks" not in section and "about 1 minute" not in section and "about 5 minutes" not in section


# Figures quoted in prose, each with the recorded ratio it quotes: (page, the sentence's words
# around the figure with {} where it stands, the ratio's name in docs/bench/results.json, digits).
PROSE_FIGURES = [
    (
        "docs/benchmarks.md",
        "MERGE SPLITS of 8 splits was {}x faster than indexing",
        "MERGE SPLITS of 8 splits vs indexing their rows",
        1,
    ),
    (
        "docs/table-api-and-sql.md",
        "companion split is {}x the bytes of the full split",
        "companion split bytes / full split (200,000 rows)",
        2,
    ),
    (
        "docs/table-api-and-sql.md",
        "and {}x its Parquet source",
        "companion split bytes / its Parquet source",
        2,
    ),
]


def test_figures_in_the_prose_are_the_recorded_runs() -> None:
    """A figure the docs quote from a benchmark is the one in docs/bench/results.json (a new
    recorded run that changes it fails here until the prose says the new figure)."""
    ratios = {r["name"]: r["ratio"] for r in json.loads((REPO_ROOT / "docs/bench/results.json").read_text())["ratios"]}
    for page, words, name, digits in PROSE_FIGURES:
        text = " ".join((REPO_ROOT / page).read_text().split())
        expected = words.format(f"{ratios[name]:.{digits}f}")
        assert expected in text, f"{page}: expected {expected!r} (recorded {name!r} = {ratios[name]})"
