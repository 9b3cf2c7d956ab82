"""The Tantivy schema of a doc mapping, as the ``meta.json`` of a split's index lists it: what the
native writer (``indextables_native.IndexWriter``) creates an index with.

It is the schema the ``tantivy`` package built for the same mapping (``writer.tantivy_schema``,
still the query checker's; ``tests/splits/write/test_native_writer.py`` holds the two equal), so a
split written natively reads as one written before: text and JSON fields always indexed (record
and tokenizer from the mapping, field norms on), a fast text field normalised by its own tokenizer
(a raw one plain ``true``), numeric fields without field norms, dates at Tantivy's default
precision of seconds in fast fields, plus the hidden ``__row`` fast field of a split whose rows are
in a columnar copy.

    >>> schema_json(DocMapping([FieldMapping("n", "i64")]), row_field=False)
    '[{"name": "n", "type": "i64", "options": {"indexed": true, "fieldnorms": false, ...}}]'
"""

from __future__ import annotations

import json
from typing import Any

from executor_lib.splits.doc_mapping import DocMapping, FieldMapping
from executor_lib.splits.tokenizers import analyzer_name

ROW_FIELD = "__row"
_TYPES = {
    "i64": "i64",
    "u64": "u64",
    "f64": "f64",
    "bool": "bool",
    "datetime": "date",
    "bytes": "bytes",
    "ip": "ip_addr",
    "text": "text",
    "json": "json_object",
}


def in_index(f: FieldMapping) -> bool:
    """Whether the field is in the Tantivy index. Store-only text and json fields are not: Tantivy cannot
    store them without indexing them, and this project reads stored values from the columnar copy."""
    return f.indexed or f.fast or f.type not in ("text", "json")


def _options(f: FieldMapping) -> dict[str, Any]:
    if f.type in ("text", "json"):
        tokenizer = analyzer_name(f.tokenizer or "default", f.max_token_length)
        indexing = {"record": f.record, "fieldnorms": True, "tokenizer": tokenizer}
        # a fast raw string is Tantivy's plain fast text (``true``); another keeps its normaliser
        fast: dict[str, str] | bool = f.fast and (tokenizer == "raw" or {"with_tokenizer": tokenizer})
        if f.type == "text":
            return {"indexing": indexing, "stored": f.stored, "fast": fast}
        return {"stored": f.stored, "indexing": indexing, "fast": fast, "expand_dots_enabled": False}
    options: dict[str, Any] = {"indexed": f.indexed, "fieldnorms": False, "fast": f.fast, "stored": f.stored}
    if f.type == "datetime":
        options["precision"] = "seconds"
    return options


def schema_fields(mapping: DocMapping, row_field: bool = True) -> list[dict[str, Any]]:
    """The schema's fields (``meta.json``'s ``schema`` list): the mapping's fields in the index, then
    (``row_field``) the hidden row-number fast field ``__row``."""
    fields = [{"name": f.name, "type": _TYPES[f.type], "options": _options(f)} for f in mapping.fields if in_index(f)]
    if row_field:
        fields.append(
            {
                "name": ROW_FIELD,
                "type": "u64",
                "options": {"indexed": False, "fieldnorms": False, "fast": True, "stored": False},
            }
        )
    return fields


def schema_json(mapping: DocMapping, row_field: bool = True) -> str:
    """``schema_fields`` as JSON text, as the native writer takes it."""
    return json.dumps(schema_fields(mapping, row_field))
