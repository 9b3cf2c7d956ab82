"""Helpers the Spark glue shares: opening a table's log and a pinned snapshot from data source options,
typing filter values by the table's schema, the node's split cache, partition constants, quiet deletes."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.spark import options as O
from indextables_contract import filters as F
from indextables_contract.errors import ConfigError, StorageError

log = logging.getLogger(__name__)


def open_table_log(path: str, options: Mapping[str, str]) -> Any:
    from executor_lib import open_log

    return open_log(path, **O.storage_and_log_options(options))


def parsed_option(options: Mapping[str, str], key: str, parse: Any, default: Any = None) -> Any:
    return parse(key, options[key]) if key in options else default


def require_path(options: Mapping[str, Any], what: str) -> str:
    path = options.get("path")
    if not path:
        raise ConfigError(f"{what}: no table path (use .load(path) / .save(path))")
    return str(path)


def pinned_snapshot(path: str, raw_options: Mapping[str, str]) -> Any:
    lower = {k.lower(): v for k, v in raw_options.items()}
    opts = {k: v for k, v in raw_options.items() if k.lower() not in ("versionasof", "timestampasof")}
    version = O.parse_version(lower["versionasof"]) if "versionasof" in lower else None
    timestamp = O.parse_timestamp_ms(lower["timestampasof"]) if "timestampasof" in lower else None
    if version is not None and timestamp is not None:
        raise ConfigError("read: give versionAsOf or timestampAsOf, not both")
    known = {k.lower(): k for k in O.READ_KEYS}
    storage = {known.get(k.lower(), k): v for k, v in opts.items()}
    return open_table_log(path, storage).snapshot(version=version, timestamp_ms=timestamp)


def typed_filter(f: F.Filter, schema: pa.Schema, time_zone: str | None = None) -> F.Filter:
    """Comparison values converted to the column's type (ISO strings for dates/timestamps from JSON).
    A timestamp string without a zone offset (``'2024-05-01 12:00:00'``, ``'2024-05-01'``) is a wall
    time in ``time_zone`` (the session's ``spark.sql.session.timeZone``, as Spark reads it; UTC if unknown)."""

    def convert(column: str, value: Any) -> Any:
        if column not in schema.names:
            return value
        t = schema.field(column).type
        if isinstance(value, str) and (pa.types.is_temporal(t)):
            try:
                return _temporal_scalar(value, t, time_zone or "UTC").as_py()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
                raise ConfigError(f"filter on {column!r}: {value!r} is not a valid {t}") from e
        return value

    return F.map_values(f, convert)


def _temporal_scalar(value: str, t: pa.DataType, time_zone: str) -> pa.Scalar:
    try:
        return pa.scalar(value).cast(t)
    except pa.ArrowInvalid:
        if not (pa.types.is_timestamp(t) and t.tz is not None):
            raise
    wall = pa.array([value]).cast(pa.timestamp(t.unit))  # no offset: a wall time in the session's zone
    return pc.assume_timezone(wall, time_zone)[0].cast(t)


def partition_constants(
    values: Mapping[str, str | None], partition_columns: Sequence[str], schema: pa.Schema
) -> dict[str, pa.Scalar]:
    out = {}
    for column in partition_columns:
        t = schema.field(column).type
        raw = values.get(column)
        out[column] = pa.scalar(None, t) if raw is None else pa.array([raw]).cast(t)[0]
    return out


def node_split_cache(options: Mapping[str, str]) -> Any:
    from executor_lib.cache.split_cache import SplitCache, default_cache

    directory = options.get("spark.indextables.cache.directoryPath")
    if not directory:
        return default_cache()
    size = options.get("spark.indextables.cache.maxSize")
    max_bytes = O.parse_size("spark.indextables.cache.maxSize", size) if size else 10 << 30
    return SplitCache(Path(directory), max_bytes)


def delete_quietly(store: Any, keys: list[str]) -> None:
    """Best effort: an upload this job made and never committed (purge collects what is left)."""
    for key in keys:
        try:
            store.delete(key)
        except StorageError as e:
            log.warning("could not delete uncommitted split %s: %s", key, e)
