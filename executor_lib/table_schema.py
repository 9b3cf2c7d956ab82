"""Table schemas: ``pyarrow.Schema`` <-> Spark's JSON schema (the ``schemaString`` of metaData)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from executor_lib.errors import ConfigError

_SIMPLE_TO_SPARK: list[tuple[Any, str]] = [
    (pa.types.is_boolean, "boolean"),
    (pa.types.is_int8, "byte"),
    (pa.types.is_int16, "short"),
    (pa.types.is_int32, "integer"),
    (pa.types.is_int64, "long"),
    (pa.types.is_float32, "float"),
    (pa.types.is_float64, "double"),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "string"),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), "binary"),
    (pa.types.is_date32, "date"),
    (pa.types.is_null, "void"),
]

_SPARK_TO_ARROW: dict[str, Any] = {
    "boolean": pa.bool_(),
    "byte": pa.int8(),
    "short": pa.int16(),
    "integer": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "void": pa.null(),
}


def _spark_type(t: pa.DataType, where: str) -> Any:
    for test, name in _SIMPLE_TO_SPARK:
        if test(t):
            return name
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "elementType": _spark_type(t.value_type, where), "containsNull": True}
    if pa.types.is_map(t):
        return {
            "type": "map",
            "keyType": _spark_type(t.key_type, where),
            "valueType": _spark_type(t.item_type, where),
            "valueContainsNull": True,
        }
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [_spark_field(t.field(i), where) for i in range(t.num_fields)]}
    raise ConfigError(f"column {where!r}: Arrow type {t} has no Spark equivalent")


def _spark_field(f: pa.Field, parent: str = "") -> dict[str, Any]:
    where = f"{parent}.{f.name}" if parent else f.name
    return {"name": f.name, "type": _spark_type(f.type, where), "nullable": f.nullable, "metadata": {}}


def arrow_to_spark_json(schema: pa.Schema) -> str:
    """The Spark StructType JSON of an Arrow schema."""
    names = [f.name for f in schema]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"schema has duplicate column names: {duplicates}")
    return json.dumps({"type": "struct", "fields": [_spark_field(f) for f in schema]}, separators=(",", ":"))


def _arrow_type(t: Any, where: str) -> pa.DataType:
    if isinstance(t, str):
        if t in _SPARK_TO_ARROW:
            return _SPARK_TO_ARROW[t]
        if t.startswith("decimal(") and t.endswith(")"):
            precision, scale = (int(x) for x in t[len("decimal(") : -1].split(","))
            return pa.decimal128(precision, scale)
        raise ConfigError(f"column {where!r}: unsupported Spark type {t!r}")
    kind = t.get("type")
    if kind == "array":
        return pa.list_(_arrow_type(t["elementType"], where))
    if kind == "map":
        return pa.map_(_arrow_type(t["keyType"], where), _arrow_type(t["valueType"], where))
    if kind == "struct":
        return pa.struct([_arrow_field(f, where) for f in t["fields"]])
    raise ConfigError(f"column {where!r}: unsupported Spark type {t!r}")


def _arrow_field(f: dict[str, Any], parent: str = "") -> pa.Field:
    where = f"{parent}.{f['name']}" if parent else f["name"]
    return pa.field(f["name"], _arrow_type(f["type"], where), nullable=bool(f.get("nullable", True)))


def spark_json_to_arrow(schema_string: str) -> pa.Schema:
    """The Arrow schema of a Spark StructType JSON string."""
    try:
        parsed = json.loads(schema_string)
        return pa.schema([_arrow_field(f) for f in parsed["fields"]])
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ConfigError(f"invalid Spark schema JSON: {e}") from e
