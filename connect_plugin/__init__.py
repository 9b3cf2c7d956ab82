"""Client side of IndexTables: what a user imports in a (classic or Spark Connect) PySpark session.

It builds Spark plans only: it never imports tantivy or executor_lib's engine and needs no
storage credentials; the cluster, where ``executor_lib`` is installed, does the work.

    import connect_plugin
    spark = connect_plugin.local_session()         # a local session with the data source installed, or:
    connect_plugin.install(spark)                  # once per session (classic or Spark Connect)
    df = connect_plugin.read(spark, "s3://bucket/logs", columns=["ts", "msg"], limit=100,
                             filter="msg indexquery 'error' AND level = 'ERROR'")
    connect_plugin.write(df, "s3://bucket/logs", mode="append", partition_by=["date"])
    q = connect_plugin.write_stream(stream_df, "s3://bucket/logs", checkpoint_location="s3://bucket/ck/logs")
    changes = connect_plugin.read_stream(spark, "s3://bucket/logs", starting_version="latest")

``read`` and ``write`` copy the session's ``spark.indextables.*`` settings into the data
source options (Spark does not hand session settings to Python data sources), and ``read``
builds a fresh plan per call, which is what keeps results correct despite Spark 4.3's
stale-reader bug in classic sessions (see README, "Known Spark limitation").
"""

from __future__ import annotations

from connect_plugin.companion import build_companion
from connect_plugin.session import (
    SESSION_CONF,
    install,
    local_session,
    read,
    read_stream,
    register_table,
    resolve_table,
)
from connect_plugin.settings import TABLE_NAME_PREFIX, session_options
from connect_plugin.sql import explain, sql
from connect_plugin.table import IndexTable
from connect_plugin.writes import write, write_stream
from indextables_contract import FORMAT
from indextables_contract.errors import UnknownTableError
from indextables_contract.version import VERSION

__version__ = VERSION  # the one version source (indextables_contract.version)

__all__ = [
    "FORMAT",
    "SESSION_CONF",
    "TABLE_NAME_PREFIX",
    "IndexTable",
    "UnknownTableError",
    "build_companion",
    "explain",
    "install",
    "local_session",
    "read",
    "read_stream",
    "register_table",
    "resolve_table",
    "session_options",
    "sql",
    "write",
    "write_stream",
]
