"""Stored values of a split this project did not write (IndexTables4Spark's, tantivy4java's), as
Arrow takes them when such a split is transcoded: decimals kept as floats, lists wrapped as
``{"_values": [...]}``, map keys as strings (``stored_value``).
"""

from __future__ import annotations

import decimal
from typing import Any

import pyarrow as pa

from executor_lib.splits.doc_mapping import ARRAY_KEY

_DECIMALS = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_EVEN)  # room for decimal256's 76 digits


def needs_conversion(t: pa.DataType) -> bool:
    return pa.types.is_decimal(t) or pa.types.is_nested(t)


def stored_value(value: Any, t: pa.DataType, top: bool = True) -> Any:
    """A value as a split's doc store holds it (IndexTables4Spark's, as ``native/src/writer.rs`` builds
    it) as a Python value of Arrow type ``t``: a decimal (indexed as f64) from its float, rounded to
    the type's scale; a list from ``{"_values": [...]}`` at the top of a JSON field; a map from its
    object (keys back to the key type); a struct from its object, field by field.

    Example: ``stored_value({"_values": [1, 2]}, pa.list_(pa.int64()))`` is ``[1, 2]``.
    """
    if value is None:
        return None
    if pa.types.is_decimal(t) and isinstance(value, (float, int)) and not isinstance(value, bool):
        return _DECIMALS.quantize(decimal.Decimal(repr(value)), decimal.Decimal(1).scaleb(-t.scale))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        if top and isinstance(value, dict) and set(value) == {ARRAY_KEY}:
            value = value[ARRAY_KEY]
        if isinstance(value, list) and needs_conversion(t.value_type):
            return [stored_value(v, t.value_type, False) for v in value]
        return value
    if pa.types.is_map(t) and isinstance(value, dict):
        return [(_map_key(k, t.key_type), stored_value(v, t.item_type, False)) for k, v in value.items()]
    if pa.types.is_struct(t) and isinstance(value, dict):
        fields = [t.field(i) for i in range(t.num_fields)]
        return {f.name: stored_value(value.get(f.name), f.type, False) for f in fields}
    return value


def _map_key(key: str, t: pa.DataType) -> Any:
    """A map key as JSON holds it (text) as a value of the key type ``t``."""
    if pa.types.is_integer(t):
        return int(key)
    if pa.types.is_floating(t):
        return float(key)
    if pa.types.is_boolean(t):
        return key.lower() == "true"
    return key
