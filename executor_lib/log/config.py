"""Transaction-log settings, read from ``spark.indextables.*`` options (IndexTables4Spark names).

Options are given to ``open_log``/``create_table`` as keyword arguments together with
storage options; anything starting with ``spark.indextables.`` that is a log setting is
taken here. A bad value is a :class:`ConfigError` naming the option.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from indextables_contract.errors import ConfigError
from indextables_contract.values import as_bool, as_duration

_PREFIX = "spark.indextables."


@dataclass(frozen=True)
class LogConfig:
    checkpoint_enabled: bool = True
    checkpoint_interval: int = 10
    checkpoint_actions_per_part: int = 100_000
    checkpoint_multipart_enabled: bool = True
    checkpoint_tombstone_retention_hours: float = 168.0
    checkpoint_cleanup_enabled: bool = True  # expired version files and states go after each checkpoint
    # A commitInfo line (txn id, operation, engine) first in each version file: off by default, since
    # IndexTables4Spark's readers reject unknown action lines; the commitInfo then lives in the state.
    commit_info_enabled: bool = False
    compression_enabled: bool = True
    gzip_level: int = 6
    retry_max_attempts: int = 10
    retry_base_delay_ms: int = 100
    retry_max_delay_ms: int = 5000
    state_read_parallelism: int = 8
    schema_renormalize_threshold: int = 5
    state_format: str = "avro"
    # "avro": state-v<N>/_manifest.avro, what IndexTables4Spark and tantivy4java read and write;
    # "json": this project's older _manifest.json, which no JVM reader sees
    state_manifest_format: str = "avro"
    state_compression: str = "zstd"
    state_compression_level: int = 3
    state_entries_per_manifest: int = 50_000
    compaction_tombstone_threshold: float = 0.10
    compaction_max_manifests: int = 20
    compaction_large_remove_threshold: int = 2**31 - 1
    state_retention_versions: int = 2
    state_retention_hours: float = 168.0
    gc_min_manifest_age_hours: float = 1.0
    # Below SAFE_MIN_MANIFEST_AGE_HOURS only when this says one writer at a time commits (issue 33, hole 5)
    gc_allow_unsafe_min_manifest_age: bool = False
    tx_log_retention_hours: float = 720.0

    # option name (without "spark.indextables.") -> (field, parser)
    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> LogConfig:
        values: dict[str, Any] = {}
        for name, value in options.items():
            if not name.startswith(_PREFIX):
                continue
            spec = _OPTIONS.get(name[len(_PREFIX) :])
            if spec is None:
                continue
            field_name, parse, check = spec
            try:
                parsed = parse(value)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"option {name}={value!r}: {e}") from e
            if not check(parsed):
                raise ConfigError(f"option {name}={value!r}: value out of range")
            values[field_name] = parsed
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
                f"option {_PREFIX}state.gc.minManifestAgeHours={age:g}: below {SAFE_MIN_MANIFEST_AGE_HOURS:g} hours "
                "a cleanup can delete a manifest that a concurrent writer's new state is about to reference, "
                "which makes the table unreadable; only where one writer at a time commits, set "
                f"{_PREFIX}state.gc.allowUnsafeMinManifestAge=true"
            )


# The least state.gc.minManifestAgeHours may be with concurrent writers: far above the time between a
# writer listing a state's manifests and putting its new state (seconds; minutes with retries).
SAFE_MIN_MANIFEST_AGE_HOURS = 0.25


def _bool(value: Any) -> bool:
    parsed = as_bool(value)
    if parsed is None:
        raise ValueError("expected true or false")
    return parsed


def _duration(value: Any) -> float:
    parsed = as_duration(value)
    if parsed is None:
        raise ValueError("expected a number >= 0")
    return parsed


def _positive(x: float) -> bool:
    return x > 0


def _non_negative(x: float) -> bool:
    return x >= 0


_CODECS = ("zstd", "snappy", "none")

_OPTIONS: dict[str, tuple[str, Any, Any]] = {
    "checkpoint.enabled": ("checkpoint_enabled", _bool, lambda _: True),
    "checkpoint.interval": ("checkpoint_interval", int, _positive),
    "checkpoint.actionsPerPart": ("checkpoint_actions_per_part", int, _positive),
    "checkpoint.multiPart.enabled": ("checkpoint_multipart_enabled", _bool, lambda _: True),
    "checkpoint.cleanup.enabled": ("checkpoint_cleanup_enabled", _bool, lambda _: True),
    "checkpoint.tombstoneRetentionHours": ("checkpoint_tombstone_retention_hours", _duration, _non_negative),
    "transaction.commitInfo.enabled": ("commit_info_enabled", _bool, lambda _: True),
    "transaction.compression.enabled": ("compression_enabled", _bool, lambda _: True),
    "transaction.compression.gzip.level": ("gzip_level", int, lambda x: 1 <= x <= 9),
    "transaction.retry.maxAttempts": ("retry_max_attempts", int, _positive),
    "transaction.retry.baseDelayMs": ("retry_base_delay_ms", int, _non_negative),
    "transaction.retry.maxDelayMs": ("retry_max_delay_ms", int, _non_negative),
    "state.read.parallelism": ("state_read_parallelism", int, _positive),
    "state.schema.renormalizeThreshold": ("schema_renormalize_threshold", int, _non_negative),
    "state.format": ("state_format", lambda v: str(v).strip().lower(), lambda v: v in ("avro", "json")),
    "state.manifestFormat": (
        "state_manifest_format",
        lambda v: str(v).strip().lower(),
        lambda v: v in ("json", "avro"),
    ),
    "state.compression": ("state_compression", lambda v: str(v).strip().lower(), lambda v: v in _CODECS),
    "state.compressionLevel": ("state_compression_level", int, lambda x: 1 <= x <= 22),
    "state.entriesPerManifest": ("state_entries_per_manifest", int, _positive),
    "state.compaction.tombstoneThreshold": ("compaction_tombstone_threshold", float, lambda x: 0 <= x <= 1),
    "state.compaction.maxManifests": ("compaction_max_manifests", int, _positive),
    "state.compaction.largeRemoveThreshold": ("compaction_large_remove_threshold", int, _positive),
    "state.retention.versions": ("state_retention_versions", int, _positive),
    "state.retention.hours": ("state_retention_hours", _duration, _non_negative),
    "state.gc.minManifestAgeHours": ("gc_min_manifest_age_hours", _duration, _non_negative),
    "state.gc.allowUnsafeMinManifestAge": ("gc_allow_unsafe_min_manifest_age", _bool, lambda _: True),
    "purge.txLogRetentionHours": ("tx_log_retention_hours", _duration, _non_negative),
}


OPTION_NAMES: tuple[str, ...] = tuple(_OPTIONS)  # without the "spark.indextables." prefix


def split_options(options: Mapping[str, Any]) -> tuple[LogConfig, dict[str, Any]]:
    """Separate log settings from storage options."""
    config = LogConfig.from_options(options)
    storage = {k: v for k, v in options.items() if not k.startswith(_PREFIX) or _is_storage_option(k)}
    return config, storage


def _is_storage_option(name: str) -> bool:
    return name.startswith((_PREFIX + "aws.", _PREFIX + "s3.", _PREFIX + "azure."))
