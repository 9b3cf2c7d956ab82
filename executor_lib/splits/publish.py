"""From Arrow rows to committed-ready add actions: write splits, upload them, merge them.

``write_and_upload`` indexes one batch of rows (one partition) into a split, uploads it
under ``<partition path>/splits/split-<uuid>.split`` and returns the ``AddAction`` that a
commit records (``upload_split`` does the second half for a split already written).
``merge_splits`` turns N splits of one partition into one with all their rows, combining
their Tantivy segments (``splits.merge``): statistics are recomputed and ``numMergeOps`` is
one more than the largest input's.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from executor_lib.cache.split_cache import SplitCache
from executor_lib.errors import ConfigError
from executor_lib.protocol.actions import AddAction
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.merge import MergeSource, merge_sources
from executor_lib.splits.table_search import load_split
from executor_lib.splits.writer import WrittenSplit, write_split
from executor_lib.storage.base import ObjectStore


def partition_path(partition_values: Mapping[str, str | None]) -> str:
    return "".join(f"{k}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}/" for k, v in partition_values.items())


def write_and_upload(
    store: ObjectStore,
    rows: pa.Table,
    mapping: DocMapping,
    partition_values: Mapping[str, str | None] | None = None,
    num_merge_ops: int | None = None,
    heap_bytes: int | None = None,
    threads: int = 1,
) -> AddAction:
    """Index ``rows`` into one split, upload it to the table's store and describe it as an add."""
    with tempfile.TemporaryDirectory(prefix="indextables-write-") as tmp:
        written = write_split(rows, mapping, Path(tmp), heap_bytes, threads)
        return upload_split(store, written, partition_values, num_merge_ops)


def upload_split(
    store: ObjectStore,
    written: WrittenSplit,
    partition_values: Mapping[str, str | None] | None = None,
    num_merge_ops: int | None = None,
) -> AddAction:
    """Upload a written split under its partition's ``splits/`` directory and describe it as an add."""
    partition_values = dict(partition_values or {})
    key = f"{partition_path(partition_values)}splits/{written.path.name}"
    store.put_file(key, str(written.path))
    size = written.path.stat().st_size
    return AddAction(
        path=key,
        partition_values=partition_values,
        size=size,
        modification_time=int(time.time() * 1000),
        data_change=num_merge_ops is None,
        num_records=written.num_records,
        min_values=written.min_values,
        max_values=written.max_values,
        has_footer_offsets=True,
        footer_start_offset=written.footer.footer_start,
        footer_end_offset=written.footer.footer_end,
        uncompressed_size_bytes=written.uncompressed_size,
        num_merge_ops=num_merge_ops,
        doc_mapping_json=written.doc_mapping_json,
    )


def merge_splits(
    store: ObjectStore,
    sources: Sequence[AddAction],
    arrow_schema: pa.Schema,
    doc_mappings: Mapping[str, str | None],
    cache: SplitCache,
) -> AddAction:
    """One split holding every row of ``sources`` (all of one partition and one doc mapping)."""
    if len(sources) < 2:
        raise ConfigError("a merge needs at least two splits")
    partitions = {tuple(sorted(a.partition_values.items())) for a in sources}
    if len(partitions) != 1:
        raise ConfigError(f"splits of different partitions cannot be merged: {sorted(partitions)}")
    mappings = {doc_mappings.get(a.path) for a in sources}
    if len(mappings) != 1 or None in mappings:
        raise ConfigError("splits with different (or unknown) doc mappings cannot be merged")
    mapping_json: Any = mappings.pop()
    inputs = []
    for add in sources:
        searcher = load_split(cache, store, add.path, arrow_schema, mapping_json, add.size)
        inputs.append(MergeSource(searcher.index_dir, searcher.rows, searcher.row_offsets))
    merged_ops = max(a.num_merge_ops or 0 for a in sources) + 1
    with tempfile.TemporaryDirectory(prefix="indextables-merge-") as tmp:
        written = merge_sources(inputs, DocMapping.from_json(mapping_json), Path(tmp))
        return upload_split(store, written, sources[0].partition_values, merged_ops)
