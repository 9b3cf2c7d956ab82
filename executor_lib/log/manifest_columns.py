"""Column sidecars of Avro manifests: a manifest's entries as Arrow columns, stored beside it, so a
reader with an empty cache loads a state without decoding Avro record by record.

Decoding Avro ``FileEntry`` records is the slow part of a cold load (about 10-20 µs a file: 20-25 s
for a million files). When this project writes ``manifests/manifest-<hash>.avro`` it also writes
``manifests/manifest-<hash>.columns-<layout>.arrow``: the entries a decode of that file gives
(``file_table.FileChunk``), as an Arrow IPC file with zstd-compressed buffers. Its schema metadata
holds the SHA-256 of the manifest's bytes. A reader that misses its caches reads the manifest
(it checks it as always), then the sidecar, and uses the sidecar only if that hash and the entry
count match; anything else (no sidecar, another layout, a damaged or foreign file) falls back to
decoding the Avro. So a sidecar can make a load faster, never different.

The Avro manifest stays the format (IndexTables4Spark reads only it); a sidecar is derived data.
Log cleanup keeps a sidecar exactly as long as its manifest (``owning_manifest``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from executor_lib.log.file_table import COLUMN_LAYOUT, FileChunk, restore_chunk
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import ObjectNotFoundError

log = logging.getLogger(__name__)

_INFIX = ".columns-"
_SUFFIX = ".arrow"
_HASH_KEY = b"indextables.manifest.sha256"
_ENTRIES_KEY = b"indextables.manifest.entries"


def sidecar_key(manifest_key: str) -> str:
    """The store key of the column sidecar of the manifest at ``manifest_key``.

    Example:
        >>> sidecar_key("_transaction_log/manifests/manifest-0a1b.avro").startswith(
        ...     "_transaction_log/manifests/manifest-0a1b.columns-")
        True
    """
    stem = manifest_key[: -len(".avro")] if manifest_key.endswith(".avro") else manifest_key
    return f"{stem}{_INFIX}{COLUMN_LAYOUT}{_SUFFIX}"


def owning_manifest(key: str) -> str | None:
    """The manifest key a sidecar key belongs to (any layout), or None if ``key`` is no sidecar."""
    stem, infix, rest = key.rpartition(_INFIX)
    if not infix or not rest.endswith(_SUFFIX) or "/" in rest:
        return None
    return f"{stem}.avro"


def encode_sidecar(
    records: Sequence[Mapping[str, Any]], field_names: Sequence[str], ignore: frozenset[str], manifest_sha256: str
) -> bytes | None:
    """The sidecar of a manifest written from ``records`` (with ``field_names``, its writer
    schema's fields): the chunk ``FileChunk.from_records`` makes of them, bound to the manifest's
    bytes by their SHA-256 (hex, as the writer computed it for the manifest's name). None when the
    chunk keeps Python objects (unknown fields Arrow cannot hold)."""
    chunk = FileChunk.from_records(records, field_names, ignore)
    if chunk.objects is not None:
        return None
    metadata = {_HASH_KEY: manifest_sha256.encode(), _ENTRIES_KEY: str(len(chunk)).encode()}
    table = chunk.table.replace_schema_metadata(metadata)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def decode_sidecar(data: bytes, manifest_sha256: str, source: str) -> FileChunk | None:
    """The chunk of a sidecar if it belongs to the manifest whose bytes (just read and checked) have
    the SHA-256 ``manifest_sha256`` (hex); None (a debug log line naming ``source``) if it does not,
    or does not read."""
    try:
        table = pa.ipc.open_file(pa.py_buffer(data)).read_all()
        metadata = table.schema.metadata or {}
        if metadata.get(_HASH_KEY) != manifest_sha256.encode():
            raise ValueError("it belongs to other manifest bytes")
        if metadata.get(_ENTRIES_KEY) != str(table.num_rows).encode():
            raise ValueError(f"{table.num_rows} rows, metadata says {metadata.get(_ENTRIES_KEY)!r}")
        return restore_chunk(table.replace_schema_metadata(None))
    except (OSError, pa.ArrowException, ValueError) as e:
        log.debug("manifest sidecar %s ignored (%s)", source, e)
        return None


def read_sidecar(store: ObjectStore, manifest_key: str, manifest_sha256: str) -> FileChunk | None:
    """The entries of the manifest at ``manifest_key`` (whose bytes have the SHA-256
    ``manifest_sha256``) from its sidecar, or None when it has no usable one."""
    key = sidecar_key(manifest_key)
    try:
        data = store.read(key)
    except ObjectNotFoundError:
        return None
    return decode_sidecar(data, manifest_sha256, store.uri_of(key))
