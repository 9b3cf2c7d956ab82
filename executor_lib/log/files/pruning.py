"""Data skipping: which files (or manifests) may hold rows matching simple predicates.

Predicates are a conjunction of filters (``indextables_contract.filters``: ``Term``, ``TermIn``,
``Between``...) on partition columns (compared with the file's ``partitionValues``) or data
columns (compared with its ``minValues``/``maxValues`` statistics). ``And``/``Or`` combine,
``Prefix`` is judged as a range; ``Not``, query strings, regexes, ``Contains`` and ``Exists``
never skip a file. Values are compared by the column's Spark type:
numbers as numbers (so partition ``10`` sorts after ``9``), everything else as strings.
A file is skipped only when its values *cannot* match: missing statistics, unparsable
values and unknown columns always keep the file. Statistics of strings are truncated
(``stats.truncation.maxLength``, 32 characters), so a stored maximum of that length
is treated as a prefix: the real maximum may be longer.
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.arrow_arrays import map_values
from executor_lib.log.files.live_files import LiveFiles
from executor_lib.protocol.actions import AddAction
from indextables_contract import filters
from indextables_contract.errors import ConfigError, CorruptLogError

STATS_TRUNCATION_LENGTH = 32
_NUMERIC_TYPES = {"byte", "short", "integer", "long", "float", "double"}


def column_types(schema_string: str) -> dict[str, str]:
    """Top-level column name -> Spark type name (``"struct"`` etc. for nested types); CorruptLogError
    if the table's schema string is not a Spark schema."""
    try:
        fields = json.loads(schema_string)["fields"]
        return {f["name"]: f["type"] if isinstance(f["type"], str) else f["type"]["type"] for f in fields}
    except (ValueError, KeyError, TypeError) as e:  # JSONDecodeError is a ValueError
        raise CorruptLogError(f"the table's schema is not a Spark schema ({type(e).__name__}: {e})") from e


class _Comparator:
    """Turns stored strings and predicate values into comparable keys for one column type."""

    def __init__(self, spark_type: str | None) -> None:
        self.numeric = spark_type in _NUMERIC_TYPES or (spark_type or "").startswith("decimal")
        # A float column may hold NaN, which Spark orders above every number but which statistics
        # leave out of a split's maximum (IndexTables4Spark's, and older splits of this project's): a
        # maximum never bounds it.
        self.may_hold_nan = spark_type in ("float", "double")
        self.timestamp = spark_type in ("timestamp", "timestamp_ntz")

    def key(self, value: Any) -> Any:
        """A comparable key, or None when the value cannot be interpreted (then nothing is skipped)."""
        if value is None:
            return None
        if self.timestamp:
            return timestamp_key(value)
        if self.numeric:
            if isinstance(value, bool):
                return None
            try:
                number = float(value)
            except (TypeError, ValueError):
                return None
            return None if math.isnan(number) else number
        return value if isinstance(value, str) else str(value)


def timestamp_key(value: Any) -> int | None:
    """A timestamp statistic or value as microseconds since the epoch: IndexTables4Spark's statistics
    (a Long's text), this project's before it wrote those (ISO text), a ``datetime`` (naive: UTC);
    None for anything else."""
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return int(text)
        try:
            value = datetime.datetime.fromisoformat(text)
        except ValueError:
            return None
    if not isinstance(value, datetime.datetime):
        return None
    aware = value if value.tzinfo is not None else value.replace(tzinfo=datetime.timezone.utc)
    delta = aware - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _check_predicates(predicates: Sequence[filters.Filter], types: Mapping[str, str]) -> None:
    for p in predicates:
        if isinstance(p, (filters.And, filters.Or)):
            _check_predicates(p.children, types)
        elif isinstance(p, filters.Not):
            _check_predicates((p.child,), types)
        elif not isinstance(p, _LEAVES):
            raise ConfigError(f"unsupported predicate {p!r}: use the filters of indextables_contract.filters")
        elif getattr(p, "column", None) is not None and p.column not in types:
            raise ConfigError(f"predicate on unknown column {p.column!r} (columns: {sorted(types)})")


