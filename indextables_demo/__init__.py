"""The IndexTables main job: generated application logs indexed with Spark, searched, aggregated,
merged and purged, with the same searches on Parquet (``contains``/``rlike``) timed beside them.

Run it with ``python -m indextables_demo`` (see ``__main__``), or on an existing session::

    from indextables_demo import run
    report = run(spark, "/tmp/logs", rows=100_000, parquet="/tmp/logs-parquet")
    print(report.format())
"""

from indextables_demo.job import DemoError, run
from indextables_demo.report import QueryResult, Report

__all__ = ["DemoError", "QueryResult", "Report", "run"]
