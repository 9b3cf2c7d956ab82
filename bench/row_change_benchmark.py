"""Row-change benchmark (issue 71): DELETE, UPDATE and MERGE INTO beside delta-rs on the same rows.

    .venv/bin/python -m bench.row_change_benchmark [--rows 1000000] [--splits 32] [--repeat 3]

The storage benchmark's rows (``storage_benchmark.generate``: 12 Zipf words a message, one rare word
in about 0.01% of them) are written twice, in ``--splits`` files each: as an IndexTables table
(``format("indextables")``, ``message`` tokenized) and as a Delta table (``deltalake``, the same
Arrow rows), one split (file) per contiguous slice of ids on both sides. Each repeat runs every
statement on a fresh copy of its table and times:

* **ours**: ``IndexTable.delete("message indexquery '<rare word>'")`` (find the splits through the
  index, rewrite only those, one commit), in a local[2] classic session;
* **delta-rs**: ``DeltaTable.delete("id IN (...)")`` of the same rows (delta-rs has no full-text
  index, so it is given their ids: its best case, with min/max skipping on ``id``);
* **full rewrite**: the whole table written again with ``mode("overwrite")`` without those rows, the
  cost a user without DELETE pays;
* **update**: ``update("id < <1% of rows>", set={"level": "'FIXED'"})`` beside ``DeltaTable.update``;
* **merge**: an upsert of a source of 2% of the rows (at least 1,000), half matching, ``merge(...)
  .when_matched_update_all().when_not_matched_insert_all()`` beside ``DeltaTable.merge``.

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
    from deltalake import write_deltalake

    import connect_plugin
    from bench.spark_benchmark import local_session
    from bench.storage_benchmark import generate

    data, searches = generate(rows)
    rare = searches["rare"]
    gone = pc.match_substring(data.column("message"), f" {rare} ").to_pylist()
    ids = [i for i, hit in zip(data.column("id").to_pylist(), gone, strict=True) if hit]
    kept = data.filter(pc.invert(pc.match_substring(data.column("message"), f" {rare} ")))
    options = {"spark.indextables.indexing.typemap.message": "text"}
    out: dict[str, Any] = {"rows": rows, "splits": splits, "deleted": len(ids), "load": os.getloadavg()[0]}
    updated = rows // 100  # UPDATE: the first 1% of ids (one split's share of the table, or less)
    merged = max(1_000, rows // 50)  # MERGE: a source of this many rows, half of them matching
    source = _merge_source(data, rows - merged // 2, merged)
    out["updated"], out["merge source"] = updated, merged
    with local_session(workdir, "indextables-row-change-") as (spark, work):
        seed, delta_seed = work / "seed", work / "delta-seed"
        per = -(-rows // splits)
        for start in range(0, rows, per):  # one split (file) an append on both sides: the same layout
            part = data.slice(start, per)
            connect_plugin.write(spark.createDataFrame(part.to_pandas()).coalesce(1), str(seed), options=options)
            write_deltalake(str(delta_seed), part, mode="append")
        kept_df = spark.createDataFrame(kept.to_pandas()).repartition(splits).cache()
        kept_df.count()
        source_df = spark.createDataFrame(source.to_pandas()).cache()
        source_df.count()
        names = (
            "delete",
            "delete (delta-rs)",
            "full rewrite",
            "update",
            "update (delta-rs)",
            "merge",
            "merge (delta-rs)",
        )
        times: dict[str, list[float]] = {name: [] for name in names}
        for i in range(repeat):
            copies = {name: work / f"{name.replace(' ', '-').strip('()')}-{i}" for name in names}
            for name, target in copies.items():
                shutil.copytree(delta_seed if "delta-rs" in name else seed, target)
            case = _Case(spark, copies, rare, ids, updated, merged, kept_df, source_df, source)
            for name, seconds in case.measure().items():
                times[name].append(seconds)
            out["rewritten splits"] = case.rewritten
        out["seconds"] = {name: min(values) for name, values in times.items()}
    return out


class _Case:
    """One round: each statement on its own fresh copy of the tables, timed."""

    def __init__(
        self,
        spark: Any,
        copies: dict[str, Any],
        rare: str,
        ids: list[int],
        updated: int,
        merged: int,
        kept_df: Any,
        source_df: Any,
        source: Any,
    ) -> None:
        self.spark, self.copies, self.rare, self.ids = spark, copies, rare, ids
        self.updated, self.merged, self.kept_df, self.source_df, self.source = (
            updated,
            merged,
            kept_df,
            source_df,
            source,
        )
        self.rewritten = 0

    def _ours(self, name: str) -> Any:
        from connect_plugin.table import IndexTable

        return IndexTable.for_path(self.spark, str(self.copies[name]))

    def _delta(self, name: str) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(str(self.copies[name]))

    def measure(self) -> dict[str, float]:
        import connect_plugin

        out: dict[str, float] = {}
        t0 = time.perf_counter()
        result = self._ours("delete").delete(f"message indexquery '{self.rare}'").collect()[0]
        out["delete"] = time.perf_counter() - t0
        assert result["numDeletedRows"] == len(self.ids), result
        self.rewritten = result["numRemovedSplits"]
        t0 = time.perf_counter()
        self._delta("delete (delta-rs)").delete(f"id IN ({', '.join(map(str, self.ids))})")
        out["delete (delta-rs)"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        connect_plugin.write(self.kept_df, str(self.copies["full rewrite"]), mode="overwrite")
        out["full rewrite"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        result = self._ours("update").update(f"id < {self.updated}", set={"level": "'FIXED'"}).collect()[0]
        out["update"] = time.perf_counter() - t0
        assert result["numUpdatedRows"] == self.updated, result
        t0 = time.perf_counter()
        self._delta("update (delta-rs)").update(predicate=f"id < {self.updated}", updates={"level": "'FIXED'"})
        out["update (delta-rs)"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        merge = self._ours("merge").merge(self.source_df, "t.id = s.id").when_matched_update_all()
        result = merge.when_not_matched_insert_all().execute().collect()[0]
        out["merge"] = time.perf_counter() - t0
        assert result["numUpdatedRows"] + result["numInsertedRows"] == self.merged, result
        t0 = time.perf_counter()
        delta = self._delta("merge (delta-rs)").merge(self.source, "t.id = s.id", source_alias="s", target_alias="t")
        delta.when_matched_update_all().when_not_matched_insert_all().execute()
        out["merge (delta-rs)"] = time.perf_counter() - t0
        return out


def _merge_source(data: Any, first: int, count: int) -> Any:
    """``count`` rows with ids from ``first`` on (those below the table's last id match it), each a
    changed copy of a row of ``data`` (its message marked)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = data.slice(data.num_rows - count, count)
    ids = pa.array(range(first, first + count), pa.int64())
    messages = pc.binary_join_element_wise(rows.column("message"), pa.scalar("merged"), " ")
    return rows.set_column(0, "id", ids).set_column(rows.schema.get_field_index("message"), "message", messages)


def print_results(results: dict[str, Any]) -> None:
    s = results["seconds"]
    print(
        f"row changes on {results['rows']:,} rows in {results['splits']} splits (load average {results['load']:.2f}): "
        f"DELETE of {results['deleted']:,} rows (one rare word; {results.get('rewritten splits')} splits rewritten), "
        f"UPDATE of {results['updated']:,} (1%), MERGE of {results['merge source']:,} source rows (half matching)"
    )
    for name, value in s.items():
        print(f"  {name:<18} {value:8.2f} s")
    for kind in ("delete", "update", "merge"):
        print(f"  {kind}: ours / delta-rs {s[kind] / s[f'{kind} (delta-rs)']:.2f}x")
    print(f"  delete: ours / full rewrite {s['delete'] / s['full rewrite']:.2f}x")


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