_LEAVES = (
    filters.Term,
    filters.TermIn,
    filters.Between,
    filters.Prefix,
    filters.Contains,
    filters.Regex,
    filters.Exists,
    filters.QueryString,
)


def _may_match(p: filters.Filter, judge: Any) -> bool:
    """Three-valued walk: ``judge(leaf)`` says whether a leaf may match; unknown kinds keep the file."""
    if isinstance(p, filters.And):
        return all(_may_match(c, judge) for c in p.children)
    if isinstance(p, filters.Or):
        return any(_may_match(c, judge) for c in p.children)
    if isinstance(p, (filters.Term, filters.TermIn, filters.Between, filters.Prefix)):
        return bool(judge(p))
    return True  # Not, query strings, regex, contains, exists: cannot be judged from bounds


def _interval_may_match(p: Any, low: Any, high: Any, cmp: _Comparator) -> bool:
    """May a value in [low, high] satisfy leaf ``p``? ``None`` bounds are unknown (unbounded)."""
    if cmp.may_hold_nan:
        high = None
    if isinstance(p, filters.Prefix):
        if cmp.numeric:
            return True
        return _range_overlaps(p.prefix, p.prefix + "\U0010ffff", True, True, low, high)
    if isinstance(p, filters.Term):
        return _range_overlaps(cmp.key(p.value), cmp.key(p.value), True, True, low, high)
    if isinstance(p, filters.TermIn):
        return any(_range_overlaps(cmp.key(v), cmp.key(v), True, True, low, high) for v in p.values)
    lower = cmp.key(p.lower) if p.lower is not None else None
    upper = cmp.key(p.upper) if p.upper is not None else None
    if (p.lower is not None and lower is None) or (p.upper is not None and upper is None):
        return True  # a bound we cannot interpret: keep the file
    return _range_overlaps(lower, upper, p.lower_inclusive, p.upper_inclusive, low, high)


def _range_overlaps(lower: Any, upper: Any, lower_inclusive: bool, upper_inclusive: bool, low: Any, high: Any) -> bool:
    try:
        if lower is not None and high is not None and (high < lower or (high == lower and not lower_inclusive)):
            return False
        if upper is not None and low is not None and (low > upper or (low == upper and not upper_inclusive)):
            return False
    except TypeError:
        return True
    return True


def _value_may_match(p: Any, value: Any, cmp: _Comparator) -> bool:
    """Does one exact value (a partition value) satisfy ``p``?"""
    key = cmp.key(value)
    if value is None:
        return False  # a null partition value matches no comparison
    if key is None:
        return True
    return _interval_may_match(p, key, key, cmp)


def _stats_bounds(add: AddAction, column: str, cmp: _Comparator) -> tuple[Any, Any]:
    low = cmp.key((add.min_values or {}).get(column))
    raw_high = (add.max_values or {}).get(column)
    high = cmp.key(raw_high)
    if high is not None and not cmp.numeric and len(raw_high or "") >= STATS_TRUNCATION_LENGTH:
        high = high + "\U0010ffff"  # truncated: the real maximum may extend this prefix
    return low, high


def stats_bounds(add: AddAction, column: str, spark_type: str | None) -> tuple[Any, Any]:
    """The file's (minimum, maximum) of ``column`` as comparable keys (numbers for numeric types);
    None where a statistic is missing or unparsable."""
    return _stats_bounds(add, column, _Comparator(spark_type))


def file_may_match(
    add: AddAction, predicates: Sequence[filters.Filter], types: Mapping[str, str], partition_columns: Iterable[str]
) -> bool:
    """False only if ``add`` certainly holds no row matching all ``predicates``."""
    partition = set(partition_columns)

    def judge(p: Any) -> bool:
        cmp = _Comparator(types.get(p.column))
        if p.column in partition:
            return p.column not in add.partition_values or _value_may_match(p, add.partition_values[p.column], cmp)
        low, high = _stats_bounds(add, p.column, cmp)
        return _interval_may_match(p, low, high, cmp)

    return all(_may_match(p, judge) for p in predicates)


