"""BUILD INDEXTABLES COMPANION as Spark work: plan on the driver, index on the executors, commit once.

``command=companion_plan`` (a read) lists the source (``executor_lib.companion.sources``) and the
companion's live splits at one version and yields one row per companion split to build
(``executor_lib.companion.sync``). Writing those rows with ``command=companion_build`` indexes
each row's source files into a companion split on an executor (``splits.write.companion``) and uploads
it; the writer's commit, on the driver, creates the companion table on its first build, then
removes the invalidated splits, adds the new ones and updates the companion metadata in one
version (read at the planned version: a concurrent BUILD of the same companion conflicts).
``command=companion_result`` reads that commit's counts back.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from executor_lib import failpoints
from executor_lib.log.files.live_files import LiveFiles
from executor_lib.protocol.actions import AddAction, MetadataAction, removes_of
from executor_lib.spark import options as O
from executor_lib.spark.common import delete_quietly, delete_uncommitted
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError, TableNotFoundError

BUILD_ID_PARAMETER = C.option_key("build_id")
OPERATION = "BUILD COMPANION"


def _open_log(path: str, options: Mapping[str, str]) -> Any:
    from executor_lib.log.tables import open_log

    return open_log(path, **O.storage_and_log_options(options))


def _csv(text: str | None) -> list[str] | None:
    """A comma-separated metadata value as a list (None when absent or empty)."""
    return [p for p in text.split(",") if p] or None if text else None


def _json_list(text: str | None, clause: str) -> list[str] | None:
    if text is None:
        return None
    value = json.loads(text)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{clause}: expected a list of column names, got {text}")
    return value


def plan_companion(path: str, cmd: C.CompanionPlan, options: Mapping[str, str]) -> list[tuple[Any, ...]]:
    """The plan rows of ``cmd`` for the companion at ``path`` (module docstring).

    Raises:
        ConfigError: a clause that does not apply or names unknown columns.
        CompanionSourceError: the source cannot be listed.
    """
    from executor_lib.companion.sources import files_at, list_source
    from executor_lib.companion.sync import (
        DEFAULT_TARGET_INPUT_BYTES,
        check_schema_evolution,
        companion_configuration,
        companion_mapping,
        fingerprint_columns,
        plan_groups,
        plan_sync,
        resolve_columns,
        resolved_modes,
        strip_patterns,
    )
    from executor_lib.table_schema import arrow_to_spark_json

    kind = cmd.source_format.lower()
    if cmd.from_version is not None and kind == "parquet":
        raise ConfigError("FROM VERSION / FROM SNAPSHOT apply to Delta and Iceberg sources, not FOR PARQUET")
    try:
        txlog = _open_log(path, options)
        snapshot = txlog.snapshot()
    except TableNotFoundError:
        txlog, snapshot = None, None
    stored = dict(snapshot.metadata.configuration) if snapshot is not None else {}
    if snapshot is not None and stored.get("indextables.companion.enabled") != "true":
        raise ConfigError(f"{path}: an IndexTables table that is not a companion index is already there")
    if kind != "iceberg" and (cmd.catalog or cmd.warehouse):
        raise ConfigError(f"CATALOG / WAREHOUSE apply to FOR ICEBERG here (FOR {kind.upper()} takes a path)")
    listing = list_source(
        kind,
        cmd.source,
        O.storage_and_log_options(options),
        schema_source=cmd.schema_source,
        catalog=_iceberg_catalog(cmd, options, stored) if kind == "iceberg" else None,
    )
    warnings: list[str] = []
    if "indextables.companion.columnTypes" in stored:
        warnings = check_schema_evolution(json.loads(stored["indextables.companion.columnTypes"]), listing.schema)
    include = _json_list(cmd.include_columns, "INCLUDE COLUMNS")
    exclude = _json_list(cmd.exclude_columns, "EXCLUDE COLUMNS")
    if include is None and exclude is None:  # an incremental sync keeps the stored selection
        include = _json_list(stored.get("indextables.companion.includeColumns"), "stored includeColumns")
        exclude = _json_list(stored.get("indextables.companion.excludeColumns"), "stored excludeColumns")
    indexed, include_resolved, exclude_resolved = resolve_columns(listing, include, exclude)
    modes = (
        json.loads(cmd.indexing_modes)
        if cmd.indexing_modes
        else json.loads(stored.get("indextables.companion.indexingModes", "{}"))
    )
    fast_mode = (cmd.fast_field_mode or stored.get("indextables.companion.fastFieldMode") or "HYBRID").upper()
    hf_include = _json_list(cmd.hashed_fastfields_include, "HASHED FASTFIELDS INCLUDE")
    hf_exclude = _json_list(cmd.hashed_fastfields_exclude, "HASHED FASTFIELDS EXCLUDE")
    if hf_include is None and hf_exclude is None:  # an incremental sync keeps the stored choice (as the JVM)
        hf_include = _csv(stored.get("indextables.companion.hashedFastfieldsInclude"))
        hf_exclude = _csv(stored.get("indextables.companion.hashedFastfieldsExclude"))
    fingerprinted = fingerprint_columns(listing, indexed, modes, fast_mode, hf_include, hf_exclude)
    mapping = companion_mapping(listing, indexed, modes, fast_mode, fingerprinted)
    target = DEFAULT_TARGET_INPUT_BYTES
    if cmd.target_input_size is not None:
        target = O.parse_size("TARGET INPUT SIZE", cmd.target_input_size)
    where_text = cmd.filter
    where_sql = cmd.where_sql
    if where_text is None and "indextables.companion.whereClause" in stored:
        where_sql = stored["indextables.companion.whereClause"]
        where_text = stored.get("indextables.companion.whereFilter")
    keep = None
    if where_text is not None:
        where = F.from_text(where_text, "option filter")
        unknown = sorted(F.columns_of(where) - set(listing.partition_columns))
        if unknown:
            raise ConfigError(
                f"BUILD COMPANION WHERE: {unknown} are not partition columns of the source "
                f"{list(listing.partition_columns)}"
            )
        keep = _partition_predicate(where, listing)
    skip: frozenset[str] = frozenset()
    from_version = int(cmd.from_version) if cmd.from_version is not None else None
    if from_version is not None:
        catalog = _iceberg_catalog(cmd, options, stored) if kind == "iceberg" else None
        skip = frozenset(files_at(kind, cmd.source, from_version, catalog))
    version = listing.version if listing.version is not None else -1
    configuration = companion_configuration(
        source_path=cmd.source,
        source_format=kind,
        source_version=version,
        fast_field_mode=fast_mode,
        schema=listing.schema,
        indexing_modes=modes,
        where=where_sql,
        from_version=from_version,
        include=include_resolved,
        exclude=exclude_resolved,
        catalog=cmd.catalog,
        catalog_type=cmd.catalog_type,
        warehouse=cmd.warehouse,
    )
    for key, names in (("hashedFastfieldsInclude", hf_include), ("hashedFastfieldsExclude", hf_exclude)):
        if names:
            configuration["indextables.companion." + key] = ",".join(names)
    if kind == "iceberg":  # the JVM's reader takes an Iceberg companion's Parquet root from this key
        configuration["indextables.companion.parquetStorageRoot"] = listing.root
    if where_sql is not None and where_text is not None:
        configuration["indextables.companion.whereFilter"] = where_text  # this project's parsed form of it
    settings = json.dumps(
        {
            "sourceFormat": kind,
            "sourceRoot": listing.root,
            "source": cmd.source,
            "schema": arrow_to_spark_json(listing.schema),
            "dataColumns": listing.data_schema.names,
            "partitionColumns": list(listing.partition_columns),
            "docMapping": mapping.to_json(),
            "fastFieldMode": fast_mode,
            "configuration": configuration,
            "warnings": warnings,
            "strip": strip_patterns(listing, modes),
            "indexingModes": resolved_modes(listing, modes),
            "dryRun": cmd.dry_run,
            "sourceFiles": len(listing.files),
        },
        sort_keys=True,
    )
    read_version = snapshot.version if snapshot is not None else -1
    if cmd.dry_run:  # as the JVM: the groups of every source file (WHERE applied), nothing read from the companion
        files = [f for f in listing.files if keep is None or keep(f.partition_values)]
        groups = plan_groups(files, target)
        invalidated: tuple[AddAction, ...] = ()
    else:
        existing = list(snapshot.files) if snapshot is not None else []
        from executor_lib.splits.rows.companion import SourceFiles

        footers = SourceFiles(listing.root, O.storage_and_log_options(options))
        plan = plan_sync(
            listing, existing, target, skip, keep, invalidate_all=cmd.invalidate_all, footer_crc=footers.footer_crc
        )
        groups, invalidated = plan.groups, plan.invalidated
    removed = json.dumps([a.path for a in invalidated])
    rows = [
        (
            i,
            json.dumps(dict(g.partition_values), sort_keys=True),
            json.dumps([[f.path, f.size] for f in g.files]),
            g.size,
            version,
            read_version,
            removed,
            settings,
        )
        for i, g in enumerate(groups)
    ]
    return rows or [(0, "{}", "[]", 0, version, read_version, removed, settings)]


def _live_actions(snapshot: Any, paths: list[str]) -> list[AddAction]:
    """The actions of those ``paths`` that are live in ``snapshot``, found column-wise (no object per file)."""
    files = snapshot.state.files
    if not isinstance(files, LiveFiles):
        return [files[p] for p in paths if p in files]
    return files.actions_of(paths, missing_ok=True)


def _iceberg_catalog(cmd: C.CompanionPlan, options: Mapping[str, str], stored: Mapping[str, str]) -> dict[str, str]:
    """pyiceberg catalog properties: the SQL clause, else the stored companion metadata, else the settings."""
    props = {"name": cmd.catalog or stored.get("indextables.companion.icebergCatalog") or "default"}
    kind = (
        cmd.catalog_type
        or stored.get("indextables.companion.icebergCatalogType")
        or S.ICEBERG_CATALOG_TYPE.get(options)
    )
    warehouse = (
        cmd.warehouse or stored.get("indextables.companion.icebergWarehouse") or S.ICEBERG_WAREHOUSE.get(options)
    )
    for key, value in (
        ("type", kind),
        ("warehouse", warehouse),
        ("uri", S.ICEBERG_URI.get(options)),
        ("token", S.ICEBERG_TOKEN.get(options)),
        ("credential", S.ICEBERG_CREDENTIAL.get(options)),
        ("s3.endpoint", S.ICEBERG_S3_ENDPOINT.get(options)),
        ("s3.path-style-access", S.ICEBERG_S3_PATH_STYLE_ACCESS.get(options)),
    ):
        if value:
            props[key] = value
    return props


def _partition_predicate(where: F.Filter, listing: Any) -> Any:
    """A function of a file's partition values: whether WHERE keeps the file."""
    from executor_lib.splits.query.pushdown import residual_mask

    columns = list(listing.partition_columns)

    def keep(values: Mapping[str, str | None]) -> bool:
        table = pa.table(
            {c: pa.array([values.get(c)], pa.string()).cast(listing.schema.field(c).type) for c in columns}
        )
        mask = residual_mask(where, table, lambda q: pa.array([], pa.uint64())).to_pylist()
        return bool(mask[0])

    return keep


