"""One vocabulary for booleans and sizes (``indextables_contract/values.py``): every option family
accepts and refuses the same words."""

from __future__ import annotations

from typing import Any

import pytest

from executor_lib.log.config import LogConfig
from executor_lib.spark.options import parse_bool, parse_size
from executor_lib.storage import _convert
from indextables_contract.errors import ConfigError
from indextables_contract.values import as_bool, as_size
from indextables_contract.write_settings import size_bytes

BOOLEANS = {"true": True, "TRUE": True, " yes ": True, "1": True, "false": False, "No": False, "0": False}
NOT_BOOLEANS = ["", "maybe", "on", "2", "truthy"]
SIZES = {"104857600": 104857600, "512K": 512 << 10, "100m": 100 << 20, "1G": 1 << 30, "1.5G": 3 << 29, "4GiB": 4 << 30,
         "64 MB": 64 << 20, "7": 7}  # fmt: skip
NOT_SIZES = ["", "0", "-1", "1.5", "12X", "G", "1e9", "0K"]


def _log_bool(value: str) -> Any:
    return LogConfig.from_options({"spark.indextables.checkpoint.enabled": value}).checkpoint_enabled


@pytest.mark.parametrize("parse", [as_bool, lambda v: parse_bool("o", v), lambda v: _convert("path_style", v), _log_bool])
def test_every_boolean_parser_has_one_vocabulary(parse: Any) -> None:
    for text, expected in BOOLEANS.items():
        assert parse(text) is expected, text
    for text in NOT_BOOLEANS:
        if parse is as_bool:
            assert as_bool(text) is None
            continue
        with pytest.raises((ConfigError, ValueError)):
            parse(text)


@pytest.mark.parametrize("parse", [as_size, lambda v: parse_size("o", v), lambda v: size_bytes("o", v)])
def test_every_size_parser_has_one_grammar(parse: Any) -> None:
    for text, expected in SIZES.items():
        assert parse(text) == expected, text
    for text in NOT_SIZES:
        if parse is as_size:
            assert as_size(text) is None, text
            continue
        with pytest.raises(ConfigError, match="size"):
            parse(text)
