"""Errors raised by the data source reach a Spark Connect client with their class name and stable
code in the message, whether the driver raised them while planning or an executor task while reading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from indextables_contract.errors import CorruptSplitError, FilterError, QueryError, TableNotFoundError, error_class_in


def one_split_table(path: Path) -> executor_lib.AddAction:
    """A table of one real split (written here, without Spark); its add action."""
    log = executor_lib.create_table(str(path), pa.schema([("id", pa.int64()), ("message", pa.string())]))
    rows = pa.table({"id": [1, 2, 3], "message": ["disk error", "all good", "timeout"]})
    mapping = executor_lib.mapping_for(rows.schema, {"spark.indextables.indexing.typemap.message": "text"})
    add = executor_lib.write_and_upload(log.store, rows, mapping)
    log.commit([add])
    return add


def raised(call: Any) -> str:
    with pytest.raises(Exception) as failure:
        call()
    return str(failure.value)


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"filter": json.dumps({"op": "nope", "column": "id"})}, FilterError),
        ({"indexquery.message": "timeout AND ("}, QueryError),
    ],
)
def test_planning_errors_name_class_and_code(connect_spark: Any, tmp_path: Path, options: dict, error: type) -> None:
    one_split_table(tmp_path / "t")
    reader = connect_spark.read.format("indextables")
    for key, value in options.items():
        reader = reader.option(key, value)
    text = raised(lambda: reader.load(str(tmp_path / "t")).collect())
    assert f"{error.__name__}: [{error.code}]" in text, text
    assert error_class_in(text) is error


def test_a_missing_table_names_class_and_code(connect_spark: Any, tmp_path: Path) -> None:
    text = raised(lambda: connect_spark.read.format("indextables").load(str(tmp_path / "none")).collect())
    assert "TableNotFoundError: [INDEXTABLES_TABLE_NOT_FOUND]" in text and str(tmp_path / "none") in text, text
    assert error_class_in(text) is TableNotFoundError


def test_an_executor_task_error_names_class_and_code(connect_spark: Any, tmp_path: Path) -> None:
    """A split damaged after its commit: the read task on the executor raises CorruptSplitError."""
    add = one_split_table(tmp_path / "t")
    split = tmp_path / "t" / add.path
    split.write_bytes(split.read_bytes()[:-10])
    text = raised(lambda: connect_spark.read.format("indextables").load(str(tmp_path / "t")).collect())
    assert "An exception was thrown from the Python worker" in text  # raised in a task, not while planning
    assert "CorruptSplitError: [INDEXTABLES_CORRUPT_SPLIT]" in text and add.path in text, text
    assert error_class_in(text) is CorruptSplitError
