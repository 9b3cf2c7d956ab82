"""Snapshot-load benchmark: Avro state (protocol v4) vs JSON checkpoint (v3), measured side by side.

Run: ``.venv/bin/python -m bench.state_benchmark [--sizes 10000 100000] [--out bench.json]``

For each size it builds two local tables with the same live files — one with Avro state,
one with a JSON checkpoint — and reports:

* cold load: ``open_log(...).snapshot()`` in a fresh Python process (interpreter start excluded),
  best of ``--cold-runs``, with an empty manifest disk cache and then with a warm one;
* warm load: a new ``open_log(...).snapshot()`` in the same process after one more commit of
  10 files (Avro manifests are immutable, so the process reuses the decoded ones);
* bytes written to the log by that commit of 10 files (incremental: about equal at every size).

At every size it also measures the log at scale (issue 40) on an Avro table of that many files in
1,000 day partitions, ingested in time order by commits of at most 100,000 files (each fills the next
days): ten one-file commits in a row (the
slowest and the median), one commit of a tenth of the table (at most 100,000 files), a warm snapshot
refreshed after each of another writer's commits, and in a new process (once with an empty manifest disk
cache, then with the one it filled): the snapshot load, its memory (peak RSS
held after the load and after reading every page of its columns) and a one-partition listing.
JSON checkpoints are measured up to 200,000 files only.

It also builds a table with 100 partitions and reports the files and manifests a
partition-pruned listing reads. Ratios are against the JSON checkpoint measured in the same
run; nothing is asserted (machines are noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

import executor_lib
from executor_lib.protocol.actions import AddAction
from executor_lib.storage import open_store
from indextables_contract.filters import Term

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("message", pa.string())])
COLD_SNIPPET = (
    "import sys,time,executor_lib;t=time.perf_counter();s=executor_lib.open_log(sys.argv[1]).snapshot();"
    "print(time.perf_counter()-t, len(s.files))"
)


MAPPING_REF = "gC45RGOqJ_Grt0xH"  # the doc mapping the scale tables register (``bench_configuration``)


def bench_configuration() -> dict[str, str]:
    """A scale table's configuration: ``MAPPING_REF`` registered as the mapping its real splits use
    (``state_spark.add_real_partition``), so every file's mapping is known, as in a real table."""
    from bench.state_spark import bench_mapping
    from executor_lib.protocol.schema_registry import REGISTRY_PREFIX

    return {REGISTRY_PREFIX + MAPPING_REF: bench_mapping(SCHEMA).to_json()}


def make_adds(n: int, partitions: int = 10, day_of: Callable[[int], int] | None = None) -> list[AddAction]:
    """``n`` adds spread over ``partitions`` days round-robin, or file ``i`` in day ``day_of(i)``."""
    out = []
    for i in range(n):
        d = day_of(i) if day_of is not None else i % partitions
        day = f"{2024 + d // 336}-{1 + d % 336 // 28:02d}-{1 + d % 28:02d}"
        out.append(
            AddAction(
                path=f"day={day}/splits/split-{uuid.uuid4()}.split",
                partition_values={"day": day},
                size=1_000_000 + i,
                modification_time=1_700_000_000_000 + i,
                data_change=True,
                num_records=1000,
                min_values={"id": str(i * 1000), "message": "aaaa"},
                max_values={"id": str(i * 1000 + 999), "message": "zzzz"},
                has_footer_offsets=True,
                footer_start_offset=900_000,
                footer_end_offset=1_000_000 + i,
                doc_mapping_ref=MAPPING_REF,
            )
        )
    return out


def log_bytes(uri: str) -> dict[str, int]:
    return {o.key: o.size for o in open_store(uri).list("_transaction_log/")}


def build(root: Path, n: int, state_format: str) -> str:
    uri = str(root / f"{state_format}-{n}")
    options: dict[str, Any] = {
        "spark.indextables.state.format": state_format,
        "spark.indextables.checkpoint.interval": "1000000",
    }
    log = executor_lib.create_table(uri, SCHEMA, ["day"], **options)
    log.commit(make_adds(n), new_files=True)
    log.checkpoint()  # JSON checkpoint (json) / compacted Avro state at the latest version (avro)
    return uri


