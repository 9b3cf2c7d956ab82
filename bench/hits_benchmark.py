"""Hits benchmark (issue 51): rows out of the index against Parquet reading them, at 5M log rows.

    .venv/bin/python -m bench.hits_benchmark [--rows 5000000] [--repeat 3] [--connect 1] [--workdir DIR]
                                             [--out bench-hits.json]

The storage benchmark's rows (12 Zipf words of a 5,000-word vocabulary a message, a level, a
timestamp, a latency, an id; ``storage_benchmark.generate``) are written as Parquet and as
IndexTables (``message`` tokenized, 1M rows a split), kept in ``--workdir`` when given and reused by
the next run with the same rows. Then, the split cache warm, each in the same run:

* **materialization, in-process** (``executor_lib.search_table``, no Spark): the rows of a phrase of
  two common words (about 1% of the rows) as ``id`` only (a fast field: never the doc store) and as
  every column (``SELECT *``, the text column from the doc store), in rows per second; and, as their
  ceiling, Tantivy's own search of the phrase over the same splits with the same threads and nothing
  after it (``engine_search``: no row read, no Arrow), and Tantivy matching it without collecting the
  hits (a count: what the search costs before ``tantivy`` hands each hit to Python as an object);
* **through Spark** (``local[2]``, ``connect_plugin.sql``): ``SELECT id`` and ``SELECT *`` of the
  phrase against the same on the Parquet copy (the phrase as a substring of the space-padded
  message: words are separated by one space, so both sides match the same rows, which is checked;
  a substring search is Spark's fastest way to it, several times faster than an ``rlike``), as a
  speed-up;
* **the floor**: a rare word's ``SELECT id`` against a trivial Python data source returning one row
  (``spark_benchmark.floor_query``) in the same session, in seconds over it; with ``--connect 1`` the
  same over Spark Connect (a local Connect server of local[2]). The phrase's ``SELECT id`` is also
  printed against the trivial source returning as many rows: no Python data source returning them
  to the client is faster, which bounds its speed-up over Parquet;
* **without the client**: both phrase queries again to Spark's ``noop`` sink (the executors' work, no
  row turned into a ``Row`` on the driver), and what ``collect()`` alone costs for those rows (cached
  in Spark first): PySpark's share of the collected timings, the same for both sides.

A timing is the best of ``--repeat`` rounds (the floors: of 3 x ``--repeat``), taken in turns.
Nothing is asserted but the answers: timings on a shared machine are noisy.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.spark_benchmark import _best_interleaved, floor_query, local_session

OPTIONS = {
    "spark.indextables.indexing.typemap.message": "text",
    "spark.indextables.optimizeWrite.targetRecordsPerSplit": "1000000",
}


def run(rows: int = 5_000_000, repeat: int = 3, connect: int = 0, workdir: str | None = None) -> dict[str, Any]:
    """Every measurement, as the JSON document ``main`` writes: a local[2] classic session of its own
    (``connect=1``: then the rare word over Spark Connect too, a local Connect server of local[2])."""
    with local_session(workdir, "indextables-hits-") as (spark, work):
        pq, it, searches = _tables(spark, rows, work)
        results: dict[str, Any] = {"rows": rows, "searches": searches}
        results["materialization"] = materialization(it, searches["phrase"], repeat)
        results["spark"] = _spark(spark, pq, it, searches, repeat)
        if connect:
            spark.stop()  # one Spark at a time on the machine
            results["connect"] = _connect(it, searches, repeat)
        return results


def _tables(spark: Any, rows: int, work: Path) -> tuple[str, str, dict[str, str]]:
    """The Parquet copy and the IndexTables table of ``rows`` rows in ``work`` (written unless a
    previous run left them there), and the searches."""
    import pyarrow.parquet as pq

    import connect_plugin
    from bench.storage_benchmark import generate

    parquet, it = work / "logs.parquet", work / "indextables"
    marker = work / f"hits-written-{rows}"
    if not marker.exists():
        table, searches = generate(rows)
        pq.write_table(table, parquet)
        frame = spark.read.parquet(str(parquet)).repartition(4)
        connect_plugin.write(frame, str(it), mode="overwrite", options=OPTIONS)
        marker.write_text(repr(searches))
    searches = eval(marker.read_text())
    return str(parquet), str(it), searches


def materialization(table: str, phrase: str, repeat: int) -> dict[str, Any]:
    """In-process rows per second of the phrase's hits: ``id`` only, and every column."""
    import executor_lib

    log = executor_lib.open_log(table)
    snapshot, cache = log.snapshot(), executor_lib.default_cache()
    query = f'message:"{phrase}"'

    def rows_of(columns: list[str] | None) -> Any:
        return lambda: executor_lib.search_table(log.store, snapshot, query, cache, columns=columns).num_rows

    rows_of(None)()  # the split cache and the searchers warm
    engine = engine_search(log, snapshot, cache, query)
    match = engine_search(log, snapshot, cache, query, count_only=True)
    timed = _best_interleaved(repeat, {"id": rows_of(["id"]), "all": rows_of(None), "engine": engine, "match": match})
    hits = timed["id"][1]
    if timed["all"][1] != hits or timed["engine"][1] != hits or timed["match"][1] != hits:
        found = f"SELECT * {timed['all'][1]}, Tantivy alone {timed['engine'][1]}, its count {timed['match'][1]}"
        raise SystemExit(f"hits benchmark: SELECT id found {hits} rows, {found}")
    return {
        "hits": hits,
        "id_s": timed["id"][0],
        "all_s": timed["all"][0],
        "engine_s": timed["engine"][0],
        "match_s": timed["match"][0],
        "id_rows_per_s": hits / timed["id"][0],
        "all_rows_per_s": hits / timed["all"][0],
        "engine_hits_per_s": hits / timed["engine"][0],
        "match_hits_per_s": hits / timed["match"][0],
    }


