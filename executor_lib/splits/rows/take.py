"""Rows of a split by row number (``take_rows``): what a search's hits read, from an Arrow table, a
columnar copy or a companion split's source files."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from executor_lib.arrow_arrays import as_numpy, numbers
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.rows.columnar import RowCopy
from executor_lib.splits.rows.companion import CompanionRows


def take_rows(rows: pa.Table | RowCopy | CompanionRows, ids: pa.Array) -> pa.Table:
    """``rows.take(ids)``, fast for ascending ``ids`` (what ``SplitSearcher.row_ids`` returns).
    A ``ColumnarCopy`` (or ``PartedCopy``) reads only the batches holding ``ids``.

    A columnar copy is a table of many record batches, and Arrow's ``take`` over such a table first
    joins each column's chunks: a query returning 20 rows of a split copied its whole message column
    (1.2 ms a split; a scan's ``take`` of every row, 29 ms). Here a run of consecutive rows is a
    zero-copy slice, and other ascending ids are taken from each batch that holds some of them.

    Example: ``take_rows(searcher.rows, pa.array([3, 4, 5], pa.uint64()))`` is ``searcher.rows.slice(3, 3)``.
    """
    if not isinstance(rows, pa.Table):  # a ColumnarCopy, or a companion split's CompanionRows
        return rows.take(ids)
    n = len(ids)
    if n == 0:
        return rows.slice(0, 0)
    wanted = as_numpy(ids).astype(np.int64, copy=False)
    if n > 1 and not bool(np.all(wanted[1:] > wanted[:-1])):
        return rows.take(ids)
    if wanted[0] < 0 or wanted[-1] >= rows.num_rows:
        return rows.take(ids)  # Arrow names the bad index
    if wanted[-1] - wanted[0] == n - 1:
        return rows.slice(int(wanted[0]), n)
    batches = rows.to_batches()
    if len(batches) <= 1:
        return rows.take(ids)
    starts = np.cumsum([0] + [b.num_rows for b in batches[:-1]])
    bounds = np.searchsorted(wanted, np.append(starts, rows.num_rows))  # ids of batch c: bounds[c]:bounds[c+1]
    parts = [
        batches[c].take(numbers(wanted[bounds[c] : bounds[c + 1]] - starts[c], pa.int64()))
        for c in range(len(batches))
        if bounds[c + 1] > bounds[c]
    ]
    return pa.Table.from_batches(parts, schema=rows.schema)


def rows_schema(stored: pa.Schema, mapping: DocMapping, schema: pa.Schema) -> pa.Schema:
    """The rows' schema: the copy's columns, and index-only columns (values not stored, read as
    nulls), in the mapping's order."""
    fields = []
    for f in mapping.fields:
        if f.name in stored.names:
            fields.append(stored.field(f.name))
        else:
            fields.append(pa.field(f.name, schema.field(f.name).type if f.name in schema.names else pa.null()))
    return pa.schema(fields)
