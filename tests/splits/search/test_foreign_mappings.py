"""Doc mappings and stored values of splits this project did not write (tantivy4java's, IndexTables4Spark's):
what ``DocMapping.from_json``, the commit-time schema check and the transcoding of such a split read them as.
The same cases against the real tantivy4java are in ``tests/jvm/test_tantivy4java.py``."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from executor_lib.log.commit.split_schema import schema_differences
from executor_lib.splits.doc_mapping import DocMapping, FieldMapping
from executor_lib.splits.rows.foreign_values import stored_value
from executor_lib.splits.tokenizers import analyzer_name
from indextables_contract.errors import ConfigError


def mapping(*fields: dict[str, Any]) -> DocMapping:
    return DocMapping.from_json(json.dumps(list(fields)))


@pytest.mark.parametrize(
    ("tokenizer", "expected"),
    [
        ("default_limit_9", ("default", 9)),
        ("en_stem_limit_40", ("en_stem", 40)),
        ("whitespace_limit_3", ("whitespace", 3)),
        ("default_limit_255", ("default", None)),
        ("raw_limit_9", ("raw", None)),
    ],
)
def test_tantivy4java_token_limit_names_read_as_the_tokenizer_and_its_limit(
    tokenizer: str, expected: tuple[str, int | None]
) -> None:
    (f,) = mapping({"name": "txt", "type": "text", "tokenizer": tokenizer}).fields
    assert (f.tokenizer, f.max_token_length) == expected


def test_this_projects_token_limit_is_written_and_read_as_before() -> None:
    ours = DocMapping((FieldMapping("txt", "text", tokenizer="default", max_token_length=9),))
    assert json.loads(ours.to_json())[0]["tokenizer"] == "default"
    assert DocMapping.from_json(ours.to_json()) == ours
    assert analyzer_name("default", 9) == "default_max9"


def test_an_object_field_reads_as_json() -> None:
    (f,) = mapping({"name": "st", "type": "object", "field_mappings": [], "expand_dots": True, "fast": True}).fields
    assert (f.type, f.tokenizer, f.fast) == ("json", "default", True)
    (g,) = mapping({"name": "st", "type": "object", "tokenizer": "raw"}).fields
    assert (g.type, g.tokenizer) == ("json", "raw")


def test_the_hidden_row_field_is_left_out_but_a_user_field_named_so_is_refused() -> None:
    read = mapping({"name": "id", "type": "i64"}, {"name": "__row", "type": "u64", "fast": True, "indexed": False})
    assert [f.name for f in read.fields] == ["id"]
    with pytest.raises(ConfigError, match="'__row' is reserved"):
        mapping({"name": "id", "type": "i64"}, {"name": "__row", "type": "text"})


def test_the_commit_check_takes_object_for_nested_columns_and_skips_the_hidden_row_field() -> None:
    columns = {"id": "long", "st": {"type": "struct", "fields": []}, "s": "string"}
    assert schema_differences({"id": "i64", "st": "object", "s": "object", "__row": "u64"}, columns) == []
    assert schema_differences({"id": "i64", "st": "object", "s": "text", "__row": "i64"}, columns) == [
        "columns not in the table ['__row']"
    ]
    assert schema_differences({"id": "object", "st": "json", "s": "text"}, columns) == [
        "retyped columns ['id (table: long, split: object)']"
    ]


LIST = pa.list_(pa.int64())
STRUCT = pa.struct([("a", pa.int64()), ("tags", pa.list_(pa.string())), ("m", pa.map_(pa.int32(), pa.string()))])


@pytest.mark.parametrize(
    ("stored", "arrow_type", "expected"),
    [
        (12.3, pa.decimal128(10, 2), Decimal("12.30")),
        (-0.1, pa.decimal128(5, 3), Decimal("-0.100")),
        (7, pa.decimal128(38, 10), Decimal("7.0000000000")),
        ({"_values": [1, 2]}, LIST, [1, 2]),
        ({"_values": []}, LIST, []),
        ([{"a": 1}], pa.list_(pa.struct([("a", pa.int64())])), [{"a": 1}]),
        ({"1": "x", "2": "y"}, pa.map_(pa.int32(), pa.string()), [(1, "x"), (2, "y")]),
        ({"a": 1, "tags": ["t"], "m": {"3": "z"}}, STRUCT, {"a": 1, "tags": ["t"], "m": [(3, "z")]}),
        ({"a": 1}, STRUCT, {"a": 1, "tags": None, "m": None}),
        (None, LIST, None),
    ],
)
def test_stored_values_of_a_foreign_split_read_as_their_arrow_type(
    stored: Any, arrow_type: pa.DataType, expected: Any
) -> None:
    value = stored_value(stored, arrow_type)
    assert value == expected
    assert pa.array([value], arrow_type).type == arrow_type
