"""The transaction log of one table: snapshots, commits with optimistic concurrency, history.

Commit protocol (see PROTOCOL.md, "Commits"):

1. Validate the actions (nothing is written for invalid input).
2. Find the latest version L by listing past the newest known version (only new
   version files are read: a commit costs O(new commits + its own actions), not O(table)).
3. Check conflicts against every version committed after the transaction's read version.
4. Write ``<L+1>.json`` with put-if-absent. Its first line is a ``commitInfo`` action
   holding a fresh transaction id.
5. If the put failed or its outcome is unknown, read ``<L+1>.json`` back: the own
   transaction id means the commit landed (an ambiguous success is not retried, so
   there are no duplicates); another id means the race was lost, go back to 2 after a
   jittered exponential backoff; no file means the write did not land, retry it.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from executor_lib.errors import (
    CommitConflictError,
    CommitFailedError,
    IndexTablesError,
    InvalidActionError,
    InvalidPathError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    StorageError,
    VersionNotFoundError,
)
from executor_lib.log import checkpoint as checkpoints
from executor_lib.log.avro_state import StateManifest, read_state_manifest
from executor_lib.log.cleanup import CleanupReport, cleanup_log, expire_after_checkpoint
from executor_lib.log.config import LogConfig
from executor_lib.log.conflicts import CommitIntent, check_conflicts
from executor_lib.log.snapshot import Snapshot, SnapshotLoader, check_writable, list_log, read_version_actions
from executor_lib.log.split_schema import check_split_schema
from executor_lib.log.state import replay
from executor_lib.log.state_writer import write_compacted_state, write_incremental_state
from executor_lib.protocol.actions import (
    Action,
    AddAction,
    CommitInfoAction,
    MetadataAction,
    ProtocolAction,
    RemoveAction,
    SkipAction,
    actions_to_ndjson,
)
from executor_lib.protocol.files import LOG_DIR, encode_log_bytes, state_dir, version_file
from executor_lib.protocol.schema_registry import (
    configuration_with_registry,
    doc_mapping_hash,
    registry_from_configuration,
)
from executor_lib.storage.base import ObjectStore, table_key

log = logging.getLogger(__name__)

ENGINE = "indextables-python/0.1.0"
# Lost races are progress (another commit landed), so they do not use up retry attempts;
# this only bounds a pathological livelock.
MAX_LOST_RACES = 10_000
_ACTION_CLASSES = (ProtocolAction, MetadataAction, AddAction, RemoveAction, SkipAction)


@dataclass(frozen=True)
class _Head:
    """What a writer must know about the latest version (no file list)."""

    version: int
    protocol: ProtocolAction | None
    metadata: MetadataAction | None


@dataclass(frozen=True)
class HistoryEntry:
    version: int
    timestamp_ms: int | None
    operation: str | None
    txn_id: str | None
    num_added_files: int
    num_removed_files: int
    num_added_records: int
    source: str  # "version file" or "state" (a version only recorded as Avro state)
    num_files: int | None = None  # live files after this version (known for state-only versions)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "timestamp": self.timestamp_ms,
            "operation": self.operation,
            "txnId": self.txn_id,
            "numAddedFiles": self.num_added_files,
            "numRemovedFiles": self.num_removed_files,
            "numAddedRecords": self.num_added_records,
            "source": self.source,
            "numFiles": self.num_files,
        }


@dataclass(frozen=True)
class FileListing:
    """The result of ``TransactionLog.list_files``: matching files and how much state was read."""

    version: int
    files: list[AddAction]
    manifests_total: int
    manifests_read: int


class TransactionLog:
    """The ``_transaction_log/`` of one table."""

    def __init__(self, store: ObjectStore, config: LogConfig | None = None) -> None:
        self.store = store
        self.config = config or LogConfig()
        self._loader = SnapshotLoader(store, self.config)
        self._head: _Head | None = None
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
            raise ValueError("give either version or timestamp_ms, not both")
        if timestamp_ms is not None:
            version = self._loader.version_at_timestamp(timestamp_ms)
        if version is None:
            snap = self._refresh_snapshot()
        elif self._snapshot is not None and self._snapshot.version == version:
            snap = self._snapshot
        else:
            snap = self._loader.load(version)
        return snap

    def _refresh_snapshot(self) -> Snapshot:
        """Latest snapshot, updated incrementally from the cached one when possible."""
        cached = self._snapshot
        if cached is not None:
            listing = list_log(self.store, cached.version)
            new = sorted(v for v in listing.versions if v > cached.version)
            latest = listing.latest
            if latest == cached.version and cached.version in {
                *listing.versions,
                *listing.states,
                *listing.checkpoints,
            }:
                return cached
            if latest > cached.version and new == list(range(cached.version + 1, latest + 1)):
                try:
                    state = replay(cached.state, ((v, read_version_actions(self.store, v)) for v in new))
                except ObjectNotFoundError:  # log retention got there first: load from its checkpoint
                    pass
                else:
                    base = f"cached version {cached.version} + version files {new[0]}..{new[-1]}"
                    self._snapshot = Snapshot(self.uri, state, base, listing.versions.get(latest))
                    return self._snapshot
        self._snapshot = self._loader.load()
        return self._snapshot

    def list_files(self, predicates: Sequence[Any] = (), version: int | None = None) -> FileListing:
        """Files that may hold rows matching all ``predicates`` (a conjunction of
        ``log.pruning.Eq/In/Range`` on partition and statistics columns).

        On an Avro state, manifests whose partition bounds cannot match are not read at all;
        then each file is checked against its partition values and min/max statistics.
        """
        snap = self._loader.load(version, predicates)
        manifests = snap.state_manifest.manifests if snap.state_manifest is not None else ()
        from executor_lib.log.pruning import bounds_may_match, column_types

        types = column_types(snap.metadata.schema_string) if predicates else {}
        read = sum(1 for m in manifests if not predicates or bounds_may_match(m.partition_bounds, predicates, types))
        return FileListing(snap.version, snap.list_files(predicates), len(manifests), read)

    def history(self, limit: int | None = None) -> list[HistoryEntry]:
        """Commits newest first: one entry per retained version file or state-only version."""
        listing = list_log(self.store)
        entries: list[HistoryEntry] = []
        for v in sorted(set(listing.versions) | listing.states, reverse=True):
            if limit is not None and len(entries) >= limit:
                break
            entries.append(self._history_entry(v, listing.versions.get(v)))
        return entries

    def _history_entry(self, version: int, modified_ms: int | None) -> HistoryEntry:
        if modified_ms is None:
            from executor_lib.log.avro_state import read_state_manifest

            manifest = read_state_manifest(self.store, version)
            return HistoryEntry(
                version,
                manifest.created_at if manifest else None,
                None,
                None,
                0,
                0,
                0,
                "state",
                num_files=manifest.num_files if manifest else None,
            )
        actions = read_version_actions(self.store, version)
        info = next((a for a in actions if isinstance(a, CommitInfoAction)), None)
        adds = [a for a in actions if isinstance(a, AddAction)]
        return HistoryEntry(
            version=version,
            timestamp_ms=info.timestamp if info else modified_ms,
            operation=info.operation if info else _guess_operation(actions),
            txn_id=info.txn_id if info else None,
            num_added_files=len(adds),
            num_removed_files=sum(isinstance(a, RemoveAction) for a in actions),
            num_added_records=sum(a.num_records or 0 for a in adds),
            source="version file",
        )

    # --- writing ---------------------------------------------------------------------------

    def commit(
        self,
        actions: Iterable[Action],
        *,
        read_version: int | None = None,
        operation: str = "WRITE",
        operation_parameters: dict[str, str] | None = None,
        fail_on_concurrent_add: bool = False,
    ) -> int:
        """Append one version holding ``actions``; returns its number.

        ``read_version`` is the version the transaction read (default: the latest at
        call time, i.e. a blind append). Raises CommitConflictError when a commit after
        ``read_version`` conflicts, CommitFailedError when retries are exhausted.
        """
        actions = list(actions)
        _validate_static(actions, self.store.root_uri)
        head = self._refresh_head()
        check_writable(head.protocol, self.uri)
        if read_version is None:
            read_version = head.version
        elif read_version > head.version:
            raise VersionNotFoundError(f"{self.uri}: read version {read_version} is newer than {head.version}")
        metadata_at_read = self._metadata_at(read_version, head)
        self._validate_against_table(actions, metadata_at_read, read_version)
        intent = CommitIntent.of(actions, metadata_at_read, fail_on_concurrent_add)
        txn_id = uuid.uuid4().hex
        winners: dict[int, list[Action]] = {}
        failures = lost_races = 0
        last_error: StorageError | None = None
        while failures < self.config.retry_max_attempts and lost_races < MAX_LOST_RACES:
            for v in range(read_version + 1, head.version + 1):
                if v not in winners:
                    winners[v] = self._read_winner(v, read_version, failures)
                    if _owner(winners[v]) == txn_id:  # an earlier attempt landed after all
                        self._after_commit(v, winners[v], head)
                        self.commit_stats["committed"] += 1
                        return v
            check_conflicts(intent, read_version, sorted(winners.items()), metadata_at_read)
            final = self._finalize(actions, head)
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
            outcome, error = self._try_write(version, [info, *final], txn_id)
            if outcome == "committed":
                self._after_commit(version, final, head)
                self.commit_stats["committed"] += 1
                return version
            if outcome == "lost":
                # Someone else holds the version: that is progress, not a failure. Re-check
                # the winners for conflicts and try the next version after a short jitter.
                lost_races += 1
                self.commit_stats["lost_races"] += 1
                self._backoff(min(lost_races, 4))
            else:
                failures += 1
                self.commit_stats["failed_writes"] += 1
                last_error = error
                self._backoff(failures)
            head = self._refresh_head()
        reason = f"last error: {last_error}" if last_error else f"lost {lost_races} races to concurrent writers"
        raise CommitFailedError(
            f"{self.uri}: commit not written after {failures} failed writes and {lost_races} lost races ({reason})"
        ) from last_error

    def _read_winner(self, version: int, read_version: int, failures: int) -> list[Action]:
        """The actions of a version committed after ``read_version``, to check conflicts against.

        Log retention may have deleted it already (``purge.txLogRetentionHours`` shorter than the
        transaction). Then nothing can be checked, and, after a failed write, nothing can show
        whether that write landed.
        """
        try:
            return read_version_actions(self.store, version)
        except ObjectNotFoundError as e:
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

    def _try_write(self, version: int, actions: Sequence[Action], txn_id: str) -> tuple[str, StorageError | None]:
        """Returns ("committed" | "lost" | "not-written", the storage error seen if any).

        "lost": another commit holds the version. A storage error that cannot be transient
        (access denied, missing bucket, bad credentials) is raised at once.
        """
        key = f"{LOG_DIR}/{version_file(version)}"
        body = encode_log_bytes(actions_to_ndjson(actions), self.config.compression_enabled, self.config.gzip_level)
        error: StorageError | None = None
        try:
            self.store.put_if_absent(key, body, metadata={"indextables-txn-id": txn_id})
            return "committed", None
        except ObjectAlreadyExistsError:
            pass  # maybe our own write, retried by the SDK after a lost response
        except StorageError as e:  # ambiguous: the write may have landed
            if not e.retryable:
                raise
            error = e
            log.warning("commit of version %d: outcome unknown (%s); checking", version, e)
        try:
            written = read_version_actions(self.store, version)
        except ObjectNotFoundError:
            return "not-written", error
        except StorageError as e:
            log.warning("commit of version %d: cannot read it back (%s)", version, e)
            return "not-written", e
        return ("committed" if _owner(written) == txn_id else "lost"), None

    def _backoff(self, attempt: int) -> None:
        cap = min(self.config.retry_max_delay_ms, self.config.retry_base_delay_ms * (2 ** (attempt - 1)))
        time.sleep(random.uniform(cap / 4, cap) / 1000.0)

    def _refresh_head(self) -> _Head:
        """Latest version, protocol and metadata, reading only version files newer than known."""
        head = self._head
        if head is not None:
            listing = list_log(self.store, head.version)
            latest = listing.latest
            new = [v for v in range(head.version + 1, latest + 1)]
            if all(v in listing.versions for v in new):
                try:
                    self._head = _head_after(head, [read_version_actions(self.store, v) for v in new])
                    return self._head
                except ObjectNotFoundError:  # log retention deleted one meanwhile: load from its checkpoint
                    pass
        snap = self._refresh_snapshot()
        self._head = _Head(snap.version, snap.protocol, snap.state.metadata)
        return self._head

    def _metadata_at(self, version: int, head: _Head) -> MetadataAction | None:
        if version == head.version:
            return head.metadata
        return self.snapshot(version).state.metadata

    def _validate_against_table(
        self, actions: list[Action], metadata: MetadataAction | None, read_version: int
    ) -> None:
        new_meta = next((a for a in actions if isinstance(a, MetadataAction)), None)
        effective = new_meta or metadata
        partition_columns = set(effective.partition_columns) if effective else set()
        registry = registry_from_configuration(effective.configuration) if effective else {}
        for a in actions:
            if not isinstance(a, AddAction):
                continue
            if set(a.partition_values) != partition_columns:
                raise InvalidActionError(
                    f"add {a.path!r}: partition values {sorted(a.partition_values)} do not match the table's "
                    f"partition columns {sorted(partition_columns)}"
                )
            mapping = a.doc_mapping_json or (registry.get(a.doc_mapping_ref) if a.doc_mapping_ref else None)
            if effective is not None and mapping is not None:
                check_split_schema(a.path, mapping, effective.schema_string, effective.partition_columns, self.uri)
        removed = [a.path for a in actions if isinstance(a, RemoveAction)]
        if removed:
            live = self.snapshot(read_version).state.files
            gone = [p for p in removed if p not in live]
            if gone:
                raise InvalidActionError(
                    f"remove of {gone[0]!r}: the file is not live at read version {read_version}"
                    + (f" (and {len(gone) - 1} more)" if len(gone) > 1 else "")
                )

    def _finalize(self, actions: list[Action], head: _Head) -> list[Action]:
        """Deduplicate doc mappings against the latest registry (adding a metaData line if needed)."""
        user_meta = next((a for a in actions if isinstance(a, MetadataAction)), None)
        base_meta = user_meta or head.metadata
        registry = registry_from_configuration(base_meta.configuration) if base_meta else {}
        if head.metadata is not None and user_meta is not None:
            registry = {**registry_from_configuration(head.metadata.configuration), **registry}
        new_entries: dict[str, str] = {}
        out: list[Action] = []
        for a in actions:
            if isinstance(a, AddAction) and a.doc_mapping_json is not None:
                ref = doc_mapping_hash(a.doc_mapping_json)
                if ref not in registry:
                    new_entries[ref] = a.doc_mapping_json
                    registry[ref] = a.doc_mapping_json
                a = dataclasses.replace(a, doc_mapping_ref=ref, doc_mapping_json=None)
            if not isinstance(a, MetadataAction):
                out.append(a)
        if base_meta is None:
            return out
        if user_meta is not None or new_entries:
            meta = base_meta.with_configuration(configuration_with_registry(base_meta.configuration, registry))
            out.insert(0, meta)
        protocol = next((a for a in actions if isinstance(a, ProtocolAction)), None)
        if protocol is not None:
            out.remove(protocol)
            out.insert(0, protocol)
        return out

    def _after_commit(self, version: int, final: list[Action], head: _Head) -> None:
        protocol = next((a for a in final if isinstance(a, ProtocolAction)), head.protocol)
        metadata = next((a for a in final if isinstance(a, MetadataAction)), head.metadata)
        self._head = _Head(version, protocol, metadata)
        try:
            config = self.config
            at_interval = config.checkpoint_enabled and version > 0 and version % config.checkpoint_interval == 0
            if self._uses_avro_state(protocol):
                self.write_state(version, known_actions={version: final})
                if at_interval:  # every commit writes a state: the checkpoint cadence paces the cleanup
                    self._expire_after_checkpoint(version)
            elif at_interval:  # a v1-v3 table (whatever state.format says: upgrading is checkpoint()'s job)
                self._write_json_checkpoint(self.snapshot(version))
        except Exception as e:  # the commit landed; a missing state/checkpoint only costs read speed
            log.warning("%s: state/checkpoint at version %d failed: %s", self.uri, version, e)

    def _uses_avro_state(self, protocol: ProtocolAction | None) -> bool:
        return self.config.state_format == "avro" and protocol is not None and protocol.min_writer_version >= 4

    def checkpoint(self, version: int | None = None) -> checkpoints.LastCheckpoint:
        """Consolidate the state at ``version`` (default: latest).

        With ``state.format=avro`` (default): a v3 table is first upgraded to protocol v4
        (one commit), then the Avro state of the latest version is written compacted, if
        it does not exist yet. With ``state.format=json``: a JSON checkpoint.
        """
        snap = self.snapshot(version)
        check_writable(snap.protocol, self.uri)
        if self.config.state_format != "avro":
            return self._write_json_checkpoint(snap)
        if not self._uses_avro_state(snap.protocol):
            if version is not None:
                raise InvalidActionError("upgrading a table to the Avro state format needs the latest version")
            self.commit([_v4_protocol(snap.protocol)], operation="UPGRADE PROTOCOL", read_version=snap.version)
            return self._last_state_info()
        existing = read_state_manifest(self.store, snap.version)
        manifest = existing or self.write_state(snap.version, force_compaction=True)
        info = _state_checkpoint_info(manifest)
        checkpoints.write_last_checkpoint_if_newer(self.store, info)
        self._expire_after_checkpoint(snap.version)
        return info

    def _write_json_checkpoint(self, snap: Snapshot) -> checkpoints.LastCheckpoint:
        written = checkpoints.write_checkpoint(self.store, snap.state, self.config)
        self._expire_after_checkpoint(snap.version)
        return written

    def _expire_after_checkpoint(self, version: int) -> None:
        """The cleanup every checkpoint ends with (``log.cleanup.expire_after_checkpoint``); its
        failure is logged, not raised: the checkpoint is written, and the next one tries again."""
        if not self.config.checkpoint_cleanup_enabled:
            return
        try:
            report = expire_after_checkpoint(self.store, self.config, version)
        except IndexTablesError as e:
            log.warning("%s: cleanup after the checkpoint at version %d failed: %s", self.uri, version, e)
            return
        if report.deleted_states or report.deleted_version_files:
            log.info(
                "%s: after the checkpoint at version %d, deleted %d expired states and %d version files",
                self.uri, version, len(report.deleted_states), len(report.deleted_version_files),
            )  # fmt: skip

    def cleanup(self, dry_run: bool = False) -> CleanupReport:
        """Delete states, manifests, version files and checkpoints past retention (see ``log.cleanup``)."""
        check_writable(self.snapshot().protocol, self.uri)
        return cleanup_log(self.store, self.config, dry_run=dry_run)

    def _last_state_info(self) -> checkpoints.LastCheckpoint:
        version = self.latest_version()
        manifest = read_state_manifest(self.store, version) or self.write_state(version)
        return _state_checkpoint_info(manifest)

    def write_state(
        self,
        version: int,
        force_compaction: bool = False,
        known_actions: Mapping[int, list[Action]] | None = None,
    ) -> StateManifest:
        """Write the Avro state of ``version``: incrementally on the newest earlier state when there is one.

        ``known_actions`` are version files the caller already holds (a commit's own actions), not read again.
        """
        known = known_actions or {}
        base = self._newest_state_before(version)
        versions: list[tuple[int, list[Action]]] | None = None
        if base is not None:
            try:
                versions = [
                    (v, known[v] if v in known else read_version_actions(self.store, v))
                    for v in range(base.state_version + 1, version + 1)
                ]
            except ObjectNotFoundError:
                versions = None
        protocol, metadata = _latest_protocol_and_metadata(versions or [], base)
        if base is None or versions is None or protocol is None or metadata is None or not versions:
            snap = self.snapshot(version)
            manifest = write_compacted_state(
                self.store, version, snap.files, snap.protocol, snap.metadata, dict(snap.schema_registry), self.config
            )
        else:
            registry = registry_from_configuration(metadata.configuration)
            manifest = write_incremental_state(
                self.store, base, versions, protocol, metadata, registry, self.config, force_compaction
            )
        checkpoints.write_last_checkpoint_if_newer(self.store, _state_checkpoint_info(manifest))
        return manifest

    def _newest_state_before(self, version: int) -> StateManifest | None:
        """The newest state below ``version``: usually ``version - 1`` (every commit writes one), so
        probe the last few directly before listing (a listing of all states grows with history)."""
        for v in range(version - 1, max(version - 4, 0), -1):
            manifest = read_state_manifest(self.store, v)
            if manifest is not None:
                return manifest
        listing = self._loader.listing(version - 1)
        for v in sorted((s for s in listing.states if s < version - 3), reverse=True)[:3]:
            manifest = read_state_manifest(self.store, v)
            if manifest is not None:
                return manifest
        return None


def _head_after(head: _Head, versions: list[list[Action]]) -> _Head:
    """``head`` moved past the actions of the versions that follow it."""
    protocol, metadata = head.protocol, head.metadata
    for actions in versions:
        for a in actions:
            if isinstance(a, ProtocolAction):
                protocol = a
            elif isinstance(a, MetadataAction):
                metadata = a
    return _Head(head.version + len(versions), protocol, metadata)


def _v4_protocol(current: ProtocolAction | None) -> ProtocolAction:
    reader = set(current.reader_features or ()) if current else set()
    writer = set(current.writer_features or ()) if current else set()
    return ProtocolAction(
        min_reader_version=max(4, current.min_reader_version if current else 4),
        min_writer_version=max(4, current.min_writer_version if current else 4),
        reader_features=frozenset(reader | {"avroState"}),
        writer_features=frozenset(writer | {"avroState"}),
    )


def _latest_protocol_and_metadata(
    versions: Sequence[tuple[int, Sequence[Action]]], base: StateManifest | None
) -> tuple[ProtocolAction | None, MetadataAction | None]:
    protocol: ProtocolAction | None = None
    metadata: MetadataAction | None = None
    for _, actions in versions:
        for a in actions:
            if isinstance(a, ProtocolAction):
                protocol = a
            elif isinstance(a, MetadataAction):
                metadata = a
    if base is not None:
        protocol = protocol or base.protocol()
        metadata = metadata or base.metadata()
    return protocol, metadata


def _state_checkpoint_info(manifest: StateManifest) -> checkpoints.LastCheckpoint:
    return checkpoints.LastCheckpoint(
        version=manifest.state_version,
        size=manifest.num_files,
        size_in_bytes=manifest.total_bytes,
        num_files=manifest.num_files,
        created_time=manifest.created_at,
        format=checkpoints.FORMAT_AVRO_STATE,
        state_dir=state_dir(manifest.state_version),
    )


def _owner(actions: Sequence[Action]) -> str | None:
    """The transaction id recorded in a version's commitInfo."""
    return next((a.txn_id for a in actions if isinstance(a, CommitInfoAction)), None)


def _guess_operation(actions: Sequence[Action]) -> str | None:
    kinds = {type(a) for a in actions}
    if MetadataAction in kinds and ProtocolAction in kinds:
        return "CREATE TABLE"
    if AddAction in kinds and RemoveAction in kinds:
        return "REPLACE"
    if AddAction in kinds:
        return "WRITE"
    if RemoveAction in kinds:
        return "DELETE"
    return None


def _validate_static(actions: list[Action], root_uri: str) -> None:
    """Checks that need no table state but its root; raise InvalidActionError before anything is written.

    A path and the full URI of the same file (inside the table root) are one file (``table_key``)."""
    if not actions:
        raise InvalidActionError("a commit needs at least one action")
    seen_add: set[str] = set()
    seen_remove: set[str] = set()
    counts = {"protocol": 0, "metaData": 0}
    for a in actions:
        if isinstance(a, CommitInfoAction):
            raise InvalidActionError("commitInfo is written by the log itself; do not pass one")
        if not isinstance(a, _ACTION_CLASSES):
            raise InvalidActionError(f"not a transaction-log action: {type(a).__name__}")
        if a.ACTION_KEY in counts:
            counts[a.ACTION_KEY] += 1
        key = _check_path(a.path, root_uri) if isinstance(a, (AddAction, RemoveAction, SkipAction)) else ""
        if isinstance(a, AddAction):
            if key in seen_add:
                raise InvalidActionError(f"file {a.path!r} is added twice in one commit")
            if a.size < 0 or (a.num_records is not None and a.num_records < 0):
                raise InvalidActionError(f"add {a.path!r}: size and numRecords must not be negative")
            seen_add.add(key)
        elif isinstance(a, RemoveAction):
            seen_remove.add(key)
    both = seen_add & seen_remove
    if both:
        raise InvalidActionError(f"file {sorted(both)[0]!r} is both added and removed in one commit")
    for key, n in counts.items():
        if n > 1:
            raise InvalidActionError(f"a commit may hold at most one {key} action, got {n}")


def _check_path(path: str, root_uri: str) -> str:
    """The storage key of an action's path (PROTOCOL.md §1); InvalidActionError for a malformed path or a
    full URI outside the table root (nothing outside the table is ever read or deleted through it)."""
    try:
        return table_key(root_uri, path)
    except InvalidPathError as e:
        raise InvalidActionError(f"{root_uri}: {e}") from e
