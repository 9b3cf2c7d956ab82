"""Static registration of ``format("indextables")``.

When Spark first resolves a Python data source it imports every top-level module on the
driver's Python path whose name starts with ``pyspark_`` and registers its ``DefaultSource``.
Installing this project on the cluster is therefore enough for Spark Connect clients to use
``spark.read.format("indextables")`` with nothing installed on their side.
"""

from executor_lib.spark.datasource import IndexTablesDataSource as DefaultSource

__all__ = ["DefaultSource"]
