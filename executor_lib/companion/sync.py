"""Planning a companion sync (BUILD INDEXTABLES COMPANION): what to index, what to invalidate, and
the companion's doc mapping and log metadata, as IndexTables4Spark's ``SyncToExternalCommand`` does.

The sync is an anti-join between the source's live files and the files the companion's live splits
list (``companionSourceFiles``): source files no split lists are indexed; a split that lists a file
the source no longer has is removed, and its other files, still in the source, are indexed again
(into new splits), all in one commit. Files are grouped per partition into splits of at most
``TARGET INPUT SIZE`` source bytes (default 2 GB).

The log metadata carries the JVM's ``indextables.companion.*`` configuration keys
(``companion_configuration``); the add actions ``companionSourceFiles``, ``companionDeltaVersion``
(the source version) and ``companionFastFieldMode``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from executor_lib.companion.sources import SourceFile, SourceListing
from executor_lib.protocol.actions import AddAction
from executor_lib.protocol.companion_tags import (  # noqa: F401  (merged_pin_tags: re-exported)
    SOURCE_FOOTER_CRCS_TAG,
    SOURCE_IDENTITIES_TAG,
    merged_pin_tags,
)
from executor_lib.protocol.companion_tags import (
    recorded_pins as _recorded,
)
from executor_lib.splits.doc_mapping import DocMapping, FieldMapping, default_field_type, mapping_for
from indextables_contract import settings as S
from indextables_contract.errors import CompanionSourceError, ConfigError

DEFAULT_TARGET_INPUT_BYTES = 2 << 30  # the JVM's TARGET INPUT SIZE default (2 GB)
FAST_FIELD_MODES = ("HYBRID", "DISABLED", "PARQUET_ONLY")
# INDEXING MODES values: the JVM's, with what runs here.
TYPEMAP_MODES = {"string": "string", "text": "text", "ip": "ip", "ipaddress": "ip", "json": "json"}
HASHED_TEXT_MODES = ("text_uuid_exactonly", "text_custom_exactonly")
# text_uuid_strip / text_custom_strip:<regex>: the column is tokenized text whose matches of the pattern
# are removed before indexing (rows read from the source keep them), as IndexTables4Spark does.
UUID_PATTERN = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
STRIP_MODES = ("text_uuid_strip", "text_custom_strip")
COMPANION_SUFFIX = "__uuids"  # tantivy4java string_indexing.rs
PHASH_PREFIX = "_phash_"  # tantivy4java indexing.rs: string fingerprint fast fields
KEY = "indextables.companion."


@dataclass(frozen=True)
class IndexingGroup:
    """Source files indexed into one companion split."""

    partition_values: Mapping[str, str | None]
    files: tuple[SourceFile, ...]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class SyncPlan:
    groups: tuple[IndexingGroup, ...]
    invalidated: tuple[AddAction, ...]


def _lower_map(names: Iterable[str]) -> dict[str, str]:
    return {n.lower(): n for n in names}


def resolve_columns(
    listing: SourceListing, include: Sequence[str] | None, exclude: Sequence[str] | None
) -> tuple[list[str], list[str], list[str]]:
    """(indexed data columns, include as resolved, exclude as resolved), with the JVM's checks:
    INCLUDE and EXCLUDE are exclusive, names are case-insensitive, duplicates and unknown names are
    errors, partition columns are dropped from the lists, and one data column must stay indexed."""
    if include and exclude:
        raise ConfigError("INCLUDE COLUMNS and EXCLUDE COLUMNS are mutually exclusive; give one of them")
    data = [f.name for f in listing.data_schema]
    known = _lower_map(listing.schema.names)

    def resolved(names: Sequence[str] | None, clause: str) -> list[str]:
        out: list[str] = []
        for name in names or ():
            column = known.get(name.lower())
            if column is None:
                shown = listing.schema.names[:20]
                more = f" (20 of {len(listing.schema.names)})" if len(listing.schema.names) > 20 else ""
                raise ConfigError(f"{clause}: column {name!r} is not in the source; available columns{more}: {shown}")
            if column in out:
                raise ConfigError(f"{clause}: column {name!r} is listed twice")
            out.append(column)
        return [c for c in out if c not in listing.partition_columns]

    inc, exc = resolved(include, "INCLUDE COLUMNS"), resolved(exclude, "EXCLUDE COLUMNS")
    indexed = [c for c in data if c in inc] if include else [c for c in data if c not in exc]
    if not indexed:
        raise ConfigError(f"no data column left to index (data columns: {data}; INCLUDE {inc}, EXCLUDE {exc})")
    return indexed, inc, exc


def fingerprint_columns(
    listing: SourceListing,
    indexed: Sequence[str],
    modes: Mapping[str, str],
    fast_field_mode: str,
    include: Sequence[str] | None,
    exclude: Sequence[str] | None,
) -> list[str]:
    """The string columns that get tantivy4java's ``_phash_<column>`` fingerprint fast fields (xxHash64 of
    the value; ``indexing.rs``, HYBRID mode only, not the ip/json/compact-mode columns): HASHED FASTFIELDS
    INCLUDE's, or every eligible one but EXCLUDE's. Without the clause none here (tantivy4java's default is
    every eligible column; IndexTables4Spark reads splits without them).

    Raises:
        ConfigError: both clauses, or a listed column that is not an indexed string column.
    """
    if include and exclude:
        raise ConfigError("HASHED FASTFIELDS: give INCLUDE or EXCLUDE, not both")
    if not include and not exclude:
        return []
    known = _lower_map(indexed)
    special = {
        n.lower()
        for n, v in modes.items()
        if v.strip().lower().split(":", 1)[0]
        in ("ip", "ipaddress", "json", "exact_only", *STRIP_MODES, *HASHED_TEXT_MODES)
    }
    eligible = [
        c
        for c in indexed
        if c.lower() not in special
        and (pa.types.is_string(listing.schema.field(c).type) or pa.types.is_large_string(listing.schema.field(c).type))
    ]
    for name in (*(include or ()), *(exclude or ())):
        if name.lower() not in {c.lower() for c in eligible}:
            where = "not an indexed column" if name.lower() not in known else "not a plain string column"
            raise ConfigError(f"HASHED FASTFIELDS: {name!r} is {where} (eligible: {eligible})")
    if fast_field_mode.upper() != "HYBRID":
        return []  # tantivy4java makes fingerprints in HYBRID mode only
    if include:
        return [c for c in eligible if c.lower() in {n.lower() for n in include}]
    return [c for c in eligible if c.lower() not in {n.lower() for n in exclude or ()}]


def companion_mapping(
    listing: SourceListing,
    indexed: Sequence[str],
    modes: Mapping[str, str],
    fast_field_mode: str,
    fingerprinted: Sequence[str] = (),
) -> DocMapping:
    """The doc mapping of the indexed columns: index-only fields (no stored values), typed by
    INDEXING MODES, fast fields by FASTFIELDS MODE (DISABLED: every default fast field in the split;
    HYBRID: numeric, bool, date and ip fields; PARQUET_ONLY: none)."""
    mode = fast_field_mode.upper()
    if mode not in FAST_FIELD_MODES:
        raise ConfigError(f"FASTFIELDS MODE {fast_field_mode!r}: expected one of {list(FAST_FIELD_MODES)}")
    known = _lower_map(listing.schema.names)
    schema = pa.schema([listing.schema.field(c) for c in indexed])
    options: dict[str, str] = {S.INDEXING_INDEX_ONLY.key: ",".join(indexed)}
    for name, value in modes.items():
        column = known.get(name.lower())
        if column is None or column not in indexed:
            raise ConfigError(f"INDEXING MODES: column {name!r} is not an indexed column of the source ({indexed})")
        kind = value.strip().lower()
        if kind.split(":", 1)[0] in STRIP_MODES + HASHED_TEXT_MODES:
            if kind.split(":", 1)[0].startswith("text_custom") and ":" not in kind:
                raise ConfigError(f"INDEXING MODES '{name}':'{value}': {kind} needs a regex after the colon")
            options[S.INDEXING_TYPEMAP.prefix + column] = "text"
            continue
        if kind == "exact_only":
            if not pa.types.is_string(schema.field(column).type) and not pa.types.is_large_string(
                schema.field(column).type
            ):
                raise ConfigError(f"INDEXING MODES '{name}':'exact_only': column {column!r} is not a string column")
            options[S.INDEXING_TYPEMAP.prefix + column] = "string"
            continue
        if kind not in TYPEMAP_MODES:
            raise ConfigError(f"INDEXING MODES '{name}':'{value}': expected one of {sorted(TYPEMAP_MODES)}")
        options[S.INDEXING_TYPEMAP.prefix + column] = TYPEMAP_MODES[kind]
    if mode == "PARQUET_ONLY":
        options[S.INDEXING_FAST_FIELDS.key] = ""
    elif mode == "HYBRID":
        numeric = [
            f.name for f in schema if default_field_type(f.type, f.name) in ("i64", "u64", "f64", "bool", "datetime")
        ]
        numeric += [c for c in indexed if options.get(S.INDEXING_TYPEMAP.prefix + c) == "ip"]
        options[S.INDEXING_FAST_FIELDS.key] = ",".join(numeric)
    mapping = hashed_fields(mapping_for(schema, options), modes, known)
    hidden = tuple(FieldMapping(PHASH_PREFIX + c, "u64", stored=False, indexed=False, fast=True) for c in fingerprinted)
    return DocMapping(mapping.fields + hidden)


def hashed_fields(mapping: DocMapping, modes: Mapping[str, str], known: Mapping[str, str]) -> DocMapping:
    """tantivy4java's fields of the hashed modes (``schema_derivation.rs``): an ``exact_only`` column is a
    u64 field (indexed, fast) of xxHash64 values; a ``text_*_exactonly`` column is text (default tokenizer)
    plus a u64 field ``<column>__uuids`` (indexed, fast) of its pattern's matches' hashes."""
    kinds = {known.get(n.lower(), n): v.strip().lower().split(":", 1)[0] for n, v in modes.items()}
    fields: list[FieldMapping] = []
    for f in mapping.fields:
        kind = kinds.get(f.name)
        if kind == "exact_only":
            fields.append(FieldMapping(f.name, "u64", stored=False, indexed=True, fast=True))
            continue
        fields.append(f)
        if kind in HASHED_TEXT_MODES:
            companion = f.name + COMPANION_SUFFIX
            if companion in known.values():
                raise ConfigError(f"INDEXING MODES {f.name!r}: its companion field {companion!r} is a column too")
            fields.append(FieldMapping(companion, "u64", stored=False, indexed=True, fast=True))
    return DocMapping(tuple(fields))


def resolved_modes(listing: SourceListing, modes: Mapping[str, str]) -> dict[str, str]:
    """INDEXING MODES keyed by the source's spelling of each column (names are case-insensitive)."""
    known = _lower_map(listing.schema.names)
    return {known.get(name.lower(), name): value for name, value in modes.items()}


