"""Helpers the Spark glue shares: opening a table's log and a pinned snapshot from data source options,
typing filter values by the table's schema, the node's split cache, partition constants, quiet deletes."""

from __future__ import annotations

import contextlib
import datetime
import logging
import math
import zoneinfo
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.spark import options as O
from executor_lib.table_schema import resolve_column
from indextables_contract import filters as F
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError, StorageError, VersionNotFoundError

if TYPE_CHECKING:
    from executor_lib.storage.base import ObjectStore

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
    """The snapshot a read plans on (``versionAsOf``/``timestampAsOf``, else the latest), refreshed
    from the process's snapshot cache (``executor_lib.log.tables.read_snapshot``)."""
    lower = {k.lower(): v for k, v in raw_options.items()}
    opts = {k: v for k, v in raw_options.items() if k.lower() not in ("versionasof", "timestampasof")}
    version = O.parse_version(lower["versionasof"]) if "versionasof" in lower else None
    timestamp = O.parse_timestamp_ms(lower["timestampasof"]) if "timestampasof" in lower else None
    if version is not None and timestamp is not None:
        raise ConfigError("read: give versionAsOf or timestampAsOf, not both")
    known = {k.lower(): k for k in O.READ_KEYS}
    storage = {known.get(k.lower(), k): v for k, v in opts.items()}
    from executor_lib.log.tables import read_snapshot

    try:
        return read_snapshot(path, version, timestamp, **O.storage_and_log_options(storage))
    except VersionNotFoundError as e:
        if timestamp is None:
            raise
        said = e.message  # in the user's words first: the text they gave
        raise VersionNotFoundError(f"timestampAsOf {str(lower['timestampasof']).strip()!r}: {said}") from None


def typed_filter(f: F.Filter, schema: pa.Schema, time_zone: str | None = None) -> F.Filter:
    """Column names resolved as Spark resolves them (``table_schema.resolve_column``: case, nested
    fields, a table alias) and comparison values converted to the column's type (ISO strings for
    dates/timestamps from JSON).
    A timestamp string without a zone offset (``'2024-05-01 12:00:00'``, ``'2024-05-01'``) is a wall
    time in ``time_zone`` (the session's ``spark.sql.session.timeZone``, as Spark reads it; UTC if unknown)."""

    f = F.map_columns(f, lambda name: resolve_column(name, schema))
    f = _dates_against_timestamps(f, schema, time_zone or "UTC")

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

    return comparable_numbers(F.map_values(f, convert), schema)


def _dates_against_timestamps(f: F.Filter, schema: pa.Schema, time_zone: str) -> F.Filter:
    """A date column compared with a timestamp literal (``d > '2024-01-01 10:00'``), as Spark compares
    them: the date as midnight of that day in the session's zone. So ``d > '2024-01-01 10:00'`` is
    ``d >= 2024-01-02``, and ``d = '2024-01-01 10:00'`` holds for no row."""
    return _map_comparisons(f, schema, lambda c, t: _date_comparison(c, time_zone) if pa.types.is_date(t) else c)


def _map_comparisons(f: F.Filter, schema: pa.Schema, change: Any) -> F.Filter:
    """``f`` with each comparison (Term, TermIn, Between) on a top-level column replaced by
    ``change(comparison, column type)``."""
    if isinstance(f, (F.And, F.Or)):
        return type(f)(tuple(_map_comparisons(c, schema, change) for c in f.children))
    if isinstance(f, F.Not):
        return F.Not(_map_comparisons(f.child, schema, change))
    if not isinstance(f, (F.Term, F.TermIn, F.Between)) or f.column not in schema.names:
        return f
    return change(f, schema.field(f.column).type)


def _date_comparison(f: F.Term | F.TermIn | F.Between, time_zone: str) -> F.Filter:
    if isinstance(f, F.Term):
        wall = _wall_time(f.value, time_zone)
        if wall is None:
            return f
        return F.Term(f.column, wall.date()) if wall.time() == datetime.time() else _never(f.column)
    if isinstance(f, F.TermIn):
        walls = [(v, _wall_time(v, time_zone)) for v in f.values]
        return F.TermIn(
            f.column, tuple(v if w is None else w.date() for v, w in walls if w is None or w.time() == datetime.time())
        )
    lower, lower_inclusive, upper, upper_inclusive = f.lower, f.lower_inclusive, f.upper, f.upper_inclusive
    wall = _wall_time(lower, time_zone)
    if wall is not None:
        midnight = wall.time() == datetime.time()
        lower = wall.date() if midnight else wall.date() + datetime.timedelta(days=1)
        lower_inclusive = lower_inclusive if midnight else True
    wall = _wall_time(upper, time_zone)
    if wall is not None:
        upper, upper_inclusive = wall.date(), upper_inclusive if wall.time() == datetime.time() else True
    return F.Between(f.column, lower, upper, lower_inclusive, upper_inclusive)


