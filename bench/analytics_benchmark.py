"""Analytics benchmark: SELECTs through ``connect_plugin.sql`` against Spark over the same rows as Parquet.

    .venv/bin/python -m bench.analytics_benchmark [--rows 5000000] [--out bench-analytics.json]

On one local[2] classic session, the demo corpus (Zipf log rows, partitioned by ``day``; message
as ``text``) is written as IndexTables and as Parquet; then, each against its Parquet twin and
checked to give the same rows: ``count(*)``; ``GROUP BY level`` count; ``avg/min/max(latency)
GROUP BY level``; an ``indexquery`` WHERE with ``GROUP BY level``; a ``max()`` with an
exact-field WHERE; a selective search returning rows (the rare word). PySpark's floor for a
trivial Python data source query (one row, no work) is measured in the same run: a query
through a Python data source cannot be faster than it. A timing is the best of ``--repeat`` runs.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

from bench.spark_benchmark import _best, floor_seconds

OPTIONS = {"spark.indextables.indexing.typemap.message": "text"}
QUERIES = {  # name: (IndexTables statement, Parquet statement), {t} = the table
    "count(*)": ("SELECT count(*) FROM {t}",) * 2,
    "GROUP BY level count": ("SELECT level, count(*) FROM {t} GROUP BY level",) * 2,
    "avg/min/max(latency) GROUP BY level": (
        "SELECT level, avg(latency_ms), min(latency_ms), max(latency_ms) FROM {t} GROUP BY level",
    )
    * 2,
    "indexquery WHERE + GROUP BY level": (
        "SELECT level, count(*) FROM {t} WHERE message indexquery 'kraken' GROUP BY level",
        "SELECT level, count(*) FROM {t} WHERE message LIKE '%kraken%' GROUP BY level",
    ),
    "max() with an exact-field WHERE": ("SELECT max(latency_ms) FROM {t} WHERE service = 'payments'",) * 2,
    "selective search (rows)": (
        "SELECT id, service, message FROM {t} WHERE message indexquery 'kraken'",
        "SELECT id, service, message FROM {t} WHERE message LIKE '%kraken%'",
    ),
}
GOALS = {"count(*)": 3.0, "indexquery WHERE + GROUP BY level": 3.0}  # others: >= 1


def _normal(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted(
        (tuple(round(v, 6) if isinstance(v, float) and not math.isnan(v) else v for v in r) for r in rows), key=repr
    )


def run(rows: int = 5_000_000, repeat: int = 3, workdir: str | None = None) -> dict[str, Any]:
    """Every measurement, as the JSON document ``main`` writes; a local[2] classic session of its own."""
    from bench.spark_benchmark import local_session

    with local_session(workdir, "indextables-analytics-") as (spark, work):
        return _measure(spark, rows, repeat, work)


def _measure(spark: Any, rows: int, repeat: int, work: Path) -> dict[str, Any]:
    import connect_plugin
    from indextables_demo.corpus import generate

    data = generate(spark, rows)
    pq, it = str(work / "parquet"), str(work / "indextables")
    data.write.mode("overwrite").partitionBy("day").parquet(pq)
    connect_plugin.write(data, it, mode="overwrite", partition_by=["day"], options=OPTIONS)
    spark.read.parquet(pq).createOrReplaceTempView("analytics_parquet")
    floor = floor_seconds(spark, repeat + 2)
    results: dict[str, Any] = {"rows": rows, "floor_s": floor, "queries": {}}
    table = f"indextables.`{it}`"
    connect_plugin.sql(spark, QUERIES["selective search (rows)"][0].format(t=table)).collect()  # warm the cache
    for name, (ours, theirs) in QUERIES.items():
        indexed = ours.format(t=table)
        parquet = theirs.format(t="analytics_parquet")
        t_it, got = _best(repeat, lambda: connect_plugin.sql(spark, indexed).collect())  # noqa: B023
        t_pq, want = _best(repeat, lambda: spark.sql(parquet).collect())  # noqa: B023
        if _normal(got) != _normal(want):
            first = (_normal(got)[:5], _normal(want)[:5])
            raise SystemExit(f"{name}: results differ:\n  indextables {first[0]}\n  parquet {first[1]}")
        results["queries"][name] = {
            "indextables_s": t_it,
            "parquet_s": t_pq,
            "speedup": t_pq / t_it,
            "rows": len(got),
            "over_floor_s": t_it - floor,
        }
    return results


def print_results(r: dict[str, Any]) -> None:
    print(f"rows: {r['rows']:,}; PySpark's floor (trivial Python data source query): {r['floor_s']:.3f}s")
    for name, q in r["queries"].items():
        print(
            f"{name}: indextables {q['indextables_s']:.3f}s, parquet {q['parquet_s']:.3f}s "
            f"({q['speedup']:.2f}x; {q['over_floor_s']:+.3f}s over the floor)"
        )


def main(argv: list[str] | None = None) -> int:
    from bench.cli import benchmark_main

    return benchmark_main(argv, __doc__, run, print_results, "bench-analytics.json")


if __name__ == "__main__":
    sys.exit(main())
