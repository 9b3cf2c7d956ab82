"""The batch writer of ``format("indextables")``.

* ``IndexTablesWriter`` is built beside the driver, before any task: options, schemas, doc mappings
  and the table's protocol are checked there, so bad input fails the job before anything is written.
* ``IndexTablesWriter.write`` runs on executors: Arrow batches become splits (at most
  ``MAX_OPEN_SPLITS`` open per task, one per partition value), uploaded in the background.
* ``commit`` / ``abort`` run on the driver side: one version with all the adds (and, for overwrite,
  removes of every live file), or deletion of the uploaded splits.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from executor_lib import failpoints
from executor_lib.protocol.actions import COMPANION_ENABLED, AddAction, removes_of
from executor_lib.spark import options as O
from executor_lib.spark.after_write import after_commit, check_settings, optimize_adds
from executor_lib.spark.common import delete_quietly, delete_uncommitted, open_table_log, parsed_option, require_path
from executor_lib.spark.progress import TaskProgress, interval_seconds
from indextables_contract import settings as S
from indextables_contract.errors import (
    BatchAlreadyCommittedError,
    ConfigError,
    IndexTablesError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from indextables_contract.row_changes import OPTION as ROW_CHANGE_OPTION
from indextables_contract.row_changes import TXN_APP_ID, TXN_VERSION, RowChange

if TYPE_CHECKING:
    from executor_lib.log.snapshot import Snapshot
    from executor_lib.log.state.streaming_txns import StreamingTxn
    from executor_lib.storage.base import ObjectStore

log = logging.getLogger(__name__)


DEFAULT_TARGET_RECORDS: int = S.OPTIMIZE_WRITE_TARGET_RECORDS.value


MAX_OPEN_SPLITS = 4  # splits a write task indexes at once (one per partition value), each with its own heap


@dataclass
class IndexTablesCommitMessage(WriterCommitMessage):
    adds: list[AddAction] = field(default_factory=list)


class IndexTablesWriter(DataSourceArrowWriter):
    """Executors index their rows into splits and upload them; the driver side commits one version."""

    def __init__(self, raw_options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        from executor_lib.splits.doc_mapping import DocMapping, mapping_for
        from executor_lib.table_schema import virtual_column_problem

        self.path = require_path(raw_options, "write")
        self.overwrite = overwrite
        self.arrow_schema: pa.Schema = _plain_types(to_arrow_schema(schema, timezone="UTC"))
        names = self.arrow_schema.names
        for name in names:
            problem = virtual_column_problem(name)
            if problem is not None:
                raise ConfigError(f"write {self.path}: column {name!r}: {problem}; nothing was written")
        self.options = O.canonical_options(raw_options, O.WRITE_KEYS, O.WRITE_COLUMN_PREFIXES, names, "write")
        # a DELETE, UPDATE or MERGE INTO: its commit replaces the splits it read (row_changes.commit_row_change)
        self.row_change: RowChange | None = RowChange.from_options(self.options)
        if self.row_change is not None and overwrite:
            raise ConfigError(f"write {self.path}: option {ROW_CHANGE_OPTION} is a row change's, written as an append")
        requested = parsed_option(self.options, "partitionBy", lambda k, v: O.parse_columns(k, v, names), None)
        existing = self._existing_table()
        # The version this job read (-1: no table): a version after it may name this job's uploads, so a
        # failed or aborted job deletes only what none of them names (``delete_uncommitted``).
        self.read_version: int = existing.version if existing is not None else -1
        self.writer_version: int | None = (  # the table's minWriterVersion (None: no table, or legacy)
            existing.protocol.min_writer_version if existing is not None and existing.protocol is not None else None
        )
        if existing is not None:
            self._check_compatible(existing, requested)
            self.partition_columns = list(existing.partition_columns)
        else:
            self.partition_columns = requested or []
        indexing = {k: v for k, v in self.options.items() if k.startswith(S.INDEXING_PREFIX)}
        inherited = self._inherited_mapping(existing) if existing is not None and not indexing else None
        if inherited is None:
            inherited = mapping_for(self.arrow_schema, indexing, self.partition_columns).to_json()
        self.mapping_json: str = inherited
        DocMapping.from_json(self.mapping_json)
        self.target_records: int = S.OPTIMIZE_WRITE_TARGET_RECORDS.get(self.options)
        self.target_bytes: int | None = S.AUTO_SIZE_TARGET_SPLIT_SIZE.get(self.options)
        self.heap_bytes: int | None = S.INDEX_WRITER_HEAP_SIZE.get(self.options)
        self.threads: int | None = S.INDEX_WRITER_THREADS.get(self.options)
        self.progress_interval = interval_seconds(self.options)
        self.temp_dir: str | None = S.INDEX_WRITER_TEMP_DIRECTORY.get(self.options) or None
        check_settings(self.path, self.options)  # merge-, purge- and optimize-on-write
        # an idempotent write (txnAppId, txnVersion): skipped, no task indexing a row, when the table
        # already holds it (checked again at the commit, which records it)
        self.txn: StreamingTxn | None = idempotent_txn(self.path, self.options)
        self.skip = False
        if self.txn is not None:
            require_avro_state(self, f"write {self.path}: options {TXN_APP_ID} and {TXN_VERSION}")
            self.skip = existing is not None and _holds_txn(self.path, self.options, self.txn)

    # -- driver side, before any task --

    def _existing_table(self) -> Any:
        try:
            return open_table_log(self.path, self.options).snapshot()
        except TableNotFoundError:
            return None

    def _check_compatible(self, snapshot: Snapshot, requested: list[str] | None) -> None:
        if snapshot.metadata.configuration.get(COMPANION_ENABLED) == "true":
            raise ConfigError(
                f"write {self.path}: the table is a companion index (its rows live in the source table "
                f"{snapshot.metadata.configuration.get('indextables.companion.sourceTablePath')!r}); companion "
                "indexes are read-only: run BUILD INDEXTABLES COMPANION again to sync it"
            )
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

    def _inherited_mapping(self, snapshot: Snapshot) -> str | None:
        """Appends without indexing options keep the doc mapping of the table's newest split."""
        newest = snapshot.newest_file()
        if newest is None:
            return None
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

        if self.skip:
            return IndexTablesCommitMessage([])
        store = open_store(self.path, **O.storage_and_log_options(self.options))
        mapping = DocMapping.from_json(self.mapping_json)
        threads = self.threads or _task_cores()
        progress = TaskProgress(f"write {self.path}", self.progress_interval)
        if self.temp_dir is not None:
            Path(self.temp_dir).mkdir(parents=True, exist_ok=True)
        with (
            tempfile.TemporaryDirectory(prefix="indextables-write-", dir=self.temp_dir) as tmp,
            _Uploads(store, progress) as uploads,
        ):
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
                        progress.indexed(part.num_rows, len(builders))
                        if builder.num_rows >= self.target_records or (
                            self.target_bytes is not None and builder.nbytes >= self.target_bytes
                        ):
                            uploads.submit(self._values(key), builders.pop(key).finish())
                for key in list(builders):
                    uploads.submit(self._values(key), builders.pop(key).finish())
                adds = uploads.wait()
                progress.done()
                return IndexTablesCommitMessage(adds)
            except BaseException:
                for builder in builders.values():
                    builder.close()
                delete_quietly(store, [a.path for a in uploads.wait(quiet=True)])
                raise

    def _builder(self, mapping: Any, tmp: Path, threads: int) -> Any:
        from executor_lib.splits.write.writer import SplitBuilder

        return SplitBuilder(mapping, tmp, self.heap_bytes, threads)

    def _values(self, key: tuple[Any, ...]) -> dict[str, str | None]:
        return dict(zip(self.partition_columns, (_partition_string(v) for v in key), strict=True))

    # -- driver side, after the tasks --

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """One version with every task's adds (an optimized write merges each partition's first), then
        merge-on-write and purge-on-write (``executor_lib.spark.after_write``; their failures are warnings)."""
        adds = [a for m in messages if isinstance(m, IndexTablesCommitMessage) for a in m.adds]
        if len(adds) > 1:
            from executor_lib.storage import open_store

            store = open_store(self.path, **O.storage_and_log_options(self.options))
            adds = optimize_adds(self.path, store, adds, self.mapping_json, self.arrow_schema, self.options)
        version = self.commit_adds(adds, self._commit_write)
        failpoints.reach("spark.commit.after")
        after_commit(self.path, self.options, version)

    def _commit_write(self, txlog: Any, adds: list[AddAction]) -> int | None:
        if self.skip:
            log.info("write %s: %s was already committed (checked before the job); skipped", self.path, self.txn)
            return None
        # the transaction is recorded on the adds (a write of no row records none: nothing to replay)
        txn = self.txn if adds else None
        try:
            return self._commit_once(txlog, adds, txn)
        except BatchAlreadyCommittedError as e:  # a concurrent or earlier run of the same write committed it
            log.info("%s", e)
            self._delete_uploaded(adds)
            return None

    def _commit_once(self, txlog: Any, adds: list[AddAction], txn: StreamingTxn | None) -> int | None:
        params = {} if txn is None else {TXN_APP_ID: txn.app_id, TXN_VERSION: str(txn.batch_id)}
        if self.row_change is not None:
            from executor_lib.spark.commands.row_changes import commit_row_change

            return commit_row_change(txlog, self.row_change, adds, txn, params)
        if self.overwrite:
            snapshot = txlog.snapshot()
            removes = removes_of(snapshot.files, data_change=True)
            return int(
                txlog.commit(
                    [*removes, *adds],
                    read_version=snapshot.version,
                    operation="WRITE",
                    operation_parameters={"mode": "Overwrite", **params},
                    fail_on_concurrent_add=True,
                    streaming_txn=txn,
                    new_files=True,  # uploaded by this job's tasks under new names
                )
            )
        if adds:
            return int(
                txlog.commit(
                    adds,
                    operation="WRITE",
                    operation_parameters={"mode": "Append", **params},
                    streaming_txn=txn,
                    new_files=True,
                )
            )
        return None

    def commit_adds(
        self,
        adds: list[AddAction],
        commit: Callable[[Any, list[AddAction]], Any],
        cleanup: Callable[[list[AddAction]], None] | None = None,
    ) -> Any:
        """Open the table (creating it on the first write) and run ``commit(txlog, adds)``; its result.
        If the commit fails, the uploads no committed version names are deleted (``cleanup``, default
        ``_delete_uploaded``) and a version 0 created here is undone."""
        from executor_lib import create_table

        options: dict[str, Any] = dict(O.storage_and_log_options(self.options))
        created: str | None = None  # the metaData id of the version 0 this write created
        try:
            txlog = open_table_log(self.path, self.options)
        except TableNotFoundError:
            try:
                txlog = create_table(self.path, self.arrow_schema, self.partition_columns, **options)
                created = txlog.snapshot().metadata.id
            except TableAlreadyExistsError:
                txlog = open_table_log(self.path, self.options)
        failpoints.reach("spark.commit.before")
        try:
            return commit(txlog, adds)
        except IndexTablesError:
            (cleanup or self._delete_uploaded)(adds)
            if created is not None:
                _undo_create(txlog, created)
            raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Spark aborts a failed job, also when the worker running ``commit`` died after its version
        landed: the uploads no committed version names are deleted, never one it names."""
        adds = [a for m in messages if isinstance(m, IndexTablesCommitMessage) for a in m.adds]
        self._delete_uploaded(adds)

    def _delete_uploaded(self, adds: list[AddAction]) -> None:
        delete_uncommitted(self.path, self.options, [a.path for a in adds], self.read_version)


def idempotent_txn(path: str, options: dict[str, Any]) -> StreamingTxn | None:
    """The write's ``txnAppId`` and ``txnVersion`` (both or neither), or None.

    >>> idempotent_txn("/t", {"txnAppId": "orders", "txnVersion": "7"})
    StreamingTxn(app_id='orders', batch_id=7)
    """
    from executor_lib.log.state.streaming_txns import StreamingTxn

    app_id, version = options.get(TXN_APP_ID), options.get(TXN_VERSION)
    if app_id is None and version is None:
        return None
    if not app_id or version is None:
        given, missing = (TXN_APP_ID, TXN_VERSION) if app_id else (TXN_VERSION, TXN_APP_ID)
        raise ConfigError(
            f"write {path}: option {given} needs {missing} too (an idempotent write names its application "
            f"and the version of its data, as foreachBatch's batch id); nothing was written"
        )
    text = str(version).strip()
    if not text.isdigit():
        raise ConfigError(
            f"write {path}: option {TXN_VERSION}={version!r}: expected an integer >= 0; nothing was written"
        )
    return StreamingTxn(str(app_id), int(text))


def require_avro_state(writer: IndexTablesWriter, what: str) -> None:
    """Refuse a write recording streaming transaction identifiers to a table without the Avro state
    format, where they are kept (``what`` names the write)."""
    configured = (S.STATE_FORMAT.raw(writer.options) or S.STATE_FORMAT.default).lower()
    old_table = writer.writer_version is not None and writer.writer_version < 4
    if configured != "avro" or old_table:
        raise ConfigError(
            f"{what} need the Avro state format (protocol v4, spark.indextables.state.format=avro), where the "
            "streaming transaction identifiers are kept"
            + ("; run CHECKPOINT INDEXTABLES on the table to upgrade it" if old_table else "")
        )


def _holds_txn(path: str, options: dict[str, Any], txn: StreamingTxn) -> bool:
    known = open_table_log(path, options).streaming_txns().get(txn.app_id)
    return known is not None and known.batch_id >= txn.batch_id


def _undo_create(txlog: Any, metadata_id: str) -> None:
    """A first write whose data commit failed leaves no empty table behind: the version 0 it created
    is deleted while it is still the table's only version and still its own (same metaData id).
    Best effort: a failure here is logged, and the failed write's error is what the user sees."""
    from executor_lib.protocol.files import LOG_DIR, version_file

    try:
        snapshot = txlog.snapshot()
        if snapshot.version == 0 and snapshot.metadata.id == metadata_id and not snapshot.num_files:
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

    def __init__(self, store: ObjectStore, progress: TaskProgress) -> None:
        self.store = store
        self.progress = progress
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="indextables-upload")
        self.futures: list[Future[AddAction]] = []

    def __enter__(self) -> _Uploads:
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.shutdown(wait=True)

    def submit(self, partition_values: dict[str, str | None], written: Any) -> None:
        self.futures.append(self.pool.submit(self._upload, partition_values, written))

    def _upload(self, partition_values: dict[str, str | None], written: Any) -> AddAction:
        from executor_lib.splits.write.publish import upload_split

        try:
            add = upload_split(self.store, written, partition_values)
            self.progress.uploaded(add.size)
            return add
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
