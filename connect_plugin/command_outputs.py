"""IndexTables4Spark's SQL commands with its documented output columns (names, types, order).

``connect_plugin.sql`` parses the statements (``connect_plugin.grammar``) and calls these; each
runs this project's command (``IndexTable`` methods, the contract's commands) and returns its
result as the JVM documents it (docs/reference/sql-commands.md of IndexTables4Spark). Where a
JVM concept has no counterpart here, the row says what happened instead, e.g. DESCRIBE
INDEXTABLES PREWARM JOBS is empty because a PREWARM here finishes before it returns.

Nothing here imports tantivy or executor_lib: the commands run on the cluster.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from connect_plugin.plan import command_frame, local_frame
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract import settings as S
from indextables_contract.errors import IndexTablesSQLError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from connect_plugin.table import IndexTable

CHECKPOINT_COLUMNS = (
    "table_path string, status string, checkpoint_version long, num_actions long, num_files long, "
    "protocol_version long, is_multi_part boolean"
)
TRUNCATE_COLUMNS = (
    "table_path string, status string, checkpoint_version long, versions_deleted long, "
    "checkpoints_deleted long, files_preserved long, message string"
)
PREWARM_COLUMNS = (
    "host string, splits_prewarmed int, segments string, fields string, duration_ms long, "
    "status string, skipped_fields string"
)
STATE_COLUMNS = (
    "format string, version long, num_files long, num_manifests long, num_tombstones long, "
    "tombstone_ratio double, needs_compaction boolean"
)
DISK_CACHE_COLUMNS = (
    "executor_id string, host string, enabled boolean, total_bytes long, max_bytes long, "
    "usage_percent double, splits_cached long, components_cached long"
)
STORAGE_STATS_COLUMNS = "executor_id string, host string, bytes_fetched long, requests long"
ENVIRONMENT_COLUMNS = "host string, role string, property_type string, property_name string, property_value string"
MERGE_JOBS_COLUMNS = (
    "job_id string, table_path string, status string, total_groups int, completed_groups int, "
    "total_batches int, completed_batches int, progress_pct double, duration_ms long, "
    "error_message string"
)
PREWARM_JOBS_COLUMNS = (
    "executor_id string, host string, job_id string, table_path string, status string, "
    "total_splits int, completed_splits int, progress_pct double, duration_ms long, "
    "error_message string"
)
WAIT_COLUMNS = (
    "executor_id string, host string, job_id string, table_path string, status string, "
    "total_splits int, splits_prewarmed int, duration_ms long, error_message string"
)

# PREWARM ... FOR SEGMENTS: the JVM's names and aliases -> its canonical names.
SEGMENTS = {
    "TERM_DICT": "TERM_DICT",
    "TERM": "TERM_DICT",
    "FAST_FIELD": "FAST_FIELD",
    "FASTFIELD": "FAST_FIELD",
    "POSTINGS": "POSTINGS",
    "POSTING_LISTS": "POSTINGS",
    "POSITIONS": "POSITIONS",
    "POSITION_LISTS": "POSITIONS",
    "FIELD_NORM": "FIELD_NORM",
    "FIELDNORM": "FIELD_NORM",
    "DOC_STORE": "DOC_STORE",
    "STORE": "DOC_STORE",
}
DEFAULT_SEGMENTS = ("TERM_DICT", "POSTINGS")
_SECRET = re.compile(r"secret|password|token|credential|access[._-]?key|session[._-]?key|sas|signature", re.I)
REDACTED = "***REDACTED***"


def schema(ddl: str) -> StructType:
    """A result schema's DDL (``name type, ...``) as a StructType (no JVM needed)."""
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    types = {
        "string": StringType,
        "long": LongType,
        "int": IntegerType,
        "boolean": BooleanType,
        "double": DoubleType,
        "timestamp": TimestampType,
    }
    return StructType([StructField(n, types[t]()) for n, t in (c.split() for c in ddl.split(", "))])


def _frame(spark: SparkSession, rows: Iterable[tuple[Any, ...]], ddl: str) -> DataFrame:
    return local_frame(spark, list(rows), schema(ddl))


def _state(table: IndexTable) -> dict[str, Any]:
    return {r["property"]: r["value"] for r in table.describe_state().collect()}