def strip_patterns(listing: SourceListing, modes: Mapping[str, str]) -> dict[str, str]:
    """Column -> the pattern removed from its text before indexing (the strip modes)."""
    known = _lower_map(listing.schema.names)
    out = {}
    for name, value in modes.items():
        mode, _, pattern = value.strip().partition(":")
        if mode.lower() in ("text_uuid_strip", "text_uuid_exactonly"):
            out[known.get(name.lower(), name)] = UUID_PATTERN
        elif mode.lower() in ("text_custom_strip", "text_custom_exactonly"):
            if not pattern:
                raise ConfigError(f"INDEXING MODES '{name}':'{value}': text_custom_strip needs a regex after the colon")
            out[known.get(name.lower(), name)] = pattern
    return out


def plan_sync(
    listing: SourceListing,
    existing: Sequence[AddAction],
    target_bytes: int = DEFAULT_TARGET_INPUT_BYTES,
    skip: frozenset[str] = frozenset(),
    keep: object = None,
    invalidate_all: bool = False,
    footer_crc: Callable[[str, int], int] | None = None,
) -> SyncPlan:
    """The anti-join (module docstring). ``skip``: source paths not to index (FROM VERSION: files the
    source held at that version); ``keep``: a predicate on a file's partition values (WHERE), or None;
    ``invalidate_all``: every split is removed and every source file indexed again; ``footer_crc``: a
    listed file's Parquet footer CRC32 (path, size), compared with the one recorded at BUILD."""
    current = {f.path: f for f in listing.files}
    if invalidate_all:
        wanted_all = [f for f in current.values() if not callable(keep) or keep(f.partition_values)]
        return SyncPlan(plan_groups(wanted_all, target_bytes), tuple(existing))
    tracked = {p for add in existing for p in (add.companion_source_files or ())}
    gone = (tracked - current.keys()) | changed_sources(existing, current, footer_crc)
    invalidated = tuple(a for a in existing if any(p in gone for p in (a.companion_source_files or ())))
    again = {p for a in invalidated for p in (a.companion_source_files or ()) if p in current}
    wanted = [f for p, f in current.items() if (p not in tracked and p not in skip) or p in again]
    if callable(keep):
        wanted = [f for f in wanted if keep(f.partition_values)]
    return SyncPlan(plan_groups(wanted, target_bytes), invalidated)


