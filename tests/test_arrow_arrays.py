"""The Arrow helpers (``executor_lib.arrow_arrays``) build arrays from their buffers, so
reading a table's files in a new process never imports pandas: ``pa.array``, ``pa.scalar`` and a
kernel given a Python value import it on first use (0.3-1 s), which a partition listing, the CLI or
the first query of the Python API would pay."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from executor_lib.arrow_arrays import numbers
from tests.conftest import REPO_ROOT
from tests.log.helpers import add, make_table

READ_FILES = """
import json, sys, executor_lib
snap = executor_lib.open_log(sys.argv[1]).snapshot()
days = sorted({f.partition_values["date"] for f in snap.files})
print(json.dumps([len(snap.files), days, "pandas" in sys.modules]))
"""


def test_reading_a_tables_files_in_a_new_process_imports_no_pandas(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    log = make_table(uri, {})
    for day in ("2024-01-01", "2024-01-02", "2024-01-03"):
        log.commit([add(day), add(day)])  # each commit writes its Avro state (compact paths, partitions)
    done = subprocess.run(
        [sys.executable, "-c", READ_FILES, uri], cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    files, days, pandas_imported = json.loads(done.stdout)
    assert (files, days) == (6, ["2024-01-01", "2024-01-02", "2024-01-03"])
    assert not pandas_imported, "reading the table's files imported pandas (a pa.array/pa.scalar on the path)"


@pytest.mark.parametrize(
    "arrow_type", [pa.int8(), pa.int32(), pa.uint32(), pa.int64(), pa.uint64(), pa.float32(), pa.float64()]
)
def test_numbers_are_the_values_as_the_given_type(arrow_type: pa.DataType) -> None:
    got = numbers([0, 3, 7], arrow_type)
    assert got.type == arrow_type and got.to_pylist() == [0, 3, 7]
    assert numbers([], arrow_type).to_pylist() == []
