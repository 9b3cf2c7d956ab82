"""PURGE: delete split files no retained version needs, then old log files and orphaned manifests.

A split file is deleted only when all of these hold:

* it is not live in the latest version, nor in any state or checkpoint the log cleanup keeps,
  nor in the oldest version still rebuildable from version files, nor added by any version
  file that remains — so every version that stays readable keeps all its files;
* it was last modified longer ago than the retention (``retention_hours``, never below 24):
  a writer may have uploaded it and not committed yet.

So an upload whose commit was refused (or never came) is an orphan PURGE collects once it is
older than the retention. Temporary files a crashed writer left (``*.tmp-*``) go too when older
than the retention (in the log: see ``log.maintenance.cleanup``).

Log files, state directories and manifests follow ``log.maintenance.cleanup`` with
``purge.txLogRetentionHours`` (or the given transaction-log retention). Like Delta Lake's
VACUUM, a purge limits time travel to what remains.
"""

from __future__ import annotations

import dataclasses
import io
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from executor_lib.log.maintenance.cleanup import CleanupReport, cleanup_log
from executor_lib.log.state.version_files import list_log, read_version_actions
from executor_lib.protocol.actions import AddAction
from executor_lib.protocol.files import LOG_DIR, decode_log_bytes, version_file, version_name
from executor_lib.storage.base import ObjectStore, plain_relative_paths, table_key
from indextables_contract.errors import ConfigError, IndexTablesError, InvalidPathError

MIN_RETENTION_HOURS = 24.0
_HOUR_MS = 3600 * 1000


@dataclass
class PurgeReport:
    dry_run: bool
    earliest_version: int
    deleted_splits: list[tuple[str, int]] = field(default_factory=list)  # (key, size)
    deleted_temporary: list[tuple[str, int]] = field(default_factory=list)  # crash leftovers outside the log
    log: CleanupReport | None = None

    def rows(self) -> list[tuple[str, str, int]]:
        """(kind, key, size) of everything deleted (or, in a dry run, that would be)."""
        out = [("split", key, size) for key, size in self.deleted_splits]
        out += [("temporary", key, size) for key, size in self.deleted_temporary]
        if self.log is not None:
            out += [("temporary", k, 0) for k in self.log.deleted_temporary]
            out += [("state", f"state-v{v}", 0) for v in self.log.deleted_states]
            out += [("manifest", k, 0) for k in self.log.deleted_manifests]
            out += [("log", k, 0) for k in self.log.deleted_version_files + self.log.deleted_checkpoint_files]
        return out


def _live_paths(snapshot: Any) -> pa.ChunkedArray:
    """A snapshot's live file paths, from its path column (no object per file)."""
    return snapshot.file_columns(["path"]).column("path")


def _added_paths(store: ObjectStore, version: int) -> pa.Array:
    """The paths of the files a version file adds, read by Arrow's JSON reader (only ``add.path`` is
    parsed); a file it cannot read is parsed action by action (``read_version_actions``)."""
    key = f"{LOG_DIR}/{version_file(version)}"
    try:
        text = decode_log_bytes(store.read(key), store.uri_of(key))
        options = pa_json.ParseOptions(explicit_schema=_ADD_PATH, unexpected_field_behavior="ignore")
        adds = pa_json.read_json(io.BytesIO(text.encode()), parse_options=options).column("add")
        paths = pa.chunked_array([chunk.flatten()[0] for chunk in adds.chunks], pa.string())
        return pc.drop_null(paths).combine_chunks()
    except (pa.ArrowInvalid, ValueError):
        actions = read_version_actions(store, version)
        return pa.array([a.path for a in actions if isinstance(a, AddAction)], pa.string())


_ADD_PATH = pa.schema([("add", pa.struct([("path", pa.string())]))])


def _keys(store: ObjectStore, paths: Sequence[pa.Array | pa.ChunkedArray]) -> set[str]:
    """Storage keys of the file ``paths`` a table references, by the rule reads use (``storage.base.table_key``):
    a relative path and the full URI of the same file are one key. A path outside the table cannot
    match a listed key (nothing outside is deleted); a malformed one is kept as it is. Each distinct
    path is judged once; plain relative paths (``storage.base.plain_relative_paths``) are their keys."""
    chunks = [c for p in paths for c in (p.chunks if isinstance(p, pa.ChunkedArray) else [p])]
    distinct = pc.unique(pa.chunked_array(chunks, pa.string())) if chunks else pa.array([], pa.string())
    plain = plain_relative_paths(distinct)
    keys = set(pc.filter(distinct, plain).to_pylist())
    for path in pc.filter(distinct, pc.invert(plain)).to_pylist():
        try:
            keys.add(table_key(store.root_uri, path))
        except InvalidPathError:
            keys.add(path)
    return keys


def _nested_tables(keys: Sequence[str]) -> tuple[str, ...]:
    """The key prefixes (``"<dir>/"``) of other tables inside this one: directories holding a
    ``_transaction_log/`` of their own. Their files are never this table's to delete, live or not.

    Example: ``_nested_tables(["a/_transaction_log/00000000000000000000.json"])`` is ``("a/",)``.
    """
    marker = f"/{LOG_DIR}/"
    return tuple(sorted({key[: i + 1] for key in keys if (i := key.find(marker)) > 0}))


