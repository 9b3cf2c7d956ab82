"""Beside Lance (issue 69): the same rows as an IndexTables table and as a Lance dataset with its
full-text (inverted) index, both in-process, each side timed in the same run.

    .venv/bin/python -m bench.lance_benchmark [--rows 5000000] [--split-rows 1000000] [--repeat 7]
    .venv/bin/python -m bench --only lance [--lance-rows N]

The rows are the storage benchmark's (``storage_benchmark.generate``: 12 Zipf words of a 5,000-word
vocabulary a message), as ``id``, ``level`` and ``message``. Lance is ``pylance`` (the ``bench`` extra);
without it, the run says so and measures only this project's side.

* **top 10 by BM25**, warm (best of ``--repeat``), for a two-word query and a word in about 10% of the
  rows: ``search_table(..., scored=True, limit=10)`` (table-wide statistics, its splits open) against
  Lance's ``to_table(full_text_query=q, limit=10)``, and Tantivy's own top 10 on each split (the
  ``tantivy`` package, each split's own statistics): the engine's floor.
* **the first query after a process start**: a new Python process, its imports done, opens the
  table (with an empty node cache) or the dataset and runs the two-word top 10; the seconds from the
  open to the answer, best of 3 processes; once as it is and once with pandas imported first (pyarrow
  imports it, 0.4-1 s, at its first conversion of Python values: a Spark worker or a notebook has it).
* **a projection of the 10% word's hits**: their ``id`` values, every hit (rows/s).

Printed as milliseconds and ratios (``bench.suite.lance_ratios`` holds the goals); nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# Each script's first line may import pandas before the clock starts: pyarrow imports it (0.4-1 s) at the
# first conversion of Python values; a Spark worker or a notebook has it imported already.
OURS_FIRST = """
import sys, time, json
if sys.argv[-1] == "pandas": import pandas
import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.splits.search.table_search import search_table
import tempfile
from pathlib import Path
uri, query = sys.argv[1], sys.argv[2]
cache = Path(tempfile.mkdtemp(dir=sys.argv[3]))  # empty: a node cache of its own each process
t0 = time.perf_counter()
log = executor_lib.open_log(uri)
rows = search_table(log.store, log.snapshot(), query, SplitCache(cache), ["id"], limit=10, scored=True)
print(json.dumps([time.perf_counter() - t0, rows.num_rows]))
"""

LANCE_FIRST = """
import sys, time, json
if sys.argv[-1] == "pandas": import pandas
import lance
path, query = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
rows = lance.dataset(path).to_table(full_text_query=query, columns=["id"], limit=10)
print(json.dumps([time.perf_counter() - t0, rows.num_rows]))
"""


def _first(script: str, args: list[str], runs: int = 3) -> float:
    """The best of ``runs`` new processes' seconds from open to answer (``script`` prints them)."""
    times = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", script, *args], capture_output=True, text=True, check=False, timeout=600
        )
        if done.returncode != 0:
            raise RuntimeError(f"first-query process failed ({done.returncode}): {done.stderr[-2000:]}")
        seconds, found = json.loads(done.stdout.strip().splitlines()[-1])
        if found == 0:
            raise RuntimeError(f"first-query process found no rows for {args}")
        times.append(float(seconds))
    return min(times)


def _lance(data: Any, path: Path) -> Any:
    """A Lance dataset of ``data`` with an inverted index on ``message``, or the reason there is none."""
    try:
        import lance
    except ImportError:
        return "pylance is not installed (pip install -e '.[bench]')"
    dataset = lance.write_dataset(data, str(path))
    dataset.create_scalar_index("message", index_type="INVERTED")
    return lance.dataset(str(path))


