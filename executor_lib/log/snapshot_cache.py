"""The process-wide cache of table snapshots: the newest snapshot this process built of each table.

A query opens a new ``TransactionLog`` (the Spark data source does so on the driver for every
query), so a snapshot kept on the log object alone is rebuilt per query: on S3 that is a
``_last_checkpoint`` read, two listings, the state manifest and its manifests. Here the newest
snapshot of each table outlives the log objects: a log made with ``shared_snapshots=SHARED`` (as
``log.tables.read_snapshot``, what queries plan on, makes it) starts ``_refresh_snapshot`` from
it and finds newer versions with one listing past it (as Delta's and Lance's readers do), reading
only the version files committed since.

Correctness rests on what a snapshot is: an immutable table state at one committed version. A
cached snapshot is only a starting point; every "latest" read still lists the log past it, so it
never hides a commit that the listing shows. A table deleted and created again at the same place is
told apart by its version file's modification time and its metaData id (``still_current``).

Keys are ``ObjectStore.cache_identity`` (the root URI, and for S3 the endpoint and access key id).
At most ``INDEXTABLES_SNAPSHOT_CACHE_TABLES`` tables (default 32; 0 turns the cache off) are kept,
least recently used first out. Snapshots built with manifest pruning (a superset of the files)
are never cached.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from executor_lib.protocol.actions import Action, MetadataAction

if TYPE_CHECKING:
    from executor_lib.log.snapshot import Snapshot
    from executor_lib.log.state.version_files import LogListing

DEFAULT_TABLES = 32


class SnapshotCache:
    """The newest snapshot of each of up to ``max_tables`` tables, safe to use from several threads."""

    def __init__(self, max_tables: int = DEFAULT_TABLES) -> None:
        self.max_tables = max_tables
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, identity: str) -> Snapshot | None:
        """The newest snapshot kept of the table ``identity`` names, if any."""
        with self._lock:
            snap = self._snapshots.get(identity)
            if snap is not None:
                self._snapshots.move_to_end(identity)
            return snap

    def offer(self, identity: str, snapshot: Snapshot) -> None:
        """Keep ``snapshot`` unless a newer one of the table is kept (or it is pruned, or caching is off)."""
        if self.max_tables <= 0 or snapshot.pruned:
            return
        with self._lock:
            kept = self._snapshots.get(identity)
            if kept is not None and kept.version > snapshot.version:
                return
            self._snapshots[identity] = snapshot
            self._snapshots.move_to_end(identity)
            while len(self._snapshots) > self.max_tables:
                self._snapshots.popitem(last=False)

    def forget(self, identity: str) -> None:
        """Drop the table's snapshot (the next read loads the log from its checkpoint)."""
        with self._lock:
            self._snapshots.pop(identity, None)

    def clear(self) -> None:
        with self._lock:
            self._snapshots.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._snapshots)


def still_current(cached: Snapshot, listing: LogListing) -> bool:
    """Whether a listing past ``cached``'s version (``list_log(store, cached.version)``) still shows
    ``cached``'s version as the same commit: listed, and its version file (when both have one) with
    the modification time the snapshot recorded. A table deleted and created again at the same place
    has new version files, so a snapshot of the old table is never extended with the new one's. A
    snapshot built from a state alone is not current once a version file of its number appears: the
    state was another implementation's checkpoint, and the version file is the commit
    (``foreign_states``)."""
    v = cached.version
    if v in listing.versions:
        return cached.timestamp_ms is not None and listing.versions[v] == cached.timestamp_ms
    return v in listing.states or v in listing.checkpoints


def same_table(cached: Snapshot, versions: Iterable[tuple[int, list[Action]]]) -> bool:
    """No version file in ``versions`` replaces the table's metaData with another table's id."""
    if cached.state.metadata is None:
        return False
    table_id = cached.state.metadata.id
    return all(a.id == table_id for _, actions in versions for a in actions if isinstance(a, MetadataAction))


def _configured_tables() -> int:
    try:
        return int(os.environ.get("INDEXTABLES_SNAPSHOT_CACHE_TABLES", str(DEFAULT_TABLES)))
    except ValueError:
        return DEFAULT_TABLES


SHARED = SnapshotCache(_configured_tables())
