"""``format("indextables")``: the PySpark Python data source that reads and writes IndexTables.

Where each part runs (see ``shared/notes/pyspark-python-datasource.md``):

* ``IndexTablesDataSource.schema`` / ``reader`` / ``writer`` run in a Python process beside
  the driver, before any task: options, schemas, doc mappings, query strings and the table's
  protocol are checked there, so bad input fails the job before anything is written.
* ``IndexTablesReader.pushFilters`` / ``partitions`` plan the read on the driver side: one
  pinned snapshot, Spark's filters converted to the shared filter vocabulary, partitions and
  min/max statistics pruned, splits grouped into input partitions.
* ``IndexTablesReader.read`` and ``IndexTablesWriter.write`` run on executors: splits come
  through the node's split cache and are searched with Tantivy; written rows become splits
  uploaded to the table's storage.
* ``IndexTablesWriter.commit`` / ``abort`` run on the driver side: one version with all the
  adds (and, for overwrite, removes of every live file), or deletion of the uploaded splits.

Everything kept on the reader/writer objects is plain picklable data; stores and caches are
opened where they are used.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
    WriterCommitMessage,
)
from pyspark.sql.types import BooleanType, StructType

from executor_lib.protocol.actions import AddAction, removes_of
from executor_lib.spark import options as O
from indextables_contract import filters as F
from indextables_contract.errors import (
    ConfigError,
    IndexTablesError,
    StorageError,
    TableAlreadyExistsError,
    TableNotFoundError,
)

log = logging.getLogger(__name__)

NAME = "indextables"
DEFAULT_TARGET_RECORDS = 1_000_000
DEFAULT_PARTITION_BYTES = 256 << 20
DEFAULT_SPLITS_PER_PARTITION = 64
MAX_OPEN_SPLITS = 4  # splits a write task indexes at once (one per partition value), each with its own heap


def _open_log(path: str, options: Mapping[str, str]) -> Any:
    from executor_lib import open_log

    return open_log(path, **O.storage_and_log_options(options))


def _option(options: Mapping[str, str], key: str, parse: Any, default: Any = None) -> Any:
    return parse(key, options[key]) if key in options else default


def _require_path(options: Mapping[str, Any], what: str) -> str:
    path = options.get("path")
    if not path:
        raise ConfigError(f"{what}: no table path (use .load(path) / .save(path))")
    return str(path)


def _spark_schema(schema_string: str, columns: Sequence[str] | None) -> StructType:
    schema = StructType.fromJson(json.loads(schema_string))
    if columns is None:
        return schema
    by_name = {f.name: f for f in schema.fields}
    return StructType([by_name[c] for c in columns])


class IndexTablesDataSource(DataSource):
    """``spark.read.format("indextables").load(path)`` / ``df.write.format("indextables").save(path)``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType | str:
        if _is_command(self.options):
            from executor_lib.spark.commands import command_schema

            return command_schema(self.options)
        path = _require_path(self.options, "read")
        _, options = O.split_keys(self.options, O.STREAM_READ_KEYS)  # readStream's own options
        snapshot = _pinned_snapshot(path, options)
        table_fields = json.loads(snapshot.metadata.schema_string)["fields"]
        table_columns = [f["name"] for f in table_fields]
        opts = O.canonical_options(options, O.READ_KEYS, O.READ_COLUMN_PREFIXES, table_columns, "read")
        columns = O.parse_columns("columns", opts["columns"], table_columns) if "columns" in opts else None
        if "requiredColumns" in opts:
            types = {f["name"]: f["type"] for f in table_fields if isinstance(f["type"], str)}
            required = O.required_columns(opts["requiredColumns"], table_columns, types)
            columns = [c for c in (columns or table_columns) if c in required]
        schema = _spark_schema(snapshot.metadata.schema_string, columns)
        for name in O.parse_match_columns(opts["matchColumns"]) if "matchColumns" in opts else {}:
            if name in table_columns:
                raise ConfigError(f"read {path}: match column {name!r} is a column of the table")
            schema = schema.add(name, BooleanType(), nullable=False)
        return schema

    def reader(self, schema: StructType) -> DataSourceReader:
        if _is_command(self.options):
            from executor_lib.spark.commands import command_reader

            return command_reader(dict(self.options))
        return IndexTablesReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if _is_command(self.options):
            from executor_lib.spark.commands import command_writer

            return command_writer(dict(self.options))
        return IndexTablesWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from executor_lib.spark.streaming import IndexTablesStreamWriter

        return IndexTablesStreamWriter(dict(self.options), schema, overwrite)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from executor_lib.spark.streaming import IndexTablesStreamReader

        return IndexTablesStreamReader(dict(self.options), schema)


