"""First-look benchmark (issue 55): ``limit(1)``, ``show()``, SQL ``LIMIT 20`` and a filtered
``LIMIT 20`` on ``format("indextables")``, each against the same on the Parquet copy, in one run.

    .venv/bin/python -m bench.limit_benchmark [--rows 5000000] [--repeat 5] [--connect 1] [--workdir DIR]
                                              [--out bench-limits.json]

On one local[2] classic session, ``spark_benchmark.generate``'s log rows are written as IndexTables
(``message`` tokenized, 1M rows a split) and as Parquet (kept in ``--workdir`` when given, and
reused by the next run with the same rows). Then, the split cache warm, each first look is timed
on both, in turns (a slow stretch of the machine weighs on both alike), each call a fresh read
(Spark 4.3 caches a Python data source's reader on the DataFrame):

* ``load(t).limit(1).collect()``;
* ``load(t).show()`` (20 rows, printed into a buffer);
* ``connect_plugin.sql("SELECT * FROM indextables.`t` LIMIT 20")`` against ``spark.sql`` on Parquet;
* a filtered ``LIMIT 20`` (``WHERE message indexquery 'timeout'``, 10% of the rows) against the
  same statement's ``count(*)`` (issue 55's goal) and Parquet's ``LIKE '%timeout%' LIMIT 20``;
* ``load(t).filter("level = 'ERROR'").limit(20)`` against Parquet's.

With ``--connect 1`` the same first looks are then timed over Spark Connect (a local Connect server
of local[2] on the same tables). PySpark's floor (a trivial Python data source returning one row) is
measured in the same run (classic). Every
answer is checked (row counts, and the filtered rows match their filter). A timing is the best of
``--repeat`` rounds.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.spark_benchmark import _best_interleaved, floor_query, generate, local_session

OPTIONS = {
    "spark.indextables.indexing.typemap.message": "text",
    "spark.indextables.optimizeWrite.targetRecordsPerSplit": "1000000",
}


def run(rows: int = 5_000_000, repeat: int = 5, connect: int = 0, workdir: str | None = None) -> dict[str, Any]:
    """Every measurement, as the JSON document ``main`` writes; a local[2] classic session of its own
    (``connect=1``: then the same over Spark Connect, a local Connect server of local[2], as ``connect``)."""
    with local_session(workdir, "indextables-limits-") as (spark, work):
        results = _measure(spark, rows, repeat, work)
        if connect:
            spark.stop()  # one Spark at a time on the machine
            results["connect"] = _measure_connect(rows, repeat, work)
        return results


def _measure_connect(rows: int, repeat: int, work: Path) -> dict[str, Any]:
    """The same first looks through a Spark Connect session (a local server with its own Python workers)."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    import connect_plugin
    from executor_lib.spark.connect_server import ConnectServer

    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "4g"}
    with ConnectServer("local[2]", conf=conf) as server:
        spark: Any = RemoteSparkSession.builder.remote(server.url).getOrCreate()
        connect_plugin.install(spark)
        try:
            return _measure(spark, rows, repeat, work, floor=False)
        finally:
            spark.stop()


def _tables(spark: Any, rows: int, work: Path) -> tuple[str, str]:
    """The IndexTables table and its Parquet copy of ``rows`` rows in ``work`` (written unless a
    previous run left them there)."""
    import connect_plugin

    pq, it = work / "parquet", work / "indextables"
    marker = work / f"written-{rows}"
    if not marker.exists():
        data = generate(spark, rows).repartition(4).cache()
        data.write.mode("overwrite").parquet(str(pq))
        connect_plugin.write(data, str(it), mode="overwrite", options=OPTIONS)
        data.unpersist()
        marker.touch()
    return str(pq), str(it)


def _shown(frame: Callable[[], Any]) -> Callable[[], str]:
    """``frame().show()`` (20 rows), its text caught."""

    def show() -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            frame().show()
        return out.getvalue()

    return show


