"""The settings registry (``indextables_contract.settings``): every key IndexTables4Spark documents is in it,
``docs/settings.md`` is what it generates, unknown keys fail with a suggestion, and a key with no
effect here is warned about once per process."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from indextables_contract import settings as S
from indextables_contract import write_settings as W
from indextables_contract.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
JVM_KEYS_FILE = Path(__file__).with_name("jvm_documented_settings.txt")


def jvm_documented_keys() -> list[str]:
    return [
        line.strip() for line in JVM_KEYS_FILE.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]


def test_the_documented_list_names_its_source_commit() -> None:
    header = JVM_KEYS_FILE.read_text().splitlines()[:4]
    assert any("commit 75216fd69e362efeedb8d5a61fe58266ecdec317" in line for line in header)


def test_every_key_in_the_jvm_docs_is_in_the_registry() -> None:
    keys = jvm_documented_keys()
    assert len(keys) == 166  # as extracted, per-column examples (typemap.title ...) included
    assert [k for k in keys if S.lookup(k) is None] == []
    statuses = [S.lookup(k).status for k in keys]  # type: ignore[union-attr]
    assert statuses.count(S.SUPPORTED) + statuses.count(S.NO_EFFECT) == len(keys)


def test_every_jvm_entry_of_the_registry_is_documented_or_defined_by_the_jvm() -> None:
    """Entries marked as IndexTables4Spark's are in its docs (or, for a few, only in its code: these
    are listed here so the list cannot grow unnoticed)."""
    documented = {S.lookup(k).key for k in jvm_documented_keys()}  # type: ignore[union-attr]
    only_in_code = {
        S.PREFIX + k
        for k in (
            "aws.sessionToken",
            "aws.region",
            "s3.endpoint",
            "s3.pathStyleAccess",
            "write.optimizeWrite.maxSplitSize",
            "azure.bearerToken",
            "azure.connectionString",
            "azure.endpoint",
        )
    }
    # BUILD INDEXTABLES COMPANION FOR ICEBERG's catalog settings (SyncToExternalCommand.buildIcebergConfig)
    only_in_code |= {
        S.PREFIX + "iceberg." + k
        for k in ("catalogType", "uri", "warehouse", "token", "credential", "s3Endpoint", "s3PathStyleAccess")
    }
    # the companion reader's source root override (IndexTables4SparkScanBuilder.effectiveConfig)
    only_in_code.add(S.PREFIX + "companion.parquetTableRoot")
    jvm = {s.key for s in S.SETTINGS if s.jvm}
    assert jvm - documented == only_in_code


def test_the_settings_page_is_generated_from_the_registry() -> None:
    page = (REPO / "docs" / "settings.md").read_text()
    assert page == S.markdown(), "docs/settings.md is stale: python -m indextables_contract.settings > docs/settings.md"
    for setting in S.SETTINGS:
        assert f"`{setting.key}`" in page


def test_keys_are_unique_and_every_entry_says_why() -> None:
    keys = [s.key.lower() for s in S.SETTINGS]
    assert len(keys) == len(set(keys))
    assert all(s.status in (S.SUPPORTED, S.NO_EFFECT) and s.note and s.default for s in S.SETTINGS)


def test_lookup_is_case_insensitive_and_matches_per_column_keys() -> None:
    assert S.lookup("spark.indextables.indexwriter.heapsize").key == "spark.indextables.indexWriter.heapSize"  # type: ignore[union-attr]
    assert S.lookup("spark.indextables.indexing.typemap.message").key.endswith("typemap.<column>")  # type: ignore[union-attr]
    assert S.lookup("spark.indextables.indexing.typemap.") is None
    assert S.lookup("spark.indextables.nope") is None


def test_an_unknown_key_is_an_error_naming_the_closest_one() -> None:
    with pytest.raises(
        ConfigError,
        match=r"unknown option 'spark.indextables.cache.disk.enabeld' \(did you mean "
        r"spark.indextables.cache.disk.enabled\?\)",
    ):
        S.check_key("spark.indextables.cache.disk.enabeld", "read")
    with pytest.raises(ConfigError, match=r"unknown option 'spark.indextables.zzz'; the known"):
        S.check_key("spark.indextables.zzz")


def test_a_key_with_no_effect_is_warned_once_per_process(caplog: pytest.LogCaptureFixture) -> None:
    key = "spark.indextables.read.batchOptimization.gapTolerance"
    S._warned.discard(S.lookup(key).key)  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING, logger="indextables.settings"):
        assert S.accept({key: "1M", "spark.indextables.indexWriter.heapSize": "1G", "endpoint_url": "x"}) == [key]
        assert S.accept({key: "2M"}) == [key]
    lines = [r.getMessage() for r in caplog.records if r.name == "indextables.settings"]
    assert len(lines) == 1 and key in lines[0] and "no effect" in lines[0] and "columnar copy" in lines[0]


def test_write_settings_use_the_jvm_defaults() -> None:
    merge = W.merge_on_write_settings("t", {"spark.indextables.mergeOnWrite.enabled": "true"})
    assert merge == {"target_size": "4G", "sort_key": None, "min_splits_to_merge": 10, "interval_s": 30.0}
    assert W.merge_on_write_settings("t", {}) is None
    purge = W.purge_on_write_settings("t", {"spark.indextables.purgeonwrite.enabled": "TRUE"})
    assert purge == W.PurgeOnWrite(True, 0, 168, 720)
    assert purge.due(merged=True, version=7) and not purge.due(merged=False, version=7)
    every_2 = W.PurgeOnWrite(False, 2, 168, 720)
    assert [every_2.due(False, v) for v in (1, 2, 3, 4)] == [False, True, False, True]
    assert W.optimize_write_target("t", {}) is None
    assert W.optimize_write_target("t", {"spark.indextables.write.optimizeWrite.enabled": "true"}) == 1 << 30
    assert W.size_bytes("x", "512k") == 512 << 10


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("purgeOnWrite.splitRetentionHours", "2", r"splitRetentionHours=2 is below the minimum of 24 hours"),
        ("purgeOnWrite.triggerAfterWrites", "-1", r"triggerAfterWrites must be a whole number"),
        ("purgeOnWrite.enabled", "maybe", r"purgeOnWrite.enabled must be true or false, not 'maybe'"),
    ],
)
def test_bad_purge_on_write_settings_are_named(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        W.purge_on_write_settings("t", {S.PREFIX + key: value})


def test_bad_optimize_write_size_is_named() -> None:
    with pytest.raises(ConfigError, match=r"targetSplitSize must be a size like 512M or 4G, not 'big'"):
        W.optimize_write_target("t", {"spark.indextables.write.optimizeWrite.targetSplitSize": "big"})
