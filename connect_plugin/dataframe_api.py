"""``df.write.format("indextables")...save()`` and ``spark.read.format("indextables")...load()`` with
the project's error first (``connect_plugin.install`` hooks them in): ``DataFrameWriter.save`` and
``DataFrameReader.load`` of classic and Spark Connect sessions, wrapped so that

- an exception whose text reports an IndexTables error is raised as that error, its ``[INDEXTABLES_*]``
  line first (``connect_plugin.failures.project_error_first``: as ``connect_plugin.write`` does), not
  Spark's ``[PYTHON_DATA_SOURCE_ERROR] Failed to ...`` with the worker's traceback in its message;
- ``DataFrameWriter.partitionBy(...)`` into IndexTables, which Spark refuses for every Python data
  source before the source is called, with a message that blames the table ("The provided partitioning
  or clustering columns do not match the existing table's", on a new path too), is a ``ConfigError``
  naming what does it: the ``partitionBy`` option, or ``connect_plugin.write(partition_by=...)``.

``spark.sql(text)`` is hooked too: a statement Spark refuses that only ``connect_plugin.sql`` understands
(``indexquery``..., an IndexTables command) is an ``IndexTablesSQLError`` pointing at ``connect_plugin.sql``.

Other formats and other errors are left as they are, and so are the errors of a DataFrame's actions
(``collect``, ``show``...): their text holds the ``[INDEXTABLES_*]`` line (docs/log-and-splits.md).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from connect_plugin.failures import project_error_first
from connect_plugin.query_warnings import warn_for_options
from connect_plugin.write_warnings import warn_for_write
from indextables_contract import FORMAT
from indextables_contract.errors import ConfigError, IndexTablesError, IndexTablesSQLError

# Spark's check of DataFrameWriter.partitionBy against a V2 table's partitioning (a Python data source
# reports none): DataFrameWriter.checkPartitioningMatchesV2Table.
SPARK_PARTITIONING_MISMATCH = "provided partitioning or clustering columns do not match the existing table"
_HOOKED = "_indextables_hooked"


# The format names hooked (lower-case): "indextables", and IndexTables4Spark's that hook_writers is given.
_FORMATS: set[str] = {FORMAT.lower()}


def _formats() -> set[str]:
    return _FORMATS


def _source(writer: Any) -> str | None:
    """The format a writer or reader was given: Spark Connect keeps it on the object, a classic one only
    in the JVM (``format`` is wrapped to remember it)."""
    plan = getattr(writer, "_write", None)
    found = getattr(plan, "source", None) if plan is not None else getattr(writer, "_format", None)
    return found or getattr(writer, "_indextables_source", None)


def _partitioning_refused(writer: Any, e: Exception, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ConfigError:
    given = kwargs.get("partitionBy") or (args[3] if len(args) > 3 else None)  # save(path, format, mode, partitionBy)
    columns = given or _partition_columns(writer) or []
    if isinstance(columns, str):
        columns = [columns]
    shown = ",".join(columns) if columns else "<col1>,<col2>"
    return ConfigError(
        "DataFrameWriter.partitionBy(...) cannot reach IndexTables: Spark refuses it for every Python data "
        f'source before the source is called; give the partition columns as the option: .option("partitionBy", '
        f'"{shown}") (or connect_plugin.write(df, path, partition_by=[...])); Spark said: '
        + str(e).strip().split("\n")[0][:200]
    )


def _partition_columns(writer: Any) -> list[str] | None:
    plan = getattr(writer, "_write", None)
    found = getattr(plan, "partitioning_cols", None) if plan is not None else None
    return list(found) if found else getattr(writer, "_indextables_partition_by", None)


def _for_indextables(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a ``save``/``load`` call (its ``format`` argument, else the writer's or reader's) is one
    of the indextables formats."""
    source = kwargs.get("format") or (args[1] if len(args) > 1 else None) or _source(self)
    return str(source or "").lower() in _formats()


