"""Writing the Avro state format (protocol V4): shared manifests plus one small state manifest per version.

For version N, ``state-v<N>/_manifest.avro`` (the default ``state.manifestFormat=avro``: the
manifest IndexTables4Spark 0.5.x writes and reads, in its exact schema; ``_manifest.json`` with ``json``) lists
Avro manifests of FileEntry records
(``manifests/manifest-<hash>.avro``, shared between states), tombstones (paths removed
since those manifests were written), the schema registry and the metadata action.

Incremental: state N is state B (the newest written state, B < N) plus the version files
B+1..N. Only the files those versions add go into a new manifest; removed paths become
tombstones, counted per manifest (``tombstone_counts``); existing manifests are referenced, not
rewritten, except those whose tombstones ``compaction_policy.tombstone_rewrites`` picks — a
commit costs O(files it adds or removes + manifests it rewrites), not O(table).

Small manifests are merged, smallest first, when more than ``compaction.maxManifests`` are not
full (a tiered merge: at most ~1.5 manifests of entries per commit, whatever the table's size).
Compaction (all live files rewritten into fresh manifests, no tombstones) happens only when a
removed file's size is unknown, a removed path is re-added or has several entries, a remove is
large, or it is forced — never because of tombstones or the manifest count.

The state manifest is written with put-if-absent: if it already exists, another writer derived
the same version's state from the same log, which is equivalent. Manifests written by a writer
that crashes before its state manifest are orphans that no state references (manifest GC
collects them later).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import logging
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import fastavro

from executor_lib.log.config import LogConfig
from executor_lib.log.state.avro_state import (
    COMMIT_INFO_KEY,
    COMMIT_POINT_KEY,
    ENGINE_KEY,
    FILE_ENTRY_ONLY_FIELDS,
    STREAMING_TXNS_KEY,
    ManifestInfo,
    StateManifest,
    read_state_chunks,
    read_state_files,
)
from executor_lib.log.state.compaction_policy import (
    needs_compaction,
    net_changes,
    next_small_merge,
    tombstone_rewrites,
)
from executor_lib.log.state.manifest_columns import encode_sidecar, sidecar_key
from executor_lib.log.state.manifest_integrity import (
    DIGEST_PLACEHOLDER,
    STATE_DIGEST_KEY,
    STATE_INTEGRITY,
    STATE_INTEGRITY_KEY,
    seal_state,
)
from executor_lib.log.state.streaming_txns import TxnMap
from executor_lib.log.state.streaming_txns import encode as encode_txns
from executor_lib.log.state.tombstone_counts import counts_known, locate, with_counts
from executor_lib.protocol.actions import (
    ENGINE,
    Action,
    AddAction,
    CommitInfoAction,
    MetadataAction,
    ProtocolAction,
)
from executor_lib.protocol.files import LOG_DIR, MANIFESTS_DIR, state_dir
from executor_lib.protocol.schema_registry import doc_mapping_hash
from indextables_contract.errors import ObjectAlreadyExistsError, StorageError

if TYPE_CHECKING:
    from executor_lib.storage.base import ObjectStore

log = logging.getLogger(__name__)

STATE_FORMAT_VERSION = 1
STATE_MANIFEST_NAMES = {"json": "_manifest.json", "avro": "_manifest.avro"}

# The state manifest record as IndexTables4Spark 0.5.4 writes it (its embedded writer schema),
# plus this project's optional ``protocol`` (the protocol action as JSON; Avro readers that do not
# know the field skip it).
_BOUNDS = {
    "type": "record",
    "name": "PartitionBoundsItem",
    "namespace": "io.indextables.state",
    "fields": [
        {"name": "min", "type": ["null", "string"], "default": None},
        {"name": "max", "type": ["null", "string"], "default": None},
    ],
}
STATE_MANIFEST_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "StateManifest",
    "namespace": "io.indextables.state",
    "doc": "The state manifest that describes the complete table state",
    "fields": [
        {"name": "formatVersion", "type": "int", "doc": "Version of the state file format"},
        {"name": "stateVersion", "type": "long", "doc": "Transaction version this state represents"},
        {"name": "createdAt", "type": "long", "doc": "Timestamp when this state was created (epoch milliseconds)"},
        {"name": "numFiles", "type": "long", "doc": "Total number of live files (after applying tombstones)"},
        {"name": "totalBytes", "type": "long", "doc": "Total size of all live files in bytes"},
        {
            "name": "manifests",
            "doc": "List of manifest files containing file entries",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "ManifestInfoItem",
                    "namespace": "io.indextables.state",
                    "fields": [
                        {"name": "path", "type": "string"},
                        {"name": "numEntries", "type": "long"},
                        {"name": "minAddedAtVersion", "type": "long"},
                        {"name": "maxAddedAtVersion", "type": "long"},
                        {
                            "name": "partitionBounds",
                            "type": ["null", {"type": "map", "values": _BOUNDS}],
                            "default": None,
                        },
                        {"name": "tombstoneCount", "type": "long", "default": 0},
                        {"name": "liveEntryCount", "type": "long", "default": -1},
                    ],
                },
            },
        },
        {
            "name": "tombstones",
            "type": {"type": "array", "items": "string"},
            "default": [],
            "doc": "List of paths that have been removed (applied during read)",
        },
        {
            "name": "schemaRegistry",
            "type": {"type": "map", "values": "string"},
            "default": {},
            "doc": "Schema registry for doc mapping deduplication",
        },
        {"name": "protocolVersion", "type": "int", "default": 4, "doc": "Protocol version (4 for Avro state format)"},
        {
            "name": "metadata",
            "type": ["null", "string"],
            "default": None,
            "doc": "JSON-encoded MetadataAction for fast getMetadata()",
        },
        {"name": "protocol", "type": ["null", "string"], "default": None},
    ],
}
_PARSED_STATE_SCHEMA = fastavro.parse_schema(STATE_MANIFEST_SCHEMA)

# The FileEntry record exactly as IndexTables4Spark 0.5.4 writes it (names, types, order and
# field ids of the real files in shared/compat; where the protocol document's Appendix B numbers a
# field differently, the deployed files win). JVM readers resolve fields by name.
DEPLOYED_FILE_ENTRY_FIELDS: list[dict[str, Any]] = [
    {"name": "path", "type": "string", "doc": "Relative path to the split file", "field-id": 100},
    {
        "name": "partitionValues",
        "type": {"type": "map", "values": "string"},
        "doc": "Partition column values as string map",
        "field-id": 101,
    },
    {"name": "size", "type": "long", "doc": "File size in bytes", "field-id": 102},
    {"name": "modificationTime", "type": "long", "doc": "File modification time (epoch milliseconds)", "field-id": 103},
    {"name": "dataChange", "type": "boolean", "doc": "Whether this file represents a data change", "field-id": 104},
    {"name": "stats", "type": ["null", "string"], "default": None, "doc": "JSON-encoded statistics", "field-id": 110},
    {
        "name": "minValues",
        "type": ["null", {"type": "map", "values": "string"}],
        "default": None,
        "doc": "Minimum values per column for data skipping",
        "field-id": 111,
    },
    {
        "name": "maxValues",
        "type": ["null", {"type": "map", "values": "string"}],
        "default": None,
        "doc": "Maximum values per column for data skipping",
        "field-id": 112,
    },
    {
        "name": "numRecords",
        "type": ["null", "long"],
        "default": None,
        "doc": "Number of records in the file",
        "field-id": 113,
    },
    {
        "name": "footerStartOffset",
        "type": ["null", "long"],
        "default": None,
        "doc": "Byte offset where footer/metadata begins",
        "field-id": 120,
    },
    {
        "name": "footerEndOffset",
        "type": ["null", "long"],
        "default": None,
        "doc": "Byte offset where footer/metadata ends",
        "field-id": 121,
    },
    {
        "name": "hasFooterOffsets",
        "type": "boolean",
        "default": False,
        "doc": "Whether footer offsets are populated",
        "field-id": 124,
    },
    {
        "name": "splitTags",
        "type": ["null", {"type": "array", "items": "string"}],
        "default": None,
        "doc": "Tags associated with this split",
        "field-id": 132,
    },
    {
        "name": "numMergeOps",
        "type": ["null", "int"],
        "default": None,
        "doc": "Number of merge operations this split has been through",
        "field-id": 134,
    },
    {
        "name": "docMappingRef",
        "type": ["null", "string"],
        "default": None,
        "doc": "Reference to doc mapping in schema registry",
        "field-id": 135,
    },
    {
        "name": "uncompressedSizeBytes",
        "type": ["null", "long"],
        "default": None,
        "doc": "Uncompressed size of the split data",
        "field-id": 136,
    },
    {"name": "addedAtVersion", "type": "long", "doc": "Transaction version when this file was added", "field-id": 140},
    {
        "name": "addedAtTimestamp",
        "type": "long",
        "doc": "Timestamp when this file was added (epoch milliseconds)",
        "field-id": 141,
    },
    {
        "name": "companionSourceFiles",
        "type": ["null", {"type": "array", "items": "string"}],
        "default": None,
        "doc": "Relative parquet file paths indexed into this companion split",
        "field-id": 150,
    },
    {
        "name": "companionDeltaVersion",
        "type": ["null", "long"],
        "default": None,
        "doc": "Delta version this companion split was built from",
        "field-id": 151,
    },
    {
        "name": "companionFastFieldMode",
        "type": ["null", "string"],
        "default": None,
        "doc": "Fast field mode: DISABLED, HYBRID, or PARQUET_ONLY",
        "field-id": 152,
    },
]
# Optional add-action fields beyond the 0.5.4 record, written only where some entry sets them so a
# state loses nothing. deleteOpstamp and the time range use tantivy4java's native ids; tags and the
# hotcache offsets are this project's (160+). Readers take the writer schema, so they may be absent.
EXTENSION_FILE_ENTRY_FIELDS: list[dict[str, Any]] = [
    {"name": "deleteOpstamp", "type": ["null", "long"], "default": None, "field-id": 123},
    {"name": "timeRangeStart", "type": ["null", "string"], "default": None, "field-id": 137},
    {"name": "timeRangeEnd", "type": ["null", "string"], "default": None, "field-id": 138},
    {"name": "tags", "type": ["null", {"type": "map", "values": "string"}], "default": None, "field-id": 160},
    {"name": "hotcacheStartOffset", "type": ["null", "long"], "default": None, "field-id": 164},
    {"name": "hotcacheLength", "type": ["null", "long"], "default": None, "field-id": 165},
]
FILE_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "FileEntry",
    "doc": "A file entry representing a split in the table state",
    "namespace": "io.indextables.state",
    "fields": DEPLOYED_FILE_ENTRY_FIELDS + EXTENSION_FILE_ENTRY_FIELDS,
}
_PARSED_SCHEMAS: dict[frozenset[str], Any] = {}


def _manifest_schema(records: Sequence[dict[str, Any]]) -> Any:
    """The deployed FileEntry fields always, plus only the extension fields some record sets: a
    field that is null everywhere is left out of the file's schema (readers resolve it to its
    default, null), which keeps manifests small and fast to decode."""
    present = frozenset(
        f["name"] for f in EXTENSION_FILE_ENTRY_FIELDS if any(r[f["name"]] is not None for r in records)
    )
    parsed = _PARSED_SCHEMAS.get(present)
    if parsed is None:
        schema = {
            **FILE_ENTRY_SCHEMA,
            "fields": DEPLOYED_FILE_ENTRY_FIELDS + [f for f in EXTENSION_FILE_ENTRY_FIELDS if f["name"] in present],
        }
        parsed = _PARSED_SCHEMAS[present] = fastavro.parse_schema(schema)
    return parsed


_AVRO_CODECS = {"zstd": "zstandard", "snappy": "snappy", "none": "null"}


def _codec_options(config: LogConfig) -> dict[str, Any]:
    codec = _AVRO_CODECS[config.state_compression]
    options: dict[str, Any] = {"codec": codec}
    if codec == "zstandard":
        options["codec_compression_level"] = config.state_compression_level
    return options


def _file_entry(add: AddAction, version: int, timestamp: int) -> dict[str, Any]:
    return {
        "path": add.path,
        "partitionValues": {k: v for k, v in add.partition_values.items() if v is not None},
        "size": add.size,
        "modificationTime": add.modification_time,
        "dataChange": add.data_change,
        "stats": add.stats,
        "minValues": dict(add.min_values) if add.min_values is not None else None,
        "maxValues": dict(add.max_values) if add.max_values is not None else None,
        "numRecords": add.num_records,
        "footerStartOffset": add.footer_start_offset,
        "footerEndOffset": add.footer_end_offset,
        "hasFooterOffsets": add.has_footer_offsets,
        "splitTags": sorted(add.split_tags) if add.split_tags is not None else None,
        "numMergeOps": add.num_merge_ops,
        "docMappingRef": add.doc_mapping_ref,
        "uncompressedSizeBytes": add.uncompressed_size_bytes,
        "addedAtVersion": version,
        "addedAtTimestamp": timestamp,
        "companionSourceFiles": list(add.companion_source_files) if add.companion_source_files is not None else None,
        "companionDeltaVersion": add.companion_delta_version,
        "companionFastFieldMode": add.companion_fast_field_mode,
        "tags": dict(add.tags) if add.tags is not None else None,
        "timeRangeStart": add.time_range_start,
        "timeRangeEnd": add.time_range_end,
        "deleteOpstamp": add.delete_opstamp,
        "hotcacheStartOffset": add.hotcache_start_offset,
        "hotcacheLength": add.hotcache_length,
    }


def _partition_bounds(adds: Sequence[AddAction]) -> dict[str, dict[str, str | None]] | None:
    bounds: dict[str, dict[str, str | None]] = {}
    for add in adds:
        for column, value in add.partition_values.items():
            if value is None:
                continue
            b = bounds.setdefault(column, {"min": value, "max": value})
            if b["min"] is None or value < b["min"]:
                b["min"] = value
            if b["max"] is None or value > b["max"]:
                b["max"] = value
    return bounds or None


def _dedupe_doc_mappings(adds: Iterable[AddAction], registry: dict[str, str]) -> list[AddAction]:
    """Inline ``docMappingJson`` (legacy) becomes a registry entry plus ``docMappingRef``."""
    out = []
    for add in adds:
        if add.doc_mapping_json is not None:
            ref = add.doc_mapping_ref or doc_mapping_hash(add.doc_mapping_json)
            registry.setdefault(ref, add.doc_mapping_json)
            add = dataclasses.replace(add, doc_mapping_ref=ref, doc_mapping_json=None)
        out.append(add)
    return out


def write_manifest(
    store: ObjectStore, entries: Sequence[tuple[AddAction, int, int]], config: LogConfig
) -> ManifestInfo:
    """Write one shared manifest of ``(add, addedAtVersion, addedAtTimestamp)`` entries."""
    records = [_file_entry(a, v, t) for a, v, t in entries]
    buf = io.BytesIO()
    schema = _manifest_schema(records)
    fastavro.writer(buf, schema, records, **_codec_options(config))
    data = buf.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    name = f"manifest-{digest[:16]}.avro"
    key = f"{LOG_DIR}/{MANIFESTS_DIR}/{name}"
    store.put(key, data)
    _write_sidecar(store, key, records, [f["name"] for f in schema["fields"]], digest)
    versions = [v for _, v, _ in entries]
    return ManifestInfo(
        path=f"{MANIFESTS_DIR}/{name}",
        num_entries=len(entries),
        min_added_at_version=min(versions),
        max_added_at_version=max(versions),
        partition_bounds=_partition_bounds([a for a, _, _ in entries]),
        live_entry_count=len(entries),  # a new manifest has no tombstoned entry
    )


def _write_sidecar(
    store: ObjectStore,
    manifest_key: str,
    records: Sequence[dict[str, Any]],
    field_names: Sequence[str],
    manifest_sha256: str,
) -> None:
    """The manifest's column sidecar (``manifest_columns``), before any state references the manifest.
    Only a speed-up for readers: a failure to write it is logged, not raised."""
    sidecar = encode_sidecar(records, field_names, FILE_ENTRY_ONLY_FIELDS, manifest_sha256)
    if sidecar is None:
        return
    try:
        store.put(sidecar_key(manifest_key), sidecar)
    except StorageError as e:
        log.warning("manifest %s: column sidecar not written (%s); readers decode the Avro", manifest_key, e)


def _write_manifests(
    store: ObjectStore, entries: Sequence[tuple[AddAction, int, int]], config: LogConfig
) -> list[ManifestInfo]:
    """``entries`` written as manifests of ``state.entriesPerManifest`` entries each, in order."""
    chunk = config.state_entries_per_manifest
    return [write_manifest(store, entries[i : i + chunk], config) for i in range(0, len(entries), chunk)]


def _state_manifest_doc(m: StateManifest) -> dict[str, Any]:
    return {
        "formatVersion": m.format_version,
        "stateVersion": m.state_version,
        "createdAt": m.created_at,
        "numFiles": m.num_files,
        "totalBytes": m.total_bytes,
        "protocolVersion": m.protocol_version,
        "manifests": [
            {
                "path": i.path,
                "numEntries": i.num_entries,
                "minAddedAtVersion": i.min_added_at_version,
                "maxAddedAtVersion": i.max_added_at_version,
                "partitionBounds": i.partition_bounds,
                "tombstoneCount": i.tombstone_count,
                "liveEntryCount": i.live_entry_count,
            }
            for i in m.manifests
        ],
        "tombstones": sorted(m.tombstones),
        "schemaRegistry": dict(m.schema_registry),
        "metadata": m.metadata_json,
    }


def _commit_metadata(m: StateManifest, commit_info: CommitInfoAction | None, commit_point: bool) -> dict[str, str]:
    """Who wrote a state (file metadata every Avro reader ignores, and ``_manifest.json`` keys):
    the seal's marker and digest place (``manifest_integrity.seal_state``); this project's engine;
    for the state a commit writes, that commit's commitInfo; whether
    the state's put is the commit itself (no version file); and the streaming transaction map."""
    meta = {ENGINE_KEY: ENGINE, STATE_INTEGRITY_KEY: STATE_INTEGRITY, STATE_DIGEST_KEY: DIGEST_PLACEHOLDER}
    if m.streaming_txns_json:
        meta[STREAMING_TXNS_KEY] = m.streaming_txns_json
    if commit_info is not None:
        meta[COMMIT_INFO_KEY] = json.dumps(commit_info.to_json_dict(), separators=(",", ":"))
    if commit_point:
        meta[COMMIT_POINT_KEY] = "state"
    return meta


