"""The transaction log of one table: snapshots and commits with optimistic concurrency.

History is read by ``log.maintenance.history``; checkpoints and cleanup live in ``log.maintenance``; a
version file put and recognised, and the head a writer tracks, in ``log.commit.commit_point``.

Commit protocol (see PROTOCOL.md, "Commits"):

1. Validate the actions (nothing is written for invalid input).
2. Find the latest version L by listing past the newest known version (only new
   version files are read: a commit costs O(new commits + its own actions), not O(table)).
3. Check conflicts against every version committed after the transaction's read version.
4. Write version L+1 at the table's own commit point, with put-if-absent:
   * ``<L+1>.json`` (this project's and tantivy4java's style), then its state
     ``state-v<L+1>/_manifest.avro``. If that state already exists and is not derived from
     our version file, an IndexTables4Spark 0.5.x writer committed L+1 concurrently: our
     version file is withdrawn and the race counts as lost;
   * or, on a table whose latest version exists only as a state (0.5.x's style), the state
     manifest ``state-v<L+1>/_manifest.avro`` itself, with no version file.
   The commitInfo (transaction id, operation) is recorded in the state's Avro file metadata;
   a ``commitInfo`` line in the version file only with ``transaction.commitInfo.enabled``.
5. If the put failed or its outcome is unknown, read the object back: the same version-file
   bytes (or a state carrying our transaction id) mean the commit landed (an ambiguous success
   is not retried, so there are no duplicates); anything else means the race was lost, go back
   to 2 after a jittered exponential backoff; nothing there means the write did not land, retry it.
"""

from __future__ import annotations

import functools
import logging
import random
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from executor_lib import failpoints
from executor_lib.log import snapshot_cache
from executor_lib.log.commit.commit_checks import validate_against_table, validate_static
from executor_lib.log.commit.commit_point import (
    Attempt,
    CommitOutcome,
    Head,
    attempt_landed,
    close_checkpoint_ahead,
    head_after,
    head_of,
    is_ghost_beside,
    reused_deleted_version,
    try_write,
)
from executor_lib.log.commit.conflicts import CommitIntent, check_conflicts
from executor_lib.log.commit.state_commit import write_state
from executor_lib.log.commit.state_lookup import (
    txns_through,
    verified_state,
)
from executor_lib.log.config import LogConfig
from executor_lib.log.files.pruning import FileListing, file_listing
from executor_lib.log.maintenance import checkpointing
from executor_lib.log.maintenance.checkpointing import uses_avro_state, write_state_hint
from executor_lib.log.maintenance.cleanup import (
    CleanupReport,
    commit_state_min_age_hours,
    delete_state_directory,
    version_file_min_age_hours,
)
from executor_lib.log.maintenance.history import HistoryEntry, commit_info_of, read_history
from executor_lib.log.snapshot import Snapshot, SnapshotLoader
from executor_lib.log.state import checkpoint as checkpoints
from executor_lib.log.state.avro_state import StateManifest, read_state_manifest
from executor_lib.log.state.state import replay
from executor_lib.log.state.state_writer import (
    STATE_MANIFEST_NAMES,
    build_compacted_state,
    build_incremental_state,
    put_state,
)
from executor_lib.log.state.streaming_txns import StreamingTxn, TxnRecord, advance, check_winner_txn, tagged
from executor_lib.log.state.version_files import (
    check_readable,
    check_writable,
    list_log,
    read_version_actions,
    version_source,
)
from executor_lib.protocol.actions import (
    ENGINE,
    Action,
    CommitInfoAction,
    MetadataAction,
    ProtocolAction,
    RemoveAction,
    actions_to_ndjson,
)
from executor_lib.protocol.files import LOG_DIR, encode_log_bytes, state_dir, version_file
from executor_lib.protocol.schema_registry import (
    register_doc_mappings,
    registry_from_configuration,
)
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import (
    BatchAlreadyCommittedError,
    CommitConflictError,
    CommitFailedError,
    ConfigError,
    CorruptLogError,
    IndexTablesError,
    MissingLogFileError,
    ObjectNotFoundError,
    StorageError,
    VersionNotFoundError,
)

