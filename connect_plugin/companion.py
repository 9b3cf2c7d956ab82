"""BUILD INDEXTABLES COMPANION from the client: plan, build on the executors, report.

``build_companion`` reads the ``companion_plan`` command (planned on the driver side), and, unless
it is a dry run or there is nothing to do, writes the plan's rows back with ``companion_build``
(each row indexed into a companion split by an executor; one commit), then reads what was
committed (``companion_result``). The result is one row with IndexTables4Spark's columns
(``indextables_contract.commands.COMPANION_OUTPUT``). Nothing here imports tantivy.

    build_companion(spark, "delta", "/lake/events", "/index/events", indexing_modes={"message": "text"})
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from connect_plugin.plan import command_frame, local_frame
from connect_plugin.settings import merged_options
from indextables_contract import commands as C

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMAT = "indextables"


def build_companion(
    spark: SparkSession,
    source_format: str,
    source: str,
    location: str,
    *,
    schema_source: str | None = None,
    catalog: str | None = None,
    catalog_type: str | None = None,
    warehouse: str | None = None,
    include_columns: Sequence[str] | None = None,
    exclude_columns: Sequence[str] | None = None,
    indexing_modes: Mapping[str, str] | None = None,
    fast_field_mode: str | None = None,
    hashed_fastfields_include: Sequence[str] | None = None,
    hashed_fastfields_exclude: Sequence[str] | None = None,
    target_input_size: str | int | None = None,
    from_version: int | None = None,
    where_filter: str | None = None,
    where_sql: str | None = None,
    invalidate_all: bool = False,
    dry_run: bool = False,
    options: Mapping[str, Any] | None = None,
) -> DataFrame:
    """Build or sync the companion index at ``location`` over the source table (``delta``: a Delta
    table path; ``parquet``: a directory of Parquet files; ``iceberg``: ``namespace.table`` of a
    pyiceberg catalog). Returns one row: ``table_path``, ``source_path``, ``status`` (success,
    no_action, dry_run), ``source_version``, ``splits_created``, ``splits_invalidated``,
    ``parquet_files_indexed``, ``parquet_bytes_downloaded``, ``split_bytes_uploaded``,
    ``duration_ms``, ``message``.

    Args:
        where_filter: a filter tree (JSON) over the source's partition columns; ``where_sql`` its text.
        from_version: FROM VERSION (Delta) / FROM SNAPSHOT (Iceberg): index only files added after it.
        invalidate_all: INVALIDATE ALL PARTITIONS: remove every companion split and index the source anew.
        hashed_fastfields_include, hashed_fastfields_exclude: HASHED FASTFIELDS INCLUDE / EXCLUDE: string
            columns given tantivy4java's ``_phash_<column>`` fingerprint fast fields (FASTFIELDS MODE HYBRID).

    Raises:
        ConfigError, CompanionSourceError (from the cluster, at plan time): a clause that does not apply,
            unknown columns, a source that cannot be read.

    Example: ``build_companion(spark, "parquet", "/data/logs", "/index/logs", indexing_modes={"msg": "text"}).show()``
    """
    started = time.monotonic()
    plan_cmd = C.CompanionPlan(
        source_format=source_format.lower(),
        source=source,
        schema_source=schema_source,
        catalog=catalog,
        catalog_type=catalog_type,
        warehouse=warehouse,
        include_columns=None if include_columns is None else json.dumps(list(include_columns)),
        exclude_columns=None if exclude_columns is None else json.dumps(list(exclude_columns)),
        indexing_modes=None if not indexing_modes else json.dumps(dict(indexing_modes)),
        fast_field_mode=fast_field_mode,
        hashed_fastfields_include=None
        if hashed_fastfields_include is None
        else json.dumps(list(hashed_fastfields_include)),
        hashed_fastfields_exclude=None
        if hashed_fastfields_exclude is None
        else json.dumps(list(hashed_fastfields_exclude)),
        target_input_size=None if target_input_size is None else str(target_input_size),
        from_version=None if from_version is None else str(from_version),
        filter=where_filter,
        where_sql=where_sql,
        invalidate_all=invalidate_all,
        dry_run=dry_run,
    )
    opts = merged_options(spark, dict(options or {}))
    plan = command_frame(spark, plan_cmd, opts, path=location)
    rows = plan.collect()
    settings = json.loads(rows[0]["settings"])
    version = int(rows[0]["sourceVersion"])
    source_version = version if version >= 0 else None
    files = [f for r in rows for f in json.loads(r["files"])]
    groups = [r for r in rows if json.loads(r["files"])]
    invalidated = json.loads(rows[0]["invalidated"])

    def result(status: str, created: int, removed: int, indexed: int, down: int, up: int, message: str) -> DataFrame:
        ms = int((time.monotonic() - started) * 1000)
        row = (location, source, status, source_version, created, removed, indexed, down, up, ms, message)
        return local_frame(spark, [row], _schema(spark))

    if dry_run:
        return result(
            "dry_run",
            len(groups),
            0,
            len(files),
            0,
            0,
            f"Would create {len(groups)} companion splits from {len(files)} parquet files",
        )
    if not groups and not invalidated:
        return result("no_action", 0, 0, 0, 0, 0, "No changes to sync")
    build = C.CompanionBuild(build_id=uuid.uuid4().hex)
    spark.createDataFrame(rows, schema=plan.schema).write.format(FORMAT).mode("append").options(
        **opts, **build.to_options()
    ).save(location)
    done = command_frame(spark, C.CompanionResult(build_id=str(build.build_id)), opts, path=location).collect()
    if not done:
        return result("error", 0, 0, 0, 0, 0, f"the build {build.build_id} left no commit in {location}")
    d = done[0]
    warnings = "; ".join(settings.get("warnings") or [])
    message = f"Synced {d['filesIndexed']} parquet files into {d['splitsCreated']} companion splits"
    return result(
        "success",
        d["splitsCreated"],
        d["splitsInvalidated"],
        d["filesIndexed"],
        d["bytesDownloaded"],
        d["bytesUploaded"],
        message + (f" ({warnings})" if warnings else ""),
    )


def _schema(spark: SparkSession) -> Any:
    """The output's StructType (``COMPANION_OUTPUT``: names and simple types)."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    types = {"string": StringType(), "long": LongType(), "int": IntegerType()}
    return StructType([StructField(n, types[t], True) for n, t in (c.split() for c in C.COMPANION_OUTPUT.split(","))])
