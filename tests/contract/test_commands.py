"""The command contract (``indextables_contract.commands``): every command round-trips through its
Spark options, bad arguments are named before anything runs, and the client and the executors
agree on the set of commands — neither side spells a command name or an argument key itself."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from indextables_contract import commands as C

ROOT = Path(__file__).resolve().parents[2]


def _sample(cls: type[C.Command]) -> C.Command:
    """An instance with every argument set to a non-default value of its type."""
    values = {bool: True, int: 7, float: 2.5, str: '{"op": "exists", "column": "x"}'}
    kinds = C._field_kinds(cls)
    return cls(**{f.name: values[kinds[f.name]] for f in dataclasses.fields(cls)})


@pytest.mark.parametrize("cls", list(C.COMMANDS.values()), ids=list(C.COMMANDS))
def test_every_command_round_trips_through_its_options(cls: type[C.Command]) -> None:
    command = _sample(cls)
    options = command.to_options()
    assert options[C.COMMAND_OPTION] == cls.NAME
    assert all(isinstance(v, str) for v in options.values())  # Spark options are strings
    assert C.decode_command(options) == command
    # keys are case-insensitive, as Spark's options are
    assert C.decode_command({k.upper(): v for k, v in options.items()}) == command
    if all(f.default is not dataclasses.MISSING for f in dataclasses.fields(cls)):
        assert C.decode_command({"command": cls.NAME}) == cls()
    assert cls.WRITE or cls.RESULT, f"{cls.NAME}: a read command needs a result schema"


def test_the_executors_run_exactly_the_contract_commands() -> None:
    from executor_lib.spark.commands import HANDLERS, MergeWriter, command_writer

    reads = {c for c in C.COMMANDS.values() if not c.WRITE}
    assert set(HANDLERS) == reads
    writes = [c for c in C.COMMANDS.values() if c.WRITE]
    assert writes == [C.Merge, C.CompanionBuild]
    assert isinstance(command_writer({"command": "merge", "path": "/t"}), MergeWriter)
    from executor_lib.spark.companion import CompanionWriter

    assert isinstance(command_writer({"command": "companion_build", "path": "/t"}), CompanionWriter)


def test_every_result_schema_is_spark_ddl(classic_spark: Any) -> None:
    from pyspark.sql.types import StructType

    for cls in C.COMMANDS.values():
        if cls.RESULT:
            schema = StructType.fromDDL(cls.RESULT)
            assert len(schema.fields) == cls.RESULT.count(",") + 1, cls.NAME


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"command": "explode"}, "unknown command 'explode'"),
        ({}, "unknown command ''"),
        ({"command": "history", "limit": "ten"}, "option limit='ten': expected int"),
        ({"command": "history", "limit": "0"}, "option limit=0: expected a positive integer"),
        ({"command": "purge", "dryRun": "maybe"}, "option dryRun='maybe': expected true or false"),
        ({"command": "purge", "retentionHours": "-1"}, "option retentionHours=-1.0: expected a finite number"),
        ({"command": "merge_result"}, "command merge_result: option mergeId is required"),
        ({"command": "drop_partitions"}, "command drop_partitions: option filter is required"),
        ({"command": "aggregate", "filter": "{}"}, "command aggregate: option aggregations is required"),
    ],
)
def test_bad_arguments_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(C.CommandError) as e:
        C.decode_command(options)
    assert message in str(e.value)


def test_the_client_checks_arguments_before_sending() -> None:
    with pytest.raises(C.CommandError, match="option tasks=0"):
        C.DescribeCache(tasks=0)
    with pytest.raises(C.CommandError, match="option limit='5': expected int"):
        C.History(limit="5")  # type: ignore[arg-type]


def _string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    }


def test_no_command_name_or_argument_key_is_spelled_outside_the_contract() -> None:
    names = set(C.COMMANDS)
    result_columns = {c.split()[0] for cls in C.COMMANDS.values() for c in cls.RESULT.split(",") if c.strip()}
    # argument keys that only a command uses (limit/filter are also read options, spelled by the reads)
    keys = {k for k in C.option_keys() if any(ch.isupper() for ch in k)} - result_columns
    sides = [
        *sorted((ROOT / "connect_plugin").glob("*.py")),
        *sorted((ROOT / "executor_lib/spark/commands").glob("*.py")),
        *(ROOT / "executor_lib/spark" / m for m in ("datasource.py", "reader.py", "writer.py", "common.py")),
    ]
    found = {str(p.relative_to(ROOT)): set(_string_constants(p) & (names | keys | {C.COMMAND_OPTION})) for p in sides}
    # the same words in other namespaces: the SQL grammar's rule names (statement kinds), and the
    # session settings spark.indextables.mergeOnWrite.{targetSize,minSplitsToMerge}
    found["connect_plugin/sql.py"] -= {
        "checkpoint",
        "describe_cache",
        "describe_state",
        "flush_cache",
        "merge",
        "prewarm",
        "purge",
    }
    found["connect_plugin/merge_on_write.py"] -= {"targetSize", "minSplitsToMerge"}
    found["connect_plugin/grammar.py"] -= {"command"}  # the grammar's rule of every command (command_hint)
    # values of IndexTables4Spark's outputs: a DATA SKIPPING STATS metric_type, a PROFILER category
    found["connect_plugin/command_outputs.py"] -= {"data_skipping", "prewarm"}
    assert {p: sorted(s) for p, s in found.items() if s} == {}
