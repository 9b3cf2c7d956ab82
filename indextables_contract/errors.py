"""The project's exception hierarchy: every error raised on purpose is one of these.

Messages name the file, option or table involved and say what is wrong. Storage
credentials never appear in a message.

Each class has a stable ``code`` (``INDEXTABLES_COMMIT_CONFLICT``...) that starts its message,
Spark's way (``[INDEXTABLES_COMMIT_CONFLICT] s3://b/t: ...``), so an error raised in a Spark
executor still names its class and code when it reaches a Spark Connect client as text;
``error_class_in(text)`` finds the class again. Codes never change once released; a new
class gets a new code. It is part of the client/cluster contract: the thin client
(``connect_plugin``) and the executors (``executor_lib``) raise these same classes. Standard
library only.
"""

from __future__ import annotations

import re

_CODE = re.compile(r"\[INDEXTABLES_[A-Z_]+\] ")
_BY_CODE: dict[str, type[IndexTablesError]] = {}


class IndexTablesError(Exception):
    """Base class of every error this project raises on purpose."""

    code = "INDEXTABLES_ERROR"

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            raise TypeError(f"{cls.__name__} must define its own stable error code")
        if cls.code in _BY_CODE:
            raise TypeError(f"{cls.__name__}: code {cls.code} is already {_BY_CODE[cls.code].__name__}'s")
        _BY_CODE[cls.code] = cls

    @property
    def message(self) -> str:
        """The message without codes: neither this error's nor those of errors it quotes (``f"...: {e}"``)."""
        return _CODE.sub("", super().__str__())

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


_BY_CODE[IndexTablesError.code] = IndexTablesError


# --- storage -------------------------------------------------------------------------------


class StorageError(IndexTablesError):
    """An object store operation failed (I/O error, permission, network...)."""

    code = "INDEXTABLES_STORAGE"

    def __init__(self, message: str, path: str | None = None, retryable: bool = True) -> None:
        super().__init__(message)
        self.path = path
        self.retryable = retryable  # False: retrying cannot help (access denied, no bucket, bad credentials)


class ObjectNotFoundError(StorageError):
    """The object does not exist."""

    code = "INDEXTABLES_OBJECT_NOT_FOUND"


class ObjectAlreadyExistsError(StorageError):
    """A put-if-absent found the object already there (S3: HTTP 412)."""

    code = "INDEXTABLES_OBJECT_ALREADY_EXISTS"


class InvalidPathError(StorageError):
    """A file path no store operation may use: it escapes the table root, lies outside it, or is malformed."""

    code = "INDEXTABLES_INVALID_PATH"

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message, path, retryable=False)


class AmbiguousWriteError(StorageError):
    """A conditional write may or may not have landed (S3: HTTP 409, lost response)."""

    code = "INDEXTABLES_AMBIGUOUS_WRITE"


# --- configuration -------------------------------------------------------------------------


class ConfigError(IndexTablesError):
    """An option or argument has an invalid value."""

    code = "INDEXTABLES_CONFIG"


class QueryError(IndexTablesError):
    """A query that cannot run: bad syntax, unknown column, a field type that cannot answer it."""

    code = "INDEXTABLES_QUERY"


class QuerySyntaxError(QueryError):
    """Query text that is not a query of Tantivy's grammar; ``position`` is where reading stopped."""

    code = "INDEXTABLES_QUERY_SYNTAX"

    def __init__(self, message: str, position: int = 0) -> None:
        super().__init__(message)
        self.position = position


# --- the client's input (also ValueError/LookupError, as Python code checking arguments expects) ---


class CommandError(ConfigError, ValueError):
    """A command that does not decode (``indextables_contract.commands``): an unknown name, a missing
    or malformed argument (named)."""

    code = "INDEXTABLES_COMMAND_ARGUMENT"


class AggregatePlanError(QueryError, ValueError):
    """An aggregate plan (``indextables_contract.aggregate``) that does not decode or names an unknown function."""

    code = "INDEXTABLES_AGGREGATE_PLAN"


