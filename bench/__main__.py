"""``python -m bench``: the state, split, Spark, ingest, analytics, compaction, storage, first-look
(limits) and hits benchmarks in one run, one table of ratios.

    python -m bench [--quick] [--only state,split,spark,ingest,analytics,compaction,storage,limits,hits,lance]
                    [--ingest-rows N] [--analytics-rows N] [--compaction-rows N] [--storage-rows N]
                    [--limits-rows N] [--hits-rows N] [--lance-rows N] [--out bench-results.json] [--png DIR]

Each benchmark measures its baseline in the same run (JSON checkpoint, raw tantivy, Parquet
with ``contains``/``rlike``; for ingest, Parquet and raw tantivy-py writes and indexing the
rows a merge combines; for compaction, the same day of micro-batches unmerged and size-tiered
merged; for storage, a pyarrow scan of the same rows as Parquet on the same S3 server and the same table
on local disk); the table shows measured value, baseline, ratio, the goal set for
it and whether it was met. Nothing is asserted: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.suite import DEFAULT, QUICK, SUITES, Ratio, Sizes, ratios, run_suite

# A state table this large is slow to build and measure: it is never a default size.
SLOW_STATE_SIZE = 10_000_000
SLOW_STATE_NOTE = (
    "note: --state-sizes {size:,} is slow: the table is built by commits of 100,000 files, then measured in new "
    "processes and through Spark (count, search, DESCRIBE, MERGE planning, PURGE dry run); it has ten times the "
    "commits of the 1,000,000 size, and its log plus the manifest disk cache take about 0.3 GB per million files "
    "in the temporary directory. Run it on a machine of its own."
)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (too small for the goals): everything runs")
    p.add_argument("--only", default=",".join(SUITES), help=f"comma-separated subset of {','.join(SUITES)}")
    p.add_argument("--out", default="bench-results.json", help="where the JSON goes (default bench-results.json)")
    p.add_argument("--png", default=None, metavar="DIR", help="also draw bar charts into DIR (needs matplotlib)")
    p.add_argument(
        "--state-sizes",
        type=int,
        nargs="+",
        default=None,
        help=f"live files of the state tables ({SLOW_STATE_SIZE:,} and more: slow, ~20 minutes on 2 cores)",
    )
    p.add_argument("--split-rows", type=int, default=None, help="rows of the materialization split")
    p.add_argument("--spark-rows", type=int, default=None, help="rows of the Spark dataset")
    p.add_argument("--ingest-rows", type=int, default=None, help="rows of the ingest (write and merge) benchmark")
    p.add_argument("--analytics-rows", type=int, default=None, help="rows of the analytics (SELECT pushdown) benchmark")
    p.add_argument("--compaction-rows", type=int, default=None, help="rows of the compaction (sorted merge) benchmark")
    p.add_argument("--storage-rows", type=int, default=None, help="rows of the storage (S3 vs Parquet) benchmark")
    p.add_argument("--limits-rows", type=int, default=None, help="rows of the first-look (LIMIT, show) benchmark")
    p.add_argument("--hits-rows", type=int, default=None, help="rows of the hits (rows out of the index) benchmark")
    p.add_argument("--lance-rows", type=int, default=None, help="rows of the beside-Lance (search) benchmark")
    args = p.parse_args(argv)
    args.suites = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in args.suites if s not in SUITES]
    if unknown or not args.suites:
        p.error(f"--only: unknown benchmark {unknown or args.only!r} (choose from {','.join(SUITES)})")
    sized = ("split", "spark", "ingest", "analytics", "compaction", "storage", "limits", "hits", "lance")
    for flag in (f"{name}_rows" for name in sized):
        if getattr(args, flag) is not None and getattr(args, flag) < 10:
            p.error(f"--{flag.replace('_', '-')} must be at least 10")
    if args.state_sizes is not None and (len(args.state_sizes) < 1 or min(args.state_sizes) < 10):
        p.error("--state-sizes: give one or more sizes of at least 10 files")
    if args.state_sizes is not None and "state" in args.suites and max(args.state_sizes) >= SLOW_STATE_SIZE:
        print(SLOW_STATE_NOTE.format(size=max(args.state_sizes)), file=sys.stderr)
    return args


def sizes_of(args: argparse.Namespace) -> Sizes:
    sizes = QUICK if args.quick else DEFAULT
    overrides: dict[str, Any] = {}
    if args.state_sizes:
        overrides["state_sizes"] = tuple(args.state_sizes)
    if args.split_rows:
        overrides["split_rows"] = args.split_rows
        overrides["split_index_rows"] = min(sizes.split_index_rows, args.split_rows)
    if args.spark_rows:
        overrides["spark_rows"] = args.spark_rows
    if args.ingest_rows:
        overrides["ingest_rows"] = args.ingest_rows
    if args.analytics_rows:
        overrides["analytics_rows"] = args.analytics_rows
    if args.compaction_rows:
        overrides["compaction_rows"] = args.compaction_rows
    if args.storage_rows:
        overrides["storage_rows"] = args.storage_rows
    if args.limits_rows:
        overrides["limits_rows"] = args.limits_rows
    if args.hits_rows:
        overrides["hits_rows"] = args.hits_rows
    if args.lance_rows:
        overrides["lance_rows"] = args.lance_rows
    return dataclasses.replace(sizes, **overrides)


def _value(v: float, unit: str) -> str:
    if unit == "s":
        return f"{v:.3f} s"
    if unit == "rows/s":  # enough digits at every size (--quick runs at thousands of rows per second)
        return f"{v / 1e6:.2f}M rows/s" if v >= 1e6 else f"{v / 1e3:.1f}K rows/s" if v >= 1e3 else f"{v:.0f} rows/s"
    if unit == "B":
        return f"{int(v):,} B"
    if unit == "x":
        return f"{v:.2f}x"
    return f"{int(v):,} {unit}"


def _baseline(r: Ratio) -> str:
    value = _value(r.baseline, r.unit)
    return f"goal {value}" if r.baseline_is_target else value


def format_table(rows: Sequence[Ratio], quick: bool = False) -> str:
    header = f"{'benchmark':<72} {'measured':>15} {'baseline':>17} {'ratio':>8} {'goal':>7} {'met?':>5}"
    lines = [header, "-" * len(header)]
    for r in rows:
        met = "-" if r.met is None else ("yes" if r.met else "NO")
        ratio = f"{r.ratio:+.3f} s" if r.ratio_unit == "s" else f"{r.ratio:.2f}x"
        lines.append(
            f"{r.suite + '  ' + r.name:<72} {_value(r.measured, r.unit):>15} "
            f"{_baseline(r):>17} {ratio:>8} {r.goal or '-':>7} {met:>5}"
        )
    lines.append("ratio: baseline/measured for times (a speed-up), measured/baseline for throughput, bytes and counts")
    if any(r.ratio_unit == "s" for r in rows):
        lines.append("ratio in seconds (+0.072 s): measured minus baseline, a difference, not a ratio")
    if any(r.baseline_is_target for r in rows):
        lines.append("baseline: measured in the same run, except 'goal ...': a fixed target, not a measurement")
    if quick:
        lines.append("--quick: the sizes are too small for the goals, which are set for the default sizes")
    return "\n".join(lines)


def run_date() -> str:
    """Now, in UTC, to the second (``2026-11-26T09:00:00Z``): when the recorded run started."""
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def machine() -> dict[str, Any]:
    """What the numbers were measured on: cores, platform, Python, and the load average as the run started."""
    import os
    import platform

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": None if load is None else [round(x, 1) for x in load],
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = sizes_of(args)
    doc: dict[str, Any] = {
        "quick": args.quick,
        "date": run_date(),
        "machine": machine(),
        "argv": list(argv or sys.argv[1:]),
        "sizes": dataclasses.asdict(sizes),
        "seconds": {},
        "results": {},
    }
    rows: list[Ratio] = []
    failed: list[str] = []
    for name in args.suites:
        print(f"== {name} benchmark ...", flush=True)
        try:
            results, seconds = run_suite(name, sizes)
        except Exception:
            traceback.print_exc()
            print(f"== {name} benchmark failed; going on with the others", file=sys.stderr)
            failed.append(name)
            continue
        print(f"== {name} benchmark done in {seconds:.0f} s", flush=True)
        doc["results"][name], doc["seconds"][name] = results, seconds
        rows += ratios(name, results)
    doc["ratios"] = [dataclasses.asdict(r) for r in rows]
    doc["failed"] = failed
    print()
    print(format_table(rows, args.quick))
    Path(args.out).write_text(json.dumps(doc, indent=2))
    print(
        f"\nnumbers written to {args.out}; seconds per benchmark: "
        + ", ".join(f"{k} {v:.0f}" for k, v in doc["seconds"].items())
    )
    if args.png:
        from bench.charts import draw

        draw(doc, rows, Path(args.png))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