def _wall_time(value: Any, time_zone: str) -> datetime.datetime | None:
    """A timestamp literal (a string with a time, or a datetime) as a wall time in ``time_zone``; None
    for anything else (a date, a date string: compared as dates)."""
    if isinstance(value, str):
        text = value.strip()
        if len(text) <= 10:
            return None  # '2024-01-01': a date
        try:
            value = datetime.datetime.fromisoformat(text.replace(" ", "T", 1).replace("Z", "+00:00"))
        except ValueError:
            return None  # typed_filter names it
    if not isinstance(value, datetime.datetime):
        return None
    if value.tzinfo is not None:
        value = value.astimezone(zoneinfo.ZoneInfo(time_zone)).replace(tzinfo=None)
    return value


NEVER_COLUMN_VALUE: tuple[Any, ...] = ()  # TermIn(column, ()) holds for no row (NOT of it: every non-null row)


def comparable_numbers(f: F.Filter, schema: pa.Schema) -> F.Filter:
    """Numeric literals put in terms of the column they compare with, as Spark compares them.

    Spark compares an integer column with ``1.5`` or ``0.5`` by value (``x > 0.5`` is ``x >= 1``;
    ``x = 1.5`` holds for no row), a decimal column with ``0`` as ``0.00``. Here, on an integer
    column a fractional, infinite or NaN literal becomes the integer range or empty set that keeps
    the same rows, so the index and the Arrow residual both get integers; on a float column a
    ``Decimal`` becomes a float. Decimal columns keep the literal: Arrow compares mixed numbers
    exactly (``residual_mask``).

    Example: ``comparable_numbers(F.gt("n", 0.5), schema)`` is ``F.Between("n", 1, None, True, True)``
    for an int64 column ``n``.
    """
    return _map_comparisons(f, schema, _number_comparison)


def _number_comparison(f: F.Term | F.TermIn | F.Between, t: pa.DataType) -> F.Filter:
    if pa.types.is_floating(t):
        return F.map_values(f, lambda _c, v: float(v) if isinstance(v, Decimal) else v)
    if not pa.types.is_integer(t):
        return f
    if isinstance(f, F.Term):
        whole = _whole(f.value)
        return f if whole is _NOT_A_NUMBER else (F.Term(f.column, whole) if whole is not None else _never(f.column))
    if isinstance(f, F.TermIn):
        values = [_whole(v) for v in f.values]
        if any(v is _NOT_A_NUMBER for v in values):
            return f
        return F.TermIn(f.column, tuple(v for v in values if v is not None))
    return _integer_range(f, t)


_NOT_A_NUMBER = object()


def _never(column: str) -> F.Filter:
    return F.TermIn(column, NEVER_COLUMN_VALUE)