def _measure(spark: Any, rows: int, repeat: int, work: Path, floor: bool = True) -> dict[str, Any]:
    import connect_plugin

    pq, it = _tables(spark, rows, work)
    table = f"indextables.`{it}`"

    def ours() -> Any:
        return spark.read.format("indextables").load(it)

    def parquet() -> Any:
        return spark.read.parquet(pq)

    matched = "SELECT * FROM {t} WHERE message indexquery 'timeout'"
    pairs: dict[str, tuple[Callable[[], Any], Callable[[], Any], str]] = {
        "limit(1).collect()": (
            lambda: ours().limit(1).collect(),
            lambda: parquet().limit(1).collect(),
            "parquet",
        ),
        "show() (20 rows)": (_shown(ours), _shown(parquet), "parquet"),
        "SQL SELECT * LIMIT 20": (
            lambda: connect_plugin.sql(spark, f"SELECT * FROM {table} LIMIT 20").collect(),
            lambda: spark.sql(f"SELECT * FROM parquet.`{pq}` LIMIT 20").collect(),
            "parquet",
        ),
        "SQL indexquery LIMIT 20": (
            lambda: connect_plugin.sql(spark, matched.format(t=table) + " LIMIT 20").collect(),
            lambda: connect_plugin.sql(
                spark, f"SELECT count(*) FROM {table} WHERE message indexquery 'timeout'"
            ).collect(),
            "count(*)",
        ),
        "filter(level = 'ERROR').limit(20)": (
            lambda: ours().filter("level = 'ERROR'").limit(20).collect(),
            lambda: parquet().filter("level = 'ERROR'").limit(20).collect(),
            "parquet",
        ),
    }
    baselines_parquet = {
        "SQL indexquery LIMIT 20": lambda: spark.sql(
            f"SELECT * FROM parquet.`{pq}` WHERE message LIKE '%timeout%' LIMIT 20"
        ).collect(),
    }
    for mine, _, _ in pairs.values():  # warm: the split cache, the searchers, the Python workers
        mine()
    fns: dict[str, Callable[[], Any]] = {"floor": floor_query(spark)} if floor else {}
    for name, (mine, theirs, _) in pairs.items():
        fns[f"{name}|ours"], fns[f"{name}|baseline"] = mine, theirs
    for name, fn in baselines_parquet.items():
        fns[f"{name}|parquet"] = fn
    timed = _best_interleaved(repeat, fns)
    _check(timed, rows)
    results: dict[str, Any] = {"rows": rows, "floor_s": timed["floor"][0] if floor else None, "queries": {}}
    for name, (_, _, baseline) in pairs.items():
        mine_s, base_s = timed[f"{name}|ours"][0], timed[f"{name}|baseline"][0]
        entry = {"indextables_s": mine_s, "baseline": baseline, "baseline_s": base_s}
        entry["over_baseline_s"] = mine_s - base_s
        if f"{name}|parquet" in timed:
            entry["parquet_s"] = timed[f"{name}|parquet"][0]
        results["queries"][name] = entry
    return results


def _check(timed: dict[str, tuple[float, Any]], rows: int) -> None:
    """Each answer as it must be: the row counts, and every filtered row matching its filter."""
    got = {name: result for name, (_, result) in timed.items()}
    want_rows = {"limit(1).collect()": 1, "SQL SELECT * LIMIT 20": 20, "SQL indexquery LIMIT 20": 20}
    for name, n in want_rows.items():
        for side in ("ours", "baseline") if name != "SQL indexquery LIMIT 20" else ("ours",):
            if len(got[f"{name}|{side}"]) != min(n, rows):
                raise SystemExit(f"{name} ({side}): {len(got[f'{name}|{side}'])} rows, not {n}")
    if any("timeout" not in r["message"] for r in got["SQL indexquery LIMIT 20|ours"]):
        raise SystemExit("SQL indexquery LIMIT 20: a row does not mention 'timeout'")
    for side in ("ours", "baseline"):
        found = got[f"filter(level = 'ERROR').limit(20)|{side}"]
        if len(found) != 20 or any(r["level"] != "ERROR" for r in found):
            raise SystemExit(f"filter(level = 'ERROR').limit(20) ({side}): not 20 ERROR rows")
    for side in ("ours", "baseline"):
        if got[f"show() (20 rows)|{side}"].count("\n") != 20 + 5:  # the rows, 3 rules, the header, a blank line
            raise SystemExit(f"show() ({side}): not 20 rows shown")


def print_results(r: dict[str, Any]) -> None:
    print(f"rows: {r['rows']:,}; PySpark's floor (trivial Python data source query): {r['floor_s']:.3f}s")
    for session, results in (("classic", r), ("connect", r.get("connect"))):
        for name, q in (results or {}).get("queries", {}).items():
            extra = f"; parquet {q['parquet_s']:.3f}s" if "parquet_s" in q else ""
            print(
                f"{session} {name}: indextables {q['indextables_s']:.3f}s, {q['baseline']} {q['baseline_s']:.3f}s "
                f"({q['over_baseline_s']:+.3f}s){extra}"
            )


def main(argv: list[str] | None = None) -> int:
    from bench.cli import benchmark_main

    return benchmark_main(argv, __doc__, run, print_results, "bench-limits.json")


if __name__ == "__main__":
    sys.exit(main())