def cold_load(uri: str, runs: int, cache_dir: Path) -> tuple[float, float]:
    """Fresh-process loads, best of ``runs`` each (this machine is noisy): with an empty manifest
    disk cache every time, then with the disk cache those loads filled."""

    def load(directory: Path) -> float:
        env = {**os.environ, "INDEXTABLES_MANIFEST_CACHE_DIR": str(directory)}
        out = subprocess.run(
            [sys.executable, "-c", COLD_SNIPPET, uri], check=True, capture_output=True, text=True, env=env
        )
        return float(out.stdout.split()[0])

    empty = min(load(cache_dir / f"empty-{i}") for i in range(runs))
    warm_disk = min(load(cache_dir / "empty-0") for _ in range(runs))
    return empty, warm_disk


def warm_load(uri: str, state_format: str) -> tuple[float, int]:
    """One load to warm the process, one commit of 10 files, then the timed loads (best of three)."""
    options = {"spark.indextables.state.format": state_format, "spark.indextables.checkpoint.interval": "1000000"}
    executor_lib.open_log(uri, **options).snapshot()
    before = log_bytes(uri)
    executor_lib.open_log(uri, **options).commit(make_adds(10), new_files=True)
    after = log_bytes(uri)
    written = sum(size for key, size in after.items() if before.get(key) != size)
    best = float("inf")
    for _ in range(3):  # best of three: this machine is noisy
        start = time.perf_counter()
        executor_lib.open_log(uri, **options).snapshot()
        best = min(best, time.perf_counter() - start)
    return best, written


SCALE_SNIPPET = """
import json, os, sys, time
import numpy as np
import executor_lib
from indextables_contract.filters import Term
def rss(): return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
base = rss()
import executor_lib.log.state.avro_state, executor_lib.log.state.manifest_cache
import executor_lib.log.files.pruning, executor_lib.log.tables
before = rss()  # the code a load runs is imported (about 90 MB): its memory is the process's, not the snapshot's
t = time.perf_counter(); s = executor_lib.open_log(sys.argv[1]).snapshot(); load = time.perf_counter() - t
files = s.state.files
held = sum(c.table.nbytes for c in getattr(files, "chunks", ()))  # Arrow bytes, some memory-mapped
for chunk in getattr(files, "chunks", ()):  # touch every page, so mapped bytes count as resident
    for buffer in (b for column in chunk.table.columns for a in column.chunks for b in a.buffers() if b is not None):
        np.frombuffer(buffer, np.uint8)[::4096].sum()
grown = (rss() - before) / 1024
from executor_lib.log.state.manifest_cache import MANIFEST_CACHE
MANIFEST_CACHE.flush()  # written: the disk copies (with an empty cache, they take over the statistics)
settled = (rss() - before) / 1024
day = next(iter(files.values())).partition_values["day"]; del s, files
times = []
for _ in range(3):  # each with a new log object; the first also pays first-use costs; the best of three is reported
    t = time.perf_counter(); listing = executor_lib.open_log(sys.argv[1]).list_files([Term("day", day)])
    times.append(time.perf_counter() - t)
print(json.dumps({"load_s": load, "rss_mb": grown / 1024,
                  "imports_mb": (before - base) / 2**20, "settled_mb": settled / 1024, "held_mb": held / 2**20,
                  "listing_s": min(times),
                  "listing_first_s": times[0],
                  "listing_files": len(listing.files), "manifests_read": listing.manifests_read,
                  "manifests_total": listing.manifests_total}))
"""
SCALE_PARTITIONS = 1000
SCALE_BATCH = 100_000
SPARK_BASELINE_FILES = 1_000
REAL_DAY = "2030-01-01"  # a day of its own in every scale table, where the Spark measurements' splits are real
JSON_MAX_FILES = 200_000  # JSON checkpoints are measured up to this size (beyond, only the Avro state)