class IndexTablesSQLError(QueryError, ValueError):
    """A statement or predicate that does not parse (the position that stopped the parser is named),
    or uses a construct where it is not supported."""

    code = "INDEXTABLES_SQL"


class StatementError(IndexTablesSQLError):
    """A statement whose index operators cannot be placed on one of its tables."""

    code = "INDEXTABLES_SQL_STATEMENT"


class UnknownTableError(ConfigError, LookupError):
    """A table name that no ``spark.indextables.table.<name>`` setting defines."""

    code = "INDEXTABLES_UNKNOWN_TABLE"


class FilterError(QueryError):
    """A filter tree (the JSON form of ``indextables_contract.filters``) that is malformed: an unknown op,
    a missing or mistyped field. The message names the part (``filter.or[0]``)."""

    code = "INDEXTABLES_FILTER"


class IndexEngineError(IndexTablesError):
    """Tantivy (the Rust index engine) failed on this input: a Rust panic, converted so that no
    ``pyo3_runtime.PanicException`` (a BaseException) reaches a user. The message names the split,
    column or query."""

    code = "INDEXTABLES_INDEX_ENGINE"


class InvalidDataError(IndexTablesError):
    """A row value the index cannot take (e.g. a string that is not an IP address in an ``ip`` column)."""

    code = "INDEXTABLES_INVALID_DATA"


class ConnectServerError(IndexTablesError):
    """A local Spark Connect server (``executor_lib.spark.connect_server``) did not start."""

    code = "INDEXTABLES_CONNECT_SERVER"


# --- tables and the transaction log --------------------------------------------------------


class TableNotFoundError(IndexTablesError):
    """The path holds no IndexTables transaction log."""

    code = "INDEXTABLES_TABLE_NOT_FOUND"


class TableAlreadyExistsError(IndexTablesError):
    """create_table found a transaction log already at the path."""

    code = "INDEXTABLES_TABLE_ALREADY_EXISTS"


class ProtocolError(IndexTablesError):
    """The log's content breaks the protocol: corrupt file, bad JSON, missing version..."""

    code = "INDEXTABLES_PROTOCOL"


class CorruptLogError(ProtocolError):
    """A log file exists but cannot be decoded (truncated gzip, invalid JSON, bad Avro)."""

    code = "INDEXTABLES_CORRUPT_LOG"


class UnknownActionError(CorruptLogError):
    """A log line holds an action type this code does not know."""

    code = "INDEXTABLES_UNKNOWN_ACTION"


class CorruptSplitError(CorruptLogError):
    """A split file that cannot be read: its bundle footer does not parse, a member is missing or
    truncated, its index does not open."""

    code = "INDEXTABLES_CORRUPT_SPLIT"


class SplitSchemaError(ProtocolError):
    """A live split's columns do not fit the table's schema (a writer skipped the commit-time check)."""

    code = "INDEXTABLES_SPLIT_SCHEMA"


class CompanionSourceError(ProtocolError):
    """A companion index's source table does not hold what the companion indexed: a source file is
    gone or was rewritten (run BUILD INDEXTABLES COMPANION again), or the source cannot be listed."""

    code = "INDEXTABLES_COMPANION_SOURCE"


class MissingLogFileError(ProtocolError):
    """A file the log needs is missing (a version gap, a checkpoint part)."""

    code = "INDEXTABLES_MISSING_LOG_FILE"


class UnsupportedProtocolError(ProtocolError):
    """The table requires a reader/writer version or feature this code does not support."""

    code = "INDEXTABLES_UNSUPPORTED_PROTOCOL"


class VersionNotFoundError(IndexTablesError):
    """Time travel to a version or timestamp that does not exist or is no longer retained."""

    code = "INDEXTABLES_VERSION_NOT_FOUND"


class InvalidActionError(IndexTablesError):
    """A commit was asked to write actions that are not valid (before anything is written)."""

    code = "INDEXTABLES_INVALID_ACTION"