def state_manifest_json(
    m: StateManifest,
    protocol: ProtocolAction | None,
    commit_info: CommitInfoAction | None = None,
    commit_point: bool = False,
) -> bytes:
    doc = _state_manifest_doc(m)
    if protocol is not None:  # this project's extension: the full protocol action
        doc["protocol"] = protocol.to_json_dict()
    doc.update(_commit_metadata(m, commit_info, commit_point))
    return seal_state(json.dumps(doc, separators=(",", ":")).encode(), avro=False)


def state_manifest_avro(
    m: StateManifest,
    protocol: ProtocolAction | None,
    config: LogConfig,
    commit_info: CommitInfoAction | None = None,
    commit_point: bool = False,
) -> bytes:
    """The state manifest as one Avro record in IndexTables4Spark 0.5.x's schema."""
    doc = _state_manifest_doc(m)
    doc["protocol"] = json.dumps(protocol.to_json_dict(), separators=(",", ":")) if protocol is not None else None
    buf = io.BytesIO()
    fastavro.writer(
        buf,
        _PARSED_STATE_SCHEMA,
        [doc],
        metadata=_commit_metadata(m, commit_info, commit_point),
        **_codec_options(config),
    )
    return seal_state(buf.getvalue(), avro=True)


def put_state(
    store: ObjectStore,
    manifest: StateManifest,
    protocol: ProtocolAction | None,
    config: LogConfig,
    commit_info: CommitInfoAction | None = None,
    commit_point: bool = False,
) -> bool:
    """Write the state manifest with put-if-absent: True if this call wrote it, False if it existed.

    A storage error whose outcome is unknown (AmbiguousWriteError) is raised: a caller for whom
    the put is the commit point (``commit_point``) reads the state back (``commit_info`` names it).
    """
    directory = f"{LOG_DIR}/{state_dir(manifest.state_version)}"
    name = STATE_MANIFEST_NAMES[config.state_manifest_format]
    if name.endswith(".avro"):
        data = state_manifest_avro(manifest, protocol, config, commit_info, commit_point)
    else:
        data = state_manifest_json(manifest, protocol, commit_info, commit_point)
    try:
        store.put_if_absent(f"{directory}/{name}", data)
    except ObjectAlreadyExistsError:
        return False
    return True


