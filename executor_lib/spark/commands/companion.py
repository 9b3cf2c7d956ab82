"""BUILD INDEXTABLES COMPANION as commands: the plan read on the driver side, the build written by
executors (``executor_lib.spark.companion`` does the work), and the result read back."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter

from executor_lib.spark.commands.base import (
    CommandReader,
    command_options,
    decode,
    register,
    register_writer,
)
from indextables_contract import commands as C


def plan_companion_build(r: CommandReader, cmd: C.CompanionPlan) -> list[Any]:
    """The companion's build groups (``executor_lib.spark.companion``)."""
    from executor_lib.spark.companion import plan_companion

    return plan_companion(r.path, cmd, r.options)


def run_companion_plan(r: CommandReader, cmd: C.CompanionPlan, payload: Any) -> Iterator[tuple[Any, ...]]:
    yield tuple(payload)


def run_companion_result(r: CommandReader, cmd: C.CompanionResult, _: Any) -> Iterator[tuple[Any, ...]]:
    from executor_lib.spark.companion import run_result

    yield from run_result(r.path, cmd, r.options)


def companion_writer(raw_options: Mapping[str, str]) -> DataSourceArrowWriter:
    """The writer of ``companion_build`` rows: each group indexed on an executor, one commit."""
    from executor_lib.spark.companion import CompanionWriter

    build = decode(raw_options)
    options = command_options(raw_options, C.CompanionBuild.NAME)
    return CompanionWriter(raw_options, options, build.build_id if isinstance(build, C.CompanionBuild) else None)


register(C.CompanionPlan, run_companion_plan, plan=plan_companion_build)
register(C.CompanionResult, run_companion_result)
register_writer(C.CompanionBuild, companion_writer)
