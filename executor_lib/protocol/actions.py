"""Transaction-log actions: frozen dataclasses and their JSON codecs, keyed by action name.

Standard library only. Field names on disk are exactly those of the IndexTables
protocol (camelCase); in Python they are snake_case. Fields this code does not know
are kept in ``extra`` (and written back unchanged), so reading never fails on a newer
writer's additions. ``None`` fields are left out when writing: IndexTables4Spark reads
a missing optional field as ``None`` but rejects fields it does not know, so nothing
beyond the spec's fields is ever added to a known action.

``commitInfo`` is this project's one extension: a line per version file carrying the
committing transaction's id, which makes every commit self-identifying (see
PROTOCOL.md, "Commit identity"). IndexTables4Spark's default reader skips it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, cast

from indextables_contract import FORMAT
from indextables_contract import settings as S
from indextables_contract.errors import CorruptLogError, UnknownActionError
from indextables_contract.version import VERSION

T = TypeVar("T", bound="_ActionBase")


def _snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


@dataclass(frozen=True)
class _ActionBase:
    """Common JSON codec: snake_case attributes <-> the spec's camelCase keys."""

    ACTION_KEY: ClassVar[str] = ""
    # Python attribute -> JSON key, where the rule snake_to_camel does not give it.
    _KEY_OVERRIDES: ClassVar[dict[str, str]] = {}

    @classmethod
    def _codec(cls) -> _Codec:
        """Field table of this action class, computed once per class."""
        codec = _CODECS.get(cls)
        if codec is None:
            fields = [
                _FieldSpec(
                    attr=f.name,
                    key=cls._KEY_OVERRIDES.get(f.name, _snake_to_camel(f.name)),
                    kind=_kind(str(f.type)),
                    required=f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
                )
                for f in dataclasses.fields(cls)
                if f.name != "extra"
            ]
            codec = _CODECS[cls] = _Codec(
                fields,
                frozenset(f.key for f in fields),
                lookups=tuple((f.key, f.attr, f.kind) for f in fields),
                defaults=_default_values(cls),
                required=tuple(f.attr for f in fields if f.required),
                checked=hasattr(cls, "__post_init__"),
            )
        return codec

    @classmethod
    def json_fields(cls) -> tuple[tuple[str, str], ...]:
        """(JSON key, attribute) of each field of this action, in field order (``extra`` left out).

        Example:
            >>> ("numRecords", "num_records") in AddAction.json_fields()
            True
        """
        return tuple((key, attr) for key, attr, _ in cls._codec().lookups)

    def to_json_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in self._codec().fields:
            value = getattr(self, spec.attr)
            if value is None:
                continue
            if isinstance(value, frozenset):
                value = sorted(value)
            elif isinstance(value, tuple):
                value = list(value)
            out[spec.key] = value
        extra: Mapping[str, Any] = getattr(self, "extra", {}) or {}
        for key, value in extra.items():
            out.setdefault(key, value)
        return out

    @classmethod
    def from_trusted_dict(cls: type[T], data: Mapping[str, Any], ignore: frozenset[str] = frozenset()) -> T:
        """Build from one record whose types a schema already guarantees (see ``record_converter``)."""
        return cls.record_converter(tuple(data), ignore)(data)

    @classmethod
    def record_converter(
        cls: type[T], keys: Sequence[str], ignore: frozenset[str] = frozenset()
    ) -> Callable[[Mapping[str, Any]], T]:
        """A function building instances from records that all have exactly ``keys`` (the fields of
        one Avro file's writer schema, whose types the schema guarantees): no per-field checks, only
        arrays turned into tuple/frozenset; keys in ``ignore`` are dropped, other unknown keys go to
        ``extra``.

        This is the hot path of loading Avro state (one call per live file): the work that depends
        only on the schema is done once here, and instances get their ``__dict__`` directly instead
        of going through the frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field).
        Classes with ``__post_init__`` checks are built through ``__init__``.
        """
        codec = cls._codec()
        present = set(keys)
        plain = tuple((k, a) for k, a, kind in codec.lookups if k in present and kind not in _ARRAY_KINDS)
        arrays = tuple(
            (k, a, _ARRAY_KINDS[kind]) for k, a, kind in codec.lookups if k in present and kind in _ARRAY_KINDS
        )
        unknown = tuple(k for k in keys if k not in codec.keys and k not in ignore)
        defaults, required, checked = codec.defaults, codec.required, codec.checked

        def convert(record: Mapping[str, Any]) -> T:
            values = dict(defaults)
            for key, attr in plain:
                value = record[key]
                if value is not None:
                    values[attr] = value
            for key, attr, to_collection in arrays:
                value = record[key]
                if value is not None:
                    values[attr] = to_collection(value)
            for attr in required:
                if values[attr] is None:
                    raise CorruptLogError(f"{cls.ACTION_KEY!r} record lacks required field {attr!r}")
            values["extra"] = {k: record[k] for k in unknown if record[k] is not None} if unknown else {}
            if checked:
                return cls(**values)
            obj = object.__new__(cls)
            object.__setattr__(obj, "__dict__", values)
            return obj

        return convert

    @classmethod
    def from_attributes(cls: type[T], attributes: dict[str, Any]) -> T:
        """Rebuild an instance from the ``vars()`` of one (a local cache's copy), without checks.

        The caller guarantees ``attributes`` came from ``vars()`` of an instance of this class.
        """
        obj = object.__new__(cls)
        obj.__dict__.update(attributes)
        return obj

    @classmethod
    def from_json_dict(cls: type[T], data: Mapping[str, Any]) -> T:
        if not isinstance(data, Mapping):
            raise CorruptLogError(f"{cls.ACTION_KEY!r} action is not a JSON object")
        codec = cls._codec()
        kwargs: dict[str, Any] = {}
        for spec in codec.fields:
            value = data.get(spec.key)
            if value is not None:
                kwargs[spec.attr] = _coerce(spec.kind, value, cls.ACTION_KEY, spec.key)
            elif spec.required:
                raise CorruptLogError(f"{cls.ACTION_KEY!r} action lacks required field {spec.key!r}")
        if len(data) > len(kwargs) and not codec.keys.issuperset(data):
            kwargs["extra"] = {k: v for k, v in data.items() if k not in codec.keys}
        try:
            return cls(**kwargs)
        except (TypeError, ValueError) as e:
            raise CorruptLogError(f"invalid {cls.ACTION_KEY!r} action: {e}") from e