def _is_command(options: Mapping[str, Any]) -> bool:
    from indextables_contract.commands import COMMAND_OPTION

    return any(k.lower() == COMMAND_OPTION for k in options)


def _pinned_snapshot(path: str, raw_options: Mapping[str, str]) -> Any:
    lower = {k.lower(): v for k, v in raw_options.items()}
    opts = {k: v for k, v in raw_options.items() if k.lower() not in ("versionasof", "timestampasof")}
    version = O.parse_version(lower["versionasof"]) if "versionasof" in lower else None
    timestamp = O.parse_timestamp_ms(lower["timestampasof"]) if "timestampasof" in lower else None
    if version is not None and timestamp is not None:
        raise ConfigError("read: give versionAsOf or timestampAsOf, not both")
    known = {k.lower(): k for k in O.READ_KEYS}
    storage = {known.get(k.lower(), k): v for k, v in opts.items()}
    return _open_log(path, storage).snapshot(version=version, timestamp_ms=timestamp)


# --- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SplitRef:
    path: str
    partition_values: dict[str, str | None]
    doc_mapping: str | None
    size: int


class IndexTablesPartition(InputPartition):
    def __init__(self, splits: list[SplitRef]) -> None:
        super().__init__(None)
        self.splits = splits


def spark_filter_to_filter(f: Filter) -> F.Filter | None:
    """Spark's pushed filter in the shared vocabulary; None if it has no equivalent."""
    if isinstance(f, Not):
        if isinstance(f.child, EqualNullSafe):
            return None  # NOT(a <=> v) keeps NULL rows; the index's NOT(a = v) would not
        child = spark_filter_to_filter(f.child)
        return None if child is None else F.Not(child)
    attribute: tuple[str, ...] = tuple(getattr(f, "attribute", ()))
    if len(attribute) != 1:
        return None  # nested struct fields are not index fields
    column = attribute[0]
    if isinstance(f, (EqualTo, EqualNullSafe)):
        if f.value is None:  # a = NULL is never true; a <=> NULL is IS NULL
            return F.Not(F.Exists(column)) if isinstance(f, EqualNullSafe) else None
        return F.Term(column, f.value)
    if isinstance(f, In):
        values = tuple(v for v in f.value if v is not None)
        return F.TermIn(column, values) if values else None
    if isinstance(f, GreaterThan):
        return F.Between(column, lower=f.value, lower_inclusive=False)
    if isinstance(f, GreaterThanOrEqual):
        return F.Between(column, lower=f.value)
    if isinstance(f, LessThan):
        return F.Between(column, upper=f.value, upper_inclusive=False)
    if isinstance(f, LessThanOrEqual):
        return F.Between(column, upper=f.value)
    if isinstance(f, IsNull):
        return F.Not(F.Exists(column))
    if isinstance(f, IsNotNull):
        return F.Exists(column)
    if isinstance(f, StringStartsWith):
        return F.Prefix(column, f.value)
    if isinstance(f, StringEndsWith):
        return F.Regex(column, F.suffix_pattern(f.value))
    if isinstance(f, StringContains):
        return F.Contains(column, f.value)
    return None


