"""Static registration of ``format("io.indextables.spark.core.IndexTables4SparkTableProvider")``,
IndexTables4Spark's class name, as the same data source as ``format("indextables")`` (see
``pyspark_indextables``: Spark registers one ``DefaultSource`` per ``pyspark_*`` module)."""

from executor_lib.spark.datasource import IndexTables4SparkTableProvider as DefaultSource

__all__ = ["DefaultSource"]