def source_identities_tag(identities: Mapping[str, tuple[int, int]]) -> dict[str, str]:
    """The add action's tag recording each source file's size and modification time as BUILD read it."""
    return {SOURCE_IDENTITIES_TAG: json.dumps({p: list(i) for p, i in sorted(identities.items())})}


def source_footer_crcs_tag(footer_crcs: Mapping[str, int]) -> dict[str, str]:
    """The add action's tag recording each source file's Parquet footer CRC32 as BUILD read it."""
    return {SOURCE_FOOTER_CRCS_TAG: json.dumps(dict(sorted(footer_crcs.items())))}


def changed_sources(
    existing: Sequence[AddAction],
    current: Mapping[str, SourceFile],
    footer_crc: Callable[[str, int], int] | None = None,
) -> set[str]:
    """Source files indexed by ``existing`` splits that were rewritten since: the size or modification
    time the listing gives differs from the one recorded at BUILD (``SOURCE_IDENTITIES_TAG``), or, when
    both match, the Parquet footer's CRC32 ``footer_crc(path, size)`` gives differs from the recorded one
    (``SOURCE_FOOTER_CRCS_TAG``: a rewrite that kept the size and restored the time). Splits built before
    a pin was recorded are compared by nothing for it; a file whose footer does not read is changed."""
    changed = set()
    footers: dict[str, tuple[int, int]] = {}  # path -> (size, recorded CRC32): read once each, in parallel
    for add in existing:
        crcs = _recorded(add, SOURCE_FOOTER_CRCS_TAG)
        for path, pin in _recorded(add, SOURCE_IDENTITIES_TAG).items():
            now = current.get(path)
            if now is None or not isinstance(pin, list) or len(pin) != 2:
                continue
            size, modified = pin
            if now.size != size or (now.modified_ms is not None and now.modified_ms != modified):
                changed.add(path)
            elif footer_crc is not None and isinstance(crcs.get(path), int):
                footers[path] = (now.size, crcs[path])

    def differs(item: tuple[str, tuple[int, int]]) -> bool:
        path, (size, recorded) = item
        try:
            return footer_crc is not None and footer_crc(path, size) != recorded
        except CompanionSourceError:
            return True

    if footers:
        with ThreadPoolExecutor(max_workers=min(16, len(footers))) as pool:  # a GET or two each on object stores
            changed.update(p for p, bad in zip(footers, pool.map(differs, footers.items()), strict=True) if bad)
    return changed


