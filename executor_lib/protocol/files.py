"""Names and byte encodings of the files in ``_transaction_log/``. Standard library only.

* ``<v:020d>.json`` — version file: newline-delimited JSON actions, plain or compressed.
* ``<v:020d>.checkpoint.json`` — single-file checkpoint (compressed like a version file),
  or the plain-JSON manifest of a multi-part checkpoint whose parts are
  ``<v:020d>.checkpoint.<id>.<part:05d>.json``.
* ``_last_checkpoint`` — plain JSON hint to the newest checkpoint or state.
* ``state-v<v:020d>/`` — Avro state directory; ``manifests/`` shared Avro manifests.

Compressed files carry a two-byte header: ``0x01`` (magic) then a codec byte
(``0x01`` = gzip), then the codec's stream. A file that does not start with ``0x01``
is plain JSON; a bare gzip stream (``1f 8b``) is accepted too.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from typing import Any

from indextables_contract.errors import CorruptLogError

LOG_DIR = "_transaction_log"
LAST_CHECKPOINT = "_last_checkpoint"
MANIFESTS_DIR = "manifests"

COMPRESSION_MAGIC = 0x01
CODEC_GZIP = 0x01
GZIP_MAGIC = b"\x1f\x8b"

VERSION_DIGITS = 20
_VERSION_FILE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint\.json$")
_CHECKPOINT_PART = re.compile(r"^(\d{20})\.checkpoint\.([0-9A-Za-z-]+)\.(\d+)\.json$")
_STATE_DIR = re.compile(r"^state-v(\d{20})$")


def version_name(version: int) -> str:
    return f"{version:0{VERSION_DIGITS}d}"


def version_file(version: int) -> str:
    return f"{version_name(version)}.json"


def checkpoint_file(version: int) -> str:
    return f"{version_name(version)}.checkpoint.json"


def checkpoint_part_file(version: int, checkpoint_id: str, part: int) -> str:
    return f"{version_name(version)}.checkpoint.{checkpoint_id}.{part:05d}.json"


def state_dir(version: int) -> str:
    return f"state-v{version_name(version)}"


def parse_version_file(name: str) -> int | None:
    m = _VERSION_FILE.match(name)
    return int(m.group(1)) if m else None


def parse_checkpoint_file(name: str) -> int | None:
    m = _CHECKPOINT_FILE.match(name)
    return int(m.group(1)) if m else None


def parse_checkpoint_part(name: str) -> tuple[int, str, int] | None:
    m = _CHECKPOINT_PART.match(name)
    return (int(m.group(1)), m.group(2), int(m.group(3))) if m else None


def parse_state_dir(name: str) -> int | None:
    m = _STATE_DIR.match(name.rstrip("/"))
    return int(m.group(1)) if m else None


# --- byte encodings ------------------------------------------------------------------------


def encode_log_bytes(payload: bytes, compress: bool, level: int = 6) -> bytes:
    """Encode a version/checkpoint file: header + gzip when ``compress``, else plain."""
    if not compress:
        return payload
    return bytes((COMPRESSION_MAGIC, CODEC_GZIP)) + gzip.compress(payload, compresslevel=level, mtime=0)


def decode_log_bytes(data: bytes, source: str) -> str:
    """Decode a version/checkpoint file (plain, header-prefixed gzip or bare gzip) to text."""
    if not data:
        raise CorruptLogError(f"{source}: file is empty")
    if data[0] == COMPRESSION_MAGIC:
        if len(data) < 2:
            raise CorruptLogError(f"{source}: compression header is truncated (1 byte)")
        if data[1] != CODEC_GZIP:
            raise CorruptLogError(f"{source}: unknown compression codec byte 0x{data[1]:02x}")
        return _gunzip(data[2:], source)
    if data[:2] == GZIP_MAGIC:
        return _gunzip(data, source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptLogError(f"{source}: not UTF-8 JSON and not a known compressed format") from e


def _gunzip(data: bytes, source: str) -> str:
    try:
        raw = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as e:
        raise CorruptLogError(f"{source}: corrupt or truncated gzip data ({e})") from e
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptLogError(f"{source}: decompressed content is not UTF-8") from e


def parse_json_object(data: bytes, source: str) -> dict[str, Any]:
    """A small plain-JSON file (``_last_checkpoint``, a multi-part manifest)."""
    try:
        obj = json.loads(decode_log_bytes(data, source))
    except json.JSONDecodeError as e:
        raise CorruptLogError(f"{source}: invalid JSON: {e.msg} at line {e.lineno} column {e.colno}") from e
    except RecursionError as e:
        raise CorruptLogError(f"{source}: JSON nested too deep") from e
    if not isinstance(obj, dict):
        raise CorruptLogError(f"{source}: expected a JSON object")
    return obj