def run(rows: int = 5_000_000, split_rows: int = 1_000_000, repeat: int = 7, first_runs: int = 3) -> dict[str, Any]:
    """Every measurement (module docstring) as a JSON document; ``first_runs`` new processes per first query."""
    import executor_lib
    from bench.ranking_benchmark import _best, _ten_percent_word
    from bench.storage_benchmark import generate
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.splits.search.split_opening import open_searcher
    from executor_lib.splits.search.table_search import search_table

    generated, searches = generate(rows)
    data = generated.select(["id", "level", "message"])
    words = searches["phrase"].split()
    queries = {"two words": f"{words[0]} {words[1]}", "10% word": _ten_percent_word(data)}
    work = Path(tempfile.mkdtemp(prefix="indextables-lance-"))
    options: dict[str, Any] = {"spark.indextables.indexing.typemap.message": "text"}
    uri = str(work / "t")
    log = executor_lib.create_table(uri, data.schema, **options)
    mapping = executor_lib.mapping_for(data.schema, options)
    split_rows = max(1, min(split_rows, rows))
    log.commit(
        [
            executor_lib.write_and_upload(log.store, data.slice(i, split_rows), mapping, {})
            for i in range(0, rows, split_rows)
        ]
    )
    dataset = _lance(data, work / "lance")
    has_lance = not isinstance(dataset, str)
    snap = log.snapshot()
    cache = SplitCache(work / "cache")
    searchers = [
        open_searcher(cache, log.store, a.path, snap.arrow_schema(), snap.doc_mapping(a), a.size) for a in snap.files
    ]
    out: dict[str, Any] = {
        "rows": rows,
        "splits": len(searchers),
        "load": os.getloadavg()[0],
        "lance": None if has_lance else dataset,
        "top10": {},
    }
    for name, query in queries.items():
        compiled = [s._query(query, scoring=True) for s in searchers]  # first: it may open the index again
        prepared = list(zip([s.searcher for s in searchers], compiled, strict=True))

        def ours(query: str = query) -> Any:
            return search_table(log.store, snap, query, cache, ["id"], limit=10, scored=True)

        def tantivy_top10(prepared: list[Any] = prepared) -> int:
            return sum(len(searcher.search(q, 10, count=False).hits) for searcher, q in prepared)

        entry: dict[str, Any] = {
            "query": query,
            "hits": sum(s.count(query) for s in searchers),
            "ours_s": _best(repeat, ours),
            "tantivy_s": _best(repeat, tantivy_top10),
        }
        if has_lance:

            def lance_top10(query: str = query) -> Any:
                return dataset.to_table(full_text_query=query, columns=["id"], limit=10)

            entry["lance_s"] = _best(repeat, lance_top10)
            mine = set(ours().column("id").to_pylist())
            entry["same_ids_as_lance"] = len(mine & set(lance_top10().column("id").to_pylist()))
        out["top10"][name] = entry
    two = queries["two words"]
    first: dict[str, Any] = {"query": two}
    for variant in ("bare", "pandas"):
        cache_dir = work / f"first-cache-{variant}"
        cache_dir.mkdir()
        first[f"ours_{variant}_s"] = _first(OURS_FIRST, [uri, two, str(cache_dir), variant], first_runs)
        if has_lance:
            first[f"lance_{variant}_s"] = _first(LANCE_FIRST, [str(work / "lance"), two, variant], first_runs)
    out["first_query"] = first
    word = queries["10% word"]
    hits = out["top10"]["10% word"]["hits"]
    projection: dict[str, Any] = {"query": word, "hits": hits}
    ours_s = _best(repeat, lambda: search_table(log.store, snap, word, cache, ["id"]))
    projection["ours_rows_per_s"] = hits / ours_s
    if has_lance:
        lance_s = _best(repeat, lambda: dataset.to_table(full_text_query=word, columns=["id"]))
        projection["lance_rows_per_s"] = hits / lance_s
    out["projection"] = projection
    return out


def print_results(r: dict[str, Any]) -> None:
    print(f"lance: {r['rows']:,} rows, {r['splits']} splits (load average {r['load']:.2f})")
    if r["lance"]:
        print(f"  Lance not measured: {r['lance']}")
    for name, q in r["top10"].items():
        line = f"  top 10, {name} {q['query']!r} ({q['hits']:,} hits): ours {q['ours_s'] * 1000:.1f} ms"
        if "lance_s" in q:
            line += f", Lance {q['lance_s'] * 1000:.1f} ms ({q['lance_s'] / q['ours_s']:.2f}x ours)"
            line += f", {q['same_ids_as_lance']} of 10 ids the same"
        line += f", Tantivy's own {q['tantivy_s'] * 1000:.1f} ms (ours {q['ours_s'] / q['tantivy_s']:.2f}x it)"
        print(line)
    f = r["first_query"]
    for variant, label in (("bare", "as it is"), ("pandas", "pandas imported first")):
        ours = f[f"ours_{variant}_s"]
        line = f"  first query after a process start ({label}): ours {ours * 1000:.0f} ms"
        if f"lance_{variant}_s" in f:
            lance = f[f"lance_{variant}_s"]
            line += f", Lance {lance * 1000:.0f} ms (ours {ours / lance:.2f}x it)"
        print(line)
    p = r["projection"]
    line = f"  ids of {p['hits']:,} hits of {p['query']!r}: ours {p['ours_rows_per_s'] / 1e6:.2f}M rows/s"
    if "lance_rows_per_s" in p:
        line += f", Lance {p['lance_rows_per_s'] / 1e6:.2f}M rows/s"
    print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--split-rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7, help="best of how many warm runs")
    parser.add_argument("--first-runs", type=int, default=3, help="new processes per first query")
    args = parser.parse_args()
    print_results(run(args.rows, args.split_rows, args.repeat, args.first_runs))


if __name__ == "__main__":
    main()