def run_plan_row(payload: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    yield payload


def run_result(path: str, cmd: C.CompanionResult, options: Mapping[str, str]) -> Iterator[tuple[Any, ...]]:
    txlog = _open_log(path, options)
    latest = txlog.latest_version()
    for v in range(latest, max(-1, latest - 200), -1):
        info = txlog.commit_info(v)
        params = (info.operation_parameters or {}) if info is not None else {}
        if params.get(BUILD_ID_PARAMETER) != cmd.build_id:
            continue
        yield (
            v,
            int(params["splitsCreated"]),
            int(params["splitsInvalidated"]),
            int(params["filesIndexed"]),
            int(params["bytesDownloaded"]),
            int(params["bytesUploaded"]),
            int(params["sourceVersion"]),
        )
        return


# --- the write step: index on the executors, commit on the driver --------------------------------------


@dataclass
class CompanionCommitMessage(WriterCommitMessage):
    added: list[AddAction] = field(default_factory=list)
    invalidated: list[str] = field(default_factory=list)
    settings: str = ""
    read_version: int = -1
    source_version: int = -1
    files_indexed: int = 0
    bytes_read: int = 0


class CompanionWriter(DataSourceArrowWriter):
    """Writing ``companion_plan`` rows builds each row's companion split; commit is one version."""

    def __init__(self, raw_options: Mapping[str, str], options: Mapping[str, str], build_id: str | None) -> None:
        self.options = dict(options)
        self.path = str(raw_options.get("path") or "")
        if not self.path:
            raise ConfigError("command companion_build: no table path")
        self.build_id = build_id or ""

    def _store(self) -> Any:
        from executor_lib.storage import open_store

        return open_store(self.path, **O.storage_and_log_options(self.options))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> CompanionCommitMessage:
        from executor_lib.companion.sync import source_footer_crcs_tag, source_identities_tag
        from executor_lib.splits.doc_mapping import DocMapping
        from executor_lib.splits.write.companion import SourceFiles, build_companion_split
        from executor_lib.splits.write.publish import upload_split
        from executor_lib.table_schema import spark_json_to_arrow

        message = CompanionCommitMessage()
        store = None
        work = Path(tempfile.mkdtemp(prefix="companion-"))
        try:
            for batch in iterator:
                for row in batch.to_pylist():
                    settings = json.loads(row["settings"])
                    message.settings = row["settings"]
                    message.read_version = int(row["readVersion"])
                    message.source_version = int(row["sourceVersion"])
                    message.invalidated = json.loads(row["invalidated"])
                    files = [str(p) for p, _ in json.loads(row["files"])]
                    if not files:
                        continue
                    schema = spark_json_to_arrow(settings["schema"])
                    data_schema = pa.schema([schema.field(c) for c in settings["dataColumns"]])
                    sources = SourceFiles(settings["sourceRoot"], O.storage_and_log_options(self.options))
                    mapping = DocMapping.from_json(settings["docMapping"])
                    identities: dict[str, tuple[int, int]] = {}
                    footer_crcs: dict[str, int] = {}
                    written, read = build_companion_split(
                        sources,
                        files,
                        settings["sourceFormat"],
                        data_schema,
                        mapping,
                        work,
                        strip=settings.get("strip") or {},
                        fast_field_mode=settings["fastFieldMode"],
                        indexing_modes=settings.get("indexingModes") or {},
                        identities=identities,
                        footer_crcs=footer_crcs,
                    )
                    store = store or self._store()
                    add = upload_split(store, written, json.loads(row["partitionValues"]))
                    written.path.unlink(missing_ok=True)
                    message.added.append(
                        dataclasses.replace(
                            add,
                            companion_source_files=tuple(files),
                            tags={
                                **(add.tags or {}),
                                **source_identities_tag(identities),
                                **source_footer_crcs_tag(footer_crcs),
                            },
                            companion_delta_version=message.source_version,
                            companion_fast_field_mode=settings["fastFieldMode"],
                        )
                    )
                    message.files_indexed += len(files)
                    message.bytes_read += read
        except BaseException:
            if message.added:
                delete_quietly(store or self._store(), [a.path for a in message.added])
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return message

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        from executor_lib.log.tables import create_table
        from executor_lib.table_schema import spark_json_to_arrow

        done = [m for m in messages if isinstance(m, CompanionCommitMessage) and m.settings]
        if not done:
            return
        first = done[0]
        settings = json.loads(first.settings)
        configuration = dict(settings["configuration"])
        adds = [a for m in done for a in m.added]
        invalidated = sorted({p for m in done for p in m.invalidated})
        failpoints.reach("spark.commit.before")
        try:
            if first.read_version < 0:
                schema = spark_json_to_arrow(settings["schema"])
                txlog = create_table(
                    self.path,
                    schema,
                    settings["partitionColumns"],
                    configuration=configuration,
                    **O.storage_and_log_options(self.options),
                )
                read_version = txlog.latest_version()
                actions: list[Any] = list(adds)
            else:
                txlog = _open_log(self.path, self.options)
                snapshot = txlog.snapshot(version=first.read_version)
                _check_no_concurrent_build(txlog, first.read_version, adds, set(invalidated))
                removed = _live_actions(snapshot, invalidated)
                metadata: MetadataAction = snapshot.metadata
                updated = metadata.with_configuration({**metadata.configuration, **configuration})
                actions = [*removes_of(removed, data_change=True), *adds, updated]
                read_version = first.read_version
            txlog.commit(
                actions,
                read_version=read_version,
                operation=OPERATION,
                operation_parameters={
                    BUILD_ID_PARAMETER: self.build_id,
                    "splitsCreated": str(len(adds)),
                    "splitsInvalidated": str(len(invalidated)),
                    "filesIndexed": str(sum(m.files_indexed for m in done)),
                    "bytesDownloaded": str(sum(m.bytes_read for m in done)),
                    "bytesUploaded": str(sum(a.size for a in adds)),
                    "sourceVersion": str(first.source_version),
                    "committedAt": str(int(time.time() * 1000)),
                },
            )
        except Exception:
            self.abort(messages)
            raise

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Spark aborts a failed BUILD, also when the worker running ``commit`` died after its version
        landed: the splits no version after the build's read version names are deleted."""
        done = [m for m in messages if isinstance(m, CompanionCommitMessage) and m.added]
        if done:
            read_version = min(m.read_version for m in done)
            delete_uncommitted(self.path, self.options, [a.path for m in done for a in m.added], read_version)


def _check_no_concurrent_build(txlog: Any, read_version: int, adds: list[AddAction], removing: set[str]) -> None:
    """CommitConflictError if a BUILD committed since ``read_version`` indexed any of the source files
    these adds index (their rows would be in the companion twice)."""
    from indextables_contract.errors import CommitConflictError

    latest = txlog.snapshot()
    if latest.version == read_version:
        return
    mine = {p for a in adds for p in a.companion_source_files or ()}
    theirs = {p for a in latest.files if a.path not in removing for p in a.companion_source_files or ()}
    both = sorted(mine & theirs)
    if both:
        raise CommitConflictError(
            f"BUILD INDEXTABLES COMPANION {txlog.uri}: a concurrent BUILD (committed after version {read_version}) "
            f"indexed the same source files {both[:5]}; nothing was committed: run BUILD again"
        )
