"""How a read task's rows reach Spark: batches joined to a target size that starts small and grows
(``coalesced``: a ``limit(1)`` or ``show()`` ends the task after its first), each flushed to the JVM
at once through the Python worker's own output stream (``SparkOutput``), which otherwise holds
them in a 64 KB buffer until the task ends (docs/notes/pyspark-python-datasource.md).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

BATCH_ROWS = 65_536  # rows of a batch a read task sends to Spark
FIRST_BATCH_ROWS = 32  # rows a read task sends first (then 4x more each time, up to BATCH_ROWS); show() takes 21


def coalesced(batches: Iterator[pa.RecordBatch], rows: int, first: int | None = None) -> Iterator[pa.RecordBatch]:
    """``batches`` with runs of small ones joined: each batch a task sends is a round trip to the JVM
    (1-10 ms under load), and a selective search yields a few rows per split. What is held goes out
    once it reaches the target, which starts at ``first`` rows (default ``rows``) and grows 4x with
    each batch sent, up to ``rows``; and before a batch that would take it past ``rows``. Holds at
    most ``rows`` rows back.

    Example: ``coalesced(iter([b1, b2]), 65_536)`` yields one batch of ``b1``'s and ``b2``'s rows
    (fewer than 65,536 rows in all).
    """
    target = rows if first is None else max(1, min(first, rows))
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        if held and held + batch.num_rows > rows:
            yield from _joined(pending)
            pending, held, target = [], 0, min(rows, target * 4)
        pending.append(batch)
        held += batch.num_rows
        if held >= target:
            yield from _joined(pending)
            pending, held, target = [], 0, min(rows, target * 4)
    if pending:
        yield from _joined(pending)


class SparkOutput:
    """The stream a PySpark worker writes a read task's Arrow batches to, flushed on request.

    PySpark 4.3's worker writes the batches ``read`` yields into a buffered socket (64 KB) and flushes
    it only when the task ends (unless ``spark.python.udf.pipelined.enabled``, a cluster setting):
    a small first batch would wait there while the task reads on, and a ``limit(1)`` would wait
    with it. Its serializer's ``dump_stream`` frame, which drives ``read`` and has just written the
    last batch when ``read`` resumes, names the stream ``stream``; found once, from ``read``'s
    caller frames. Outside a PySpark worker (or if the frame is not found) flushing does nothing.
    """

    def __init__(self) -> None:
        self._stream: Any = None
        self._looked = False

    def flush(self) -> None:
        if not self._looked:
            self._looked = True
            self._stream = dump_stream_output(sys._getframe(1))
        if self._stream is not None:
            with contextlib.suppress(OSError, ValueError):
                self._stream.flush()


def dump_stream_output(frame: Any) -> Any:
    """The ``stream`` of the nearest ``dump_stream`` frame at or above ``frame`` (None if none)."""
    while frame is not None:
        if frame.f_code.co_name == "dump_stream" and "pyspark" in frame.f_code.co_filename:
            stream = frame.f_locals.get("stream")
            return stream if callable(getattr(stream, "flush", None)) else None
        frame = frame.f_back
    return None


def _joined(batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    if len(batches) == 1:
        return batches
    return pa.Table.from_batches(batches).combine_chunks().to_batches()
