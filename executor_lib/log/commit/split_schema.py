"""Does a split fit its table? The commit-time schema check of an add (standard library only).

A split declares its columns in its doc mapping (the add's ``docMappingJson`` or the schema registry
entry its ``docMappingRef`` names): one field per non-partition column of the table, with a Tantivy
type. A split fits the table when its fields are exactly the table's non-partition columns and each
field's type is one a column of that Spark type can be indexed as (IndexTables4Spark writes the same
mappings: ``integer`` -> ``i64``, ``string`` -> ``text``...). Every commit checks every add against
the schema it commits under, so a split written for another schema (extra, missing, renamed or
retyped columns) is refused before anything is written, naming the split and the columns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from indextables_contract.errors import InvalidActionError

# Spark type name -> doc mapping types a column of that type may be indexed as.
_INTEGERS = frozenset({"i64"})
_ALLOWED: dict[str, frozenset[str]] = {
    "byte": _INTEGERS,
    "short": _INTEGERS,
    "integer": _INTEGERS,
    "long": _INTEGERS,
    "float": frozenset({"f64"}),
    "double": frozenset({"f64"}),
    "boolean": frozenset({"bool"}),
    "string": frozenset({"text", "json", "object", "ip"}),
    "binary": frozenset({"bytes"}),
    "date": frozenset({"datetime"}),
    "timestamp": frozenset({"datetime"}),
    "timestamp_ntz": frozenset({"datetime"}),
}
_NESTED = frozenset({"json", "object"})  # 'object': tantivy4java's (Quickwit's) name of a JSON field
# The hidden row-number field this project's writer adds to splits with a columnar copy: a tantivy4java
# merge of such splits lists it in its doc mapping; it is no column.
_ROW_FIELD = ("__row", "u64")


def _allowed_types(spark_type: Any) -> frozenset[str] | None:
    """Doc mapping types for a Spark type (None: a type this check does not know, not checked)."""
    if isinstance(spark_type, dict):
        return _NESTED if spark_type.get("type") in ("struct", "map", "array") else None
    if isinstance(spark_type, str) and spark_type.startswith("decimal("):
        return frozenset({"f64"})
    return _ALLOWED.get(spark_type) if isinstance(spark_type, str) else None


def table_columns(schema_string: str) -> dict[str, Any]:
    """``{column: Spark type}`` of a metaData ``schemaString`` ({} when it cannot be parsed)."""
    try:
        fields = json.loads(schema_string)["fields"]
        return {f["name"]: f["type"] for f in fields}
    except (json.JSONDecodeError, KeyError, TypeError):
        return {}


def mapping_fields(mapping_json: str, path: str) -> dict[str, str]:
    """``{field: Tantivy type}`` of a doc mapping; InvalidActionError naming the split if unreadable."""
    try:
        items = json.loads(mapping_json)
        return {str(i["name"]): str(i["type"]) for i in items}
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise InvalidActionError(f"add {path!r}: its doc mapping is not valid JSON field list ({e})") from e


def schema_differences(fields: Mapping[str, str], columns: Mapping[str, Any]) -> list[str]:
    """What differs between a split's fields and the table's non-partition ``columns`` (empty: it fits)."""
    fields = {n: k for n, k in fields.items() if (n, k) != _ROW_FIELD or n in columns}
    missing = [c for c in columns if c not in fields]
    extra = [f for f in fields if f not in columns]
    retyped = []
    for name, kind in fields.items():
        allowed = _allowed_types(columns[name]) if name in columns else None
        if allowed is not None and kind not in allowed:
            spark = columns[name] if isinstance(columns[name], str) else columns[name].get("type")
            retyped.append(f"{name} (table: {spark}, split: {kind})")
    out = []
    if missing:
        out.append(f"missing columns {missing}")
    if extra:
        out.append(f"columns not in the table {extra}")
    if retyped:
        out.append(f"retyped columns {retyped}")
    return out


def check_split_schema(
    path: str, mapping_json: str, schema_string: str, partition_columns: Sequence[str], table: str
) -> None:
    """InvalidActionError naming the split at ``path`` and the differing columns unless its doc
    mapping fits the table's schema (module docstring)."""
    columns = {c: t for c, t in table_columns(schema_string).items() if c not in partition_columns}
    if not columns:
        return  # no readable schema: nothing to check against
    differences = schema_differences(mapping_fields(mapping_json, path), columns)
    if differences:
        raise InvalidActionError(
            f"{table}: add {path!r}: the split's schema does not match the table's: {'; '.join(differences)} "
            f"(table columns {list(columns)}); write it with the table's schema"
        )
