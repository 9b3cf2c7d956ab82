"""Searching a whole table in one process (no Spark): every live split, through the split cache.

Each live split comes from the node's ``SplitCache`` (downloaded once, then local) and is
searched with ``SplitSearcher``; partition columns are added from the split's partition values.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from executor_lib import profiler
from executor_lib.arrow_arrays import as_numpy, bools, empty_table, numbers, partition_value
from executor_lib.cache.split_cache import SplitCache
from executor_lib.protocol.actions import AddAction, parquet_table_root
from executor_lib.splits.doc_mapping import default_field_type
from executor_lib.splits.query.pushdown import ROW_ID_COLUMN, FilterPlan, filter_rows
from executor_lib.splits.rows.take import take_rows
from executor_lib.splits.search.ranking import best_of, best_scores, order_positions
from executor_lib.splits.search.scoring import SCORE_COLUMN, ScoreStats
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.search.split_opening import damage_of_split, open_searcher
from executor_lib.storage.base import ObjectStore
from indextables_contract import filters
from indextables_contract.errors import (
    ConfigError,
    CorruptSplitError,
    QueryError,
    SplitSchemaError,
)

if TYPE_CHECKING:  # an executor's read needs no transaction log code (a fresh Python worker imports less)
    from executor_lib.log.snapshot import Snapshot


def search_table(
    store: ObjectStore,
    snapshot: Snapshot,
    query: str | None,
    cache: SplitCache,
    columns: Sequence[str] | None = None,
    limit: int | None = None,
    scored: bool = False,
    files: Sequence[AddAction] | None = None,
) -> pa.Table:
    """Rows of every live split (or of ``files``, live splits of ``snapshot``) matching ``query``
    (Tantivy syntax), up to ``limit`` in total.
    ``scored``: the best ``limit`` rows by BM25 score with table-wide statistics, best first, with
    their score as a last column ``_score`` (float32); needs a query. The cache's counters are
    written once per search (``SplitCache.counted_once``), not once per split.

    Example: ``search_table(log.store, log.snapshot(), 'message:"disk full"', cache, ["id"])``
    """
    with cache.counted_once():
        return _search_table(store, snapshot, query, cache, columns, limit, scored, files)


def _search_table(
    store: ObjectStore,
    snapshot: Snapshot,
    query: str | None,
    cache: SplitCache,
    columns: Sequence[str] | None,
    limit: int | None,
    scored: bool,
    files: Sequence[AddAction] | None = None,
) -> pa.Table:
    if limit is not None and limit < 0:
        raise QueryError(f"search {snapshot.table_uri}: limit {limit} is negative (give 0 or more, or no limit)")
    schema = snapshot.arrow_schema()
    partition_columns = list(snapshot.partition_columns)
    wanted = list(columns) if columns is not None else schema.names
    unknown = [c for c in wanted if c not in schema.names]
    if unknown:
        raise QueryError(f"columns {unknown} are not in the table (columns: {schema.names})")
    if scored and (query is None or query.strip() in ("", "*")):
        raise QueryError(f"search {snapshot.table_uri}: {SCORE_COLUMN} needs a query (a score ranks a query's matches)")
    data_columns = [c for c in wanted if c not in partition_columns]
    adds = sorted(snapshot.files if files is None else files, key=lambda a: a.path)

    def searcher_of(add: AddAction) -> SplitSearcher:  # kept open, its cached files checked at each use
        return open_searcher(
            cache,
            store,
            add.path,
            schema,
            snapshot.doc_mapping(add),
            add.size,
            add.footer_start_offset,
            parquet_table_root(snapshot.metadata.configuration),
        )

    winners: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # split -> (row ids, scores) of the best rows
    opened: dict[int, SplitSearcher] = {}
    if scored:
        assert query is not None
        opened = {i: searcher_of(a) for i, a in enumerate(adds)}
        stats = table_score_stats(list(opened.values()), query)
        found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        k = limit if limit is not None and limit > 0 else 0  # a floor only where a limit cuts the ranking
        best = np.zeros(0, np.float32)  # the table's best ``k`` scores so far
        for i, add in enumerate(adds):
            floor = float(best.min()) if k and len(best) >= k else None
            with damage_of_split(cache, store, add.path):  # (a later split needs no hit at or below it)
                ids, scores = opened[i].scored(query, limit, stats, floor)
            found[i] = (as_numpy(ids).astype(np.int64), scores)
            if k:
                best = best_scores(best, scores, k)
        winners = best_of(found, limit)  # rows are read for the best ``limit`` of the table only

    def rows_of(i: int, add: AddAction, remaining: int | None) -> pa.Table:
        where = f"split {store.uri_of(add.path)} of table {snapshot.table_uri}"
        for attempt in (1, 2):  # damage found while searching drops the cached copy: fetched again once
            searcher = opened[i] if i in opened and attempt == 1 else searcher_of(add)
            check_split_columns(searcher, data_columns, where)
            try:
                with damage_of_split(cache, store, add.path):
                    if scored:
                        ids, scores = winners[i]
                        rows = conform_rows(take_scored(searcher, ids, scores, data_columns), schema, where)
                    else:
                        rows = conform_rows(searcher.search(query, data_columns, remaining), schema, where)
                break
            except CorruptSplitError:
                if attempt == 2:
                    raise
        for column in partition_columns:
            if column in wanted:
                value = partition_value(add.partition_values.get(column), schema.field(column).type)
                rows = rows.append_column(schema.field(column), pa.repeat(value, rows.num_rows))
        return rows.select([*wanted, SCORE_COLUMN] if scored else wanted)

    if limit is None and not scored and len(adds) > 1 and SEARCH_THREADS > 1:
        parts = _in_parallel(adds, searcher_of, opened, rows_of)
    else:
        parts = []
        remaining = limit
        for i, add in enumerate(adds):
            if remaining is not None and remaining <= 0 and not scored:
                break
            if scored and i not in winners:
                continue
            rows = rows_of(i, add, remaining)
            parts.append(rows)
            if remaining is not None and not scored:
                remaining -= rows.num_rows
    out_schema = pa.schema([schema.field(c) for c in wanted], metadata=schema.metadata)
    if scored:
        out_schema = out_schema.append(SCORE_FIELD)
    if not parts:
        return empty_table(out_schema)
    table = pa.concat_tables(parts)
    if scored:
        table = table.sort_by([(SCORE_COLUMN, "descending")])
        if limit is not None:
            table = table.slice(0, limit)
    return table


SCORE_FIELD = pa.field(SCORE_COLUMN, pa.float32(), nullable=False)
# Splits searched at once by a search without a limit: Tantivy releases the GIL while it searches
# and zstd/numpy while rows are read, so the cores share the splits.
SEARCH_THREADS = min(8, os.cpu_count() or 1)


def _in_parallel(
    adds: Sequence[AddAction],
    searcher_of: Callable[[AddAction], SplitSearcher],
    opened: dict[int, SplitSearcher],
    rows_of: Callable[[int, AddAction, int | None], pa.Table],
) -> list[pa.Table]:
    """Every split's rows, in ``adds`` order, searched by ``SEARCH_THREADS`` threads. The searchers
    are opened first, one after another (into ``opened``), as a serial search opens them; the
    largest splits are searched first, so that no large one is left for the end."""
    for i, add in enumerate(adds):
        opened[i] = searcher_of(add)
    largest_first = sorted(range(len(adds)), key=lambda i: -(adds[i].num_records or adds[i].size or 0))
    with ThreadPoolExecutor(min(SEARCH_THREADS, len(adds)), thread_name_prefix="indextables-search") as pool:
        found = {i: pool.submit(rows_of, i, adds[i], None) for i in largest_first}
        return [found[i].result() for i in range(len(adds))]


def take_scored(
    searcher: SplitSearcher,
    ids: np.ndarray,
    scores: np.ndarray,
    columns: Sequence[str],
    constants: Mapping[str, pa.Scalar] | None = None,
    row_ids: bool = False,
) -> pa.Table:
    """The split's rows ``ids`` (any order) with their ``scores`` as ``_score``, in row order
    (``columns`` may name ``constants``: partition columns); ``row_ids``: ``ROW_ID_COLUMN`` last."""
    constants = dict(constants or {})
    order = np.argsort(ids, kind="stable")
    id_array = numbers(ids[order], pa.uint64())
    data_columns = [c for c in columns if c not in constants]
    rows = searcher.rows_at(id_array, data_columns).append_column(ROW_ID_COLUMN, id_array)
    rows = rows.append_column(SCORE_FIELD, numbers(scores[order], pa.float32()))
    out = _with_constants(rows, {c: constants[c] for c in columns if c in constants})
    return out.select([*columns, SCORE_COLUMN, ROW_ID_COLUMN] if row_ids else [*columns, SCORE_COLUMN])


def table_score_stats(searchers: Sequence[SplitSearcher], query: str | filters.Filter) -> ScoreStats | None:
    """The BM25 statistics of ``query`` summed over ``searchers``: how one index over their rows would
    score it. None where a split's query has a part whose score is not modelled (``scoring``):
    scores are then each split's own."""
    parts = []
    for searcher in searchers:
        stats = searcher.score_stats(query)
        if stats is None:
            return None
        parts.append(stats)
    return ScoreStats.merged(parts)


