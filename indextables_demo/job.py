"""The demo job on an existing Spark session: ``run(spark, table, rows, ...) -> Report``.

Steps: generate the corpus in Spark and write it as Parquet (the baseline), index it into an
IndexTables table one day at a time (one append per day), run example searches with the
``indexquery`` SQL operator and the same searches on Parquet with ``contains``/``rlike``
(hit counts must agree), aggregate with Tantivy, MERGE SPLITS, PURGE (dry run) and DESCRIBE.
"""

from __future__ import annotations

import datetime
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import connect_plugin
from connect_plugin.sql import sql
from connect_plugin.table import IndexTable
from indextables_demo import corpus
from indextables_demo.report import QueryResult, Report, cli_options, purge_reason

Out = Callable[[str], Any]

WRITE_OPTIONS = {
    "spark.indextables.indexing.typemap.message": "text",
    # the columns the job aggregates and filters by: not the unique trace id, which costs indexing time as a fast field
    "spark.indextables.indexing.fastfields": "ts,level,service,latency_ms",
}


class DemoError(RuntimeError):
    """The job found the index and the baseline disagreeing, or a step produced no result."""


@dataclass(frozen=True)
class Example:
    name: str
    where: str  # indexed SQL WHERE clause
    baseline: str  # the Parquet predicate, as Spark SQL (contains / rlike)


EXAMPLES = [
    Example(
        f"rare word '{corpus.NEEDLE}' (1 row in {corpus.NEEDLE_EVERY:,})",
        f"message indexquery '{corpus.NEEDLE}'",
        f"contains(message, '{corpus.NEEDLE}')",
    ),
    Example(
        'phrase "connection reset"',
        "message indexquery '\"connection reset\"'",
        "message rlike '\\\\bconnection reset\\\\b'",
    ),
    Example(
        "ERROR + payments + 'declined'",
        "level = 'ERROR' AND service = 'payments' AND message indexquery 'declined'",
        "level = 'ERROR' AND service = 'payments' AND message rlike '\\\\bdeclined\\\\b'",
    ),
    Example(
        "'timeout AND upstream'",
        "message indexquery 'timeout AND upstream'",
        "message rlike '\\\\btimeout\\\\b' AND message rlike '\\\\bupstream\\\\b'",
    ),
    Example("broad word 'retry' (~10% of rows)", "message indexquery 'retry'", "message rlike '\\\\bretry\\\\b'"),
]

LEVEL_AGGREGATION = {
    "levels": {"terms": {"field": "level", "size": 10}, "aggs": {"lat": {"avg": {"field": "latency_ms"}}}}
}


def run(
    spark: Any,
    table: str,
    rows: int = 1_000_000,
    *,
    parquet: str | None = None,
    days: int = 4,
    options: Mapping[str, str] | None = None,
    repeat: int = 2,
    out: Out = print,
) -> Report:
    """Run the whole demo against ``spark``; ``parquet=None`` skips the Parquet baseline."""
    if rows < 1 or days < 1 or repeat < 1:
        raise ValueError(f"run: rows ({rows}), days ({days}) and repeat ({repeat}) must be at least 1")
    connect_plugin.install(spark)
    opts = dict(options or {})
    report = Report(table=table, rows=rows, parquet=parquet)
    report.cli_options, report.hidden_options = cli_options(opts)
    source = _generate(spark, rows, days, parquet, report, out)
    _ingest(spark, source, table, days, opts, report, out)
    report.splits_before_merge = int(_state(spark, table, opts)["numFiles"])
    report.queries = [_example(spark, table, parquet, e, opts, repeat, out) for e in EXAMPLES]
    _show_hits(spark, table, opts, out)
    report.aggregations = [_aggregate(spark, table, parquet, opts, repeat, report, out)]
    _merge(spark, table, opts, report, out)
    _purge(spark, table, opts, report, out)
    report.state = _state(spark, table, opts)
    out("DESCRIBE INDEXTABLES STATE: " + ", ".join(f"{k}={report.state[k]}" for k in _SHOWN_STATE if k in report.state))
    return report


_SHOWN_STATE = ("version", "numFiles", "numRecords", "sizeInBytes", "stateFormat", "numManifests")


