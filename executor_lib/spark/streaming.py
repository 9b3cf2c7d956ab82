"""Structured Streaming for ``format("indextables")``: ``writeStream`` into a table exactly once, and
``readStream`` out of it (PROTOCOL.md §5 "Streaming transaction identifiers", README "Streaming").

Writing (``IndexTablesStreamWriter``): each micro-batch is indexed and uploaded on the executors by
the batch writer's code (``IndexTablesWriter.write``) and committed on the driver side as one
version by ``TransactionLog.commit_streaming_batch``, identified by the streaming query's id (the
``sql.streaming.queryId`` local property Spark gives every task of the query, stable across restarts
from one checkpoint; the ``txnAppId`` option overrides it) and the batch id. A batch the table already
holds, replayed after a restart, is skipped and its uploads deleted. Append only.

Reading (``IndexTablesStreamReader``): offsets are table positions ``{"version", "index",
"snapshot"}``. Without ``startingVersion`` the stream first emits every live split of the version
it started at (``snapshot``: true, splits in path order, ``index`` of them done), then, version by
version, the splits each later version added with ``dataChange=true`` (``index`` of that version's
adds done). MERGE SPLITS rewrites (``dataChange=false``) are never emitted; a version that removed
data (overwrite, drop partitions) is an error naming it unless ``ignoreDeletes``/``ignoreChanges``
(Delta's names and meaning). ``maxFilesPerTrigger`` bounds the splits per micro-batch. The rows of
a split are read on executors by the batch reader (``IndexTablesReader.read``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from executor_lib.protocol.actions import AddAction, MetadataAction, RemoveAction
from executor_lib.spark import options as O
from executor_lib.spark.common import delete_quietly, open_table_log, require_path
from executor_lib.spark.read_planning import SplitRef, split_refs
from executor_lib.spark.reader import IndexTablesPartition, IndexTablesReader
from executor_lib.spark.writer import IndexTablesCommitMessage, IndexTablesWriter, require_avro_state
from indextables_contract.errors import (
    ConfigError,
    IndexTablesError,
    ObjectNotFoundError,
    StreamingReadError,
    TableNotFoundError,
)

log = logging.getLogger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's local property: the streaming query's id


# --- writing ------------------------------------------------------------------------------------


@dataclass
class StreamCommitMessage(IndexTablesCommitMessage):
    """A write task's uploaded splits and the streaming query it ran for."""

    query_id: str | None = None


class IndexTablesStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("indextables").option("checkpointLocation", …).start(path)``."""

    def __init__(self, raw_options: dict[str, str], schema: StructType, overwrite: bool) -> None:
        stream, options = O.split_keys(raw_options, O.STREAM_WRITE_KEYS)
        path = require_path(options, "writeStream")
        if overwrite:
            raise ConfigError(
                f"writeStream {path}: only the append output mode is supported "
                "(complete/update would rewrite the table)"
            )
        self.app_id: str | None = stream.get("txnAppId") or None
        self.batch = IndexTablesWriter(options, schema, overwrite=False)
        self._check_state_format()

    def _check_state_format(self) -> None:
        """Streaming commits record their identifiers in the Avro state: refuse other tables up front."""
        require_avro_state(self.batch, f"writeStream {self.batch.path}: streaming writes")

    # -- executors --

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamCommitMessage:
        from pyspark import TaskContext

        written = self.batch.write(iterator)
        context = TaskContext.get()
        query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None
        return StreamCommitMessage(written.adds, query_id)

    # -- driver side --

    def commit(self, messages: list[Any], batchId: int) -> None:
        from executor_lib.log.state.streaming_txns import StreamingTxn

        adds = [a for m in messages if isinstance(m, IndexTablesCommitMessage) for a in m.adds]
        app_id = self._app_id(messages)

        def commit_batch(txlog: Any, adds: list[AddAction]) -> int | None:
            if not adds:
                return None  # an empty batch: nothing to record (its replay is empty too)
            version = txlog.commit_streaming_batch(adds, StreamingTxn(app_id, batchId), new_files=True)
            if version is None:  # a replay of a batch the table holds: its new uploads are orphans
                # (a retried commit call holds the same files)
                live = set(txlog.snapshot().file_columns(["path"]).column("path").to_pylist())
                delete_quietly(txlog.store, [a.path for a in adds if a.path not in live])
            return version

        version = self.batch.commit_adds(
            adds, commit_batch, cleanup=lambda a: self._delete_unless_committed(a, lambda: app_id, batchId)
        )
        log.info("writeStream %s: batch %d of %s -> %s", self.batch.path, batchId, app_id, version)

    def _app_id(self, messages: list[Any]) -> str:
        if self.app_id:
            return self.app_id
        ids = {m.query_id for m in messages if isinstance(m, StreamCommitMessage) and m.query_id}
        if len(ids) > 1:
            raise ConfigError(f"writeStream {self.batch.path}: one batch was written for several queries {ids}")
        if not ids:
            if any(isinstance(m, IndexTablesCommitMessage) and m.adds for m in messages):
                raise ConfigError(
                    f"writeStream {self.batch.path}: the streaming query id is unknown to the write tasks; "
                    "set the txnAppId option to a name unique to this query"
                )
            return "unknown"
        return ids.pop()

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Spark aborts a batch whose commit failed, also when the worker running it died after the
        version landed: its uploads go only if the log holds no commit of it (``_delete_unless_committed``)."""
        adds = [a for m in messages if isinstance(m, IndexTablesCommitMessage) for a in m.adds]
        if adds:
            self._delete_unless_committed(adds, lambda: self._app_id(messages), batchId)

    def _delete_unless_committed(self, adds: list[AddAction], app_id: Callable[[], str], batch_id: int) -> None:
        """After a failed or aborted commit of batch ``batch_id``: delete its uploads when the log holds
        no commit of this batch (or a later one) for this query; else keep them (committed, or orphans
        PURGE collects). Nothing is deleted when the log cannot be read (nor the query's id, ``app_id()``)."""
        try:
            txlog = open_table_log(self.batch.path, self.batch.options)
            record = txlog.streaming_txns().get(app_id())
        except TableNotFoundError:  # no table: nothing was committed
            self.batch._delete_uploaded(adds)
            return
        except IndexTablesError as e:
            log.warning(
                "writeStream %s: batch %d: %d uploaded splits kept (the log could not be read): %s",
                self.batch.path,
                batch_id,
                len(adds),
                e,
            )
            return
        if record is not None and record.batch_id >= batch_id:
            log.warning(
                "writeStream %s: batch %d is committed (version %d): its %d uploaded splits are kept",
                self.batch.path,
                batch_id,
                record.version,
                len(adds),
            )
            return
        delete_quietly(txlog.store, [a.path for a in adds])


# --- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Position:
    """A stream offset. ``snapshot``: the first ``index`` live splits (path order) of ``version`` are
    done; else every version before ``version`` and the first ``index`` data adds of ``version``."""

    version: int
    index: int = 0
    snapshot: bool = False

    def to_offset(self) -> dict[str, Any]:
        return {"version": self.version, "index": self.index, "snapshot": self.snapshot}

    @classmethod
    def of(cls, offset: dict[str, Any], path: str) -> Position:
        try:
            version, index, snapshot = offset["version"], offset["index"], offset["snapshot"]
        except (KeyError, TypeError) as e:
            raise StreamingReadError(f"readStream {path}: offset {offset!r} is not an IndexTables offset") from e
        if not isinstance(version, int) or not isinstance(index, int) or not isinstance(snapshot, bool):
            raise StreamingReadError(f"readStream {path}: offset {offset!r} is not an IndexTables offset")
        return cls(version, index, snapshot)


@dataclass
class _Options:
    starting_version: int | str | None = None  # a version, "latest", or None (the whole table first)
    max_files: int | None = None
    ignore_deletes: bool = False
    ignore_changes: bool = False

    @classmethod
    def parse(cls, stream: dict[str, Any]) -> _Options:
        out = cls()
        if "startingVersion" in stream:
            value = str(stream["startingVersion"]).strip().lower()
            out.starting_version = "latest" if value == "latest" else _version(value)
        if "maxFilesPerTrigger" in stream:
            out.max_files = O.parse_positive_int("maxFilesPerTrigger", stream["maxFilesPerTrigger"])
        if "ignoreDeletes" in stream:
            out.ignore_deletes = O.parse_bool("ignoreDeletes", stream["ignoreDeletes"])
        if "ignoreChanges" in stream:
            out.ignore_changes = O.parse_bool("ignoreChanges", stream["ignoreChanges"])
        return out


