"""MERGE SPLITS planning: which small splits of a partition to merge into one.

Per partition (and doc mapping: splits indexed differently are never merged together), splits
below ``skip_fraction`` of the target size are packed, smallest first, into groups whose total
stays within the target size; a group needs at least two splits and at most
``max_sources_per_merge``. At most ``max_dest_splits`` groups are planned, largest savings
(most sources) first. Splits already close to the target are left alone.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from executor_lib.errors import ConfigError
from executor_lib.protocol.actions import AddAction

DEFAULT_TARGET_BYTES = 5 * 1024**3
SKIP_FRACTION = 0.9


@dataclass(frozen=True)
class MergeGroup:
    partition_values: dict[str, str | None]
    sources: tuple[AddAction, ...]

    @property
    def size(self) -> int:
        return sum(a.size for a in self.sources)


def plan_merges(
    files: Iterable[AddAction],
    doc_mapping: Callable[[AddAction], str | None],
    target_bytes: int = DEFAULT_TARGET_BYTES,
    max_dest_splits: int | None = None,
    max_sources_per_merge: int | None = None,
) -> list[MergeGroup]:
    if target_bytes <= 0:
        raise ConfigError(f"merge: target size must be positive, got {target_bytes}")
    if max_sources_per_merge is not None and max_sources_per_merge < 2:
        raise ConfigError(f"merge: MAX SOURCE SPLITS PER MERGE must be at least 2, got {max_sources_per_merge}")
    buckets: dict[tuple[object, ...], list[AddAction]] = defaultdict(list)
    for add in files:
        if add.size < target_bytes * SKIP_FRACTION:
            buckets[(tuple(sorted(add.partition_values.items())), doc_mapping(add))].append(add)
    groups: list[MergeGroup] = []
    for _, adds in sorted(buckets.items(), key=lambda kv: str(kv[0])):
        groups += _pack(sorted(adds, key=lambda a: (a.size, a.path)), target_bytes, max_sources_per_merge)
    groups.sort(key=lambda g: (-len(g.sources), g.size))
    return groups[:max_dest_splits] if max_dest_splits is not None else groups


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