def _wrap_save(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def save(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _for_indextables(self, args, kwargs):
            return original(self, *args, **kwargs)
        warn_for_write(_option_values(self, kwargs))  # a tokenizer IndexTables4Spark does not know (de_stem ...)
        try:
            with project_error_first(_option_names(self, kwargs)):
                return original(self, *args, **kwargs)
        except IndexTablesError:
            raise
        except Exception as e:
            if SPARK_PARTITIONING_MISMATCH in str(e):
                raise _partitioning_refused(self, e, args, kwargs) from None
            raise

    setattr(save, _HOOKED, True)
    return save


def _wrap_load(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def load(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not _for_indextables(self, args, kwargs):
            return original(self, *args, **kwargs)
        names = _option_names(self, kwargs)
        with project_error_first(names):
            df = original(self, *args, **kwargs)
            warn_for_options(names, df)  # an indexquery word against an exact-string column (its analysis)
        return df

    setattr(load, _HOOKED, True)
    return load


def _option_names(obj: Any, kwargs: dict[str, Any]) -> list[str]:
    """The option names as the user wrote them (Spark lower-cases them before the data source sees them):
    a Spark Connect writer keeps them on its plan, a reader in ``_options``; a classic one only in the JVM
    (``option`` and ``options`` are wrapped to remember them)."""
    plan = getattr(obj, "_write", None)
    kept = getattr(plan, "options", None) if plan is not None else getattr(obj, "_options", None)
    names = list(kept) if isinstance(kept, dict) else []
    return [*names, *getattr(obj, "_indextables_options", ()), *kwargs]


def _option_values(obj: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The options with their values, as ``_option_names`` finds them (a classic writer's as remembered)."""
    plan = getattr(obj, "_write", None)
    kept = getattr(plan, "options", None) if plan is not None else None
    return {**(kept if isinstance(kept, dict) else {}), **getattr(obj, "_indextables_values", {}), **kwargs}


def _wrap_option(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def option(self: Any, key: str, value: Any) -> Any:
        self._indextables_options = [*getattr(self, "_indextables_options", ()), str(key)]
        self._indextables_values = {**getattr(self, "_indextables_values", {}), str(key): value}
        return original(self, key, value)

    return option


def _wrap_options(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def options(self: Any, **given: Any) -> Any:
        self._indextables_options = [*getattr(self, "_indextables_options", ()), *given]
        self._indextables_values = {**getattr(self, "_indextables_values", {}), **given}
        return original(self, **given)

    return options


def _wrap_format(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def format(self: Any, source: str) -> Any:
        self._indextables_source = source
        return original(self, source)

    return format


def _wrap_partition_by(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def partitionBy(self: Any, *cols: Any) -> Any:
        names = cols[0] if len(cols) == 1 and isinstance(cols[0], list | tuple) else cols
        self._indextables_partition_by = [str(c) for c in names]
        return original(self, *cols)

    return partitionBy


def _wrap_sql(original: Callable[..., Any]) -> Callable[..., Any]:
    """``spark.sql(text)`` that Spark refuses, for a statement only ``connect_plugin.sql`` understands (an
    index operator such as ``indexquery``, an IndexTables command): an ``IndexTablesSQLError`` saying so
    (issue 76). Statements Spark runs, and Spark's other errors, are left as they are."""

    @functools.wraps(original)
    def sql(self: Any, sqlQuery: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, sqlQuery, *args, **kwargs)
        except Exception as e:
            from connect_plugin.grammar import COMMAND_START, INDEX_OPERATOR_USE  # as connect_plugin.sql tells
            from connect_plugin.lexer import lex

            if isinstance(e, IndexTablesError) or not isinstance(sqlQuery, str):
                raise
            code = lex(sqlQuery)[1]  # outside string literals, comments and back-quoted names
            if not (COMMAND_START.match(code) or INDEX_OPERATOR_USE.search(code)):
                raise
            spark_said = str(e).strip().split("\n")[0][:200]
            raise IndexTablesSQLError(
                "spark.sql does not know IndexTables' SQL (indexquery, textsearch, fieldmatch, fuzzyquery, "
                "indexqueryall, MERGE SPLITS, DESCRIBE INDEXTABLES ...): run it with connect_plugin.sql(spark, "
                f"text), which hands every other statement to spark.sql; Spark said: {spark_said}"
            ) from None

    setattr(sql, _HOOKED, True)
    return sql


def hook_writers(formats: Iterable[str] = ()) -> None:
    """Wrap ``DataFrameWriter.save`` and ``DataFrameReader.load`` (and ``format``, ``option``, ``options``
    and a writer's ``partitionBy``: a classic one keeps their values only in the JVM) of both session
    kinds, once per process. ``formats``: more format names than ``indextables`` to answer for."""
    import importlib

    _FORMATS.update(f.lower() for f in formats)

    for module in ("pyspark.sql.session", "pyspark.sql.connect.session"):
        try:
            session = importlib.import_module(module).SparkSession
        except ImportError:  # Spark Connect's client dependencies (grpc, ...) not installed
            continue
        if not getattr(session.sql, _HOOKED, False):
            session.sql = _wrap_sql(session.sql)

    for module in ("pyspark.sql.readwriter", "pyspark.sql.connect.readwriter"):
        try:
            found = importlib.import_module(module)
        except ImportError:  # Spark Connect's client dependencies (grpc, ...) not installed
            continue
        writer, reader = found.DataFrameWriter, found.DataFrameReader
        for cls, method, wrap in ((writer, "save", _wrap_save), (reader, "load", _wrap_load)):
            if getattr(getattr(cls, method), _HOOKED, False):
                continue
            cls.format = _wrap_format(cls.format)
            cls.option = _wrap_option(cls.option)
            cls.options = _wrap_options(cls.options)
            if cls is writer:
                cls.partitionBy = _wrap_partition_by(cls.partitionBy)
            setattr(cls, method, wrap(getattr(cls, method)))  # last: it marks the class as hooked
