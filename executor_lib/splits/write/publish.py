"""From Arrow rows to committed-ready add actions: write splits, upload them, merge them.

``write_and_upload`` indexes one batch of rows (one partition) into a split, uploads it
under ``<partition path>/splits/split-<uuid>.split`` and returns the ``AddAction`` that a
commit records (``upload_split`` does the second half for a split already written).
``merge_splits`` turns N splits of one partition into one with all their rows, combining
their Tantivy segments (``splits.write.merge``): statistics are recomputed and ``numMergeOps`` is
one more than the largest input's. ``merge_splits_sorted`` turns them into level-1 splits of a
sort key (``splits.write.merge_plan``): rows sorted by the key, cut at the target size, tagged.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from executor_lib.cache.split_cache import SplitCache
from executor_lib.format.quickwit.bundle import check_member_crcs, read_footer
from executor_lib.protocol.actions import AddAction
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.search.split_opening import load_split
from executor_lib.splits.write.merge import MergeSource, merge_sources, sort_and_cut
from executor_lib.splits.write.merge_plan import SORT_KEY_TAG
from executor_lib.splits.write.writer import WrittenSplit, write_split
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import ConfigError, CorruptSplitError


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
    tags: Mapping[str, str] | None = None,
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
        tags=dict(tags) if tags else None,
    )


def merge_splits(
    store: ObjectStore,
    sources: Sequence[AddAction],
    arrow_schema: pa.Schema,
    doc_mappings: Mapping[str, str | None],
    cache: SplitCache,
) -> AddAction:
    """One split holding every row of ``sources`` (all of one partition and one doc mapping)."""
    mapping_json = _one_mapping(sources, doc_mappings)
    if any(a.companion_source_files is not None for a in sources):
        return _merge_companion(store, sources, mapping_json, cache)
    inputs = _merge_inputs(store, sources, arrow_schema, mapping_json, cache)
    with tempfile.TemporaryDirectory(prefix="indextables-merge-") as tmp:
        written = merge_sources(inputs, DocMapping.from_json(mapping_json), Path(tmp))
        return upload_split(store, written, sources[0].partition_values, _merged_ops(sources))


def _merge_companion(
    store: ObjectStore, sources: Sequence[AddAction], mapping_json: str, cache: SplitCache
) -> AddAction:
    """Companion splits merged (``companion.merge_companion``); the add carries the companion fields as
    IndexTables4Spark's ``MergeSplitsCommand`` sets them: the sources' files (distinct, in order), the
    highest source version, the first fast field mode."""
    from executor_lib.protocol.companion_tags import merged_pin_tags
    from executor_lib.splits.write.companion import merge_companion

    if any(a.companion_source_files is None for a in sources):
        raise ConfigError("merge: companion splits cannot be merged with splits that are not")
    with tempfile.TemporaryDirectory(prefix="indextables-merge-") as tmp:
        paths = [_split_file(store, a, cache) for a in sources]
        written = merge_companion(paths, DocMapping.from_json(mapping_json), Path(tmp))
        add = upload_split(store, written, sources[0].partition_values, _merged_ops(sources))
    versions = [a.companion_delta_version for a in sources if a.companion_delta_version is not None]
    return dataclasses.replace(
        add,
        companion_source_files=tuple(dict.fromkeys(f for a in sources for f in a.companion_source_files or ())),
        companion_delta_version=max(versions) if versions else None,
        companion_fast_field_mode=next(
            (a.companion_fast_field_mode for a in sources if a.companion_fast_field_mode), None
        ),
        tags={**(add.tags or {}), **merged_pin_tags(sources)} or add.tags,
    )


def _split_file(store: ObjectStore, add: AddAction, cache: SplitCache) -> Path:
    """The split of ``add`` as a local file: where it is (a local table), else its cached copy."""
    in_place = store.local_path(add.path)
    if in_place is not None and (add.size is None or in_place.stat().st_size == add.size):
        return Path(in_place)
    return Path(cache.get(store, add.path, add.size, verify=True).split)  # a damaged copy is never merged


def merge_splits_sorted(
    store: ObjectStore,
    sources: Sequence[AddAction],
    arrow_schema: pa.Schema,
    doc_mappings: Mapping[str, str | None],
    cache: SplitCache,
    sort_key: str,
    target_bytes: int,
) -> list[AddAction]:
    """The rows of ``sources`` sorted by ``sort_key`` as level-1 splits of about ``target_bytes``
    each, cut only where the key changes and tagged ``indextables.sortKey``. Memory: the group's
    rows as Arrow, once."""
    mapping_json = _one_mapping(sources, doc_mappings)
    inputs = _merge_inputs(store, sources, arrow_schema, mapping_json, cache)
    rows = sum(i.rows.num_rows for i in inputs)
    rows_per_split = max(1, target_bytes * rows // max(1, sum(a.size for a in sources)))
    mapping = DocMapping.from_json(mapping_json)
    uploaded: list[AddAction] = []
    with tempfile.TemporaryDirectory(prefix="indextables-merge-") as tmp:
        try:
            for written in sort_and_cut(inputs, mapping, Path(tmp), sort_key, rows_per_split):
                tags = {SORT_KEY_TAG: sort_key}
                uploaded.append(upload_split(store, written, sources[0].partition_values, _merged_ops(sources), tags))
                written.path.unlink(missing_ok=True)
        except BaseException:
            for add in uploaded:
                store.delete(add.path)
            raise
    return uploaded


def _one_mapping(sources: Sequence[AddAction], doc_mappings: Mapping[str, str | None]) -> str:
    if len(sources) < 2:
        raise ConfigError("a merge needs at least two splits")
    partitions = {tuple(sorted(a.partition_values.items())) for a in sources}
    if len(partitions) != 1:
        raise ConfigError(f"splits of different partitions cannot be merged: {sorted(partitions)}")
    mappings = {doc_mappings.get(a.path) for a in sources}
    if len(mappings) != 1 or None in mappings:
        raise ConfigError("splits with different (or unknown) doc mappings cannot be merged")
    mapping_json: Any = mappings.pop()
    return str(mapping_json)


def _merge_inputs(
    store: ObjectStore, sources: Sequence[AddAction], arrow_schema: pa.Schema, mapping_json: str, cache: SplitCache
) -> list[MergeSource]:
    inputs = []
    for add in sources:
        in_place = store.local_path(add.path)  # a local table's split is read where it is, not copied
        if in_place is not None and (add.size is None or in_place.stat().st_size == add.size):
            split, cached = in_place, False
        else:
            split, cached = cache.get(store, add.path, add.size, verify=True).split, True  # the cached copy checked
        try:
            check_member_crcs(Path(split), read_footer(Path(split)), store.uri_of(add.path))  # never merge damage
            source = MergeSource.from_bundle(split)
        except CorruptSplitError as e:
            if cached:
                cache.discard(store, add.path)
            dropped = "; its cached copy was dropped" if cached else ""
            raise CorruptSplitError(f"{store.uri_of(add.path)}: {e}{dropped}") from e
        if source is None:  # an IndexTables4Spark split: merged from its transcoded version
            searcher = load_split(cache, store, add.path, arrow_schema, mapping_json, add.size)
            transcoded = MergeSource.from_bundle(searcher.bundle) if searcher.bundle is not None else None
            if transcoded is None:
                raise CorruptSplitError(f"{store.uri_of(add.path)}: its transcoded version was not kept")
            source = transcoded
        elif add.min_values is not None and add.max_values is not None:  # the merged statistics need no rows
            source = dataclasses.replace(source, stats=(add.min_values, add.max_values))
        inputs.append(source)
    return inputs


def _merged_ops(sources: Sequence[AddAction]) -> int:
    return max(a.num_merge_ops or 0 for a in sources) + 1
