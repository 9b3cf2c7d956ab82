"""States another implementation wrote into a log that is committed by version files: which of
them is a checkpoint written *past* the log rather than a commit, and which is *stale* beside the
version file of its own number. PROTOCOL.md §6 ("A state ahead of the log").

IndexTables4Spark 0.5.3 commits by version files (``transaction/TransactionLog.scala``) and writes
Avro states only as checkpoints (``CHECKPOINT INDEXTABLES``, or every ``checkpoint.interval``
commits). Its checkpoint is meant for the newest version file's number, but when a state of that
version exists already (this project writes one after every commit) ``StateWriter
.writeStateWithRetry`` writes the same file list at the next version that has no state manifest
(``findNextAvailableVersion``): a state at a version no version file claims, or beside a version
file it does not hold. 0.5.3's next append then takes that version's file (it looks at version
files only), and a reader starting from the state loses the append. So:

- a *checkpoint ahead of the log* (``is_checkpoint_ahead``) is not a version of its own: a writer
  here closes it with a version file that changes nothing before it commits after it, so that no
  later append can take the number;
- a checkpoint's file list need not be the table's (0.5.3's ``listFiles`` reads ``_last_checkpoint``
  twice and misses what landed between the reads), so readers and state writers pass over it where
  the version files below it are retained (``is_checkpoint_past_the_log``);
- a foreign state that does not hold the version file of its number (``stale_beside``) is never a
  base: readers and state writers take an older one and replay the version files.

A 0.5.x *commit* by state (0.5.4 writes every version that way) adds its files at its own version or
records removes as tombstones; a checkpoint written past the log does neither (0.5.3 labels every
entry with the version it listed, older than the state's own), which is what tells the two apart. Its
checkpoints at their own version look like commits, and are: they hold that version.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence

from executor_lib.log.state.avro_state import StateManifest, read_state_chunks
from executor_lib.protocol.actions import Action, AddAction, RemoveAction
from executor_lib.protocol.files import LOG_DIR, version_file
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import ObjectNotFoundError


def has_version_file(store: ObjectStore, version: int) -> bool:
    """Whether ``version`` has a version file (one existence check)."""
    return store.exists(f"{LOG_DIR}/{version_file(version)}")


def is_checkpoint_shaped(manifest: StateManifest) -> bool:
    """Whether ``manifest`` is another implementation's checkpoint: nothing added at its own version
    and no tombstones (a 0.5.x commit by state has one or the other).

    >>> # is_checkpoint_shaped(read_state_manifest(store, 12))  -> True for 0.5.3's CHECKPOINT
    """
    v = manifest.state_version
    return (
        not manifest.written_here
        and not manifest.tombstones
        and all(info.max_added_at_version < v for info in manifest.manifests)
    )


def is_checkpoint_past_the_log(manifest: StateManifest, has_version_file: Callable[[int], bool]) -> bool:
    """Whether ``manifest`` is a checkpoint 0.5.3 wrote in a stretch of the log committed by version
    files: checkpoint-shaped, at a version ``v >= 2`` whose predecessor has a version file (in a 0.5.x
    table only version 0 has one). Its file list need not be the table's: not a base where the
    version files allow.

    >>> # is_checkpoint_past_the_log(manifest, lambda v: store.exists(f"_transaction_log/{version_file(v)}"))
    """
    v = manifest.state_version
    return v >= 2 and is_checkpoint_shaped(manifest) and has_version_file(v - 1)


def is_checkpoint_ahead(manifest: StateManifest, has_version_file: Callable[[int], bool]) -> bool:
    """Whether ``manifest`` is a checkpoint past the log at a version without a version file: that
    version is open, and 0.5.3's next append would take it."""
    return not has_version_file(manifest.state_version) and is_checkpoint_past_the_log(manifest, has_version_file)


def holds(live: Container[str], actions: Sequence[Action]) -> bool:
    """Whether ``live`` (a state's live paths) includes the adds of ``actions`` (a version's) and
    none of its removes. A version that adds and removes nothing is held by any state."""
    return all(a.path in live for a in actions if isinstance(a, AddAction)) and not any(
        a.path in live for a in actions if isinstance(a, RemoveAction)
    )


def holds_version(store: ObjectStore, manifest: StateManifest, actions: Sequence[Action], parallelism: int) -> bool:
    """``holds`` on the live paths of ``manifest``, read whole (its manifests, tombstones applied)."""
    if not any(isinstance(a, (AddAction, RemoveAction)) for a in actions):
        return True
    listed: set[str] = set()
    for chunk in read_state_chunks(store, manifest, parallelism):
        listed.update(chunk.paths.to_pylist())
    return holds(listed - manifest.tombstones, actions)


def stale_beside(
    store: ObjectStore, manifest: StateManifest, version_actions: Callable[[int], Sequence[Action]], parallelism: int
) -> bool:
    """Whether another implementation's state does not hold the version file of its own number
    (read with ``version_actions`` only for a state this project did not write): then it is not that
    version's state (a checkpoint 0.5.3 wrote past the log, whose number an append took afterwards)
    and must not be built on. Without a version file of its number the state is that version.

    >>> # stale_beside(store, manifest, lambda v: read_version_actions(store, v), 4)
    """
    if manifest.written_here:
        return False
    try:
        actions = version_actions(manifest.state_version)
    except ObjectNotFoundError:
        return False
    return not holds_version(store, manifest, actions, parallelism)
