"""Transaction-log settings, read from ``spark.indextables.*`` options (IndexTables4Spark names).

Options are given to ``open_log``/``create_table`` as keyword arguments together with
storage options; anything starting with ``spark.indextables.`` that is a log setting is
taken here. A bad value is a :class:`ConfigError` naming the option.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from indextables_contract import settings as S
from indextables_contract.errors import ConfigError

_PREFIX = S.PREFIX


@dataclass(frozen=True)
class LogConfig:
    """The transaction-log settings; each field's default is its registry entry's (``FIELDS``)."""

    checkpoint_enabled: bool = S.CHECKPOINT_ENABLED.value
    checkpoint_interval: int = S.CHECKPOINT_INTERVAL.value
    checkpoint_actions_per_part: int = S.CHECKPOINT_ACTIONS_PER_PART.value
    checkpoint_multipart_enabled: bool = S.CHECKPOINT_MULTIPART_ENABLED.value
    checkpoint_tombstone_retention_hours: float = S.CHECKPOINT_TOMBSTONE_RETENTION_HOURS.value
    # expired version files and states go after each checkpoint
    checkpoint_cleanup_enabled: bool = S.CHECKPOINT_CLEANUP_ENABLED.value
    # A commitInfo line (txn id, operation, engine) first in each version file: off by default, since
    # IndexTables4Spark's readers reject unknown action lines; the commitInfo then lives in the state.
    commit_info_enabled: bool = S.TRANSACTION_COMMIT_INFO_ENABLED.value
    compression_enabled: bool = S.TRANSACTION_COMPRESSION_ENABLED.value
    gzip_level: int = S.TRANSACTION_GZIP_LEVEL.value
    retry_max_attempts: int = S.TRANSACTION_RETRY_MAX_ATTEMPTS.value
    retry_base_delay_ms: int = S.TRANSACTION_RETRY_BASE_DELAY_MS.value
    retry_max_delay_ms: int = S.TRANSACTION_RETRY_MAX_DELAY_MS.value
    state_read_parallelism: int = S.STATE_READ_PARALLELISM.value
    schema_renormalize_threshold: int = S.STATE_SCHEMA_RENORMALIZE_THRESHOLD.value
    state_format: str = S.STATE_FORMAT.value
    # "avro": state-v<N>/_manifest.avro, what IndexTables4Spark and tantivy4java read and write;
    # "json": this project's older _manifest.json, which no JVM reader sees
    state_manifest_format: str = S.STATE_MANIFEST_FORMAT.value
    state_compression: str = S.STATE_COMPRESSION.value
    state_compression_level: int = S.STATE_COMPRESSION_LEVEL.value
    state_entries_per_manifest: int = S.STATE_ENTRIES_PER_MANIFEST.value
    compaction_tombstone_threshold: float = S.STATE_COMPACTION_TOMBSTONE_THRESHOLD.value
    compaction_max_tombstones: int = S.STATE_COMPACTION_MAX_TOMBSTONES.value
    compaction_max_manifests: int = S.STATE_COMPACTION_MAX_MANIFESTS.value
    compaction_large_remove_threshold: int = S.STATE_COMPACTION_LARGE_REMOVE_THRESHOLD.value
    state_retention_versions: int = S.STATE_RETENTION_VERSIONS.value
    state_retention_hours: float = S.STATE_RETENTION_HOURS.value
    gc_min_manifest_age_hours: float = S.STATE_GC_MIN_MANIFEST_AGE_HOURS.value
    # Below SAFE_MIN_MANIFEST_AGE_HOURS only when this says one writer at a time commits: a younger
    # manifest may belong to a concurrent writer's state not visible yet
    gc_allow_unsafe_min_manifest_age: bool = S.STATE_GC_ALLOW_UNSAFE_MIN_MANIFEST_AGE.value
    tx_log_retention_hours: float = S.PURGE_TX_LOG_RETENTION_HOURS.value

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> LogConfig:
        """The log settings among ``options`` (found in any case, parsed by their registry entries);
        ConfigError naming the option, its value and what is wrong."""
        values = {field: setting.get(options) for field, setting in FIELDS.items() if setting.given(options)}
        config = cls(**values)
        config.check_manifest_age()
        return config

    def check_manifest_age(self) -> None:
        """ConfigError unless ``state.gc.minManifestAgeHours`` keeps concurrent writers safe: a writer
        builds its new state on manifests it listed a moment ago, and a cleanup must not delete one
        of them in between (the new state would name a missing manifest: the table unreadable while
        appends are still acknowledged)."""
        age = self.gc_min_manifest_age_hours
        if age < SAFE_MIN_MANIFEST_AGE_HOURS and not self.gc_allow_unsafe_min_manifest_age:
            raise ConfigError(
                f"option {S.STATE_GC_MIN_MANIFEST_AGE_HOURS.key}={age:g}: below {SAFE_MIN_MANIFEST_AGE_HOURS:g} hours "
                "a cleanup can delete a manifest that a concurrent writer's new state is about to reference, "
                "which makes the table unreadable; only where one writer at a time commits, set "
                f"{S.STATE_GC_ALLOW_UNSAFE_MIN_MANIFEST_AGE.key}=true"
            )


# The least state.gc.minManifestAgeHours may be with concurrent writers: far above the time between a
# writer listing a state's manifests and putting its new state (seconds; minutes with retries).
SAFE_MIN_MANIFEST_AGE_HOURS = 0.25


# LogConfig field -> its registry entry: every entry with the LOG scope, each once.
FIELDS: dict[str, S.Setting[Any]] = {
    "checkpoint_enabled": S.CHECKPOINT_ENABLED,
    "checkpoint_interval": S.CHECKPOINT_INTERVAL,
    "checkpoint_actions_per_part": S.CHECKPOINT_ACTIONS_PER_PART,
    "checkpoint_multipart_enabled": S.CHECKPOINT_MULTIPART_ENABLED,
    "checkpoint_cleanup_enabled": S.CHECKPOINT_CLEANUP_ENABLED,
    "checkpoint_tombstone_retention_hours": S.CHECKPOINT_TOMBSTONE_RETENTION_HOURS,
    "commit_info_enabled": S.TRANSACTION_COMMIT_INFO_ENABLED,
    "compression_enabled": S.TRANSACTION_COMPRESSION_ENABLED,
    "gzip_level": S.TRANSACTION_GZIP_LEVEL,
    "retry_max_attempts": S.TRANSACTION_RETRY_MAX_ATTEMPTS,
    "retry_base_delay_ms": S.TRANSACTION_RETRY_BASE_DELAY_MS,
    "retry_max_delay_ms": S.TRANSACTION_RETRY_MAX_DELAY_MS,
    "state_read_parallelism": S.STATE_READ_PARALLELISM,
    "schema_renormalize_threshold": S.STATE_SCHEMA_RENORMALIZE_THRESHOLD,
    "state_format": S.STATE_FORMAT,
    "state_manifest_format": S.STATE_MANIFEST_FORMAT,
    "state_compression": S.STATE_COMPRESSION,
    "state_compression_level": S.STATE_COMPRESSION_LEVEL,
    "state_entries_per_manifest": S.STATE_ENTRIES_PER_MANIFEST,
    "compaction_tombstone_threshold": S.STATE_COMPACTION_TOMBSTONE_THRESHOLD,
    "compaction_max_tombstones": S.STATE_COMPACTION_MAX_TOMBSTONES,
    "compaction_max_manifests": S.STATE_COMPACTION_MAX_MANIFESTS,
    "compaction_large_remove_threshold": S.STATE_COMPACTION_LARGE_REMOVE_THRESHOLD,
    "state_retention_versions": S.STATE_RETENTION_VERSIONS,
    "state_retention_hours": S.STATE_RETENTION_HOURS,
    "gc_min_manifest_age_hours": S.STATE_GC_MIN_MANIFEST_AGE_HOURS,
    "gc_allow_unsafe_min_manifest_age": S.STATE_GC_ALLOW_UNSAFE_MIN_MANIFEST_AGE,
    "tx_log_retention_hours": S.PURGE_TX_LOG_RETENTION_HOURS,
}

OPTION_NAMES: tuple[str, ...] = tuple(s.name for s in S.entries_for(S.LOG))  # without the "spark.indextables." prefix


def split_options(options: Mapping[str, Any]) -> tuple[LogConfig, dict[str, Any]]:
    """Separate log settings from storage options."""
    config = LogConfig.from_options(options)
    storage = {k: v for k, v in options.items() if not k.startswith(_PREFIX) or _is_storage_option(k)}
    return config, storage


def _is_storage_option(name: str) -> bool:
    return name.startswith((_PREFIX + "aws.", _PREFIX + "s3.", S.AZURE_PREFIX, S.GCS_PREFIX))
