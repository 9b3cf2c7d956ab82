"""Spark benchmark: format("indextables") against what a user would do without it (Parquet +
``contains``/``rlike``), on one generated log-like dataset, in one run.

    .venv/bin/python -m bench.spark_benchmark [--rows 5000000] [--out bench-spark.json]

Measures, each against its Parquet baseline measured in the same run:
* write throughput (rows/s) of ``format("indextables")`` vs ``format("parquet")``;
* a selective term query (about 0.1% of rows) — ``indexquery`` vs ``contains``/``rlike``, each
  returning the matching rows' ids to the client (both sides must return the same ids);
* a query matching about 10% of the rows (counted);
* PySpark's floor: a query through a trivial Python data source (no query through a Python data
  source can be faster) returning one row, and one returning as many rows as the selective query;
  how far above each the selective query is.
Goals (``python -m bench``): the selective query >= 10x Parquet (>= 30x from 20M rows:
``--spark-rows 20000000``), and at most 0.1 s over the floor.
Prints the ratios and writes all numbers as JSON. A timing is the best of ``--repeat`` runs (the
floors and the selective query: of 3 x ``--repeat`` runs, taken in turns).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


def _best(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def trivial_source() -> Any:
    """A Python data source doing no work: PySpark's floor. It returns one row, or with the option
    ``rows`` that many ids from two tasks (one Arrow batch each)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class TrivialReader(DataSourceReader):
        def __init__(self, rows: int | None) -> None:
            self.rows = rows

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(0)] if self.rows is None else [InputPartition(0), InputPartition(1)]

        def read(self, partition: Any) -> Iterator[Any]:
            if self.rows is None:
                yield (1,)
                return
            import pyarrow as pa

            half = self.rows // 2
            start, end = (0, half) if partition.value == 0 else (half, self.rows)
            yield pa.record_batch([pa.array(range(start, end), pa.int64())], names=["x"])

    class TrivialSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "indextables_bench_trivial"

        def schema(self) -> str:
            return "x long"

        def reader(self, schema: Any) -> DataSourceReader:
            rows = self.options.get("rows")
            return TrivialReader(None if rows is None else int(rows))

    return TrivialSource


