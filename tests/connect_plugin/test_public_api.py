"""The client's public surface is documented as deltalake's is: every public function and
``IndexTable`` method says what it does and shows an example; the ones that check input name
what they raise."""

from __future__ import annotations

import inspect

import pytest

import connect_plugin
from connect_plugin import IndexTable

FUNCTIONS = [n for n in connect_plugin.__all__ if inspect.isfunction(getattr(connect_plugin, n))]
METHODS = [n for n, f in vars(IndexTable).items() if not n.startswith("_")]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_public_function_has_an_example(name: str) -> None:
    doc = inspect.getdoc(getattr(connect_plugin, name)) or ""
    assert "Example" in doc, f"connect_plugin.{name} has no example"


@pytest.mark.parametrize("name", METHODS)
def test_every_table_method_has_an_example(name: str) -> None:
    doc = inspect.getdoc(getattr(IndexTable, name)) or ""
    assert "Example" in doc, f"IndexTable.{name} has no example"


@pytest.mark.parametrize("name", ["read", "write", "write_stream", "sql", "resolve_table", "install"])
def test_functions_that_check_input_say_what_they_raise(name: str) -> None:
    assert "Raises:" in (inspect.getdoc(getattr(connect_plugin, name)) or "")
