"""Writes from the client: ``write`` (one commit per DataFrame; the data source merges and purges after
it when merge-on-write / purge-on-write are on) and ``write_stream`` (one commit per micro-batch, exactly
once; merged by a client thread when merge-on-write is on, ``connect_plugin.merge_on_write``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from connect_plugin.failures import project_error_first
from connect_plugin.merge_on_write import StreamMerger, merge_on_write_settings
from connect_plugin.settings import merged_options
from connect_plugin.table import IndexTable
from connect_plugin.write_warnings import warn_for_write, warned
from indextables_contract import FORMAT
from indextables_contract.errors import ConfigError
from indextables_contract.write_settings import optimize_write_target, purge_on_write_settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.connect.streaming.query import StreamingQuery as ConnectStreamingQuery
    from pyspark.sql.streaming.query import StreamingQuery


def write(
    df: DataFrame,
    path: str,
    *,
    mode: Literal["append", "overwrite"] = "append",
    partition_by: Iterable[str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> None:
    """Write ``df`` to the table at ``path`` (created on first write) in one commit.

    Args:
        df: the rows (column names and types become the table's schema on the first write).
        path: the table's root.
        mode: ``"append"`` or ``"overwrite"`` (every live file removed in the same commit).
        partition_by: partition columns (first write only).
        options: data source options (indexing, storage...) over the session's ``spark.indextables.*``.

    Raises:
        ConfigError: a bad mode, option or merge-on-write setting (before anything is written).

    ``partition_by`` is passed as the ``partitionBy`` option: Spark 4.3 refuses
    ``DataFrameWriter.partitionBy`` for Python data sources.

    It is ``df.write.format("indextables")`` with the session's settings, so what that does after its
    commit happens here too (``executor_lib.spark.after_write``): with
    ``spark.indextables.mergeOnWrite.enabled=true`` (a session setting or an option) MERGE SPLITS of
    the partitions that have at least ``spark.indextables.mergeOnWrite.minSplitsToMerge`` (default 10)
    small (or, with ``spark.indextables.merge.sortKey``, level-0) splits, to
    ``mergeOnWrite.targetSize`` (default 4G), then ``purgeOnWrite.*``; with
    ``write.optimizeWrite.enabled=true`` each partition's new splits are merged before the commit.
    The data is committed before a merge starts: a merge that fails (a conflict with another
    writer, say) is logged as a warning and left to the next write, never raised.

    Example:
        >>> connect_plugin.write(df, "s3://bucket/logs", partition_by=["day"],
        ...                      options={"spark.indextables.mergeOnWrite.enabled": "true"})
    """
    if mode not in ("append", "overwrite"):
        raise ConfigError(f"write {path}: mode must be 'append' or 'overwrite', not {mode!r}")
    opts = merged_options(df.sparkSession, options, "write")  # a misspelt spark.indextables.* key fails here
    if partition_by is not None:
        opts["partitionBy"] = ",".join(partition_by)
    merge_on_write_settings(path, opts)  # checked here, before anything is written
    purge_on_write_settings(path, opts)
    optimize_write_target(path, opts)
    warn_for_write(opts)  # a tokenizer IndexTables4Spark does not know (de_stem ...)
    with warned(), project_error_first(spelling=opts):
        df.write.format(FORMAT).mode(mode).options(**opts).save(path)


def write_stream(
    df: DataFrame,
    path: str,
    *,
    checkpoint_location: str,
    trigger: Mapping[str, Any] | None = None,
    partition_by: Iterable[str] | None = None,
    query_name: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> StreamingQuery | ConnectStreamingQuery:
    """Start a streaming query that appends each micro-batch of ``df`` to the table at ``path`` as one
    version, exactly once across restarts from ``checkpoint_location``; returns the StreamingQuery
    (``stop()``, ``awaitTermination()``, ``status``). ``trigger``: ``DataStreamWriter.trigger`` keywords,
    e.g. ``{"availableNow": True}`` or ``{"processingTime": "10 seconds"}``.

    With ``spark.indextables.mergeOnWrite.enabled=true`` a thread of this client merges the table
    while the query runs (``connect_plugin.merge_on_write.StreamMerger``): after new micro-batches,
    at most every ``mergeOnWrite.streamIntervalSeconds`` (default 30), with the settings of ``write``.

    Raises:
        ConfigError: a bad option or merge-on-write setting (before the query starts).

    Example:
        >>> q = connect_plugin.write_stream(events, "s3://b/logs", checkpoint_location="s3://b/ck/logs",
        ...                                 trigger={"processingTime": "10 seconds"})
    """
    opts = merged_options(df.sparkSession, options, "write")
    if partition_by is not None:
        opts["partitionBy"] = ",".join(partition_by)
    merge = merge_on_write_settings(path, opts)
    warn_for_write(opts)  # a tokenizer IndexTables4Spark does not know (de_stem ...)
    writer = df.writeStream.format(FORMAT).outputMode("append").options(**opts)
    writer = writer.option("checkpointLocation", checkpoint_location)
    if trigger:
        writer = writer.trigger(**dict(trigger))
    if query_name is not None:
        writer = writer.queryName(query_name)
    query = writer.start(path)
    if merge is not None:
        merge_splits = IndexTable.for_path(df.sparkSession, path, options).merge_splits
        StreamMerger(df.sparkSession, merge_splits, path, merge, query).start()
    return query
