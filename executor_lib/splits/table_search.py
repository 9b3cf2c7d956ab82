"""Searching a whole table in one process (no Spark): every live split, through a local work dir.

Each live split is fetched from the table's store once into ``work_dir`` (atomic: temp file
then rename) and searched with ``SplitSearcher``; partition columns are added from the
split's partition values. The NVMe split cache with byte budgets and cross-process download
coordination is a later milestone; this is the single-process path the CLI uses.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from executor_lib.log.snapshot import Snapshot
from executor_lib.splits.searcher import QueryError, SplitSearcher
from executor_lib.storage.base import ObjectStore


def fetch_split(store: ObjectStore, key: str, work_dir: Path) -> Path:
    """The split's local copy under ``work_dir`` (downloaded once, atomically)."""
    local = work_dir / "splits" / hashlib.sha256(store.uri_of(key).encode()).hexdigest()[:32] / "data.split"
    if not local.exists():
        local.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=local.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(store.read(key))
        os.replace(tmp, local)
    return local


def search_table(
    store: ObjectStore,
    snapshot: Snapshot,
    query: str | None,
    work_dir: Path,
    columns: Sequence[str] | None = None,
    limit: int | None = None,
) -> pa.Table:
    """Rows of every live split matching ``query`` (Tantivy syntax), up to ``limit`` in total."""
    schema = snapshot.arrow_schema()
    partition_columns = list(snapshot.partition_columns)
    wanted = list(columns) if columns is not None else schema.names
    unknown = [c for c in wanted if c not in schema.names]
    if unknown:
        raise QueryError(f"columns {unknown} are not in the table (columns: {schema.names})")
    data_columns = [c for c in wanted if c not in partition_columns]
    parts: list[pa.Table] = []
    remaining = limit
    for add in sorted(snapshot.files, key=lambda a: a.path):
        if remaining is not None and remaining <= 0:
            break
        local = fetch_split(store, add.path, work_dir)
        searcher = SplitSearcher(local, local.parent, schema, snapshot.doc_mapping(add))
        rows = searcher.search(query, data_columns, remaining)
        for column in partition_columns:
            if column in wanted:
                value = pa.scalar(add.partition_values.get(column)).cast(schema.field(column).type)
                rows = rows.append_column(schema.field(column), pa.array([value.as_py()] * rows.num_rows, value.type))
        parts.append(rows.select(wanted))
        if remaining is not None:
            remaining -= rows.num_rows
    if not parts:
        return schema.empty_table().select(wanted)
    return pa.concat_tables(parts)
