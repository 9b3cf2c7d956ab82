"""tantivy4java's parquet companion manifest (``_parquet_manifest.json``), written and read here.

A companion split of IndexTables4Spark (tantivy4java ``native/src/parquet_companion/``) is a Quickwit
split bundle whose index stores no field values and whose bundle holds one more member,
``_parquet_manifest.json``: the serde JSON of ``manifest.rs``'s ``ParquetManifest`` (zstd level 3 when
that is smaller, ``manifest_io.rs``), listing the split's source Parquet files (``relative_path`` to the
table root, ``file_size_bytes``, global ``row_offset``, ``num_rows``, row groups with column chunk byte
ranges), the Arrow column -> Tantivy field ``column_mapping``, ``fast_field_mode``
(``disabled``/``hybrid``/``parquet_only``), ``segment_row_ranges`` and the compact string indexing maps.
Every document carries two u64 fast fields, ``__pq_file_hash`` (``hash_parquet_path`` of its file's
relative path: Rust's ``DefaultHasher``, i.e. SipHash-1-3 with zero keys over the UTF-8 bytes and a
0xFF terminator) and ``__pq_row_in_file``; the JVM resolves a hit to (file, row) through them
(``docid_mapping.rs``), so they survive segment and split merges.

``exact_only`` string columns are U64 fields holding ``hash_string_value`` (xxHash64, seed 0, 0 -> 1);
``text_*_exactonly`` columns index the text with the pattern's matches removed and put the matches'
hashes in a U64 field ``<column>__uuids`` (``string_indexing.rs``).

Example: ``deserialize_manifest(serialize_manifest(m), "x")["total_rows"]``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from executor_lib.format._zstd import zstd
from indextables_contract.errors import ConfigError, CorruptSplitError

MANIFEST_MEMBER = "_parquet_manifest.json"
MANIFEST_VERSION = 1
FILE_HASH_FIELD = "__pq_file_hash"
ROW_IN_FILE_FIELD = "__pq_row_in_file"
PHASH_PREFIX = "_phash_"
COMPANION_SUFFIX = "__uuids"
UUID_REGEX = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# FASTFIELDS MODE (the SQL's names) -> FastFieldMode's serde name
FAST_FIELD_MODE_NAMES = {"DISABLED": "disabled", "HYBRID": "hybrid", "PARQUET_ONLY": "parquet_only"}
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZSTD_LEVEL = 3
_MASK = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def _sip_round(v0: int, v1: int, v2: int, v3: int) -> tuple[int, int, int, int]:
    v0 = (v0 + v1) & _MASK
    v1 = _rotl(v1, 13) ^ v0
    v0 = _rotl(v0, 32)
    v2 = (v2 + v3) & _MASK
    v3 = _rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & _MASK
    v3 = _rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & _MASK
    v1 = _rotl(v1, 17) ^ v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash13(data: bytes, k0: int = 0, k1: int = 0) -> int:
    """SipHash-1-3 (one compression round, three finalization rounds) of ``data``, as Rust's ``SipHasher13``."""
    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573
    tail = len(data) % 8
    for (m,) in struct.iter_unpack("<Q", data[: len(data) - tail]):
        v3 ^= m
        v0, v1, v2, v3 = _sip_round(v0, v1, v2, v3)
        v0 ^= m
    b = ((len(data) & 0xFF) << 56) | int.from_bytes(data[len(data) - tail :], "little")
    v3 ^= b
    v0, v1, v2, v3 = _sip_round(v0, v1, v2, v3)
    v0 ^= b
    v2 ^= 0xFF
    for _ in range(3):
        v0, v1, v2, v3 = _sip_round(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


def hash_parquet_path(relative_path: str) -> int:
    """tantivy4java's ``hash_parquet_path``: ``str::hash`` into ``DefaultHasher::new()`` (the bytes, then 0xFF).

    Example: ``hash_parquet_path("part-0001.parquet") == 134649504540951650``.
    """
    return siphash13(relative_path.encode() + b"\xff")


def _xxhash() -> Any:
    """The ``xxhash`` package (the ``companion`` extra), or ConfigError saying how to install it."""
    try:
        import xxhash
    except ImportError as e:
        raise ConfigError(
            "the hashed companion modes (exact_only, *_exactonly, HASHED FASTFIELDS) need the xxhash "
            "package on the driver and executors: pip install xxhash (the project's companion extra; from its "
            "checkout: pip install -e '.[companion]')"
        ) from e
    return xxhash


def hash_string_value(value: str) -> int:
    """tantivy4java's ``hash_string_value``: xxHash64 (seed 0) of the UTF-8 bytes, 0 mapped to 1."""
    h = _xxhash().xxh64_intdigest(value.encode())
    return h or 1


def hash_strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``hash_string_value`` of each string (nulls stay null), as uint64. One C call per value
    (xxHash has no vectorized Arrow kernel); used at indexing and on query literals only."""
    digest = _xxhash().xxh64_intdigest
    hashed = [None if v is None else (digest(v.encode()) or 1) for v in values.to_pylist()]
    return pa.array(hashed, pa.uint64())


def pattern_hashes(values: pa.Array | pa.ChunkedArray, pattern: str) -> pa.Array:
    """Per string, the ``hash_string_value`` of each match of ``pattern`` (``extract_pattern``), as
    list<uint64> (null for a null string). Python's ``re`` runs the pattern (the UUID pattern and
    ordinary ones mean the same in Rust's ``regex``); one call per value, at indexing only."""
    import re

    digest = _xxhash().xxh64_intdigest
    compiled = re.compile(pattern)
    out = [
        None if v is None else [digest(m.group(0).encode()) or 1 for m in compiled.finditer(v)]
        for v in values.to_pylist()
    ]
    return pa.array(out, pa.list_(pa.uint64()))


def tantivy_type_name(t: pa.DataType) -> str:
    """``schema_derivation.rs``'s ``arrow_type_to_tantivy_type``."""
    if pa.types.is_boolean(t):
        return "Bool"
    if pa.types.is_signed_integer(t):
        return "I64"
    if pa.types.is_unsigned_integer(t):
        return "U64"
    if pa.types.is_floating(t) or pa.types.is_decimal128(t):
        return "F64"
    if pa.types.is_decimal256(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        return "Str"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "Bytes"
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        return "Date"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_map(t) or pa.types.is_struct(t):
        return "Json"
    return "Unknown"


def parquet_type_name(t: pa.DataType) -> str:
    """``schema_derivation.rs``'s ``arrow_type_to_parquet_type``."""
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_int64(t) or pa.types.is_uint64(t) or pa.types.is_timestamp(t) or pa.types.is_date64(t):
        return "INT64"
    if pa.types.is_integer(t) or pa.types.is_date32(t):
        return "INT32"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_decimal(t) or pa.types.is_fixed_size_binary(t):
        return "FIXED_LEN_BYTE_ARRAY"
    return "BYTE_ARRAY"


def column_mapping(
    schema: pa.Schema, field_ids: Mapping[str, int], overrides: Mapping[str, str], kinds: Mapping[str, str]
) -> list[dict[str, Any]]:
    """``ColumnMapping`` entries of a file's Arrow ``schema`` (every column, as ``build_column_mapping``):
    ``overrides``: column -> tokenizer override (e.g. ``exact_only``); ``kinds``: column -> ``ip``/``json``."""
    out = []
    for ordinal, f in enumerate(schema):
        kind = kinds.get(f.name)
        tantivy_type = "IpAddr" if kind == "ip" else "Json" if kind == "json" else tantivy_type_name(f.type)
        entry: dict[str, Any] = {
            "tantivy_field_name": f.name,
            "parquet_column_name": f.name,
            "physical_ordinal": ordinal,
            "parquet_type": parquet_type_name(f.type),
            "tantivy_type": tantivy_type,
            "field_id": field_ids.get(f.name),
        }
        if tantivy_type == "Str":
            entry["fast_field_tokenizer"] = overrides.get(f.name, "raw")
        if overrides.get(f.name) == "exact_only":
            entry["tantivy_type"] = "U64"  # indexing.rs patches exact_only fields to U64
        out.append(entry)
    return out


def field_ids(pf: pq.ParquetFile) -> dict[str, int]:
    """Top-level column -> its Parquet field id (Iceberg's), where set and non-zero."""
    out = {}
    for f in pf.schema_arrow:
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        if raw is not None and int(raw) != 0:
            out[f.name] = int(raw)
    return out


def file_entry(pf: pq.ParquetFile, relative_path: str, size: int, row_offset: int) -> dict[str, Any]:
    """The ``ParquetFileEntry`` of one source file (row groups and column chunk byte ranges from its footer;
    no ``page_locations``: the JVM computes them only as an optimization for files without an offset index)."""
    meta = pf.metadata
    groups = []
    offset = 0
    has_offset_index = False
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        columns = []
        for c in range(rg.num_columns):
            col = rg.column(c)
            if g == 0 and c == 0:
                has_offset_index = bool(col.has_offset_index)
            columns.append(
                {
                    "column_idx": c,
                    "column_name": meta.schema.column(c).name,
                    "data_page_offset": int(col.data_page_offset),
                    "compressed_size": int(col.total_compressed_size),
                    "uncompressed_size": int(col.total_uncompressed_size),
                }
            )
        groups.append({"row_group_idx": g, "num_rows": rg.num_rows, "row_offset_in_file": offset, "columns": columns})
        offset += rg.num_rows
    return {
        "relative_path": relative_path,
        "file_size_bytes": int(size),
        "row_offset": row_offset,
        "num_rows": offset,
        "has_offset_index": has_offset_index,
        "row_groups": groups,
    }


def indexing_mode_json(value: str) -> dict[str, str] | None:
    """``StringIndexingMode`` serde (``{"mode": ...}``, tagged, snake_case) of an INDEXING MODES value, or
    None for the ordinary types (``parse_tokenizer_override``)."""
    mode, _, regex = value.strip().partition(":")
    mode = mode.lower()
    if mode in ("exact_only", "text_uuid_exactonly", "text_uuid_strip") and not regex:
        return {"mode": mode}
    if mode in ("text_custom_exactonly", "text_custom_strip") and regex:
        return {"mode": mode, "regex": value.strip().split(":", 1)[1]}
    return None


def tokenizer_overrides(indexing_modes: Mapping[str, str]) -> dict[str, str]:
    """Column -> tokenizer override, as IndexTables4Spark's ``SyncTaskExecutor`` passes INDEXING MODES to
    tantivy4java: ``text`` -> ``default``, the compact string modes as themselves (mode lower-cased)."""
    out = {}
    for column, value in indexing_modes.items():
        mode = indexing_mode_json(value)
        if value.strip().lower() == "text":
            out[column] = "default"
        elif mode is not None:
            out[column] = mode["mode"] + (":" + mode["regex"] if "regex" in mode else "")
    return out


def pattern_of(mode: Mapping[str, str]) -> str | None:
    """The regex of a ``StringIndexingMode`` (``regex_pattern``): none for exact_only."""
    if mode["mode"] in ("text_uuid_exactonly", "text_uuid_strip"):
        return UUID_REGEX
    return mode.get("regex")


def build_manifest(
    files: Sequence[dict[str, Any]],
    mapping: list[dict[str, Any]],
    fast_field_mode: str,
    segment_docs: Sequence[int],
    modes: Mapping[str, Mapping[str, str]],
) -> dict[str, Any]:
    """The ``ParquetManifest`` of a split (fields in the struct's order): ``segment_docs`` are the
    documents of each segment, in ``meta.json``'s order; ``modes``: column -> ``StringIndexingMode``.

    Raises:
        CorruptSplitError: the counts disagree (``ParquetManifest::validate``).
    """
    ranges, offset = [], 0
    for ordinal, n in enumerate(segment_docs):
        ranges.append({"segment_ord": ordinal, "row_offset": offset, "num_rows": int(n)})
        offset += int(n)
    companions = {
        name + COMPANION_SUFFIX: {"original_field_name": name, "regex_pattern": pattern_of(mode) or ""}
        for name, mode in modes.items()
        if mode["mode"].endswith("_exactonly")
    }
    hashed = {name: name for name, mode in modes.items() if mode["mode"] == "exact_only"}
    hashed.update({name: name for name in companions})
    manifest = {
        "version": MANIFEST_VERSION,
        "table_root": "",
        "fast_field_mode": FAST_FIELD_MODE_NAMES.get(fast_field_mode.upper(), fast_field_mode.lower()),
        "segment_row_ranges": ranges,
        "parquet_files": list(files),
        "column_mapping": mapping,
        "total_rows": sum(int(f["num_rows"]) for f in files),
        "storage_config": None,
        "metadata": {},
        "string_hash_fields": hashed,
        "string_indexing_modes": {k: dict(v) for k, v in modes.items()},
        "companion_hash_fields": companions,
    }
    validate(manifest, "new companion split")
    return manifest


def validate(manifest: Mapping[str, Any], where: str) -> None:
    """``ParquetManifest::validate``: version, row counts, contiguous file offsets, no empty file.

    Raises:
        CorruptSplitError: naming ``where`` and the check that failed.
    """

    def fail(what: str) -> None:
        raise CorruptSplitError(f"{where}: its {MANIFEST_MEMBER} {what}")

    try:
        if manifest["version"] != MANIFEST_VERSION:
            fail(f"has version {manifest['version']}, this reader knows {MANIFEST_VERSION}")
        files = manifest["parquet_files"]
        total = int(manifest["total_rows"])
        if sum(int(f["num_rows"]) for f in files) != total:
            fail(f"lists files of {sum(int(f['num_rows']) for f in files)} rows but total_rows {total}")
        if sum(int(s["num_rows"]) for s in manifest["segment_row_ranges"]) != total:
            fail(f"has segment_row_ranges that do not cover total_rows {total}")
        expected = 0
        for f in files:
            if int(f["row_offset"]) != expected:
                fail(f"has file {f['relative_path']!r} at row_offset {f['row_offset']}, expected {expected}")
            if int(f["num_rows"]) == 0:
                fail(f"lists file {f['relative_path']!r} with zero rows")
            expected += int(f["num_rows"])
    except (KeyError, TypeError, ValueError) as e:
        raise CorruptSplitError(f"{where}: its {MANIFEST_MEMBER} lacks or mistypes a field ({e!r})") from e


def serialize_manifest(manifest: Mapping[str, Any]) -> bytes:
    """``manifest_io::serialize_manifest``: compact JSON, zstd level 3 when that is smaller."""
    raw = json.dumps(manifest, separators=(",", ":"), ensure_ascii=False).encode()
    packed = zstd.compress(raw, level=_ZSTD_LEVEL)
    return packed if len(packed) < len(raw) else raw


def deserialize_manifest(data: bytes, where: str) -> dict[str, Any]:
    """``manifest_io::deserialize_manifest`` (zstd detected by its magic), then ``validate``.

    Raises:
        CorruptSplitError: it does not decompress or parse, or fails validation.
    """
    try:
        text = zstd.decompress(data) if data[:4] == _ZSTD_MAGIC else data
        manifest = json.loads(text)
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
    except (ValueError, zstd.ZstdError) as e:
        raise CorruptSplitError(f"{where}: its {MANIFEST_MEMBER} does not parse ({e})") from e
    validate(manifest, where)
    return manifest


def combine_manifests(manifests: Sequence[Mapping[str, Any]], where: str) -> dict[str, Any]:
    """``merge.rs``'s ``combine_parquet_manifests``: files concatenated with their row offsets shifted,
    one segment covering all rows, the hash and mode maps united.

    Raises:
        CorruptSplitError: the fast field modes, column mappings or indexing modes differ.
    """
    first = manifests[0]
    for i, m in enumerate(manifests[1:], 1):
        for key in ("fast_field_mode", "column_mapping"):
            if m[key] != first[key]:
                raise CorruptSplitError(f"{where}: cannot merge companion splits whose {key} differ (split 0, {i})")
        for name, mode in m.get("string_indexing_modes", {}).items():
            if first.get("string_indexing_modes", {}).get(name, mode) != mode:
                raise CorruptSplitError(f"{where}: cannot merge: string_indexing_modes differ for field {name!r}")
    files, offset = [], 0
    for m in manifests:
        for f in m["parquet_files"]:
            files.append({**f, "row_offset": offset + int(f["row_offset"])})
        offset += int(m["total_rows"])
    united: dict[str, dict[str, Any]] = {
        "string_hash_fields": {},
        "string_indexing_modes": {},
        "companion_hash_fields": {},
    }
    for m in manifests:
        for key, into in united.items():
            into.update(m.get(key, {}))
    combined = {
        "version": MANIFEST_VERSION,
        "table_root": "",
        "fast_field_mode": first["fast_field_mode"],
        "segment_row_ranges": [{"segment_ord": 0, "row_offset": 0, "num_rows": offset}],
        "parquet_files": files,
        "column_mapping": first["column_mapping"],
        "total_rows": offset,
        "storage_config": first.get("storage_config"),
        "metadata": dict(first.get("metadata", {})),
        **united,
    }
    validate(combined, where)
    return combined


def file_index_of_hashes(manifest: Mapping[str, Any], hashes: np.ndarray, where: str) -> np.ndarray:
    """Positions in ``parquet_files`` of documents' ``__pq_file_hash`` values (``build_file_hash_index``).

    Raises:
        CorruptSplitError: a hash names no file of the manifest.
    """
    keys = np.array([hash_parquet_path(f["relative_path"]) for f in manifest["parquet_files"]], np.uint64)
    order = np.argsort(keys)
    found = np.searchsorted(keys[order], hashes)
    found = np.minimum(found, len(keys) - 1)
    bad = keys[order][found] != hashes
    if bad.any():
        raise CorruptSplitError(f"{where}: a document's {FILE_HASH_FIELD} {int(hashes[bad][0])} names no manifest file")
    return order[found]
