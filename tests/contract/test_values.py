"""One vocabulary for booleans and sizes (``indextables_contract/values.py``): every option family
accepts and refuses the same words."""

from __future__ import annotations

from typing import Any

import pytest

from executor_lib.log.config import LogConfig
from executor_lib.spark.options import parse_bool, parse_size
from executor_lib.storage import _convert
from indextables_contract import write_settings as W
from indextables_contract.errors import ConfigError
from indextables_contract.values import as_bool, as_duration, as_size

BOOLEANS = {"true": True, "TRUE": True, " yes ": True, "1": True, "false": False, "No": False, "0": False}
NOT_BOOLEANS = ["", "maybe", "on", "2", "truthy"]
SIZES = {
    "104857600": 104857600,
    "512K": 512 << 10,
    "100m": 100 << 20,
    "1G": 1 << 30,
    "1.5G": 3 << 29,
    "4GiB": 4 << 30,
    "64 MB": 64 << 20,
    "7": 7,
}
NOT_SIZES = ["", "0", "-1", "1.5", "12X", "G", "1e9", "0K"]


def _log_bool(value: str) -> Any:
    return LogConfig.from_options({"spark.indextables.checkpoint.enabled": value}).checkpoint_enabled


@pytest.mark.parametrize(
    "parse", [as_bool, lambda v: parse_bool("o", v), lambda v: _convert("path_style", v), _log_bool]
)
def test_every_boolean_parser_has_one_vocabulary(parse: Any) -> None:
    for text, expected in BOOLEANS.items():
        assert parse(text) is expected, text
    for text in NOT_BOOLEANS:
        if parse is as_bool:
            assert as_bool(text) is None
            continue
        with pytest.raises((ConfigError, ValueError)):
            parse(text)


def _merge_target(value: str) -> Any:
    on = {"spark.indextables.mergeOnWrite.enabled": "true", "spark.indextables.mergeOnWrite.targetSize": value}
    settings = W.merge_on_write_settings("t", on)
    return None if settings is None else settings["target_size"]


@pytest.mark.parametrize("parse", [as_size, lambda v: parse_size("o", v), _merge_target])
def test_every_size_parser_has_one_grammar(parse: Any) -> None:
    for text, expected in SIZES.items():
        assert parse(text) == expected, text
    for text in NOT_SIZES:
        if parse is as_size:
            assert as_size(text) is None, text
            continue
        with pytest.raises(ConfigError, match="size"):
            parse(text)


DURATIONS = {"24": 24.0, " 0.5 ": 0.5, "0": 0.0, "1e3": 1000.0, "168.0": 168.0}
NOT_DURATIONS = ["", "-1", "nan", "inf", "1h", "24 hours", "true"]


def _log_hours(value: str) -> Any:
    return LogConfig.from_options({"spark.indextables.purge.txLogRetentionHours": value}).tx_log_retention_hours


def _progress_seconds(value: str) -> Any:
    from executor_lib.spark.progress import INTERVAL_OPTION, interval_seconds

    return interval_seconds({INTERVAL_OPTION: value})


@pytest.mark.parametrize("parse", [as_duration, _log_hours, _progress_seconds])
def test_every_duration_parser_has_one_grammar(parse: Any) -> None:
    for text, expected in DURATIONS.items():
        assert parse(text) == expected, text
    for text in NOT_DURATIONS:
        if parse is as_duration:
            assert as_duration(text) is None, text
            continue
        with pytest.raises(ConfigError, match=r"Hours|Seconds"):
            parse(text)