def plan_groups(files: Sequence[SourceFile], target_bytes: int) -> tuple[IndexingGroup, ...]:
    """Files per partition, in path order, cut into groups of at most ``target_bytes`` (a bigger file alone)."""
    by_partition: dict[str, list[SourceFile]] = {}
    for f in sorted(files, key=lambda f: f.path):
        by_partition.setdefault(json.dumps(dict(f.partition_values), sort_keys=True), []).append(f)
    groups = []
    for key in sorted(by_partition):
        current: list[SourceFile] = []
        size = 0
        for f in by_partition[key]:
            if current and size + f.size > target_bytes:
                groups.append(IndexingGroup(json.loads(key), tuple(current)))
                current, size = [], 0
            current.append(f)
            size += f.size
        if current:
            groups.append(IndexingGroup(json.loads(key), tuple(current)))
    return tuple(groups)


def spark_simple_string(t: pa.DataType) -> str:
    """Spark's ``DataType.simpleString`` of an Arrow type (the JVM's ``companion.columnTypes`` values)."""
    if pa.types.is_int8(t):
        return "tinyint"
    if pa.types.is_int16(t):
        return "smallint"
    if pa.types.is_int32(t):
        return "int"
    if pa.types.is_integer(t):
        return "bigint"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    return str(t)