class IndexTablesReader(DataSourceReader):
    """Plans on the driver side (pinned snapshot, pushdown, pruning); reads splits on executors."""

    def __init__(self, raw_options: dict[str, str], schema: StructType) -> None:
        path = _require_path(raw_options, "read")
        snapshot = _pinned_snapshot(path, raw_options)
        self.path = path
        self.version: int = snapshot.version
        self.schema_string: str = snapshot.metadata.schema_string
        self.partition_columns: tuple[str, ...] = tuple(snapshot.partition_columns)
        table_arrow = snapshot.arrow_schema()
        self.table_arrow_schema: pa.Schema = table_arrow
        self.options = O.canonical_options(raw_options, O.READ_KEYS, O.READ_COLUMN_PREFIXES, table_arrow.names, "read")
        self.match: dict[str, F.Filter] = (
            O.parse_match_columns(self.options["matchColumns"]) if "matchColumns" in self.options else {}
        )
        self.columns: list[str] = [f.name for f in schema.fields]
        self.read_schema_json: str = schema.json()
        unknown = [c for c in self.columns if c not in table_arrow.names and c not in self.match]
        if unknown:
            raise ConfigError(f"read {path}: columns {unknown} are not in the table (columns: {table_arrow.names})")
        self.limit: int | None = _option(self.options, "limit", O.parse_positive_int)
        self.partition_bytes: int = _option(
            self.options, "spark.indextables.read.targetPartitionBytes", O.parse_size, DEFAULT_PARTITION_BYTES
        )
        self.splits_per_partition: int = _option(
            self.options, "spark.indextables.read.maxSplitsPerPartition", O.parse_positive_int,
            DEFAULT_SPLITS_PER_PARTITION,
        )  # fmt: skip
        self._snapshot: Any = snapshot
        self._mappings = self._doc_mappings(snapshot)
        self.option_filters = self._option_filters(table_arrow)
        self.pushed: list[F.Filter] = []  # answered on executors (exactly, or as a superset Spark re-checks)
        self.pruning: list[F.Filter] = []  # used to skip files only

    # -- planning (driver side) --

    @staticmethod
    def _doc_mappings(snapshot: Any) -> list[Any]:
        """The distinct doc mappings of the live splits (empty if any is unknown or unreadable)."""
        from executor_lib.splits.doc_mapping import DocMapping

        texts = {snapshot.doc_mapping(a) for a in snapshot.files}
        if None in texts:
            return []
        try:
            return [DocMapping.from_json(t) for t in texts if t is not None]
        except ConfigError:
            return []

    def _option_filters(self, table_arrow: pa.Schema) -> list[F.Filter]:
        from executor_lib.splits.searcher import check_query

        found = O.query_filters(self.options)
        if "filter" in self.options:
            where = F.resolve_columns(O.parse_filter(self.options["filter"]), table_arrow.names)
            found.append(_typed(where, table_arrow, self.options.get("sessionTimeZone")))
        for f in [*found, *self.match.values()]:
            unknown = sorted(F.columns_of(f) - set(table_arrow.names))
            if unknown:
                raise ConfigError(f"read {self.path}: filter names columns {unknown} that are not in the table")
            for query in _query_strings(f):
                for mapping in self._mappings:
                    _check_query_kind(query, mapping)
                    check_query(query, mapping)
        return found

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        from executor_lib.splits.pushdown import plan

        for spark_filter in filters:
            matched = self._match_filter(spark_filter)
            if matched is not None:  # WHERE <match column>: the index answers it exactly
                self.pushed.append(matched)
                continue
            converted = spark_filter_to_filter(spark_filter)
            if converted is None:
                self._check_not_index_only(_spark_filter_columns(spark_filter), spark_filter)
                yield spark_filter
                continue
            converted = _typed(converted, self.table_arrow_schema)
            columns = F.columns_of(converted)
            if self._prunable(columns):
                self.pruning.append(converted)
            if columns & set(self.partition_columns) or not self._mappings:
                yield spark_filter
                continue
            planned = plan(converted, self._mappings, self.table_arrow_schema)
            if planned.index is None or planned.residual is not None:
                self._check_not_index_only(columns, spark_filter)
            if planned.index is None:
                yield spark_filter
                continue
            self.pushed.append(converted)
            if planned.residual is not None:
                yield spark_filter  # a superset: Spark checks it again

    def _match_filter(self, spark_filter: Filter) -> F.Filter | None:
        """The filter of a match column that ``spark_filter`` requires to be true, if it does."""
        attribute = tuple(getattr(spark_filter, "attribute", ()))
        if len(attribute) == 1 and attribute[0] in self.match and isinstance(spark_filter, (EqualTo, EqualNullSafe)):
            return self.match[attribute[0]] if spark_filter.value is True else None
        return None

    def _check_not_index_only(self, columns: set[str], spark_filter: Filter) -> None:
        """Spark (or the rows) would check this filter on values an index-only column does not store."""
        index_only = {f.name for m in self._mappings for f in m.fields if not f.stored}
        named = sorted(columns & index_only)
        if named:
            raise ConfigError(
                f"read {self.path}: filter {spark_filter!r} cannot be answered: columns {named} are index-only "
                "(spark.indextables.indexing.indexonly); their values are not stored (they read as null), so only "
                "filters the index answers exactly (equality, IN, ranges, indexquery) can use them"
            )

    def _prunable(self, columns: set[str]) -> bool:
        return prunable(columns, self.partition_columns, self.table_arrow_schema)

    def partitions(self) -> list[IndexTablesPartition]:
        from executor_lib.log.pruning import prune_files

        snapshot = (
            self._snapshot
            if self._snapshot is not None
            else _open_log(self.path, self.options).snapshot(version=self.version)
        )
        predicates = list(self.pruning) + [f for f in self.option_filters if self._prunable(F.columns_of(f))]
        files = prune_files(snapshot.files, predicates, self.schema_string, self.partition_columns)
        groups = group_files(files, self.partition_bytes, self.splits_per_partition)
        mapping = snapshot.doc_mapping
        refs = [[SplitRef(a.path, dict(a.partition_values), mapping(a), a.size) for a in g] for g in groups]
        return [IndexTablesPartition(g) for g in refs]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_snapshot"] = None  # holds a store client; executors do not need it
        return state

    # -- executors --

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        from executor_lib.splits.pushdown import FilterPlan, plan
        from executor_lib.splits.table_search import check_split_columns, open_searcher, scan_split
        from executor_lib.storage import open_store

        if not isinstance(partition, IndexTablesPartition):
            return  # no split to read: Spark reads one default partition
        target = to_arrow_schema(StructType.fromJson(json.loads(self.read_schema_json)), timezone="UTC")
        store = open_store(self.path, **O.storage_and_log_options(self.options))
        cache = _split_cache(self.options)
        wanted = F.And(tuple(self.pushed + self.option_filters)) if self.pushed or self.option_filters else None
        remaining = self.limit
        for split in partition.splits:
            if remaining is not None and remaining <= 0:
                return
            searcher = open_searcher(cache, store, split.path, self.table_arrow_schema, split.doc_mapping, split.size)
            where = f"split {store.uri_of(split.path)} of table {self.path}"
            data_columns = [c for c in self.columns if c not in self.match]
            check_split_columns(searcher, [c for c in data_columns if c not in self.partition_columns], where)
            constants = _partition_constants(split.partition_values, self.partition_columns, self.table_arrow_schema)
            filter_plan = FilterPlan(None, None)
            if wanted is not None:
                filter_plan = plan(wanted, [searcher.mapping], self.table_arrow_schema)
            rows = scan_split(searcher, filter_plan, data_columns, constants, remaining, row_ids=bool(self.match))
            if self.match:
                rows = _with_match_columns(rows, searcher, self.match)
            if remaining is not None:
                remaining -= rows.num_rows
            if rows.num_rows:
                yield from _conform(rows, target, where).to_batches(max_chunksize=65536)


