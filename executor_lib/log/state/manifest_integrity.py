"""Checking the bytes of a state's Avro files before they are decoded or cached.

Avro itself carries no checksum of a block's content (only the snappy codec does), and a
flipped bit in a manifest's data block often still decodes — into other paths, sizes or
partition values. So a manifest's bytes are checked against whatever the writer left:

* **Content address.** This project names a shared manifest ``manifest-<h>.avro`` where
  ``<h>`` is the first 16 hex digits of the SHA-256 of its bytes (``state_writer``): the
  bytes must hash to the name. This catches every change of the content.
* **Hadoop ``.crc`` sidecar.** IndexTables4Spark names its manifests after 8 hex digits of a
  random UUID (nothing to check), but through Hadoop's local filesystem (a
  ``ChecksumFileSystem``) it writes ``.<name>.crc`` beside every file: ``crc\\0``, a big-endian
  int ``bytesPerChecksum``, then the CRC32 of each chunk of that many bytes. Where the sidecar
  exists the file must match it. Object stores (S3A) and HDFS write no sidecar, so a JVM
  manifest there is checked only as below.
* **Snappy block CRC.** The Avro snappy codec stores the CRC32 of each decompressed block
  (``avro_records`` checks it; fastavro does not). zstandard frames as both writers produce
  them carry no checksum, deflate and null have none.
* **Entry count.** The state manifest records each manifest's ``numEntries``; the decoded
  record count must equal it (``avro_state``).

* **State digest.** State manifests (``state-v<N>/_manifest.avro`` / ``_manifest.json``) have
  fixed names. This project seals each one it writes with the SHA-256 of its own bytes, taken
  with the digest's place holding 64 zeros: in the Avro container's file metadata (which every
  Avro reader, the JVM's included, ignores) or as a key of the JSON object, beside
  ``indextables.integrity = sha256-v1``. A reader checks the digest wherever it is present, and
  a state carrying the marker but no digest is corrupt, so any one changed bit — in the record,
  the schema in the header, the sync marker or the digest — is caught. States written before the
  seal, and JVM states, carry neither (their ``.crc`` sidecar, where Hadoop wrote one, is checked).

Every check runs over bytes already in memory (hashlib and zlib run at GB/s).
"""

from __future__ import annotations

import hashlib
import re
import struct
import zlib

from executor_lib.storage.base import ObjectStore
from executor_lib.storage.local import LocalStore
from indextables_contract.errors import CorruptLogError, ObjectNotFoundError

CONTENT_ADDRESSED_NAME = re.compile(r"manifest-([0-9a-f]{16})\.avro")
HADOOP_CRC_MAGIC = b"crc\x00"


def verify_log_file(store: ObjectStore, key: str, data: bytes, source: str, sha256: str | None = None) -> None:
    """Check the bytes just read from ``key`` against its content address or, failing that, its
    Hadoop ``.crc`` sidecar (looked for only on a local filesystem, the one place Hadoop writes
    them, so object stores pay no extra request). ``sha256``: the bytes' SHA-256 (hex) if the
    caller has it. CorruptLogError names ``source``."""
    name = key.rpartition("/")[2]
    if check_content_address(data, name, source, sha256) or not isinstance(store, LocalStore):
        return
    try:
        sidecar = store.read(crc_sidecar_key(key))
    except ObjectNotFoundError:
        return
    check_hadoop_crc(data, sidecar, source)


def content_address(name: str) -> str | None:
    """The SHA-256 prefix a manifest's file name promises, or None if the name promises none."""
    m = CONTENT_ADDRESSED_NAME.fullmatch(name)
    return m.group(1) if m else None


def check_content_address(data: bytes, name: str, source: str, sha256: str | None = None) -> bool:
    """Raise CorruptLogError unless ``data`` hashes to the address in ``name``; False if it has none.
    ``sha256``: the bytes' SHA-256 (hex) if the caller has it."""
    expected = content_address(name)
    if expected is None:
        return False
    actual = (sha256 or hashlib.sha256(data).hexdigest())[: len(expected)]
    if actual != expected:
        raise CorruptLogError(
            f"{source}: content does not match its name (SHA-256 prefix {actual}, expected {expected}): "
            "the manifest was changed or damaged after it was written"
        )
    return True


def crc_sidecar_key(key: str) -> str:
    """Hadoop's checksum file of ``key``: ``dir/.name.crc``."""
    directory, _, name = key.rpartition("/")
    return f"{directory}/.{name}.crc" if directory else f".{name}.crc"


