"""MERGE SPLITS planning: which small splits of a partition to merge into one.

Per partition (and doc mapping: splits indexed differently are never merged together), splits
below ``skip_fraction`` of the target size are packed, smallest first, into groups whose total
stays within the target size; a group needs at least two splits and at most
``max_sources_per_merge``. At most ``max_dest_splits`` groups are planned, largest savings
(most sources) first. Splits already close to the target are left alone.

With a sort key (``plan_sorted_merges``, MERGE SPLITS ... SORT BY, ``spark.indextables.merge.sortKey``)
the policy is an LSM's over that key's range (as in ``shared/reference/004``'s key spaces):

* **level 1** splits are those a sorted merge wrote (tag ``indextables.sortKey`` = the key): within
  a partition and doc mapping they cover non-overlapping ranges of the key, each about the target
  size, so a range query on the key prunes by min/max statistics to the few splits it needs;
* **level 0** splits are everything else (fresh writes and micro-batches; their ranges overlap);
* a merge takes every level-0 split of a bucket plus the level-1 splits whose range overlaps the
  level-0 splits' hull (from the lowest minimum to the highest maximum), sorts their rows by the
  key and cuts them into level-1 splits of the target size at key changes (never inside a run of
  equal keys), so level 1 stays non-overlapping. It runs when a bucket has at least two level-0
  splits, or one that overlaps level 1.

Write amplification: a row is rewritten once when it leaves level 0, and again only when a later
merge's level-0 hull overlaps its level-1 split. For keys that grow with time (event timestamps),
new rows overlap at most the newest level-1 split, so a row is rewritten about twice in all; keys
spread uniformly over the whole range rewrite the bucket's level 1 on each merge (the price of
non-overlapping ranges: merge less often, with more level-0 splits at a time).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.log.files.live_files import partition_strings
from executor_lib.log.files.partition_index import combinations
from executor_lib.log.files.pruning import stats_bounds
from executor_lib.protocol.actions import AddAction
from indextables_contract.commands import MERGE_TARGET_SIZE
from indextables_contract.errors import ConfigError
from indextables_contract.settings import size

DEFAULT_TARGET_BYTES = size(MERGE_TARGET_SIZE)  # MERGE SPLITS without a target size
SKIP_FRACTION = 0.9
SORT_KEY_TAG = "indextables.sortKey"  # on splits a sorted merge wrote: their level-1 key


@dataclass(frozen=True)
class MergeGroup:
    partition_values: dict[str, str | None]
    sources: tuple[AddAction, ...]
    sort_key: str | None = None  # set: rows are sorted by it and cut into level-1 splits

    @property
    def size(self) -> int:
        return sum(a.size for a in self.sources)


def plan_merges(
    files: Iterable[AddAction],
    doc_mapping: Callable[[AddAction], str | None],
    target_bytes: int = DEFAULT_TARGET_BYTES,
    max_dest_splits: int | None = None,
    max_sources_per_merge: int | None = None,
    min_splits: int = 2,
) -> list[MergeGroup]:
    """Size-tiered groups (module docstring); a bucket with fewer than ``min_splits`` splits below the
    target is left alone (``spark.indextables.mergeOnWrite.minSplitsToMerge``)."""
    _check_merge_limits(target_bytes, max_sources_per_merge)
    buckets: dict[tuple[object, ...], list[AddAction]] = defaultdict(list)
    for add in files:
        if add.size < target_bytes * SKIP_FRACTION:
            buckets[(tuple(sorted(add.partition_values.items())), doc_mapping(add))].append(add)
    groups: list[MergeGroup] = []
    for _, adds in sorted(buckets.items(), key=lambda kv: str(kv[0])):
        if len(adds) >= min_splits:
            groups += _pack(sorted(adds, key=lambda a: (a.size, a.path)), target_bytes, max_sources_per_merge)
    groups.sort(key=lambda g: (-len(g.sources), g.size))
    return groups[:max_dest_splits] if max_dest_splits is not None else groups


def _check_merge_limits(target_bytes: int, max_sources_per_merge: int | None) -> None:
    if target_bytes <= 0:
        raise ConfigError(f"merge: target size must be positive, got {target_bytes}")
    if max_sources_per_merge is not None and max_sources_per_merge < 2:
        raise ConfigError(f"merge: MAX SOURCE SPLITS PER MERGE must be at least 2, got {max_sources_per_merge}")


def _pack(adds: Sequence[AddAction], target: int, max_sources: int | None) -> list[MergeGroup]:
    groups: list[MergeGroup] = []
    current: list[AddAction] = []
    size = 0
    for add in adds:
        full = (max_sources is not None and len(current) >= max_sources) or (current and size + add.size > target)
        if full:
            if len(current) >= 2:
                groups.append(MergeGroup(dict(current[0].partition_values), tuple(current)))
            current, size = [], 0
        current.append(add)
        size += add.size
    if len(current) >= 2:
        groups.append(MergeGroup(dict(current[0].partition_values), tuple(current)))
    return groups


def level_of(add: AddAction, sort_key: str) -> int:
    """1 for a split a merge sorted by ``sort_key`` wrote, else 0."""
    return 1 if (add.tags or {}).get(SORT_KEY_TAG) == sort_key else 0


def plan_sorted_merges(
    files: Iterable[AddAction],
    doc_mapping: Callable[[AddAction], str | None],
    sort_key: str,
    key_type: str | None,
    max_dest_splits: int | None = None,
    min_splits: int = 2,
) -> list[MergeGroup]:
    """The LSM policy of the module docstring: per partition and doc mapping, at most one group
    (level 0 plus the overlapping level 1), largest first; ``key_type`` is the key's Spark type. A
    bucket with fewer than ``min_splits`` level-0 splits waits (unless one overlaps level 1 and
    ``min_splits`` is at most 2, the on-demand default)."""
    buckets: dict[tuple[object, ...], list[AddAction]] = defaultdict(list)
    for add in files:
        buckets[(tuple(sorted(add.partition_values.items())), doc_mapping(add))].append(add)
    groups = []
    for _, adds in sorted(buckets.items(), key=lambda kv: str(kv[0])):
        sources = _level0_and_overlapping_level1(adds, sort_key, key_type, min_splits)
        if sources:
            groups.append(MergeGroup(dict(sources[0].partition_values), tuple(sources), sort_key))
    groups.sort(key=lambda g: (-len(g.sources), g.size))
    return groups[:max_dest_splits] if max_dest_splits is not None else groups


def _level0_and_overlapping_level1(
    adds: Sequence[AddAction], sort_key: str, key_type: str | None, min_splits: int
) -> list[AddAction]:
    level0 = sorted((a for a in adds if level_of(a, sort_key) == 0), key=lambda a: a.path)
    if not level0 or (min_splits > 2 and len(level0) < min_splits):
        return []
    bounds = [stats_bounds(a, sort_key, key_type) for a in level0]
    lows = [low for low, _ in bounds if low is not None]
    highs = [high for _, high in bounds if high is not None]
    overlapping = []
    if lows and highs:
        hull_low, hull_high = min(lows), max(highs)
        for add in sorted((a for a in adds if level_of(a, sort_key) == 1), key=lambda a: a.path):
            low, high = stats_bounds(add, sort_key, key_type)
            if low is None or high is None or (low <= hull_high and high >= hull_low):
                overlapping.append(add)
    if len(level0) < 2 and not overlapping:
        return []
    return [*level0, *overlapping]


@dataclass(frozen=True)
class PlannedMerge:
    """A size-tiered merge group (``plan_merges_columns``): ``count`` sources of ``size`` bytes in
    all, the first (the smallest; then by path) ``first``. A path is live in one partition, so
    ``first`` names the group within its table version; ``paths`` materializes its sources' paths."""

    partition_values: dict[str, str | None]
    first: str
    count: int
    size: int
    members: pa.Array = field(repr=False, compare=False)  # the sources' paths, as planned

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(self.members.to_pylist())


