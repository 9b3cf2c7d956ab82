"""Column names and types a table can never index are refused before anything is written, and no
Rust panic reaches a user (issue 20, hole 3).

Before the fix ``__row``, ``''`` and ``-x`` made tantivy raise ``pyo3_runtime.PanicException`` (a
BaseException that ``except Exception`` misses) after version 0 was already written, and
``create_table`` accepted maps and lists of scalars, which no split could then hold; now they are
indexed as IndexTables4Spark indexes them (issue 32), and only maps with nested keys are refused.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.splits.doc_mapping import DocMapping, FieldMapping, mapping_for
from executor_lib.splits.panics import no_panic
from executor_lib.splits.write.writer import write_split
from indextables_contract.errors import ConfigError, IndexEngineError

BAD_NAMES = {
    "__row": "is reserved",
    "": "must not be empty",
    "-x": "must not start with '-'",
}
BAD_TYPES = {
    "map-with-struct-keys": (pa.map_(pa.struct([("a", pa.int64())]), pa.int64()), "a map with struct"),
    "null": (pa.null(), "null cannot be indexed"),
}


def _files(root: Path) -> list[Path]:
    return sorted(root.rglob("*")) if root.exists() else []


@pytest.mark.parametrize("name", sorted(BAD_NAMES))
def test_create_table_refuses_a_bad_column_name_and_writes_nothing(tmp_path: Path, name: str) -> None:
    schema = pa.schema([("id", pa.int64()), (name, pa.string())])
    with pytest.raises(ConfigError, match=rf"column {name!r} \(string\): .*{BAD_NAMES[name]}"):
        executor_lib.create_table(str(tmp_path / "t"), schema)
    assert _files(tmp_path / "t") == []
    with pytest.raises(ConfigError, match=BAD_NAMES[name]):
        mapping_for(schema, {})


@pytest.mark.parametrize("case", sorted(BAD_TYPES))
def test_create_table_refuses_a_type_no_split_can_hold(tmp_path: Path, case: str) -> None:
    arrow_type, message = BAD_TYPES[case]
    schema = pa.schema([("id", pa.int64()), ("c", arrow_type)])
    with pytest.raises(ConfigError, match=rf"column 'c' .*{message}"):
        executor_lib.create_table(str(tmp_path / "t"), schema)
    assert _files(tmp_path / "t") == []


def test_nested_types_that_can_be_written_are_accepted(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("s", pa.struct([("a", pa.int64())])),
            ("l", pa.list_(pa.struct([("b", pa.string())]))),
            ("tags", pa.list_(pa.string())),
            ("m", pa.map_(pa.string(), pa.int64())),
            ("ll", pa.large_list(pa.int64())),
        ]
    )
    executor_lib.create_table(str(tmp_path / "t"), schema)
    assert [f.type for f in mapping_for(schema, {}).fields] == ["i64", "json", "json", "json", "json", "json"]


@pytest.mark.parametrize("name", sorted(BAD_NAMES))
def test_a_hand_made_doc_mapping_never_lets_a_panic_out(tmp_path: Path, name: str) -> None:
    """A DocMapping built directly skips mapping_for: the writer's tantivy calls are guarded."""
    mapping = DocMapping((FieldMapping("id", "i64"), FieldMapping(name, "text", tokenizer="raw")))
    rows = pa.table({"id": [1], name: ["a"]})
    try:
        write_split(rows, mapping, tmp_path / "out")
    except IndexEngineError as e:
        assert "Tantivy failed" in str(e) and repr(name) in str(e)
    except ConfigError as e:  # refused before Tantivy sees it
        assert re.search(BAD_NAMES[name], str(e)) and repr(name) in str(e)
    except BaseException as e:  # the point: nothing else may escape
        pytest.fail(f"{type(e).__module__}.{type(e).__name__} escaped: {e}")
    else:
        pytest.fail(f"a split with the field name {name!r} was written")
    with pytest.raises(ConfigError, match=BAD_NAMES[name]):
        DocMapping.from_json(mapping.to_json())


def test_no_panic_converts_only_panics() -> None:
    import tantivy

    builder = tantivy.SchemaBuilder()
    with pytest.raises(IndexEngineError, match="building: Tantivy failed"), no_panic("building"):
        builder.add_text_field("")
    with pytest.raises(KeyError), no_panic("other"):
        raise KeyError("x")


@pytest.mark.parametrize(
    ("select", "message"),
    [
        (["id", "'a' AS `-x`"], "column '-x' (string): a column name must not start with '-'"),
        (["id", "'a' AS `__row`"], "column '__row' (string): '__row' is reserved"),
    ],
)
def test_a_spark_write_refuses_bad_columns_before_writing(
    classic_spark: Any, tmp_path: Path, select: list[str], message: str
) -> None:
    table = tmp_path / "t"
    with pytest.raises(Exception) as excinfo:
        classic_spark.range(2).selectExpr(*select).write.format("indextables").mode("append").save(str(table))
    assert message in str(excinfo.value) and f"column {select[1].rsplit(' ', 1)[1].strip('`')!r}" in str(excinfo.value)
    assert "PanicException" not in str(excinfo.value)
    assert _files(table) == []
