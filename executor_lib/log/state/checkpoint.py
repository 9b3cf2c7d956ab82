"""JSON checkpoints (single-file and multi-part) and the ``_last_checkpoint`` hint.

A checkpoint at version N holds the consolidated state at N as actions: protocol,
metaData, live adds, recent remove tombstones and skips. Up to ``actionsPerPart``
actions it is one file ``<N>.checkpoint.json`` (compressed like a version file);
beyond that it is parts ``<N>.checkpoint.<id>.<part:05d>.json`` written first, then a
plain-JSON manifest ``<N>.checkpoint.json`` written with put-if-absent, so a reader that
finds the manifest finds every part. ``_last_checkpoint`` is then overwritten; it is
only a hint (readers list past it), so a writer that crashes before updating it loses
nothing.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from executor_lib.log.config import LogConfig
from executor_lib.log.state.state import TableState
from executor_lib.protocol.actions import Action, actions_from_ndjson, actions_to_ndjson
from executor_lib.protocol.files import (
    LAST_CHECKPOINT,
    LOG_DIR,
    checkpoint_file,
    checkpoint_part_file,
    decode_log_bytes,
    encode_log_bytes,
    parse_json_object,
)
from executor_lib.protocol.schema_registry import configuration_with_registry, renormalize
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import (
    AmbiguousWriteError,
    CorruptLogError,
    MissingLogFileError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
)

FORMAT_JSON = "json"
FORMAT_JSON_MULTIPART = "json-multipart"
FORMAT_AVRO_STATE = "avro-state"


@dataclass(frozen=True)
class LastCheckpoint:
    """The ``_last_checkpoint`` hint."""

    version: int
    size: int = 0
    size_in_bytes: int = 0
    num_files: int = 0
    created_time: int = 0
    parts: int | None = None
    checkpoint_id: str | None = None
    format: str | None = None
    state_dir: str | None = None

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": self.version,
                "size": self.size,
                "sizeInBytes": self.size_in_bytes,
                "numFiles": self.num_files,
                "createdTime": self.created_time,
                "parts": self.parts,
                "checkpointId": self.checkpoint_id,
                "format": self.format,
                "stateDir": self.state_dir,
            },
            separators=(",", ":"),
        ).encode()


def read_last_checkpoint(store: ObjectStore) -> LastCheckpoint | None:
    """The hint, or None when missing or unreadable (it is only a hint: readers list past it)."""
    key = f"{LOG_DIR}/{LAST_CHECKPOINT}"
    try:
        d = parse_json_object(store.read(key), store.uri_of(key))
        return LastCheckpoint(
            version=int(d["version"]),
            size=int(d.get("size") or 0),
            size_in_bytes=int(d.get("sizeInBytes") or 0),
            num_files=int(d.get("numFiles") or 0),
            created_time=int(d.get("createdTime") or 0),
            parts=d.get("parts"),
            checkpoint_id=d.get("checkpointId"),
            format=d.get("format"),
            state_dir=d.get("stateDir"),
        )
    except (ObjectNotFoundError, CorruptLogError, KeyError, TypeError, ValueError):
        return None


def write_last_checkpoint_if_newer(store: ObjectStore, info: LastCheckpoint, replace_equal: bool = True) -> bool:
    """Write the hint ``info`` unless the hint there is newer (or, without ``replace_equal``, as new);
    returns whether it was written. Read, then overwritten: a racing writer's newer hint can be written
    over (``maintenance.write_state_hint`` repairs that)."""
    current = read_last_checkpoint(store)
    if current is not None and (
        current.version > info.version or (current.version == info.version and not replace_equal)
    ):
        return False
    store.put(f"{LOG_DIR}/{LAST_CHECKPOINT}", info.to_json())
    return True


# --- reading -------------------------------------------------------------------------------


def read_checkpoint_actions(store: ObjectStore, version: int) -> list[Action]:
    """All actions of the JSON checkpoint at ``version`` (single file or multi-part)."""
    key = f"{LOG_DIR}/{checkpoint_file(version)}"
    source = store.uri_of(key)
    data = store.read(key)
    text = decode_log_bytes(data, source)
    if text.lstrip().startswith("{") and _is_multipart_manifest(text):
        return _read_multipart(store, parse_json_object(data, source), version, source)
    return actions_from_ndjson(text, source)


def _is_multipart_manifest(text: str) -> bool:
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False  # ndjson with several lines (a hostile deep one is judged as the lines are read)
    return isinstance(obj, dict) and "parts" in obj and "checkpointId" in obj


def _read_multipart(store: ObjectStore, manifest: dict[str, Any], version: int, source: str) -> list[Action]:
    parts = manifest.get("parts")
    if not isinstance(parts, list) or not parts:
        raise CorruptLogError(f"{source}: multi-part checkpoint manifest lists no parts")
    actions: list[Action] = []
    for name in parts:
        key = f"{LOG_DIR}/{name}"
        try:
            data = store.read(key)
        except ObjectNotFoundError as e:
            raise MissingLogFileError(
                f"{store.uri_of(key)}: part of checkpoint {version} (listed in {source}) is missing"
            ) from e
        part_source = store.uri_of(key)
        actions.extend(actions_from_ndjson(decode_log_bytes(data, part_source), part_source))
    return actions


# --- writing -------------------------------------------------------------------------------


def checkpoint_actions(state: TableState, config: LogConfig, now_ms: int | None = None) -> list[Action]:
    """The actions a checkpoint of ``state`` holds: protocol, metadata, then the rest.

    Tombstones older than the retention are dropped. When more than
    ``schema_renormalize_threshold`` distinct doc-mapping refs are in use, files are
    pointed at the canonical ref of their schema (older writers hashed raw JSON). Every
    registry entry is kept: a later version file may still use any ref.
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    horizon = now_ms - int(config.checkpoint_tombstone_retention_hours * 3600 * 1000)
    metadata, files = state.metadata, list(state.files.values())
    refs = {f.doc_mapping_ref for f in files if f.doc_mapping_ref}
    if metadata is not None and len(refs) > config.schema_renormalize_threshold:
        registry, remap = renormalize(state.schema_registry, refs)
        files = [
            dataclasses.replace(f, doc_mapping_ref=remap[f.doc_mapping_ref]) if f.doc_mapping_ref else f for f in files
        ]
        merged = {**state.schema_registry, **registry}
        metadata = metadata.with_configuration(configuration_with_registry(metadata.configuration, merged))
    head: list[Action] = [a for a in (state.protocol, metadata) if a is not None]
    tombstones = [r for r in state.tombstones.values() if (r.deletion_timestamp or now_ms) >= horizon]
    return head + files + tombstones + list(state.skips.values())