def checkpoint(table: IndexTable) -> DataFrame:
    """CHECKPOINT / COMPACT INDEXTABLES: a fresh state of the latest version (Avro state or JSON
    checkpoint), tombstones dropped."""
    row = table.checkpoint().collect()[0]
    protocol = json.loads(_state(table).get("protocol") or "{}")
    num_files = int(row["numFiles"])
    protocol_version = protocol.get("minReaderVersion") or (4 if row["format"] == "avro-state" else 3)
    out = (table.path, "SUCCESS", int(row["version"]), num_files + 2, num_files, int(protocol_version), False)
    return _frame(table.spark, [out], CHECKPOINT_COLUMNS)


def truncate_time_travel(table: IndexTable, dry_run: bool) -> DataFrame:
    """TRUNCATE INDEXTABLES TIME TRAVEL: checkpoint, then delete every older version file and state."""
    rows = table.truncate_time_travel(dry_run=dry_run).collect()
    state = _state(table)
    logs = [r["path"] for r in rows if r["kind"] == "log"]
    checkpoints = sum(1 for p in logs if ".checkpoint" in p) + sum(1 for r in rows if r["kind"] == "state")
    versions = sum(1 for p in logs if ".checkpoint" not in p)
    verb = "would delete" if dry_run else "deleted"
    message = (
        f"{verb} {versions} version files and {checkpoints} older checkpoints/states "
        f"({sum(1 for r in rows if r['kind'] == 'manifest')} manifests)"
    )
    out = (
        table.path,
        "DRY_RUN" if dry_run else "SUCCESS",
        int(state["version"]),
        versions,
        checkpoints,
        int(state["numFiles"]),
        message,
    )
    return _frame(table.spark, [out], TRUNCATE_COLUMNS)


def prewarm(
    table: IndexTable,
    where: F.Filter | None,
    segments: list[str] | None,
    fields: list[str] | None,
    parallelism: int | None,
) -> DataFrame:
    """PREWARM INDEXTABLES CACHE: copy the matching splits into the executors' split caches. A split is
    cached whole here, so every segment kind and field is warm afterwards; FOR SEGMENTS and ON FIELDS
    are checked (an unknown segment or field is an error, as with the JVM's ``failOnMissingField``)
    and reported. PERWORKER PARALLELISM must be positive; Spark's task slots set the concurrency."""
    names = []
    for s in segments or DEFAULT_SEGMENTS:
        canonical = SEGMENTS.get(s.upper())
        if canonical is None:
            raise IndexTablesSQLError(f"PREWARM: unknown segment {s!r} (known: {sorted(SEGMENTS)})")
        names.append(canonical)
    if parallelism is not None and parallelism < 1:
        raise IndexTablesSQLError(f"PREWARM: PERWORKER PARALLELISM must be at least 1, got {parallelism}")
    if fields:
        from connect_plugin.session import read

        columns = {c.lower() for c in read(table.spark, table.path, options=table.options).columns}
        missing = [f for f in fields if f.lower() not in columns]
        if missing:
            raise IndexTablesSQLError(
                f"PREWARM {table.path}: fields {missing} are not columns of the table "
                f"(spark.indextables.prewarm.failOnMissingField is true)"
            )
    started = time.monotonic()
    rows = table.prewarm(where).collect()
    elapsed = int((time.monotonic() - started) * 1000)
    by_host: dict[str, int] = {}
    for r in rows:
        by_host[r["host"]] = by_host.get(r["host"], 0) + 1
    segments_text = ",".join(dict.fromkeys(names))
    fields_text = ",".join(fields) if fields else "all"
    out: list[tuple[Any, ...]] = [
        (host, n, segments_text, fields_text, elapsed, "success", None) for host, n in sorted(by_host.items())
    ]
    if not out:
        out = [(None, 0, segments_text, fields_text, elapsed, "no_splits", None)]
    return _frame(table.spark, out, PREWARM_COLUMNS)


