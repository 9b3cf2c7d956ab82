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
    assert f"runs ten benchmarks in one process: {', '.join(SUITES)}." in block and len(SUITES) == 10
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


# The main job's figures: the README quotes the report of the run recorded in docs/bench/demo-run.txt
# (its whole output: python -m indextables_demo > docs/bench/demo-run.txt), and its prose the figures of
# that report, each as (the sentence's words with {} where the figure stands, the report line's start,
# the column of that line the figure is).
DEMO_RUN = REPO_ROOT / "docs" / "bench" / "demo-run.txt"
DEMO_PROSE_FIGURES = [
    ("in this run the rare word took {} and", "  rare word 'kraken'", "indextables"),
    (
        "Tantivy's aggregation against Spark's `GROUP BY` over Parquet came to {}",
        "  aggregate: rows + avg latency per level",
        "speed-up",
    ),
]


def _recorded_report() -> list[str]:
    text = DEMO_RUN.read_text()
    return text[text.index("=" * 30 + " IndexTables demo: report") :].split("\n")[1:]


def _readme_demo_block() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text()
    after = text[text.index("One default run here") :]
    return after[after.index("```\n") + 4 : after.index("\n```", after.index("```\n"))].split("\n")


def test_the_readme_demo_report_is_the_recorded_runs() -> None:
    """Every line of the README's report is the recorded run's, in order (none stale, none made up)."""
    recorded, shown = _recorded_report(), _readme_demo_block()
    assert len(shown) >= 15 and shown[0].startswith("table ")
    at = 0
    for line in shown:
        assert line in recorded[at:], f"README's demo report line {line!r} is not the recorded run's (in order)"
        at = recorded.index(line, at) + 1


def test_the_recorded_demo_run_is_in_the_units_the_report_prints_now() -> None:
    """The report's size is DESCRIBE INDEXTABLES STATE's sizeInBytes as ``_bytes`` prints it today (a run
    recorded when sizes were MiB labelled MB would fail here), and its rows/s are rows over the index time."""
    from indextables_demo.report import _bytes

    text = DEMO_RUN.read_text()
    state = re.search(r"DESCRIBE INDEXTABLES STATE: .*numRecords=(\d+), sizeInBytes=(\d+)", text)
    assert state is not None
    rows, size = int(state.group(1)), int(state.group(2))
    assert f"{rows:,} rows, {_bytes(size)}, partitioned by day" in text
    ingest = re.search(r"indexed in ([\d.]+) s \(([\d,]+) rows/s\)", text)
    assert ingest is not None
    assert abs(rows / float(ingest.group(1)) / int(ingest.group(2).replace(",", "")) - 1) < 0.01


def test_demo_figures_in_the_prose_are_the_recorded_runs() -> None:
    readme = " ".join((REPO_ROOT / "README.md").read_text().split())
    report = _recorded_report()
    header = next(line for line in report if line.startswith("example (best latency)"))
    for words, row, column in DEMO_PROSE_FIGURES:
        line = next(line for line in report if line.startswith(row))
        end = header.index(column) + len(column)  # the columns are right-aligned under their names
        figure = line[:end].split()[-1] if column == "speed-up" else " ".join(line[:end].split()[-2:])
        expected = words.format(figure)
        assert expected in readme, f"README: expected {expected!r} (the recorded demo run's {row.strip()!r})"
