"""Column sidecars of Avro manifests: a manifest's entries as Arrow columns, stored beside it, so a
reader with an empty cache loads a state without decoding Avro record by record.

Decoding Avro ``FileEntry`` records is the slow part of a cold load (about 10-20 µs a file: 20-25 s
for a million files). When this project writes ``manifests/manifest-<hash>.avro`` it also writes
``manifests/manifest-<hash>.columns-<layout>.arrow``: the entries a decode of that file gives
(``file_table.FileChunk``), as an Arrow IPC file with zstd-compressed buffers. Its schema metadata
holds the SHA-256 of the manifest's bytes, and the SHA-256 of its own decoded content (``sealed_ipc_file``).
A reader that misses its caches reads the manifest (it checks it as always), then the sidecar, and uses
the sidecar only if its content matches its own digest, it validates fully as Arrow, and the manifest's
hash and the entry count match; anything else (no sidecar, another layout, a damaged or foreign file) falls back to
decoding the Avro. So a sidecar can make a load faster, never different.

The Avro manifest stays the format (IndexTables4Spark reads only it); a sidecar is derived data.
Log cleanup keeps a sidecar exactly as long as its manifest (``owning_manifest``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from executor_lib.log.files.file_table import COLUMN_LAYOUT, FileChunk, check_chunk_counts, restore_chunk
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import ObjectNotFoundError

log = logging.getLogger(__name__)

_INFIX = ".columns-"
_SUFFIX = ".arrow"
_HASH_KEY = b"indextables.manifest.sha256"
_ENTRIES_KEY = b"indextables.manifest.entries"
# The SHA-256 of the sidecar's own content as a reader decodes it (``content_digest``): schema, row
# count and every buffer. A sidecar without it (written before) is not used: the Avro is decoded.
_DIGEST_KEY = b"indextables.sidecar.sha256"


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
    return sealed_ipc_file(chunk.full_table().replace_schema_metadata(metadata), "zstd")


def sealed_ipc_file(table: pa.Table, compression: str | None) -> bytes:
    """``table`` as an Arrow IPC file whose schema metadata also holds the SHA-256 of its content as a
    reader decodes it (``content_digest`` of the table read back: a reader hashes the buffers it
    decodes, which need not be the ones written), for ``open_sealed``."""
    decoded = pa.ipc.open_file(pa.py_buffer(_ipc_file(table, compression))).read_all()
    metadata = {**(table.schema.metadata or {}), _DIGEST_KEY: content_digest(decoded).encode()}
    return _ipc_file(table.replace_schema_metadata(metadata), compression)


def sealed_digest(schema: pa.Schema) -> bytes:
    """The digest an ``open_sealed`` table was sealed with (what binds it into another file's metadata)."""
    return (schema.metadata or {})[_DIGEST_KEY]


def open_sealed(source: Any) -> pa.Table:
    """The table of a ``sealed_ipc_file`` (``source``: a buffer or a memory-mapped file), its content
    checked against its digest and validated fully (offsets, dictionary indices, UTF-8), so nothing
    read later from it is out of bounds. ValueError (or an Arrow error) if it is not what was written."""
    table = pa.ipc.open_file(source).read_all()
    table.validate()  # lengths and buffer sizes first: hashing takes struct children, which must not abort
    digest = (table.schema.metadata or {}).get(_DIGEST_KEY)
    if digest is None:
        raise ValueError("it carries no digest of its own content (written before it did)")
    if content_digest(table).encode() != digest:
        raise ValueError("its content does not match its SHA-256 (damaged)")
    table.validate(full=True)
    return table


def _ipc_file(table: pa.Table, compression: str | None) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=compression)) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def content_digest(table: pa.Table) -> str:
    """The SHA-256 (hex) of a decoded sidecar's content: its schema without the digest, its row count,
    and every buffer of every column chunk (children's included), each with its length. Reads the
    buffers only; nothing is interpreted, so damaged offsets cannot crash it."""
    h = hashlib.sha256()
    metadata = {k: v for k, v in (table.schema.metadata or {}).items() if k != _DIGEST_KEY}
    h.update(table.schema.with_metadata(metadata).serialize().to_pybytes())
    h.update(str(table.num_rows).encode())
    for column in table.columns:
        h.update(str(column.num_chunks).encode())
        for chunk in column.chunks:
            _hash_array(h, chunk)
    return h.hexdigest()


def _hash_array(h: Any, array: pa.Array) -> None:
    """Hash an array's length, offset and buffers (its children's too), and a dictionary array's
    dictionary, its descendants' included."""
    h.update(f"{len(array)}:{array.offset}".encode())
    for buffer in array.buffers():
        if buffer is None:
            h.update(b"-")
        else:
            h.update(str(buffer.size).encode())
            h.update(buffer)
    if isinstance(array, pa.DictionaryArray):
        h.update(b"dictionary")
        _hash_array(h, array.dictionary)
    for dictionary in _nested_dictionaries(array):  # (none in a file written before the compact forms)
        h.update(b"nested dictionary")
        _hash_array(h, dictionary)


def _nested_dictionaries(array: pa.Array) -> list[pa.Array]:
    """The dictionaries of an array's dictionary-encoded descendants (a compact path's prefix, a
    partition map's keys), which ``buffers()`` leaves out. Takes children without reading values."""
    kind = array.type
    if pa.types.is_struct(kind):
        children = [array.field(i) for i in range(kind.num_fields)]
    elif pa.types.is_map(kind):
        children = [array.keys, array.items]
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        children = [array.values]
    else:
        return []
    found = []
    for child in children:
        if isinstance(child, pa.DictionaryArray):
            found.append(child.dictionary)
        found.extend(_nested_dictionaries(child))
    return found


def decode_sidecar(data: bytes, manifest_sha256: str, source: str) -> FileChunk | None:
    """The chunk of a sidecar if it belongs to the manifest whose bytes (just read and checked) have
    the SHA-256 ``manifest_sha256`` (hex) and its content has the SHA-256 it was written with
    (``content_digest``), and it validates fully as Arrow; None (a debug log line naming ``source``)
    if not, or if it does not read: the caller decodes the Avro."""
    try:
        table = open_sealed(pa.py_buffer(data))
        metadata = table.schema.metadata or {}
        if metadata.get(_HASH_KEY) != manifest_sha256.encode():
            raise ValueError("it belongs to other manifest bytes")
        if metadata.get(_ENTRIES_KEY) != str(table.num_rows).encode():
            raise ValueError(f"{table.num_rows} rows, metadata says {metadata.get(_ENTRIES_KEY)!r}")
        return check_chunk_counts(restore_chunk(table.replace_schema_metadata(None)))  # else: the Avro's error
    except Exception as e:  # derived data: anything a damaged file raises (SystemError, TypeError...) means the Avro
        log.debug("manifest sidecar %s ignored (%s: %s)", source, type(e).__name__, e)
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