def describe_state(table: IndexTable) -> DataFrame:
    """DESCRIBE INDEXTABLES STATE: how the latest state is stored, its tombstones."""
    state = _state(table)
    fmt = {"avro-state": "avro-state", "json-checkpoint": "json"}.get(state.get("stateFormat") or "", "none")
    version = int(state.get("stateVersion") or state["version"]) if fmt == "avro-state" else int(state["version"])
    files, tombstones = int(state["numFiles"]), int(state.get("numTombstones") or 0)
    ratio = tombstones / (files + tombstones) if files + tombstones else 0.0
    from connect_plugin.settings import session_options

    settings = session_options(table.spark)
    # the next state write rewrites manifests for their tombstones (PROTOCOL.md §10): a share past the
    # threshold somewhere (so, at least, the table's), or more tombstones listed than the state may keep
    rewrite = ratio > S.STATE_COMPACTION_TOMBSTONE_THRESHOLD.get(settings) or (
        fmt == "avro-state" and tombstones > S.STATE_COMPACTION_MAX_TOMBSTONES.get(settings)
    )
    out = (fmt, version, files, int(state.get("numManifests") or 0), tombstones, ratio, rewrite)
    return _frame(table.spark, [out], STATE_COLUMNS)


def _cache_rows(spark: SparkSession, options: dict[str, Any]) -> list[Any]:
    return command_frame(spark, C.DescribeCache(), options).collect()


def describe_disk_cache(spark: SparkSession, options: dict[str, Any]) -> DataFrame:
    """DESCRIBE INDEXTABLES DISK CACHE: the split cache of the executors (whole splits are cached:
    ``components_cached`` counts splits too)."""
    out = []
    for r in _cache_rows(spark, options):
        total, most = int(r["bytesCached"] or 0), r["maxBytes"]
        usage = 100.0 * total / most if most else None
        out.append(
            (f"{r['host']}:{r['pid']}", r["host"], True, total, most, usage, r["splitsCached"], r["splitsCached"])
        )
    return _frame(spark, out, DISK_CACHE_COLUMNS)


def describe_storage_stats(spark: SparkSession, options: dict[str, Any]) -> DataFrame:
    """DESCRIBE INDEXTABLES STORAGE STATS: bytes the executors fetched from object storage into their
    split caches and how many fetches (cache misses), cumulative since the cache was created."""
    out = [
        (f"{r['host']}:{r['pid']}", r["host"], int(r["bytesDownloaded"] or 0), int(r["misses"] or 0))
        for r in _cache_rows(spark, options)
    ]
    return _frame(spark, out, STORAGE_STATS_COLUMNS)


def describe_environment(spark: SparkSession) -> DataFrame:
    """DESCRIBE INDEXTABLES ENVIRONMENT: the session's Spark properties (secrets redacted). The
    executors here are Python workers that get their settings from each read's options, which
    come from these properties; Hadoop properties are not read by this project."""
    import socket

    try:
        props = dict(spark.conf.getAll)  # a property in Spark 4 (Connect and classic)
    except Exception:
        props = dict(spark.sparkContext.getConf().getAll())
    host = socket.gethostname()
    out = [(host, "driver", "spark", k, REDACTED if _SECRET.search(k) else str(v)) for k, v in sorted(props.items())]
    return _frame(spark, out, ENVIRONMENT_COLUMNS)


def describe_merge_jobs(spark: SparkSession) -> DataFrame:
    """DESCRIBE INDEXTABLES MERGE JOBS: empty. IndexTables4Spark merges asynchronously after writes;
    here merge-on-write runs in the writing call (``connect_plugin.write``), so no job is ever pending."""
    return _frame(spark, [], MERGE_JOBS_COLUMNS)


def describe_prewarm_jobs(spark: SparkSession) -> DataFrame:
    """DESCRIBE INDEXTABLES PREWARM JOBS: empty. A PREWARM here finishes before it returns (there is
    no ASYNC MODE job to track)."""
    return _frame(spark, [], PREWARM_JOBS_COLUMNS)


def wait_prewarm_jobs(spark: SparkSession, table: str | None, job: str | None, timeout: int | None) -> DataFrame:
    """WAIT FOR INDEXTABLES PREWARM JOBS: returns at once with ``not_found``, as the JVM does when no
    job matches: every PREWARM here has finished when it returns."""
    if timeout is not None and timeout < 1:
        raise IndexTablesSQLError(f"WAIT FOR INDEXTABLES PREWARM JOBS: TIMEOUT must be positive, got {timeout}")
    return _frame(spark, [(None, None, job, table, "not_found", 0, 0, 0, None)], WAIT_COLUMNS)