def check_split_columns(searcher: SplitSearcher, columns: Sequence[str], where: str) -> None:
    """SplitSchemaError naming the split (``where``) if it lacks any of the table's ``columns``."""
    missing = [c for c in columns if c not in searcher.rows.column_names]
    if missing:
        raise SplitSchemaError(
            f"{where}: the split lacks the table's columns {missing} (its columns: {searcher.rows.column_names}); "
            "it was committed with another schema"
        )


def conform_rows(rows: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    """``rows`` of a split with the table's type for each column (``schema`` holds them all). A column
    is cast when both types index as the same Tantivy type (a narrower integer, a string view, a date
    in a timestamp column); otherwise, or when a value does not fit, SplitSchemaError names the split
    (``where``) and the column."""
    columns = []
    for name, column in zip(rows.column_names, rows.columns, strict=True):
        target = schema.field(name).type if name in schema.names else column.type
        if column.type != target:
            problem = None if _same_index_type(column.type, target) else "a different kind of value"
            if problem is None:
                try:
                    column = column.cast(target)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                    problem = str(e)
            if problem is not None:
                raise SplitSchemaError(
                    f"{where}: column {name!r} holds {column.type}, the table's type is {target} ({problem}); "
                    "the split was committed with another schema"
                )
        columns.append(column)
    return pa.table(columns, names=rows.column_names)


def _same_index_type(source: pa.DataType, target: pa.DataType) -> bool:
    try:
        return default_field_type(source, "") == default_field_type(target, "")
    except ConfigError:  # a type no split column has (e.g. null): let the cast decide
        return True


def scan_split(
    searcher: SplitSearcher,
    filter_plan: FilterPlan,
    columns: Sequence[str],
    constants: Mapping[str, pa.Scalar] | None = None,
    limit: int | None = None,
    row_ids: bool = False,
) -> pa.Table:
    """The split's rows matching ``filter_plan`` (index query, then the residual on the rows), in
    row order, at most ``limit`` of them. ``constants`` are columns with one value for the whole
    split (partition columns); ``columns`` may name them as well as the split's own columns.
    ``row_ids``: the rows' ids in the split follow as a last column, ``ROW_ID_COLUMN``."""
    constants = dict(constants or {})
    check_residual(filter_plan.residual, searcher.index_only)
    index_limit = limit if filter_plan.residual is None else None
    t0 = time.perf_counter_ns() if profiler.ENABLED else 0
    ids = searcher.row_ids(filter_plan.index, index_limit)
    if t0:
        profiler.record("query_search", t0)
        t0 = time.perf_counter_ns()
    data_columns = [c for c in columns if c not in constants]
    if filter_plan.residual is None:
        rows = take_rows(searcher.rows.select(data_columns), ids).append_column(ROW_ID_COLUMN, ids)
        if t0:
            profiler.record("doc_batch_retrieval", t0)
    else:
        rows = _with_constants(take_rows(searcher.rows, ids), constants).append_column(ROW_ID_COLUMN, ids)
        if t0:
            profiler.record("doc_batch_retrieval", t0)
            t0 = time.perf_counter_ns()
        rows = filter_rows(rows, filter_plan.residual, lambda q: searcher.row_ids(q))
        rows = rows.select([*data_columns, ROW_ID_COLUMN])
        if t0:
            profiler.record("residual_filter", t0)
    if limit is not None and rows.num_rows > limit:
        rows = rows.slice(0, limit)
    out = _with_constants(rows, {c: constants[c] for c in columns if c in constants})
    return out.select([*columns, ROW_ID_COLUMN] if row_ids else list(columns))


FIRST_BATCH_ROWS = 32  # rows of a split's first batch: a LIMIT, show() or head() stops after it
MAX_BATCH_ROWS = 65_536  # rows of a batch once they have grown
BATCH_GROWTH = 4  # each batch of a split this many times the rows of the one before, up to MAX_BATCH_ROWS


def scan_split_batches(
    searcher: SplitSearcher,
    filter_plan: FilterPlan,
    columns: Sequence[str],
    constants: Mapping[str, pa.Scalar] | None = None,
    limit: int | None = None,
    row_ids: bool = False,
    first_rows: int = FIRST_BATCH_ROWS,
    max_rows: int = MAX_BATCH_ROWS,
    probe: bool = True,
) -> Iterator[pa.Table]:
    """``scan_split``'s rows (the same rows, ``limit`` included) as a stream of tables, each read
    only when the one before it has been taken: the first of about ``first_rows`` hits, each next
    ``BATCH_GROWTH`` times larger, up to ``max_rows``. A consumer that stops early (Spark's
    ``CollectLimit`` under ``limit(1)``, ``show()``, ``head()``) has read only the rows of the
    batches it took (with rows in the doc stores: only their blocks).

    Without an index query the hits are the split's rows in order, and nothing is searched. With
    one and no ``limit``, a first search asks for ``first_rows`` hits only; the others (all of the
    query's hits, less those) are searched for when the batches of the first are taken. Each batch
    is in row order; with an index query and no limit, the first hits are the query's best ones
    and the rest follow (no row twice). A residual filter is applied to each batch (a batch may
    then be empty: it is not yielded). ``row_ids``: as ``scan_split``'s. ``probe=False`` (a consumer
    that has had its first rows already, from another split): one search for every hit, no first
    search (which costs nearly as much as the whole one: scoring visits every match).

    Example: ``next(scan_split_batches(searcher, FilterPlan(None, None), ["id"]))`` is the first
    256 rows' ids.
    """
    constants = dict(constants or {})
    check_residual(filter_plan.residual, searcher.index_only)
    if limit is not None and limit <= 0:
        return
    found: dict[filters.QueryString, pa.Array] = {}

    def query_rows(q: filters.QueryString) -> pa.Array:  # one search per query and split
        if q not in found:
            found[q] = searcher.row_ids(q)
        return found[q]

    data_columns = [c for c in columns if c not in constants]
    index_limit = limit if filter_plan.residual is None else None
    # a query's hits read fast-field columns from the fast fields, the others from the rows
    fast = [] if filter_plan.index is None or filter_plan.residual is not None else searcher.fast_columns(data_columns)
    remaining = limit
    size = max(1, first_rows)
    for ids, values in _hits_in_pieces(searcher, filter_plan.index, index_limit, size if probe else None, fast):
        start = 0
        while start < len(ids):
            if remaining is not None and remaining <= 0:
                return
            chunk = ids.slice(start, size)
            t0 = time.perf_counter_ns() if profiler.ENABLED else 0
            if filter_plan.residual is None:
                fast_values = {c: v.slice(start, len(chunk)) for c, v in values.items()}
                rows = searcher.rows_with(chunk, data_columns, fast_values).append_column(ROW_ID_COLUMN, chunk)
            else:
                rows = _with_constants(take_rows(searcher.rows, chunk), constants).append_column(ROW_ID_COLUMN, chunk)
            start += len(chunk)
            size = min(max_rows, size * BATCH_GROWTH)
            if t0:
                profiler.record("doc_batch_retrieval", t0)
            if filter_plan.residual is not None:
                t0 = time.perf_counter_ns() if profiler.ENABLED else 0
                rows = filter_rows(rows, filter_plan.residual, query_rows).select([*data_columns, ROW_ID_COLUMN])
                if t0:
                    profiler.record("residual_filter", t0)
            if remaining is not None:
                rows = rows.slice(0, remaining)
                remaining -= rows.num_rows
            if rows.num_rows:
                out = _with_constants(rows, {c: constants[c] for c in columns if c in constants})
                yield out.select([*columns, ROW_ID_COLUMN] if row_ids else list(columns))


def _hits_in_pieces(
    searcher: SplitSearcher,
    index: filters.Filter | str | None,
    limit: int | None,
    first: int | None,
    fast: Sequence[str],
) -> Iterator[tuple[pa.Array, dict[str, pa.Array]]]:
    """The row ids (uint64, ascending within each piece) of the hits of ``index`` in the split, at
    most ``limit``, with the values of the ``fast`` columns (``SplitSearcher.fast_columns``) of each,
    in pieces searched one after the other: without a query, the first rows (no search); with a
    limit, or ``first`` None, one search; else the first ``first`` hits, then the rest (one more
    search, only if the first piece is taken and there are more)."""
    n = searcher.num_docs if limit is None else min(limit, searcher.num_docs)
    if index is None:
        yield numbers(np.arange(n), pa.uint64()), {}
        return
    if limit is not None or first is None or n <= first:
        yield _searched(searcher, index, limit, fast)
        return
    probe, probe_values = _searched(searcher, index, first, fast)
    yield probe, probe_values
    if len(probe) < first:
        return  # every hit
    every, values = _searched(searcher, index, None, fast)
    keep = bools(~np.isin(as_numpy(every), as_numpy(probe), assume_unique=True))
    yield every.filter(keep), {c: v.filter(keep) for c, v in values.items()}


def _searched(
    searcher: SplitSearcher, index: filters.Filter | str, limit: int | None, fast: Sequence[str]
) -> tuple[pa.Array, dict[str, pa.Array]]:
    t0 = time.perf_counter_ns() if profiler.ENABLED else 0
    if not fast:
        ids, values = searcher.row_ids(index, limit), {}
    else:
        ids, addresses, order = searcher.row_hits(index, limit)
        values = searcher.fast_values(fast, addresses, order)
    if t0:
        profiler.record("query_search", t0)
    return ids, values


def scan_split_scored(
    searcher: SplitSearcher,
    filter_plan: FilterPlan,
    columns: Sequence[str],
    stats: ScoreStats | None,
    constants: Mapping[str, pa.Scalar] | None = None,
    top_k: int | None = None,
    row_ids: bool = False,
) -> pa.Table:
    """``scan_split``'s rows with their BM25 score as a column ``_score`` after ``columns`` (with the
    table's ``stats``, else the split's own): at most ``top_k`` rows, the best (in row order). The
    score is the index query's: its query strings score, its comparisons only filter. ``row_ids``:
    the rows' ids in the split follow as a last column, ``ROW_ID_COLUMN``."""
    constants = dict(constants or {})
    check_residual(filter_plan.residual, searcher.index_only)
    if filter_plan.index is None:
        raise QueryError(f"{SCORE_COLUMN}: the filter {filter_plan.residual!r} has no index query to score")
    k = top_k if filter_plan.residual is None else None
    t0 = time.perf_counter_ns() if profiler.ENABLED else 0
    ids, scores = searcher.scored(filter_plan.index, k, stats)
    if t0:
        profiler.record("query_search", t0)
    found_ids = as_numpy(ids)
    order = np.argsort(found_ids, kind="stable")  # rows are taken in row order
    sorted_ids = found_ids[order]
    sorted_scores = scores[order]
    id_array = numbers(sorted_ids, pa.uint64())
    data_columns = [c for c in columns if c not in constants]
    if filter_plan.residual is None:
        rows = searcher.rows_at(id_array, data_columns).append_column(ROW_ID_COLUMN, id_array)
        kept_scores = sorted_scores
    else:
        rows = _with_constants(take_rows(searcher.rows, id_array), constants).append_column(ROW_ID_COLUMN, id_array)
        rows = filter_rows(rows, filter_plan.residual, lambda q: searcher.row_ids(q))
        rows = rows.select([*data_columns, ROW_ID_COLUMN])
        kept_ids = as_numpy(rows[ROW_ID_COLUMN])
        kept_scores = sorted_scores[np.searchsorted(sorted_ids, kept_ids)]
    rows = rows.append_column(SCORE_FIELD, numbers(kept_scores, pa.float32()))
    if top_k is not None and rows.num_rows > top_k:
        best = np.sort(np.argsort(-kept_scores.astype(np.float64), kind="stable")[:top_k])
        rows = rows.take(numbers(best, pa.int64()))
    out = _with_constants(rows, {c: constants[c] for c in columns if c in constants})
    return out.select([*columns, SCORE_COLUMN, ROW_ID_COLUMN] if row_ids else [*columns, SCORE_COLUMN])


def scan_split_ordered(
    searcher: SplitSearcher,
    filter_plan: FilterPlan,
    columns: Sequence[str],
    order: tuple[str, bool, bool],
    k: int,
    constants: Mapping[str, pa.Scalar] | None = None,
) -> pa.Table:
    """The split's best ``k`` rows matching ``filter_plan`` by ``order`` (column, descending, nulls first:
    Spark's ``ORDER BY column ... LIMIT k``), as ``columns``. For every hit only its row id and its value
    of the column are read (from the column's fast field where ``fast_columns`` has it, else that one
    column of the rows); the rows of the best ``k`` alone are taken. A filter left for the rows reads
    the rows of every hit, filters them, then keeps the best."""
    column, descending, nulls_first = order
    constants = dict(constants or {})
    check_residual(filter_plan.residual, searcher.index_only)
    data_columns = [c for c in columns if c not in constants]
    if filter_plan.residual is not None or column in constants:
        rows = scan_split(searcher, filter_plan, columns, constants)
        return rows.take(numbers(order_positions(rows[column], descending, nulls_first, k), pa.int64()))
    t0 = time.perf_counter_ns() if profiler.ENABLED else 0
    index = filter_plan.index
    fast = [] if index is None else searcher.fast_columns([column])
    if fast and index is not None:
        ids, addresses, positions = searcher.row_hits(index)
        values = searcher.fast_values(fast, addresses, positions)[column]
    else:
        ids = searcher.row_ids(index)
        values = take_rows(searcher.rows.select([column]), ids)[column]
    if t0:
        profiler.record("query_search", t0)
        t0 = time.perf_counter_ns()
    best = np.sort(order_positions(values, descending, nulls_first, k))  # ascending row ids: take_rows' fast case
    chosen = ids.take(numbers(best, pa.int64()))
    rows = take_rows(searcher.rows.select(data_columns), chosen)
    if t0:
        profiler.record("doc_batch_retrieval", t0)
    return _with_constants(rows, {c: constants[c] for c in columns if c in constants}).select(list(columns))


def check_residual(residual: filters.Filter | None, index_only: Sequence[str]) -> None:
    """QueryError if a filter left for the rows names an index-only column (its values are not stored)."""
    if residual is None:
        return
    named = sorted(filters.columns_of(residual) & set(index_only))
    if named:
        raise QueryError(
            f"filter {residual!r} cannot be answered: columns {named} are index-only "
            "(spark.indextables.indexing.indexonly), so their values are not stored and only filters the "
            "index answers exactly can use them"
        )


def _with_constants(table: pa.Table, constants: Mapping[str, pa.Scalar]) -> pa.Table:
    for name, value in constants.items():
        if name not in table.column_names:
            table = table.append_column(pa.field(name, value.type), pa.repeat(value, table.num_rows))
    return table