def plan_merges_columns(
    files: Any,
    partition_columns: Sequence[str],
    target_bytes: int = DEFAULT_TARGET_BYTES,
    max_dest_splits: int | None = None,
    max_sources_per_merge: int | None = None,
    min_splits: int = 2,
) -> list[PlannedMerge]:
    """``plan_merges`` over the live files as Arrow columns (``path``, ``size``, ``partition_values``
    and ``mapping``, each file's doc mapping text), with no object per file: the same groups, in the
    same order, as ``plan_merges`` over their actions (a file's bucket: its values of the partition
    columns, a missing one as null, and its mapping).

    Example: ``plan_merges_columns(table, ["day"], 1 << 30)``
    """
    _check_merge_limits(target_bytes, max_sources_per_merge)
    small = files.filter(pc.less(files.column("size"), target_bytes * SKIP_FRACTION))
    if not small.num_rows:
        return []
    keys = partition_strings(small.column("partition_values"), partition_columns)
    buckets, bucket_of = combinations([*keys.values(), small.column("mapping")], small.num_rows)
    rank = np.empty(len(buckets), dtype=np.int64)  # the order plan_merges visits buckets in (by str of its key)
    values_of = [dict(zip(partition_columns, b[:-1], strict=True)) for b in buckets]
    names = [str((tuple(sorted(v.items())), b[-1])) for v, b in zip(values_of, buckets, strict=True)]
    rank[sorted(range(len(buckets)), key=names.__getitem__)] = np.arange(len(buckets))
    ordered = pa.table({"rank": rank[bucket_of], "size": small.column("size"), "path": small.column("path")})
    ordered = ordered.take(
        pc.sort_indices(ordered, [("rank", "ascending"), ("size", "ascending"), ("path", "ascending")])
    )
    by_rank = {int(r): i for i, r in enumerate(rank)}
    groups: list[PlannedMerge] = []
    ranks = ordered.column("rank").to_numpy()
    sizes = ordered.column("size").to_numpy().astype(np.int64)
    paths = ordered.column("path").combine_chunks()
    edges = np.flatnonzero(np.diff(ranks)) + 1  # where a bucket starts after the first
    for start, end in zip([0, *edges.tolist()], [*edges.tolist(), len(ranks)], strict=True):
        if end - start >= min_splits:
            values = values_of[by_rank[int(ranks[start])]]
            bucket = paths.slice(start, end - start)
            groups += _pack_columns(values, bucket, sizes[start:end], target_bytes, max_sources_per_merge)
    groups.sort(key=lambda g: (-g.count, g.size))
    return groups[:max_dest_splits] if max_dest_splits is not None else groups


def _pack_columns(
    values: dict[str, str | None], paths: pa.Array, sizes: np.ndarray, target: int, max_sources: int | None
) -> list[PlannedMerge]:
    """``_pack`` over one bucket's paths and sizes (ordered by size, then path): each group ends at the
    first file that would take it past ``target`` (found by bisection on the cumulative sizes) or at
    ``max_sources`` files, so the work is a step per group, not per file."""
    cumulative = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
    groups: list[PlannedMerge] = []
    first, n = 0, len(sizes)
    while first < n:
        over = int(np.searchsorted(cumulative, cumulative[first] + target, side="right")) - 1
        stop = min(max(first + 1, over), n if max_sources is None else first + max_sources, n)
        if stop - first >= 2:
            members = paths.slice(first, stop - first)
            size = int(cumulative[stop] - cumulative[first])
            groups.append(PlannedMerge(dict(values), members[0].as_py(), stop - first, size, members))
        first = stop
    return groups
