"""Run by the client environment's Python (harness.client_env): write and read an IndexTables
table through Spark Connect with only pyspark-client and connect_plugin installed.

    python thin_client_job.py sc://host:port s3://bucket/table ROWS  -> prints one JSON line
"""

import importlib.util
import json
import sys

from pyspark.sql import SparkSession

import connect_plugin
from connect_plugin.table import IndexTable


def main() -> None:
    url, path, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    spark = SparkSession.builder.remote(url).getOrCreate()
    connect_plugin.install(spark)
    df = spark.range(rows).selectExpr(
        "id", "concat('event ', cast(id % 10 as string), ' done') as message", "cast(id % 3 as string) as day"
    )
    connect_plugin.write(df, path, partition_by=["day"], options={"spark.indextables.indexing.typemap.message": "text"})
    table = IndexTable.for_path(spark, path)
    hits = connect_plugin.sql(spark, f"SELECT count(*) AS n FROM indextables.`{path}` WHERE message indexquery '7'")
    result = {
        "count": table.to_df().count(),
        "hits": table.count("message:7"),
        "sql_hits": hits.collect()[0]["n"],
        "day0": table.to_df().filter("day = '0'").count(),
        "versions": len(table.history().collect()),
        "has_tantivy": importlib.util.find_spec("tantivy") is not None,
        "has_executor_lib": importlib.util.find_spec("executor_lib") is not None,
        "has_boto3": importlib.util.find_spec("boto3") is not None,
    }
    print(json.dumps(result))
    spark.stop()


if __name__ == "__main__":
    main()