def snapshot_memory_mb(scale_row: dict[str, Any]) -> float:
    """A loaded snapshot's memory: what a new process that had imported the log's code grew by (RSS)
    after loading it and reading every page of the Arrow columns it holds (memory-mapped ones
    included). The imports (``imports_mb``, about 90 MB) are the process's, whatever the table."""
    return float(scale_row["rss_mb"])


def build_scale_table(root: Path, n: int) -> str:
    """A table of ``n`` live files (their splits absent) in ``SCALE_PARTITIONS`` days, ingested in time
    order by commits of at most ``SCALE_BATCH`` files (each fills the next days)."""
    uri = str(root / f"scale-{n}")
    executor_lib.create_table(uri, SCHEMA, ["day"], configuration=bench_configuration())
    for start in range(0, n, SCALE_BATCH):
        day_of = lambda i, start=start: (start + i) * SCALE_PARTITIONS // n  # noqa: E731
        executor_lib.open_log(uri).commit(make_adds(min(SCALE_BATCH, n - start), day_of=day_of), new_files=True)
    return uri


def through_spark(root: Path, uri: str) -> dict[str, Any]:
    """``state_spark``'s statements on the scale table at ``uri`` against a 1,000-file baseline, after
    both got real splits in one day (``REAL_DAY``)."""
    from bench import state_spark

    baseline_root = root / f"baseline-for-{Path(uri).name}"
    shutil.rmtree(baseline_root, ignore_errors=True)  # (a table measured again)
    baseline = build_scale_table(baseline_root, SPARK_BASELINE_FILES)
    for table in (uri, baseline):
        state_spark.add_real_partition(table, REAL_DAY)
    return state_spark.measure(uri, baseline, REAL_DAY)


def scale(root: Path, n: int, spark: bool = True) -> dict[str, Any]:
    """The log at ``n`` live files: commit and load times, memory, a one-partition listing, and (if
    ``spark``) the statements of ``state_spark`` through a local Spark session."""
    return measure_scale(root, build_scale_table(root, n), n, spark)


def measure_scale(root: Path, uri: str, n: int, spark: bool = True) -> dict[str, Any]:
    """``scale``'s measurements on ``uri``, a table ``build_scale_table(root, n)`` built (and these
    measurements may have grown since: ``n`` is its live files now)."""
    out: dict[str, Any] = {}
    reader = executor_lib.open_log(uri)
    reader.snapshot()
    one_file, refreshes = [], []
    for _ in range(10):
        start_t = time.perf_counter()
        executor_lib.open_log(uri).commit(make_adds(1, SCALE_PARTITIONS), new_files=True)
        one_file.append(time.perf_counter() - start_t)
        start_t = time.perf_counter()
        reader.snapshot()  # the process held the version before another writer's commit
        refreshes.append(time.perf_counter() - start_t)
    out["one_file_commit_max_s"], out["one_file_commit_median_s"] = max(one_file), sorted(one_file)[5]
    out["warm_after_commit_s"] = max(refreshes)
    big = min(SCALE_BATCH, max(1, n // 10))
    adds = make_adds(big, SCALE_PARTITIONS)
    start_t = time.perf_counter()
    executor_lib.open_log(uri).commit(adds, new_files=True)
    out["big_commit_files"], out["big_commit_s"] = big, time.perf_counter() - start_t
    start_t = time.perf_counter()
    snap = reader.snapshot()  # after another writer's commit of a tenth of the table
    out["warm_after_big_commit_s"] = time.perf_counter() - start_t
    assert snap.num_files == n + 10 + big, f"warm snapshot holds {snap.num_files} files"
    # New processes with their own manifest disk cache: the first decodes every manifest (a node that
    # never read the table), the second reads the copies the first left (a node that did).
    env = {**os.environ, "INDEXTABLES_MANIFEST_CACHE_DIR": str(root / f"manifest-cache-{n}")}
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", SCALE_SNIPPET, uri], check=True, capture_output=True, text=True, env=env
            ).stdout
        )
        for _ in range(2)
    ]
    out.update(runs[1])
    out["cold_load_s"], out["cold_rss_mb"], out["cold_settled_mb"] = (
        runs[0]["load_s"],
        runs[0]["rss_mb"],
        runs[0]["settled_mb"],
    )
    if spark:
        out["spark"] = through_spark(root, uri)
    return out


