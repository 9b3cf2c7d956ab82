"""The error hierarchy's stable codes: one per class, at the start of every message, never
repeated for quoted errors, and found again in a Spark error's text by ``error_class_in``."""

from __future__ import annotations

import pytest

from indextables_contract import errors
from indextables_contract.errors import (
    CommitConflictError,
    ConfigError,
    FilterError,
    IndexTablesError,
    QueryError,
    StorageError,
    error_class_in,
    error_classes,
)


def test_every_class_has_its_own_code() -> None:
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, IndexTablesError)]
    codes = [c.code for c in classes]
    assert len(set(codes)) == len(classes) and all(code.startswith("INDEXTABLES_") for code in codes)
    assert set(error_classes().values()) == set(classes)


def test_a_class_without_its_own_code_is_refused() -> None:
    with pytest.raises(TypeError, match="NoCode must define its own stable error code"):

        class NoCode(ConfigError):
            pass

    with pytest.raises(TypeError, match="code INDEXTABLES_CONFIG is already ConfigError's"):

        class SameCode(ConfigError):
            code = "INDEXTABLES_CONFIG"

    assert error_classes()["INDEXTABLES_CONFIG"] is ConfigError


def test_the_message_starts_with_the_code_and_quoted_errors_lose_theirs() -> None:
    inner = StorageError("s3://b/t/x: connection reset")
    outer = CommitConflictError(f"version 3: {inner}")
    assert str(inner) == "[INDEXTABLES_STORAGE] s3://b/t/x: connection reset"
    assert str(outer) == "[INDEXTABLES_COMMIT_CONFLICT] version 3: s3://b/t/x: connection reset"
    assert outer.message == "version 3: s3://b/t/x: connection reset"
    assert isinstance(FilterError("x"), QueryError)


def test_error_class_in_reads_a_traceback_as_spark_quotes_it() -> None:
    text = (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to initialize Python data source reader: Traceback (most recent call last):\n"
        '  File "executor_lib/spark/options.py", line 178, in parse_filter\n'
        "indextables_contract.errors.FilterError: [INDEXTABLES_FILTER] option filter: unknown op 'nope'\n"
        "\nThe above exception was the direct cause of the following exception:\n\n"
        "indextables_contract.errors.ConfigError: [INDEXTABLES_CONFIG] read: [INDEXTABLES_FILTER] quoted\n"
        " SQLSTATE: 38000"
    )
    assert error_class_in(text) is ConfigError  # the last raised; a quoted code is not a raise
    assert error_class_in(text.split("\nThe above")[0]) is FilterError
    assert error_class_in(str(CommitConflictError("v3"))) is CommitConflictError
    assert error_class_in("ConfigError: [INDEXTABLES_COMMIT_CONFLICT] a name that does not match") is None
    assert error_class_in("[DATA_SOURCE_NOT_FOUND] nothing of ours") is None


def test_error_in_rebuilds_the_raised_error_with_its_line_as_the_message() -> None:
    """What ``connect_plugin`` raises in place of Spark's exception: the project's line first."""
    from indextables_contract.errors import QuerySyntaxError, error_in

    text = (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: Traceback (most recent call last):\n"
        '  File "executor_lib/spark/reader.py", line 433, in check_filter\n'
        "indextables_contract.errors.QueryError: [INDEXTABLES_QUERY] query '(error' does not parse at position 0\n"
        " SQLSTATE: 38000"
    )
    error = error_in(text)
    assert type(error) is QueryError and str(error) == "[INDEXTABLES_QUERY] query '(error' does not parse at position 0"
    assert type(error_in("QuerySyntaxError: [INDEXTABLES_QUERY_SYNTAX] at 3")) is QuerySyntaxError
    storage = error_in("StorageError: [INDEXTABLES_STORAGE] s3://b/t: access denied")
    assert isinstance(storage, StorageError) and storage.path is None and storage.message == "s3://b/t: access denied"
    assert error_in("[DATA_SOURCE_NOT_FOUND] nothing of ours") is None
