"""Doc mappings: which Tantivy field each table column becomes, as IndexTables users configure it.

A doc mapping is the JSON list IndexTables4Spark stores per split (``docMappingJson`` /
the schema registry), e.g. ``[{"name":"id","type":"i64","fast":true,"indexed":true,"stored":true}]``.

Defaults from the Arrow type: integers -> ``i64`` (unsigned -> ``u64``), floats -> ``f64``,
bool -> ``bool``, string -> ``text`` with the ``raw`` tokenizer (exact match, what
IndexTables calls a string field), date/timestamp -> ``datetime``, binary -> ``bytes``
(stored only), struct/map/list -> ``json`` (indexed as ``native/src/writer.rs`` builds it).
Options (``spark.indextables.indexing.*``):

* ``typemap.<col>`` = ``string`` | ``text`` | ``json`` | ``ip``: ``text`` tokenizes (default
  tokenizer); ``ip`` indexes a string column of IPv4/IPv6 addresses as Tantivy ``ip`` (term and
  range queries compare addresses: ``ip:[10.0.0.0 TO 10.255.255.255]``; rows keep the strings);
* ``tokenizer.<col>`` = ``default`` | ``whitespace`` | ``raw`` | ``en_stem``, or the stemmer of another
  language Tantivy ships (``S.STEMMERS``: ``de_stem``, ``fr_stem``, ``es_stem``, ``ru_stem`` ... 18 in
  all, each built as ``en_stem``; IndexTables4Spark knows only ``en_stem``). The name is recorded in the
  doc mapping as is;
* ``indexrecordoption.<col>`` = ``position`` (default) | ``freq`` | ``basic``: what the index of a
  text or json column records per term (``basic``: documents only — smaller, but no phrase
  queries and no relevance by frequency; ``freq``: plus frequencies, still no phrases).
  Stored in the doc mapping as Quickwit's ``record`` key, only when not ``position``;
  ``text.indexRecordOption`` is the default of every ``text`` column without its own;
* ``fastfields`` = comma-separated columns that get fast fields, exactly these (it narrows as well
  as widens the default). By default numeric, bool, date, ip and exact-string columns (and JSON
  columns, see ``json.mode``) are fast, so aggregates push down on a table written with no
  options, and tokenized ``text`` columns are not. A fast field costs its column's values once
  more in each split, and a fast string column a second term dictionary: a unique-per-row string
  (a trace id) takes about half of Tantivy's indexing time (indexed and fast), about a tenth as
  the fast field alone, so list only the columns you group or aggregate by;
* ``json.mode`` = ``full`` (default, as IndexTables4Spark's) | ``minimal``: whether JSON fields
  (structs, maps, lists, ``typemap.<col>=json`` strings) are also fast fields, which range
  queries on their numbers (``attrs.age:[30 TO 40]``) and aggregations need; ``fastfields``
  overrides it per column;
* ``storeonly`` / ``indexonly`` = comma-separated columns that are only stored / only indexed;
* ``text.maxTokenLength`` = the longest token (bytes) a tokenized column keeps, for every column,
  and ``tokenLength.<col>`` for one: a number from 1 to 65530 or ``tantivy_max`` (65530),
  ``default`` (255, the default, as IndexTables4Spark's), ``legacy`` (40, Tantivy's own), ``min``
  (1). Longer tokens are not indexed (as the JVM does), and a query holding one is refused
  (``splits.query.compile``). Recorded per field as ``max_token_length`` when not 255.

No tantivy here: ``splits.write.writer`` turns a mapping into a Tantivy schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from executor_lib.table_schema import check_indexable, column_name_problem
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError

TOKENIZERS = S.TOKENIZERS  # default, whitespace, raw and the stemmers (ar_stem ... en_stem ... tr_stem)
STEMMERS = S.STEMMERS  # tokenizer name -> Snowball language
JSON_MODES = ("full", "minimal")  # json.mode: JSON fields fast (range queries, aggregates) or not
LIMITED_TOKENIZERS = ("default", *STEMMERS, "whitespace")  # the named tokenizers that drop long tokens
ngram_spec = S.ngram_spec  # edge_ngram_2_10 -> NgramSpec(edge=True, min=2, max=10); None for another name
DEFAULT_MAX_TOKEN_LENGTH = 255
# The JVM's named values of spark.indextables.indexing.text.maxTokenLength.
NAMED_TOKEN_LENGTHS = {"tantivy_max": 65530, "default": 255, "legacy": 40, "min": 1}
RECORD_OPTIONS = ("position", "freq", "basic")
FIELD_TYPES = ("i64", "u64", "f64", "bool", "text", "datetime", "bytes", "json", "ip")
_PREFIX = S.INDEXING_PREFIX
ROW_FIELD = "__row"  # the hidden row-number field of splits with a columnar copy (splits.writer)
# A list of scalars indexed in a JSON field is {"_values": [...]} (IndexTables4Spark's wrapping): the writer
# wraps it so, and queries (query.compile) and reads (rows.foreign_values) unwrap it.
ARRAY_KEY = "_values"
# tantivy4java's name of an analyzer keeping tokens shorter than N bytes: '<tokenizer>_limit_<N>'
_LIMIT_NAME = re.compile(rf"({'|'.join(TOKENIZERS)}|(?:edge_)?ngram_\d+_\d+)_limit_(\d+)")


def limits_tokens(tokenizer: str | None) -> bool:
    """Whether ``tokenizer`` drops long tokens (words of 255 bytes or more, or the column's limit): ``default``,
    the stemmers, ``whitespace`` and the n-gram tokenizers (their words, before they are cut into grams)."""
    return tokenizer in LIMITED_TOKENIZERS or ngram_spec(tokenizer) is not None


@dataclass(frozen=True)
class FieldMapping:
    name: str
    type: str
    stored: bool = True
    indexed: bool = True
    fast: bool = False
    tokenizer: str | None = None  # text and json fields
    record: str = "position"  # text and json fields: what the index records per term
    max_token_length: int | None = None  # tokenized fields: the longest token kept, None = 255

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"fast": self.fast, "indexed": self.indexed, "name": self.name, "stored": self.stored}
        out["type"] = self.type
        if self.tokenizer is not None:
            out["tokenizer"] = self.tokenizer
        if self.record != "position":
            out["record"] = self.record
        if self.max_token_length is not None:
            out["max_token_length"] = self.max_token_length
        return out


@dataclass(frozen=True)
class DocMapping:
    fields: tuple[FieldMapping, ...]

    def field(self, name: str) -> FieldMapping | None:
        return next((f for f in self.fields if f.name == name), None)

    def default_query_fields(self) -> list[str]:
        """Fields a query term without ``field:`` searches (``_indexall``): indexed text and json."""
        return [f.name for f in self.fields if f.type in ("text", "json") and f.indexed]

    def to_json(self) -> str:
        return json.dumps([f.to_json() for f in self.fields], separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DocMapping:
        """The doc mapping of a JSON field list, this project's or tantivy4java's: a JSON field typed
        ``object`` reads as ``json`` (tokenizer ``default`` unless named), a tokenizer named
        ``<tokenizer>_limit_<N>`` as ``<tokenizer>`` keeping tokens shorter than N bytes, and the
        hidden row-number field ``__row`` (a fast ``u64`` this project's writer adds, which a split
        merged by tantivy4java lists) is left out."""
        try:
            items = json.loads(text)
            fields = tuple(_field_from_json(i) for i in items if not is_hidden_row_field(i))
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as e:
            raise ConfigError(f"invalid doc mapping JSON: {e}") from e
        for f in fields:
            problem = column_name_problem(f.name)
            if problem is not None:
                raise ConfigError(f"doc mapping field {f.name!r}: {problem}")
            if f.type not in FIELD_TYPES:
                raise ConfigError(f"doc mapping field {f.name!r}: unsupported type {f.type!r}")
            if f.record not in RECORD_OPTIONS:
                raise ConfigError(f"doc mapping field {f.name!r}: unsupported record option {f.record!r}")
        return cls(fields)


def is_hidden_row_field(item: Any) -> bool:
    """Whether a doc mapping JSON entry is the hidden row-number field ``__row`` (a fast ``u64``)."""
    return isinstance(item, dict) and item.get("name") == ROW_FIELD and item.get("type") == "u64"


def _field_from_json(item: Mapping[str, Any]) -> FieldMapping:
    kind = item["type"]
    tokenizer = item.get("tokenizer")
    if kind == "object":  # tantivy4java's (Quickwit's) name of a JSON field
        kind, tokenizer = "json", tokenizer or "default"
    max_token_length = _stored_token_length(item.get("max_token_length"))
    limited = _LIMIT_NAME.fullmatch(tokenizer) if isinstance(tokenizer, str) else None
    if limited is not None:  # tantivy4java's analyzer name of a token limit: '<tokenizer>_limit_<N>'
        tokenizer = limited.group(1)
        if limits_tokens(tokenizer):  # raw keeps values of any length
            max_token_length = max_token_length or _stored_token_length(int(limited.group(2)))
    return FieldMapping(
        name=item["name"],
        type=kind,
        stored=bool(item.get("stored", True)),
        indexed=bool(item.get("indexed", True)),
        fast=bool(item.get("fast", False)),
        tokenizer=tokenizer,
        record=item.get("record") or "position",
        max_token_length=max_token_length,
    )


def _stored_token_length(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= NAMED_TOKEN_LENGTHS["tantivy_max"]:
        raise ValueError(f"max_token_length {value!r} is not a number from 1 to {NAMED_TOKEN_LENGTHS['tantivy_max']}")
    return None if value == DEFAULT_MAX_TOKEN_LENGTH else value


def token_length_option(value: Any, key: str) -> int:
    """A token length setting: a number from 1 to 65530 or a JVM name (``tantivy_max``, ``default``,
    ``legacy``, ``min``); ConfigError naming ``key`` otherwise.

    Example: ``token_length_option("legacy", "spark.indextables.indexing.text.maxTokenLength")`` is 40.
    """
    text = str(value).strip().lower()
    if text in NAMED_TOKEN_LENGTHS:
        return NAMED_TOKEN_LENGTHS[text]
    try:
        number = int(text)
    except ValueError as e:
        raise ConfigError(
            f"option {key}={value!r}: expected a number of bytes or one of {list(NAMED_TOKEN_LENGTHS)}"
        ) from e
    if not 1 <= number <= NAMED_TOKEN_LENGTHS["tantivy_max"]:
        raise ConfigError(f"option {key}={value!r}: must be between 1 and {NAMED_TOKEN_LENGTHS['tantivy_max']}")
    return number


def _token_length(options: Mapping[str, Any], column: str, tokenizer: str | None) -> int | None:
    """The field's token length from the options (None: the default 255, or not a tokenized field):
    ``tokenLength.<col>=N``, else the JVM's list form ``tokenLength.<N>=c1,c2``, else
    ``text.maxTokenLength``."""
    per_column, table_wide = S.INDEXING_TOKEN_LENGTH.prefix + column, S.INDEXING_TEXT_MAX_TOKEN_LENGTH.key
    listed = [
        key
        for key, value in options.items()
        if key.startswith(S.INDEXING_TOKEN_LENGTH.prefix)
        and key != per_column
        and column in {c.strip() for c in str(value).split(",")}
    ]
    key = per_column if per_column in options else (listed[0] if listed else table_wide)
    if key not in options:
        return None
    length = token_length_option(key.rsplit(".", 1)[1] if key in listed else options[key], key)
    if key in listed:
        key = per_column
    if not limits_tokens(tokenizer):
        if key == per_column:
            raise ConfigError(f"option {key}: column {column!r} is not tokenized (tokenizer {tokenizer})")
        return None
    return None if length == DEFAULT_MAX_TOKEN_LENGTH else length


def _columns_option(options: Mapping[str, Any], setting: S.Setting[Any], schema: pa.Schema) -> set[str]:
    raw = options.get(setting.key)
    if not raw:
        return set()
    names = {c.strip() for c in str(raw).split(",") if c.strip()}
    unknown = sorted(names - set(schema.names))
    if unknown:
        raise ConfigError(f"option {setting.key}: columns {unknown} are not in the schema {schema.names}")
    return names


def default_field_type(t: pa.DataType, column: str) -> str:
    """The Tantivy field type a column of Arrow type ``t`` is indexed as by default."""
    if pa.types.is_unsigned_integer(t):
        return "u64"
    if pa.types.is_integer(t):
        return "i64"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "f64"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return "datetime"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    if pa.types.is_struct(t) or pa.types.is_map(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
        return "json"
    raise ConfigError(f"column {column!r}: Arrow type {t} cannot be indexed")


def mapping_for(schema: pa.Schema, options: Mapping[str, Any], partition_columns: Sequence[str] = ()) -> DocMapping:
    """The doc mapping of the non-partition columns of ``schema`` under ``options``; ConfigError
    naming the column if one cannot be indexed (``table_schema.check_indexable``)."""
    check_indexable(schema, partition_columns, "doc mapping")
    fast_listed = (
        _columns_option(options, S.INDEXING_FAST_FIELDS, schema) if S.INDEXING_FAST_FIELDS.key in options else None
    )
    store_only = _columns_option(options, S.INDEXING_STORE_ONLY, schema)
    index_only = _columns_option(options, S.INDEXING_INDEX_ONLY, schema)
    both = store_only & index_only
    if both:
        raise ConfigError(f"columns {sorted(both)} are both store-only and index-only")
    json_mode = str(options.get(S.INDEXING_JSON_MODE.key, S.INDEXING_JSON_MODE.default)).strip().lower()
    if json_mode not in JSON_MODES:
        raise ConfigError(f"option {_PREFIX}json.mode={json_mode!r}: expected one of {list(JSON_MODES)}")
    fields = []
    for f in schema:
        if f.name in partition_columns:
            continue
        kind = default_field_type(f.type, f.name)
        typemap = options.get(S.INDEXING_TYPEMAP.prefix + f.name)
        tokenizer = "raw" if kind == "text" else ("default" if kind == "json" else None)
        if typemap is not None:
            typemap = str(typemap).strip().lower()
            if typemap not in ("string", "text", "json", "ip"):
                raise ConfigError(f"option {_PREFIX}typemap.{f.name}={typemap!r}: expected string, text, json or ip")
            if kind != "text" and typemap in ("string", "text", "ip"):
                raise ConfigError(f"option {_PREFIX}typemap.{f.name}={typemap}: column type {f.type} is not a string")
            if typemap == "text":
                tokenizer = "default"
            elif typemap == "json":
                kind, tokenizer = "json", "default"
            elif typemap == "ip":
                kind, tokenizer = "ip", None
        explicit_tokenizer = options.get(S.INDEXING_TOKENIZER.prefix + f.name)
        if explicit_tokenizer is not None:
            problem = S.ngram_problem(str(explicit_tokenizer))
            if problem is not None:
                raise ConfigError(
                    f"option {_PREFIX}tokenizer.{f.name}={explicit_tokenizer!r}: column {f.name!r}: n-gram "
                    f"tokenizer {problem} (expected ngram_<min>_<max> or edge_ngram_<min>_<max>, "
                    f"1 <= min <= max <= {S.NGRAM_MAX})"
                )
            if kind not in ("text", "json") or not S.is_tokenizer(str(explicit_tokenizer)):
                raise ConfigError(
                    f"option {_PREFIX}tokenizer.{f.name}={explicit_tokenizer!r}: expected one of {list(TOKENIZERS)} "
                    "or ngram_<min>_<max> / edge_ngram_<min>_<max> on a string column"
                )
            tokenizer = str(explicit_tokenizer)
        record = _record_option(options, f.name, kind)
        if fast_listed is None:
            fast = kind in ("i64", "u64", "f64", "bool", "datetime", "ip") or tokenizer == "raw"
            fast = fast or (kind == "json" and json_mode == "full")
        else:
            fast = f.name in fast_listed
        if kind == "bytes" and fast:
            raise ConfigError(f"option {_PREFIX}fastfields: binary column {f.name!r} cannot be a fast field")
        fields.append(
            FieldMapping(
                name=f.name,
                type=kind,
                stored=f.name not in index_only,
                indexed=f.name not in store_only,  # binary too, as IndexTables4Spark indexes it
                fast=fast and f.name not in store_only,
                tokenizer=tokenizer,
                record=record,
                max_token_length=_token_length(options, f.name, tokenizer),
            )
        )
    return DocMapping(tuple(fields))


def _record_option(options: Mapping[str, Any], column: str, kind: str) -> str:
    raw = options.get(S.INDEXING_INDEX_RECORD_OPTION.prefix + column)
    if raw is None:
        default = options.get(S.INDEXING_TEXT_INDEX_RECORD_OPTION.key)  # the JVM's default for text columns
        if default is None or kind != "text":
            return "position"
        record = str(default).strip().lower()
        if record not in RECORD_OPTIONS:
            raise ConfigError(
                f"option {_PREFIX}text.indexRecordOption={default!r}: expected one of {list(RECORD_OPTIONS)}"
            )
        return record
    record = str(raw).strip().lower()
    if record not in RECORD_OPTIONS or kind not in ("text", "json"):
        raise ConfigError(
            f"option {_PREFIX}indexrecordoption.{column}={raw!r}: expected one of {list(RECORD_OPTIONS)} "
            f"on a text or json column (column {column!r} is {kind})"
        )
    return record
