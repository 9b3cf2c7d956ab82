"""A first write whose data commit fails leaves no empty version 0 behind (issue 20, hole 7).

The writer's driver side creates the table (version 0) and then commits the tasks' splits; before
the fix a refused or failed data commit left the table created and empty. The writer's commit is
called here directly with a commit message the log refuses (no Spark job is needed to get there).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from executor_lib.spark.writer import IndexTablesCommitMessage, IndexTablesWriter
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage import open_store
from indextables_contract.errors import InvalidActionError

SPARK_SCHEMA = StructType([StructField("id", LongType()), StructField("msg", StringType())])


def test_a_failed_first_write_leaves_no_table(tmp_path: Path) -> None:
    table = tmp_path / "t"
    writer = IndexTablesWriter({"path": str(table)}, SPARK_SCHEMA, overwrite=False)
    rows = pa.table({"id": [1], "msg": ["a"]})
    add = write_and_upload(open_store(str(table)), rows, DocMapping.from_json(writer.mapping_json))
    bad = dataclasses.replace(add, size=-1)  # refused by the commit, after version 0 was created
    with pytest.raises(InvalidActionError, match="must not be negative"):
        writer.commit([IndexTablesCommitMessage([bad])])
    assert not (table / "_transaction_log").exists()
    assert not any(table.rglob("*.split"))
    # the next first write creates the table normally
    add = write_and_upload(open_store(str(table)), rows, DocMapping.from_json(writer.mapping_json))
    writer.commit([IndexTablesCommitMessage([add])])
    assert (table / add.path).exists() and (table / "_transaction_log" / "00000000000000000001.json").exists()