def _inside(key: str, prefixes: tuple[str, ...]) -> bool:
    return bool(prefixes) and key.startswith(prefixes)


def _is_split(key: str) -> bool:
    return key.endswith(".split") and not key.startswith(f"{LOG_DIR}/")


def _unprotected(files: list[tuple[str, int]], paths: Sequence[pa.ChunkedArray]) -> list[tuple[str, int]]:
    """The ``files`` (key, size) whose key is none of ``paths`` as written (vectorized). A path equal to
    a key protects it whatever ``table_key`` makes of it, so this keeps only files ``_keys`` would not
    protect either (it can protect more, never less)."""
    if not files:
        return []
    listed = pa.array([key for key, _ in files], pa.string())
    written = pa.chunked_array([c for p in paths for c in p.chunks], pa.string())
    keep = pc.invert(pc.is_in(listed, value_set=written.combine_chunks())).to_pylist()
    return [f for f, k in zip(files, keep, strict=True) if k]


def _readable(txlog: Any, store: ObjectStore, log_report: CleanupReport) -> tuple[list[int], list[Any], list[int]]:
    """What stays readable after the log cleanup: the versions, the snapshots of the bases (states,
    checkpoints, the oldest version file) whose files it must protect, and the remaining version files."""
    gone = set(log_report.deleted_version_files) | set(log_report.deleted_checkpoint_files)
    listing = list_log(store)
    remaining = sorted(v for v in listing.versions if f"{LOG_DIR}/{version_name(v)}.json" not in gone)
    bases = sorted(
        set(log_report.retained_states)
        | {c for c in listing.checkpoints if f"{LOG_DIR}/{version_name(c)}.checkpoint.json" not in gone}
    )
    # Every version that stays readable is a base (state/checkpoint) or a base plus the version
    # files after it, or is rebuilt from the oldest version files: protect what those hold. A base
    # reached from the base before it through version files that all remain holds nothing those
    # two do not (its live files: the earlier base's plus the adds between), so it is not loaded.
    readable: list[int] = []
    snapshots: list[Any] = []
    retained, loaded = set(remaining), None
    for v in sorted(set(bases) | set(remaining[:1])):
        if loaded is not None and all(u in retained for u in range(loaded + 1, v + 1)):
            readable.append(v)
            continue
        try:
            snapshots.append(txlog.snapshot(version=v))
        except IndexTablesError:
            continue
        readable.append(v)
        loaded = v
    return readable, snapshots, remaining


def purge_table(
    txlog: Any,
    retention_hours: float = 168.0,
    tx_log_retention_hours: float | None = None,
    dry_run: bool = False,
    now_ms: int | None = None,
) -> PurgeReport:
    """Purge the table of ``txlog`` (a ``TransactionLog``) under the rules above."""
    for name, hours in (("retention", retention_hours), ("transaction log retention", tx_log_retention_hours)):
        if hours is not None and hours < MIN_RETENTION_HOURS:
            raise ConfigError(f"purge {txlog.uri}: {name} {hours}h is below the minimum of {MIN_RETENTION_HOURS:.0f}h")
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    store = txlog.store
    config = txlog.config
    if tx_log_retention_hours is not None:
        config = dataclasses.replace(config, tx_log_retention_hours=tx_log_retention_hours)
    latest = txlog.snapshot()
    log_report = cleanup_log(store, config, dry_run=dry_run, now_ms=now_ms)
    horizon = now_ms - int(retention_hours * _HOUR_MS)
    listed = list(store.list(""))
    nested = _nested_tables([o.key for o in listed])
    old = [
        (o.key, o.size) for o in listed if _is_split(o.key) and o.modified_ms < horizon and not _inside(o.key, nested)
    ]
    # Cheapest first: most old files are live in the latest version (a listed key that is a live
    # path as written is protected); only what that leaves is judged against every readable version.
    old = _unprotected(old, [_live_paths(latest)])
    readable, bases, remaining = _readable(txlog, store, log_report)
    if old:  # then every path a readable version holds, judged as reads judge it (``_keys``)
        paths: list[pa.Array | pa.ChunkedArray] = [_live_paths(latest), *(_live_paths(b) for b in bases)]
        with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:  # gunzip, JSON: no GIL
            paths.extend(pool.map(lambda v: _added_paths(store, v), remaining))
        protected = _keys(store, paths)
        old = [(key, size) for key, size in old if key not in protected]
    earliest = min(readable) if readable else latest.version
    report = PurgeReport(dry_run=dry_run, earliest_version=earliest, deleted_splits=old, log=log_report)
    report.deleted_temporary = [
        (o.key, o.size)
        for o in store.list_temporary("")
        if not o.key.startswith(f"{LOG_DIR}/") and o.modified_ms < horizon and not _inside(o.key, nested)
    ]
    if not dry_run:
        for key, _ in report.deleted_splits + report.deleted_temporary:
            store.delete(key)
    return report