def pruning(root: Path, files: int = 10_000) -> dict[str, Any]:
    uri = str(root / "pruning")
    options: dict[str, Any] = {"spark.indextables.state.entriesPerManifest": "500"}
    log = executor_lib.create_table(uri, SCHEMA, ["day"], **options)
    adds = make_adds(files, partitions=100)
    by_day: dict[str, list[AddAction]] = {}
    for a in adds:
        by_day.setdefault(str(a.partition_values["day"]), []).append(a)
    for batch in by_day.values():
        log.commit(batch, new_files=True)
    day = sorted(by_day)[42]
    listing = executor_lib.open_log(uri).list_files([Term("day", day)])
    return {
        "liveFiles": len(adds),
        "partitions": len(by_day),
        "filesReturned": len(listing.files),
        "manifestsRead": listing.manifests_read,
        "manifestsTotal": listing.manifests_total,
    }


def run(sizes: Sequence[int] = (10_000, 100_000), cold_runs: int = 3, pruning_files: int = 10_000) -> dict[str, Any]:
    """Every measurement, as the JSON document ``main`` writes (``sizes`` keyed by file count)."""
    results: dict[str, Any] = {"sizes": {}}
    with tempfile.TemporaryDirectory(prefix="indextables-bench-") as tmp:
        root = Path(tmp)
        for n in sizes:
            row: dict[str, Any] = {}
            if n <= JSON_MAX_FILES:
                for fmt in ("json", "avro"):
                    uri = build(root, n, fmt)
                    cold = cold_load(uri, cold_runs, root / f"c-{fmt}-{n}")
                    row[f"{fmt}_cold_s"], row[f"{fmt}_cold_disk_cache_s"] = cold
                    row[f"{fmt}_warm_s"], row[f"{fmt}_commit_bytes"] = warm_load(uri, fmt)
                row["warm_speedup"] = row["json_warm_s"] / row["avro_warm_s"]
                row["cold_speedup"] = row["json_cold_s"] / row["avro_cold_s"]
                row["cold_disk_cache_speedup"] = row["json_cold_disk_cache_s"] / row["avro_cold_disk_cache_s"]
            row["scale"] = scale(root, n, spark=n == max(sizes) or n >= 1_000_000)  # Spark: the largest and 1M+
            results["sizes"][str(n)] = row
        results["pruning"] = pruning(root, pruning_files)
    return results