def bounds_may_match(
    bounds: Mapping[str, Mapping[str, str | None]] | None,
    predicates: Sequence[filters.Filter],
    types: Mapping[str, str],
) -> bool:
    """Manifest-level pruning: may a manifest with these partition bounds hold a match?

    Bounds are kept in string order (as IndexTables4Spark writes them), which is not numeric
    order: numeric columns are therefore never pruned at manifest level, only per file.
    """
    if not bounds:
        return True

    def judge(p: Any) -> bool:
        b = bounds.get(p.column)
        cmp = _Comparator(types.get(p.column))
        if b is None or cmp.numeric:
            return True
        return _interval_may_match(p, cmp.key(b.get("min")), cmp.key(b.get("max")), cmp)

    return all(_may_match(p, judge) for p in predicates)


def partition_judge(
    predicates: Sequence[filters.Filter], schema_string: str, partition_columns: Sequence[str]
) -> Callable[[Mapping[str, str]], bool]:
    """``keep(values)``: False only if no file with these partition values (column -> value; a
    column left out: no value or null) can match ``predicates``, whatever its statistics — a
    superset of ``prune_files``' answer, to be decided once per distinct partition."""
    types = column_types(schema_string)
    _check_predicates(predicates, types)
    partition = list(partition_columns)

    def keep(values: Mapping[str, str]) -> bool:
        stand_in = AddAction(path="", partition_values=values, size=0, modification_time=0, data_change=False)
        return file_may_match(stand_in, predicates, types, partition)

    return keep


def prune_files(
    files: Iterable[AddAction],
    predicates: Sequence[filters.Filter],
    schema_string: str,
    partition_columns: Iterable[str],
) -> list[AddAction]:
    """The files that may hold rows matching all ``predicates``."""
    types = column_types(schema_string)
    _check_predicates(predicates, types)
    partition = list(partition_columns)
    return [f for f in files if file_may_match(f, predicates, types, partition)]


def prune_scan(
    files: Iterable[AddAction],
    predicates: Sequence[filters.Filter],
    schema_string: str,
    partition_columns: Iterable[str],
) -> tuple[list[AddAction], dict[str, Any]]:
    """``prune_files`` for a scan, with its data-skipping counts (IndexTables4Spark's
    ``DataSkippingMetrics.recordScan``): files considered, pruned by partition values, skipped by
    min/max statistics, left to scan, and per filter kind how many of the skipped files a top-level
    conjunct rejects on its own (``filter_types``: ``Term``, ``Between``...). Partition pruning judges
    only the leaves on partition columns (the others count as "may match"); statistics then judge the
    files left.

    Example: ``files, counts = prune_scan(snapshot.files, [f.Term("date", "2024-01-01")], schema, ["date"])``
    """
    types = column_types(schema_string)
    _check_predicates(predicates, types)
    partition = list(partition_columns)
    considered = list(files)
    on_partitions = set(partition)
    by_partition = _partition_stage(predicates, types, on_partitions)
    kept = [f for f in considered if by_partition(f.partition_values)] if predicates and on_partitions else considered
    final = [f for f in kept if file_may_match(f, predicates, types, partition)] if predicates else kept
    filter_types: dict[str, int] = {}
    if len(final) < len(kept):
        survivors = {id(f) for f in final}
        conjuncts = [c for p in predicates for c in _conjuncts(p)]
        for add in kept:
            if id(add) not in survivors:
                for p in conjuncts:
                    if not file_may_match(add, [p], types, partition):
                        name = type(p).__name__
                        filter_types[name] = filter_types.get(name, 0) + 1
    counts = {
        "scans": 1,
        "total_files": len(considered),
        "partition_pruned_files": len(considered) - len(kept),
        "data_skipped_files": len(kept) - len(final),
        "final_files": len(final),
        "filter_types": filter_types,
    }
    return final, counts


