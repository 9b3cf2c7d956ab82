"""Searching a whole table in one process (no Spark): every live split, through the split cache.

Each live split comes from the node's ``SplitCache`` (downloaded once, then local) and is
searched with ``SplitSearcher``; partition columns are added from the split's partition values.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from executor_lib import profiler
from executor_lib.cache.split_cache import CacheEntry, SplitCache
from executor_lib.cache.split_pieces import SplitPieces
from executor_lib.protocol.actions import AddAction, parquet_table_root
from executor_lib.splits.doc_mapping import default_field_type
from executor_lib.splits.query.pushdown import ROW_ID_COLUMN, FilterPlan, filter_rows
from executor_lib.splits.rows.take import take_rows
from executor_lib.splits.search.ranking import best_of, order_positions
from executor_lib.splits.search.scoring import SCORE_COLUMN, ScoreStats
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.storage.base import ObjectStore
from indextables_contract import filters
from indextables_contract.errors import (
    ConfigError,
    CorruptLogError,
    CorruptSplitError,
    IndexEngineError,
    QueryError,
    SplitSchemaError,
)

if TYPE_CHECKING:  # an executor's read needs no transaction log code (a fresh Python worker imports less)
    from executor_lib.log.snapshot import Snapshot

_OPEN_SEARCHERS: OrderedDict[str, SplitSearcher] = OrderedDict()
_OPEN_LOCK = threading.Lock()
MAX_OPEN_SEARCHERS = 64
# what opening a split with damaged bytes raises (a flipped segment id in meta.json: a KeyError);
# ArrowInvalid is a ValueError, ArrowIOError an OSError
_DAMAGE = (CorruptLogError, OSError, ValueError, KeyError, IndexError, TypeError)


def open_searcher(
    cache: SplitCache,
    store: ObjectStore,
    path: str,
    arrow_schema: pa.Schema,
    doc_mapping: str | None,
    size: int | None = None,
    footer_start: int | None = None,
    companion_root: str | None = None,
) -> SplitSearcher:
    """A searcher over the split at ``path`` (through the node's split cache), kept open for the
    next query in this process (Spark reuses Python workers): splits are immutable, so an open
    searcher never goes stale — it is keyed by the cached file's identity, so a copy fetched
    again (replaced, repaired) gets a new searcher. ``size``: the add action's (see ``load_split``);
    ``footer_start`` its ``footerStartOffset`` (a cold split's footer is then one ranged read);
    ``companion_root`` a companion table's source root (``SplitSearcher``).
    The profiler (when on) times it as ``split_open`` and counts ``searcher`` hits and misses."""
    if not profiler.ENABLED:
        return _open_searcher(cache, store, path, arrow_schema, doc_mapping, size, footer_start, companion_root)
    t0 = time.perf_counter_ns()
    searcher = _open_searcher(cache, store, path, arrow_schema, doc_mapping, size, footer_start, companion_root)
    profiler.record("split_open", t0)
    return searcher


def _open_searcher(
    cache: SplitCache,
    store: ObjectStore,
    path: str,
    arrow_schema: pa.Schema,
    doc_mapping: str | None,
    size: int | None,
    footer_start: int | None,
    companion_root: str | None = None,
) -> SplitSearcher:
    key = cache.pieces_identity(store, path)  # a split fetched by the piece, kept open: one stat
    if key is not None:
        with _OPEN_LOCK:
            searcher = _OPEN_SEARCHERS.get(key)
            if searcher is not None and searcher.pieces is not None and size in (None, searcher.pieces.size):
                _OPEN_SEARCHERS.move_to_end(key)
                cache.count_hit(store, path)
                if profiler.ENABLED:
                    profiler.cache_event("searcher", True)
                return searcher
    pieces = _pieces(cache, store, path, size, footer_start)
    key = cache.pieces_identity(store, path) if pieces is not None else None
    if pieces is not None and key is not None:
        searcher = _open_healing(cache, store, path, arrow_schema, doc_mapping, size, footer_start, None, pieces)
        _remember_searcher(cache.pieces_identity(store, path) or key, searcher)
        if profiler.ENABLED:
            profiler.cache_event("searcher", False)
        return searcher
    entry = cache.get(store, path, size)
    key = _whole_key(cache, store, path, size, entry, companion_root)
    with _OPEN_LOCK:
        searcher = _OPEN_SEARCHERS.get(key)
        if searcher is not None:
            _OPEN_SEARCHERS.move_to_end(key)
            if profiler.ENABLED:
                profiler.cache_event("searcher", True)
            return searcher
    searcher = _open_healing(
        cache, store, path, arrow_schema, doc_mapping, size, footer_start, companion_root, counted=False
    )
    if searcher.pieces is not None:  # (fetched by the piece after all: the whole copy was dropped meanwhile)
        key = cache.pieces_identity(store, path) or key
    else:
        key = _whole_key(cache, store, path, size, cache.get(store, path, size, count=False), companion_root)
    _remember_searcher(key, searcher)
    if profiler.ENABLED:
        profiler.cache_event("searcher", False)
    return searcher


def _whole_key(
    cache: SplitCache, store: ObjectStore, path: str, size: int | None, entry: CacheEntry, companion_root: str | None
) -> str:
    """The identity of a whole cached copy an open searcher is kept under (a copy fetched again has another)."""
    try:
        st = entry.split.stat()
    except FileNotFoundError:  # evicted by another process just now: fetch it again
        entry = cache.get(store, path, size)
        st = entry.split.stat()
    return f"{entry.split}@{st.st_ino}:{st.st_mtime_ns}:{st.st_size}|{companion_root}"  # (a JVM companion's rows)


def _open_healing(
    cache: SplitCache,
    store: ObjectStore,
    path: str,
    arrow_schema: pa.Schema,
    doc_mapping: str | None,
    size: int | None,
    footer_start: int | None,
    companion_root: str | None,
    pieces: SplitPieces | None = None,
    counted: bool = True,
) -> SplitSearcher:
    """Open a searcher over the cached split (``pieces``: as fetched by the piece already), its cached
    files checked first (``SplitCache.get``'s ``verify``, ``SplitPieces.load``'s checksums); a copy
    that does not open is dropped and fetched again once, so only a split damaged at its source fails
    (CorruptSplitError naming it). ``counted``: False where the caller's own lookup counted the hit."""
    for attempt in (1, 2):
        try:
            if pieces is None:
                pieces = _pieces(cache, store, path, size, footer_start)
            if pieces is not None:
                return _open_pieces(cache, store, path, pieces, arrow_schema, doc_mapping)
            entry = cache.get(store, path, size, verify=True, count=counted)
            return _open(cache, store, path, entry, arrow_schema, doc_mapping, companion_root)
        except CorruptSplitError:
            if attempt == 2:
                raise
            pieces = None
            cache.discard(store, path)  # (dropped already when it did not open; a bad footer or size too)
    raise AssertionError("unreachable")


def _remember_searcher(key: str, searcher: SplitSearcher) -> None:
    """Keep an opened searcher for reuse, the least recently used dropped past ``MAX_OPEN_SEARCHERS``."""
    with _OPEN_LOCK:
        _OPEN_SEARCHERS[key] = searcher
        while len(_OPEN_SEARCHERS) > MAX_OPEN_SEARCHERS:
            _OPEN_SEARCHERS.popitem(last=False)


def load_split(
    cache: SplitCache,
    store: ObjectStore,
    path: str,
    arrow_schema: pa.Schema,
    doc_mapping: str | None,
    size: int | None = None,
    footer_start: int | None = None,
    companion_root: str | None = None,
) -> SplitSearcher:
    """Open the split at ``path`` from the cache (by the piece where ``SplitCache.pieces`` says so).
    ``size`` is the add action's size: a cached copy of another size is fetched again, a fetched
    split of another size is refused; ``footer_start`` its ``footerStartOffset``. A split that
    does not open, or whose cached files differ from their checksums, has its cached copy dropped and
    fetched again once (``_open_healing``); a split that still does not open raises CorruptSplitError
    naming the table's split, not the cache file."""
    return _open_healing(cache, store, path, arrow_schema, doc_mapping, size, footer_start, companion_root)


def _pieces(
    cache: SplitCache, store: ObjectStore, path: str, size: int | None, footer_start: int | None
) -> SplitPieces | None:
    """The split fetched by the piece (``SplitCache.pieces``), or None to fetch it whole (a footer
    that does not parse, or a short read, is CorruptSplitError naming the table's split)."""
    return cache.pieces(store, path, size, footer_start)


def _open_pieces(
    cache: SplitCache, store: ObjectStore, path: str, pieces: SplitPieces, arrow_schema: pa.Schema, mapping: str | None
) -> SplitSearcher:
    return _opened(
        cache,
        store,
        path,
        lambda: SplitSearcher(store.uri_of(path), pieces.entry, arrow_schema, mapping, pieces=pieces),
    )


def _open(
    cache: SplitCache,
    store: ObjectStore,
    path: str,
    entry: CacheEntry,
    arrow_schema: pa.Schema,
    mapping: str | None,
    companion_root: str | None = None,
) -> SplitSearcher:
    return _opened(
        cache,
        store,
        path,
        lambda: SplitSearcher(entry.split, entry.directory, arrow_schema, mapping, companion_root=companion_root),
    )


def _opened(cache: SplitCache, store: ObjectStore, path: str, make: Callable[[], SplitSearcher]) -> SplitSearcher:
    """``make()``: a searcher of the cached split ``path``; a split that does not open (damaged bytes,
    a Rust panic) has its cached copy dropped and is CorruptSplitError named as the table's split."""
    try:
        return make()
    except BaseException as e:  # a Rust panic (pyo3's PanicException) is a BaseException
        if not isinstance(e, _DAMAGE) and type(e).__name__ != "PanicException":
            raise
        cache.discard(store, path)
        if isinstance(e, CorruptSplitError):  # found damaged: named as the table's split
            raise CorruptSplitError(
                f"{cache.named_as_source(store, path, e.message)}; its cached copy was dropped"
            ) from e
        raise CorruptSplitError(
            f"{store.uri_of(path)}: the split cannot be read ({type(e).__name__}: {e}); its cached copy was dropped"
        ) from e


@contextlib.contextmanager
def damage_of_split(cache: SplitCache, store: ObjectStore, path: str) -> Iterator[None]:
    """Run work on one split; an error that means its bytes are damaged (Arrow or I/O errors, an index
    out of range, a Tantivy failure) drops the split's cached copy, so a repaired split is fetched
    again, and becomes CorruptSplitError naming the table's split. Query and option errors pass.

    Example: ``with damage_of_split(cache, store, add.path): rows = scan_split(searcher, ...)``.
    """
    try:
        yield
    except CorruptSplitError as e:  # found damaged while read (a doc store block that does not decode)
        cache.discard(store, path)
        raise CorruptSplitError(f"{cache.named_as_source(store, path, e.message)}; its cached copy was dropped") from e
    except (pa.ArrowException, OSError, IndexError, IndexEngineError) as e:
        cache.discard(store, path)
        raise CorruptSplitError(
            f"{store.uri_of(path)}: the split cannot be searched ({type(e).__name__}: {e}); its cached copy was dropped"
        ) from e


def search_table(
    store: ObjectStore,
    snapshot: Snapshot,
    query: str | None,
    cache: SplitCache,
    columns: Sequence[str] | None = None,
    limit: int | None = None,
    scored: bool = False,
) -> pa.Table:
    """Rows of every live split matching ``query`` (Tantivy syntax), up to ``limit`` in total.
    ``scored``: the best ``limit`` rows by BM25 score with table-wide statistics, best first, with
    their score as a last column ``_score`` (float32); needs a query."""
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
    adds = sorted(snapshot.files, key=lambda a: a.path)

    def searcher_of(add: AddAction) -> SplitSearcher:  # opened (and its cached files checked) per search
        return load_split(
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
        found = {}
        for i, add in enumerate(adds):
            with damage_of_split(cache, store, add.path):
                ids, scores = opened[i].scored(query, limit, stats)
            found[i] = (ids.to_numpy().astype(np.int64), scores)
        winners = best_of(found, limit)  # rows are read for the best ``limit`` of the table only
    parts: list[pa.Table] = []
    remaining = limit
    for i, add in enumerate(adds):
        if remaining is not None and remaining <= 0 and not scored:
            break
        if scored and i not in winners:
            continue
        where = f"split {store.uri_of(add.path)} of table {snapshot.table_uri}"
        for attempt in (1, 2):  # damage found while searching drops the cached copy: fetched again once
            searcher = opened[i] if scored and attempt == 1 else searcher_of(add)
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
                value = pa.scalar(add.partition_values.get(column)).cast(schema.field(column).type)
                rows = rows.append_column(schema.field(column), pa.array([value.as_py()] * rows.num_rows, value.type))
        parts.append(rows.select([*wanted, SCORE_COLUMN] if scored else wanted))
        if remaining is not None and not scored:
            remaining -= rows.num_rows
    out_schema = schema.empty_table().select(wanted).schema
    if scored:
        out_schema = out_schema.append(SCORE_FIELD)
    if not parts:
        return out_schema.empty_table()
    table = pa.concat_tables(parts)
    if scored:
        table = table.sort_by([(SCORE_COLUMN, "descending")])
        if limit is not None:
            table = table.slice(0, limit)
    return table


SCORE_FIELD = pa.field(SCORE_COLUMN, pa.float32(), nullable=False)


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
    id_array = pa.array(ids[order], pa.uint64())
    data_columns = [c for c in columns if c not in constants]
    rows = take_rows(searcher.rows.select(data_columns), id_array).append_column(ROW_ID_COLUMN, id_array)
    rows = rows.append_column(SCORE_FIELD, pa.array(scores[order], pa.float32()))
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
        yield pa.array(np.arange(n, dtype=np.uint64)), {}
        return
    if limit is not None or first is None or n <= first:
        yield _searched(searcher, index, limit, fast)
        return
    probe, probe_values = _searched(searcher, index, first, fast)
    yield probe, probe_values
    if len(probe) < first:
        return  # every hit
    every, values = _searched(searcher, index, None, fast)
    rest = every.to_numpy(zero_copy_only=False)
    keep = pa.array(~np.isin(rest, probe.to_numpy(zero_copy_only=False), assume_unique=True))
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
    order = np.argsort(ids.to_numpy(), kind="stable")  # rows are taken in row order
    sorted_ids = ids.to_numpy()[order]
    sorted_scores = scores[order]
    id_array = pa.array(sorted_ids, pa.uint64())
    data_columns = [c for c in columns if c not in constants]
    if filter_plan.residual is None:
        rows = take_rows(searcher.rows.select(data_columns), id_array).append_column(ROW_ID_COLUMN, id_array)
        kept_scores = sorted_scores
    else:
        rows = _with_constants(take_rows(searcher.rows, id_array), constants).append_column(ROW_ID_COLUMN, id_array)
        rows = filter_rows(rows, filter_plan.residual, lambda q: searcher.row_ids(q))
        rows = rows.select([*data_columns, ROW_ID_COLUMN])
        kept_ids = rows[ROW_ID_COLUMN].to_numpy()
        kept_scores = sorted_scores[np.searchsorted(sorted_ids, kept_ids)]
    rows = rows.append_column(SCORE_FIELD, pa.array(kept_scores, pa.float32()))
    if top_k is not None and rows.num_rows > top_k:
        best = np.sort(np.argsort(-kept_scores.astype(np.float64), kind="stable")[:top_k])
        rows = rows.take(pa.array(best))
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
        return rows.take(pa.array(order_positions(rows[column], descending, nulls_first, k), pa.int64()))
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
    chosen = ids.take(pa.array(best, pa.int64()))
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
