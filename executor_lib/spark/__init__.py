"""Spark glue: the ``indextables`` Python data source (the only executor_lib package that imports pyspark)."""
