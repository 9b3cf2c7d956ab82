"""Every ``spark.indextables.*`` setting this project recognises: one registry, used by the client
(``connect_plugin``) and the cluster (``executor_lib``), and the source of ``docs/settings.md``.

IndexTables4Spark users bring their ``spark-defaults.conf``. Each key they may have set is here:

* ``supported``: the setting works here, with the JVM's name, default and units (or it is one of this
  project's own settings, marked so);
* ``no-effect``: the key only tunes the JVM implementation's internals (its native caches, JNI
  batching, Azure, companion indexes ...). It is accepted, and the first use of each such key in a
  process logs ONE warning naming the key and why it has no effect here (``warn_no_effect``).

A ``spark.indextables.*`` key that is not here is an error that suggests the closest known key
(``check_key``). Per-column settings are patterns ending in ``<column>`` (any suffix matches).

Regenerate the page after changing the registry::

    python -m indextables_contract.settings > docs/settings.md

Standard library only (this package is shared by the thin client and the cluster).
"""

from __future__ import annotations

import difflib
import logging
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from indextables_contract.errors import ConfigError

PREFIX = "spark.indextables."
SUPPORTED = "supported"
NO_EFFECT = "no-effect"
COLUMN = "<column>"  # a per-column pattern's last part: matches any suffix
TABLE_NAME_PREFIX = PREFIX + "table."  # spark.indextables.table.<name> = a table's path (connect_plugin.session)

log = logging.getLogger("indextables.settings")


@dataclass(frozen=True)
class Setting:
    """One key: its status, its default (as the docs write it) and what it does, or why it has no effect."""

    key: str
    status: str
    default: str
    note: str
    jvm: bool = True  # IndexTables4Spark documents or defines it; False: this project's own setting

    @property
    def is_pattern(self) -> bool:
        return self.key.endswith(COLUMN)


def _s(key: str, default: str, note: str, jvm: bool = True) -> Setting:
    return Setting(PREFIX + key, SUPPORTED, default, note, jvm)


def _own(key: str, default: str, note: str) -> Setting:
    return Setting(PREFIX + key, SUPPORTED, default, note, jvm=False)


def _n(key: str, default: str, reason: str) -> Setting:
    return Setting(PREFIX + key, NO_EFFECT, default, reason)


# Why whole families of JVM keys have no effect here.
_JNI_BATCH = "batches documents for tantivy4java over JNI; here rows go from Arrow batches straight into Tantivy"
_SPLIT_CONVERSION = (
    "parallelism of the JVM's tantivy index to Quickwit split conversion; here splits are written directly"
)
_TXLOG_CACHE = (
    "tunes tantivy4java's native transaction-log cache; here each process caches table snapshots itself "
    "(always on, refreshed on every read)"
)
_MAX_READS = "parallel GETs of tantivy4java's native log reader; here state.read.parallelism sets the manifest readers"
_STATE_RETRY = "retries of the JVM's state-manifest writes; here every commit retries under transaction.retry.*"
_AFTER_MERGE = (
    "compacts the state after a merge in the JVM; here compaction follows state.compaction.* after every "
    "state write, merges included"
)
_STATS_TRUNCATION = (
    "string statistics are always truncated to 32 characters here (split pruning relies on that "
    "length); the JVM's default, so tables stay compatible"
)
_DATA_SKIPPING = (
    "the JVM limits which columns get min/max statistics; here every indexed scalar column gets them "
    "(pruning needs nothing else)"
)
_OPTIMIZE_SHUFFLE = (
    "tunes the shuffle the JVM requests before an optimized write (Spark's "
    "RequiresDistributionAndOrdering, not offered to Python data sources); here an optimized write "
    "merges each partition's new splits before its commit"
)
_ASYNC_MERGE = (
    "schedules the JVM's background merge-on-write batches; here merge-on-write runs once after the "
    "commit, in the committing process"
)
_MERGE_IO = (
    "the JVM's merge downloads and uploads; here a merge reads its sources through the node's split cache and "
    "uploads one split"
)
_BATCH_RETRIEVAL = (
    "tunes tantivy4java's batched document retrieval; here rows come from each split's columnar copy in one read"
)
_ADAPTIVE = "tunes the JVM's adaptive batch sizing of document retrieval; here there is nothing to tune"
_DISK_CACHE = (
    "configures tantivy4java's L2 disk slice cache; here the node's split cache (cache.directoryPath, "
    "cache.maxSize, cache.fetch) keeps what queries fetched"
)
_READ_LIMIT = "the JVM's per-partition row cap without a pushed LIMIT; here a read returns every matching row"
_SPLITS_PER_TASK = (
    "the JVM's splits-per-task choice; here read.maxSplitsPerPartition and read.targetPartitionBytes plan the tasks"
)
_PARTITION_PRUNING = "tunes the JVM's partition-pruning caches; here pruning is one pass over the snapshot's files"
_STRING_PATTERN = (
    "LIKE prefix/suffix/contains filters are always pushed here where the index answers them exactly "
    "(exact string fields), and re-checked by Spark otherwise"
)
_MERGE_TEMP = "merges are built in the system temporary directory here (TMPDIR)"
_PURGE_MIN = "the 24-hour minimum retention of PURGE is fixed here (a younger split may belong to a running write)"
_PURGE_JVM = "tunes the JVM's distributed deletion of purged files; here the purge deletes them in one process"
_NATIVE_MEMORY = "bridges tantivy4java's native memory with Spark's memory manager; no native JVM memory here"
_COMPANION = (
    "tunes the JVM's companion sync (batches, FAIR pool, native reader and writer); here BUILD INDEXTABLES "
    "COMPANION runs one Spark task per companion split and commits once"
)
_DATABRICKS = (
    "Unity Catalog credentials come from a JVM credential provider; here S3 credentials come from options, "
    "the environment or the AWS credential chain"
)
_S3_UPLOAD = "tunes the JVM's S3 multipart uploads; here botocore's transfer manager chooses"
_READ_PREWARM = (
    "the JVM prewarms caches when a read starts; here PREWARM INDEXTABLES CACHE and the node's split cache do that"
)
_AGG_PUSHDOWN = (
    "the JVM fails an aggregate it cannot push down when this is set; here IndexTable.aggregate and "
    "connect_plugin.sql push what they can and let Spark compute the rest"
)

