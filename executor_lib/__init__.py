"""IndexTables executor library: storage, protocol records, the transaction log, splits and search.

The public names live here, at the root; each is imported on first use, so importing a
part of the package (``import executor_lib.protocol.actions``) pulls in only that part and
its standard-library dependencies, never pyarrow, fastavro or tantivy. Entry points::

    import executor_lib
    from executor_lib import AddAction
    from indextables_contract import filters

    log = executor_lib.create_table("s3://bucket/t", schema, partition_columns=["date"], endpoint_url=...)
    log = executor_lib.open_log("/data/t")
    snap = log.snapshot()          # or snapshot(version=3) / snapshot(timestamp_ms=...)
    log.commit([AddAction(...)])   # -> new version
    log.commit([executor_lib.write_and_upload(log.store, rows, mapping, {"date": "2024-01-01"})])
    executor_lib.search_table(log.store, log.snapshot(), "message:error", executor_lib.default_cache())

Keyword options are storage options (``endpoint_url``, ``region``, ``access_key_id``, ...,
or their ``spark.indextables.*`` names) and log settings (``spark.indextables.checkpoint.interval``,
``spark.indextables.transaction.retry.maxAttempts``, ...). Errors are the classes of
``indextables_contract.errors``; the common ones are importable from here too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> the module that defines it.
_PUBLIC = {
    # tables and the transaction log
    "create_table": "executor_lib.log.tables",
    "open_log": "executor_lib.log.tables",
    "TransactionLog": "executor_lib.log.transaction_log",
    "HistoryEntry": "executor_lib.log.maintenance.history",
    "Snapshot": "executor_lib.log.snapshot",
    # log records
    "Action": "executor_lib.protocol.actions",
    "AddAction": "executor_lib.protocol.actions",
    "RemoveAction": "executor_lib.protocol.actions",
    "MetadataAction": "executor_lib.protocol.actions",
    "ProtocolAction": "executor_lib.protocol.actions",
    "CommitInfoAction": "executor_lib.protocol.actions",
    "SkipAction": "executor_lib.protocol.actions",
    # splits, search and the split cache
    "DocMapping": "executor_lib.splits.doc_mapping",
    "mapping_for": "executor_lib.splits.doc_mapping",
    "write_and_upload": "executor_lib.splits.write.publish",
    "search_table": "executor_lib.splits.search.table_search",
    "SplitCache": "executor_lib.cache.split_cache",
    "default_cache": "executor_lib.cache.split_cache",
    # errors
    "IndexTablesError": "indextables_contract.errors",
    "CommitConflictError": "indextables_contract.errors",
    "ConfigError": "indextables_contract.errors",
    "FilterError": "indextables_contract.errors",
    "ProtocolError": "indextables_contract.errors",
    "QueryError": "indextables_contract.errors",
    "StorageError": "indextables_contract.errors",
    "TableAlreadyExistsError": "indextables_contract.errors",
    "TableNotFoundError": "indextables_contract.errors",
    "VersionNotFoundError": "indextables_contract.errors",
}

# Importable from the root before the public names above were chosen; not documented, kept so
# that existing imports keep working. New code imports them from their modules.
_COMPAT = {
    "ObjectNotFoundError": "indextables_contract.errors",
    "split_options": "executor_lib.log.config",
    "list_log": "executor_lib.log.state.version_files",
    "V3_TABLE_PROTOCOL": "executor_lib.log.tables",
    "V4_TABLE_PROTOCOL": "executor_lib.log.tables",
    "ENGINE": "executor_lib.protocol.actions",
    "actions_to_ndjson": "executor_lib.protocol.actions",
    "LOG_DIR": "executor_lib.protocol.files",
    "encode_log_bytes": "executor_lib.protocol.files",
    "version_file": "executor_lib.protocol.files",
    "open_store": "executor_lib.storage",
    "redact_uri": "executor_lib.storage.base",
}

__all__ = [
    "Action",
    "AddAction",
    "CommitConflictError",
    "CommitInfoAction",
    "ConfigError",
    "DocMapping",
    "FilterError",
    "HistoryEntry",
    "IndexTablesError",
    "MetadataAction",
    "ProtocolAction",
    "ProtocolError",
    "QueryError",
    "RemoveAction",
    "SkipAction",
    "Snapshot",
    "SplitCache",
    "StorageError",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "TransactionLog",
    "VersionNotFoundError",
    "create_table",
    "default_cache",
    "mapping_for",
    "open_log",
    "search_table",
    "write_and_upload",
]

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports on first use
    __version__: str
    from executor_lib.cache.split_cache import SplitCache, default_cache
    from executor_lib.log.maintenance.history import HistoryEntry
    from executor_lib.log.snapshot import Snapshot
    from executor_lib.log.tables import create_table, open_log
    from executor_lib.log.transaction_log import TransactionLog
    from executor_lib.protocol.actions import (
        Action,
        AddAction,
        CommitInfoAction,
        MetadataAction,
        ProtocolAction,
        RemoveAction,
        SkipAction,
    )
    from executor_lib.splits.doc_mapping import DocMapping, mapping_for
    from executor_lib.splits.search.table_search import search_table
    from executor_lib.splits.write.publish import write_and_upload
    from indextables_contract.errors import (
        CommitConflictError,
        ConfigError,
        FilterError,
        IndexTablesError,
        ProtocolError,
        QueryError,
        StorageError,
        TableAlreadyExistsError,
        TableNotFoundError,
        VersionNotFoundError,
    )


def __getattr__(name: str) -> Any:
    """A public name (imported from its module on first use), or a subpackage (``executor_lib.log``)."""
    module = _PUBLIC.get(name) or _COMPAT.get(name)
    if name == "__version__":  # the one version source, read on first use
        version: str = importlib.import_module("indextables_contract.version").VERSION
        globals()[name] = version
        return version
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    else:
        try:
            value = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise  # the submodule exists but something it imports does not
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