def engine_search(log: Any, snapshot: Any, cache: Any, query: str, count_only: bool = False) -> Callable[[], int]:
    """Tantivy's own search of ``query`` over the table's splits, with ``search_table``'s threads and
    searchers and nothing after it (no row, no Arrow): the ceiling of an in-process read through the
    ``tantivy`` package, whose search returns each hit as a Python ``(score, DocAddress)``. With
    ``count_only``, Tantivy matching the query and counting its hits, none collected. Returns a
    function giving the number of hits."""
    from concurrent.futures import ThreadPoolExecutor

    from executor_lib.protocol.actions import parquet_table_root
    from executor_lib.splits.search.split_opening import open_searcher
    from executor_lib.splits.search.table_search import SEARCH_THREADS
    from indextables_contract import filters

    root = parquet_table_root(snapshot.metadata.configuration)
    schema = snapshot.arrow_schema()
    searchers = [
        open_searcher(cache, log.store, a.path, schema, snapshot.doc_mapping(a), a.size, a.footer_start_offset, root)
        for a in snapshot.files
    ]
    parsed = filters.QueryString(query)
    compiled = []
    for s in searchers:  # the query made ready first (its FST term dictionaries built), then the searcher reopened
        ready = s._query(parsed)
        compiled.append((s.searcher, ready, s.num_docs))

    def hits(searcher: Any, compiled_query: Any, num_docs: int) -> int:
        if count_only:
            return int(searcher.search(compiled_query, 1, count=True).count)
        return len(searcher.search(compiled_query, num_docs, count=False).hits)

    def run() -> int:
        with ThreadPoolExecutor(min(SEARCH_THREADS, len(compiled))) as pool:
            return sum(pool.map(lambda c: hits(*c), compiled))

    return run


def _spark(spark: Any, parquet: str, table: str, searches: dict[str, str], repeat: int) -> dict[str, Any]:
    """The phrase's ``SELECT id`` and ``SELECT *`` against Parquet's; the rare word against the floor."""
    import connect_plugin

    phrase, rare = searches["phrase"], searches["rare"]
    ours = f"FROM indextables.`{table}` WHERE message indexquery '\"{phrase}\"'"
    theirs = f"FROM parquet.`{parquet}` WHERE contains(concat(' ', message, ' '), ' {phrase} ')"
    queries = {
        "SELECT id": (f"SELECT id {ours}", f"SELECT id {theirs}"),
        "SELECT *": (f"SELECT * {ours}", f"SELECT * {theirs}"),
    }
    out: dict[str, Any] = {}
    for name, (indexed, scanned) in queries.items():
        connect_plugin.sql(spark, indexed).collect()  # workers, split cache and snapshot warm
        timed = _best_interleaved(
            repeat, {"indextables": _rows(spark, indexed, True), "parquet": _rows(spark, scanned)}
        )
        if timed["indextables"][1] != timed["parquet"][1]:
            found, expected = timed["indextables"][1], timed["parquet"][1]
            raise SystemExit(f"hits benchmark, {name}: indextables found {found} rows, Parquet {expected}")
        sunk = _best_interleaved(repeat, {"indextables": _sunk(spark, indexed, True), "parquet": _sunk(spark, scanned)})
        out[name] = {
            "hits": timed["indextables"][1],
            "indextables_s": timed["indextables"][0],
            "parquet_s": timed["parquet"][0],
            "speedup": timed["parquet"][0] / timed["indextables"][0],
            "sunk": {
                "indextables_s": sunk["indextables"][0],
                "parquet_s": sunk["parquet"][0],
                "speedup": sunk["parquet"][0] / sunk["indextables"][0],
            },
        }
    hits = out["SELECT id"]["hits"]
    floor = floor_query(spark, hits)
    floor()
    seconds, _ = _best_interleaved(repeat, {"floor": floor})["floor"]
    out["SELECT id"]["floor_same_rows_s"] = seconds  # no Python data source returns as many rows faster
    out["collect_only_s"] = _collect_cost(spark, parquet, phrase, repeat)
    out["rare word"] = _floor(spark, table, rare, repeat)
    return out