SETTINGS: tuple[Setting, ...] = (
    # --- index writer ---
    _s(
        "indexWriter.heapSize",
        "256M (IndexTables4Spark: 100M)",
        "Tantivy's indexing heap per split being written (a size: 2G, 500M, 1024K)",
    ),
    _s("indexWriter.threads", "the task's cores (IndexTables4Spark: 2)", "Tantivy's indexing threads per split"),
    _n("indexWriter.batchSize", "10000", _JNI_BATCH),
    _n("indexWriter.maxBatchBufferSize", "90M", _JNI_BATCH),
    _s(
        "indexWriter.tempDirectoryPath",
        "the system temp directory",
        "where a write task builds its splits before uploading them",
    ),
    _n("splitConversion.maxParallelism", "available processors", _SPLIT_CONVERSION),
    # --- indexing ---
    _s(
        "indexing.typemap." + COLUMN,
        "string",
        "string (exact), text (tokenized), json or ip; or the list form typemap.<type> = col1,col2",
    ),
    _s(
        "indexing.tokenizer." + COLUMN,
        "default",
        "default, whitespace, raw or en_stem; or tokenizer.<name> = col1,col2",
    ),
    _s(
        "indexing.indexrecordoption." + COLUMN,
        "position",
        "position, freq or basic; or indexrecordoption.<option> = col1,col2",
    ),
    _s("indexing.text.indexRecordOption", "position", "the index record option of every text column without its own"),
    _s(
        "indexing.tokenLength." + COLUMN,
        "255",
        "longest token a tokenized column keeps (or the list form tokenLength.<N|name> = col1,col2)",
    ),
    _s("indexing.text.maxTokenLength", "255", "longest token kept (bytes; tantivy_max, default, legacy, min)"),
    _s(
        "indexing.fastfields",
        "numeric, boolean, date, ip and exact-string columns",
        "exactly the columns with fast fields (comma-separated)",
    ),
    _s("indexing.json.mode", "full", "full: nested values are also fast fields; minimal: not"),
    _own("indexing.storeonly", "none", "columns stored but not indexed"),
    _own("indexing.indexonly", "none", "columns indexed but not stored (they read as null)"),
    # --- write sizing ---
    _own("optimizeWrite.targetRecordsPerSplit", "1000000", "a write task starts a new split after this many rows"),
    _own("autoSize.enabled", "false", "accepted for older configurations; autoSize.targetSplitSize alone sizes splits"),
    _own("autoSize.targetSplitSize", "none", "a write task starts a new split at about this size (e.g. 100M)"),
    _s(
        "write.optimizeWrite.enabled",
        "false",
        "before the commit, each partition's new splits are merged into splits of about targetSplitSize "
        "(the JVM shuffles the rows first; the result is the same: few, well-sized splits in one version)",
    ),
    _s("write.optimizeWrite.targetSplitSize", "1G", "split size an optimized write aims at"),
    _n("write.optimizeWrite.samplingRatio", "1.1", _OPTIMIZE_SHUFFLE),
    _n("write.optimizeWrite.minRowsForEstimation", "10000", _OPTIMIZE_SHUFFLE),
    _n("write.optimizeWrite.distributionMode", "hash", _OPTIMIZE_SHUFFLE),
    _n("write.optimizeWrite.maxSplitSize", "4G", _OPTIMIZE_SHUFFLE),
    _own("progress.intervalSeconds", "30", "a write or merge task reports progress at this interval (0: off)"),
    # --- merge on write ---
    _s("mergeOnWrite.enabled", "false", "after a write's commit, merge the partitions that have enough small splits"),
    _s("mergeOnWrite.targetSize", "4G", "the merge-on-write's target split size"),
    _own(
        "mergeOnWrite.minSplitsToMerge",
        "10",
        "merge a partition once it has this many small (or, with merge.sortKey, level-0) splits",
    ),
    _own("mergeOnWrite.streamIntervalSeconds", "30", "connect_plugin.write_stream merges at most this often"),
    _n("mergeOnWrite.async.enabled", "true", _ASYNC_MERGE),
    _n("mergeOnWrite.batchCpuFraction", "0.167", _ASYNC_MERGE),
    _n("mergeOnWrite.maxConcurrentBatches", "3", _ASYNC_MERGE),
    _n("mergeOnWrite.minBatchesToTrigger", "1", _ASYNC_MERGE + " (mergeOnWrite.minSplitsToMerge sets when)"),
    _n("mergeOnWrite.shutdownTimeoutMs", "300000", _ASYNC_MERGE),
    _n("mergeOnWrite.mergeGroupMultiplier", "2.0", _ASYNC_MERGE),
    _n("mergeOnWrite.minDiskSpaceGB", "20", _ASYNC_MERGE),
    _n("mergeOnWrite.maxConcurrentMergesPerWorker", "auto", _ASYNC_MERGE),
    _n("mergeOnWrite.memoryOverheadFactor", "3.0", _ASYNC_MERGE),
    # --- merge ---
    _own("merge.sortKey", "none", "MERGE SPLITS without SORT BY sorts by this column"),
    _s("merge.maxSourceSplitsPerMerge", "1000", "MERGE SPLITS merges at most this many splits into one"),
    _n("merge.skipSplitThreshold", "0.45", "here a merge leaves alone the splits of at least 90% of the target size"),
    _n("merge.download.maxConcurrencyPerCore", "8", _MERGE_IO),
    _n("merge.download.memoryBudget", "2G", _MERGE_IO),
    _n("merge.download.retries", "3", _MERGE_IO),
    _n("merge.upload.maxConcurrency", "6", _MERGE_IO),
    _n("merge.tempDirectoryPath", "auto", _MERGE_TEMP),
    # --- purge on write ---
    _s("purgeOnWrite.enabled", "false", "after a write's commit, purge the table (as PURGE INDEXTABLE) when triggered"),
    _s("purgeOnWrite.triggerAfterMerge", "true", "purge after a merge-on-write ran"),
    _s(
        "purgeOnWrite.triggerAfterWrites",
        "0",
        "purge after every N-th write (0: never); counted by the table's version (the JVM counts per driver)",
    ),
    _s("purgeOnWrite.splitRetentionHours", "168", "the purge's split retention (at least 24)"),
    _s("purgeOnWrite.txLogRetentionHours", "720", "the purge's transaction-log retention"),
    # --- purge ---
    _s("purge.defaultRetentionHours", "168", "PURGE INDEXTABLE without OLDER THAN keeps this many hours of splits"),
    _n("purge.minRetentionHours", "24", _PURGE_MIN),
    _n("purge.retentionCheckEnabled", "true", _PURGE_MIN),
    _n("purge.parallelism", "auto", _PURGE_JVM),
    _n("purge.maxFilesToDelete", "1000000", _PURGE_JVM),
    _n("purge.deleteRetries", "3", _PURGE_JVM),
    # --- transaction log (log/config.py) ---
    _s("checkpoint.enabled", "true", "write checkpoints after commits"),
    _s("checkpoint.interval", "10", "checkpoint when version % interval == 0"),
    _own("checkpoint.actionsPerPart", "100000", "multi-part checkpoints above this many actions"),
    _own("checkpoint.multiPart.enabled", "true", "allow multi-part checkpoints"),
    _own("checkpoint.cleanup.enabled", "true", "after each checkpoint, delete expired version files and states"),
    _own("checkpoint.tombstoneRetentionHours", "168", "keep removes this long in checkpoints"),
    _s("transaction.compression.enabled", "true", "gzip-compress version files"),
    _own("transaction.compression.gzip.level", "6", "gzip level, 1-9"),
    _own("transaction.commitInfo.enabled", "false", "write a commitInfo line first in each version file"),
    _s("transaction.retry.maxAttempts", "10", "failed commit writes before giving up"),
    _s("transaction.retry.baseDelayMs", "100", "commit retry backoff base (ms)"),
    _s("transaction.retry.maxDelayMs", "5000", "commit retry backoff cap (ms)"),
    _n("transaction.maxConcurrentReads", "32", _MAX_READS),
    _n("transaction.cache.enabled", "true", _TXLOG_CACHE),
    _n("transaction.cache.ttl.ms", "300000", _TXLOG_CACHE),
    _n("transaction.cache.version.ttl.ms", "300000", _TXLOG_CACHE),
    _n("transaction.cache.snapshot.ttl.ms", "600000", _TXLOG_CACHE),
    _n("transaction.cache.fileList.ttl.ms", "120000", _TXLOG_CACHE),
    _n("transaction.cache.metadata.ttl.ms", "1800000", _TXLOG_CACHE),
    _n("transaction.cache.version.capacity", "1000", _TXLOG_CACHE),
    _n("transaction.cache.snapshot.capacity", "100", _TXLOG_CACHE),
    _n("transaction.cache.fileList.capacity", "50", _TXLOG_CACHE),
    _n("transaction.cache.expirationSeconds", "300", _TXLOG_CACHE),
    _s("state.format", "avro", "avro (protocol v4 state) or json (v3 JSON checkpoints)"),
    _own("state.manifestFormat", "avro", "state manifest per version: avro (what the JVM reads) or json"),
    _s("state.compression", "zstd", "codec of Avro manifests: zstd, snappy or none"),
    _s("state.compressionLevel", "3", "zstd level, 1-22"),
    _s("state.entriesPerManifest", "50000", "most file entries per manifest"),
    _s("state.read.parallelism", "8", "threads reading Avro manifests"),
    _s("state.schema.renormalizeThreshold", "5", "renormalize doc-mapping refs above this many"),
    _s("state.compaction.tombstoneThreshold", "0.10", "compact when tombstones / entries exceed this"),
    _s("state.compaction.maxManifests", "20", "merge small manifests above this many"),
    _s("state.compaction.largeRemoveThreshold", "2147483647", "compact when one write removes this many files"),
    _n("state.compaction.afterMerge", "true", _AFTER_MERGE),
    _s("state.retention.versions", "2", "cleanup keeps at least this many newest states"),
    _s("state.retention.hours", "168", "cleanup keeps every state younger than this"),
    _s("state.gc.minManifestAgeHours", "1", "cleanup deletes unreferenced manifests only when older than this"),
    _own("state.gc.allowUnsafeMinManifestAge", "false", "allow state.gc.minManifestAgeHours below 0.25"),
    _n("state.retry.maxAttempts", "10", _STATE_RETRY),
    _n("state.retry.baseDelayMs", "100", _STATE_RETRY),
    _n("state.retry.maxDelayMs", "5000", _STATE_RETRY),
    _s("purge.txLogRetentionHours", "720", "cleanup deletes covered version files older than this"),
    _n("stats.truncation.enabled", "true", _STATS_TRUNCATION),
    _n("stats.truncation.maxLength", "32", _STATS_TRUNCATION),
    _n("dataSkippingStatsColumns", "all", _DATA_SKIPPING),
    _n("dataSkippingNumIndexedCols", "32", _DATA_SKIPPING),
    # --- reads ---
    _own("read.targetPartitionBytes", "256M", "a scan is cut into tasks of about this size"),
    _own("read.maxSplitsPerPartition", "64", "most splits one read task searches"),
    _own("read.parallelism", "the cluster's task slots", "tasks an index query runs as (the client fills it in)"),
    _n("read.defaultLimit", "250", _READ_LIMIT),
    _n("read.splitsPerTask", "auto", _SPLITS_PER_TASK),
    _n("read.maxSplitsPerTask", "8", _SPLITS_PER_TASK),
    _n("read.aggregate.splitsPerTask", "read.splitsPerTask", _SPLITS_PER_TASK),
    _n("read.aggregate.maxSplitsPerTask", "read.maxSplitsPerTask", _SPLITS_PER_TASK),
    _n("read.requireAggregatePushdown", "false", _AGG_PUSHDOWN),
    _n("read.batchOptimization.enabled", "true", _BATCH_RETRIEVAL),
    _n("read.batchOptimization.profile", "balanced", _BATCH_RETRIEVAL),
    _n("read.batchOptimization.maxRangeSize", "16M", _BATCH_RETRIEVAL),
    _n("read.batchOptimization.gapTolerance", "512K", _BATCH_RETRIEVAL),
    _n("read.batchOptimization.minDocsForOptimization", "50", _BATCH_RETRIEVAL),
    _n("read.batchOptimization.maxConcurrentPrefetch", "8", _BATCH_RETRIEVAL),
    _n("read.adaptiveTuning.enabled", "true", _ADAPTIVE),
    _n("read.adaptiveTuning.minBatchesBeforeAdjustment", "5", _ADAPTIVE),
    _n("partitionPruning.filterCacheEnabled", "true", _PARTITION_PRUNING),
    _n("partitionPruning.indexEnabled", "true", _PARTITION_PRUNING),
    _n("partitionPruning.parallelThreshold", "100", _PARTITION_PRUNING),
    _n("partitionPruning.selectivityOrdering", "true", _PARTITION_PRUNING),
    _n("filter.stringPattern.pushdown", "false", _STRING_PATTERN),
    _n("filter.stringStartsWith.pushdown", "false", _STRING_PATTERN),
    _n("filter.stringEndsWith.pushdown", "false", _STRING_PATTERN),
    _n("filter.stringContains.pushdown", "false", _STRING_PATTERN),
    _n("prewarm.enabled", "false", _READ_PREWARM),
    _n("prewarm.segments", "TERM_DICT,POSTINGS", _READ_PREWARM),
    _n("prewarm.fields", "all", _READ_PREWARM),
    _n("prewarm.splitsPerTask", "2", _READ_PREWARM),
    _n("prewarm.partitionFilter", "all", _READ_PREWARM),
    _n("prewarm.failOnMissingField", "true", _READ_PREWARM),
    _n("prewarm.catchUpNewHosts", "false", _READ_PREWARM),
    # --- caches ---
    _s(
        "cache.directoryPath",
        "INDEXTABLES_CACHE_DIR, or under the system temp directory",
        "the node's split cache directory",
    ),
    _own("cache.maxSize", "10G", "the node's split cache size (LRU)"),
    _own(
        "cache.fetch",
        "pieces (INDEXTABLES_CACHE_FETCH)",
        "how a cold split on object storage is fetched: pieces (the members and ranges queries read) or whole",
    ),
    _n("cache.disk.enabled", "auto", _DISK_CACHE),
    _n("cache.disk.path", "auto", _DISK_CACHE),
    _n("cache.disk.maxSize", "auto", _DISK_CACHE),
    _n("cache.disk.compression", "lz4", _DISK_CACHE),
    _n("cache.disk.minCompressSize", "4K", _DISK_CACHE),
    _n("cache.disk.manifestSyncInterval", "30", _DISK_CACHE),
    _n("cache.disk.writeQueue.mode", "size", _DISK_CACHE),
    _n("cache.disk.writeQueue.capacity", "1G", _DISK_CACHE),
    _n("cache.disk.dropWritesWhenFull", "true", _DISK_CACHE),
    _n("cache.disk.writeQueue.maxBudget", "0", _DISK_CACHE),
    _n("cache.coalesceMaxGap", "512K", _DISK_CACHE),
    _n("native.memory.enabled", "true", _NATIVE_MEMORY),
    # --- storage ---
    _s("aws.accessKey", "the AWS credential chain", "S3 access key id"),
    _s("aws.secretKey", "the AWS credential chain", "S3 secret access key"),
    _s("aws.sessionToken", "the AWS credential chain", "S3 session token"),
    _s("aws.region", "the SDK default", "S3 region"),
    _s("s3.endpoint", "AWS", "S3 API endpoint URL"),
    _s("s3.pathStyleAccess", "false", "path-style S3 addressing"),
    _n("aws.credentialsProviderClass", "none", "a JVM class; here the AWS credential chain of boto3 applies"),
    _n("s3.maxConcurrency", "4", _S3_UPLOAD),
    _n("s3.partSize", "64M", _S3_UPLOAD),
    _s(
        "azure.accountName",
        "the URI's account, AZURE_STORAGE_ACCOUNT_NAME or ~/.azure/credentials",
        "Azure storage account (for abfss://container/path and azure://container/path)",
    ),
    _s("azure.accountKey", "AZURE_STORAGE_KEY or ~/.azure/credentials", "Azure storage account key"),
    _s("azure.tenantId", "none", "service principal tenant (with clientId, clientSecret; needs azure-identity)"),
    _s("azure.clientId", "none", "service principal application (client) id"),
    _s("azure.clientSecret", "none", "service principal secret"),
    _s("azure.bearerToken", "none", "an OAuth bearer token for Azure storage"),
    _s(
        "azure.connectionString",
        "AZURE_STORAGE_CONNECTION_STRING",
        "Azure storage connection string (account key or SAS, endpoints)",
    ),
    _s(
        "azure.endpoint",
        "https://<account>.blob.<suffix of the URI's host>",
        "Azure Blob endpoint URL (emulators, sovereign clouds, private links); a SAS may be its query",
    ),
    _n("databricks.workspaceUrl", "none", _DATABRICKS),
    _n("databricks.apiToken", "none", _DATABRICKS),
    _n("databricks.credential.refreshBuffer.minutes", "40", _DATABRICKS),
    _n("databricks.cache.maxSize", "100", _DATABRICKS),
    _n("databricks.fallback.enabled", "true", _DATABRICKS),
    _n("databricks.retry.attempts", "3", _DATABRICKS),
    # --- companion indexes ---
    _s("iceberg.catalogType", "none", "BUILD COMPANION FOR ICEBERG: the pyiceberg catalog type (sql, rest, glue, ...)"),
    _s("iceberg.uri", "none", "BUILD COMPANION FOR ICEBERG: the catalog's URI (sqlite:///path for a SQL catalog)"),
    _s("iceberg.warehouse", "none", "BUILD COMPANION FOR ICEBERG: the catalog's warehouse (WAREHOUSE overrides it)"),
    _s("iceberg.token", "none", "BUILD COMPANION FOR ICEBERG: a REST catalog's bearer token"),
    _s("iceberg.credential", "none", "BUILD COMPANION FOR ICEBERG: a REST catalog's OAuth2 credential"),
    _s("iceberg.s3Endpoint", "none", "BUILD COMPANION FOR ICEBERG: the S3 endpoint of the table's files"),
    _s("iceberg.s3PathStyleAccess", "false", "BUILD COMPANION FOR ICEBERG: path-style S3 addressing"),
    _s(
        "companion.parquetTableRoot",
        "the metadata's parquetStorageRoot (Iceberg) or sourceTablePath",
        "reading a companion index: the root its source files' relative paths resolve against",
    ),
    _n("companion.sync.distributedLogRead.enabled", "true", _COMPANION),
    _n("companion.sync.arrowFfi.enabled", "true", _COMPANION),
    _n("companion.sync.batchSize", "defaultParallelism", _COMPANION),
    _n("companion.sync.maxConcurrentBatches", "6", _COMPANION),
    _n("companion.writerHeapSize", "1G", _COMPANION),
    _n("companion.readerBatchSize", "8192", _COMPANION),
    _n("companion.schedulerPool", "indextables-companion", _COMPANION),
    # --- names ---
    _own("table." + COLUMN, "none", "a table name for SQL: spark.indextables.table.<name> = its path"),
)