def repair_log(spark: SparkSession, source: str, target: str, options: dict[str, Any]) -> DataFrame:
    """REPAIR INDEXFILES TRANSACTION LOG '<table>/_transaction_log' AT LOCATION '<new dir>'."""
    if not source.rstrip("/").endswith("_transaction_log"):
        raise IndexTablesSQLError(
            f"REPAIR INDEXFILES TRANSACTION LOG: the source {source!r} must be a table's _transaction_log directory"
        )
    table_path = source.rstrip("/")[: -len("_transaction_log")].rstrip("/")
    rows = command_frame(spark, C.RepairLog(target=target), options, table_path).collect()
    return local_frame(spark, [tuple(r) for r in rows], schema(C.RepairLog.RESULT))


# --- the read-path profiler (IndexTables4Spark's FFI profiler statements) ----------------------------

PROFILER_SWITCH_COLUMNS = "status string, host_count int, message string"
PROFILER_SECTION_COLUMNS = (
    "section string, category string, calls long, total_ms double, avg_us double, min_us double, max_us double"
)
PROFILER_CACHE_COLUMNS = "cache string, hits long, misses long, hit_rate double"
# Section name prefixes -> category (IndexTables4Spark's, and plan_ for scan planning here); else "search".
_CATEGORIES = (
    ("agg_", "aggregation"),
    ("doc_batch_", "doc_retrieval"),
    ("single_doc_", "single_doc"),
    ("stream_", "streaming"),
    ("arrow_ffi_", "arrow_ffi"),
    ("prewarm_", "prewarm"),
    ("plan_", "planning"),
)


def _profiler_nodes(spark: SparkSession, action: str, options: dict[str, Any]) -> list[Any]:
    """Run the profiler ``action`` on the driver's node and on the nodes of one wave of tasks."""
    from connect_plugin.settings import cluster_parallelism

    tasks = max(1, cluster_parallelism(spark) or 1)
    return command_frame(spark, C.Profiler(action=action, tasks=tasks), options).collect()


def _node_counters(rows: list[Any], reset: bool) -> dict[str, Any]:
    """The counters of every node, each node once: rows of the same node (host and directory) read
    the same counter file — a DESCRIBE keeps the latest of them (the largest: counters only grow),
    a RESET adds them (each took what was there when it ran, then zeroed it)."""
    per_node: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        node, counters = (r["host"], r["directory"]), json.loads(r["counters"] or "{}")
        if reset:
            per_node[node] = C.merge_counters(per_node.get(node, {}), counters)
        elif node not in per_node or _weight(counters) >= _weight(per_node[node]):
            per_node[node] = counters
    merged: dict[str, Any] = {}
    for counters in per_node.values():
        C.merge_counters(merged, counters)
    return merged


def _weight(counters: dict[str, Any]) -> int:
    return int(sum(s[0] for s in counters.get("sections", {}).values()) + sum(counters.get("caches", {}).values()))


def profiler_switch(spark: SparkSession, enable: bool, options: dict[str, Any]) -> DataFrame:
    """ENABLE / DISABLE INDEXTABLES PROFILER on the driver's node and every executor node a wave of
    tasks reaches (a flag each read task checks when it starts). ENABLE resets the counters;
    DISABLE keeps them readable. ``host_count``: executor hosts reached."""
    rows = _profiler_nodes(spark, "enable" if enable else "disable", options)
    hosts = len({r["host"] for r in rows if r["role"] == "executor"})
    status = "enabled" if enable else "disabled"
    what = "counters reset" if enable else "counters preserved"
    message = f"read-path profiler {status} on the driver's node + {hosts} executor host(s) ({what})"
    return _frame(spark, [(status, hosts, message)], PROFILER_SWITCH_COLUMNS)


def profiler_sections(spark: SparkSession, reset: bool, options: dict[str, Any]) -> DataFrame:
    """DESCRIBE (or RESET) INDEXTABLES PROFILER: per section, calls and times summed over the nodes,
    sections without calls left out, by name; RESET returns the values it zeroed."""
    counters = _node_counters(_profiler_nodes(spark, "reset_sections" if reset else "describe", options), reset)
    out = []
    for name, (calls, total, least, most) in sorted(counters.get("sections", {}).items()):
        if calls > 0:
            category = next((c for prefix, c in _CATEGORIES if name.startswith(prefix)), "search")
            out.append((name, category, calls, total / 1e6, total / calls / 1e3, least / 1e3, most / 1e3))
    return _frame(spark, out, PROFILER_SECTION_COLUMNS)