def check_hadoop_crc(data: bytes, sidecar: bytes, source: str) -> None:
    """Raise CorruptLogError unless ``data`` matches its Hadoop ChecksumFileSystem ``.crc`` sidecar."""
    if len(sidecar) < 8 or sidecar[:4] != HADOOP_CRC_MAGIC or (len(sidecar) - 8) % 4:
        raise CorruptLogError(f"{source}: its Hadoop checksum file (.crc) is malformed ({len(sidecar)} bytes)")
    (chunk,) = struct.unpack(">i", sidecar[4:8])
    if chunk <= 0:
        raise CorruptLogError(f"{source}: its Hadoop checksum file (.crc) has bytesPerChecksum {chunk}")
    expected = struct.unpack(f">{(len(sidecar) - 8) // 4}I", sidecar[8:])
    chunks = -(-len(data) // chunk)
    if len(expected) != chunks:
        raise CorruptLogError(
            f"{source}: {len(data)} bytes, but its Hadoop checksum file (.crc) covers {len(expected)} chunks "
            f"of {chunk} bytes: the file was truncated, extended or replaced"
        )
    view = memoryview(data)
    for i, crc in enumerate(expected):
        if zlib.crc32(view[i * chunk : (i + 1) * chunk]) != crc:
            raise CorruptLogError(
                f"{source}: bytes {i * chunk}-{min((i + 1) * chunk, len(data)) - 1} do not match "
                "its Hadoop checksum file (.crc): the file is damaged"
            )


def check_snappy_crc(decompressed: bytes | memoryview, stored: bytes, offset: int) -> None:
    """Raise CorruptLogError unless a snappy block's stored big-endian CRC32 matches its content."""
    if len(stored) != 4 or zlib.crc32(decompressed) != int.from_bytes(stored, "big"):
        raise CorruptLogError(f"Avro block at byte {offset}: snappy CRC32 does not match the decompressed data")


# --- state manifest seal -----------------------------------------------------------------------

STATE_DIGEST_KEY = "indextables.sha256"
STATE_INTEGRITY_KEY = "indextables.integrity"
STATE_INTEGRITY = "sha256-v1"
DIGEST_PLACEHOLDER = "0" * 64
_JSON_DIGEST = re.compile(rb'"indextables\.sha256":"([^"]*)"')
_AVRO_MAGIC = b"Obj\x01"


def seal_state(data: bytes, avro: bool) -> bytes:
    """``data`` (a state manifest written with ``DIGEST_PLACEHOLDER`` as its digest) with the digest set."""
    start, end = _digest_span(data, avro, "a state manifest being written")
    if start is None or end is None or data[start:end] != DIGEST_PLACEHOLDER.encode():
        raise CorruptLogError("a state manifest being written has no digest placeholder")
    return data[:start] + hashlib.sha256(data).hexdigest().encode() + data[end:]


def check_state_seal(data: bytes, avro: bool, source: str) -> None:
    """CorruptLogError naming ``source`` unless a sealed state manifest's bytes match their digest (or
    the state is unsealed: written before the seal, or by IndexTables4Spark)."""
    start, end = _digest_span(data, avro, source)
    if start is None or end is None:
        if STATE_INTEGRITY_KEY.encode() in data:
            raise CorruptLogError(f"{source}: the state manifest is sealed ({STATE_INTEGRITY_KEY}) but has no digest")
        return
    stored = data[start:end]
    actual = hashlib.sha256(data[:start] + DIGEST_PLACEHOLDER.encode() + data[end:]).hexdigest().encode()
    if len(stored) != len(DIGEST_PLACEHOLDER) or stored != actual:
        raise CorruptLogError(
            f"{source}: the state manifest's bytes do not match its SHA-256 digest (the file is damaged; "
            "readers fall back to an older state and the version files where those are retained)"
        )


def _digest_span(data: bytes, avro: bool, source: str) -> tuple[int | None, int | None]:
    if not avro:
        m = _JSON_DIGEST.search(data)
        return (m.start(1), m.end(1)) if m else (None, None)
    try:
        header = avro_metadata_spans(data)
    except ValueError as e:
        raise CorruptLogError(f"{source}: the Avro header does not parse ({e})") from e
    return header.get(STATE_DIGEST_KEY, (None, None))


def avro_metadata_spans(data: bytes) -> dict[str, tuple[int, int]]:
    """Each file-metadata key of an Avro container and the span of its value in ``data``.
    ValueError if the header is malformed."""
    if not data.startswith(_AVRO_MAGIC):
        raise ValueError("no Avro magic")
    pos, spans = len(_AVRO_MAGIC), dict[str, tuple[int, int]]()
    while True:
        count, pos = _avro_long(data, pos)
        if count == 0:
            return spans
        if count < 0:
            count = -count
            _, pos = _avro_long(data, pos)  # the block's size in bytes
        for _ in range(count):
            key_length, pos = _avro_long(data, pos)
            key_end = pos + key_length
            if key_length < 0 or key_end > len(data):
                raise ValueError("a metadata key runs past the file")
            value_length, value_start = _avro_long(data, key_end)
            value_end = value_start + value_length
            if value_length < 0 or value_end > len(data):
                raise ValueError("a metadata value runs past the file")
            spans[data[pos:key_end].decode("utf-8", "replace")] = (value_start, value_end)
            pos = value_end


def _avro_long(data: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint at ``pos``: (value, position after it)."""
    shift = result = 0
    while True:
        if not 0 <= pos < len(data) or shift > 63:
            raise ValueError("a truncated or overlong number")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