_BY_KEY = {s.key.lower(): s for s in SETTINGS if not s.is_pattern}
_PATTERNS = tuple((s.key[: -len(COLUMN)].lower(), s) for s in SETTINGS if s.is_pattern)


def lookup(key: str) -> Setting | None:
    """The registry's entry for ``key`` (case-insensitive; a per-column key matches its pattern), or None.

    Example: ``lookup("spark.indextables.indexing.typemap.message").key`` ends with ``typemap.<column>``.
    """
    lower = key.lower()
    found = _BY_KEY.get(lower)
    if found is not None:
        return found
    return next((s for prefix, s in _PATTERNS if lower.startswith(prefix) and len(lower) > len(prefix)), None)


def suggestion(key: str) -> str:
    """`` (did you mean X?)`` with the closest known key, or ``""``."""
    # Compared without the common prefix, which would make every key look close to every other.
    by_tail = {s.key[len(PREFIX) :].lower(): s.key for s in SETTINGS if not s.is_pattern}
    tail = key.lower()[len(PREFIX) :] if key.lower().startswith(PREFIX) else key.lower()
    close = difflib.get_close_matches(tail, list(by_tail), n=1, cutoff=0.7)
    return f" (did you mean {by_tail[close[0]]}?)" if close else ""


def check_key(key: str, what: str = "setting") -> Setting:
    """The entry of a ``spark.indextables.*`` key; ConfigError naming it (and the closest known key)
    if no IndexTables documentation knows it.

    Example: ``check_key("spark.indextables.indexWriter.heapsize").status == "supported"``.
    """
    found = lookup(key)
    if found is None:
        raise ConfigError(
            f"{what}: unknown option {key!r}{suggestion(key)}; the known spark.indextables.* settings are "
            "listed in docs/settings.md"
        )
    return found


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_no_effect(key: str) -> bool:
    """Log the one warning of a ``no-effect`` key, once per key per process; True if it was logged now."""
    found = lookup(key)
    if found is None or found.status != NO_EFFECT:
        return False
    with _warned_lock:
        if found.key in _warned:
            return False
        _warned.add(found.key)
    log.warning("%s has no effect in IndexTables for Python: it %s", key, found.note)
    return True


