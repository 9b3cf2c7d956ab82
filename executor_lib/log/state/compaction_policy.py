"""When a state is rewritten whole, which manifests are rewritten to drop their tombstoned entries,
and which small manifests merge (the LSM-style tiering of PROTOCOL.md §10): the net change a run of
versions makes (``net_changes``), whether it forces a compaction (``needs_compaction``), the
manifests a state's tombstones make worth rewriting (``tombstone_rewrites``) and the next tier
merge (``next_small_merge``). Policy only: ``executor_lib.log.state.state_writer`` writes what it decides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from executor_lib.log.config import LogConfig
from executor_lib.log.state.avro_state import ManifestInfo, StateManifest
from executor_lib.protocol.actions import Action, AddAction, RemoveAction


@dataclasses.dataclass
class Delta:
    """Net effect of a run of versions: files added (still live) and base files removed."""

    added: dict[str, tuple[AddAction, int]]
    removed: dict[str, RemoveAction]
    replaced: set[str]  # removed (or possibly live in the base) and added again


def net_changes(versions: Sequence[tuple[int, Sequence[Action]]]) -> Delta:
    delta = Delta({}, {}, set())
    for version, actions in versions:
        for a in actions:
            if isinstance(a, AddAction):
                if a.path in delta.removed or a.path in delta.added:
                    delta.replaced.add(a.path)
                delta.added[a.path] = (a, version)
                delta.removed.pop(a.path, None)
            elif isinstance(a, RemoveAction) and delta.added.pop(a.path, None) is None:
                delta.removed[a.path] = a
    return delta


def needs_compaction(base: StateManifest, delta: Delta, config: LogConfig) -> bool:
    """Whether the state after ``delta`` must be rewritten whole (``build_compacted_state``).

    Only rare changes trigger it: a large remove, a removed file of unknown size, a path added
    again. Tombstones never do (``tombstone_rewrites`` rewrites only the manifests that hold them),
    nor does the number of manifests (``next_small_merge`` bounds it at O(one manifest) per commit),
    so a freshly compacted state cannot trigger another compaction.
    """
    return (
        len(delta.removed) >= config.compaction_large_remove_threshold
        or any(r.size is None for r in delta.removed.values())
        or any(path in base.tombstones for path in delta.added)
        or bool(delta.replaced)
    )


def tombstone_rewrites(infos: Sequence[ManifestInfo], tombstones: int, config: LogConfig) -> list[int]:
    """Positions of the manifests to rewrite without their tombstoned entries (their paths then leave
    the state's tombstones), given each manifest's exact ``tombstone_count`` and the ``tombstones``
    the state would list: every manifest whose tombstoned share of its entries exceeds
    ``compaction.tombstoneThreshold``, then those holding the most tombstones until at most
    ``compaction.maxTombstones`` are left. Each rewrite reads and writes one manifest, so neither
    bound ever costs O(table), and the state manifest's tombstone list stays below a size that does
    not grow with the table."""
    chosen = [
        n
        for n, i in enumerate(infos)
        if i.tombstone_count and i.tombstone_count > config.compaction_tombstone_threshold * i.num_entries
    ]
    left = tombstones - sum(infos[n].tombstone_count for n in chosen)
    taken = set(chosen)
    rest = sorted(
        (n for n, i in enumerate(infos) if i.tombstone_count and n not in taken),
        key=lambda n: -infos[n].tombstone_count,
    )
    for n in rest:
        if left <= config.compaction_max_tombstones:
            break
        chosen.append(n)
        left -= infos[n].tombstone_count
    return sorted(chosen)


def full_manifest_entries(config: LogConfig) -> int:
    """Entries from which a manifest counts as full: half of ``state.entriesPerManifest``. Full
    manifests are rewritten only by a compaction; smaller ones are merged with each other."""
    return max(1, config.state_entries_per_manifest // 2)


def next_small_merge(infos: Sequence[ManifestInfo], config: LogConfig) -> list[ManifestInfo]:
    """The manifests to merge next, or none: while more than ``compaction.maxManifests`` manifests are
    not full, the smallest of them — at least two, at most half the limit, and no more entries than
    one manifest holds beyond the first two. Smallest first makes it a tiered (LSM-style) merge: an
    entry is rewritten about log_{maxManifests/2}(entriesPerManifest) times over its life, and one
    merge reads and writes at most about 1.5 manifests' worth of entries, whatever the table's size."""
    small = sorted((i for i in infos if i.num_entries < full_manifest_entries(config)), key=lambda i: i.num_entries)
    if len(small) <= config.compaction_max_manifests:
        return []
    fanout = max(2, config.compaction_max_manifests // 2)
    chosen, total = small[:2], small[0].num_entries + small[1].num_entries
    for info in small[2:fanout]:
        if total + info.num_entries > config.state_entries_per_manifest:
            break
        chosen.append(info)
        total += info.num_entries
    return chosen
