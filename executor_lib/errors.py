"""The project's exception hierarchy: every error raised on purpose is one of these.

Messages name the file, option or table involved and say what is wrong. Storage
credentials never appear in a message.
"""

from __future__ import annotations


class IndexTablesError(Exception):
    """Base class of every error this project raises on purpose."""


# --- storage -------------------------------------------------------------------------------


class StorageError(IndexTablesError):
    """An object store operation failed (I/O error, permission, network...)."""

    def __init__(self, message: str, path: str | None = None, retryable: bool = True) -> None:
        super().__init__(message)
        self.path = path
        self.retryable = retryable  # False: retrying cannot help (access denied, no bucket, bad credentials)


class ObjectNotFoundError(StorageError):
    """The object does not exist."""


class ObjectAlreadyExistsError(StorageError):
    """A put-if-absent found the object already there (S3: HTTP 412)."""


class InvalidPathError(StorageError):
    """A file path no store operation may use: it escapes the table root, lies outside it, or is malformed."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message, path, retryable=False)


class AmbiguousWriteError(StorageError):
    """A conditional write may or may not have landed (S3: HTTP 409, lost response)."""


# --- configuration -------------------------------------------------------------------------


class ConfigError(IndexTablesError):
    """An option or argument has an invalid value."""


class IndexEngineError(IndexTablesError):
    """Tantivy (the Rust index engine) failed on this input: a Rust panic, converted so that no
    ``pyo3_runtime.PanicException`` (a BaseException) reaches a user. The message names the split,
    column or query."""


class InvalidDataError(IndexTablesError):
    """A row value the index cannot take (e.g. a string that is not an IP address in an ``ip`` column)."""


# --- tables and the transaction log --------------------------------------------------------


class TableNotFoundError(IndexTablesError):
    """The path holds no IndexTables transaction log."""


class TableAlreadyExistsError(IndexTablesError):
    """create_table found a transaction log already at the path."""


class ProtocolError(IndexTablesError):
    """The log's content breaks the protocol: corrupt file, bad JSON, missing version..."""


class CorruptLogError(ProtocolError):
    """A log file exists but cannot be decoded (truncated gzip, invalid JSON, bad Avro)."""


class UnknownActionError(CorruptLogError):
    """A log line holds an action type this code does not know."""


class SplitSchemaError(ProtocolError):
    """A live split's columns do not fit the table's schema (a writer skipped the commit-time check)."""


class MissingLogFileError(ProtocolError):
    """A file the log needs is missing (a version gap, a checkpoint part)."""


class UnsupportedProtocolError(ProtocolError):
    """The table requires a reader/writer version or feature this code does not support."""


class VersionNotFoundError(IndexTablesError):
    """Time travel to a version or timestamp that does not exist or is no longer retained."""


class InvalidActionError(IndexTablesError):
    """A commit was asked to write actions that are not valid (before anything is written)."""


class CommitConflictError(IndexTablesError):
    """A concurrent commit changed what this transaction depends on; it was not written."""


class CommitFailedError(IndexTablesError):
    """The commit could not be written after all retries (storage kept failing or contention)."""
