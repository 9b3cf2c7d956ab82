"""Row-change benchmark (issue 71): a DELETE of one rare word's rows beside delta-rs and a full rewrite.

    .venv/bin/python -m bench.row_change_benchmark [--rows 1000000] [--splits 32] [--repeat 3]

The storage benchmark's rows (``storage_benchmark.generate``: 12 Zipf words a message, one rare word
in about 0.01% of them) are written twice, in ``--splits`` files each: as an IndexTables table
(``format("indextables")``, ``message`` tokenized) and as a Delta table (``deltalake``, the same
Arrow rows). Each repeat starts from fresh copies of both tables, then times:

* **ours**: ``IndexTable.delete("message indexquery '<rare word>'")`` (find the splits through the
  index, rewrite only those, one commit), in a local[2] classic session;
* **delta-rs**: ``DeltaTable.delete("id IN (...)")`` of the same rows (delta-rs has no full-text
  index, so it is given their ids: its best case, with min/max skipping on ``id``);
* **full rewrite**: the whole table written again with ``mode("overwrite")`` without those rows, the
  cost a user without DELETE pays.

Best of ``--repeat``, printed as seconds and ratios (ours / delta-rs, ours / full rewrite) with the
load average; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
from typing import Any


def run(rows: int = 1_000_000, splits: int = 32, repeat: int = 3, workdir: str | None = None) -> dict[str, Any]:
    import pyarrow.compute as pc
    from deltalake import DeltaTable, write_deltalake

    import connect_plugin
    from bench.spark_benchmark import local_session
    from bench.storage_benchmark import generate
    from connect_plugin.table import IndexTable

    data, searches = generate(rows)
    rare = searches["rare"]
    gone = pc.match_substring(data.column("message"), f" {rare} ").to_pylist()
    ids = [i for i, hit in zip(data.column("id").to_pylist(), gone, strict=True) if hit]
    kept = data.filter(pc.invert(pc.match_substring(data.column("message"), f" {rare} ")))
    options = {"spark.indextables.indexing.typemap.message": "text"}
    out: dict[str, Any] = {"rows": rows, "splits": splits, "deleted": len(ids), "load": os.getloadavg()[0]}
    with local_session(workdir, "indextables-row-change-") as (spark, work):
        df = spark.createDataFrame(data.to_pandas()).repartition(splits).cache()
        df.count()
        seed = work / "seed"
        connect_plugin.write(df, str(seed), options=options)
        delta_seed = work / "delta-seed"
        per = -(-rows // splits)
        for start in range(0, rows, per):  # one file an append: the same number of files as splits
            write_deltalake(str(delta_seed), data.slice(start, per), mode="append")
        kept_df = spark.createDataFrame(kept.to_pandas()).repartition(splits).cache()
        kept_df.count()
        times: dict[str, list[float]] = {"ours": [], "delta-rs": [], "full rewrite": []}
        for i in range(repeat):
            ours, delta, full = work / f"t{i}", work / f"d{i}", work / f"f{i}"
            for source, target in ((seed, ours), (seed, full), (delta_seed, delta)):
                shutil.copytree(source, target)
            t0 = time.perf_counter()
            result = IndexTable.for_path(spark, str(ours)).delete(f"message indexquery '{rare}'").collect()[0]
            times["ours"].append(time.perf_counter() - t0)
            assert result["numDeletedRows"] == len(ids), result
            out["rewritten splits"] = result["numRemovedSplits"]
            t0 = time.perf_counter()
            DeltaTable(str(delta)).delete(f"id IN ({', '.join(map(str, ids))})")
            times["delta-rs"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            connect_plugin.write(kept_df, str(full), mode="overwrite", options=options)
            times["full rewrite"].append(time.perf_counter() - t0)
        out["seconds"] = {name: min(values) for name, values in times.items()}
    return out


def print_results(results: dict[str, Any]) -> None:
    s = results["seconds"]
    print(
        f"row changes: DELETE of {results['deleted']:,} rows (one rare word) of {results['rows']:,} in "
        f"{results['splits']} splits, {results.get('rewritten splits')} splits rewritten "
        f"(load average {results['load']:.2f})"
    )
    for name in ("ours", "delta-rs", "full rewrite"):
        print(f"  {name:<13} {s[name]:8.2f} s")
    print(
        f"  ours / delta-rs {s['ours'] / s['delta-rs']:.2f}x; ours / full rewrite {s['ours'] / s['full rewrite']:.2f}x"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.row_change_benchmark", description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--splits", type=int, default=32)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workdir", default=None, help="where the tables go (default: a temporary directory)")
    args = p.parse_args(argv)
    print_results(run(args.rows, args.splits, args.repeat, args.workdir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
