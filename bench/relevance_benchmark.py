"""Relevance benchmark: the best 20 rows by ``_score`` against ``count(*)`` of the same query, and against
Spark sorting every hit by a score the read gives it (no per-task top k).

    python -m bench.relevance_benchmark [--rows 1000000] [--splits 20] [--hit-rate 0.008] [--runs 5]

Writes a table of synthetic log lines (a query matching about ``--hit-rate`` of them) in ``--splits``
splits through the executor library, then times, warm (each query run once first), the median of
``--runs`` runs on a local Spark session:

* ``count``: ``SELECT count(*) ... WHERE message indexquery q``;
* ``top20``: ``SELECT id, message, _score ... ORDER BY _score DESC LIMIT 20`` (each task its best 20);
* ``sort all``: the same rows read with ``_score`` but no top k pushed, sorted and cut by Spark;
* and in one process (no Spark) ``search_table(..., 20, scored=True)``.

Numbers depend on the machine; nothing here is asserted.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def _table(path: str, rows: int, splits: int, hit_rate: float) -> None:
    import pyarrow as pa

    import executor_lib

    rng = random.Random(52)
    vocabulary = [f"w{i}" for i in range(5000)]
    schema = pa.schema([("id", pa.int64()), ("message", pa.string())])
    log = executor_lib.create_table(path, schema)
    mapping = executor_lib.mapping_for(schema, {"spark.indextables.indexing.typemap.message": "text"})
    step = -(-rows // splits)
    adds = []
    for start in range(0, rows, step):
        n = min(step, rows - start)
        messages = []
        for _ in range(n):
            words = rng.choices(vocabulary, k=rng.randint(5, 30))
            if rng.random() < hit_rate:
                words[rng.randrange(len(words))] = "timeout"
                if rng.random() < 0.5:
                    words.append("upstream")
            messages.append(" ".join(words))
        batch = pa.table({"id": pa.array(range(start, start + n), pa.int64()), "message": messages}, schema=schema)
        adds.append(executor_lib.write_and_upload(log.store, batch, mapping, {}))
    log.commit(adds)


def _median(runs: int, work: Callable[[], object]) -> float:
    work()  # warm: the splits cached and opened
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--hit-rate", type=float, default=0.008)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    import connect_plugin
    import executor_lib
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.splits.search.table_search import search_table
    from harness.local_spark import quiet_local_session

    path = str(Path(tempfile.mkdtemp(prefix="indextables-relevance-")) / "logs")
    t0 = time.perf_counter()
    _table(path, args.rows, args.splits, args.hit_rate)
    print(f"table: {args.rows:,} rows in {args.splits} splits, written in {time.perf_counter() - t0:.1f} s")
    query = "timeout upstream"
    where = f"FROM indextables.`{path}` WHERE message indexquery '{query}'"
    spark = quiet_local_session({"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"})
    connect_plugin.install(spark)
    hits = connect_plugin.sql(spark, f"SELECT count(*) AS n {where}").collect()[0]["n"]
    print(f"query {query!r}: {hits:,} hits")
    count = _median(args.runs, lambda: connect_plugin.sql(spark, f"SELECT count(*) {where}").collect())
    top = _median(
        args.runs,
        lambda: connect_plugin.sql(
            spark, f"SELECT id, message, _score {where} ORDER BY _score DESC LIMIT 20"
        ).collect(),
    )

    def sort_all() -> object:
        df = connect_plugin.read(
            spark, path, columns=["id", "message", "_score"], filter=f"message indexquery '{query}'"
        )
        return df.orderBy("_score", ascending=False).limit(20).collect()

    everything = _median(args.runs, sort_all)
    log = executor_lib.open_log(path)
    cache = SplitCache(Path(tempfile.mkdtemp(prefix="indextables-relevance-cache-")))
    alone = _median(args.runs, lambda: search_table(log.store, log.snapshot(), query, cache, ["id"], 20, scored=True))
    print(f"count(*):                       {count * 1000:8.1f} ms")
    print(f"top 20 by _score (pushed):      {top * 1000:8.1f} ms  ({(top - count) * 1000:+.1f} ms vs count)")
    print(f"Spark sorts every hit by score: {everything * 1000:8.1f} ms  ({everything / top:.2f}x the top 20)")
    print(f"search_table top 20, no Spark:  {alone * 1000:8.1f} ms")
    spark.stop()


if __name__ == "__main__":
    main()
