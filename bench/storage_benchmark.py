"""Storage benchmark: a table on object storage (moto's S3 server on 127.0.0.1, and fake-gcs-server's
GCS API where Go can build it) against the same rows as one Parquet file read with pyarrow, and against
the same table on local disk, in one run.

    .venv/bin/python -m bench.storage_benchmark [--rows 300000] [--out bench-storage.json]

Rows: log lines (``id`` int64, ``level`` of 4 values, ``ts`` timestamp, ``latency`` float64,
``message`` indexed as ``text``: 12 words drawn from a Zipf-distributed vocabulary of 5,000 words,
and a rare word planted in about 18 rows of 300K). Measured:

* bytes: the splits against the Parquet file (pyarrow defaults) of the same rows, and the splits'
  bytes per member (Tantivy file kind, the columnar copy, ...), so the next change knows where to look;
* cold: with an empty split cache, the bytes moved (response bytes counted by the S3 server, so
  every client is seen: Spark's Python workers, pyarrow's S3 filesystem) and the time of a rare-word
  search, a phrase search and an aggregate (count per level), against pyarrow reading the columns
  it needs of the Parquet object on the same server (and checked to count the same rows); and the
  bytes of each kind of split member the query fetched (splits are fetched by the piece,
  ``cache/split_pieces.py``; ``INDEXTABLES_CACHE_FETCH=whole`` measures whole-split fetching);
* warm: the rare-word search with the split cache warm, on S3 and on local disk (best of
  ``3 x --repeat`` runs taken in turns): the goal is S3 within 0.05 s of local disk;
* GCS: the same table on Google Cloud Storage (fake-gcs-server on 127.0.0.1, when Go can build it:
  ``harness.fake_gcs``), each query's cold time (checked to count the same rows) and the warm
  rare-word search in the same turns as S3 and local disk (no bytes: the server counts none).

"Cold" means the split cache is empty (a fresh cache directory per query); the driver's snapshot of
the table may be warm (the log is a few KB here). Nothing is asserted: timings on a shared machine
are noisy.
"""

from __future__ import annotations

import re
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

BUCKET = "indextables-bench"
RARE_WORD = "quetzalcoatl"
RARE_PER_300K = 18
VOCABULARY = 5_000
WORDS_PER_MESSAGE = 12
LEVELS = (("INFO", 0.8), ("WARN", 0.12), ("ERROR", 0.06), ("DEBUG", 0.02))
OPTIONS = {"spark.indextables.indexing.typemap.message": "text"}
_SEGMENT_FILE = re.compile(r"^[0-9a-f]{32}\.(.+)$")