def _chunks(actions: list[Action], size: int) -> Iterator[list[Action]]:
    for start in range(0, len(actions), size):
        yield actions[start : start + size]


def write_checkpoint(store: ObjectStore, state: TableState, config: LogConfig) -> LastCheckpoint:
    """Write the checkpoint of ``state`` and point ``_last_checkpoint`` at it."""
    version = state.version
    actions = checkpoint_actions(state, config)
    key = f"{LOG_DIR}/{checkpoint_file(version)}"
    parts: int | None = None
    checkpoint_id: str | None = None
    fmt = FORMAT_JSON
    payload_bytes = 0
    if config.checkpoint_multipart_enabled and len(actions) > config.checkpoint_actions_per_part:
        checkpoint_id = uuid.uuid4().hex[:12]
        names: list[str] = []
        for i, chunk in enumerate(_chunks(actions, config.checkpoint_actions_per_part), start=1):
            name = checkpoint_part_file(version, checkpoint_id, i)
            body = encode_log_bytes(actions_to_ndjson(chunk), config.compression_enabled, config.gzip_level)
            payload_bytes += len(body)
            store.put(f"{LOG_DIR}/{name}", body)
            names.append(name)
        manifest = {
            "version": version,
            "checkpointId": checkpoint_id,
            "parts": names,
            "createdTime": int(time.time() * 1000),
            "format": FORMAT_JSON,
        }
        body = json.dumps(manifest, separators=(",", ":")).encode()
        parts, fmt = len(names), FORMAT_JSON_MULTIPART
    else:
        body = encode_log_bytes(actions_to_ndjson(actions), config.compression_enabled, config.gzip_level)
    payload_bytes += len(body)
    try:
        store.put_if_absent(key, body)
    except (ObjectAlreadyExistsError, AmbiguousWriteError):
        # Another writer checkpointed this version first (its checkpoint is equivalent), or
        # our own write landed and the answer was lost. Either way a complete checkpoint is
        # there. Parts are never deleted here: they may be the ones the manifest lists.
        # Unreferenced parts are harmless and are collected by log cleanup.
        return read_last_checkpoint(store) or LastCheckpoint(version=version)
    info = LastCheckpoint(
        version=version,
        size=len(actions),
        size_in_bytes=payload_bytes,
        num_files=len(state.files),
        created_time=int(time.time() * 1000),
        parts=parts,
        checkpoint_id=checkpoint_id,
        format=fmt,
        state_dir=None,
    )
    write_last_checkpoint_if_newer(store, info)
    return info