def _with_match_columns(rows: pa.Table, searcher: Any, match: Mapping[str, F.Filter]) -> pa.Table:
    """``rows`` (with their row ids last) with a boolean column per match filter, row ids dropped."""
    from executor_lib.splits.pushdown import ROW_ID_COLUMN, residual_mask

    for name, f in match.items():
        mask = pc.fill_null(residual_mask(f, rows, lambda q: searcher.row_ids(q)), False)
        rows = rows.append_column(pa.field(name, pa.bool_(), nullable=False), mask)
    return rows.drop_columns([ROW_ID_COLUMN])


def prunable(columns: set[str], partition_columns: Sequence[str], schema: pa.Schema) -> bool:
    """Whether min/max statistics may prune files for a filter on ``columns``: partition values and
    numeric/string statistics are compared; date, timestamp and boolean data columns are not (their
    string forms differ between writers)."""
    for c in columns:
        if c in partition_columns:
            continue
        t = schema.field(c).type
        if pa.types.is_temporal(t) or pa.types.is_boolean(t):
            return False
    return True


def group_files(files: Sequence[AddAction], partition_bytes: int, splits_per_partition: int) -> list[list[AddAction]]:
    """Files in (partition values, path) order, cut into task groups of about ``partition_bytes``
    and at most ``splits_per_partition`` files."""
    ordered = sorted(files, key=lambda a: (sorted(a.partition_values.items(), key=str), a.path))
    groups: list[list[AddAction]] = []
    current: list[AddAction] = []
    current_bytes = 0
    for add in ordered:
        current.append(add)
        current_bytes += add.size
        if current_bytes >= partition_bytes or len(current) >= splits_per_partition:
            groups.append(current)
            current, current_bytes = [], 0
    if current:
        groups.append(current)
    return groups