def _rows(spark: Any, text: str, indexed: bool = False) -> Callable[[], int]:
    """The number of rows ``text`` returns to the client (``connect_plugin.sql`` when ``indexed``)."""
    import connect_plugin

    if indexed:
        return lambda: len(connect_plugin.sql(spark, text).collect())
    return lambda: len(spark.sql(text).collect())


def _sunk(spark: Any, text: str, indexed: bool = False) -> Callable[[], None]:
    """``text`` run to Spark's ``noop`` sink: the query's work on the executors, no row sent to the
    client (so without PySpark turning each row into a ``Row`` on the driver, which ``collect`` does)."""
    import connect_plugin

    def run() -> None:
        frame = connect_plugin.sql(spark, text) if indexed else spark.sql(text)
        frame.write.format("noop").mode("overwrite").save()

    return run


def _collect_cost(spark: Any, parquet: str, phrase: str, repeat: int) -> dict[str, float]:
    """What ``collect()`` alone costs for the phrase's rows (``SELECT id``, ``SELECT *``): the rows cached
    in Spark's memory first, then collected, so no source is read."""
    out = {}
    for name, columns in (("SELECT id", "id"), ("SELECT *", "*")):
        text = f"SELECT {columns} FROM parquet.`{parquet}` WHERE contains(concat(' ', message, ' '), ' {phrase} ')"
        cached = spark.sql(text).cache()
        cached.count()
        out[name] = _best_interleaved(repeat, {"collect": cached.collect})["collect"][0]
        cached.unpersist()
    return out


def _floor(spark: Any, table: str, rare: str, repeat: int) -> dict[str, Any]:
    """The rare word's ``SELECT id`` against the trivial one-row source, in turns."""

    search = _rows(spark, f"SELECT id FROM indextables.`{table}` WHERE message indexquery '{rare}'", True)
    floor = floor_query(spark)
    search(), floor()
    timed = _best_interleaved(3 * repeat, {"search": search, "floor": floor})
    return {
        "hits": timed["search"][1],
        "indextables_s": timed["search"][0],
        "floor_s": timed["floor"][0],
        "over_floor_s": timed["search"][0] - timed["floor"][0],
    }


def _connect(table: str, searches: dict[str, str], repeat: int) -> dict[str, Any]:
    """The rare word against the floor through a Spark Connect session (a local server)."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    import connect_plugin
    from executor_lib.spark.connect_server import ConnectServer

    conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.driver.memory": "4g"}
    with ConnectServer("local[2]", conf=conf) as server:
        spark: Any = RemoteSparkSession.builder.remote(server.url).getOrCreate()
        connect_plugin.install(spark)
        try:
            return {"rare word": _floor(spark, table, searches["rare"], repeat)}
        finally:
            spark.stop()


def print_results(r: dict[str, Any]) -> None:
    m, s = r["materialization"], r["spark"]
    print(f"hits benchmark, {r['rows']:,} rows; phrase {r['searches']['phrase']!r}: {m['hits']:,} hits")
    print(
        f"  in-process: id {m['id_rows_per_s'] / 1e3:,.0f}K rows/s ({m['id_s']:.3f} s; "
        f"Tantivy's search alone {m['engine_s']:.3f} s"
        + (f", its matching alone (a count) {m['match_s']:.3f} s" if "match_s" in m else "")
        + "), "
        f"every column {m['all_rows_per_s'] / 1e3:,.0f}K rows/s ({m['all_s']:.3f} s)"
    )
    for name in ("SELECT id", "SELECT *"):
        q = s[name]
        print(f"  Spark {name}: {q['indextables_s']:.3f} s vs Parquet {q['parquet_s']:.3f} s = {q['speedup']:.1f}x")
        if "sunk" in q:
            k, c = q["sunk"], s.get("collect_only_s", {}).get(name)
            print(
                f"    to the noop sink (no rows to the client): {k['indextables_s']:.3f} s vs Parquet "
                f"{k['parquet_s']:.3f} s = {k['speedup']:.1f}x"
                + (f"; collect() of the rows alone, cached: {c:.3f} s" if c is not None else "")
            )
    floor = s["SELECT id"]["floor_same_rows_s"]
    print(
        f"  a trivial source returning {m['hits']:,} rows: {floor:.3f} s "
        f"(the most SELECT id could gain over Parquet: {s['SELECT id']['parquet_s'] / floor:.1f}x)"
    )
    for session, part in (("classic", s), ("Connect", (r.get("connect") or {}))):
        if "rare word" in part:
            f = part["rare word"]
            print(
                f"  {session} rare word ({f['hits']} hits): {f['indextables_s']:.3f} s, "
                f"floor {f['floor_s']:.3f} s, {f['over_floor_s']:+.3f} s"
            )


def main(argv: list[str] | None = None) -> int:
    from bench.cli import benchmark_main

    return benchmark_main(argv, __doc__, run, print_results, "bench-hits.json")


if __name__ == "__main__":
    raise SystemExit(main())