class CommitConflictError(IndexTablesError):
    """A concurrent commit changed what this transaction depends on; it was not written."""

    code = "INDEXTABLES_COMMIT_CONFLICT"


class CommitFailedError(IndexTablesError):
    """The commit could not be written after all retries (storage kept failing or contention)."""

    code = "INDEXTABLES_COMMIT_FAILED"


class BatchAlreadyCommittedError(IndexTablesError):
    """A streaming micro-batch the table already holds (same application id, batch id not newer):
    the commit is skipped, nothing is written. The streaming writer treats it as success."""

    code = "INDEXTABLES_BATCH_ALREADY_COMMITTED"


class StreamingReadError(IndexTablesError):
    """A streaming read met a table version it must not emit under its options (files removed by an
    overwrite or a drop without ignoreDeletes/ignoreChanges, a schema change, a version no longer retained)."""

    code = "INDEXTABLES_STREAMING_READ"


def error_classes() -> dict[str, type[IndexTablesError]]:
    """Every error class by its code."""
    return dict(_BY_CODE)


# "CommitConflictError: [INDEXTABLES_COMMIT_CONFLICT] ..." as a Python traceback prints it, or a
# message that starts with its code (str() of the error itself).
# The class name starts at a word's start (``(?<!\w)``): without it a long run of word characters
# is scanned from each of its characters, quadratic in its length (a 100 KB path took minutes).
_RAISED = re.compile(r"(?:(?<!\w)(\w+): |^)\[(INDEXTABLES_[A-Z_]+)\]", re.MULTILINE)


def error_class_in(text: str) -> type[IndexTablesError] | None:
    """The error class that an error's text reports, e.g. the text of a Spark exception that an
    executor's IndexTables error caused; None if it reports none.

    Where the text quotes a chain of errors (a traceback), the last one printed, the error that
    was finally raised, wins. A code counts only at the start of a message, alone or after its
    own class name, so codes quoted inside another error's message are not taken for it.
    """
    classes = error_classes()
    found = None
    for match in _RAISED.finditer(text):
        name, code = match.group(1), match.group(2)
        cls = classes.get(code)
        if cls is not None and (name is None or name == cls.__name__):
            found = cls
    return found


def error_in(text: str) -> IndexTablesError | None:
    """The error that an error's text reports, rebuilt: its class (as ``error_class_in``) with the
    message of the line that names it, e.g. from a Spark exception whose text quotes a Python worker's
    traceback (``[PYTHON_DATA_SOURCE_ERROR] ... QueryError: [INDEXTABLES_QUERY] query ...``); None if
    the text reports none.

    Example: ``str(error_in("...\nQueryError: [INDEXTABLES_QUERY] query '(' does not parse\n..."))``
    is ``"[INDEXTABLES_QUERY] query '(' does not parse"``.
    """
    classes = error_classes()
    found: tuple[type[IndexTablesError], str] | None = None
    for match in _RAISED.finditer(text):
        name, code = match.group(1), match.group(2)
        cls = classes.get(code)
        if cls is not None and (name is None or name == cls.__name__):
            found = cls, text[match.end() :].split("\n", 1)[0].strip()
    if found is None:
        return None
    cls, message = found
    try:
        return cls(message)
    except TypeError:  # a class whose constructor wants more than the message
        error = cls.__new__(cls)
        IndexTablesError.__init__(error, message)
        return error


class QueryWarning(UserWarning):
    """A query that runs but cannot find what its text says: an ``indexquery`` word, phrase or wildcard
    against an exact-string column, which matches whole values only (``warnings.warn`` on the client; the
    read option ``spark.indextables.read.strictQueries=true`` makes it a ``QueryError``)."""


class CompatibilityWarning(UserWarning):
    """A table written here that IndexTables4Spark cannot read as written: a column indexed with a tokenizer
    the JVM does not know (a stemmer other than ``en_stem``, ``settings.jvm_tokenizer_warnings``), said once
    per write on the client (``warnings.warn``)."""
