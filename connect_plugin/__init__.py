"""Client side of IndexTables: what a user imports in a (classic or Spark Connect) PySpark session.

It builds Spark plans only: it never imports tantivy or executor_lib's engine and needs no
storage credentials; the cluster, where ``executor_lib`` is installed, does the work.

    import connect_plugin
    connect_plugin.install(spark)                  # once per session
    df = connect_plugin.read(spark, "s3://bucket/logs", columns=["ts", "msg"], limit=100,
                             filter={"op": "query", "query": "error", "column": "msg"})
    connect_plugin.write(df, "s3://bucket/logs", mode="append", partition_by=["date"])

``read`` and ``write`` copy the session's ``spark.indextables.*`` settings into the data
source options (Spark does not hand session settings to Python data sources), and ``read``
builds a fresh plan per call, which is what keeps results correct despite Spark 4.3's
stale-reader bug in classic sessions (see README, "Known Spark limitation").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

FORMAT = "indextables"

# Session settings the data sources rely on.
SESSION_CONF = {
    # Python data sources get no filters unless this is on.
    "spark.sql.python.filterPushdown.enabled": "true",
    # Spark Connect: do not reuse a cached reader (and its filters and file list) across queries.
    "spark.connect.session.planCache.alwaysCacheDataSourceReadsEnabled": "false",
}


def install(spark: Any) -> None:
    """Make ``format("indextables")`` usable in ``spark`` and set the configuration it relies on.

    The cluster package registers the data source statically (module ``pyspark_indextables``);
    where ``executor_lib`` is importable here too (a classic session, or a client that has it),
    the class is also registered explicitly.
    """
    for key, value in SESSION_CONF.items():
        try:
            spark.conf.set(key, value)
        except Exception as e:
            if "planCache" not in key:
                raise RuntimeError(f"connect_plugin.install: cannot set {key}={value}: {e}") from e
    try:
        from executor_lib.spark.datasource import IndexTablesDataSource
    except ImportError:  # thin client: the cluster's static registration provides it
        return
    spark.dataSource.register(IndexTablesDataSource)


# Table names: ``spark.indextables.table.<name>`` = the table's path, set per session
# (``register_table``, ``SET``) or for every session in the cluster's spark-defaults.conf.
# Spark 4.3's catalog cannot hold a Python data source table (``CREATE TABLE ... USING
# indextables LOCATION ...`` keeps neither the location nor the options), hence this registry.
TABLE_NAME_PREFIX = "spark.indextables.table."


class UnknownTableError(LookupError):
    """A table name that no ``spark.indextables.table.<name>`` setting defines."""


def register_table(spark: Any, name: str, path: str) -> None:
    """Name the table at ``path`` for this session: ``sql(spark, "MERGE SPLITS <name>")`` etc."""
    spark.conf.set(TABLE_NAME_PREFIX + name, path)


def resolve_table(spark: Any, name: str) -> str:
    """The path a table name stands for (UnknownTableError, naming the setting, if none)."""
    key = TABLE_NAME_PREFIX + name
    try:
        path = spark.conf.get(key, None)
    except Exception as e:
        raise UnknownTableError(f"table {name!r}: cannot read the setting {key} ({e})") from e
    if not path:
        raise UnknownTableError(
            f"table {name!r} is not defined: set {key} to its path (connect_plugin.register_table, "
            f"SET {key}=<path>, or spark-defaults.conf), or name the table by its quoted path"
        )
    return str(path)


def session_options(spark: Any) -> dict[str, str]:
    """The session's ``spark.indextables.*`` settings (table names excluded)."""
    get_all = getattr(spark.conf, "getAll", None)
    if get_all is None:
        return {}
    items = get_all() if callable(get_all) else get_all
    return {
        k: v
        for k, v in dict(items).items()
        if k.startswith("spark.indextables.") and not k.startswith(TABLE_NAME_PREFIX)
    }


def _options(spark: Any, options: Mapping[str, Any] | None) -> dict[str, str]:
    merged = session_options(spark)
    merged.update({k: _option_text(v) for k, v in (options or {}).items()})
    return merged


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def read(
    spark: Any,
    path: str,
    *,
    columns: Iterable[str] | None = None,
    limit: int | None = None,
    filter: Mapping[str, Any] | None = None,
    version_as_of: int | None = None,
    timestamp_as_of: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> Any:
    """A fresh DataFrame over the table at ``path``.

    ``columns``, ``limit`` and ``filter`` (the JSON filter tree of the ``filter`` option; may mix
    Tantivy queries with comparisons under and/or/not) are pushed to the executors; the
    result equals reading everything and applying them in Spark.
    """
    opts = _options(spark, options)
    if columns is not None:
        opts["columns"] = ",".join(columns)
    if limit is not None:
        opts["limit"] = str(limit)
    if filter is not None:
        opts["filter"] = json.dumps(filter)
    if version_as_of is not None:
        opts["versionAsOf"] = str(version_as_of)
    if timestamp_as_of is not None:
        opts["timestampAsOf"] = str(timestamp_as_of)
    df = spark.read.format(FORMAT).options(**opts).load(path)
    return df.limit(limit) if limit is not None else df


def write(
    df: Any,
    path: str,
    *,
    mode: str = "append",
    partition_by: Iterable[str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> None:
    """Write ``df`` to the table at ``path`` (created on first write) in one commit.

    ``partition_by`` is passed as the ``partitionBy`` option: Spark 4.3 refuses
    ``DataFrameWriter.partitionBy`` for Python data sources.
    """
    if mode not in ("append", "overwrite"):
        raise ValueError(f"write {path}: mode must be 'append' or 'overwrite', not {mode!r}")
    opts = _options(df.sparkSession, options)
    if partition_by is not None:
        opts["partitionBy"] = ",".join(partition_by)
    df.write.format(FORMAT).mode(mode).options(**opts).save(path)


# ``connect_plugin.sql(spark, text)``: the IndexTables SQL commands (the function shadows the
# submodule's name on the package; import the module's other names with ``from connect_plugin.sql import ...``).
from connect_plugin.sql import sql as sql  # noqa: E402
from connect_plugin.table import IndexTable as IndexTable  # noqa: E402