def profiler_caches(spark: SparkSession, reset: bool, options: dict[str, Any]) -> DataFrame:
    """DESCRIBE (or RESET) INDEXTABLES PROFILER CACHE: hits and misses per cache summed over the
    nodes (``l2_disk``: the split cache on disk, ``footer``: split footers in memory, ``searcher``:
    open split searchers), caches without either left out, by name."""
    counters = _node_counters(_profiler_nodes(spark, "reset_caches" if reset else "describe", options), reset)
    caches = counters.get("caches", {})
    out = []
    for name in sorted({re.sub(r"_(hit|miss)$", "", k) for k in caches}):
        hits, misses = int(caches.get(f"{name}_hit", 0)), int(caches.get(f"{name}_miss", 0))
        if hits or misses:
            out.append((name, hits, misses, hits / (hits + misses)))
    return _frame(spark, out, PROFILER_CACHE_COLUMNS)


# --- data skipping (IndexTables4Spark's DataSkippingMetrics statements) ------------------------------

DATA_SKIPPING_COLUMNS = "metric_type string, metric_name string, metric_value string"
FLUSH_SKIPPING_COLUMNS = "action string, status string"
INVALIDATE_SKIPPING_COLUMNS = "action string, entries_cleared long"


def _skipping(spark: SparkSession, action: str, options: dict[str, Any]) -> dict[str, Any]:
    rows = command_frame(spark, C.DataSkipping(action=action), options).collect()
    return json.loads(rows[0]["counters"] or "{}") if rows else {}


def describe_data_skipping(spark: SparkSession, options: dict[str, Any]) -> DataFrame:
    """DESCRIBE INDEXTABLES DATA SKIPPING STATS: how scan planning pruned files, summed over every
    scan planned on the driver's node since the last FLUSH: files considered, pruned by partition
    values, skipped by min/max statistics, scanned, the rates (as the JVM formats them), and per
    filter kind the skipped files a top-level predicate rejected on its own. The JVM's filter-
    expression and partition-filter caches have no counterpart here (pruning is recomputed per scan)."""
    c = _skipping(spark, "describe", options)
    total, by_partition = int(c.get("total_files", 0)), int(c.get("partition_pruned_files", 0))
    by_stats, final = int(c.get("data_skipped_files", 0)), int(c.get("final_files", 0))
    after_partition = total - by_partition
    rates = (
        by_partition / total if total else 0.0,
        by_stats / after_partition if after_partition else 0.0,
        (total - final) / total if total else 0.0,
    )
    out = [
        ("data_skipping", "total_files_considered", str(total)),
        ("data_skipping", "partition_pruned_files", str(by_partition)),
        ("data_skipping", "data_skipped_files", str(by_stats)),
        ("data_skipping", "final_files_scanned", str(final)),
        ("data_skipping", "partition_skip_rate", f"{rates[0] * 100:.2f}%"),
        ("data_skipping", "data_skip_rate", f"{rates[1] * 100:.2f}%"),
        ("data_skipping", "total_skip_rate", f"{rates[2] * 100:.2f}%"),
        ("data_skipping", "scans", str(int(c.get("scans", 0)))),
    ]
    kinds = sorted(c.get("filter_types", {}).items(), key=lambda kv: (-kv[1], kv[0]))
    out += [("filter_type_skips", kind, str(n)) for kind, n in kinds]
    return _frame(spark, out, DATA_SKIPPING_COLUMNS)


def flush_data_skipping(spark: SparkSession, options: dict[str, Any]) -> DataFrame:
    """FLUSH (or RESET) INDEXTABLES DATA SKIPPING STATS: zero the counts."""
    _skipping(spark, "flush", options)
    return _frame(spark, [("data_skipping_metrics", "reset")], FLUSH_SKIPPING_COLUMNS)


def invalidate_data_skipping(spark: SparkSession, options: dict[str, Any]) -> DataFrame:
    """INVALIDATE INDEXTABLES DATA SKIPPING CACHE: zero the counts. Pruning keeps no cache here (the
    JVM's filter-expression and partition-filter caches), so no entries are cleared."""
    _skipping(spark, "invalidate", options)
    return _frame(spark, [("data_skipping_metrics", 0)], INVALIDATE_SKIPPING_COLUMNS)