def accept(options: Iterable[str], what: str = "setting") -> list[str]:
    """The ``spark.indextables.*`` keys among ``options`` that have no effect here (each warned once);
    ConfigError for a key no documentation knows. Other keys are not looked at."""
    dropped = []
    for key in options:
        if not key.lower().startswith(PREFIX):
            continue
        if check_key(key, what).status == NO_EFFECT:
            warn_no_effect(key)
            dropped.append(key)
    return dropped


def markdown() -> str:
    """The settings page (``docs/settings.md``), generated from ``SETTINGS``."""
    supported = [s for s in SETTINGS if s.status == SUPPORTED]
    no_effect = [s for s in SETTINGS if s.status == NO_EFFECT]
    jvm = [s for s in SETTINGS if s.jvm]
    lines = [
        "# Settings (`spark.indextables.*`)",
        "",
        "Generated from `indextables_contract/settings.py` by `python -m indextables_contract.settings "
        "> docs/settings.md`; a test fails when this page and the registry differ. Do not edit by hand.",
        "",
        f"{len(SETTINGS)} keys: {len(supported)} supported ({sum(s.jvm for s in supported)} of them "
        f"IndexTables4Spark's, {sum(not s.jvm for s in supported)} this project's own), {len(no_effect)} accepted "
        f"with no effect. {len(jvm)} are IndexTables4Spark's.",
        "",
        "- **supported**: works here with IndexTables4Spark's name, default and units (*own*: a setting of "
        "this project only).",
        "- **no effect**: tunes IndexTables4Spark's JVM internals. Accepted as a session setting or option; "
        "the first use in a process logs one warning (logger `indextables.settings`) naming the key and the "
        "reason below.",
        "- Any other `spark.indextables.*` key is an error that names the closest known key.",
        "- `<column>`: a per-column setting (any column name; the list forms are noted).",
        "",
        "| key | status | default | meaning / why no effect |",
        "|---|---|---|---|",
    ]
    for s in sorted(SETTINGS, key=lambda s: s.key.lower()):
        status = s.status if s.status == NO_EFFECT else ("supported" if s.jvm else "supported (own)")
        note = s.note.replace("|", "\\|")
        lines.append(f"| `{s.key}` | {status.replace('-', ' ')} | {s.default} | {note} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
