"""The source tables a companion index covers: their Parquet files, schema, partitioning and version.

* ``parquet``: a directory of Parquet files (Hive-style ``col=value`` directories are partitions,
  their values strings; files and directories starting with ``_`` or ``.`` are skipped). The
  schema comes from ``SCHEMA SOURCE`` (a Parquet file) or the first file. No version.
* ``delta``: a Delta Lake table read with the ``deltalake`` package: the live files of the latest
  version, the table's schema and partition columns; the version is the Delta version.
* ``iceberg``: a table of a ``pyiceberg`` catalog (``CATALOG name TYPE type`` plus
  ``spark.indextables.iceberg.*`` catalog properties): the data files of the current snapshot; the
  version is the snapshot id.

File paths are relative to the source root (as the JVM records ``companionSourceFiles``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from indextables_contract.errors import CompanionSourceError, ConfigError

FORMATS = ("delta", "parquet", "iceberg")


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative to the source root
    size: int
    partition_values: Mapping[str, str | None] = field(default_factory=dict)
    modified_ms: int | None = None  # as the store lists it (a Parquet directory's files); None: not known


@dataclass(frozen=True)
class SourceListing:
    """A source table at one version: its root, live Parquet files, schema (data columns, then
    partition columns) and partition columns."""

    source_format: str
    root: str
    version: int | None
    files: tuple[SourceFile, ...]
    schema: pa.Schema
    partition_columns: tuple[str, ...]

    @property
    def data_schema(self) -> pa.Schema:
        return pa.schema([f for f in self.schema if f.name not in self.partition_columns])


def list_source(
    source_format: str,
    source: str,
    storage_options: Mapping[str, Any] | None = None,
    *,
    schema_source: str | None = None,
    catalog: Mapping[str, str] | None = None,
) -> SourceListing:
    """The live files of the source table ``source`` (a path; for Iceberg ``namespace.table``).

    Raises:
        CompanionSourceError: the source does not exist or cannot be read (named).
        ConfigError: an unknown format, or an option that does not apply.

    Example: ``list_source("delta", "/data/events").files``
    """
    kind = source_format.lower()
    if kind == "parquet":
        return _list_parquet(source, storage_options or {}, schema_source)
    if schema_source is not None:
        raise ConfigError(f"SCHEMA SOURCE applies to FOR PARQUET only, not FOR {kind.upper()}")
    if kind == "delta":
        return _list_delta(source)
    if kind == "iceberg":
        return _list_iceberg(source, dict(catalog or {}))
    raise ConfigError(f"companion source format {source_format!r}: expected one of {list(FORMATS)}")


def files_at(source_format: str, source: str, version: int, catalog: Mapping[str, str] | None = None) -> set[str]:
    """The relative paths of the source's live files at ``version`` (FROM VERSION: a Delta version;
    FROM SNAPSHOT: an Iceberg snapshot id)."""
    if source_format == "iceberg":
        return {f.path for f in _list_iceberg(source, dict(catalog or {}), version).files}
    return {f.path for f in _list_delta(source, version).files}


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def _list_parquet(source: str, storage_options: Mapping[str, Any], schema_source: str | None) -> SourceListing:
    import pyarrow.parquet as pq

    from executor_lib.storage import open_store

    store = open_store(source, **storage_options)
    files: list[SourceFile] = []
    partition_columns: list[str] = []
    for info in store.list(""):
        relative = info.key
        if not relative.endswith(".parquet") or _hidden(relative):
            continue
        values: dict[str, str | None] = {}
        for part in posixpath.dirname(relative).split("/"):
            if "=" in part:
                name, _, value = part.partition("=")
                values[name] = None if value == "__HIVE_DEFAULT_PARTITION__" else value
        if not files:
            partition_columns = list(values)
        elif list(values) != partition_columns:
            raise CompanionSourceError(
                f"{store.uri_of(relative)}: its partition directories {list(values)} differ from the other files' "
                f"{partition_columns}"
            )
        files.append(SourceFile(relative, int(info.size), values, int(info.modified_ms)))
    if not files:
        raise CompanionSourceError(f"{store.root_uri}: no Parquet files (*.parquet) under the source directory")
    try:
        if schema_source is not None:
            local = store.local_path(store.key_of(schema_source)) if "://" in schema_source else None
            schema = pq.read_schema(str(local or schema_source))
        else:
            schema = _file_schema(store, files[0].path)
    except (OSError, ValueError) as e:
        where = schema_source or store.uri_of(files[0].path)
        raise CompanionSourceError(f"SCHEMA SOURCE {where}: not a readable Parquet file ({e})") from e
    data = [f for f in schema.remove_metadata() if f.name not in partition_columns]
    full = pa.schema([*data, *(pa.field(c, pa.string()) for c in partition_columns)])
    return SourceListing(
        "parquet", store.root_uri, None, tuple(sorted(files, key=lambda f: f.path)), full, tuple(partition_columns)
    )


def _file_schema(store: Any, relative: str) -> pa.Schema:
    import pyarrow.parquet as pq

    local = store.local_path(relative)
    if local is not None:
        return pq.read_schema(str(local))
    return pq.read_schema(pa.BufferReader(store.read(relative)))


def _list_delta(source: str, version: int | None = None) -> SourceListing:
    try:
        import deltalake
    except ImportError as e:  # pragma: no cover - the test extra installs it
        raise ConfigError("FOR DELTA needs the deltalake package (pip install deltalake)") from e
    from executor_lib.storage.base import canonical_uri

    try:
        table = deltalake.DeltaTable(source, version=version)
    except Exception as e:  # deltalake raises its own TableNotFoundError / DeltaError kinds
        raise CompanionSourceError(f"FOR DELTA {source!r}: not a readable Delta table ({e})") from e
    partition_columns = tuple(table.metadata().partition_columns)
    schema = pa.schema(table.schema().to_arrow())
    actions = pa.table(table.get_add_actions(flatten=True))
    vectors = [c for c in actions.column_names if c.lower().startswith("deletionvector")]
    if any(actions.column(c).null_count < actions.num_rows for c in vectors):
        raise CompanionSourceError(
            f"FOR DELTA {source!r}: some files carry deletion vectors (rows deleted without rewriting the file); "
            "companion indexes read whole Parquet files: purge them first (REORG TABLE ... APPLY (PURGE))"
        )
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    partitions = {c: actions.column(f"partition.{c}").to_pylist() for c in partition_columns}
    files = []
    for i, path in enumerate(paths):
        values = {c: None if partitions[c][i] is None else str(partitions[c][i]) for c in partition_columns}
        files.append(SourceFile(_unquote(path), int(sizes[i]), values))
    data = [f for f in schema if f.name not in partition_columns]
    full = pa.schema([*data, *(schema.field(c) for c in partition_columns)])
    return SourceListing(
        "delta",
        canonical_uri(source),
        int(table.version()),
        tuple(sorted(files, key=lambda f: f.path)),
        full,
        partition_columns,
    )


def _unquote(path: str) -> str:
    from urllib.parse import unquote

    return unquote(path)


def _list_iceberg(source: str, catalog: dict[str, str], snapshot_id: int | None = None) -> SourceListing:
    try:
        from pyiceberg.catalog import load_catalog
    except ImportError as e:
        raise ConfigError("FOR ICEBERG needs the pyiceberg package (pip install 'pyiceberg[sql-sqlite]')") from e
    name = catalog.pop("name", "default")
    try:
        table = load_catalog(name, **catalog).load_table(source)
    except Exception as e:  # pyiceberg's NoSuchTableError and catalog errors
        raise CompanionSourceError(
            f"FOR ICEBERG {source!r} (catalog {name!r}): the table cannot be loaded ({e})"
        ) from e
    location = table.location().rstrip("/")
    snapshot = table.current_snapshot() if snapshot_id is None else table.snapshot_by_id(snapshot_id)
    if snapshot_id is not None and snapshot is None:
        raise CompanionSourceError(f"FOR ICEBERG {source!r}: no snapshot {snapshot_id} (FROM SNAPSHOT)")
    schema = table.schema().as_arrow()
    files = []
    if snapshot is not None:
        for task in table.scan(snapshot_id=snapshot.snapshot_id).plan_files():
            if task.delete_files:
                raise CompanionSourceError(
                    f"FOR ICEBERG {source!r}: data file {task.file.file_path} has merge-on-read delete files; "
                    "companion indexes cover copy-on-write tables (rewrite the table's deletes first)"
                )
            path = task.file.file_path
            relative = path[len(location) + 1 :] if path.startswith(location + "/") else path
            files.append(SourceFile(relative, int(task.file.file_size_in_bytes), {}))
    # Iceberg data files hold their partition source columns: every column is a data column here.
    full = pa.schema([pa.field(f.name, _plain_type(f.type)) for f in schema])
    partition_columns: tuple[str, ...] = ()
    version = None if snapshot is None else int(snapshot.snapshot_id)
    return SourceListing(
        "iceberg", location, version, tuple(sorted(files, key=lambda f: f.path)), full, partition_columns
    )


def _plain_type(t: pa.DataType) -> pa.DataType:
    """pyiceberg's Arrow types as Spark reads them (large strings and binaries as plain ones)."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    return t