_ARRAY_KINDS: dict[str, Callable[[Any], Any]] = {"str-set": frozenset, "str-tuple": tuple}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _default_values(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is dataclasses.MISSING:
            out[f.name] = None  # required: filled from the record, or the record is rejected
    return out


@dataclass(frozen=True)
class _FieldSpec:
    attr: str
    key: str
    kind: str
    required: bool


@dataclass(frozen=True)
class _Codec:
    fields: list[_FieldSpec]
    keys: frozenset[str]
    lookups: tuple[tuple[str, str, str], ...] = ()  # (JSON key, attribute, kind) per field
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # plain defaults; required: None
    required: tuple[str, ...] = ()
    checked: bool = False  # the class validates in ``__post_init__``


_CODECS: dict[type, _Codec] = {}


def _kind(type_name: str) -> str:
    """The JSON shape a declared field type expects."""
    t = type_name.removesuffix(" | None")
    if t in ("int", "bool", "str"):
        return t
    if t.startswith("Mapping[str, str"):
        return "str-map"
    if t.startswith("Mapping"):
        return "map"
    if t.startswith("frozenset"):
        return "str-set"
    if t.startswith("tuple"):
        return "str-tuple"
    return "any"


_COUNT_KEYS = frozenset({"size", "numRecords"})


def _coerce(kind: str, value: Any, action: str, key: str) -> Any:
    """Check a JSON value against the field's declared shape; arrays become tuple/frozenset."""
    if kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 0 and key in _COUNT_KEYS:  # a negative size or record count was trusted before
                raise CorruptLogError(f"{action}.{key} {value} is negative: a size or record count cannot be")
            if _INT64_MIN <= value <= _INT64_MAX:
                return value
            # every integer of the format is a JVM long; a larger one overflowed CHECKPOINT and PURGE
            raise CorruptLogError(f"{action}.{key} {str(value)[:40]} is outside the 64-bit integer range")
        raise CorruptLogError(f"{action}.{key} must be an integer, got {value!r}")
    if kind == "str":
        if isinstance(value, str):
            return value
        raise CorruptLogError(f"{action}.{key} must be a string, got {value!r}")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        raise CorruptLogError(f"{action}.{key} must be true or false, got {value!r}")
    if kind == "str-map":
        if isinstance(value, dict) and all(isinstance(v, str) or v is None for v in value.values()):
            return value
        raise CorruptLogError(f"{action}.{key} must be an object of strings, got {value!r}")
    if kind == "map":
        if isinstance(value, dict):
            return value
        raise CorruptLogError(f"{action}.{key} must be an object, got {value!r}")
    if kind in ("str-set", "str-tuple"):
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return frozenset(value) if kind == "str-set" else tuple(value)
        raise CorruptLogError(f"{action}.{key} must be an array of strings, got {value!r}")
    return value


@dataclass(frozen=True)
class ProtocolAction(_ActionBase):
    """Minimum reader/writer versions and (V3+) feature flags."""

    ACTION_KEY: ClassVar[str] = "protocol"

    min_reader_version: int
    min_writer_version: int
    reader_features: frozenset[str] | None = None
    writer_features: frozenset[str] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


# The metadata configuration key IndexTables4Spark sets on a companion index (BUILD INDEXTABLES COMPANION).
COMPANION_ENABLED = "indextables.companion.enabled"
_COMPANION = "indextables.companion."


@dataclass(frozen=True)
class MetadataAction(_ActionBase):
    """Table identity, Spark schema, partitioning and configuration."""

    ACTION_KEY: ClassVar[str] = "metaData"

    id: str
    schema_string: str
    partition_columns: tuple[str, ...] = ()
    configuration: Mapping[str, str] = field(default_factory=dict)
    format: Mapping[str, Any] = field(default_factory=lambda: {"provider": FORMAT, "options": {}})
    name: str | None = None
    description: str | None = None
    created_time: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def with_configuration(self, configuration: Mapping[str, str]) -> MetadataAction:
        return dataclasses.replace(self, configuration=dict(configuration))


@dataclass(frozen=True)
class AddAction(_ActionBase):
    """A split file added to the table."""

    ACTION_KEY: ClassVar[str] = "add"

    path: str
    partition_values: Mapping[str, str | None]
    size: int
    modification_time: int
    data_change: bool
    stats: str | None = None
    tags: Mapping[str, str] | None = None
    min_values: Mapping[str, str] | None = None
    max_values: Mapping[str, str] | None = None
    num_records: int | None = None
    footer_start_offset: int | None = None
    footer_end_offset: int | None = None
    hotcache_start_offset: int | None = None
    hotcache_length: int | None = None
    has_footer_offsets: bool = False
    time_range_start: str | None = None
    time_range_end: str | None = None
    split_tags: frozenset[str] | None = None
    delete_opstamp: int | None = None
    num_merge_ops: int | None = None
    doc_mapping_json: str | None = None
    doc_mapping_ref: str | None = None
    uncompressed_size_bytes: int | None = None
    companion_source_files: tuple[str, ...] | None = None
    companion_delta_version: int | None = None
    companion_fast_field_mode: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class RemoveAction(_ActionBase):
    """A split file logically deleted (a tombstone; the file stays until purged)."""

    ACTION_KEY: ClassVar[str] = "remove"

    path: str
    deletion_timestamp: int | None = None
    data_change: bool = True
    extended_file_metadata: bool | None = None
    partition_values: Mapping[str, str] | None = None
    size: int | None = None
    tags: Mapping[str, str] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class SkipAction(_ActionBase):
    """A file to skip temporarily in maintenance operations (``mergeskip``)."""

    ACTION_KEY: ClassVar[str] = "mergeskip"

    path: str
    skip_timestamp: int
    reason: str
    operation: str
    partition_values: Mapping[str, str] | None = None
    size: int | None = None
    retry_after: int | None = None
    skip_count: int = 1
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


ENGINE = f"indextables-python/{VERSION}"  # this project, as it names itself in what it writes


@dataclass(frozen=True)
class CommitInfoAction(_ActionBase):
    """This project's commit record: who committed, what, and the id that identifies it."""

    ACTION_KEY: ClassVar[str] = "commitInfo"

    txn_id: str
    timestamp: int
    operation: str = "WRITE"
    engine: str | None = None
    read_version: int | None = None
    operation_parameters: Mapping[str, str] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


Action = ProtocolAction | MetadataAction | AddAction | RemoveAction | SkipAction | CommitInfoAction

ACTION_TYPES: dict[str, type[_ActionBase]] = {
    cls.ACTION_KEY: cls
    for cls in (ProtocolAction, MetadataAction, AddAction, RemoveAction, SkipAction, CommitInfoAction)
}
# The native IndexTables writer names the skip action "skip".
ACTION_TYPES["skip"] = SkipAction


def removes_of(files: Sequence[AddAction], data_change: bool) -> list[RemoveAction]:
    """Remove actions for live files, stamped now (the tombstones purge later ages out)."""
    now = int(time.time() * 1000)
    return [
        RemoveAction(
            path=a.path,
            deletion_timestamp=now,
            data_change=data_change,
            partition_values=cast(dict[str, str], dict(a.partition_values)),
            size=a.size,
        )
        for a in files
    ]


def action_to_json_line(action: Action) -> str:
    """One action as one compact JSON line (no newline)."""
    return json.dumps({action.ACTION_KEY: action.to_json_dict()}, separators=(",", ":"), ensure_ascii=False)


def action_from_json_obj(obj: Any) -> Action:
    """Decode one parsed JSON line; unknown action types are an error."""
    if not isinstance(obj, dict) or len(obj) != 1:
        raise CorruptLogError("a log line must be a JSON object with exactly one action key")
    ((key, body),) = obj.items()
    cls = ACTION_TYPES.get(key)
    if cls is None:
        raise UnknownActionError(f"unknown action type {key!r} (known: {sorted(set(ACTION_TYPES))})")
    return cls.from_json_dict(body)  # type: ignore[return-value]


def actions_to_ndjson(actions: Iterable[Action]) -> bytes:
    """Newline-delimited JSON, one action per line, trailing newline."""
    return "".join(action_to_json_line(a) + "\n" for a in actions).encode("utf-8")


def actions_from_ndjson(text: str, source: str, skip_unknown: bool = False) -> list[Action]:
    """Parse newline-delimited JSON actions; errors name ``source`` and the line number.

    With ``skip_unknown`` lines holding unknown action types are left out instead.
    """
    actions: list[Action] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise CorruptLogError(f"{source}: line {lineno}: invalid JSON: {e.msg} at column {e.colno}") from e
        except RecursionError as e:  # a hostile line nested deeper than any action is: typed, at once
            raise CorruptLogError(f"{source}: line {lineno}: JSON nested too deep to be an action") from e
        try:
            actions.append(action_from_json_obj(obj))
        except UnknownActionError as e:
            if not skip_unknown:
                raise UnknownActionError(f"{source}: line {lineno}: {e}") from e
        except CorruptLogError as e:
            raise CorruptLogError(f"{source}: line {lineno}: {e}") from e
    return actions


def parquet_table_root(configuration: Mapping[str, str], options: Mapping[str, str] | None = None) -> str | None:
    """The root a companion's ``relative_path``s resolve against, as IndexTables4Spark's
    ``IndexTables4SparkScanBuilder.effectiveConfig`` finds it: the read option
    ``spark.indextables.companion.parquetTableRoot``, else ``.parquetStorageRoot`` (Iceberg, and Delta
    tables named in a catalog), else ``.sourceTablePath``. None for a table that is not a companion.

    Example: ``parquet_table_root({"indextables.companion.enabled": "true",
    "indextables.companion.sourceTablePath": "/d"}) == "/d"``.
    """
    given = S.COMPANION_PARQUET_TABLE_ROOT.get(options or {})
    if given:
        return given
    if configuration.get(COMPANION_ENABLED) != "true":
        return None
    fmt = configuration.get(_COMPANION + "sourceFormat", "delta")
    stored = configuration.get(_COMPANION + "parquetStorageRoot")
    if stored and (fmt == "iceberg" or _COMPANION + "deltaTableName" in configuration):
        return stored
    return configuration.get(_COMPANION + "sourceTablePath")
