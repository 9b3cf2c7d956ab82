"""Per-manifest tombstones: which manifest of a state holds each tombstoned path, and the counts a
state records for them (``ManifestInfo.tombstone_count`` / ``live_entry_count``).

IndexTables4Spark's ``ManifestInfo`` means by ``tombstoneCount`` the number of the state's
tombstones that fall on the manifest's entries and by ``liveEntryCount`` ``numEntries`` minus
that (-1: not computed). This project writes exactly that for every manifest of every state it
writes, so a state write can pick the manifests worth rewriting (``compaction_policy``) without
reading any manifest it does not rewrite. The ``tombstones`` list itself stays the one the JVM
reads: paths removed across all manifests.

Locating a commit's removed paths reads the base state's manifests as ``FileChunk`` columns
through the manifest caches (the chunks a snapshot of the base holds: the committing process has
them in memory) and matches paths column-wise, on the chunks' compact path form: no object and
no full path is built per file, only per match.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pyarrow as pa

from executor_lib.log.config import LogConfig
from executor_lib.log.files.file_table import matching_paths
from executor_lib.log.state.avro_state import ManifestInfo, StateManifest, read_state_chunks
from executor_lib.storage.base import ObjectStore


@dataclasses.dataclass(frozen=True)
class Located:
    """Where a set of paths has entries in a state's manifests."""

    counts: tuple[int, ...]  # per manifest of the state, in order: its entries whose path is in the set
    found: frozenset[str]  # the paths that have an entry in some manifest
    duplicated: bool  # some path has more than one entry (in one manifest or several)


def counts_known(state: StateManifest) -> bool:
    """Whether ``state``'s per-manifest counts are exact: every tombstone then has exactly one entry,
    in the manifest whose ``tombstone_count`` counts it. True for every state this project writes;
    for a state without tombstones trivially (IndexTables4Spark writes 0 and -1 there); False for a
    state with tombstones that another writer wrote (its counts may be estimates, as IndexTables4Spark's
    were from partition bounds) or whose counts do not add up: then they are located again."""
    if not state.tombstones:
        return True
    if not state.written_here:
        return False
    infos = state.manifests
    consistent = all(i.live_entry_count >= 0 and i.live_entry_count + i.tombstone_count == i.num_entries for i in infos)
    return consistent and sum(i.tombstone_count for i in infos) == len(state.tombstones)


def locate(store: ObjectStore, state: StateManifest, paths: frozenset[str], config: LogConfig) -> Located:
    """Which of ``state``'s manifests hold entries of ``paths``. Reads the manifests through the
    manifest caches (``read_state_chunks``) and matches each chunk's path column against ``paths``
    with one vectorized ``is_in``; only matched rows become Python strings."""
    if not paths:
        return Located((0,) * len(state.manifests), frozenset(), False)
    value_set = pa.array(sorted(paths), pa.string())
    counts: list[int] = []
    found: set[str] = set()
    for chunk in read_state_chunks(store, state, config.state_read_parallelism):
        matched = matching_paths(chunk, paths, value_set)
        counts.append(len(matched))
        found.update(matched)
    return Located(tuple(counts), frozenset(found), sum(counts) != len(found))


def with_counts(infos: Sequence[ManifestInfo], counts: Sequence[int]) -> list[ManifestInfo]:
    """``infos`` recording ``counts`` tombstoned entries each (and the rest as live)."""
    return [
        dataclasses.replace(i, tombstone_count=c, live_entry_count=i.num_entries - c)
        for i, c in zip(infos, counts, strict=True)
    ]