def _whole(value: Any) -> Any:
    """An integral literal as an int; None when no integer equals it; _NOT_A_NUMBER for other values."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return _NOT_A_NUMBER
    if isinstance(value, int):
        return value
    if not math.isfinite(value):
        return None
    return int(value) if value == int(value) else None


def _integer_range(f: F.Between, t: pa.DataType) -> F.Filter:
    lowest, highest = _integer_bounds(t)
    lower, lower_inclusive = f.lower, f.lower_inclusive
    upper, upper_inclusive = f.upper, f.upper_inclusive
    if lower is not None and _whole(lower) is not _NOT_A_NUMBER:
        if isinstance(lower, (float, Decimal)) and math.isnan(lower):
            return _never(f.column)  # Spark: NaN is above every number
        if lower in (float("-inf"),) or (math.isfinite(lower) and lower < lowest):
            lower = None
        elif not math.isfinite(lower) or lower > highest:
            return _never(f.column)
        else:
            whole = math.ceil(lower)
            lower, lower_inclusive = (whole, lower_inclusive) if whole == lower else (whole, True)
    if upper is not None and _whole(upper) is not _NOT_A_NUMBER:
        if isinstance(upper, (float, Decimal)) and math.isnan(upper):
            upper = None  # every number is below NaN
        elif upper == float("-inf") or (math.isfinite(upper) and upper < lowest):
            return _never(f.column)
        elif not math.isfinite(upper) or upper > highest:
            upper = None
        else:
            whole = math.floor(upper)
            upper, upper_inclusive = (whole, upper_inclusive) if whole == upper else (whole, True)
    if lower is None and upper is None:
        return F.Exists(f.column)
    return F.Between(f.column, lower, upper, lower_inclusive, upper_inclusive)


def _integer_bounds(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    if pa.types.is_unsigned_integer(t):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


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
    from executor_lib.cache.split_cache import (
        SplitCache,
        default_cache,
        fetch_by_piece,
        keep_unpacked,
        read_in_place,
    )

    by_piece = fetch_by_piece(S.CACHE_FETCH.get(options))
    unpacked = keep_unpacked(S.CACHE_UNPACKED_STORES.get(options))
    in_place = read_in_place(S.CACHE_LOCAL_SPLITS.get(options))
    directory = S.CACHE_DIRECTORY_PATH.get(options)
    if not directory:
        cache = default_cache()
        cache.by_piece, cache.keep_unpacked, cache.in_place = by_piece, unpacked, in_place
        return cache
    size = S.CACHE_MAX_SIZE.raw(options)
    max_bytes = S.CACHE_MAX_SIZE.parse_value(size) if size else S.CACHE_MAX_SIZE.value
    return SplitCache(Path(directory), max_bytes, by_piece=by_piece, keep_unpacked=unpacked, in_place=in_place)


def delete_uncommitted(path: str, options: Mapping[str, str], keys: list[str], after_version: int) -> list[str]:
    """Delete the files of ``keys`` (a job's uploads) that no version after ``after_version`` (the
    version the job read; -1: none) names; the keys deleted. Called when a commit failed or Spark
    aborts the job, which it also does when the worker running the commit died after the version
    landed: what a committed version names is never deleted. When the log cannot be read nothing is
    deleted (PURGE collects the orphans later).

    Example: ``delete_uncommitted(table, options, [a.path for a in adds], self.read_version)``.
    """
    from executor_lib.storage import open_store
    from indextables_contract.errors import IndexTablesError, TableNotFoundError

    if not keys:
        return []
    try:
        txlog = open_table_log(path, options)
    except TableNotFoundError:  # no table: nothing was committed
        doomed = list(keys)
        delete_quietly(open_store(path, **O.storage_and_log_options(options)), doomed)
        return doomed
    except IndexTablesError as e:
        log.warning(
            "%s: %d uploaded splits kept (the log cannot be opened to tell if they were committed): %s",
            path,
            len(keys),
            e,
        )
        return []
    return delete_uncommitted_in(txlog, keys, after_version)


def delete_uncommitted_in(txlog: Any, keys: list[str], after_version: int) -> list[str]:
    """``delete_uncommitted`` on an open ``TransactionLog``."""
    from executor_lib.log.commit.uncommitted import committed_among
    from indextables_contract.errors import IndexTablesError

    if not keys:
        return []
    try:
        committed = committed_among(txlog, keys, after_version)
    except IndexTablesError as e:
        log.warning(
            "%s: %d uploaded splits kept (the log could not be read to tell if they were committed): %s",
            txlog.uri,
            len(keys),
            e,
        )
        return []
    if committed:
        log.warning(
            "%s: %d uploaded splits kept: a committed version names them (its commit landed before the job failed)",
            txlog.uri,
            len(committed),
        )
    doomed = [k for k in keys if k not in committed]
    delete_quietly(txlog.store, doomed)
    return doomed


def delete_quietly(store: ObjectStore, keys: list[str]) -> None:
    """Best effort: an upload this job made and never committed (purge collects what is left).
    Only for files no version can name; a job's uploads go through ``delete_uncommitted``."""
    for key in keys:
        try:
            store.delete(key)
        except StorageError as e:
            log.warning("could not delete uncommitted split %s: %s", key, e)


# The data-skipping counts of scan planning, in the driver node's split-cache directory (see
# ``executor_lib.node_counters``): DESCRIBE / FLUSH INDEXTABLES DATA SKIPPING STATS read them there.
DATA_SKIPPING_FILE = "data_skipping.json"


def data_skipping_file(options: Mapping[str, str]) -> Path:
    """Where this node keeps its scans' data-skipping counts."""
    return Path(node_split_cache(options).directory) / DATA_SKIPPING_FILE


def planning_counters_dir(options: Mapping[str, str]) -> Path | None:
    """This node's split-cache directory for scan planning's counters (data skipping, the profiler's
    ``plan_*``), or None (logged) when the directory cannot be used: counting never fails a read."""
    try:
        return data_skipping_file(options).parent
    except (ConfigError, OSError) as e:
        log.warning("data-skipping statistics are not recorded on this node: %s", e)
        return None


@contextlib.contextmanager
def profiled_task(directory: Path) -> Iterator[None]:
    """Run a task's work with the read-path profiler switched as the node's flag says, its counts
    added to the node's counters when the work ends (``executor_lib.profiler``)."""
    from executor_lib import profiler

    if not profiler.sync(directory):
        yield
        return
    try:
        yield
    finally:
        profiler.flush(directory)