def companion_configuration(
    *,
    source_path: str,
    source_format: str,
    source_version: int,
    fast_field_mode: str,
    schema: pa.Schema,
    indexing_modes: Mapping[str, str],
    where: str | None,
    from_version: int | None,
    include: Sequence[str],
    exclude: Sequence[str],
    catalog: str | None = None,
    catalog_type: str | None = None,
    warehouse: str | None = None,
) -> dict[str, str]:
    """The ``indextables.companion.*`` metadata configuration the JVM writes (``buildCompanionMetadata``)."""
    out = {
        KEY + "enabled": "true",
        KEY + "sourceTablePath": source_path,
        KEY + "sourceFormat": source_format,
        KEY + "lastSyncedVersion": str(source_version),
        KEY + "fastFieldMode": fast_field_mode,
    }
    if source_format == "iceberg":
        out[KEY + "icebergCatalog"] = catalog or "default"
        if warehouse:
            out[KEY + "icebergWarehouse"] = warehouse
        if catalog_type:
            out[KEY + "icebergCatalogType"] = catalog_type
    if indexing_modes:
        out[KEY + "indexingModes"] = json.dumps(dict(indexing_modes))
    if where:
        out[KEY + "whereClause"] = where
    if from_version is not None:
        out[KEY + "fromVersion"] = str(from_version)
    if include:
        out[KEY + "includeColumns"] = json.dumps(list(include))
    if exclude:
        out[KEY + "excludeColumns"] = json.dumps(list(exclude))
    out[KEY + "columnTypes"] = json.dumps({f.name.lower(): spark_simple_string(f.type) for f in schema})
    return out


def check_schema_evolution(stored: Mapping[str, str], schema: pa.Schema) -> list[str]:
    """Warnings for widened column types against the stored ``companion.columnTypes``; ConfigError
    for a breaking change (the JVM's rules: int -> bigint, float -> double widen; others break)."""
    widen = {
        ("tinyint", "smallint"),
        ("tinyint", "int"),
        ("tinyint", "bigint"),
        ("smallint", "int"),
        ("smallint", "bigint"),
        ("int", "bigint"),
        ("float", "double"),
    }
    warnings = []
    for f in schema:
        before = stored.get(f.name.lower())
        now = spark_simple_string(f.type)
        if before is None or before == now:
            continue
        if (before, now) in widen:
            warnings.append(f"column {f.name!r} widened from {before} to {now}")
            continue
        raise ConfigError(
            f"column {f.name!r} changed type from {before} to {now} in the source: a breaking change; drop the "
            "companion (or build it at a new location) and BUILD it again"
        )
    return warnings
