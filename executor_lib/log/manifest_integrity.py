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

State manifests (``state-v<N>/_manifest.avro`` / ``_manifest.json``) have fixed names, so
only their ``.crc`` sidecar (JVM, local filesystem) and a snappy CRC can be checked; a
changed byte in one written by this project or on an object store is detected only when it
breaks the Avro/JSON structure or names a manifest that does not exist or does not match.

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


def verify_log_file(store: ObjectStore, key: str, data: bytes, source: str) -> None:
    """Check the bytes just read from ``key`` against its content address or, failing that, its
    Hadoop ``.crc`` sidecar (looked for only on a local filesystem, the one place Hadoop writes
    them, so object stores pay no extra request). CorruptLogError names ``source``."""
    name = key.rpartition("/")[2]
    if check_content_address(data, name, source) or not isinstance(store, LocalStore):
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


def check_content_address(data: bytes, name: str, source: str) -> bool:
    """Raise CorruptLogError unless ``data`` hashes to the address in ``name``; False if it has none."""
    expected = content_address(name)
    if expected is None:
        return False
    actual = hashlib.sha256(data).hexdigest()[: len(expected)]
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
