"""A version's commit point, written and recognised: the put-if-absent of a version file, read back
after an ambiguous outcome (``try_write``); whether an earlier attempt of a commit holds a version
(``attempt_landed``); whether a version file of ours is a ghost beside a state another implementation
committed at its number (``is_ghost_beside``), or took the number of a version that log retention
deleted while its writer stalled (``reused_deleted_version``); the version file that closes a checkpoint another
implementation wrote past the log (``close_checkpoint_ahead``); and the head a writer tracks between
commits (``Head``, ``head_of``, ``head_after``).

``TransactionLog.commit`` (``log.transaction_log``) runs the loop that calls these; they take the
store, never the log.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import logging
import time
import uuid
from dataclasses import dataclass

from executor_lib.log.config import LogConfig
from executor_lib.log.snapshot import Snapshot
from executor_lib.log.state.avro_state import StateManifest, read_state_manifest
from executor_lib.log.state.foreign_states import (
    has_version_file,
    holds_version,
    is_checkpoint_ahead,
    is_checkpoint_past_the_log,
)
from executor_lib.log.state.version_files import list_log, read_version_actions
from executor_lib.protocol.actions import (
    ENGINE,
    Action,
    AddAction,
    CommitInfoAction,
    MetadataAction,
    ProtocolAction,
    RemoveAction,
    actions_to_ndjson,
)
from executor_lib.protocol.files import LOG_DIR, encode_log_bytes, state_dir, version_file
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import (
    CommitFailedError,
    CorruptLogError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    StorageError,
)

log = logging.getLogger(__name__)


class CommitOutcome(str, enum.Enum):
    """What one attempt to write a version's commit point came to."""

    COMMITTED = "committed"  # this commit holds the version
    LOST = "lost"  # another commit holds it: re-check conflicts, try the next version
    NOT_WRITTEN = "not-written"  # a storage error left it unwritten: retry the same version


@dataclass(frozen=True)
class Head:
    """What a writer must know about the latest version (no file list)."""

    version: int
    protocol: ProtocolAction | None
    metadata: MetadataAction | None
    state_only: bool = False  # the version exists as a state without a version file (0.5.x style)
    # the version is a state another implementation's checkpoint wrote past the log (foreign_states):
    # no commit, and open until a version file claims it
    checkpoint_ahead: bool = False


@dataclass(frozen=True)
class Attempt:
    """One write of a commit, to recognise it later: its version-file bytes, or (committed by
    state) its txn id; ``state``: the state written for it, if any."""

    final: list[Action]
    body: bytes | None = None
    txn_id: str | None = None
    state: StateManifest | None = None


def try_write(store: ObjectStore, version: int, body: bytes, txn_id: str) -> tuple[CommitOutcome, StorageError | None]:
    """Put-if-absent of a version file: (its ``CommitOutcome``, the storage error seen).

    LOST: another commit holds the version. A storage error that cannot be transient
    (access denied, missing bucket, bad credentials) is raised at once. After an ambiguous
    outcome the file is read back: the same bytes are this commit's own write.
    """
    key = f"{LOG_DIR}/{version_file(version)}"
    error: StorageError | None = None
    try:
        store.put_if_absent(key, body, metadata={"indextables-txn-id": txn_id})
        return CommitOutcome.COMMITTED, None
    except ObjectAlreadyExistsError:
        pass  # maybe our own write, retried by the SDK after a lost response
    except StorageError as e:  # ambiguous: the write may have landed
        if not e.retryable:
            raise
        error = e
        log.warning("commit of version %d: outcome unknown (%s); checking", version, e)
    try:
        written = store.read(key)
    except ObjectNotFoundError:
        return CommitOutcome.NOT_WRITTEN, error
    except StorageError as e:
        log.warning("commit of version %d: cannot read it back (%s)", version, e)
        return CommitOutcome.NOT_WRITTEN, e
    return (CommitOutcome.COMMITTED if written == body else CommitOutcome.LOST), None


def attempt_landed(store: ObjectStore, version: int, attempt: Attempt) -> bool:
    """Whether an earlier attempt's write holds ``version``: the same version-file bytes (they
    name the commit's new split files and timestamps), or a state carrying this commit's txn id."""
    try:
        if attempt.body is not None:
            return store.read(f"{LOG_DIR}/{version_file(version)}") == attempt.body
        state = read_state_manifest(store, version)
    except ObjectNotFoundError:
        return False
    info = state.commit_info() if state is not None else None
    return info is not None and info.txn_id == attempt.txn_id


def is_ghost_beside(store: ObjectStore, state: StateManifest, final: list[Action], parallelism: int) -> bool:
    """Whether our version file of ``final`` is a ghost beside ``state``, the state of its number:
    another implementation committed the same version as a state. Not when we wrote the state
    (derived from the version file), when it holds our commit, or when it is another
    implementation's checkpoint (``foreign_states``): 0.5.3's checkpoint written at this number is
    no commit, so our version file stands and the state, stale beside it, is never built on.
    ``parallelism``: how many manifests are read at once (``state.read.parallelism``)."""
    if state.written_here or is_checkpoint_past_the_log(state, functools.partial(has_version_file, store)):
        return False
    if not any(isinstance(a, (AddAction, RemoveAction)) for a in final):
        return True
    return not holds_version(store, state, final, parallelism)


