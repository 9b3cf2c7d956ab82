"""Bar charts of a ``python -m bench`` run (matplotlib, the optional ``bench`` extra).

``ratios.png`` shows every ratio against its goal; ``state.png``, ``split.png`` and
``spark.png`` the raw timings of each benchmark beside its baseline.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.suite import Ratio


def draw(doc: dict[str, Any], rows: Sequence[Ratio], out_dir: Path) -> list[Path]:
    """Write the charts into ``out_dir``; without matplotlib, say so and draw nothing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(
            "--png: matplotlib is not installed, so no charts were drawn "
            "(install it with: .venv/bin/pip install matplotlib, or the project's 'bench' extra)"
        )
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [_ratios(plt, rows, out_dir / "ratios.png")]
    results = doc["results"]
    if "state" in results:
        written.append(_state(plt, results["state"], out_dir / "state.png"))
    if "split" in results:
        written.append(_split(plt, results["split"], out_dir / "split.png"))
    if "spark" in results:
        written.append(_spark(plt, results["spark"], out_dir / "spark.png"))
    print("charts: " + ", ".join(str(p) for p in written))
    return written


def _ratios(plt: Any, rows: Sequence[Ratio], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(rows) + 1.5))
    labels = [f"{r.suite}: {r.name}" for r in rows]
    colors = ["tab:gray" if r.met is None else ("tab:green" if r.met else "tab:red") for r in rows]
    values = [r.ratio if r.ratio > 0 else float("nan") for r in rows]  # log scale: zero gets a label, no bar
    ax.barh(range(len(rows)), values, color=colors)
    for i, r in enumerate(rows):
        if r.ratio <= 0:
            label = f"0 (goal {r.goal})"
            ax.annotate(label, (0.01, i), xycoords=("axes fraction", "data"), va="center", color=colors[i])
        if r.goal:
            target = float(r.goal.split()[-1])
            if target > 0:
                ax.plot([target, target], [i - 0.4, i + 0.4], color="black", linewidth=2)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("ratio (log scale; black mark = goal; green met, red not met, gray no goal)")
    ax.set_title("IndexTables benchmarks: ratios against baselines measured in the same run")
    return _save(plt, fig, path)


def _grouped(plt: Any, title: str, ylabel: str, groups: list[str], series: dict[str, list[float]], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.8 / max(1, len(series))
    for k, (name, values) in enumerate(series.items()):
        ax.bar([i + k * width for i in range(len(groups))], values, width, label=name)
    ax.set_xticks([i + width * (len(series) - 1) / 2 for i in range(len(groups))], groups)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    return _save(plt, fig, path)


def _state(plt: Any, r: dict[str, Any], path: Path) -> Path:
    groups: list[str] = []
    series: dict[str, list[float]] = {"JSON checkpoint": [], "Avro state": []}
    for n, row in sorted(r["sizes"].items(), key=lambda kv: int(kv[0])):
        for kind in ("cold", "warm"):
            groups.append(f"{int(n):,} files\n{kind}")
            series["JSON checkpoint"].append(row[f"json_{kind}_s"])
            series["Avro state"].append(row[f"avro_{kind}_s"])
    return _grouped(plt, "Snapshot load time", "seconds", groups, series, path)


def _split(plt: Any, r: dict[str, Any], path: Path) -> Path:
    i, c = r["indexing"], r["cold_warm"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(["raw tantivy", "write_split"], [i["raw_tantivy_s"], i["write_split_s"]], color=["tab:gray", "tab:blue"])
    left.set_title(f"indexing {i['rows']:,} rows")
    left.set_ylabel("seconds")
    labels = [f"{k} cache\n({c[k + '_store_reads']} store reads)" for k in ("cold", "warm")]
    right.bar(labels, [c["cold_s"], c["warm_s"]], color=["tab:gray", "tab:blue"])
    right.set_title("one query through the split cache")
    right.set_ylabel("seconds")
    return _save(plt, fig, path)


def _spark(plt: Any, r: dict[str, Any], path: Path) -> Path:
    keys = [("selective_0.1pct", "0.1% query"), ("broad_10pct", "10% query")]
    groups = [f"{label}\n({r[k]['rows']:,} rows)" for k, label in keys]
    series = {
        "indexquery": [r[k]["indextables_s"] for k, _ in keys],
        "Parquet contains": [r[k]["parquet_contains_s"] for k, _ in keys],
        "Parquet rlike": [r[k]["parquet_rlike_s"] for k, _ in keys],
    }
    return _grouped(plt, f"Spark, {r['rows']:,} rows: query latency", "seconds", groups, series, path)


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