def vocabulary(n: int = VOCABULARY, seed: int = 38) -> list[str]:
    """``n`` distinct lowercase pseudo-words of 2-4 syllables (rank 1 first), none of them the rare word."""
    import numpy as np

    rng = np.random.default_rng(seed)
    consonants, vowels = "bcdfghklmnprstvz", "aeiou"
    words: list[str] = []
    seen = {RARE_WORD}
    while len(words) < n:
        syllables = int(rng.integers(2, 5))
        word = "".join(consonants[rng.integers(16)] + vowels[rng.integers(5)] for _ in range(syllables))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def generate(rows: int, seed: int = 38) -> tuple[Any, dict[str, Any]]:
    """The rows as an Arrow table, and the searches: the rare word, a phrase (two common words in a row)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    words = np.array(vocabulary(seed=seed))
    weights = 1.0 / np.arange(1, len(words) + 1) ** 1.07
    drawn = words[rng.choice(len(words), size=(rows, WORDS_PER_MESSAGE), p=weights / weights.sum())].astype(object)
    planted = rng.choice(rows, size=max(3, rows * RARE_PER_300K // 300_000), replace=False)
    drawn[planted, WORDS_PER_MESSAGE // 2] = RARE_WORD
    messages = [" ".join(m) for m in drawn.tolist()]
    names = [name for name, _ in LEVELS]
    probabilities = [share for _, share in LEVELS]
    start = np.datetime64("2024-05-01T00:00:00", "us").astype(np.int64)
    table = pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "level": pa.array(rng.choice(names, size=rows, p=probabilities)),
            "ts": pa.array(start + rng.integers(0, 4 * 86_400_000_000, size=rows), pa.timestamp("us", tz="UTC")),
            "latency": pa.array(rng.lognormal(3.5, 0.8, size=rows)),
            "message": pa.array(messages),
        }
    )
    return table, {"rare": RARE_WORD, "phrase": f"{words[2]} {words[5]}"}


def run(rows: int = 300_000, repeat: int = 5, workdir: str | None = None) -> dict[str, Any]:
    """Every measurement, as the JSON document ``main`` writes: a moto server with traffic counting
    and a local[2] classic session of its own."""
    from bench.spark_benchmark import local_session
    from harness.fake_gcs import FakeGcsProcess, FakeGcsUnavailable, create_bucket
    from harness.moto_server import MotoServerProcess

    gcs: FakeGcsProcess | None
    try:
        gcs = FakeGcsProcess().start()
    except FakeGcsUnavailable as e:
        print(f"storage: no GCS column ({e})")
        gcs = None
    try:
        if gcs is not None:
            create_bucket(gcs.endpoint, BUCKET)
        with (
            MotoServerProcess(patched=True, count_traffic=True) as server,
            local_session(workdir, "indextables-storage-") as (spark, work),
        ):
            return _measure(spark, server.endpoint_url, rows, repeat, work, gcs.endpoint if gcs else None)
    finally:
        if gcs is not None:
            gcs.stop()


def _s3_options(endpoint_url: str) -> dict[str, Any]:
    return {
        "endpoint_url": endpoint_url,
        "region": "us-east-1",
        "access_key_id": "testing",
        "secret_access_key": "testing",
        "path_style": "true",
    }


def _measure(
    spark: Any, endpoint_url: str, rows: int, repeat: int, work: Path, gcs_endpoint: str | None = None
) -> dict[str, Any]:
    import boto3
    import pyarrow.parquet as pq

    import connect_plugin
    from bench.spark_benchmark import _best_interleaved
    from harness.moto_server import traffic

    s3 = _s3_options(endpoint_url)
    client = boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=BUCKET)
    table, searches = generate(rows)
    parquet_file = work / "logs.parquet"
    pq.write_table(table, parquet_file)
    parquet_key = "parquet/logs.parquet"
    client.upload_file(str(parquet_file), BUCKET, parquet_key)
    frame = spark.read.parquet(str(parquet_file)).repartition(2)  # the same rows, read by Spark's tasks
    local, remote = str(work / "indextables"), f"s3://{BUCKET}/indextables-{uuid.uuid4().hex[:8]}"
    connect_plugin.write(frame, local, mode="overwrite", options=OPTIONS)
    connect_plugin.write(frame, remote, mode="overwrite", options={**OPTIONS, **s3})
    gcs = {"spark.indextables.gcs.endpoint": gcs_endpoint} if gcs_endpoint else {}
    on_gcs = f"gs://{BUCKET}/indextables-{uuid.uuid4().hex[:8]}"
    if gcs:
        connect_plugin.write(frame, on_gcs, mode="overwrite", options={**OPTIONS, **gcs})
    results: dict[str, Any] = {"rows": rows, "searches": searches}
    results["bytes"] = _bytes(local, remote, s3, parquet_file.stat().st_size)

    queries = _queries(spark, searches)
    baselines = _parquet_queries(endpoint_url, f"{BUCKET}/{parquet_key}", searches)
    for query in queries.values():  # Spark's Python workers started, the local table's cache warm
        query(local, {})
    cold: dict[str, Any] = {}
    for name, query in queries.items():
        cache_dir = tempfile.mkdtemp(prefix="cold-", dir=work)
        cache = {"spark.indextables.cache.directoryPath": cache_dir}
        traffic(endpoint_url, reset=True)
        start = time.perf_counter()
        got = query(remote, {**s3, **cache})
        seconds = time.perf_counter() - start
        moved = traffic(endpoint_url, reset=True)
        start = time.perf_counter()
        expected = baselines[name]()
        parquet_seconds = time.perf_counter() - start
        parquet_moved = traffic(endpoint_url, reset=True)
        if got != expected:
            raise SystemExit(f"storage benchmark, {name}: indextables found {got}, the Parquet scan {expected}")
        cold[name] = {
            "result": got,
            "seconds": seconds,
            "bytes_moved": moved["bytes_out"],
            "requests": moved["requests"],
            "parquet_seconds": parquet_seconds,
            "parquet_bytes_moved": parquet_moved["bytes_out"],
            "parquet_requests": parquet_moved["requests"],
            "members": _fetched_members(Path(cache_dir)),
        }
        if gcs:
            cache = {"spark.indextables.cache.directoryPath": tempfile.mkdtemp(prefix="cold-gcs-", dir=work)}
            start = time.perf_counter()
            got = query(on_gcs, {**gcs, **cache})
            cold[name]["gcs_seconds"] = time.perf_counter() - start
            if got != expected:
                raise SystemExit(
                    f"storage benchmark, {name}: indextables on GCS found {got}, the Parquet scan {expected}"
                )
    results["cold"] = cold

    rare = queries["rare-word search"]
    rare(remote, s3), rare(local, {})  # warm the split cache (and each process's snapshot)
    turns = {"s3": lambda: rare(remote, s3), "local": lambda: rare(local, {})}
    if gcs:
        rare(on_gcs, gcs)
        turns["gcs"] = lambda: rare(on_gcs, gcs)
    timed = _best_interleaved(3 * repeat, turns)
    results["warm"] = {
        "s3_s": timed["s3"][0],
        "local_s": timed["local"][0],
        "s3_over_local_s": timed["s3"][0] - timed["local"][0],
    }
    if gcs:
        results["warm"]["gcs_s"] = timed["gcs"][0]
        results["warm"]["gcs_over_local_s"] = timed["gcs"][0] - timed["local"][0]
    return results


def _queries(spark: Any, searches: dict[str, Any]) -> dict[str, Any]:
    """name -> (table path, options) -> result (a count, or sorted (level, count) pairs)."""
    import connect_plugin

    def search(query: str) -> Any:
        def run(path: str, options: dict[str, str]) -> int:
            filter_ = {"op": "query", "query": query, "column": "message"}
            return len(connect_plugin.read(spark, path, columns=["id"], filter=filter_, options=options).collect())

        return run

    def per_level(path: str, options: dict[str, str]) -> list[tuple[str, int]]:
        text = f"SELECT level, count(*) FROM indextables.`{path}` GROUP BY level"
        return sorted((r[0], int(r[1])) for r in connect_plugin.sql(spark, text, options=options).collect())

    return {
        "rare-word search": search(searches["rare"]),
        "phrase search": search(f'"{searches["phrase"]}"'),
        "aggregate: count per level": per_level,
    }


def _parquet_queries(endpoint_url: str, key: str, searches: dict[str, Any]) -> dict[str, Any]:
    """The same questions answered by pyarrow from the Parquet object on the same S3 server (a new
    filesystem per query: nothing cached), reading only the columns each needs."""
    import pyarrow.compute as pc
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    host = endpoint_url.split("://", 1)[1]

    def columns(*names: str) -> Any:
        fs = pafs.S3FileSystem(
            access_key="testing", secret_key="testing", endpoint_override=host, scheme="http", region="us-east-1"
        )
        return pq.read_table(key, filesystem=fs, columns=list(names))

    def contains(words: str) -> Any:
        def run() -> int:
            padded = pc.binary_join_element_wise(" ", columns("message")["message"], " ", "")
            return int(pc.sum(pc.match_substring(padded, f" {words} ")).as_py() or 0)

        return run

    def per_level() -> list[tuple[str, int]]:
        counts = columns("level").group_by("level").aggregate([("level", "count")])
        return sorted(zip(counts["level"].to_pylist(), counts["level_count"].to_pylist(), strict=True))

    return {
        "rare-word search": contains(searches["rare"]),
        "phrase search": contains(searches["phrase"]),
        "aggregate: count per level": per_level,
    }


def _bytes(local: str, remote: str, s3: dict[str, Any], parquet_bytes: int) -> dict[str, Any]:
    """The splits' bytes on S3, the Parquet file's, and the local table's splits' bytes per member."""
    from executor_lib.format.quickwit.bundle import read_footer
    from executor_lib.log.tables import read_snapshot

    remote_files = read_snapshot(remote, **s3).files
    local_files = read_snapshot(local).files
    members: dict[str, int] = defaultdict(int)
    for add in local_files:
        footer = read_footer(Path(local) / add.path)
        for name, (start, end) in footer.files.items():
            match = _SEGMENT_FILE.match(name)
            members[f"*.{match.group(1)}" if match else name] += end - start
        members["(bundle footer)"] += footer.footer_end - footer.footer_start
    split_bytes = sum(a.size for a in remote_files)
    return {
        "splits": len(remote_files),
        "split_bytes": split_bytes,
        "parquet_bytes": parquet_bytes,
        "split_vs_parquet": split_bytes / parquet_bytes,
        "local_split_bytes": sum(a.size for a in local_files),
        "members": dict(sorted(members.items(), key=lambda kv: -kv[1])),
    }


def _fetched_members(cache_dir: Path) -> dict[str, int]:
    """Bytes of each kind of split member a cold query fetched (from the cache's record of the pieces
    it holds, ``cache/split_pieces.py``; a split fetched whole counts as ``(whole splits)``)."""
    import json

    fetched: dict[str, int] = defaultdict(int)
    for state_file in cache_dir.glob("splits/*/pieces.json"):
        for name, ranges in json.loads(state_file.read_text())["present"].items():
            match = _SEGMENT_FILE.match(name)
            fetched[f"*.{match.group(1)}" if match else name] += sum(stop - start for start, stop in ranges)
    for whole in cache_dir.glob("splits/*/data.split"):
        fetched["(whole splits)"] += whole.stat().st_size
    return dict(sorted(fetched.items(), key=lambda kv: -kv[1]))


def print_results(r: dict[str, Any]) -> None:
    b = r["bytes"]
    print(
        f"storage: {r['rows']:,} rows; {b['splits']} splits of {b['split_bytes']:,} B vs Parquet "
        f"{b['parquet_bytes']:,} B ({b['split_vs_parquet']:.2f}x); searches {r['searches']}"
    )
    total = max(1, b["local_split_bytes"])
    print("  split bytes per member (local copy of the same rows):")
    for name, size in b["members"].items():
        print(f"    {name:<28} {size:>14,} B  {100 * size / total:5.1f}%")
    print(
        f"  {'cold (empty split cache)':<28} {'bytes moved':>14} {'vs file':>8} {'time':>8}  "
        f"{'pyarrow bytes':>14} {'time':>8}"
    )
    for name, c in r["cold"].items():
        print(
            f"  {name:<28} {c['bytes_moved']:>14,} {c['bytes_moved'] / b['parquet_bytes']:>7.2f}x "
            f"{c['seconds']:>7.3f}s  {c['parquet_bytes_moved']:>14,} {c['parquet_seconds']:>7.3f}s"
        )
        fetched = ", ".join(f"{name} {size:,}" for name, size in c.get("members", {}).items())
        print(f"    fetched by member: {fetched or '(none)'}")
        if "gcs_seconds" in c:
            print(f"    on GCS (fake-gcs-server): {c['gcs_seconds']:.3f}s cold")
    w = r["warm"]
    print(
        f"  warm rare-word search: S3 {w['s3_s']:.3f} s, local disk {w['local_s']:.3f} s "
        f"({w['s3_over_local_s']:+.3f} s)"
        + (f", GCS {w['gcs_s']:.3f} s ({w['gcs_over_local_s']:+.3f} s)" if "gcs_s" in w else "")
    )


def main(argv: list[str] | None = None) -> int:
    from bench.cli import benchmark_main

    return benchmark_main(argv, __doc__, run, print_results, "bench-storage.json")


if __name__ == "__main__":
    raise SystemExit(main())