@contextmanager
def step(out: Out, label: str, every_s: float = 15.0) -> Iterator[None]:
    """Print ``label ...``, a heartbeat every ``every_s`` seconds while the body runs, then the time taken."""
    out(f"{label} ...")
    start, done = time.perf_counter(), threading.Event()

    def beat() -> None:
        while not done.wait(every_s):
            out(f"  ... {time.perf_counter() - start:.0f} s")

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _best(repeat: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def _generate(spark: Any, rows: int, days: int, parquet: str | None, report: Report, out: Out) -> Any:
    """The corpus DataFrame to index: read back from the Parquet baseline when there is one."""
    df = corpus.generate(spark, rows, days)
    if parquet is None:
        out(f"corpus: {rows:,} log rows over {days} days, generated by Spark while indexing (no Parquet baseline)")
        return df
    start = time.perf_counter()
    with step(out, f"generating {rows:,} log rows over {days} days in Spark, written as Parquet (the baseline)"):
        df.write.mode("overwrite").partitionBy("day").parquet(parquet)
    report.generate_s = time.perf_counter() - start
    out(f"  {rows:,} rows generated and written to {parquet} in {report.generate_s:.1f} s")
    return spark.read.parquet(parquet).select(*df.columns)


def _ingest(spark: Any, source: Any, table: str, days: int, opts: dict[str, str], report: Report, out: Out) -> None:
    """Index one day at a time (a daily append); print rows and splits after each commit."""
    total = 0.0
    for i in range(days):
        day = (corpus.START_DAY + datetime.timedelta(days=i)).isoformat()
        start = time.perf_counter()
        with step(out, f"indexing day {day} into {table}"):
            connect_plugin.write(
                source.filter(f"day = '{day}'"),
                table,
                mode="overwrite" if i == 0 else "append",
                partition_by=["day"],
                options={**WRITE_OPTIONS, **opts},
            )
        seconds = time.perf_counter() - start
        total += seconds
        s = _state(spark, table, opts)
        out(
            f"  day {day} indexed in {seconds:.1f} s: table version {s['version']}, {s['numFiles']} splits written, "
            f"{int(s['numRecords']):,} rows indexed so far"
        )
    report.index_s = total


def _state(spark: Any, table: str, opts: dict[str, str]) -> dict[str, Any]:
    """The table's state as a dict (JSON values decoded): ``IndexTable.describe_state``'s property rows
    (the SQL ``DESCRIBE INDEXTABLES STATE`` has IndexTables4Spark's fewer columns)."""
    rows = IndexTable.for_path(spark, table, opts).describe_state().collect()
    return {r["property"]: _decode(r["value"]) for r in rows}


def _decode(value: str | None) -> Any:
    try:
        return json.loads(value) if value is not None else None
    except ValueError:
        return value


def _index_count(spark: Any, table: str, where: str, opts: dict[str, str]) -> int:
    return int(sql(spark, f"SELECT count(*) AS n FROM indextables.`{table}` WHERE {where}", opts).collect()[0]["n"])


def _example(
    spark: Any, table: str, parquet: str | None, ex: Example, opts: dict[str, str], repeat: int, out: Out
) -> QueryResult:
    index_s, hits = _best(repeat, lambda: _index_count(spark, table, ex.where, opts))
    result = QueryResult(ex.name, ex.where, ex.baseline, hits, index_s)
    if parquet is not None:
        result.parquet_s, result.parquet_hits = _best(repeat, lambda: _parquet_count(spark, parquet, ex.baseline))
        _check(ex.name, hits, result.parquet_hits)
    vs = "" if result.speedup is None else f"; Parquet {result.parquet_s:.2f} s ({result.speedup:.1f}x)"
    out(f"search {ex.name}: {hits:,} hits in {index_s:.2f} s{vs}\n    WHERE {ex.where}")
    return result


def _parquet_count(spark: Any, parquet: str, predicate: str) -> int:
    return int(spark.read.parquet(parquet).filter(predicate).count())


def _check(what: str, index: Any, parquet: Any) -> None:
    if index != parquet:
        raise DemoError(f"{what}: the index returned {index} but the Parquet scan {parquet}; they must agree")


def _show_hits(spark: Any, table: str, opts: dict[str, str], out: Out) -> None:
    rows = sql(
        spark,
        f"SELECT ts, level, service, message FROM indextables.`{table}` "
        f"WHERE message indexquery '{corpus.NEEDLE}' ORDER BY ts LIMIT 3",
        opts,
    ).collect()
    out(f"first hits for '{corpus.NEEDLE}':")
    for r in rows:
        ts = r["ts"].isoformat(sep=" ", timespec="milliseconds") if r["ts"] is not None else "-"
        out(f"  {ts}  {r['level']:<5} {r['service']:<12} {r['message']}")


def _aggregate(
    spark: Any, table: str, parquet: str | None, opts: dict[str, str], repeat: int, report: Report, out: Out
) -> QueryResult:
    """Rows and average latency per level, computed by Tantivy (terms + avg), against a Parquet GROUP BY."""
    t = IndexTable.for_path(spark, table, opts)
    index_s, result = _best(repeat, lambda: t.aggregate(LEVEL_AGGREGATION))
    buckets = result["levels"]["buckets"]
    report.levels = {b["key"]: (int(b["doc_count"]), float(b["lat"]["value"])) for b in buckets}
    agg = QueryResult(
        "aggregate: rows + avg latency per level",
        "terms(level) avg(latency_ms)",
        "GROUP BY level",
        sum(n for n, _ in report.levels.values()),
        index_s,
    )
    if parquet is not None:
        agg.parquet_s, rows = _best(repeat, lambda: _parquet_levels(spark, parquet))
        _check("rows per level", {k: n for k, (n, _) in report.levels.items()}, {k: n for k, (n, _) in rows.items()})
        for level, (_, avg) in rows.items():
            if abs(avg - report.levels[level][1]) > 1e-6 * max(1.0, abs(avg)):
                raise DemoError(f"avg latency of {level}: index {report.levels[level][1]} vs Parquet {avg}")
        agg.parquet_hits = agg.hits
    vs = "" if agg.speedup is None else f"; Parquet GROUP BY {agg.parquet_s:.2f} s ({agg.speedup:.1f}x)"
    out(f"aggregation (terms by level, avg latency_ms) by Tantivy in {index_s:.2f} s{vs}")
    return agg


def _parquet_levels(spark: Any, parquet: str) -> dict[str, tuple[int, float]]:
    # SQL strings and dict aggregations only: pyspark.sql.functions needs a classic SparkContext
    # unless the session was built through SparkSession.builder.remote (tests build it directly)
    df = spark.read.parquet(parquet).groupBy("level").agg({"level": "count", "latency_ms": "avg"})
    return {r["level"]: (int(r["count(level)"]), float(r["avg(latency_ms)"])) for r in df.collect()}


def _merge(spark: Any, table: str, opts: dict[str, str], report: Report, out: Out) -> None:
    start = time.perf_counter()
    with step(out, f"MERGE SPLITS '{table}' TARGET SIZE 1G"):
        merged = sql(spark, f"MERGE SPLITS '{table}' TARGET SIZE 1G", opts).collect()
    report.merge_s = time.perf_counter() - start
    report.merged_splits = int(merged[0]["numSourceSplits"] or 0) if merged else 0  # the same on every row
    report.splits_after_merge = int(_state(spark, table, opts)["numFiles"])
    version = merged[0]["version"] if merged else "-"
    out(
        f"  {report.splits_before_merge} splits -> {report.splits_after_merge} in {report.merge_s:.1f} s "
        f"({len(merged)} merged splits written, commit version {version})"
    )


def _purge(spark: Any, table: str, opts: dict[str, str], report: Report, out: Out) -> None:
    rows = sql(spark, f"PURGE INDEXTABLE '{table}' OLDER THAN 24 HOURS DRY RUN", opts).collect()
    report.purge_candidates = len(rows)
    reason = purge_reason(report)
    out(
        f"PURGE INDEXTABLE ... OLDER THAN 24 HOURS DRY RUN: {len(rows)} files would be deleted"
        + (f" ({reason})" if reason else "")
    )
