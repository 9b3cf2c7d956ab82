"""Reading the Avro state format (protocol V4): ``state-v<N>/`` plus shared Avro manifests.

A state directory holds one state manifest — ``_manifest.avro`` (one Avro record, as
IndexTables4Spark 0.5.x writes) or ``_manifest.json`` (same fields, JSON) — listing
Avro manifest files of FileEntry records, tombstones (paths removed since those
manifests were written), the schema registry (bare hashes) and optionally the
metadata action as JSON. Manifests are read in parallel with the schema embedded in
each file, so fields added by newer writers are accepted. Writing state is not done
here (see PROTOCOL.md).
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from executor_lib.arrow_pool import give_back_unused
from executor_lib.log.files.file_table import FileChunk, deferring
from executor_lib.log.state import streaming_txns as txn_map
from executor_lib.log.state.avro_records import AvroRecords, default_decoder
from executor_lib.log.state.in_place import read_settled, written_so_far
from executor_lib.log.state.manifest_cache import MANIFEST_CACHE, RELEASE_AFTER_ENTRIES, manifest_cache_key
from executor_lib.log.state.manifest_columns import read_sidecar
from executor_lib.log.state.manifest_integrity import check_state_seal, verify_log_file
from executor_lib.protocol.actions import (
    AddAction,
    CommitInfoAction,
    MetadataAction,
    ProtocolAction,
    action_from_json_obj,
)
from executor_lib.protocol.files import LOG_DIR, state_dir
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import (
    CorruptLogError,
    MissingLogFileError,
    ObjectNotFoundError,
    UnsupportedProtocolError,
)

# ``_manifest.avro`` first: the name every deployed implementation reads and writes (and the commit
# point of IndexTables4Spark 0.5.x); ``_manifest.json`` is this project's older, non-JVM layout.
STATE_MANIFEST_NAMES = ("_manifest.avro", "_manifest.json")
# Who wrote a state: Avro file metadata (ignored by every Avro reader) or ``_manifest.json`` keys.
ENGINE_KEY = "indextables.engine"  # set on every state this project writes
COMMIT_INFO_KEY = "indextables.commitInfo"  # the commitInfo of the commit that wrote the state
COMMIT_POINT_KEY = "indextables.commitPoint"  # "state": the state's put was the commit (no version file)
STREAMING_TXNS_KEY = txn_map.METADATA_KEY  # appId -> last streaming batch committed (carried forward)
FILE_ENTRY_ONLY_FIELDS = frozenset({"addedAtVersion", "addedAtTimestamp"})


@dataclass(frozen=True)
class ManifestInfo:
    path: str
    num_entries: int
    min_added_at_version: int = 0
    max_added_at_version: int = 0
    partition_bounds: dict[str, dict[str, str | None]] | None = None
    # IndexTables4Spark's meaning (its ManifestInfo): how many of the state's tombstones fall on this
    # manifest's entries, and numEntries minus that; -1: not counted (``tombstone_counts_known``).
    tombstone_count: int = 0
    live_entry_count: int = -1


@dataclass(frozen=True)
class StateManifest:
    """The content of ``state-v<N>/_manifest.*``."""

    state_version: int
    source: str
    format_version: int = 1
    created_at: int = 0
    num_files: int = 0
    total_bytes: int = 0
    protocol_version: int = 4
    manifests: tuple[ManifestInfo, ...] = ()
    tombstones: frozenset[str] = frozenset()
    schema_registry: dict[str, str] = field(default_factory=dict)
    metadata_json: str | None = None
    protocol_json: dict[str, Any] | None = None  # this project's extension: the full protocol action
    engine: str | None = None  # this project's engine if it wrote the state (None: another implementation)
    commit_info_json: str | None = None  # the commitInfo of the commit that wrote this state, if one did
    committed_by_state: bool = False  # this project committed the version by writing this state
    streaming_txns_json: str | None = None  # appId -> last streaming batch (streaming_txns), as recorded

    @property
    def written_here(self) -> bool:
        """Whether this project wrote the state (it then carries the streaming transaction map)."""
        return self.engine is not None

    def streaming_txns(self) -> dict[str, txn_map.TxnRecord]:
        """The streaming transaction map recorded with the state (empty if none is)."""
        return txn_map.decode(self.streaming_txns_json, self.source)

    @property
    def commit_point(self) -> bool:
        """Whether writing this state committed its version (no version file behind it): every state
        of another implementation (IndexTables4Spark 0.5.x commits that way), and this project's
        state commits."""
        return self.engine is None or self.committed_by_state

    def commit_info(self) -> CommitInfoAction | None:
        """The commitInfo recorded with the state by the commit that wrote it (this project's
        state-committed versions and the state each commit writes), else None."""
        if not self.commit_info_json:
            return None
        try:
            action = CommitInfoAction.from_json_dict(json.loads(self.commit_info_json))
        except (json.JSONDecodeError, CorruptLogError) as e:
            raise CorruptLogError(f"{self.source}: recorded commitInfo is invalid: {e}") from e
        return action

    def metadata(self) -> MetadataAction | None:
        """The embedded metadata action, if the writer stored one."""
        if not self.metadata_json:
            return None
        try:
            obj = json.loads(self.metadata_json)
            action = action_from_json_obj(obj if "metaData" in obj else {"metaData": obj})
        except (json.JSONDecodeError, CorruptLogError) as e:
            raise CorruptLogError(f"{self.source}: embedded metadata is invalid: {e}") from e
        if not isinstance(action, MetadataAction):
            raise CorruptLogError(f"{self.source}: embedded metadata is a {type(action).__name__}, not metaData")
        return action

    def protocol(self) -> ProtocolAction | None:
        """The embedded protocol action (this project's extension), if present."""
        if not self.protocol_json:
            return None
        try:
            return ProtocolAction.from_json_dict(self.protocol_json)
        except CorruptLogError as e:
            raise CorruptLogError(f"{self.source}: embedded protocol is invalid: {e}") from e


SUPPORTED_STATE_FORMAT_VERSIONS = (1,)


def _protocol_json(value: Any) -> dict[str, Any] | None:
    """This project's ``protocol`` extension: an object in ``_manifest.json``, a JSON string in Avro."""
    if isinstance(value, str):
        parsed = json.loads(value)
        if not isinstance(parsed, dict):
            raise ValueError("protocol is not a JSON object")
        return parsed
    return value


def _state_manifest_from_dict(d: dict[str, Any], source: str, writer: dict[str, Any] | None = None) -> StateManifest:
    """``writer``: the Avro file metadata (who wrote the state); ``_manifest.json`` keeps it in ``d``."""
    writer = d if writer is None else writer
    format_version = d.get("formatVersion", 1)
    if format_version not in SUPPORTED_STATE_FORMAT_VERSIONS:
        raise UnsupportedProtocolError(
            f"{source}: state formatVersion {format_version!r} is not supported "
            f"(this code reads {list(SUPPORTED_STATE_FORMAT_VERSIONS)})"
        )
    try:
        manifests = tuple(
            ManifestInfo(
                path=m["path"],
                num_entries=int(m.get("numEntries", 0)),
                min_added_at_version=int(m.get("minAddedAtVersion") or 0),
                max_added_at_version=int(m.get("maxAddedAtVersion") or 0),
                partition_bounds=m.get("partitionBounds"),
                tombstone_count=int(m.get("tombstoneCount") or 0),
                live_entry_count=int(m["liveEntryCount"]) if m.get("liveEntryCount") is not None else -1,
            )
            for m in d.get("manifests") or []
        )
        return StateManifest(
            state_version=int(d["stateVersion"]),
            source=source,
            format_version=int(d.get("formatVersion", 1)),
            created_at=int(d.get("createdAt") or 0),
            num_files=int(d.get("numFiles") or 0),
            total_bytes=int(d.get("totalBytes") or 0),
            protocol_version=int(d.get("protocolVersion") or 4),
            manifests=manifests,
            tombstones=frozenset(d.get("tombstones") or ()),
            schema_registry=dict(d.get("schemaRegistry") or {}),
            metadata_json=d.get("metadata"),
            protocol_json=_protocol_json(d.get("protocol")),
            engine=writer.get(ENGINE_KEY),
            commit_info_json=writer.get(COMMIT_INFO_KEY),
            committed_by_state=writer.get(COMMIT_POINT_KEY) == "state",
            streaming_txns_json=writer.get(STREAMING_TXNS_KEY),
        )
    except (KeyError, TypeError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        raise CorruptLogError(f"{source}: invalid state manifest: {e!r}") from e


def _read_avro_records(data: bytes, source: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The records of an Avro file and its file metadata."""
    try:
        container = AvroRecords(data, "fastavro")
        return list(container.records()), container.metadata
    except CorruptLogError as e:
        raise CorruptLogError(f"{source}: {e}") from e
    except Exception as e:  # fastavro raises many unrelated types on corrupt input
        raise CorruptLogError(f"{source}: cannot decode Avro ({type(e).__name__}: {e})") from e


def read_state_manifest(store: ObjectStore, version: int) -> StateManifest | None:
    """The state manifest of ``state-v<version>``, or None if the directory has none (incomplete write)."""
    for name in STATE_MANIFEST_NAMES:
        key = f"{LOG_DIR}/{state_dir(version)}/{name}"
        source = store.uri_of(key)
        try:  # another implementation's manifest may still be being written in place (in_place)
            return read_settled(
                functools.partial(store.read, key),
                functools.partial(_state_manifest_of, store, key, source=source),
                source,
                functools.partial(written_so_far, store, key),
            )
        except ObjectNotFoundError:
            continue
    return None


def _state_manifest_of(store: ObjectStore, key: str, data: bytes, source: str) -> StateManifest:
    verify_log_file(store, key, data, source)
    avro = key.endswith(".avro")
    check_state_seal(data, avro, source)
    if avro:
        records, writer = _read_avro_records(data, source)
        if len(records) != 1:
            raise CorruptLogError(f"{source}: expected one state manifest record, found {len(records)}")
        return _state_manifest_from_dict(records[0], source, writer)
    try:
        return _state_manifest_from_dict(json.loads(data.decode("utf-8")), source)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise CorruptLogError(f"{source}: invalid JSON: {e}") from e


def resolve_manifest_path(path: str, version: int) -> str:
    """Store key of a manifest: shared (``manifests/``), normalized legacy (``state-v.../``) or legacy."""
    if "://" in path:
        return path
    if path.startswith(("manifests/", "state-v")):
        return f"{LOG_DIR}/{path}"
    return f"{LOG_DIR}/{state_dir(version)}/{path}"


def decode_manifest(data: bytes, source: str) -> tuple[AddAction, ...]:
    """An Avro manifest's FileEntry records as AddActions (the addedAt* bookkeeping fields dropped).

    The file's writer schema fixes every record's fields and types, so the conversion is set up
    once per file and no per-field checks run per record. Records are decoded a block at a
    time by ``avro_records`` (cavro where installed, else fastavro).
    """
    decoder = default_decoder()
    try:
        container = AvroRecords(data, decoder)
        convert = AddAction.record_converter(container.field_names, ignore=FILE_ENTRY_ONLY_FIELDS)
        return tuple(map(convert, container.records()))
    except CorruptLogError as e:
        raise CorruptLogError(f"{source}: {e}") from e
    except Exception as e:  # fastavro raises many unrelated types on corrupt input
        raise CorruptLogError(f"{source}: cannot decode Avro ({type(e).__name__}: {e})") from e


def decode_manifest_chunk(data: bytes, source: str) -> FileChunk:
    """An Avro manifest's FileEntry records as one ``FileChunk`` (``decode_manifest``'s entries as
    columns, built from the records without an object per entry)."""
    try:
        container = AvroRecords(data, default_decoder())
        return FileChunk.from_records(list(container.records()), container.field_names, FILE_ENTRY_ONLY_FIELDS)
    except CorruptLogError as e:
        raise CorruptLogError(f"{source}: {e}") from e
    except Exception as e:  # fastavro raises many unrelated types on corrupt input
        raise CorruptLogError(f"{source}: cannot decode Avro ({type(e).__name__}: {e})") from e


def _read_manifest(store: ObjectStore, info: ManifestInfo, version: int) -> tuple[FileChunk, str | None]:
    """(entries as a chunk, the manifest's cache key if it was decoded here rather than found in the cache).

    The cache key is the manifest's URI with its current size and modification time, so a
    manifest deleted or replaced since it was cached is read (and checked) again. Fresh bytes
    are checked (``manifest_integrity``) before they are decoded, and only checked entries are
    returned for caching.
    """
    key = resolve_manifest_path(info.path, version)
    if "://" in key:
        root = store.root_uri.rstrip("/") + "/"
        if not key.startswith(root):
            raise CorruptLogError(f"state-v{version}: manifest {key!r} lies outside the table {store.root_uri}")
        key = key[len(root) :]
    source = store.uri_of(key)
    missing = f"{source}: manifest referenced by state version {version} is missing"
    try:
        cache_key = manifest_cache_key(source, store.head(key))
        cached = MANIFEST_CACHE.get(cache_key, lambda: _fresh_chunk(store, key, source, missing))
        if cached is not None:
            return _check_count(cached, info, source), None
    except ObjectNotFoundError as e:
        raise MissingLogFileError(missing) from e
    fresh = _fresh_chunk(store, key, source, missing)
    if MANIFEST_CACHE.disk is not None:  # its statistics go to the disk copy once that is written
        fresh = deferring(fresh, lambda: _fresh_chunk(store, key, source, missing))
    return _check_count(fresh, info, source), cache_key


def _fresh_chunk(store: ObjectStore, key: str, source: str, missing: str) -> FileChunk:
    """The entries of the manifest at ``key`` read from the store: its bytes checked
    (``manifest_integrity``), then its sidecar's columns, or its Avro decoded."""
    try:
        data = store.read(key)
    except ObjectNotFoundError as e:
        raise MissingLogFileError(missing) from e
    digest = hashlib.sha256(data).hexdigest()  # once: the content address and the sidecar's binding
    verify_log_file(store, key, data, source, digest)
    return read_sidecar(store, key, digest) or decode_manifest_chunk(data, source)


def _check_count(adds: FileChunk, info: ManifestInfo, source: str) -> FileChunk:
    """The state manifest's ``numEntries`` for this manifest must be its record count (0: not recorded)."""
    if info.num_entries and len(adds) != info.num_entries:
        raise CorruptLogError(
            f"{source}: {len(adds)} entries, but the state manifest lists it with numEntries={info.num_entries}"
        )
    return adds


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _reader_pool(parallelism: int) -> ThreadPoolExecutor:
    """A process-wide pool of manifest readers per parallelism: starting threads for every listing
    cost more than the listing itself (0.05-0.1 s on a loaded machine) when the manifests are cached."""
    with _POOLS_LOCK:
        pool = _POOLS.get(parallelism)
        if pool is None:
            pool = _POOLS[parallelism] = ThreadPoolExecutor(parallelism, thread_name_prefix="manifest-reader")
        return pool


def read_state_chunks(
    store: ObjectStore,
    manifest: StateManifest,
    parallelism: int = 8,
    manifest_filter: Callable[[ManifestInfo], bool] | None = None,
) -> list[FileChunk]:
    """The entries of a state's manifests, a chunk per manifest, read in parallel — tombstoned paths
    included: the state's live files are these minus ``manifest.tombstones`` (``read_state_files``).
    ``manifest_filter`` skips whole manifests (partition pruning by their bounds)."""
    infos = tuple(i for i in manifest.manifests if manifest_filter is None or manifest_filter(i))
    if len(infos) <= 1 or parallelism <= 1:
        results: Iterable[tuple[FileChunk, str | None]] = (
            _read_manifest(store, i, manifest.state_version) for i in infos
        )
    else:
        pool = _reader_pool(parallelism)
        results = pool.map(lambda i: _read_manifest(store, i, manifest.state_version), infos)
    chunks, decoded = [], 0
    for chunk, uri in results:  # in order, as they are read
        chunks.append(chunk)
        if uri is not None:  # decoded: its disk copy is written (and takes its statistics) while the rest decode
            MANIFEST_CACHE.put(uri, chunk)
            decoded += len(chunk)
    if decoded >= RELEASE_AFTER_ENTRIES:  # each manifest's records, its columns before they were compacted
        give_back_unused()
    return chunks


def read_state_files(
    store: ObjectStore,
    manifest: StateManifest,
    parallelism: int = 8,
    manifest_filter: Callable[[ManifestInfo], bool] | None = None,
) -> Iterable[AddAction]:
    """Live add actions of a state: manifest entries minus tombstones."""
    tombstones = manifest.tombstones
    for chunk in read_state_chunks(store, manifest, parallelism, manifest_filter):
        for add in chunk.all_actions():
            if add.path not in tombstones:
                yield add
