"""The batch reader of ``format("indextables")``.

* ``IndexTablesReader.pushFilters`` / ``partitions`` plan the read on the driver side: one pinned
  snapshot, Spark's filters converted to contract filter trees, partitions and min/max statistics
  pruned, splits grouped into input partitions.
* ``IndexTablesReader.read`` runs on executors: splits come through the node's split cache and are
  searched with Tantivy; rows leave as Arrow batches.

Everything kept on the reader is plain picklable data; stores and caches are opened where used.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, EqualNullSafe, EqualTo, Filter, InputPartition
from pyspark.sql.types import StructType

from executor_lib.protocol.actions import parquet_table_root
from executor_lib.spark import options as O
from executor_lib.spark.batches import BATCH_ROWS, FIRST_BATCH_ROWS, SparkOutput, coalesced
from executor_lib.spark.common import (
    DATA_SKIPPING_FILE,
    node_split_cache,
    open_table_log,
    parsed_option,
    partition_constants,
    pinned_snapshot,
    planning_counters_dir,
    profiled_task,
    require_path,
    typed_filter,
)
from executor_lib.spark.read_planning import SplitRef, plan_tasks, scan_order, split_refs
from executor_lib.spark.spark_filters import spark_filter_columns, spark_filter_to_filter
from executor_lib.table_schema import nested_path
from indextables_contract import filters as F
from indextables_contract import read as R
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError, QueryError

if TYPE_CHECKING:
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.log.snapshot import Snapshot
    from executor_lib.storage.base import ObjectStore

log = logging.getLogger(__name__)


DEFAULT_PARTITION_BYTES: int = S.READ_TARGET_PARTITION_BYTES.value


DEFAULT_SPLITS_PER_PARTITION: int = S.READ_MAX_SPLITS_PER_PARTITION.value


class IndexTablesPartition(InputPartition):
    def __init__(self, splits: list[SplitRef], score_stats: str | None = None) -> None:
        super().__init__(None)
        self.splits = splits
        self.score_stats = score_stats  # a read selecting _score: the BM25 statistics of every split read (JSON)


class IndexTablesReader(DataSourceReader):
    """Plans on the driver side (pinned snapshot, pushdown, pruning); reads splits on executors."""

    def __init__(self, raw_options: dict[str, str], schema: StructType) -> None:
        path = require_path(raw_options, "read")
        snapshot = pinned_snapshot(path, raw_options)
        self.path = path
        self.version: int = snapshot.version
        self.schema_string: str = snapshot.metadata.schema_string
        self.partition_columns: tuple[str, ...] = tuple(snapshot.partition_columns)
        table_arrow = snapshot.arrow_schema()
        self.table_arrow_schema: pa.Schema = table_arrow
        self.options = O.canonical_options(raw_options, O.READ_KEYS, O.READ_COLUMN_PREFIXES, table_arrow.names, "read")
        plan = O.read_plan(self.options, table_arrow.names, f"read {path}")
        self.companion_root = parquet_table_root(snapshot.metadata.configuration, self.options)
        self.match: dict[str, F.Filter] = dict(plan.match_columns)
        self.columns: list[str] = [f.name for f in schema.fields]
        self.read_schema_json: str = schema.json()
        self.score: bool = O.reads_score(self.options, table_arrow.names)  # _score selected: BM25 of the index query
        self.top_k: int | None = plan.top_k if self.score else None  # ORDER BY _score DESC LIMIT k, per task
        self.snippets: list[tuple[str, str]] = O.snippet_columns(self.options, table_arrow.names)
        self.snippet_tags, self.snippet_chars = O.snippet_settings(self.options)
        added = {n for n, _ in self.snippets} | ({R.SCORE_COLUMN} if self.score else set())
        unknown = [c for c in self.columns if c not in table_arrow.names and c not in self.match and c not in added]
        if unknown:
            raise ConfigError(f"read {path}: columns {unknown} are not in the table (columns: {table_arrow.names})")
        self.only_splits: tuple[str, ...] | None = plan.splits  # a rewrite's read of the splits it replaces
        self.limit: int | None = plan.limit  # 0: no rows (each task stops before its first split)
        # ORDER BY <column> [ASC|DESC] LIMIT k: each task sends its best k rows by the column
        self.ordered: tuple[tuple[str, bool, bool], int] | None = self._ordered(plan, table_arrow)
        self.one_task = plan.one_task(self.options)  # a bare LIMIT: one task, at most `limit` rows in all
        self.partition_bytes: int = S.READ_TARGET_PARTITION_BYTES.get(self.options)
        self.splits_per_partition: int = S.READ_MAX_SPLITS_PER_PARTITION.get(self.options)
        self.parallelism: int | None = parsed_option(self.options, R.PARALLELISM, O.parse_positive_int)
        self._snapshot: Snapshot | None = snapshot
        self._mappings = self._doc_mappings(snapshot)
        self.option_filters = self._option_filters(table_arrow, plan.filter)
        self.pushed: list[F.Filter] = []  # answered on executors (exactly, or as a superset Spark re-checks)
        self.pruning: list[F.Filter] = []  # used to skip files only

    # -- planning (driver side) --

    def _ordered(self, plan: R.ReadPlan, table_arrow: pa.Schema) -> tuple[tuple[str, bool, bool], int] | None:
        """The plan's ``top_k_order`` and ``top_k`` where each task may send only its best k by the column
        (Spark sorts and cuts them): a column the read returns, of a type ordered here as Spark orders
        it, and no ``_score``, snippet, match column or limit beside it; else None (every row is sent)."""
        from executor_lib.splits.search.ranking import orderable

        order, k = plan.top_k_order, plan.top_k
        if order is None or k is None:
            return None
        column = order[0]
        if self.score or self.snippets or self.match or plan.limit is not None or column not in self.columns:
            log.debug(
                "read %s: ORDER BY %s LIMIT %d is not pushed (not a plain read of the column)", self.path, column, k
            )
            return None
        if column not in table_arrow.names or not orderable(table_arrow.field(column).type):
            log.debug(
                "read %s: ORDER BY %s LIMIT %d is not pushed (not a number, date or timestamp)", self.path, column, k
            )
            return None
        return order, k

    @staticmethod
    def _doc_mappings(snapshot: Snapshot) -> list[Any]:
        """The distinct doc mappings of the live splits (empty if any is unknown or unreadable)."""
        return doc_mappings(snapshot)

    def _option_filters(self, table_arrow: pa.Schema, where: F.Filter | None) -> list[F.Filter]:
        return option_filters(self.path, self.options, table_arrow, lambda: self._mappings, self.match, where)

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for spark_filter, applied in self._push_filters(filters):
            if not applied and (self.top_k is not None or self.ordered is not None):
                # Spark filters this one after the read: a task's best k rows before it could lack the best after it
                log.info(
                    "read %s: filter %r is left to Spark, so each task sends every row (no top k)",
                    self.path,
                    spark_filter,
                )
                self.top_k = self.ordered = None
            yield spark_filter

    def _push_filters(self, filters: list[Filter]) -> Iterator[tuple[Filter, bool]]:
        """The filters Spark checks after the read (the others are answered on the executors), each with
        whether the executors apply it too (pushed with a part left for the rows, checked there)."""
        from executor_lib.splits.query.pushdown import plan

        for spark_filter in filters:
            matched = self._match_filter(spark_filter)
            if matched is not None:  # WHERE <match column>: the index answers it exactly
                self.pushed.append(matched)
                continue
            converted = spark_filter_to_filter(spark_filter)
            if converted is None:
                self._check_not_index_only(spark_filter_columns(spark_filter), spark_filter)
                yield spark_filter, False
                continue
            converted = typed_filter(converted, self.table_arrow_schema)
            columns = F.columns_of(converted)
            if self._prunable(columns):
                self.pruning.append(converted)
            if columns & set(self.partition_columns) or not self._mappings:
                yield spark_filter, False
                continue
            planned = plan(converted, self._mappings, self.table_arrow_schema)
            if planned.index is None or planned.residual is not None:
                self._check_not_index_only(columns, spark_filter)
            if planned.index is None:
                yield spark_filter, False
                continue
            self.pushed.append(converted)
            if planned.residual is not None:
                yield spark_filter, True  # the executors check its residual on the rows; Spark checks it again

    def _match_filter(self, spark_filter: Filter) -> F.Filter | None:
        """The filter of a match column that ``spark_filter`` requires to be true, if it does."""
        attribute = tuple(getattr(spark_filter, "attribute", ()))
        if len(attribute) == 1 and attribute[0] in self.match and isinstance(spark_filter, (EqualTo, EqualNullSafe)):
            return self.match[attribute[0]] if spark_filter.value is True else None
        return None

    def _check_not_index_only(self, columns: set[str], spark_filter: Filter) -> None:
        """Spark (or the rows) would check this filter on values an index-only column does not store (a
        companion's columns are index-only in its splits, but its rows come from the source's files)."""
        if self.companion_root is not None:
            return
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
        import time

        from executor_lib import node_counters, profiler
        from executor_lib.log.files.pruning import prune_snapshot

        snapshot = (
            self._snapshot
            if self._snapshot is not None
            else open_table_log(self.path, self.options).snapshot(version=self.version)
        )
        predicates = list(self.pruning) + [f for f in self.option_filters if self._prunable(F.columns_of(f))]
        directory = planning_counters_dir(self.options)
        with profiled_task(directory) if directory is not None else contextlib.nullcontext():
            t0 = time.perf_counter_ns() if profiler.ENABLED else 0
            if predicates:
                files, counts = prune_snapshot(snapshot, predicates)
                mapping = snapshot.doc_mapping
                splits = [
                    SplitRef(a.path, dict(a.partition_values), mapping(a), a.size, a.footer_start_offset) for a in files
                ]
            else:  # every live split: from the state's columns, no AddAction per file
                splits = split_refs(snapshot)
                counts = {"scans": 1, "total_files": len(splits), "partition_pruned_files": 0}
                counts |= {"data_skipped_files": 0, "final_files": len(splits), "filter_types": {}}
            if t0:
                profiler.record("plan_prune", t0)
        if directory is not None:
            node_counters.add(directory / DATA_SKIPPING_FILE, counts)
        if self.only_splits is not None:
            splits = self._only_splits(snapshot, splits)
        if self.one_task and not self.pushed and splits:  # in order until the limit (ReadPlan.one_task)
            refs = [sorted(splits, key=scan_order())]
        else:
            refs = plan_tasks(splits, self.partition_bytes, self.splits_per_partition, self.parallelism, self._light())
        stats = self._score_stats([r for g in refs for r in g]) if self.score else None
        return [IndexTablesPartition(g, stats) for g in refs]

    def _only_splits(self, snapshot: Snapshot, splits: list[SplitRef]) -> list[SplitRef]:
        """``splits`` restricted to the read option ``splits`` (``only_splits``), each of which must be
        live at the read's version (a rewrite that read another version would remove the wrong files)."""
        wanted = set(self.only_splits or ())
        kept = [s for s in splits if s.path in wanted]
        missing = wanted - {s.path for s in kept}
        if missing:  # pruned by the read's filters, or not live: only the second is an error
            gone = sorted(missing - set(snapshot.file_columns(["path"]).column("path").to_pylist()))
            if gone:
                raise ConfigError(
                    f"read {self.path}: option {R.SPLITS} names {len(gone)} splits that are not live at version "
                    f"{self.version} (first: {gone[0]!r})"
                )
        return kept

    def _score_stats(self, splits: Sequence[SplitRef]) -> str | None:
        """The BM25 statistics of the read's index query summed over ``splits`` (every split the read
        searches), as JSON for the tasks: each then scores its rows as one index over them would
        (``splits.search.scoring``). Read here, on the driver side, through this node's split cache:
        each split's document count, its query terms' document frequencies and its fields' token
        counts (the term dictionaries and postings headers of the query's fields). None: a query
        part whose score is not modelled (each split's own statistics then)."""
        from executor_lib.splits.query.pushdown import plan
        from executor_lib.splits.search.scoring import ScoreStats
        from executor_lib.storage import open_store

        wanted = self._wanted()
        if wanted is None or not splits:
            return None
        store = open_store(self.path, shared_client=True, **O.storage_and_log_options(self.options))
        cache = node_split_cache(self.options)
        parts = []
        for split in splits:
            searcher = self._searcher(split, store, cache)
            index = plan(wanted, [searcher.mapping], self.table_arrow_schema).index
            found = None if index is None else searcher.score_stats(index)
            if found is None:
                return None
            parts.append(found)
        return ScoreStats.merged(parts).to_json()

    def _wanted(self) -> F.Filter | None:
        """The filter tree every split answers: pushed filters and the read's own (options, plan)."""
        return F.And(tuple(self.pushed + self.option_filters)) if self.pushed or self.option_filters else None

    def _light(self) -> bool:
        """Whether each split is read in part: an index query narrows the rows, or a LIMIT stops early."""
        from executor_lib.splits.query.pushdown import plan

        if self.limit is not None or self.pushed or self.top_k is not None or self.ordered is not None:
            # pushed filters have an index part; a top k by a column reads that column and k rows a split
            return True
        return any(plan(f, self._mappings, self.table_arrow_schema).index is not None for f in self.option_filters)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_snapshot"] = None  # holds a store client; executors do not need it
        return state

    # -- executors --

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of the partition's splits, batch by batch as they are read: the first batch
        small (``FIRST_BATCH_ROWS``) and each sent to Spark at once, so that a ``limit(1)``,
        ``show()`` or ``head()`` ends the task after the rows it needs (splits are opened, and rows
        read, only as batches are taken); small results of several splits sent as one batch."""
        output = SparkOutput()
        for batch in coalesced(self._read_splits(partition), BATCH_ROWS, FIRST_BATCH_ROWS):
            yield batch
            output.flush()  # resumed: Spark has written the batch into its buffered socket

    def _read_splits(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        from executor_lib.storage import open_store

        if not isinstance(partition, IndexTablesPartition):
            return  # no split to read: Spark reads one default partition
        target = to_arrow_schema(StructType.fromJson(json.loads(self.read_schema_json)), timezone="UTC")
        store = open_store(self.path, shared_client=True, **O.storage_and_log_options(self.options))
        cache = node_split_cache(self.options)
        from executor_lib import profiler

        with cache.counted_once(), profiled_task(cache.directory):
            if self.score or self.snippets:
                yield from self._search_scored(partition, store, cache, target)
                return
            if self.ordered is not None:
                yield from self._search_ordered(partition, store, cache, target)
                return
            for batch in self._search_splits(partition.splits, store, cache, target):
                if profiler.ENABLED:  # counts so far: a task Spark stops early (limit(1)) ends unflushed
                    profiler.flush(cache.directory)
                yield batch

    def _searcher(self, split: SplitRef, store: ObjectStore, cache: SplitCache) -> Any:
        """The searcher of ``split`` through this node's split cache (``split_opening.open_searcher``)."""
        from executor_lib.splits.search.split_opening import open_searcher

        args = (split.path, self.table_arrow_schema, split.doc_mapping, split.size, split.footer_start)
        return open_searcher(cache, store, *args, self.companion_root)

    def _open_split(
        self, split: SplitRef, store: ObjectStore, cache: SplitCache, data_columns: Sequence[str]
    ) -> tuple[Any, str, dict[str, Any]]:
        """A split's searcher (its data columns checked), its name in messages, its partition constants."""
        from executor_lib.splits.search.table_search import check_split_columns

        searcher = self._searcher(split, store, cache)
        where = f"split {store.uri_of(split.path)} of table {self.path}"
        check_split_columns(searcher, [c for c in data_columns if c not in self.partition_columns], where)
        constants = partition_constants(split.partition_values, self.partition_columns, self.table_arrow_schema)
        return searcher, where, constants

    def _search_splits(
        self, splits: Sequence[SplitRef], store: ObjectStore, cache: SplitCache, target: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        """Each split's matching rows (in ``target``'s schema), until the limit is reached."""
        from executor_lib.splits.query.pushdown import FilterPlan, plan
        from executor_lib.splits.search.table_search import (
            damage_of_split,
            scan_split_batches,
        )

        wanted = self._wanted()
        remaining = self.limit
        sent = 0  # rows sent: once a first batch is out, a split's hits are searched for at once
        for split in splits:
            if remaining is not None and remaining <= 0:
                return
            data_columns = [c for c in self.columns if c not in self.match]
            searcher, where, constants = self._open_split(split, store, cache, data_columns)
            filter_plan = FilterPlan(None, None)
            if wanted is not None:
                filter_plan = plan(wanted, [searcher.mapping], self.table_arrow_schema)
            batches = scan_split_batches(
                searcher,
                filter_plan,
                data_columns,
                constants,
                remaining,
                row_ids=bool(self.match),
                probe=sent < FIRST_BATCH_ROWS,
            )
            matched = _MatchRows(searcher, self.match)
            while True:
                with damage_of_split(cache, store, split.path):
                    rows = next(batches, None)
                    if rows is not None and self.match:
                        rows = matched.add(rows)
                if rows is None:
                    break
                if remaining is not None:
                    remaining -= rows.num_rows
                sent += rows.num_rows
                yield from _conform(rows, target, where).to_batches(max_chunksize=BATCH_ROWS)

    def _search_scored(
        self, partition: IndexTablesPartition, store: ObjectStore, cache: SplitCache, target: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        """Each split's matching rows with their BM25 ``_score`` (the read's statistics, shipped in the
        partition) and their ``_snippet_<column>`` fragments. With ``top_k`` (``ORDER BY _score DESC
        LIMIT k``: Spark sorts and cuts the tasks' rows) the task sends its best ``top_k``: each split
        answered by the index alone gives the row ids and scores of its best ``top_k``, and only the
        rows of the task's best ``top_k`` of them are read (a split with a filter left for the rows
        reads its matches, then keeps its best)."""
        from executor_lib.splits.query.pushdown import plan
        from executor_lib.splits.search.ranking import best_of
        from executor_lib.splits.search.scoring import ScoreStats
        from executor_lib.splits.search.split_opening import damage_of_split
        from executor_lib.splits.search.table_search import scan_split_scored, take_scored

        wanted = self._wanted()
        if wanted is None:  # its index queries are match columns only (e.g. under OR with another table's)
            raise ConfigError(
                f"read {self.path}: {R.SCORE_COLUMN} and snippets score the index query that selects the rows "
                "read, and this read's index queries only mark rows (match columns); put the index query "
                "at the top of the table's WHERE (AND), or do not select them"
            )
        stats = None if partition.score_stats is None else ScoreStats.from_json(partition.score_stats)
        added = {n for n, _ in self.snippets} | {R.SCORE_COLUMN}
        data_columns = [c for c in self.columns if c not in self.match and c not in added]
        data_columns += [c for _, c in self.snippets if c not in data_columns]  # the text snippets are made from
        top = self.top_k if self.limit is None else self.limit if self.top_k is None else min(self.top_k, self.limit)
        remaining = self.limit
        kept: list[pa.Table] = []
        pending: dict[int, tuple[Any, Any, Any, Any, str]] = {}  # split -> what reads its rows later
        found: dict[int, tuple[Any, Any]] = {}  # split -> (row ids, scores) of its best
        for i, split in enumerate(partition.splits):
            if self.top_k is None and remaining is not None and remaining <= 0:
                break
            searcher, where, constants = self._open_split(split, store, cache, data_columns)
            filter_plan = plan(wanted, [searcher.mapping], self.table_arrow_schema)
            if self.top_k is not None and filter_plan.residual is None and filter_plan.index is not None:
                with damage_of_split(cache, store, split.path):
                    ids, scores = searcher.scored(filter_plan.index, top, stats)
                found[i] = (ids.to_numpy().astype("int64"), scores)
                pending[i] = (searcher, filter_plan, constants, split, where)
                continue
            k = top if self.top_k is not None else remaining
            with damage_of_split(cache, store, split.path):
                rows = scan_split_scored(
                    searcher, filter_plan, data_columns, stats, constants, k, row_ids=bool(self.match)
                )
                rows = self._added_columns(rows, searcher, filter_plan)
            if remaining is not None:
                remaining -= rows.num_rows
            if self.top_k is None:
                if rows.num_rows:
                    yield from _conform(rows, target, where).to_batches(max_chunksize=BATCH_ROWS)
            else:
                kept.append(_conform(rows, target, where))
        for i, (ids, scores) in best_of(found, top).items():
            searcher, filter_plan, constants, split, where = pending[i]
            with damage_of_split(cache, store, split.path):
                rows = take_scored(searcher, ids, scores, data_columns, constants, row_ids=bool(self.match))
                rows = self._added_columns(rows, searcher, filter_plan)
            kept.append(_conform(rows, target, where))
        if kept:
            best = pa.concat_tables(kept)
            if top is not None and best.num_rows > top:
                best = best.sort_by([(R.SCORE_COLUMN, "descending")]).slice(0, top)
            yield from best.to_batches(max_chunksize=BATCH_ROWS)

    def _search_ordered(
        self, partition: IndexTablesPartition, store: ObjectStore, cache: SplitCache, target: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        """The task's best ``k`` rows by the ``ORDER BY`` column (``ordered``), in Spark's order: each
        split gives its best ``k`` (``scan_split_ordered``: the hits' row ids and values of the column,
        then the rows of its best ``k`` only), and the task keeps the best ``k`` of those."""
        from executor_lib.splits.query.pushdown import FilterPlan, plan
        from executor_lib.splits.search.ranking import order_positions
        from executor_lib.splits.search.split_opening import damage_of_split
        from executor_lib.splits.search.table_search import scan_split_ordered

        assert self.ordered is not None
        order, k = self.ordered
        wanted = self._wanted()
        kept: list[pa.Table] = []
        for split in partition.splits:
            if k <= 0:
                break
            searcher, where, constants = self._open_split(split, store, cache, self.columns)
            filter_plan = (
                FilterPlan(None, None) if wanted is None else plan(wanted, [searcher.mapping], self.table_arrow_schema)
            )
            with damage_of_split(cache, store, split.path):
                rows = scan_split_ordered(searcher, filter_plan, self.columns, order, k, constants)
            kept.append(_conform(rows, target, where))
        if not kept:
            return
        best = pa.concat_tables(kept)
        column, descending, nulls_first = order
        if best.num_rows > k:
            best = best.take(pa.array(order_positions(best[column], descending, nulls_first, k), pa.int64()))
        yield from best.to_batches(max_chunksize=BATCH_ROWS)

    def _added_columns(self, rows: pa.Table, searcher: Any, filter_plan: Any) -> pa.Table:
        """``rows`` (a split's, with ``_score``, and row ids last where there are match columns) with the
        read's match columns and snippets, in the read's column order."""
        if self.match:
            rows = _MatchRows(searcher, self.match).add(rows)
        for name, column in self.snippets:
            texts = rows[column].to_pylist()
            made = searcher.snippets(filter_plan.index, column, texts, self.snippet_tags, self.snippet_chars)
            rows = rows.append_column(name, made)
        return rows.select(list(self.columns))


class _MatchRows:
    """Adds the match columns to a split's batches of rows, each query searched once a split."""

    def __init__(self, searcher: Any, match: Mapping[str, F.Filter]) -> None:
        self.searcher = searcher
        self.match = match
        self._found: dict[F.QueryString, pa.Array] = {}

    def _rows(self, q: F.QueryString) -> pa.Array:
        if q not in self._found:
            self._found[q] = self.searcher.row_ids(q)
        return self._found[q]

    def add(self, rows: pa.Table) -> pa.Table:
        """``rows`` (with their row ids last) with a boolean column per match filter, row ids dropped."""
        from executor_lib.splits.query.pushdown import ROW_ID_COLUMN, residual_mask

        for name, f in self.match.items():
            mask = pc.fill_null(residual_mask(f, rows, self._rows), False)
            rows = rows.append_column(pa.field(name, pa.bool_(), nullable=False), mask)
        return rows.drop_columns([ROW_ID_COLUMN])


def prunable(columns: set[str], partition_columns: Sequence[str], schema: pa.Schema) -> bool:
    """Whether min/max statistics may prune files for a filter on ``columns``: partition values and
    numeric/string statistics are compared; date, timestamp and boolean data columns are not (their
    string forms differ between writers)."""
    for c in columns:
        if c in partition_columns:
            continue
        if c not in schema.names:
            return False  # a nested field (user.name): statistics are kept for top-level columns only
        t = schema.field(c).type
        if pa.types.is_temporal(t) or pa.types.is_boolean(t):
            return False
    return True


def doc_mappings(snapshot: Any) -> list[Any]:
    """The distinct doc mappings of ``snapshot``'s live splits (empty if any is unknown or unreadable)."""
    from executor_lib.splits.doc_mapping import DocMapping

    texts = snapshot.doc_mapping_texts()
    if None in texts:
        return []
    try:
        return [DocMapping.from_json(t) for t in texts if t is not None]
    except ConfigError:
        return []


def option_filters(
    path: str,
    options: Mapping[str, str],
    table_arrow: pa.Schema,
    mappings: Callable[[], list[Any]],
    match: Mapping[str, F.Filter],
    where: F.Filter | None,
    warnings: list[str] | None = None,
) -> list[F.Filter]:
    """The filter trees a read carries (its ``indexquery.<col>`` and ``indexqueryall`` options, and
    ``where``: its plan's ``filter``), each checked with ``check_filter`` (as are the ``match`` columns'
    trees): run by the data source's ``schema`` (Spark's analysis, before any job) and by the reader.
    ``warnings`` (if given) gets the text of each query that cannot find what it says (``check_filter``).

    Raises:
        ConfigError / QueryError / FilterError: as ``check_filter``.

    Example: ``option_filters("/t", {"indexquery.message": "error"}, schema, lambda: doc_mappings(snap), {}, None)``
    """
    found = O.query_filters(options)
    if where is not None:
        found.append(typed_filter(where, table_arrow, options.get("sessionTimeZone")))
    strict = S.READ_STRICT_QUERIES.get(options)
    for f in [*found, *match.values()]:
        said = check_filter(f, f"read {path}", table_arrow, mappings, strict=strict)
        if warnings is not None:
            warnings.extend(w for w in said if w not in warnings)
    return found


def check_filter(
    f: F.Filter, what: str, table_arrow: pa.Schema, mappings: Callable[[], list[Any]], strict: bool = False
) -> list[str]:
    """Refuse, on the driver before any task, a filter tree naming a column the table lacks (every
    column listed, the closest suggested) or holding a query string that does not parse with the
    field's tokenizer in some split's doc mapping (``mappings``, called only if there is a query).

    Returns the warnings about its queries that run but cannot find what they say (an ``indexquery``
    word against an exact-string column: ``splits.query.exact_words``), one per query; ``strict``
    (``spark.indextables.read.strictQueries``) makes the first a QueryError.

    Raises:
        ConfigError: an unknown column, or a query kind the field cannot answer.
        QueryError: a query string that does not parse (position and reason named); with ``strict``, a
            word search of an exact-string column.

    Example: ``check_filter(F.QueryString("(error", "message"), "read /t", schema, lambda: doc_mappings(snap))``
    """
    from executor_lib.splits.query.check import check_query
    from executor_lib.splits.query.exact_words import exact_word_warning

    unknown = sorted(c for c in F.columns_of(f) if nested_path(c, table_arrow) is None)
    if unknown:
        raise ConfigError(f"{what}: {unknown_columns_text(unknown, table_arrow.names)}")
    queries = query_strings(f)
    warned: dict[F.QueryString, str] = {}
    for mapping in mappings() if queries else []:
        for query in queries:
            _check_query_kind(query, mapping)
            check_query(query, mapping, table_arrow)
            warning = None if query in warned else exact_word_warning(query, mapping, table_arrow, strict)
            if warning is not None and strict:
                raise QueryError(f"{what}: {warning}")
            if warning is not None:
                warned[query] = warning
    return list(warned.values())


def unknown_columns_text(unknown: Sequence[str], columns: Sequence[str]) -> str:
    """``column 'x' is not in the table (did you mean 'y'?; its columns: a, b, c)``: the user's terms."""
    import difflib

    names = ", ".join(repr(c) for c in unknown)
    which = f"column {names} is" if len(unknown) == 1 else f"columns {names} are"
    close = difflib.get_close_matches(unknown[0], list(columns), n=1)
    hint = f"did you mean {close[0]!r}?; " if close else ""
    return f"{which} not in the table ({hint}its columns: {', '.join(columns)})"


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


def query_strings(f: F.Filter) -> list[F.QueryString]:
    if isinstance(f, F.QueryString):
        return [f]
    if isinstance(f, (F.And, F.Or)):
        return [q for c in f.children for q in query_strings(c)]
    if isinstance(f, F.Not):
        return query_strings(f.child)
    return []


def _conform(rows: pa.Table, target: pa.Schema, where: str) -> pa.Table:
    """Exactly the Arrow schema Spark expects (types, nullability, field order); SplitSchemaError
    naming the split (``where``) if a column cannot take the table's type."""
    from executor_lib.splits.search.table_search import conform_rows

    rows = conform_rows(rows.select(target.names), target, where)
    return pa.Table.from_arrays(rows.columns, schema=target)