def _spark_filter_columns(f: Filter) -> set[str]:
    """The top-level columns a Spark filter names."""
    columns = {str(a[0]) for a in [getattr(f, "attribute", ())] if a}
    for child in (getattr(f, "child", None), getattr(f, "left", None), getattr(f, "right", None)):
        if isinstance(child, Filter):
            columns |= _spark_filter_columns(child)
    return columns


def _typed(f: F.Filter, schema: pa.Schema, time_zone: str | None = None) -> F.Filter:
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


def _check_query_kind(query: F.QueryString, mapping: Any) -> None:
    """``textsearch`` needs a tokenized text field, ``fieldmatch`` an exact (string) field."""
    if query.kind is None or query.column is None:
        return
    field = mapping.field(query.column)
    exact = field is not None and field.type == "text" and field.tokenizer == "raw"
    tokenized = field is not None and field.type in ("text", "json") and not exact
    if query.kind == "text" and not tokenized:
        raise ConfigError(
            f"textsearch on {query.column!r}: it is not a tokenized text field (use fieldmatch or indexquery, "
            "or index it with spark.indextables.indexing.typemap." + query.column + "=text)"
        )
    if query.kind == "exact" and not exact:
        raise ConfigError(f"fieldmatch on {query.column!r}: it is not an exact string field (use textsearch)")


def _query_strings(f: F.Filter) -> list[F.QueryString]:
    if isinstance(f, F.QueryString):
        return [f]
    if isinstance(f, (F.And, F.Or)):
        return [q for c in f.children for q in _query_strings(c)]
    if isinstance(f, F.Not):
        return _query_strings(f.child)
    return []


def _partition_constants(
    values: Mapping[str, str | None], partition_columns: Sequence[str], schema: pa.Schema
) -> dict[str, pa.Scalar]:
    out = {}
    for column in partition_columns:
        t = schema.field(column).type
        raw = values.get(column)
        out[column] = pa.scalar(None, t) if raw is None else pa.array([raw]).cast(t)[0]
    return out


def _conform(rows: pa.Table, target: pa.Schema, where: str) -> pa.Table:
    """Exactly the Arrow schema Spark expects (types, nullability, field order); SplitSchemaError
    naming the split (``where``) if a column cannot take the table's type."""
    from executor_lib.splits.table_search import conform_rows

    rows = conform_rows(rows.select(target.names), target, where)
    return pa.Table.from_arrays(rows.columns, schema=target)


def _split_cache(options: Mapping[str, str]) -> Any:
    from executor_lib.cache.split_cache import SplitCache, default_cache

    directory = options.get("spark.indextables.cache.directoryPath")
    if not directory:
        return default_cache()
    size = options.get("spark.indextables.cache.maxSize")
    max_bytes = O.parse_size("spark.indextables.cache.maxSize", size) if size else 10 << 30
    return SplitCache(Path(directory), max_bytes)


