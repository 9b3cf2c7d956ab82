"""One writer process of this project for ``test_two_writers.py``: appends small batches to a table with
this project's own write path (``executor_lib``: a split indexed and uploaded, then ``TransactionLog.commit``)
in a process of its own, no Spark.

    python -m tests.jvm.two_writers_child TABLE WRITER FIRST_ID BATCHES ROWS [--seconds S] [--checkpoint-after N]

It prints ``ready`` once its imports are done and the table is open, waits for one line on stdin (the
start, given to every writer at the same moment), then appends batch after batch, at most BATCHES and
none started later than ``--seconds`` after the start, printing one JSON line for each: ``{"batch": k,
"version": v}`` when the commit returned (acknowledged), or ``{"batch": k, "error": "<type>: <message>"}``
when it raised. ``--checkpoint-after N`` writes a checkpoint after batch N (``{"checkpoint": version}`` or
``{"checkpoint_error": ...}``). Last, ``{"stats": ...}``: the log's commit counts (lost races among them)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import pyarrow as pa

from executor_lib.log.tables import open_log
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.write.publish import write_and_upload
from indextables_contract import settings as S

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.string()), ("batch", pa.int32()), ("msg", pa.string())])
PARTITION = "side"
OPTIONS = {S.INDEXING_TYPEMAP.prefix + "msg": "text"}


def batch_rows(writer: str, first_id: int, batch: int, rows: int) -> pa.Table:
    """Batch ``batch`` of ``writer``: ids ``first_id + batch * rows`` on, unique across writers."""
    start = first_id + batch * rows
    ids = list(range(start, start + rows))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "writer": [writer] * rows,
            "batch": pa.array([batch] * rows, pa.int32()),
            "msg": [f"two writers {writer} batch {batch} row {i}" for i in ids],
        },
        schema=SCHEMA,
    )


def say(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table")
    parser.add_argument("writer")
    parser.add_argument("first_id", type=int)
    parser.add_argument("batches", type=int)
    parser.add_argument("rows", type=int)
    parser.add_argument("--side", default="ours")
    parser.add_argument("--seconds", type=float, default=float("inf"))
    parser.add_argument("--checkpoint-after", type=int, default=None)
    args = parser.parse_args(argv)
    log = open_log(args.table)
    mapping = mapping_for(SCHEMA, OPTIONS)
    print("ready", flush=True)
    sys.stdin.readline()
    deadline = time.monotonic() + args.seconds
    for k in range(args.batches):
        if time.monotonic() > deadline:
            break
        try:
            add = write_and_upload(
                log.store, batch_rows(args.writer, args.first_id, k, args.rows), mapping, {PARTITION: args.side}
            )
            say({"batch": k, "version": log.commit([add], operation="WRITE", new_files=True)})
        except Exception as e:  # reported, and the test decides: an error is never an acknowledged commit
            say({"batch": k, "error": f"{type(e).__name__}: {e}"})
        if args.checkpoint_after == k:
            try:
                say({"checkpoint": log.checkpoint().version})
            except Exception as e:
                say({"checkpoint_error": f"{type(e).__name__}: {e}"})
    say({"stats": log.commit_stats})
    return 0


if __name__ == "__main__":
    sys.exit(main())
