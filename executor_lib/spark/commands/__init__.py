"""Maintenance commands as Spark work: ``format("indextables").option("command", NAME)``.

Every IndexTables command (history, describe, checkpoint, purge, merge, prewarm, cache ...) is
a read of the ``indextables`` data source with a ``command`` option, so it runs on the
cluster as an ordinary Spark job (visible in the Spark UI) and a Spark Connect client needs
neither tantivy nor storage credentials. Each command has a fixed result schema.

``base`` holds the reader and the registry; one module per family registers its commands' plan
and run functions (as delta-rs keeps one module per operation): on this side a new command is its
handler and ``register`` call in its family module, beside its class in the contract
(``indextables_contract.commands``) and its grammar rule (docs/adding-a-command.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

# Each family module registers its commands when imported.
from executor_lib.spark.commands import (  # noqa: F401
    aggregate,
    cache,
    companion,
    log,
    maintenance,
    merge,
    profiler,
    row_changes,
)
from executor_lib.spark.commands.aggregate import LogCounts, SplitScan, split_request
from executor_lib.spark.commands.base import (
    REGISTRY,
    WRITERS,
    CommandPartition,
    CommandReader,
    command_reader,
    command_schema,
    command_writer,
    decode,
)
from executor_lib.spark.commands.merge import MergeTask, MergeWriter, merge_now
from indextables_contract import commands as C

# The run function of every read command (tests/contract/test_commands.py checks both sides agree).
HANDLERS: dict[type[C.Command], Callable[[CommandReader, Any, Any], Iterator[tuple[Any, ...]]]] = {
    cls: handler.run for cls, handler in REGISTRY.items()
}

__all__ = [
    "HANDLERS",
    "REGISTRY",
    "WRITERS",
    "CommandPartition",
    "CommandReader",
    "LogCounts",
    "MergeTask",
    "MergeWriter",
    "SplitScan",
    "command_reader",
    "command_schema",
    "command_writer",
    "decode",
    "merge_now",
    "split_request",
]