def _metadata_json(metadata: MetadataAction) -> str:
    return json.dumps({"metaData": metadata.to_json_dict()}, separators=(",", ":"))


def _partition_order(add: AddAction) -> tuple[list[tuple[str, str]], str]:
    """Manifest order: clustered by partition, so that each manifest covers few partitions (tight
    bounds prune well)."""
    return sorted((k, v or "") for k, v in add.partition_values.items()), add.path


def build_compacted_state(
    store: ObjectStore,
    version: int,
    files: Iterable[AddAction],
    metadata: MetadataAction,
    registry: dict[str, str],
    config: LogConfig,
    streaming_txns: TxnMap | None = None,
) -> StateManifest:
    """State ``version`` with every live file rewritten into fresh manifests (written here) and
    no tombstones; the state manifest itself is written by ``put_state``. ``streaming_txns``:
    the streaming transaction map at ``version``, recorded with the state."""
    now = int(time.time() * 1000)
    registry = dict(registry)
    files = _dedupe_doc_mappings(files, registry)
    live = sorted(files, key=_partition_order)
    infos = tuple(_write_manifests(store, [(a, version, now) for a in live], config))
    return StateManifest(
        state_version=version,
        source=f"{state_dir(version)}/{STATE_MANIFEST_NAMES[config.state_manifest_format]}",
        format_version=STATE_FORMAT_VERSION,
        created_at=now,
        num_files=len(live),
        total_bytes=sum(a.size for a in live),
        protocol_version=4,
        manifests=infos,
        tombstones=frozenset(),
        schema_registry=registry,
        metadata_json=_metadata_json(metadata),
        streaming_txns_json=encode_txns(streaming_txns) if streaming_txns else None,
    )


