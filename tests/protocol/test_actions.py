"""Action codecs: exact field names of the spec, unknown fields kept, bad lines named."""

from __future__ import annotations

import json

import pytest

from executor_lib.protocol.actions import (
    AddAction,
    MetadataAction,
    ProtocolAction,
    RemoveAction,
    SkipAction,
    action_to_json_line,
    actions_from_ndjson,
    actions_to_ndjson,
)
from indextables_contract.errors import CorruptLogError

SPEC_ADD_FIELDS = {
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "stats",
    "minValues",
    "maxValues",
    "numRecords",
    "hasFooterOffsets",
    "footerStartOffset",
    "footerEndOffset",
    "splitTags",
    "numMergeOps",
    "docMappingRef",
    "docMappingJson",
    "uncompressedSizeBytes",
}


def test_add_action_uses_the_spec_field_names() -> None:
    add = AddAction(
        path="date=2024-01-01/splits/split-abc.split",
        partition_values={"date": "2024-01-01"},
        size=1048576,
        modification_time=1704067200000,
        data_change=True,
        stats="{}",
        min_values={"score": "0.1"},
        max_values={"score": "0.9"},
        num_records=1000,
        has_footer_offsets=True,
        footer_start_offset=900000,
        footer_end_offset=1048500,
        split_tags=frozenset({"hot"}),
        num_merge_ops=2,
        doc_mapping_ref="ab12cd34ef56gh78",
        doc_mapping_json="[]",
        uncompressed_size_bytes=5,
    )
    line = json.loads(action_to_json_line(add))
    assert set(line) == {"add"}
    assert set(line["add"]) == SPEC_ADD_FIELDS
    assert line["add"]["splitTags"] == ["hot"]
    assert actions_from_ndjson(action_to_json_line(add), "t") == [add]


def test_none_fields_are_left_out() -> None:
    line = json.loads(action_to_json_line(RemoveAction("splits/a.split", 5)))
    assert line == {"remove": {"path": "splits/a.split", "deletionTimestamp": 5, "dataChange": True}}


def test_round_trip_every_action_type() -> None:
    actions = [
        ProtocolAction(3, 3, frozenset({"schemaDeduplication"}), frozenset({"schemaDeduplication"})),
        MetadataAction(
            id="id-1",
            schema_string='{"type":"struct","fields":[]}',
            partition_columns=("d",),
            configuration={"k": "v"},
            created_time=7,
        ),
        AddAction("d=1/splits/x.split", {"d": "1"}, 10, 11, True, num_records=3),
        RemoveAction("d=1/splits/y.split", 12, True, partition_values={"d": "1"}, size=9),
        SkipAction("d=1/splits/z.split", 13, "corrupt footer", "merge", retry_after=14, skip_count=2),
    ]
    text = actions_to_ndjson(actions).decode()
    assert [json.loads(line).popitem()[0] for line in text.splitlines()] == [
        "protocol",
        "metaData",
        "add",
        "remove",
        "mergeskip",
    ]
    assert actions_from_ndjson(text, "t") == actions


def test_unknown_fields_are_tolerated_and_written_back() -> None:
    line = '{"add":{"path":"a.split","partitionValues":{},"size":1,"modificationTime":2,"dataChange":true,"futureField":{"x":1}}}'
    (add,) = actions_from_ndjson(line, "t")
    assert isinstance(add, AddAction)
    assert add.extra == {"futureField": {"x": 1}}
    assert json.loads(action_to_json_line(add))["add"]["futureField"] == {"x": 1}


def test_a_schema_checked_record_builds_the_same_action_as_json() -> None:
    record = {
        "path": "a.split",
        "partitionValues": {"d": "1"},
        "size": 1,
        "modificationTime": 2,
        "dataChange": True,
        "splitTags": ["b", "a"],
        "companionSourceFiles": ["x.parquet"],
        "numRecords": None,
        "addedAtVersion": 3,
        "futureField": 7,
    }
    add = AddAction.from_trusted_dict(record, ignore=frozenset({"addedAtVersion"}))
    as_json = {k: v for k, v in record.items() if v is not None and k != "addedAtVersion"}
    assert add == AddAction.from_json_dict(as_json)
    assert add.split_tags == frozenset({"a", "b"}) and add.companion_source_files == ("x.parquet",)
    assert add.extra == {"futureField": 7} and add.num_records is None
    assert AddAction.from_attributes(dict(vars(add))) == add
    with pytest.raises(CorruptLogError, match="size"):
        AddAction.from_trusted_dict({**record, "size": None})


def test_jvm_style_nulls_and_skip_alias_are_read() -> None:
    text = (
        '{"protocol":{"minReaderVersion":4,"minWriterVersion":4,"readerFeatures":null,"writerFeatures":null}}\n'
        '{"skip":{"path":"a.split","skipTimestamp":1,"reason":"r","operation":"merge","skipCount":1}}\n'
    )
    protocol, skip = actions_from_ndjson(text, "t")
    assert protocol == ProtocolAction(4, 4)
    assert isinstance(skip, SkipAction) and skip.path == "a.split"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"add":{"path":"a"}}\n{"bogus":{}}', "line 1: 'add' action lacks required field 'partitionValues'"),
        (
            '{"protocol":{"minReaderVersion":1,"minWriterVersion":1}}\n{"frobnicate":{"x":1}}',
            "line 2: unknown action type 'frobnicate'",
        ),
        ('{"protocol":{"minReaderVersion":1,"minWriterVersion":1}}\n{"add": {', "line 2: invalid JSON"),
        ("[1,2]", "line 1: a log line must be a JSON object"),
        (
            '{"add":{"path":"a","partitionValues":{},"size":"12","modificationTime":2,"dataChange":true}}',
            "line 1: add.size must be an integer",
        ),
        (
            '{"add":{"path":"a","partitionValues":"x","size":1,"modificationTime":2,"dataChange":true}}',
            "add.partitionValues must be an object of strings",
        ),
        ('{"remove":{"path":"a","dataChange":"yes"}}', "remove.dataChange must be true or false"),
        (
            '{"metaData":{"id":"i","schemaString":"{}","partitionColumns":"date"}}',
            "metaData.partitionColumns must be an array of strings",
        ),
    ],
)
def test_bad_lines_name_the_source_and_line(text: str, message: str) -> None:
    with pytest.raises(CorruptLogError) as err:
        actions_from_ndjson(text, "/t/_transaction_log/00000000000000000003.json")
    assert "00000000000000000003.json" in str(err.value)
    assert message in str(err.value)
