"""The project's error first: a Spark exception caused by an IndexTables error (raised by the data
source on the driver side, or in a task) is raised again as that error, its ``[INDEXTABLES_*]`` line
as the message, so the first line a user sees names the problem instead of
``[PYTHON_DATA_SOURCE_ERROR] Failed to ...: Traceback``. Its traceback is the caller's frames only:
Spark's exception (the worker's traceback, a JVM stack) is kept as the error's ``spark_error`` and in
Spark's logs, and printed as the cause only with ``INDEXTABLES_FULL_TRACEBACK=1`` in the environment.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable, Iterator

from indextables_contract.errors import IndexTablesError, error_in

FULL_TRACEBACK_ENV = "INDEXTABLES_FULL_TRACEBACK"  # set (not 0): Spark's exception printed as the cause


@contextlib.contextmanager
def project_error_first(spelling: Iterable[str] = ()) -> Iterator[None]:
    """Run the block; a non-IndexTables exception whose text reports an IndexTables error is raised as that error.

    ``spelling``: the option names the block hands to Spark as the user wrote them. Spark lower-cases a
    Python data source's option names, so the data source's error quotes ``'indexquerry.message'`` for
    the user's ``'indexQuerry.message'``; the error raised here quotes the user's spelling.

    Raises:
        IndexTablesError: the error the Spark exception reports (its class and message), from it.

    Example: ``with project_error_first(): df = spark.read.format("indextables").load(path)``
    """
    try:
        yield
    except IndexTablesError:
        raise
    except Exception as e:
        found = error_in(str(e))
        if found is None:
            raise
        error = respelt(found, spelling)
        error.spark_error = e  # type: ignore[attr-defined]
        if os.environ.get(FULL_TRACEBACK_ENV, "") not in ("", "0"):
            raise error from e
        add_note = getattr(error, "add_note", None)  # Python 3.11+
        if add_note is not None:
            add_note(f"(Spark's own exception: error.spark_error; {FULL_TRACEBACK_ENV}=1 prints it as the cause)")
        raise error from None


def respelt(error: IndexTablesError, spelling: Iterable[str]) -> IndexTablesError:
    """``error`` with each quoted option name that Spark lower-cased (``'a.b'``) in the user's spelling."""
    message = error.message
    for key in sorted(set(spelling), key=len, reverse=True):
        if key != key.lower():
            message = message.replace(repr(key.lower()), repr(key))
    if message == error.message:
        return error
    again = error_in(f"[{error.code}] {message}")
    return error if again is None else again


# PySpark logs an ERROR line with the whole exception (a JVM stack over Connect too) when it builds an
# exception that carries a query context (``pyspark.errors.exceptions.base._log_exception``), before the
# caller can say anything.
QUERY_CONTEXT_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


class _Hold(logging.Filter):
    """Keeps back the records of one thread (the caller's); other threads' pass."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()
        self.held: list[tuple[logging.Logger, logging.LogRecord]] = []
        self.logger: logging.Logger | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self.thread or self.logger is None:
            return True
        self.held.append((self.logger, record))
        return False


@contextlib.contextmanager
def query_context_logs_held() -> Iterator[list[tuple[logging.Logger, logging.LogRecord]]]:
    """Run the block with PySpark's query-context ERROR logs of this thread held back; yields the held
    records. The caller that turns Spark's exception into the project's error drops them (the project's
    error says it, once, first); ``release`` logs them as they would have been.

    Example: ``with query_context_logs_held() as held: ...; release(held)`` where Spark's error stays Spark's.
    """
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # a PySpark without it logs nothing of the kind
        yield []
        return
    holds = []
    held: list[tuple[logging.Logger, logging.LogRecord]] = []
    for name in QUERY_CONTEXT_LOGGERS:
        logger = PySparkLogger.getLogger(name)  # PySpark's class: a plain Logger would break its calls
        hold = _Hold()
        hold.logger = logger
        hold.held = held
        logger.addFilter(hold)
        holds.append((logger, hold))
    try:
        yield held
    finally:
        for logger, hold in holds:
            logger.removeFilter(hold)


def release(held: list[tuple[logging.Logger, logging.LogRecord]]) -> None:
    """Log the records ``query_context_logs_held`` kept back."""
    for logger, record in held:
        logger.handle(record)
    held.clear()