def _rewrite_manifests(
    store: ObjectStore,
    chosen: Sequence[ManifestInfo],
    tombstones: frozenset[str],
    version: int,
    base: int,
    config: LogConfig,
) -> tuple[list[ManifestInfo], frozenset[str]]:
    """The live entries of the ``chosen`` manifests written as new ones (clustered by partition), and
    the tombstoned paths whose entries they dropped; ``version``: the state written, ``base``: its base
    (legacy manifest paths are relative to it). Only safe while every tombstone has one entry
    (``tombstone_counts.counts_known``): a dropped path then has no entry left anywhere else."""
    probe = StateManifest(state_version=base, source="", manifests=tuple(chosen))  # legacy paths: of base
    entries = [
        a for chunk in read_state_chunks(store, probe, config.state_read_parallelism) for a in chunk.all_actions()
    ]
    dropped = frozenset(a.path for a in entries if a.path in tombstones)
    live = sorted((a for a in entries if a.path not in dropped), key=_partition_order)
    now = int(time.time() * 1000)
    return _write_manifests(store, [(a, version, now) for a in live], config), dropped


def _merge_small_manifests(
    store: ObjectStore,
    infos: list[ManifestInfo],
    tombstones: frozenset[str],
    version: int,
    base: int,
    config: LogConfig,
) -> tuple[list[ManifestInfo], frozenset[str]]:
    """``infos`` with their small manifests merged (``_next_small_merge``) until few enough are left,
    and ``tombstones`` without the paths whose entries a merge dropped."""
    while merge := next_small_merge(infos, config):
        merged, dropped = _rewrite_manifests(store, merge, tombstones, version, base, config)
        chosen = {id(i) for i in merge}
        infos = [i for i in infos if id(i) not in chosen] + merged
        tombstones = tombstones - dropped
    return infos, tombstones


