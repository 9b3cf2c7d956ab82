"""The session side of the client: installing the data source in a session, table names, the
session's ``spark.indextables.*`` settings, and plain reads and writes of ``format("indextables")``.
Re-exported by ``connect_plugin``; nothing here imports tantivy or touches storage.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from connect_plugin.dataframe_api import hook_writers
from connect_plugin.failures import project_error_first
from connect_plugin.local import check_local_workers, quiet_local_session, use_worker_daemon
from connect_plugin.settings import TABLE_NAME_PREFIX, merged_options
from connect_plugin.where import Where, to_filter
from indextables_contract import FORMAT
from indextables_contract.errors import ConfigError, UnknownTableError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# IndexTables4Spark's format names for the same data source (``executor_lib.spark.datasource.DATA_SOURCES``).
JVM_FORMATS = (
    "io.indextables.provider.IndexTablesProvider",
    "io.indextables.spark.core.IndexTables4SparkTableProvider",
)
# The modules that register each name statically on the cluster (pyproject.toml's py-modules).
STATIC_MODULES = ("pyspark_indextables", "pyspark_indextables_provider", "pyspark_indextables_spark")

# What connect_plugin.local_session sets unless its caller does.
LOCAL_CONF = {"spark.ui.showConsoleProgress": "false", "spark.sql.session.timeZone": "UTC"}

# Session settings the data sources rely on.
SESSION_CONF = {
    # Python data sources get no filters unless this is on.
    "spark.sql.python.filterPushdown.enabled": "true",
    # Spark Connect: do not reuse a cached reader (and its filters and file list) across queries.
    "spark.connect.session.planCache.alwaysCacheDataSourceReadsEnabled": "false",
}


def local_session(master: str = "local[2]", conf: Mapping[str, str] | None = None) -> SparkSession:
    """A classic ``SparkSession`` on this machine whose Python workers run this interpreter, with
    ``format("indextables")`` installed (``connect_plugin.install``) and Spark's start-up noise off.

    Args:
        master: the local master (``local[N]``).
        conf: Spark settings over ``LOCAL_CONF`` (e.g. ``{"spark.driver.memory": "4g"}``).

    Raises:
        ConfigError: this environment does not have the project's cluster side (``executor_lib``,
            ``pip install -e '.[spark]'`` in the project's checkout), or an existing session's workers run
            another Python.

    Example: ``spark = connect_plugin.local_session(); spark.read.format("indextables").load("/data/t")``
    """
    missing = [m for m in ("executor_lib", "pyspark_indextables", "tantivy") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            f"connect_plugin.local_session: {sys.executable} cannot import {', '.join(missing)}: a local session runs "
            "the data source in this Python; install the project with its Spark extra here "
            "(pip install -e '.[spark]' in the project's checkout: it is not on PyPI), or use Spark Connect (SparkSession.builder.remote('sc://...'))"
        )
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {**LOCAL_CONF, "spark.pyspark.python": os.environ["PYSPARK_PYTHON"], **dict(conf or {})}
    spark = quiet_local_session(settings, master)
    install(spark)
    return spark


def install(spark: SparkSession) -> None:
    """Make ``format("indextables")`` usable in ``spark`` and set the configuration it relies on.

    The cluster package registers the data source statically (module ``pyspark_indextables``,
    found by Spark on the Python path of its workers), also under IndexTables4Spark's names
    (``JVM_FORMATS``: modules ``pyspark_indextables_provider`` and ``pyspark_indextables_spark``);
    only where such a module is not importable here but ``executor_lib`` is, that name is registered
    explicitly (registering over the static registration makes Spark warn on every session).

    In a classic ``local[...]`` session, it first checks that Spark's Python workers can import the data
    source (``connect_plugin.local.check_local_workers``): a venv's Python run without activating the
    venv leaves them on the system Python, where every read and write would fail. Its workers then
    start from ``executor_lib.spark.worker_daemon`` (``connect_plugin.local.use_worker_daemon``), unless
    the session names its own ``spark.python.daemon.module``.

    Args:
        spark: a classic or Spark Connect session.

    Raises:
        ConfigError: a session setting the data source relies on cannot be set, or a local session's
            workers run a Python that cannot import the data source (the message says what to set).

    Example: ``connect_plugin.install(spark)`` once, before the first read or write
    (``connect_plugin.local_session()`` builds a local session and installs it).
    """
    check_local_workers(spark)
    use_worker_daemon(spark)
    hook_writers(JVM_FORMATS)  # df.write...save(): the project's error first, partitionBy(...) explained
    for key, value in SESSION_CONF.items():
        try:
            spark.conf.set(key, value)
        except Exception as e:
            if "planCache" not in key:
                raise ConfigError(f"connect_plugin.install: cannot set {key}={value}: {e}") from e
    try:
        from executor_lib.spark.datasource import DATA_SOURCES
    except ImportError:  # thin client: the cluster's static registration provides it
        return
    for source, module in zip(DATA_SOURCES, STATIC_MODULES, strict=True):
        if importlib.util.find_spec(module) is None:  # else Spark registered it statically from this environment
            spark.dataSource.register(source)


# Table names: ``spark.indextables.table.<name>`` = the table's path, set per session
# (``register_table``, ``SET``) or for every session in the cluster's spark-defaults.conf.
# Spark 4.3's catalog cannot hold a Python data source table (``CREATE TABLE ... USING
# indextables LOCATION ...`` keeps neither the location nor the options), hence this registry.


def register_table(spark: SparkSession, name: str, path: str) -> None:
    """Name the table at ``path`` for this session (the setting ``spark.indextables.table.<name>``), so
    that statements and ``IndexTable.for_name`` can use the name.

    Args:
        spark: the session.
        name: the table's name in statements (``SELECT ... FROM logs``).
        path: the table's root.

    Example: ``register_table(spark, "logs", "s3://b/logs"); sql(spark, "SELECT count(*) FROM logs")``
    """
    spark.conf.set(TABLE_NAME_PREFIX + name, path)


def resolve_table(spark: SparkSession, name: str) -> str:
    """The path a table name stands for.

    Raises:
        UnknownTableError: no ``spark.indextables.table.<name>`` setting defines it (the message names it).

    Example: ``resolve_table(spark, "logs") == "s3://b/logs"`` after ``register_table``.
    """
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


def read(
    spark: SparkSession,
    path: str,
    *,
    columns: Iterable[str] | None = None,
    limit: int | None = None,
    filter: Where | None = None,
    version_as_of: int | None = None,
    timestamp_as_of: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> DataFrame:
    """A fresh DataFrame over the table at ``path``.

    ``columns``, ``limit`` and ``filter`` are pushed to the executors; the result equals reading
    everything and applying them in Spark.

    Args:
        spark: a classic or Spark Connect session.
        path: the table's root (``s3://bucket/t``, ``/data/t``).
        columns: the columns to read (default: all).
        limit: at most this many rows.
        filter: a row condition: filter tree nodes (``indextables_contract.filters``, which may mix
            Tantivy queries with comparisons under And/Or/Not), their JSON form, or SQL predicate text.
        version_as_of / timestamp_as_of: time travel to a version or a point in time.
        options: data source options (storage settings...), over the session's ``spark.indextables.*``.

    Raises:
        FilterError / IndexTablesSQLError: a malformed filter (on the client, before anything runs).

    Example: ``read(spark, "s3://b/logs", columns=["ts", "msg"], filter=F.QueryString("timeout", "msg"))``
    """
    from connect_plugin.plan import TableRead, options_tuple
    from indextables_contract.read import ReadPlan

    extra = dict(options or {})
    if version_as_of is not None:
        extra["versionAsOf"] = str(version_as_of)
    if timestamp_as_of is not None:
        extra["timestampAsOf"] = str(timestamp_as_of)
    plan = ReadPlan(
        columns=None if columns is None else tuple(columns),
        filter=None if filter is None else to_filter(filter),
        limit=limit,
    )
    read = TableRead(path, plan, options_tuple(extra))
    with project_error_first(spelling=extra):  # a bad option, column or query fails here, in the project's terms
        df = read.dataframe(spark)
        if type(spark).__module__.startswith("pyspark.sql.connect"):
            df.columns  # noqa: B018  Spark Connect analyses lazily: here (one round trip, ~50 ms), not at collect
        return df


def read_stream(
    spark: SparkSession,
    path: str,
    *,
    starting_version: int | str | None = None,
    max_files_per_trigger: int | None = None,
    ignore_deletes: bool = False,
    ignore_changes: bool = False,
    options: Mapping[str, Any] | None = None,
) -> DataFrame:
    """A streaming DataFrame of the rows appended to the table at ``path``: first every live row (unless
    ``starting_version``: a version or ``"latest"``), then the splits each new version adds with
    ``dataChange=true`` (merges are not re-emitted).

    Args:
        spark: the session.
        path: the table's root.
        starting_version: the first version to emit, or ``"latest"`` (only what comes next).
        max_files_per_trigger: at most this many splits per micro-batch.
        ignore_deletes / ignore_changes: go on past versions that removed data (overwrite, drop
            partitions) instead of failing on them (Delta's options).
        options: data source options over the session's ``spark.indextables.*``.

    Raises:
        StreamingReadError (when the query runs): a version that removed data, without the options above.

    Example: ``read_stream(spark, "s3://b/logs", starting_version="latest").writeStream.format("console").start()``
    """
    opts = merged_options(spark, options)
    if starting_version is not None:
        opts["startingVersion"] = str(starting_version)
    if max_files_per_trigger is not None:
        opts["maxFilesPerTrigger"] = str(max_files_per_trigger)
    if ignore_deletes:
        opts["ignoreDeletes"] = "true"
    if ignore_changes:
        opts["ignoreChanges"] = "true"
    return spark.readStream.format(FORMAT).options(**opts).load(path)