def reused_deleted_version(
    store: ObjectStore, version: int, final: list[Action], parallelism: int, by_state: bool = False
) -> bool:
    """Whether our version file at ``version``, just written by a writer that stalled between listing
    the log and writing, took the number of a version committed and then deleted by log retention in
    between (put-if-absent cannot see a deleted file). Such a file lies beneath a newer state, so no
    reader sees it: the commit must not be acknowledged. Only a stall of the version files' minimum
    age (``cleanup.version_file_min_age_hours``) allows it; a writer checks after half of it.

    ``by_state``: our commit point is the state ``state-v<version>/_manifest.avro`` (a table
    IndexTables4Spark 0.5.x commits by state), whose number state retention may have freed
    (``cleanup.commit_state_min_age_hours``); the same rules hold with the previous version's state
    beside its file, and only states after ours decide.

    * The version file before ours is still there (by state: or its state): not reused. Cleanups
      delete version files and states oldest first (``cleanup``), and version ``version - 1`` is older
      than any commit at ``version``.
    * A version file after ours that is older than ours (one clock, the store's): reused. A commit
      after ours is written after its writer saw ours.
    * Otherwise, the oldest state at or after ``version`` decides (one this project or 0.5.x
      committed, not a checkpoint 0.5.3 wrote past the log): written after ours, it holds our adds and
      removes. Not holding them, it was built on the deleted version. (Or a commit right after ours
      removed our new files, whose version file then aged out before this check: a stall after the
      write as long as the minimum age, and the commit is then refused when it could have stood.)
    * No such state: not reused (retention deletes only version files a state or checkpoint covers).

    A commit that adds and removes nothing is taken as not reused.

    >>> # reused_deleted_version(store, 40, final, 4)  -> True: withdraw the file, the race is lost
    """
    if version > 1 and has_version_file(store, version - 1):
        return False
    if by_state and version > 1 and read_state_manifest(store, version - 1) is not None:
        return False
    listing = list_log(store, version - 1)
    ours = listing.versions.get(version)
    if ours is not None and any(v > version and modified < ours for v, modified in listing.versions.items()):
        return True
    has_file = functools.cache(functools.partial(has_version_file, store))
    first = version + 1 if by_state else version  # by state, the state at ``version`` is ours
    for base in sorted(v for v in listing.states if v >= first):
        manifest = read_state_manifest(store, base)
        if manifest is None or is_checkpoint_past_the_log(manifest, has_file):
            continue
        return not holds_version(store, manifest, final, parallelism)
    return False


def close_checkpoint_ahead(
    store: ObjectStore, config: LogConfig, head: Head, read_version: int | None
) -> tuple[Head, int | None]:
    """Claim the version of a checkpoint another implementation wrote past the log
    (``foreign_states``) with a version file that changes nothing, before committing after it:
    0.5.3's next append can then no longer take that number and hide behind the state. If an
    append took it first, it is a commit like any other, and a transaction that read the state
    (``read_version`` at it) read the version before it: the append is checked as a winner."""
    v = head.version
    info = CommitInfoAction(
        txn_id=uuid.uuid4().hex,
        timestamp=int(time.time() * 1000),
        operation="CHECKPOINT",
        engine=ENGINE,
        read_version=v - 1,
        operation_parameters={"closes": f"{state_dir(v)}, a checkpoint another implementation wrote past the log"},
    )
    if head.metadata is None:
        raise CorruptLogError(f"{store.root_uri}: no metaData action at version {v}")
    # The table's metaData again, unchanged: a line every reader knows (0.5.3 refuses commitInfo
    # lines), which no conflict check counts as a change (conflicts.is_real_metadata_change).
    lines: list[Action] = [info, head.metadata] if config.commit_info_enabled else [head.metadata]
    body = encode_log_bytes(actions_to_ndjson(lines), config.compression_enabled, config.gzip_level)
    outcome, error = try_write(store, v, body, info.txn_id)
    if outcome is CommitOutcome.NOT_WRITTEN:
        raise CommitFailedError(
            f"{store.root_uri}: version {v} exists only as another implementation's checkpoint, and closing it "
            f"with a version file failed ({error}); nothing was committed"
        ) from error
    if outcome is CommitOutcome.COMMITTED:
        log.info("%s: closed version %d, a checkpoint another implementation wrote past the log", store.root_uri, v)
        actions = lines
    else:
        actions = read_version_actions(store, v)
        if read_version == v:
            read_version = v - 1
    return head_after(dataclasses.replace(head, version=v - 1, checkpoint_ahead=False), [actions]), read_version


def head_of(store: ObjectStore, snap: Snapshot) -> Head:
    """The head at ``snap``: whether its version was committed as a state only (no version file,
    and its state is a commit point, not one derived from a version file that retention deleted),
    or is a checkpoint another implementation wrote past the log (no commit at all)."""
    head = Head(snap.version, snap.protocol, snap.state.metadata)
    manifest = snap.state_manifest
    if manifest is not None and manifest.state_version != snap.version:
        manifest = None  # built on an older state and the version files
    if snap.version == 0 or (manifest is not None and not manifest.commit_point):
        return head
    has_file = functools.cache(functools.partial(has_version_file, store))
    if has_file(snap.version):
        return head
    # the snapshot may have passed over the state of its version (another implementation's checkpoint)
    manifest = manifest or read_state_manifest(store, snap.version)
    if manifest is None or not manifest.commit_point:
        return head
    if is_checkpoint_ahead(manifest, has_file):
        return dataclasses.replace(head, checkpoint_ahead=True)
    return dataclasses.replace(head, state_only=True)


def head_after(head: Head, versions: list[list[Action]]) -> Head:
    """``head`` moved past the actions of the version files that follow it (none: ``head`` itself)."""
    if not versions:
        return head
    protocol, metadata = head.protocol, head.metadata
    for actions in versions:
        for a in actions:
            if isinstance(a, ProtocolAction):
                protocol = a
            elif isinstance(a, MetadataAction):
                metadata = a
    return Head(head.version + len(versions), protocol, metadata)
