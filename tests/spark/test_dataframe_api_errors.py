"""``df.write.format("indextables")`` through the DataFrame API (issue 76): ``partitionBy(...)``, which
Spark refuses for every Python data source with a message about "the existing table's" partitioning
(on a new path too), names the option that does it; and a refused option leads with the project's
``[INDEXTABLES_*]`` line, one line, not Spark's ``[PYTHON_DATA_SOURCE_ERROR]`` and the worker's traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from indextables_contract.errors import ConfigError


def test_partition_by_names_the_option_that_does_it(classic_spark: Any, tmp_path: Path) -> None:
    df = classic_spark.createDataFrame([(1, "a", "2024-01-01")], "id long, msg string, day string")
    with pytest.raises(ConfigError) as raised:
        df.write.format("indextables").mode("append").partitionBy("day").save(str(tmp_path / "new"))
    message = str(raised.value)
    assert message.startswith("[INDEXTABLES_CONFIG] DataFrameWriter.partitionBy(...) cannot reach IndexTables")
    assert '.option("partitionBy", "day")' in message and "partition_by=" in message
    assert not (tmp_path / "new").exists()


def test_a_refused_write_option_leads_with_the_projects_line(classic_spark: Any, tmp_path: Path) -> None:
    df = classic_spark.createDataFrame([(1, "a")], "id long, msg string")
    with pytest.raises(ConfigError) as raised:
        df.write.format("indextables").mode("append").option("spark.indextables.indexing.typmap.msg", "text").save(
            str(tmp_path / "t")
        )
    assert str(raised.value).splitlines() == [
        "[INDEXTABLES_CONFIG] write: unknown option 'spark.indextables.indexing.typmap.msg' (did you mean "
        "spark.indextables.indexing.typemap.msg?); the known spark.indextables.* settings are listed in docs/settings.md"
    ]