def print_results(results: dict[str, Any]) -> None:
    header = (
        "files",
        "json cold",
        "avro cold",
        "x",
        "avro cold*",
        "x*",
        "json warm",
        "avro warm",
        "x",
        "json commit",
        "avro commit",
    )
    print("{:>7} {:>10} {:>10} {:>6} {:>10} {:>6} {:>10} {:>10} {:>6} {:>12} {:>12}".format(*header))
    for n, r in results["sizes"].items():
        if "json_cold_s" not in r:
            continue
        print(
            f"{n:>7} {r['json_cold_s']:>9.3f}s {r['avro_cold_s']:>9.3f}s {r['cold_speedup']:>5.1f}x "
            f"{r['avro_cold_disk_cache_s']:>9.3f}s {r['json_cold_s'] / r['avro_cold_disk_cache_s']:>5.1f}x "
            f"{r['json_warm_s']:>9.3f}s {r['avro_warm_s']:>9.3f}s {r['warm_speedup']:>5.1f}x "
            f"{r['json_commit_bytes']:>11}B {r['avro_commit_bytes']:>11}B"
        )
    print(
        "cold: new process, empty manifest cache; cold*: new process, manifest disk cache warm; "
        "commit: bytes one 10-file commit writes to the log"
    )
    print(
        f"{'files':>9} {'1-file commit max':>17} {'median':>8} {'big commit':>16} {'warm+1':>7} {'warm+big':>8} "
        f"{'new-process load':>16} {'memory':>7} {'1-partition listing':>19} {'first':>7} "
        f"{'empty-cache load':>16} {'memory':>7} {'settled':>7}"
    )
    for n, r in results["sizes"].items():
        sc = r["scale"]
        print(
            f"{int(n):>9} {sc['one_file_commit_max_s']:>16.3f}s {sc['one_file_commit_median_s']:>7.3f}s "
            f"{sc['big_commit_s']:>7.2f}s/{sc['big_commit_files']:>7} {sc['warm_after_commit_s']:>6.3f}s "
            f"{sc['warm_after_big_commit_s']:>7.3f}s "
            f"{sc['load_s']:>15.2f}s {snapshot_memory_mb(sc):>5.0f}MB {sc['listing_s']:>18.3f}s "
            f"{sc.get('listing_first_s', float('nan')):>6.3f}s "
            f"{sc.get('cold_load_s', float('nan')):>15.2f}s {sc.get('cold_rss_mb', float('nan')):>5.0f}MB "
            f"{sc.get('cold_settled_mb', float('nan')):>5.0f}MB"
        )
    print(
        "warm+1 / warm+big: a process's snapshot refreshed after another writer's one-file (slowest of ten) / "
        "big commit; big commit: a tenth of the table, at most 100,000 files; "
        "new-process load, memory, listing: with the manifest disk cache an earlier process filled; "
        "1-partition listing: best of three in that process, each with a new log object (first: the first of them); "
        "memory: RSS growth after loading the snapshot and reading every page of its Arrow columns "
        "(memory-mapped ones included); empty-cache load: a new process decoding every manifest, its memory "
        "grown so, then settled: once its manifest disk copies are written (they take over the statistics)"
    )
    print_spark(results)
    p = results["pruning"]
    print(
        f"pruned listing of 1 of {p['partitions']} partitions ({p['liveFiles']} files): {p['filesReturned']} "
        f"files returned, {p['manifestsRead']} of {p['manifestsTotal']} manifests read"
    )


SPARK_STATEMENTS = ("count", "describe_state", "search", "merge_plan", "purge_dry_run")


def print_spark(results: dict[str, Any]) -> None:
    """The Spark statements at each size (``state_spark``): first run / best of three."""
    print(f"{'files':>9} " + " ".join(f"{name:>17}" for name in (*SPARK_STATEMENTS, "search on 1K files")))
    for n, r in results["sizes"].items():
        sp = r["scale"].get("spark")
        if not sp:
            continue
        cells = [
            f"{sp[f'{name}_first_s']:>7.2f}s/{sp[f'{name}_s']:>7.2f}s" if f"{name}_s" in sp else "failed"
            for name in SPARK_STATEMENTS
        ]
        cells.append(f"{sp['baseline_search_first_s']:>7.2f}s/{sp['baseline_search_s']:>7.2f}s")
        print(f"{int(n):>9} " + " ".join(f"{c:>17}" for c in cells))
        for name in SPARK_STATEMENTS:
            if f"{name}_error" in sp:
                print(f"{'':>9} {name} failed: {sp[f'{name}_error']}")
    print(
        "through a local Spark session warmed on a 1,000-file table, in a new process: first run / best of three; "
        "count: SELECT count(*); search: one day's real splits, WHERE day = ... AND message indexquery ...; "
        "merge_plan: MERGE SPLITS planning (the merge_plan command); purge_dry_run: PURGE INDEXTABLE ... DRY RUN"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--cold-runs", type=int, default=3)
    parser.add_argument("--pruning-files", type=int, default=10_000, help="live files of the 100-partition table")
    parser.add_argument("--out", default="state_benchmark.json")
    args = parser.parse_args(argv)
    results = run(args.sizes, args.cold_runs, args.pruning_files)
    print_results(results)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"numbers written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