def _partition_stage(
    predicates: Sequence[filters.Filter], types: Mapping[str, str], on_partitions: set[str]
) -> Callable[[Mapping[str, str | None]], bool]:
    """A scan's partition stage: ``keep(partition_values)`` judges only the leaves on partition columns
    (the others count as "may match"; statistics are the next stage's)."""

    def keep(values: Mapping[str, str | None]) -> bool:
        def judge(p: Any) -> bool:
            if p.column not in on_partitions:
                return True
            cmp = _Comparator(types.get(p.column))
            return p.column not in values or _value_may_match(p, values[p.column], cmp)

        return all(_may_match(p, judge) for p in predicates)

    return keep


def prune_snapshot(snapshot: Any, predicates: Sequence[filters.Filter]) -> tuple[list[AddAction], dict[str, Any]]:
    """``prune_scan`` over a snapshot's live files, where only the files of the partitions the
    predicates may match become objects (partition values judged once per distinct partition on the
    snapshot's columns, ``Snapshot.list_files``); the counts still cover every live file. On a state
    of ``COLUMNAR_STATS_FILES`` files or more, the comparisons on numeric columns are judged on the
    statistics' columns first (``stats_rejects``), so only the files they may match become objects
    (``filter_types`` then counts, for the files they skip, the numeric conjuncts that reject them).

    Example: ``files, counts = prune_snapshot(snapshot, [f.Term("date", "2024-01-01")])``
    """
    meta = snapshot.metadata
    judged = _columnar_conjuncts(predicates, column_types(meta.schema_string), meta.partition_columns)
    live = snapshot.state.files
    if judged and isinstance(live, LiveFiles) and snapshot.num_files >= COLUMNAR_STATS_FILES:
        return _prune_columnar(snapshot, live, predicates, judged)
    if not predicates or not meta.partition_columns:
        return prune_scan(snapshot.files, predicates, meta.schema_string, meta.partition_columns)
    total = snapshot.num_files
    selected = snapshot.list_partitions(predicates)
    files, counts = prune_scan(selected, predicates, meta.schema_string, meta.partition_columns)
    counts["total_files"] = total
    counts["partition_pruned_files"] += total - len(selected)
    return files, counts


# a statistic Arrow parses as a float (Python's float() takes more: "1_000", " 5"; those stay unknown here)
_NUMBER = r"^[+-]?((\d+\.?\d*|\.\d+)(e[+-]?\d+)?|inf|infinity|nan)$"
COLUMNAR_STATS_FILES = 10_000  # live files from which numeric statistics are judged column-wise first
Judged = list[tuple[filters.Term | filters.TermIn | filters.Between, _Comparator]]


def _columnar_conjuncts(
    predicates: Sequence[filters.Filter], types: Mapping[str, str], partition_columns: Iterable[str]
) -> Judged:
    """The top-level conjuncts ``stats_rejects`` judges: ``Term``, ``TermIn`` and ``Between`` on a
    numeric data column (a string's truncated maximum and a partition's values stay with the objects)."""
    if not predicates:
        return []
    _check_predicates(predicates, types)
    partition = set(partition_columns)
    out: Judged = []
    for conjunct in (c for top in predicates for c in _conjuncts(top)):
        if isinstance(conjunct, (filters.Term, filters.TermIn, filters.Between)) and conjunct.column not in partition:
            cmp = _Comparator(types.get(conjunct.column))
            if cmp.numeric:
                out.append((conjunct, cmp))
    return out


def stats_rejects(min_values: Any, max_values: Any, rows: int, judged: Judged) -> list[tuple[str, np.ndarray]]:
    """For each conjunct of ``judged`` (``_columnar_conjuncts``), its kind and the rows whose
    statistics (``min_values``/``max_values``: ``map<string, string>`` columns, or None) certainly hold
    no match: a subset of what ``file_may_match`` rejects — a statistic missing, or not a number as
    Arrow parses one, rejects nothing, nor does an equal bound (inclusive or not), nor a float column's
    maximum (NaN sorts above it).

    Example: ``stats_rejects(chunk.column("min_values"), chunk.column("max_values"), len(chunk), judged)``
    """
    bounds: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    out = []
    for p, cmp in judged:
        column = p.column
        if column not in bounds:
            high = np.full(rows, np.nan) if cmp.may_hold_nan else _stat_numbers(max_values, column, rows)
            bounds[column] = (_stat_numbers(min_values, column, rows), high)
        low, high = bounds[column]
        with np.errstate(invalid="ignore"):
            out.append((type(p).__name__, _rejected(p, cmp, low, high)))
    return out


