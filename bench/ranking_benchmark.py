"""Ranking benchmark (issue 69): the best 10 rows by BM25 with table-wide statistics, in-process.

    .venv/bin/python -m bench.ranking_benchmark [--rows 1000000] [--split-rows 250000] [--repeat 7]

The storage benchmark's rows (12 Zipf words of a 5,000-word vocabulary a message;
``storage_benchmark.generate``) are written as IndexTables (``message`` tokenized, ``--split-rows``
a split). Then, the splits open and warm, best of ``--repeat`` for a two-word query and a word in
about 10% of the rows, each in the same run:

* **native**: what ``search_table(..., scored=True)`` runs on local splits: each split's share of
  the table's statistics (``SplitSearcher.score_stats``) and its best 10 scored with them by the
  native engine (``SplitSearcher.scored``: Tantivy's top-k with a statistics provider);
* **rescored**: the path it replaced (still the one for splits read by the piece): every hit of
  every split from the ``tantivy`` package, rescored with the table's statistics in numpy;
* **Tantivy's own top 10**: the ``tantivy`` package's ``search(q, 10)`` on each split with the
  split's own statistics (no table-wide score): the engine's floor.

Printed as milliseconds and ratios; nothing is asserted. The ids of the native and the rescored
top 10 are compared (equal up to ties at the 10th score).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _best(repeat: int, run: Callable[[], Any]) -> float:
    run()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return min(times)


def _top(parts: list[tuple[int, Any, Any]], k: int) -> list[tuple[float, int, int]]:
    hits = [(float(s), i, int(r)) for i, rows, scores in parts for r, s in zip(rows.to_pylist(), scores, strict=True)]
    return sorted(hits, key=lambda h: (-h[0], h[1], h[2]))[:k]


def run(rows: int = 1_000_000, split_rows: int = 250_000, repeat: int = 7) -> dict[str, Any]:
    import executor_lib
    from bench.storage_benchmark import generate
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.splits.search.scoring import ScoreStats
    from executor_lib.splits.search.split_opening import open_searcher

    data, searches = generate(rows)
    words = searches["phrase"].split()
    queries = {"two words": f"{words[0]} {words[1]}", "10% word": _ten_percent_word(data)}
    work = Path(tempfile.mkdtemp(prefix="indextables-ranking-"))
    options: dict[str, Any] = {"spark.indextables.indexing.typemap.message": "text"}
    log = executor_lib.create_table(str(work / "t"), data.schema, **options)
    mapping = executor_lib.mapping_for(data.schema, options)
    log.commit(
        [
            executor_lib.write_and_upload(log.store, data.slice(i, split_rows), mapping, {})
            for i in range(0, rows, split_rows)
        ]
    )
    snap = log.snapshot()
    cache = SplitCache(work / "cache")
    searchers = [
        open_searcher(cache, log.store, a.path, snap.arrow_schema(), snap.doc_mapping(a), a.size) for a in snap.files
    ]
    out: dict[str, Any] = {"rows": rows, "splits": len(searchers), "load": os.getloadavg()[0], "queries": {}}
    for name, query in queries.items():

        def native(query: str = query) -> list[tuple[float, int, int]]:
            stats = ScoreStats.merged(s.score_stats(query) for s in searchers)  # type: ignore[misc]
            return _top([(i, *s.scored(query, 10, stats)) for i, s in enumerate(searchers)], 10)

        def rescored(query: str = query) -> list[tuple[float, int, int]]:
            stats = ScoreStats.merged(s._modelled_stats(query) for s in searchers)  # type: ignore[misc]
            return _top([(i, *s._rescored(query, 10, stats)) for i, s in enumerate(searchers)], 10)

        prepared = [s._query(query, scoring=True) for s in searchers]  # its terms made ready (may reopen)
        compiled = list(zip([s.searcher for s in searchers], prepared, strict=True))

        def tantivy_top10(compiled: list[Any] = compiled) -> int:
            return sum(len(searcher.search(q, 10, count=False).hits) for searcher, q in compiled)

        a, b = native(), rescored()
        kth = min(a[-1][0], b[-1][0])
        same = [h[1:] for h in a if h[0] > kth + 1e-4] == [h[1:] for h in b if h[0] > kth + 1e-4]
        hits = sum(s.count(query) for s in searchers)
        times = {
            "native": _best(repeat, native),
            "rescored": _best(repeat, rescored),
            "tantivy": _best(repeat, tantivy_top10),
        }
        out["queries"][name] = {"query": query, "hits": hits, "same_top": same, **times}
    return out


def _ten_percent_word(data: Any) -> str:
    """The vocabulary word closest to being in 10% of the messages (of the first 100,000)."""
    from collections import Counter

    sample = data.column("message").slice(0, 100_000).to_pylist()
    counts = Counter(w for m in sample for w in set(m.split()))
    return min(counts, key=lambda w: abs(counts[w] / len(sample) - 0.10))


def print_results(results: dict[str, Any]) -> None:
    rows, splits, load = results["rows"], results["splits"], results["load"]
    print(f"ranking: top 10 by BM25, table-wide, {rows:,} rows in {splits} splits (load average {load:.2f})")
    for name, r in results["queries"].items():
        print(
            f"  {name} {r['query']!r} ({r['hits']:,} hits): native {r['native'] * 1000:.1f} ms, "
            f"rescored {r['rescored'] * 1000:.1f} ms ({r['rescored'] / r['native']:.1f}x native), "
            f"Tantivy's own top 10 {r['tantivy'] * 1000:.1f} ms (native {r['native'] / r['tantivy']:.2f}x it); "
            f"same top 10: {r['same_top']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--split-rows", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print_results(run(args.rows, args.split_rows, args.repeat))


if __name__ == "__main__":
    main()
