"""The log at scale through Spark (issue 54): what a user's statements cost on a table of many files.

On the scale table ``state_benchmark.scale`` builds (``n`` live files in 1,000 day partitions, the
splits themselves absent) one day also gets ``REAL_SPLITS`` real splits, so a partition-pruned search
runs end to end; a table of 1,000 files built the same way is the baseline. In a new process with a
local Spark session warmed on the baseline table (data source workers started), it times, first run
and best of ``RUNS``:

* ``SELECT count(*)`` (answered by the log's record counts);
* ``DESCRIBE INDEXTABLES STATE``;
* a one-partition search, ``SELECT id ... WHERE day = <day> AND message indexquery <word>``, on the
  scale table and on the baseline (the ratio is the table's size showing through);
* MERGE SPLITS planning (the ``merge_plan`` command planned: its groups, each a task of the merge,
  counted; nothing merged);
* ``PURGE INDEXTABLE ... DRY RUN``.

Run: ``python -m bench --only state --state-sizes 1000000`` (this module is called from
``state_benchmark.run``), or ``python -m bench.state_spark <scale table> <baseline table>``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

REAL_SPLITS = 4
ROWS_PER_SPLIT = 2_000
RUNS = 3
WORD = "needle"


def add_real_partition(uri: str, day: str) -> None:
    """Commit ``REAL_SPLITS`` indexed splits into ``day`` of the table at ``uri`` (rows: id, day, message;
    every 100th message holds ``WORD``)."""
    import executor_lib
    from executor_lib.splits.write.publish import write_and_upload

    log = executor_lib.open_log(uri)
    schema = log.snapshot().arrow_schema()
    data = pa.schema([f for f in schema if f.name != "day"])
    mapping = bench_mapping(schema)
    adds = []
    for s in range(REAL_SPLITS):
        ids = list(range(s * ROWS_PER_SPLIT, (s + 1) * ROWS_PER_SPLIT))
        words = [f"{WORD} w{i % 7}" if i % 100 == 0 else f"w{i % 13} w{i % 7}" for i in ids]
        rows = pa.table({"id": ids, "message": words}, schema=data)
        adds.append(write_and_upload(log.store, rows, mapping, {"day": day}))
    log.commit(adds)


def bench_mapping(schema: pa.Schema) -> Any:
    """The doc mapping of the scale tables' splits: ``message`` a text field (``indexquery`` on it)."""
    from executor_lib.splits.doc_mapping import mapping_for

    return mapping_for(schema, {"spark.indextables.indexing.typemap.message": "text"}, ["day"])


def measure(uri: str, baseline: str, day: str) -> dict[str, Any]:
    """Every timing of the module docstring, in a new process (its JSON on stdout)."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.state_spark", uri, baseline, day], capture_output=True, text=True
    )
    if out.returncode != 0:
        raise RuntimeError(f"bench.state_spark {uri} failed (exit {out.returncode}):\n{out.stderr[-4000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _timed(run: Callable[[], Any]) -> tuple[float, float, Any]:
    """First run, best of ``RUNS``, and the first run's result."""
    times, result = [], None
    for i in range(RUNS):
        start = time.perf_counter()
        got = run()
        times.append(time.perf_counter() - start)
        result = got if i == 0 else result
    return times[0], min(times), result


def _statements(spark: Any, uri: str, day: str) -> dict[str, Callable[[], Any]]:
    import connect_plugin
    from connect_plugin.plan import command_frame
    from indextables_contract import commands as C

    table = f"indextables.`{uri}`"
    search = f"SELECT id FROM {table} WHERE day = '{day}' AND message indexquery '{WORD}'"
    return {
        "count": lambda: connect_plugin.sql(spark, f"SELECT count(*) FROM {table}").collect()[0][0],
        "describe_state": lambda: connect_plugin.sql(spark, f"DESCRIBE INDEXTABLES STATE '{uri}'").collect()[0][2],
        "search": lambda: len(connect_plugin.sql(spark, search).collect()),
        "merge_plan": lambda: command_frame(spark, C.MergePlan(), {"path": uri}).rdd.getNumPartitions(),
        "purge_dry_run": lambda: len(connect_plugin.sql(spark, f"PURGE INDEXTABLE '{uri}' DRY RUN").collect()),
    }


def _main(uri: str, baseline: str, day: str) -> dict[str, Any]:
    import connect_plugin

    spark = connect_plugin.local_session()
    try:
        for run in _statements(spark, baseline, day).values():  # the session and its workers warm
            run()
        out: dict[str, Any] = {}
        for name, run in _statements(spark, uri, day).items():
            try:
                out[f"{name}_first_s"], out[f"{name}_s"], out[f"{name}_result"] = _timed(run)
            except Exception as e:  # reported, and the other statements still measured
                out[f"{name}_error"] = f"{type(e).__name__}: {_first_line(e)}"
        base = _timed(_statements(spark, baseline, day)["search"])
        out["baseline_search_first_s"], out["baseline_search_s"], out["baseline_search_result"] = base
        return out
    finally:
        spark.stop()


def _first_line(error: Exception) -> str:
    """The line of a (Py4J) error's text that names what went wrong."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    named = [line for line in lines if "Error" in line or "Exception" in line]
    return (named or lines or [""])[-1 if named else 0][:300]


if __name__ == "__main__":
    print(json.dumps(_main(*sys.argv[1:4])))