def _drop_tombstoned(
    store: ObjectStore,
    infos: list[ManifestInfo],
    tombstones: frozenset[str],
    version: int,
    base: int,
    config: LogConfig,
) -> tuple[list[ManifestInfo], frozenset[str]]:
    """``infos`` with the manifests ``tombstone_rewrites`` picks rewritten without their tombstoned
    entries (in place, so the manifests' order is kept), and ``tombstones`` without those paths."""
    positions = set(tombstone_rewrites(infos, len(tombstones), config))
    if not positions:
        return infos, tombstones
    out: list[ManifestInfo] = []
    for n, info in enumerate(infos):
        if n not in positions:
            out.append(info)
            continue
        rewritten, dropped = _rewrite_manifests(store, [info], tombstones, version, base, config)
        out += rewritten
        tombstones = tombstones - dropped
    return out, tombstones


def build_incremental_state(
    store: ObjectStore,
    base: StateManifest,
    versions: Sequence[tuple[int, Sequence[Action]]],
    metadata: MetadataAction,
    registry: dict[str, str],
    config: LogConfig,
    force_compaction: bool = False,
    streaming_txns: TxnMap | None = None,
) -> StateManifest:
    """State of the last of ``versions``, built on ``base`` (the state just before them); its new
    manifests are written here, the state manifest itself by ``put_state``. ``streaming_txns``:
    the streaming transaction map at the last version, recorded with the state.

    The base's files a run removes are located in its manifests (``tombstone_counts.locate``) and
    counted per manifest; manifests whose tombstones ``tombstone_rewrites`` picks are rewritten
    without them. A state is compacted whole only when ``needs_compaction`` says so (or forced),
    or when a removed path turns out to have several entries."""
    target = versions[-1][0]
    delta = net_changes(versions)
    registry = {**base.schema_registry, **registry}
    known, removed = counts_known(base), frozenset(delta.removed) - base.tombstones
    compact = force_compaction or needs_compaction(base, delta, config)
    located = None if compact else locate(store, base, removed | (frozenset() if known else base.tombstones), config)
    if located is None or located.duplicated:
        live = {a.path: a for a in read_state_files(store, base, config.state_read_parallelism)}
        for path in delta.removed:
            live.pop(path, None)
        live.update({p: a for p, (a, _) in delta.added.items()})
        return build_compacted_state(store, target, live.values(), metadata, registry, config, streaming_txns)
    if known:
        counts = [i.tombstone_count + c for i, c in zip(base.manifests, located.counts, strict=True)]
        tombstones = base.tombstones | (removed & located.found)
    else:  # counted afresh; a tombstone without an entry is dropped (it hides nothing)
        counts, tombstones = list(located.counts), located.found
    gone = [r for p, r in delta.removed.items() if p in located.found and p not in base.tombstones]
    now = int(time.time() * 1000)
    infos = with_counts(base.manifests, counts)
    added = _dedupe_doc_mappings([a for a, _ in delta.added.values()], registry)
    entries = [(a, v, now) for a, (_, v) in zip(added, delta.added.values(), strict=True)]
    entries.sort(key=lambda e: _partition_order(e[0]))  # a big commit's manifests cover few partitions each
    infos += _write_manifests(store, entries, config)
    infos, tombstones = _drop_tombstoned(store, infos, tombstones, target, base.state_version, config)
    infos, tombstones = _merge_small_manifests(store, infos, tombstones, target, base.state_version, config)
    return StateManifest(
        state_version=target,
        source=f"{state_dir(target)}/{STATE_MANIFEST_NAMES[config.state_manifest_format]}",
        format_version=STATE_FORMAT_VERSION,
        created_at=now,
        num_files=base.num_files + len(delta.added) - len(gone),
        total_bytes=base.total_bytes + sum(a.size for a, _ in delta.added.values()) - sum(r.size or 0 for r in gone),
        protocol_version=4,
        manifests=tuple(infos),
        tombstones=tombstones,
        schema_registry=registry,
        metadata_json=_metadata_json(metadata),
        streaming_txns_json=encode_txns(streaming_txns) if streaming_txns else None,
    )
