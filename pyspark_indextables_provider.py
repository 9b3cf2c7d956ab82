"""Static registration of ``format("io.indextables.provider.IndexTablesProvider")``, IndexTables4Spark's
provider name, as the same data source as ``format("indextables")`` (see ``pyspark_indextables``: Spark
registers one ``DefaultSource`` per ``pyspark_*`` module)."""

from executor_lib.spark.datasource import IndexTablesProvider as DefaultSource

__all__ = ["DefaultSource"]
