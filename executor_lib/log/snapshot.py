"""Building snapshots: the newest checkpoint/state at or below the target version, plus the version
files after it, found by a listing of the log (``log.state.version_files``).

``_last_checkpoint`` is only a hint: the listing always starts at it and goes on to the
end, so versions, checkpoints and states written after it (a writer may crash between
committing and updating the hint) are found. Zero-padded names make that listing a
``start_after`` query rather than a scan of the whole log.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import logging
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from executor_lib.log.config import LogConfig
from executor_lib.log.files.live_files import LiveFiles, last_entries
from executor_lib.log.files.partition_index import present_values
from executor_lib.log.state import avro_state
from executor_lib.log.state.checkpoint import read_checkpoint_actions, read_last_checkpoint
from executor_lib.log.state.foreign_states import has_version_file, holds, holds_version, is_checkpoint_past_the_log
from executor_lib.log.state.state import EMPTY_STATE, TableState, replay, state_spellings
from executor_lib.log.state.version_files import (
    LogListing,
    check_readable,
    list_log,
    list_log_versions,
    read_version_actions,
    version_source,
)
from executor_lib.protocol.actions import (
    AddAction,
    CommitInfoAction,
    MetadataAction,
    ProtocolAction,
)
from executor_lib.protocol.files import (
    LOG_DIR,
    checkpoint_file,
    state_dir,
    version_file,
    version_name,
)
from executor_lib.protocol.schema_registry import registry_from_configuration
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import (
    CorruptLogError,
    MissingLogFileError,
    ObjectNotFoundError,
    TableNotFoundError,
    VersionNotFoundError,
)

log = logging.getLogger(__name__)


def _can_read_past(listing: LogListing, older: Sequence[tuple[int, str]], version: int, passed: set[int]) -> bool:
    """Whether the table at ``version`` can be read without its state: from the next ``older`` base
    (or from nothing) and the version files up to it. A partial listing with no older base says yes:
    the full listing it then needs decides."""
    if not older and not listing.complete:
        return True
    first = older[0][0] + 1 if older else 0
    return all(v in listing.versions or v in passed for v in range(first, version))


def _all_retained(listing: LogListing, first: int, last: int) -> bool:
    """Whether the version files ``first``..``last`` are all listed (an exact replay is possible)."""
    return all(v in listing.versions for v in range(first, last + 1))


class Snapshot:
    """The table at one version: protocol, metadata and live files."""

    def __init__(
        self,
        table_uri: str,
        state: TableState,
        base: str,
        timestamp_ms: int | None = None,
        state_manifest: avro_state.StateManifest | None = None,
    ) -> None:
        self.state_manifest = state_manifest  # the Avro state the snapshot was built on, if any
        self.pruned = False  # built with manifest pruning: ``files`` holds a superset of the matches only
        self.table_uri = table_uri
        self._state = state
        self.base = base  # what the snapshot was built from, e.g. "state-v…", "checkpoint 10", "log"
        self.timestamp_ms = timestamp_ms
        self._mapping_texts: frozenset[str | None] | None = None  # doc_mapping_texts, made once

    @property
    def version(self) -> int:
        return self._state.version

    @property
    def state(self) -> TableState:
        return self._state

    @property
    def protocol(self) -> ProtocolAction | None:
        return self._state.protocol

    @property
    def metadata(self) -> MetadataAction:
        if self._state.metadata is None:
            raise CorruptLogError(f"{self.table_uri}: no metaData action at version {self.version}")
        return self._state.metadata

    @property
    def files(self) -> list[AddAction]:
        """Every live file as an ``AddAction``: the slow path (a million files: seconds and gigabytes).
        Prefer ``num_files``, ``file_columns`` (Arrow) or ``list_files(predicates)`` (the files of the
        partitions a predicate selects)."""
        return list(self._state.files.values())

    @property
    def num_files(self) -> int:
        """How many files are live (no file is built)."""
        return len(self._state.files)

    def file_columns(self, attributes: Sequence[str], predicates: Sequence[Any] = ()) -> Any:
        """The live files' ``attributes`` (``AddAction`` attribute names) as a ``pyarrow.Table``, a row
        per file, without an object per file; with ``predicates``, only the files of the partitions
        they may match (partition values judged once per distinct partition; statistics not judged).

        Example: ``snapshot.file_columns(["path", "num_records"], [Term("day", "2024-01-01")])``
        """
        from executor_lib.log.files.live_files import file_columns

        meta = self.metadata
        if not predicates or not meta.partition_columns:
            return file_columns(self._state.files, attributes)
        from executor_lib.log.files.pruning import partition_judge

        keep = partition_judge(predicates, meta.schema_string, meta.partition_columns)
        return file_columns(self._state.files, attributes, keep, meta.partition_columns)

    @property
    def schema_registry(self) -> Mapping[str, str]:
        return self._state.schema_registry

    @property
    def partition_columns(self) -> tuple[str, ...]:
        return tuple(self.metadata.partition_columns)

    @property
    def num_records(self) -> int:
        files = self._state.files
        if isinstance(files, LiveFiles):
            return files.total("num_records")
        return sum(a.num_records or 0 for a in files.values())

    @property
    def size_in_bytes(self) -> int:
        files = self._state.files
        if isinstance(files, LiveFiles):
            return files.total("size")
        return sum(a.size for a in files.values())

    def list_files(self, predicates: Sequence[Any] = ()) -> list[AddAction]:
        """Live files that may hold rows matching all ``predicates`` (see ``log.files.pruning``).

        On an Avro state's columnar files, partition predicates are judged once per distinct
        combination of partition values, comparisons on numeric columns on the statistics' columns at
        scale (``pruning.prune_snapshot``), and only the files they keep become objects.
        """
        from executor_lib.log.files.pruning import prune_snapshot

        if not predicates:
            return self.files
        return prune_snapshot(self, predicates)[0]

    def list_partitions(self, predicates: Sequence[Any]) -> list[AddAction]:
        """The live files of the partitions ``predicates`` may match (their statistics not judged)."""
        from executor_lib.log.files.pruning import partition_judge

        meta = self.metadata
        files = self._state.files
        if not predicates or not meta.partition_columns:
            return list(files.values())
        keep = partition_judge(predicates, meta.schema_string, meta.partition_columns)
        if isinstance(files, LiveFiles):
            return files.select_partitions(keep, meta.partition_columns)
        columns = meta.partition_columns
        return [a for a in files.values() if keep(present_values(a.partition_values, columns))]

    def doc_mapping(self, add: AddAction) -> str | None:
        """The doc mapping JSON of a split: inline, or resolved through the schema registry."""
        if add.doc_mapping_json is not None:
            return add.doc_mapping_json
        return self._state.schema_registry.get(add.doc_mapping_ref) if add.doc_mapping_ref else None

    def newest_file(self) -> AddAction | None:
        """The live file written last (greatest modification time, then path), None if none is live."""
        import pyarrow.compute as pc

        table = self.file_columns(["path", "modification_time"])
        if not table.num_rows:
            return None
        times = table.column("modification_time")
        latest = table.filter(pc.equal(times, pc.max(times)))
        return self._state.files[str(pc.max(latest.column("path")).as_py())]

    def doc_mapping_texts(self) -> set[str | None]:
        """The distinct doc mapping JSONs of the live splits (None: a split whose mapping is unknown),
        from the files' distinct (inline mapping, ref) pairs (``LiveFiles.mapping_keys``), once per
        snapshot: a read plans with them at every query (10M files: 1.5 s when each file's was read)."""
        if self._mapping_texts is None:
            files = self._state.files
            if isinstance(files, LiveFiles):
                registry = self._state.schema_registry
                keys = files.mapping_keys()
                texts = {inline if inline is not None else (registry.get(ref) if ref else None) for inline, ref in keys}
            else:
                texts = {self.doc_mapping(a) for a in files.values()}
            self._mapping_texts = frozenset(texts)
        return set(self._mapping_texts)

    def doc_mapping_column(self, table: Any) -> Any:
        """``doc_mapping`` of each row of a ``file_columns`` table holding ``doc_mapping_json`` and
        ``doc_mapping_ref``: the inline text, else the registry's text for the ref (null: unknown), as a
        dictionary-encoded chunked array whose dictionary holds each distinct text once (no text is
        copied per row: 10M rows of a few mappings are 10M indexes)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        inline, refs = table.column("doc_mapping_json"), table.column("doc_mapping_ref")
        distinct = pc.unique(refs)
        registry = self._state.schema_registry
        texts = pa.array([registry.get(r) if r else None for r in distinct.to_pylist()], pa.string())
        if inline.null_count < len(inline):  # inline mappings (older writers): each row's text, encoded
            resolved = pc.take(texts, pc.index_in(refs, value_set=distinct, skip_nulls=False))
            texts_by_row = pc.if_else(pc.is_valid(inline), inline, resolved)
            return pa.chunked_array([pc.dictionary_encode(texts_by_row.combine_chunks())])
        unique_texts = pc.drop_null(pc.unique(texts))
        text_codes = pc.index_in(texts, value_set=unique_texts)  # null for an unknown mapping
        codes = pc.take(text_codes, pc.index_in(refs, value_set=distinct, skip_nulls=False))
        codes = codes.combine_chunks() if isinstance(codes, pa.ChunkedArray) else codes
        return pa.chunked_array([pa.DictionaryArray.from_arrays(codes, unique_texts)])

    def arrow_schema(self) -> Any:
        from executor_lib.table_schema import spark_json_to_arrow

        return spark_json_to_arrow(self.metadata.schema_string)

    def __repr__(self) -> str:
        return f"Snapshot({self.table_uri!r}, version={self.version}, files={len(self._state.files)})"


class SnapshotLoader:
    """Builds snapshots of one table."""

    def __init__(self, store: ObjectStore, config: LogConfig) -> None:
        self.store = store
        self.config = config

    def listing(self, target: int | None = None) -> LogListing:
        hint = read_last_checkpoint(self.store)
        if hint is not None and (target is None or target >= hint.version):
            listing = list_log(self.store, hint.version - 1 if hint.version > 0 else None)
            if listing.latest >= 0:
                return listing
        return list_log(self.store)

    def latest_version(self) -> int:
        latest = self.listing().latest
        if latest < 0:
            raise TableNotFoundError(_not_a_table(self.store.root_uri))
        return latest

    def load(self, version: int | None = None, predicates: Sequence[Any] = (), files: bool = True) -> Snapshot:
        """The snapshot at ``version`` (default latest).

        With ``predicates``, Avro manifests whose partition bounds cannot match are not read:
        the snapshot then holds only a superset of the matching files (``Snapshot.pruned``).
        ``files=False``: the version, protocol and metadata only — an Avro state's manifests are not
        read at all (what a commit needs to know of the head, at any table size); the snapshot's
        files are then only those the version files after the state add (``Snapshot.pruned``).
        """
        if not files:
            predicates = _NO_FILES
        with _gc_paused():
            try:
                return self._load_listed(self.listing(version), version, predicates)
            except _NeedFullListing:
                pass
            except (ObjectNotFoundError, MissingLogFileError, VersionNotFoundError):
                # Listed, then gone: a checkpoint's log cleanup deleted an expired version file or
                # state meanwhile. A new listing shows the newer base that replaced it (and for an
                # explicit version, whether that version is still retained).
                pass
            return self._load_listed(list_log(self.store), version, predicates)

    def _load_listed(self, listing: LogListing, version: int | None, predicates: Sequence[Any]) -> Snapshot:
        latest = listing.latest
        if latest < 0:
            raise TableNotFoundError(_not_a_table(self.store.root_uri))
        target = self._latest_committed(listing) if version is None else version
        if target < 0 or target > latest:
            raise VersionNotFoundError(f"{self.store.root_uri}: version {target} does not exist (latest is {latest})")
        return self._load_from(listing, target, predicates)

    def _latest_committed(self, listing: LogListing) -> int:
        """The newest version, skipping state directories whose manifest was never written."""
        for v in sorted(set(listing.versions) | listing.checkpoints | listing.states, reverse=True):
            if v in listing.versions or v in listing.checkpoints or self._state_complete(v):
                return v
        return -1

    def _state_complete(self, version: int) -> bool:
        prefix = f"{LOG_DIR}/{state_dir(version)}/"
        return any(self.store.exists(prefix + name) for name in avro_state.STATE_MANIFEST_NAMES)

    def _load_from(self, listing: LogListing, target: int, predicates: Sequence[Any] = ()) -> Snapshot:
        base_state, base_desc, manifest, passed = self._load_base(listing, target, predicates)
        start = base_state.version + 1
        missing = [v for v in range(start, target + 1) if v not in listing.versions and v not in passed]
        if missing:
            if not listing.complete:
                raise _NeedFullListing()
            newer_bases = sorted(v for v in listing.checkpoints | listing.states if v > target)
            if newer_bases:
                # Log retention removed the version files this old version needs.
                raise VersionNotFoundError(
                    f"{self.store.root_uri}: version {target} is no longer retained (version file "
                    f"{version_file(missing[0])} was cleaned up); the oldest version after it that can be "
                    f"read is {newer_bases[0]}"
                )
            raise MissingLogFileError(
                f"{self.store.uri_of(LOG_DIR)}: version file {version_file(missing[0])} is missing and no "
                f"checkpoint or state covers version {missing[0]} (cannot build version {target})"
            )
        # a version passed over exists as a checkpoint only (no version file): it changed nothing
        versions = (
            (v, read_version_actions(self.store, v) if v in listing.versions else []) for v in range(start, target + 1)
        )
        state = replay(base_state, versions, self.store.root_uri, lambda v: version_source(self.store, v))
        check_readable(state.protocol, self.store.root_uri)
        snap = Snapshot(self.store.root_uri, state, base_desc, listing.versions.get(target), manifest)
        snap.pruned = bool(predicates) and manifest is not None
        return snap

    def _load_base(
        self, listing: LogListing, target: int, predicates: Sequence[Any] = ()
    ) -> tuple[TableState, str, avro_state.StateManifest | None, frozenset[int]]:
        """The base of a snapshot at ``target``: (its state, what it is, its state manifest if any, the
        versions passed over). Another implementation's checkpoint (``foreign_states``) is passed over,
        where the version files allow: its file list need not be the table's."""
        passed: set[int] = set()
        candidates = sorted(
            [(v, "state") for v in listing.states if v <= target]
            + [(v, "checkpoint") for v in listing.checkpoints if v <= target],
            reverse=True,
        )
        damaged: CorruptLogError | None = None  # the newest state that failed its checks
        for i, (v, kind) in enumerate(candidates):
            if damaged is not None and not _all_retained(listing, v + 1, target):
                raise damaged  # an older base would need version files that are gone: not exact
            try:  # a damaged checkpoint or state manifest: an older base, where that is exact
                if kind == "checkpoint":
                    actions = read_checkpoint_actions(self.store, v)
                    state = replay(EMPTY_STATE, [(v, actions)], self.store.root_uri, self._checkpoint_source)
                    return state, f"checkpoint {v}", None, frozenset(passed)
                manifest = avro_state.read_state_manifest(self.store, v)
            except CorruptLogError as e:
                log.warning("%s; reading from an older state and the version files after it", e)
                damaged = damaged or e
                continue
            if manifest is None:
                continue  # state directory without a manifest: an unfinished write, not a commit
            if self._past_the_log(manifest, listing) and _can_read_past(listing, candidates[i + 1 :], v, passed):
                passed.add(v)
                continue
            state = self._state_from_avro(manifest, listing, predicates)
            if v in listing.versions and self._stale(manifest, state, predicates):
                continue
            return state, f"state-v{version_name(v)}", manifest, frozenset(passed)
        if not listing.complete:
            raise _NeedFullListing()
        if damaged is not None and not _all_retained(listing, 0, target):
            raise damaged
        return EMPTY_STATE, "log", None, frozenset(passed)

    def _past_the_log(self, manifest: avro_state.StateManifest, listing: LogListing) -> bool:
        """``foreign_states.is_checkpoint_past_the_log``, asking the store about a version file the
        listing did not cover."""

        def has_file(v: int) -> bool:
            if v in listing.versions:
                return True
            return not listing.complete and has_version_file(self.store, v)

        return is_checkpoint_past_the_log(manifest, has_file)

    def _stale(self, manifest: avro_state.StateManifest, state: TableState, predicates: Sequence[Any]) -> bool:
        """Whether another implementation's state beside the version file of its number does not hold
        that file (``foreign_states``): then it is no base, and an older one and the version files are
        read. A head-only load (``files=False``) does not ask."""
        if manifest.written_here or predicates is _NO_FILES:
            return False
        actions = read_version_actions(self.store, manifest.state_version)
        if predicates:  # a pruned state holds the matching partitions' files only: read it whole
            held = holds_version(self.store, manifest, actions, self.config.state_read_parallelism)
        else:
            held = holds(state.files, actions)
        if not held:
            log.info("%s: does not hold its version's file (another implementation's checkpoint)", manifest.source)
        return not held

    def _checkpoint_source(self, version: int) -> str:
        return self.store.uri_of(f"{LOG_DIR}/{checkpoint_file(version)}")

    def _state_from_avro(
        self, manifest: avro_state.StateManifest, listing: LogListing, predicates: Sequence[Any] = ()
    ) -> TableState:
        metadata = manifest.metadata()
        protocol = manifest.protocol()
        if metadata is None:
            # IndexTables4Spark 0.5.x leaves metadata out of the state: it lives in version 0.
            protocol, metadata = self._protocol_and_metadata_before(manifest.state_version)
        if protocol is None:
            v = manifest.protocol_version
            protocol = ProtocolAction(v, v, frozenset({"avroState"}), frozenset({"avroState"}))
        if metadata is None:
            raise MissingLogFileError(
                f"{manifest.source}: state has no metadata and no version file at or before "
                f"{manifest.state_version} holds a metaData action"
            )
        check_readable(protocol, self.store.root_uri)
        manifest_filter = None
        if predicates is _NO_FILES:
            manifest_filter = lambda info: False  # noqa: E731
        elif predicates:
            from executor_lib.log.files.pruning import bounds_may_match, column_types

            types = column_types(metadata.schema_string)
            manifest_filter = lambda info: bounds_may_match(info.partition_bounds, predicates, types)  # noqa: E731
        chunks = avro_state.read_state_chunks(
            self.store, manifest, self.config.state_read_parallelism, manifest_filter=manifest_filter
        )
        registry = dict(registry_from_configuration(metadata.configuration))
        registry.update(manifest.schema_registry)
        files = LiveFiles(last_entries(chunks), manifest.tombstones)  # a path listed twice: its last entry
        return TableState(
            version=manifest.state_version,
            protocol=protocol,
            metadata=metadata,
            files=files,
            schema_registry=MappingProxyType(registry),
            spellings=MappingProxyType(state_spellings(files, self.store.root_uri, manifest.source)),
        )

    def _protocol_and_metadata_before(self, version: int) -> tuple[ProtocolAction | None, MetadataAction | None]:
        """Newest protocol and metaData in version files at or below ``version`` (newest first)."""
        versions = sorted((v for v in list_log_versions(self.store) if v <= version), reverse=True)
        protocol: ProtocolAction | None = None
        metadata: MetadataAction | None = None
        for v in versions:
            try:
                actions = read_version_actions(self.store, v)
            except ObjectNotFoundError:
                continue
            for a in reversed(actions):
                if protocol is None and isinstance(a, ProtocolAction):
                    protocol = a
                if metadata is None and isinstance(a, MetadataAction):
                    metadata = a
            if protocol is not None and metadata is not None:
                break
        return protocol, metadata

    def version_timestamps(self) -> dict[int, int]:
        """Commit time of every retained version (ms), made monotonic as Delta Lake does."""
        listing = list_log(self.store)
        raw: dict[int, int] = {v: self._commit_timestamp(v, mtime) for v, mtime in listing.versions.items()}
        for v in listing.states - set(raw):
            manifest = avro_state.read_state_manifest(self.store, v)
            if manifest is not None:
                raw[v] = manifest.created_at
        out: dict[int, int] = {}
        previous = -1
        for v in sorted(raw):
            previous = max(raw[v], previous + 1) if previous >= 0 else raw[v]
            out[v] = previous
        return out

    def _commit_timestamp(self, version: int, modified_ms: int) -> int:
        """The commitInfo timestamp (ms precision) of the version file's line or, by default, the one
        recorded with the version's state; else the file's mtime (seconds on some object stores)."""
        for action in read_version_actions(self.store, version):
            if isinstance(action, CommitInfoAction):
                return action.timestamp
        manifest = avro_state.read_state_manifest(self.store, version)
        info = manifest.commit_info() if manifest is not None else None
        return info.timestamp if info is not None else modified_ms

    def version_at_timestamp(self, timestamp_ms: int) -> int:
        stamps = self.version_timestamps()
        if not stamps:
            raise TableNotFoundError(_not_a_table(self.store.root_uri))
        versions = sorted(stamps)
        times = [stamps[v] for v in versions]
        i = bisect.bisect_right(times, timestamp_ms)
        if i == 0:
            raise VersionNotFoundError(
                f"{self.store.root_uri}: timestamp {utc_text(timestamp_ms)} is before the earliest retained "
                f"version {versions[0]} (committed at {utc_text(times[0])})"
            )
        return versions[i - 1]


def utc_text(ms: int) -> str:
    """Epoch milliseconds as a reader writes a time: ``2024-05-01 12:00:00.250 UTC`` (no fraction when 0)."""
    import datetime

    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)
    shown = moment.strftime("%Y-%m-%d %H:%M:%S")
    return f"{shown}.{ms % 1000:03d} UTC" if ms % 1000 else f"{shown} UTC"


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a snapshot builds its (acyclic) actions.

    Loading allocates one object graph per file; with the collector on, Python rescans
    every live object again and again during the load (several times slower at 100K files).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# The ``predicates`` of a head-only load (``SnapshotLoader.load(files=False)``): no manifest matches.
_NO_FILES: Sequence[Any] = ("no files",)


class _NeedFullListing(Exception):
    """Internal: the hint-based listing was not enough, list the whole log."""


def _not_a_table(root_uri: str) -> str:
    """What is wrong and what to do, for a path with no table: the user's first line."""
    return (
        f"{root_uri}: not an IndexTables table (no {LOG_DIR}/ versions): check the path, or write to it "
        "first (a write creates the table)"
    )