def _rejected(p: Any, cmp: _Comparator, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The rows whose [low, high] (NaN: unknown) cannot hold a value ``p`` matches."""
    none = np.zeros(len(low), dtype=np.bool_)
    if isinstance(p, filters.Between):
        lower = cmp.key(p.lower) if p.lower is not None else None
        upper = cmp.key(p.upper) if p.upper is not None else None
        if (p.lower is not None and lower is None) or (p.upper is not None and upper is None):
            return none
        out = none.copy()
        if lower is not None:
            out |= high < lower
        if upper is not None:
            out |= low > upper
        return out
    values = [p.value] if isinstance(p, filters.Term) else list(p.values)
    keys = [cmp.key(v) for v in values]
    if any(k is None for k in keys):
        return none
    out = ~none  # TermIn of no value: rejects every file, as file_may_match does
    for k in keys:
        out &= (high < k) | (low > k)
    return out


def _stat_numbers(stats: Any, column: str, rows: int) -> np.ndarray:
    """Each row's statistic of ``column`` as a float (NaN: none, or not a number Arrow parses)."""
    if stats is None:
        return np.full(rows, np.nan)
    text = map_values(stats, column)
    number = pc.match_substring_regex(text, _NUMBER, ignore_case=True)  # others: null (unknown)
    try:
        numbers = pc.cast(pc.if_else(number, text, pa.scalar(None, pa.string())), pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # (a number out of Arrow's range)
        return np.full(rows, np.nan)
    return np.asarray(numbers.to_numpy(zero_copy_only=False), dtype=np.float64)


def _prune_columnar(
    snapshot: Any, live: LiveFiles, predicates: Sequence[filters.Filter], judged: Judged
) -> tuple[list[AddAction], dict[str, Any]]:
    """``prune_snapshot`` with the ``judged`` conjuncts judged on the chunks' statistics columns first."""
    meta = snapshot.metadata
    columns = list(meta.partition_columns)
    keep = _partition_stage(predicates, column_types(meta.schema_string), set(columns))

    def rejects(chunk: Any) -> list[tuple[str, np.ndarray]]:
        found = chunk.column_names
        lows = chunk.column("min_values") if "min_values" in found else None
        highs = chunk.column("max_values") if "max_values" in found else None
        return stats_rejects(lows, highs, len(chunk), judged)

    selected, accepted, rejected = live.select(keep, columns, rejects)
    files, counts = prune_scan(selected, predicates, meta.schema_string, columns)
    total = snapshot.num_files
    counts["total_files"] = total
    counts["partition_pruned_files"] = total - accepted
    counts["data_skipped_files"] = accepted - len(files)
    for kind, n in rejected.items():
        if n:
            counts["filter_types"][kind] = counts["filter_types"].get(kind, 0) + n
    return files, counts


def _conjuncts(p: filters.Filter) -> list[filters.Filter]:
    """The parts of a top-level AND (a predicate that is no AND: itself)."""
    if isinstance(p, filters.And):
        return [c for child in p.children for c in _conjuncts(child)]
    return [p]


@dataclass(frozen=True)
class FileListing:
    """The result of ``TransactionLog.list_files``: matching files and how much state was read."""

    version: int
    files: list[AddAction]
    manifests_total: int
    manifests_read: int


def file_listing(
    version: int, files: list[AddAction], manifests: Sequence[Any], schema_string: str, predicates: Sequence[Any]
) -> FileListing:
    """``TransactionLog.list_files`` of a snapshot loaded for ``predicates``: its ``files`` that may
    match, and how many of its ``manifests`` were read (those whose partition bounds may match)."""
    types = column_types(schema_string) if predicates else {}
    read = sum(1 for m in manifests if not predicates or bounds_may_match(m.partition_bounds, predicates, types))
    return FileListing(version, files, len(manifests), read)