def _best_interleaved(rounds: int, fns: dict[str, Callable[[], Any]]) -> dict[str, tuple[float, Any]]:
    """Each function's best time (and last result) over ``rounds`` rounds of one call of each, so that
    a slow stretch of the machine (a GC pause, another process) weighs on all of them alike."""
    best: dict[str, tuple[float, Any]] = {name: (float("inf"), None) for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            result = fn()
            best[name] = (min(best[name][0], time.perf_counter() - start), result)
    return best


def floor_query(spark: Any, rows: int | None = None) -> Callable[[], Any]:
    """PySpark's floor: a query through a trivial Python data source (one row, or ``rows`` rows from
    two tasks, no work). No query through a Python data source returning as many rows can be faster."""
    spark.dataSource.register(trivial_source())
    reader = spark.read.format("indextables_bench_trivial")
    if rows is not None:
        reader = reader.option("rows", str(rows))
    return lambda: reader.load().collect()


def floor_seconds(spark: Any, repeat: int, rows: int | None = None) -> float:
    """The best time of ``floor_query``, measured in the same run."""
    seconds, _ = _best(repeat, floor_query(spark, rows))
    return seconds


def generate(spark: Any, rows: int) -> Any:
    """Log lines: ~0.1% mention 'needle', ~10% 'timeout'; a level, a host and a latency."""
    return spark.range(rows).selectExpr(
        "id",
        "element_at(array('INFO','INFO','INFO','WARN','ERROR'), cast(id % 5 as int) + 1) as level",
        "concat('host-', cast(id % 97 as string)) as host",
        "cast(id % 1000 as int) as latency_ms",
        "concat('request ', cast(id as string), ' user ', cast(id * 7919 % 100003 as string), ' ', "
        "case when id % 1000 = 7 then 'needle found in payload' "
        "when id % 10 = 3 then 'upstream timeout after retry' else 'served from cache ok' end) as message",
    )


def run(rows: int = 5_000_000, repeat: int = 3, workdir: str | None = None) -> dict[str, Any]:
    """Every measurement, as the JSON document ``main`` writes; a local[2] classic session of its own."""
    with local_session(workdir, "indextables-bench-") as (spark, work):
        return _measure(spark, generate(spark, rows).repartition(4).cache(), rows, repeat, work)


@contextlib.contextmanager
def local_session(workdir: str | None, prefix: str) -> Iterator[tuple[Any, Path]]:
    """A local[2] classic session with the plugin installed and its split cache under the work
    directory (``workdir``, or a temporary one removed afterwards): the Spark benchmarks' setting,
    without Spark's start-up noise on stderr (``harness.local_spark``)."""
    from pyspark import SparkContext

    import connect_plugin
    from harness.local_spark import quiet_local_session

    if SparkContext._active_spark_context is not None:  # a session this call did not start: never stop it
        raise RuntimeError(
            "the Spark benchmarks start (and stop) a local session of their own; "
            "this process already has a SparkContext: run them in a process of their own"
        )
    work = Path(workdir or tempfile.mkdtemp(prefix=prefix))
    os.environ.setdefault("INDEXTABLES_CACHE_DIR", str(work / "split-cache"))
    spark = quiet_local_session(
        {
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.memory": "4g",
        }
    )
    connect_plugin.install(spark)
    try:
        yield spark, work
    finally:
        spark.stop()
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _measure(spark: Any, data: Any, rows: int, repeat: int, work: Path) -> dict[str, Any]:
    import connect_plugin

    data.count()
    results: dict[str, Any] = {"rows": rows}
    pq, it = str(work / "parquet"), str(work / "indextables")
    t_pq, _ = _best(1, lambda: data.write.mode("overwrite").parquet(pq))
    t_it, _ = _best(
        1,
        lambda: connect_plugin.write(
            data,
            it,
            mode="overwrite",
            options={
                "spark.indextables.indexing.typemap.message": "text",
                "spark.indextables.optimizeWrite.targetRecordsPerSplit": "2000000",
            },
        ),
    )
    results["write_s"] = {"parquet": t_pq, "indextables": t_it}
    results["write_rows_per_s"] = {"parquet": rows / t_pq, "indextables": rows / t_it}

    # The selective search returns its rows' ids to the client (a search returning rows, as the
    # floor's query returns its row; both sides must return the same ids); the broad one counts them.
    def parquet(expr: str) -> Any:
        return spark.read.parquet(pq).filter(expr).select("id")

    def indexed(query: str) -> Any:
        return connect_plugin.read(
            spark, it, columns=["id"], filter={"op": "query", "query": query, "column": "message"}
        )

    def ids(frame: Callable[[], Any]) -> Callable[[], list[Any]]:
        return lambda: frame().collect()  # timed as the floor is: the collect alone (ids compared after)

    def count(frame: Callable[[], Any]) -> Callable[[], int]:
        return lambda: int(frame().count())

    connect_plugin.read(spark, it, columns=["id"], limit=1).collect()  # warm the split cache
    selective = ids(lambda: indexed("needle"))
    queries = {
        "selective_0.1pct": (
            selective,
            ids(lambda: parquet("message like '%needle%'")),
            ids(lambda: parquet("message rlike 'needle'")),
        ),
        "broad_10pct": (
            count(lambda: indexed("timeout")),
            count(lambda: parquet("message like '%timeout%'")),
            count(lambda: parquet("message rlike 'timeout'")),
        ),
    }
    # The selective query and the two floors are timed in turns (3 x repeat rounds): their
    # differences are tens of milliseconds, less than the machine's drift between runs.
    timed = _best_interleaved(
        3 * repeat,
        {
            "floor": floor_query(spark),
            "floor_same_rows": floor_query(spark, len(selective())),
            "selective": selective,
        },
    )
    results["floor_s"], results["floor_same_rows_s"] = timed["floor"][0], timed["floor_same_rows"][0]
    for name, (ix, contains, rlike) in queries.items():
        t_ix, got = timed["selective"] if name == "selective_0.1pct" else _best(repeat, ix)
        t_c, by_contains = _best(repeat, contains)
        t_r, by_rlike = _best(repeat, rlike)
        got, by_contains, by_rlike = (_sorted_ids(x) for x in (got, by_contains, by_rlike))
        if not (got == by_contains == by_rlike):
            raise SystemExit(
                f"{name}: results differ: indextables {_size(got)}, contains {_size(by_contains)}, "
                f"rlike {_size(by_rlike)}"
            )
        results[name] = {
            "rows": _size(got),
            "indextables_s": t_ix,
            "parquet_contains_s": t_c,
            "parquet_rlike_s": t_r,
            "speedup_vs_contains": t_c / t_ix,
            "speedup_vs_rlike": t_r / t_ix,
            "over_floor_s": t_ix - results["floor_s"],
        }
        if name == "selective_0.1pct":
            results[name]["over_floor_same_rows_s"] = t_ix - results["floor_same_rows_s"]
    return results


def _sorted_ids(result: int | list[Any]) -> int | list[int]:
    """A count as it is; collected rows as their sorted first column (row ids)."""
    return result if isinstance(result, int) else sorted(row[0] for row in result)


def _size(result: int | list[int]) -> int:
    return result if isinstance(result, int) else len(result)


def print_results(results: dict[str, Any]) -> None:
    w = results["write_rows_per_s"]
    print(
        f"rows: {results['rows']}; PySpark's floor (trivial Python data source query): {results['floor_s']:.3f}s, "
        f"returning as many rows as the 0.1% query: {results['floor_same_rows_s']:.3f}s"
    )
    print(
        f"write: indextables {w['indextables']:,.0f} rows/s, parquet {w['parquet']:,.0f} rows/s "
        f"(ratio {w['indextables'] / w['parquet']:.2f}x)"
    )
    for name in ("selective_0.1pct", "broad_10pct"):
        r = results[name]
        print(
            f"{name}: {r['rows']} rows; indextables {r['indextables_s']:.2f}s, parquet contains "
            f"{r['parquet_contains_s']:.2f}s ({r['speedup_vs_contains']:.1f}x), rlike {r['parquet_rlike_s']:.2f}s "
            f"({r['speedup_vs_rlike']:.1f}x); {r['over_floor_s']:+.3f}s over the floor"
            + (
                f", {r['over_floor_same_rows_s']:+.3f}s over the same-rows floor"
                if "over_floor_same_rows_s" in r
                else ""
            )
        )


def main(argv: list[str] | None = None) -> int:
    from bench.cli import benchmark_main

    return benchmark_main(argv, __doc__, run, print_results, "bench-spark.json")


if __name__ == "__main__":
    raise SystemExit(main())
