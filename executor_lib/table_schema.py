"""Table schemas: ``pyarrow.Schema`` <-> Spark's JSON schema (the ``schemaString`` of metaData), and
the rules a table's columns must follow to be indexable (``check_indexable``): checked by
``create_table``, ``mapping_for`` and the Spark write before anything is written.

* **Names.** Not empty, not starting with ``-`` (Tantivy's field name rule), not the reserved
  ``__row`` (every split's hidden row-number field), and, for tables written here, not ``_score``
  in any case (the BM25 score a read with an index query may select; tables written elsewhere
  with such a column stay readable).
* **Types.** A column becomes a Tantivy field: scalars map directly; nested values are indexed as
  JSON fields, as IndexTables4Spark indexes them: a struct as an object, a map as an object with
  its keys as text, a list of structs as objects, a list of scalars as ``{"_values": [...]}``
  (``native/src/writer.rs``). A column of type null (it holds no value) cannot be written.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from indextables_contract.errors import ConfigError

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


RESERVED_COLUMNS = ("__row",)


def column_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a column of an IndexTables table (None: it can)."""
    if not isinstance(name, str) or not name:
        return "a column name must not be empty"
    if name.startswith("-"):
        return "a column name must not start with '-' (Tantivy field name rule)"
    if name in RESERVED_COLUMNS:
        return f"{name!r} is reserved (the hidden row-number field of splits with a columnar copy)"
    return None


# Names IndexTables itself gives columns while it works (a row change's match column,
# ``indextables_contract.row_changes.MATCH_COLUMN``): no table may have one.
RESERVED_PREFIX = "_indextables_"
# Names a read adds to the table's columns (``executor_lib.splits.search.scoring.SCORE_COLUMN``).
VIRTUAL_COLUMNS = ("_score",)


def virtual_column_problem(name: str) -> str | None:
    """Why a table written here may not have a column ``name`` (None: it may): it is a column reads add."""
    if isinstance(name, str) and name.lower() in VIRTUAL_COLUMNS:
        return (
            f"{name!r} is the name of the BM25 score a read with an index query can select (_score); rename the column"
        )
    if isinstance(name, str) and name.lower().startswith(RESERVED_PREFIX):
        return f"{name!r}: names starting with {RESERVED_PREFIX!r} are the columns IndexTables adds while it works"
    return None


def _type_problem(t: pa.DataType) -> str | None:
    if pa.types.is_map(t) and (pa.types.is_nested(t.key_type) or pa.types.is_binary(t.key_type)):
        return f"a map with {t.key_type} keys cannot be indexed (JSON object keys are text: use scalar keys)"
    if pa.types.is_null(t):
        return "a column of type null cannot be indexed (it holds no value)"
    return None


def check_indexable(schema: pa.Schema, partition_columns: Any = (), where: str = "table") -> None:
    """ConfigError naming the column and the rule unless every column of ``schema`` can be indexed
    (the module docstring's rules; partition columns are never indexed, so only their names count)."""
    for f in schema:
        problem = column_name_problem(f.name) or virtual_column_problem(f.name)
        if problem is None and f.name not in partition_columns:
            problem = _type_problem(f.type)
        if problem is not None:
            raise ConfigError(f"{where}: column {f.name!r} ({f.type}): {problem}")


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


# --- nested fields in filters (``user.name``, ``attrs.color``) -----------------------------------


def nested_path(name: str, schema: pa.Schema) -> tuple[str, ...] | None:
    """The column and the struct fields or map keys a filter's column name reaches (``("user",
    "name")`` for ``user.name``), or None when it reaches nothing: a column of ``schema`` is itself.

    Example: ``nested_path("user.name", pa.schema([("user", pa.struct([("name", pa.string())]))]))``
    is ``("user", "name")``.
    """
    if name in schema.names:
        return (name,)
    top, _, rest = name.partition(".")
    if not rest or top not in schema.names:
        return None
    walked = _walk(schema.field(top).type, rest.split("."), exact=True)
    return None if walked is None else (top, *walked)


def resolve_column(name: str, schema: pa.Schema) -> str:
    """A filter's column name as ``schema`` spells it, as Spark resolves it: case-insensitively, a
    dotted name into struct fields and map keys (``User.Name`` -> ``user.name``), and a leading
    qualifier (the table's alias or name: ``t.id``) dropped. Names that reach nothing are kept for
    the caller to report.

    Example: ``resolve_column("t.ID", pa.schema([("id", pa.int64())]))`` is ``"id"``.
    """
    by_lower = {c.lower(): c for c in schema.names}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    parts = name.split(".")
    top = by_lower.get(parts[0].lower())
    if top is not None and len(parts) > 1:
        walked = _walk(schema.field(top).type, parts[1:], exact=False)
        if walked is not None:
            return ".".join([top, *walked])
    if len(parts) > 1:
        rest = resolve_column(".".join(parts[1:]), schema)
        if nested_path(rest, schema) is not None:
            return rest
    return name


def _walk(t: pa.DataType, parts: list[str], exact: bool) -> list[str] | None:
    out = []
    for part in parts:
        if pa.types.is_struct(t):
            names = [t.field(i).name for i in range(t.num_fields)]
            match = part if part in names else None
            if match is None and not exact:
                match = next((n for n in names if n.lower() == part.lower()), None)
            if match is None:
                return None
            out.append(match)
            t = t.field(names.index(match)).type
        elif pa.types.is_map(t):
            out.append(part)  # a key
            t = t.item_type
        else:
            return None
    return out