def _version(value: str) -> int:
    if not value.isdigit():
        raise ConfigError(f"option startingVersion={value!r}: expected a version number or 'latest'")
    return int(value)


@dataclass
class _Caches:
    """Driver-side memo of what the log says (the stream reader lives in one process there)."""

    versions: dict[int, list[SplitRef]] = field(default_factory=dict)
    snapshot_version: int | None = None
    snapshot_files: list[SplitRef] = field(default_factory=list)
    registry: dict[str, str] = field(default_factory=dict)


class IndexTablesStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("indextables").load(path)``: table versions as offsets."""

    def __init__(self, raw_options: dict[str, str], schema: StructType) -> None:
        stream, options = O.split_keys(raw_options, O.STREAM_READ_KEYS)
        for key in ("versionAsOf", "timestampAsOf", "limit"):
            if any(k.lower() == key.lower() for k in options):
                raise ConfigError(f"readStream: option {key} is for batch reads (use startingVersion)")
        self.opts = _Options.parse(stream)
        self.rows = IndexTablesReader(options, schema)  # checks options and columns; reads splits on executors
        self.path = self.rows.path
        self._cap: int | None = None  # Trigger.AvailableNow: the latest version when the query started
        pinned = self.rows._snapshot  # set by the reader's constructor (dropped only when pickled)
        self._caches = _Caches(registry=dict(pinned.schema_registry) if pinned is not None else {})
        self._log: Any = None
        latest = self.rows.version
        start = self.opts.starting_version
        if isinstance(start, int) and start > latest:
            raise ConfigError(
                f"readStream {self.path}: startingVersion {start} is newer than the latest version {latest}"
            )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_caches"], state["_log"] = _Caches(), None  # executors only read splits
        return state

    # -- offsets (driver side) --

    def initialOffset(self) -> dict[str, Any]:
        start = self.opts.starting_version
        if start is None:
            return Position(self.rows.version, 0, snapshot=True).to_offset()
        if start == "latest":
            return Position(self.rows.version + 1).to_offset()
        return Position(int(start)).to_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.opts.max_files) if self.opts.max_files else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._cap = self._txlog().latest_version()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        latest = self._txlog().latest_version() if self._cap is None else self._cap
        max_files = limit.max_files if isinstance(limit, ReadMaxFiles) else None
        end, _ = self._walk(Position.of(start, self.path), latest, max_files=max_files)
        return end.to_offset()

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return Position(self._txlog().latest_version() + 1).to_offset()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[IndexTablesPartition]:
        stop = Position.of(end, self.path)
        _, files = self._walk(Position.of(start, self.path), stop.version, stop=stop)
        groups: list[IndexTablesPartition] = []
        current: list[SplitRef] = []
        size = 0
        for ref in files:
            current.append(ref)
            size += ref.size
            if size >= self.rows.partition_bytes or len(current) >= self.rows.splits_per_partition:
                groups.append(IndexTablesPartition(current))
                current, size = [], 0
        if current:
            groups.append(IndexTablesPartition(current))
        return groups

    def commit(self, end: dict[str, Any]) -> None:
        done = Position.of(end, self.path)
        caches = self._caches
        for v in [v for v in caches.versions if v < done.version]:
            del caches.versions[v]
        if not done.snapshot:
            caches.snapshot_version, caches.snapshot_files = None, []

    # -- executors --

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return self.rows.read(partition)

    # -- walking the log --

    def _txlog(self) -> Any:
        if self._log is None:
            self._log = open_table_log(self.path, self.rows.options)
        return self._log

    def _walk(
        self, start: Position, last_version: int, max_files: int | None = None, stop: Position | None = None
    ) -> tuple[Position, list[SplitRef]]:
        """The splits after ``start`` up to ``stop`` (or through ``last_version``, at most ``max_files``)
        and the position after them."""
        files: list[SplitRef] = []
        pos = start
        if pos.snapshot:
            snapshot = self._snapshot_files(pos.version)
            upper = stop.index if stop is not None and stop.snapshot else len(snapshot)
            if max_files is not None:
                upper = min(upper, pos.index + max_files)
            files += snapshot[pos.index : upper]
            if upper < len(snapshot) or (stop is not None and stop.snapshot):
                return Position(pos.version, upper, snapshot=True), files
            pos = Position(pos.version + 1)
        while pos.version <= last_version and (max_files is None or len(files) < max_files):
            if stop is not None and (pos.version, pos.index) >= (stop.version, stop.index):
                break
            adds = self._version_files(pos.version)
            upper = len(adds)
            if stop is not None and pos.version == stop.version:
                upper = min(upper, stop.index)
            if max_files is not None:
                upper = min(upper, pos.index + max_files - len(files))
            files += adds[pos.index : upper]
            pos = Position(pos.version + 1) if upper >= len(adds) else Position(pos.version, upper)
        return pos, files

    def _snapshot_files(self, version: int) -> list[SplitRef]:
        caches = self._caches
        if caches.snapshot_version != version:
            snapshot = self.rows._snapshot
            if snapshot is None or snapshot.version != version:
                try:
                    snapshot = self._txlog().snapshot(version=version)
                except IndexTablesError as e:
                    raise StreamingReadError(
                        f"readStream {self.path}: the initial snapshot at version {version} is no longer readable "
                        f"({e}); restart the query with a later startingVersion"
                    ) from e
            caches.registry.update(snapshot.schema_registry)
            caches.snapshot_files = sorted(split_refs(snapshot), key=lambda r: r.path)  # from the state's columns
            caches.snapshot_version = version
        return caches.snapshot_files

    def _version_files(self, version: int) -> list[SplitRef]:
        """The splits ``version`` added with dataChange=true; StreamingReadError for a version the stream
        must not pass over (removed data without ignoreDeletes/ignoreChanges, a schema change)."""
        cached = self._caches.versions.get(version)
        if cached is not None:
            return cached
        try:
            actions = self._txlog().version_actions(version)
        except ObjectNotFoundError as e:
            raise StreamingReadError(
                f"readStream {self.path}: version {version} is no longer retained (log cleanup); restart the query "
                "with a later startingVersion"
            ) from e
        self._check_metadata(version, [a for a in actions if isinstance(a, MetadataAction)])
        adds = [a for a in actions if isinstance(a, AddAction) and a.data_change]
        removed = sum(1 for a in actions if isinstance(a, RemoveAction) and a.data_change)
        if removed:
            self._check_removal(version, removed, len(adds))
        refs = [_ref(a, self._doc_mapping(a)) for a in adds]
        self._caches.versions[version] = refs
        return refs

    def _check_metadata(self, version: int, metadata: list[MetadataAction]) -> None:
        from executor_lib.protocol.schema_registry import registry_from_configuration

        for meta in metadata:
            self._caches.registry.update(registry_from_configuration(meta.configuration))
            if meta.schema_string != self.rows.schema_string:
                raise StreamingReadError(
                    f"readStream {self.path}: version {version} changed the table's schema; restart the query "
                    f"(with startingVersion={version} to continue from there)"
                )

    def _check_removal(self, version: int, removed: int, added: int) -> None:
        if added and not self.opts.ignore_changes:
            raise StreamingReadError(
                f"readStream {self.path}: version {version} rewrote data ({removed} splits removed, {added} added: an "
                "overwrite); set ignoreChanges=true to emit its added rows anyway (rows may repeat), or restart "
                f"with startingVersion={version + 1}"
            )
        if not added and not (self.opts.ignore_deletes or self.opts.ignore_changes):
            raise StreamingReadError(
                f"readStream {self.path}: version {version} removed data ({removed} splits: a drop of partitions or "
                f"a delete); set ignoreDeletes=true to pass over it, or restart with startingVersion={version + 1}"
            )

    def _doc_mapping(self, add: AddAction) -> str | None:
        if add.doc_mapping_json is not None:
            return add.doc_mapping_json
        return self._caches.registry.get(add.doc_mapping_ref) if add.doc_mapping_ref else None


def _ref(add: AddAction, doc_mapping: str | None) -> SplitRef:
    return SplitRef(add.path, dict(add.partition_values), doc_mapping, add.size, add.footer_start_offset)