# --- writing ------------------------------------------------------------------------------------


@dataclass
class IndexTablesCommitMessage(WriterCommitMessage):
    adds: list[AddAction] = field(default_factory=list)


class IndexTablesWriter(DataSourceArrowWriter):
    """Executors index their rows into splits and upload them; the driver side commits one version."""

    def __init__(self, raw_options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        from executor_lib.splits.doc_mapping import DocMapping, mapping_for

        self.path = _require_path(raw_options, "write")
        self.overwrite = overwrite
        self.arrow_schema: pa.Schema = _plain_types(to_arrow_schema(schema, timezone="UTC"))
        names = self.arrow_schema.names
        self.options = O.canonical_options(raw_options, O.WRITE_KEYS, O.WRITE_COLUMN_PREFIXES, names, "write")
        requested = _option(self.options, "partitionBy", lambda k, v: O.parse_columns(k, v, names), None)
        existing = self._existing_table()
        self.writer_version: int | None = (  # the table's minWriterVersion (None: no table, or legacy)
            existing.protocol.min_writer_version if existing is not None and existing.protocol is not None else None
        )
        if existing is not None:
            self._check_compatible(existing, requested)
            self.partition_columns = list(existing.partition_columns)
        else:
            self.partition_columns = requested or []
        indexing = {k: v for k, v in self.options.items() if k.startswith("spark.indextables.indexing.")}
        inherited = self._inherited_mapping(existing) if existing is not None and not indexing else None
        if inherited is None:
            inherited = mapping_for(self.arrow_schema, indexing, self.partition_columns).to_json()
        self.mapping_json: str = inherited
        DocMapping.from_json(self.mapping_json)
        self.target_records: int = _option(
            self.options, "spark.indextables.optimizeWrite.targetRecordsPerSplit", O.parse_positive_int,
            DEFAULT_TARGET_RECORDS,
        )  # fmt: skip
        self.target_bytes: int | None = _option(
            self.options, "spark.indextables.autoSize.targetSplitSize", O.parse_size
        )
        self.heap_bytes: int | None = _option(self.options, "spark.indextables.indexWriter.heapSize", O.parse_size)
        self.threads: int | None = _option(self.options, "spark.indextables.indexWriter.threads", O.parse_positive_int)

    # -- driver side, before any task --

    def _existing_table(self) -> Any:
        try:
            return _open_log(self.path, self.options).snapshot()
        except TableNotFoundError:
            return None

    def _check_compatible(self, snapshot: Any, requested: list[str] | None) -> None:
        table = snapshot.arrow_schema()
        mine = [(f.name, _plain_type(f.type)) for f in self.arrow_schema]
        theirs = [(f.name, _plain_type(f.type)) for f in table]
        if mine != theirs:
            raise ConfigError(
                f"write {self.path}: the data's schema {_describe(mine)} does not match the table's {_describe(theirs)}"
            )
        if requested is not None and list(requested) != list(snapshot.partition_columns):
            raise ConfigError(
                f"write {self.path}: partitionBy {requested} differs from the table's partition columns "
                f"{list(snapshot.partition_columns)}"
            )

    def _inherited_mapping(self, snapshot: Any) -> str | None:
        """Appends without indexing options keep the doc mapping of the table's newest split."""
        files = snapshot.files
        if not files:
            return None
        newest = max(files, key=lambda a: (a.modification_time, a.path))
        text = snapshot.doc_mapping(newest)
        if text is None:
            return None
        from executor_lib.splits.doc_mapping import DocMapping

        try:
            mapping = DocMapping.from_json(text)
        except ConfigError:
            return None
        data_columns = [c for c in self.arrow_schema.names if c not in snapshot.partition_columns]
        return text if sorted(f.name for f in mapping.fields) == sorted(data_columns) else None

    # -- executors --

    def write(self, iterator: Iterator[pa.RecordBatch]) -> IndexTablesCommitMessage:
        """Rows stream into one ``SplitBuilder`` per partition value (at most ``MAX_OPEN_SPLITS`` at once);
        a full split is uploaded on a background thread while the next one is indexed."""
        from executor_lib.splits.doc_mapping import DocMapping
        from executor_lib.storage import open_store

        store = open_store(self.path, **O.storage_and_log_options(self.options))
        mapping = DocMapping.from_json(self.mapping_json)
        threads = self.threads or _task_cores()
        with tempfile.TemporaryDirectory(prefix="indextables-write-") as tmp, _Uploads(store) as uploads:
            builders: dict[tuple[Any, ...], Any] = {}
            try:
                for batch in iterator:
                    table = pa.Table.from_batches([batch]).cast(self.arrow_schema)
                    for key, part in _split_by_partition(table, self.partition_columns):
                        builder = builders.get(key)
                        if builder is None:
                            if len(builders) >= MAX_OPEN_SPLITS:  # the fullest split goes, bounding memory
                                fullest = max(builders, key=lambda k: builders[k].num_rows)
                                uploads.submit(self._values(fullest), builders.pop(fullest).finish())
                            builder = builders[key] = self._builder(mapping, Path(tmp), threads)
                        builder.add(part)
                        if builder.num_rows >= self.target_records or (
                            self.target_bytes is not None and builder.nbytes >= self.target_bytes
                        ):
                            uploads.submit(self._values(key), builders.pop(key).finish())
                for key in list(builders):
                    uploads.submit(self._values(key), builders.pop(key).finish())
                return IndexTablesCommitMessage(uploads.wait())
            except BaseException:
                for builder in builders.values():
                    builder.close()
                _delete_quietly(store, [a.path for a in uploads.wait(quiet=True)])
                raise

    def _builder(self, mapping: Any, tmp: Path, threads: int) -> Any:
        from executor_lib.splits.writer import SplitBuilder

        return SplitBuilder(mapping, tmp, self.heap_bytes, threads)

    def _values(self, key: tuple[Any, ...]) -> dict[str, str | None]:
        return dict(zip(self.partition_columns, (_partition_string(v) for v in key), strict=True))

    # -- driver side, after the tasks --

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        adds = [a for m in messages if isinstance(m, IndexTablesCommitMessage) for a in m.adds]
        self.commit_adds(adds, self._commit_write)

    def _commit_write(self, txlog: Any, adds: list[AddAction]) -> None:
        if self.overwrite:
            snapshot = txlog.snapshot()
            removes = removes_of(snapshot.files, data_change=True)
            txlog.commit(
                [*removes, *adds], read_version=snapshot.version, operation="WRITE",
                operation_parameters={"mode": "Overwrite"}, fail_on_concurrent_add=True,
            )  # fmt: skip
        elif adds:
            txlog.commit(adds, operation="WRITE", operation_parameters={"mode": "Append"})

    def commit_adds(self, adds: list[AddAction], commit: Callable[[Any, list[AddAction]], Any]) -> Any:
        """Open the table (creating it on the first write) and run ``commit(txlog, adds)``; its result.
        If the commit fails, the uploaded splits are deleted and a version 0 created here is undone."""
        from executor_lib import create_table

        options: dict[str, Any] = dict(O.storage_and_log_options(self.options))
        created: str | None = None  # the metaData id of the version 0 this write created
        try:
            txlog = _open_log(self.path, self.options)
        except TableNotFoundError:
            try:
                txlog = create_table(self.path, self.arrow_schema, self.partition_columns, **options)
                created = txlog.snapshot().metadata.id
            except TableAlreadyExistsError:
                txlog = _open_log(self.path, self.options)
        try:
            return commit(txlog, adds)
        except IndexTablesError:
            self._delete_uploaded(adds)
            if created is not None:
                _undo_create(txlog, created)
            raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        adds = [a for m in messages if isinstance(m, IndexTablesCommitMessage) for a in m.adds]
        self._delete_uploaded(adds)

    def _delete_uploaded(self, adds: list[AddAction]) -> None:
        if not adds:
            return
        from executor_lib.storage import open_store

        _delete_quietly(open_store(self.path, **O.storage_and_log_options(self.options)), [a.path for a in adds])


def _undo_create(txlog: Any, metadata_id: str) -> None:
    """A first write whose data commit failed leaves no empty table behind: the version 0 it created
    is deleted while it is still the table's only version and still its own (same metaData id).
    Best effort: a failure here is logged, and the failed write's error is what the user sees."""
    from executor_lib.protocol.files import LOG_DIR, version_file

    try:
        snapshot = txlog.snapshot()
        if snapshot.version == 0 and snapshot.metadata.id == metadata_id and not snapshot.files:
            txlog.store.delete(f"{LOG_DIR}/{version_file(0)}")
            txlog.store.remove_empty_dir(f"{LOG_DIR}/")
            txlog.store.remove_empty_dir("")
    except IndexTablesError as e:
        log.warning("%s: could not remove the empty version 0 of a failed first write: %s", txlog.uri, e)


def _task_cores() -> int:
    """The cores Spark gave this task (``spark.task.cpus``): Tantivy's indexing threads."""
    from pyspark import TaskContext

    context = TaskContext.get()
    try:
        return max(1, int(context.cpus())) if context is not None else 1
    except (AttributeError, TypeError, ValueError):
        return 1


class _Uploads:
    """Uploads written splits on one background thread, in order, deleting each local file once uploaded."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="indextables-upload")
        self.futures: list[Future[AddAction]] = []

    def __enter__(self) -> _Uploads:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True)

    def submit(self, partition_values: dict[str, str | None], written: Any) -> None:
        self.futures.append(self.pool.submit(self._upload, partition_values, written))

    def _upload(self, partition_values: dict[str, str | None], written: Any) -> AddAction:
        from executor_lib.splits.publish import upload_split

        try:
            return upload_split(self.store, written, partition_values)
        finally:
            written.path.unlink(missing_ok=True)

    def wait(self, quiet: bool = False) -> list[AddAction]:
        """Every add, in submission order; raises the first upload error (``quiet``: skips failed ones)."""
        adds = []
        for future in self.futures:
            if quiet and future.exception() is not None:
                continue
            adds.append(future.result())
        return adds


def _delete_quietly(store: Any, keys: list[str]) -> None:
    """Best effort: an upload this job made and never committed (purge collects what is left)."""
    for key in keys:
        try:
            store.delete(key)
        except StorageError as e:
            log.warning("could not delete uncommitted split %s: %s", key, e)


def _plain_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz else None)
    return t


def _plain_types(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, _plain_type(f.type), f.nullable) for f in schema])


def _describe(fields: list[tuple[str, pa.DataType]]) -> str:
    return "(" + ", ".join(f"{n} {t}" for n, t in fields) + ")"


def _partition_string(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)


def _split_by_partition(table: pa.Table, columns: Sequence[str]) -> Iterator[tuple[tuple[Any, ...], pa.Table]]:
    """(partition key, rows) for each distinct combination of ``columns`` (vectorized: one sort)."""
    if not columns:
        yield (), table
        return
    if table.num_rows == 0:
        return
    ordered = table.sort_by([(c, "ascending") for c in columns])
    keys = ordered.select(list(columns))
    change = None
    for c in columns:
        col = keys.column(c).combine_chunks()
        if len(col) < 2:
            break
        prev, nxt = col.slice(0, len(col) - 1), col.slice(1)
        differs = pc.fill_null(pc.not_equal(prev, nxt), True)
        nulls_differ = pc.xor(pc.is_null(prev), pc.is_null(nxt))
        both_null = pc.and_(pc.is_null(prev), pc.is_null(nxt))
        differs = pc.if_else(both_null, False, pc.or_(differs, nulls_differ))
        change = differs if change is None else pc.or_(change, differs)
    starts = [0] + ([i + 1 for i in pc.indices_nonzero(change).to_pylist()] if change is not None else [])
    ends = [*starts[1:], ordered.num_rows]
    first_rows = keys.take(pa.array(starts)).to_pylist()
    for start, end, key_row in zip(starts, ends, first_rows, strict=True):
        yield tuple(key_row[c] for c in columns), ordered.slice(start, end - start)
