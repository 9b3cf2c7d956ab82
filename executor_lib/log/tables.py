"""Opening and creating tables: ``open_log`` and ``create_table`` (also at ``executor_lib``'s root).

Keyword options are storage options (``endpoint_url``, ``region``, ``access_key_id``, ...,
or their ``spark.indextables.*`` names) and log settings (``spark.indextables.checkpoint.interval``,
``spark.indextables.transaction.retry.maxAttempts``, ...). A new table is protocol v4 (Avro
state) by default, v3 with ``spark.indextables.state.format=json``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from executor_lib.log import snapshot_cache
from executor_lib.log.config import split_options
from executor_lib.log.snapshot import Snapshot
from executor_lib.log.state.version_files import list_log
from executor_lib.log.transaction_log import TransactionLog
from executor_lib.protocol.actions import (
    ENGINE,
    Action,
    CommitInfoAction,
    MetadataAction,
    ProtocolAction,
    actions_to_ndjson,
)
from executor_lib.protocol.files import LOG_DIR, encode_log_bytes, version_file
from executor_lib.storage import open_store
from executor_lib.storage.base import redact_uri
from indextables_contract.errors import (
    ConfigError,
    ObjectNotFoundError,
    StorageError,
    TableAlreadyExistsError,
)

if TYPE_CHECKING:
    import pyarrow as pa

# Tables created by this code: protocol v4 (Avro state) by default, v3 with state.format=json.
V3_TABLE_PROTOCOL = ProtocolAction(
    min_reader_version=3,
    min_writer_version=3,
    reader_features=frozenset({"multiPartCheckpoint", "schemaDeduplication"}),
    writer_features=frozenset({"multiPartCheckpoint", "schemaDeduplication"}),
)
V4_TABLE_PROTOCOL = ProtocolAction(
    min_reader_version=4,
    min_writer_version=4,
    reader_features=frozenset({"avroState", "multiPartCheckpoint", "schemaDeduplication"}),
    writer_features=frozenset({"avroState", "multiPartCheckpoint", "schemaDeduplication"}),
)


def open_log(uri: str, **options: Any) -> TransactionLog:
    """The transaction log of the existing table at ``uri``; TableNotFoundError if there is none."""
    config, storage_options = split_options(options)
    store = open_store(uri, **storage_options)
    log = TransactionLog(store, config)
    log.latest_version()  # raises TableNotFoundError with the path
    return log


def read_snapshot(uri: str, version: int | None = None, timestamp_ms: int | None = None, **options: Any) -> Snapshot:
    """The snapshot of the table at ``uri``: the latest, the one at ``version``, or the newest at or
    before ``timestamp_ms``; TableNotFoundError if there is no table.

    What a query plans on. Unlike ``open_log(uri).snapshot()`` it makes no separate existence check
    (the load itself finds there is no table), and the latest snapshot starts from the newest this
    process has built of the table (``log.snapshot_cache``): a repeated query on object storage costs
    one listing past that version (two LIST requests) plus the version files committed since.
    """
    config, storage_options = split_options(options)
    log = TransactionLog(open_store(uri, shared_client=True, **storage_options), config, snapshot_cache.SHARED)
    return log.snapshot(version, timestamp_ms)


def create_table(
    uri: str,
    schema: pa.Schema,
    partition_columns: Sequence[str] = (),
    *,
    name: str | None = None,
    description: str | None = None,
    configuration: Mapping[str, str] | None = None,
    **options: Any,
) -> TransactionLog:
    """Create an empty table (version 0: protocol + metaData) and return its log.

    ``schema`` is a ``pyarrow.Schema``; it is stored as Spark's JSON schema.
    """
    import pyarrow as pa

    from executor_lib.table_schema import arrow_to_spark_json, check_indexable

    if not isinstance(schema, pa.Schema):
        raise ConfigError(f"create_table: schema must be a pyarrow.Schema, got {type(schema).__name__}")
    partition_columns = list(partition_columns)
    check_indexable(schema, partition_columns, f"create_table {redact_uri(str(uri))}")
    missing = [c for c in partition_columns if c not in schema.names]
    if missing:
        raise ConfigError(f"create_table: partition columns {missing} are not in the schema {schema.names}")
    if len(set(partition_columns)) != len(partition_columns):
        raise ConfigError(f"create_table: partition columns {partition_columns} contain duplicates")
    schema_string = arrow_to_spark_json(schema)
    config, storage_options = split_options(options)
    store = open_store(uri, **storage_options)
    if list_log(store).latest >= 0:
        raise TableAlreadyExistsError(f"{store.root_uri}: a table already exists here")
    now = int(time.time() * 1000)
    metadata = MetadataAction(
        id=str(uuid.uuid4()),
        schema_string=schema_string,
        partition_columns=tuple(partition_columns),
        configuration=dict(configuration or {}),
        name=name,
        description=description,
        created_time=now,
    )
    protocol = V4_TABLE_PROTOCOL if config.state_format == "avro" else V3_TABLE_PROTOCOL
    info = CommitInfoAction(txn_id=uuid.uuid4().hex, timestamp=now, operation="CREATE TABLE", engine=ENGINE)
    lines: list[Action] = [info, protocol, metadata] if config.commit_info_enabled else [protocol, metadata]
    body = encode_log_bytes(actions_to_ndjson(lines), config.compression_enabled, config.gzip_level)
    key = f"{LOG_DIR}/{version_file(0)}"
    try:
        store.put_if_absent(key, body, metadata={"indextables-txn-id": info.txn_id})
    except StorageError as e:  # taken, or outcome unknown: is version 0 ours?
        try:
            ours = store.read(key) == body  # the same bytes: this call's own write (a fresh table id in them)
        except ObjectNotFoundError:
            raise e from None
        if not ours:
            raise TableAlreadyExistsError(f"{store.root_uri}: a table was created here concurrently") from e
    return TransactionLog(store, config)