log = logging.getLogger(__name__)


# Lost races are progress (another commit landed), so they do not use up retry attempts;
# this only bounds a pathological livelock.
MAX_LOST_RACES = 10_000
# How often a blind append re-reads a head that cleanup deleted under it before giving up.
MAX_HEAD_CLEANUPS = 20


class TransactionLog:
    """The ``_transaction_log/`` of one table."""

    def __init__(
        self,
        store: ObjectStore,
        config: LogConfig | None = None,
        shared_snapshots: snapshot_cache.SnapshotCache | None = None,
    ) -> None:
        """``shared_snapshots``: a cache of snapshots shared with other log objects of the process
        (``log.snapshot_cache.SHARED``, as queries use it): the latest snapshot is refreshed from the
        newest one there and stored back. Without it, a new log object loads its first snapshot from
        the checkpoint (and so re-reads and re-verifies the state)."""
        self.store = store
        self.config = config or LogConfig()
        self._shared = shared_snapshots
        self._loader = SnapshotLoader(store, self.config)
        self._head: Head | None = None
        self._head_listed_at = 0.0  # time.monotonic() of the listing the head was read from
        self._snapshot: Snapshot | None = None
        # Counters since this object was made: commits landed, races lost to other writers,
        # writes whose outcome was an error (each retried). Read by stress tests and benchmarks.
        self.commit_stats: dict[str, int] = {"committed": 0, "lost_races": 0, "failed_writes": 0}

    @property
    def uri(self) -> str:
        return self.store.root_uri

    def __repr__(self) -> str:
        return f"TransactionLog({self.uri!r})"

    # --- reading ---------------------------------------------------------------------------

    def latest_version(self) -> int:
        return self._loader.latest_version()

    def snapshot(self, version: int | None = None, timestamp_ms: int | None = None) -> Snapshot:
        """The latest snapshot, or the one at ``version``, or the newest at or before ``timestamp_ms``."""
        if version is not None and timestamp_ms is not None:
            raise ConfigError(
                f"snapshot of {self.uri}: give either version={version} or timestamp_ms={timestamp_ms}, not both"
            )
        if timestamp_ms is not None:
            version = self._loader.version_at_timestamp(timestamp_ms)
        if version is None:
            snap = self._refresh_snapshot()
        elif self._snapshot is not None and self._snapshot.version == version:
            snap = self._snapshot
        else:
            snap = self._shared_at(version) or self._loader.load(version)
        return snap

    def _shared_at(self, version: int) -> Snapshot | None:
        """The process's shared snapshot of the table brought up to date, when it is at ``version``
        (a task of a plan pinned to the latest version: no load of its own), else None."""
        cached = self._shared.get(self.store.cache_identity) if self._shared is not None else None
        if cached is None or cached.version > version:
            return None
        latest = self._refresh_snapshot()
        return latest if latest.version == version else None

    def _refresh_snapshot(self) -> Snapshot:
        """Latest snapshot, updated incrementally from the cached one when possible: this object's,
        or with ``shared_snapshots`` the newest this process built of the table, so that a new log
        object per query costs one listing past it (two LIST requests) plus the new version files."""
        shared, identity = self._shared, self.store.cache_identity
        cached = self._snapshot or (shared.get(identity) if shared is not None else None)
        if cached is not None:
            listing = list_log(self.store, cached.version)
            new = sorted(v for v in listing.versions if v > cached.version)
            latest = listing.latest
            current = snapshot_cache.still_current(cached, listing)
            if current and latest == cached.version:
                self._snapshot = cached
                return cached
            if current and latest > cached.version and new == list(range(cached.version + 1, latest + 1)):
                try:
                    versions = [(v, read_version_actions(self.store, v)) for v in new]
                except ObjectNotFoundError:  # log retention got there first: load from its checkpoint
                    versions = []
                if versions and snapshot_cache.same_table(cached, versions):
                    state = replay(cached.state, versions, self.uri, lambda v: version_source(self.store, v))
                    check_readable(state.protocol, self.uri)
                    base = f"cached version {cached.version} + version files {new[0]}..{new[-1]}"
                    self._snapshot = Snapshot(self.uri, state, base, listing.versions.get(latest))
                    if shared is not None:
                        shared.offer(identity, self._snapshot)
                    return self._snapshot
        self._snapshot = self._loader.load()
        if shared is not None:
            shared.offer(identity, self._snapshot)
        return self._snapshot

    def list_files(self, predicates: Sequence[Any] = (), version: int | None = None) -> FileListing:
        """Files that may hold rows matching all ``predicates`` (a conjunction of
        ``filters.Term/TermIn/Between`` on partition and statistics columns).

        On an Avro state, manifests whose partition bounds cannot match are not read at all;
        then each file is checked against its partition values and min/max statistics.
        """
        snap = self._loader.load(version, predicates)
        manifests = snap.state_manifest.manifests if snap.state_manifest is not None else ()
        return file_listing(
            snap.version, snap.list_files(predicates), manifests, snap.metadata.schema_string, predicates
        )

    def history(self, limit: int | None = None) -> list[HistoryEntry]:
        """Commits newest first: one entry per retained version file or state-only version."""
        return read_history(self.store, limit)

    def commit_info(self, version: int, actions: Sequence[Action] | None = None) -> CommitInfoAction | None:
        """The commitInfo of ``version`` (see ``log.maintenance.history.commit_info_of``)."""
        return commit_info_of(self.store, version, actions)

    def version_actions(self, version: int) -> list[Action]:
        """What ``version`` did: its version file's actions, or for a version committed as a state only
        (no version file), the states before and at it compared."""
        try:
            return read_version_actions(self.store, version)
        except ObjectNotFoundError:
            if read_state_manifest(self.store, version) is None:
                raise
            return self._actions_of_state_version(version)

    # --- writing ---------------------------------------------------------------------------

    def commit(
        self,
        actions: Iterable[Action],
        *,
        read_version: int | None = None,
        operation: str = "WRITE",
        operation_parameters: dict[str, str] | None = None,
        fail_on_concurrent_add: bool = False,
        streaming_txn: StreamingTxn | None = None,
        new_files: bool = False,
    ) -> int:
        """Append one version holding ``actions``; returns its number.

        ``read_version`` is the version the transaction read (default: the latest at
        call time, i.e. a blind append). Raises CommitConflictError when a commit after
        ``read_version`` conflicts, CommitFailedError when retries are exhausted.

        ``streaming_txn``: the streaming micro-batch these actions are (``commit_streaming_batch``):
        its adds are tagged with it, and BatchAlreadyCommittedError is raised, with nothing written,
        if the table at the head, or a version committed while this commit retries, already holds
        that application's batch or a later one.

        An add of a file already live at ``read_version`` is refused (InvalidActionError: its rows would
        be read twice). ``new_files``: the caller uploaded every added file itself under a new name
        (``splits.write.publish.upload_split``), so the live files are not looked up for that check.
        """
        actions = list(actions)
        if streaming_txn is not None:
            actions = tagged(actions, streaming_txn)
        validate_static(actions, self.store.root_uri)
        head = self._refresh_head()
        check_writable(head.protocol, self.uri)
        if streaming_txn is not None:
            self._check_new_batch(streaming_txn, head)
        if read_version is not None and read_version > head.version:
            raise VersionNotFoundError(f"{self.uri}: read version {read_version} is newer than {head.version}")
        if head.checkpoint_ahead:
            head, read_version = self._close_checkpoint_ahead(head, read_version)
        read_version, head, metadata_at_read = self._validated_read(actions, read_version, head, new_files)
        if head.checkpoint_ahead:  # a head read again after a cleanup race
            head, _ = self._close_checkpoint_ahead(head, read_version)
        intent = CommitIntent.of(actions, metadata_at_read, fail_on_concurrent_add)
        txn_id = uuid.uuid4().hex
        winners: dict[int, list[Action]] = {}
        attempts: dict[int, Attempt] = {}  # versions an earlier attempt may have written after all
        failures = lost_races = 0
        last_error: StorageError | None = None
        while failures < self.config.retry_max_attempts and lost_races < MAX_LOST_RACES:
            for v in range(read_version + 1, head.version + 1):
                attempt = attempts.pop(v, None)
                if attempt is not None and attempt_landed(
                    self.store, v, attempt
                ):  # an earlier attempt landed after all
                    self._after_commit(v, attempt.final, head, attempt.state, attempt.body is None)
                    self.commit_stats["committed"] += 1
                    return v
                if v not in winners:
                    winners[v] = self._read_winner(v, read_version, failures)
                    if streaming_txn is not None:
                        check_winner_txn(streaming_txn, v, winners[v], self.uri)
            check_conflicts(intent, read_version, sorted(winners.items()), metadata_at_read)
            final = register_doc_mappings(actions, head.metadata)
            check_writable(head.protocol, self.uri)
            version = head.version + 1
            info = CommitInfoAction(
                txn_id=txn_id,
                timestamp=int(time.time() * 1000),
                operation=operation,
                engine=ENGINE,
                read_version=read_version,
                operation_parameters=operation_parameters or None,
            )
            if self._commits_by_state(head):
                outcome, error, attempt = self._try_state_commit(version, final, head, info)
            else:
                outcome, error, attempt = self._try_version_file(version, final, head, info)
            if outcome is CommitOutcome.COMMITTED:
                failpoints.reach("log.commit.landed")
                self._after_commit(version, final, head, attempt.state, attempt.body is None)
                self.commit_stats["committed"] += 1
                return version
            if outcome is CommitOutcome.LOST:
                # Someone else holds the version: that is progress, not a failure. Re-check
                # the winners for conflicts and try the next version after a short jitter.
                lost_races += 1
                self.commit_stats["lost_races"] += 1
                self._backoff(min(lost_races, 4))
            else:
                attempts[version] = attempt  # the write may still have landed: checked before the next
                failures += 1
                self.commit_stats["failed_writes"] += 1
                last_error = error
                self._backoff(failures)
            head = self._refresh_head()
            if head.checkpoint_ahead:  # landed while this commit retried: closed before it commits after
                head, _ = self._close_checkpoint_ahead(head, read_version)
        reason = f"last error: {last_error}" if last_error else f"lost {lost_races} races to concurrent writers"
        raise CommitFailedError(
            f"{self.uri}: commit not written after {failures} failed writes and {lost_races} lost races ({reason})"
        ) from last_error

    # --- the two commit points ---------------------------------------------------------------

    def _commits_by_state(self, head: Head) -> bool:
        """Follow the table's own commit style: a table whose latest version exists only as a state
        (IndexTables4Spark 0.5.x commits by put-if-absent of ``state-v<N>/_manifest.avro`` and writes no
        version file after version 0) is committed to the same way, so that both writers race on one name."""
        if not (head.state_only and self._uses_avro_state(head.protocol)):
            return False
        if self.config.state_manifest_format != "avro":
            raise ConfigError(
                f"{self.uri}: version {head.version} was committed as a state only (as IndexTables4Spark 0.5.x "
                "commits); committing to this table needs spark.indextables.state.manifestFormat=avro, the name "
                "0.5.x writers race on"
            )
        return True

    def _try_version_file(
        self, version: int, final: list[Action], head: Head, info: CommitInfoAction
    ) -> tuple[CommitOutcome, StorageError | None, Attempt]:
        """Commit by put-if-absent of ``<version>.json`` (this project's and tantivy4java's commit point),
        then write the version's state. A state a 0.5.x writer committed for the same version meanwhile
        wins: our version file is withdrawn and the race counts as lost."""
        lines = [info, *final] if self.config.commit_info_enabled else final
        body = encode_log_bytes(actions_to_ndjson(lines), self.config.compression_enabled, self.config.gzip_level)
        attempt = Attempt(final, body=body)
        outcome, error = try_write(self.store, version, body, info.txn_id)
        if outcome is not CommitOutcome.COMMITTED:
            return outcome, error, attempt
        if self._stalled_since_listing(version_file_min_age_hours(self.config)) and reused_deleted_version(
            self.store, version, final, self.config.state_read_parallelism
        ):
            log.warning(
                "%s: version %d was committed and deleted by log retention while this commit stalled between "
                "listing the log and writing; withdrawing this commit's version file, which no reader would see",
                self.uri,
                version,
            )
            self.store.delete(f"{LOG_DIR}/{version_file(version)}")
            return CommitOutcome.LOST, None, attempt
        if self._uses_avro_state(next((a for a in final if isinstance(a, ProtocolAction)), head.protocol)):
            state, ghost = self._state_of_version_file(version, final, info)
            if ghost:
                return CommitOutcome.LOST, None, attempt
            attempt = Attempt(final, body=body, state=state)
        return CommitOutcome.COMMITTED, None, attempt

    def _state_of_version_file(
        self, version: int, final: list[Action], info: CommitInfoAction
    ) -> tuple[StateManifest | None, bool]:
        """Write the state of a version just committed by its version file: (the state, whether the
        version file turned out to be a ghost beside a state another implementation committed)."""
        manifest: StateManifest | None = None
        won = False
        try:
            manifest, won = write_state(
                self.store,
                self.config,
                self._loader.listing,
                self.snapshot,
                version,
                known_actions={version: final},
                commit_info=info,
            )
        except Exception as e:  # the commit landed; a missing state only costs read speed
            log.warning("%s: state at version %d failed: %s", self.uri, version, e)
        if won and self.config.state_manifest_format == "avro":
            return manifest, False
        try:
            existing = read_state_manifest(self.store, version)
            ghost = existing is not None and is_ghost_beside(
                self.store, existing, final, self.config.state_read_parallelism
            )
        except IndexTablesError as e:
            log.warning("%s: cannot check the state of version %d: %s", self.uri, version, e)
            return manifest, False
        if not ghost:
            return manifest, False
        log.warning(
            "%s: version %d was committed concurrently as a state only (an IndexTables4Spark 0.5.x writer); "
            "withdrawing this commit's version file and retrying at the next version",
            self.uri,
            version,
        )
        self.store.delete(f"{LOG_DIR}/{version_file(version)}")
        if won:  # our _manifest.json beside their _manifest.avro
            self.store.delete(f"{LOG_DIR}/{state_dir(version)}/{STATE_MANIFEST_NAMES['json']}")
        return None, True

    def _try_state_commit(
        self, version: int, final: list[Action], head: Head, info: CommitInfoAction
    ) -> tuple[CommitOutcome, StorageError | None, Attempt]:
        """Commit by put-if-absent of ``state-v<version>/_manifest.avro`` (IndexTables4Spark 0.5.x's commit
        point). The commitInfo travels in the state's file metadata; no version file is written."""
        manifest, protocol = self._build_state_commit(version, final, head)
        attempt = Attempt(final, txn_id=info.txn_id, state=manifest)
        try:
            won = put_state(self.store, manifest, protocol, self.config, commit_info=info, commit_point=True)
        except StorageError as e:
            if not e.retryable:
                raise
            log.warning("commit of state version %d: outcome unknown (%s); checking", version, e)
            landed = attempt_landed(self.store, version, attempt)
            return (CommitOutcome.COMMITTED if landed else CommitOutcome.NOT_WRITTEN), e, attempt
        if won:
            if self._stalled_since_listing(commit_state_min_age_hours(self.config)) and reused_deleted_version(
                self.store, version, final, self.config.state_read_parallelism, by_state=True
            ):
                log.warning(
                    "%s: state version %d was committed and deleted by state retention while this commit stalled "
                    "between listing the log and writing; withdrawing this commit's state, which no reader would see",
                    self.uri,
                    version,
                )
                delete_state_directory(self.store, version)
                return CommitOutcome.LOST, None, attempt
            return CommitOutcome.COMMITTED, None, attempt
        landed = attempt_landed(self.store, version, attempt)
        return (CommitOutcome.COMMITTED if landed else CommitOutcome.LOST), None, attempt

    def _build_state_commit(
        self, version: int, final: list[Action], head: Head
    ) -> tuple[StateManifest, ProtocolAction | None]:
        protocol = next((a for a in final if isinstance(a, ProtocolAction)), head.protocol)
        metadata = next((a for a in final if isinstance(a, MetadataAction)), head.metadata)
        if metadata is None:
            raise CorruptLogError(f"{self.uri}: no metaData action at version {head.version}")
        registry = registry_from_configuration(metadata.configuration)
        base = verified_state(self.store, head.version)  # a damaged base: the new state is built from the snapshot
        txns = advance(txns_through(self.store, self._loader.listing, head.version, base), [(version, final)])
        if base is not None:
            built = build_incremental_state(
                self.store, base, [(version, final)], metadata, registry, self.config, streaming_txns=txns
            )
            return built, protocol
        snap = self.snapshot(head.version)
        state = replay(snap.state, [(version, final)], self.uri, lambda v: version_source(self.store, v))
        registry = {**snap.schema_registry, **registry}
        files = state.files.values()
        return build_compacted_state(self.store, version, files, metadata, registry, self.config, txns), protocol

    def _close_checkpoint_ahead(self, head: Head, read_version: int | None) -> tuple[Head, int | None]:
        """``commit_point.close_checkpoint_ahead``, the head it leaves kept."""
        self._head, read_version = close_checkpoint_ahead(self.store, self.config, head, read_version)
        return self._head, read_version

    def _validated_read(
        self, actions: list[Action], read_version: int | None, head: Head, new_files: bool
    ) -> tuple[int, Head, MetadataAction | None]:
        """Check ``actions`` against the table at the version they read; returns that version, the
        head and the metadata there.

        A blind append (``read_version`` None) reads the head. A cleanup racing it may delete the
        state of that head before its live files are read (retentions of 0): the append then reads
        the new head instead, as it would have had it started a moment later. A transaction that
        read a version of its own cannot be checked once that version is gone: CommitConflictError.
        """
        for _ in range(MAX_HEAD_CLEANUPS):
            at = head.version if read_version is None else read_version
            try:
                metadata = self._metadata_at(at, head)
                validate_against_table(
                    actions, metadata, self.uri, at, functools.partial(self._live_paths, at), new_files
                )
                return at, head, metadata
            except VersionNotFoundError as e:
                if read_version is not None:
                    raise CommitConflictError(
                        f"{self.uri}: this transaction read version {read_version}, which log retention "
                        "deleted before the commit could check against it; re-read the table and retry"
                    ) from e
                head = self._refresh_head()
        raise CommitFailedError(
            f"{self.uri}: the table's head was cleaned up {MAX_HEAD_CLEANUPS} times before this append "
            "could read its live files; cleanup retentions of 0 race every writer"
        )

    def _live_paths(self, version: int) -> Iterable[str]:
        """The paths of the files live at ``version`` (what a commit's adds are checked against)."""
        return self.snapshot(version).state.files

    def _read_winner(self, version: int, read_version: int, failures: int) -> list[Action]:
        """The actions of a version committed after ``read_version``, to check conflicts against.

        Log retention may have deleted it already (``purge.txLogRetentionHours`` shorter than the
        transaction). Then nothing can be checked, and, after a failed write, nothing can show
        whether that write landed.
        """
        try:
            return read_version_actions(self.store, version)
        except ObjectNotFoundError as e:
            if read_state_manifest(self.store, version) is not None:
                return self._actions_of_state_version(version)
            if failures:
                raise CommitFailedError(
                    f"{self.uri}: cannot tell whether an earlier attempt of this commit landed: version file "
                    f"{version_file(version)} was already deleted by log retention "
                    "(spark.indextables.purge.txLogRetentionHours); re-read the table before retrying"
                ) from e
            raise CommitConflictError(
                f"{self.uri}: version {version}, committed after this transaction read version {read_version}, "
                "was deleted by log retention (spark.indextables.purge.txLogRetentionHours) before its "
                "conflicts could be checked; re-read the table and retry"
            ) from e

    def _actions_of_state_version(self, version: int) -> list[Action]:
        """What a version committed as a state only did, as actions (the states before and at it,
        compared): only read when this writer lost a race to such a version, to check conflicts."""
        try:
            before, after = self._loader.load(version - 1).state, self._loader.load(version).state
        except (ObjectNotFoundError, MissingLogFileError, VersionNotFoundError) as e:
            raise CommitConflictError(
                f"{self.uri}: version {version} was committed as a state only and the version before it is no "
                "longer retained, so its conflicts cannot be checked; re-read the table and retry"
            ) from e
        actions: list[Action] = []
        if after.protocol != before.protocol and after.protocol is not None:
            actions.append(after.protocol)
        if after.metadata != before.metadata and after.metadata is not None:
            actions.append(after.metadata)
        actions += [a for p, a in after.files.items() if p not in before.files]
        now = int(time.time() * 1000)
        gone = [p for p in before.files if p not in after.files]
        actions += [RemoveAction(path=p, deletion_timestamp=now, data_change=True) for p in gone]
        return actions

    def _backoff(self, attempt: int) -> None:
        cap = min(self.config.retry_max_delay_ms, self.config.retry_base_delay_ms * (2 ** (attempt - 1)))
        time.sleep(random.uniform(cap / 4, cap) / 1000.0)

    def _stalled_since_listing(self, min_age_hours: float) -> bool:
        """Whether half ``min_age_hours`` (how old the commit points of versions must be before a
        cleanup deletes them) passed since the head was listed: enough, with a skewed clock, for a
        version committed after that listing to be deleted by now."""
        return time.monotonic() - self._head_listed_at >= min_age_hours * 3600 / 2

    def _refresh_head(self) -> Head:
        """Latest version, protocol and metadata, reading only version files newer than known."""
        self._head_listed_at = time.monotonic()
        head = self._head
        if head is not None:
            listing = list_log(self.store, head.version)
            latest = listing.latest
            new = [v for v in range(head.version + 1, latest + 1)]
            if all(v in listing.versions for v in new):
                try:
                    self._head = head_after(head, [read_version_actions(self.store, v) for v in new])
                    return self._head
                except ObjectNotFoundError:  # log retention deleted one meanwhile: load from its checkpoint
                    pass
        cached = self._snapshot
        snap = self._refresh_snapshot() if cached is not None else self._loader.load(files=False)
        self._head = head_of(self.store, snap)
        return self._head

    def _metadata_at(self, version: int, head: Head) -> MetadataAction | None:
        if version == head.version:
            return head.metadata
        return self.snapshot(version).state.metadata

    def _after_commit(
        self, version: int, final: list[Action], head: Head, state: StateManifest | None, by_state: bool
    ) -> None:
        """Bookkeeping after ``version`` landed (its state, if any, is written): the head, the
        ``_last_checkpoint`` hint, and the checkpoint cadence. Failures are logged, not raised."""
        protocol = next((a for a in final if isinstance(a, ProtocolAction)), head.protocol)
        metadata = next((a for a in final if isinstance(a, MetadataAction)), head.metadata)
        self._head = Head(version, protocol, metadata, by_state)
        try:
            config = self.config
            at_interval = config.checkpoint_enabled and version > 0 and version % config.checkpoint_interval == 0
            if state is not None:
                write_state_hint(self.store, state)
            if self._uses_avro_state(protocol):
                if at_interval:  # every commit writes a state: the checkpoint cadence paces the cleanup
                    checkpointing.expire_after_checkpoint_quietly(self, version)
            elif at_interval:  # a v1-v3 table (whatever state.format says: upgrading is checkpoint()'s job)
                checkpointing.write_json_checkpoint(self, self.snapshot(version))
        except Exception as e:  # the commit landed; a missing checkpoint only costs read speed
            log.warning("%s: checkpoint at version %d failed: %s", self.uri, version, e)

    def _uses_avro_state(self, protocol: ProtocolAction | None) -> bool:
        return uses_avro_state(self.config, protocol)

    def checkpoint(self, version: int | None = None) -> checkpoints.LastCheckpoint:
        """Consolidate the state at ``version`` (default: latest); see ``log.maintenance.checkpointing.checkpoint``."""
        return checkpointing.checkpoint(self, version)

    def cleanup(self, dry_run: bool = False) -> CleanupReport:
        """Delete states, manifests, version files and checkpoints past retention (see ``log.maintenance.cleanup``)."""
        return checkpointing.cleanup(self, dry_run)

    def write_state(
        self,
        version: int,
        force_compaction: bool = False,
        known_actions: Mapping[int, list[Action]] | None = None,
    ) -> StateManifest:
        """Write the Avro state of ``version``: incrementally on the newest earlier state when there is one.

        ``known_actions`` are version files the caller already holds (a commit's own actions), not read again.
        An existing state manifest of the version is kept (it describes the same state).
        """
        manifest, _ = write_state(
            self.store, self.config, self._loader.listing, self.snapshot, version, force_compaction, known_actions
        )
        return manifest

    # --- streaming transactions --------------------------------------------------------------

    def commit_streaming_batch(
        self,
        actions: Iterable[Action],
        txn: StreamingTxn,
        *,
        operation_parameters: dict[str, str] | None = None,
        new_files: bool = False,
    ) -> int | None:
        """Commit one streaming micro-batch exactly once: its version, or None if the table already
        holds this application's batch ``txn.batch_id`` or a later one (nothing is written then).

        Needs a table with Avro state (the map of transactions lives there, PROTOCOL.md §5)."""
        head = self._refresh_head()
        if not self._uses_avro_state(head.protocol):
            raise ConfigError(
                f"{self.uri}: streaming writes need the Avro state format (protocol v4, spark.indextables.state."
                "format=avro), which records the streaming transaction identifiers; run CHECKPOINT "
                "INDEXTABLES (indextables checkpoint) to upgrade the table"
            )
        params = {**(operation_parameters or {}), "appId": txn.app_id, "batchId": str(txn.batch_id)}
        try:
            return self.commit(
                actions,
                operation="STREAMING UPDATE",
                operation_parameters=params,
                streaming_txn=txn,
                new_files=new_files,
            )
        except BatchAlreadyCommittedError as e:
            log.info("%s", e)
            return None

    def streaming_txns(self, version: int | None = None) -> dict[str, TxnRecord]:
        """``appId -> the last streaming batch committed`` at ``version`` (default: latest)."""
        target = self.latest_version() if version is None else version
        return txns_through(self.store, self._loader.listing, target, None)

    def _check_new_batch(self, txn: StreamingTxn, head: Head) -> None:
        known = txns_through(self.store, self._loader.listing, head.version, None).get(txn.app_id)
        if known is not None and known.batch_id >= txn.batch_id:
            raise BatchAlreadyCommittedError(
                f"{self.uri}: streaming batch {txn.batch_id} of {txn.app_id!r} is already committed (version "
                f"{known.version} holds batch {known.batch_id}); skipped"
            )
