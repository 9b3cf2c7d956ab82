"""The project's error first: a Spark exception caused by an IndexTables error (raised by the data
source on the driver side, or in a task) is raised again as that error, its ``[INDEXTABLES_*]`` line
as the message and Spark's exception as its cause (``raise ... from``), so the first line a user sees
names the problem instead of ``[PYTHON_DATA_SOURCE_ERROR] Failed to ...: Traceback``. The worker's
traceback stays in the cause (and in Spark's logs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from indextables_contract.errors import IndexTablesError, error_in


@contextlib.contextmanager
def project_error_first() -> Iterator[None]:
    """Run the block; a non-IndexTables exception whose text reports an IndexTables error is raised as that error.

    Raises:
        IndexTablesError: the error the Spark exception reports (its class and message), from it.

    Example: ``with project_error_first(): df = spark.read.format("indextables").load(path)``
    """
    try:
        yield
    except IndexTablesError:
        raise
    except Exception as e:
        found = error_in(str(e))
        if found is None:
            raise
        raise found from e
