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


def test_a_per_column_key_typo_names_the_family_with_its_column() -> None:
    """``typmap.message`` is offered ``typemap.message`` (the column kept, dots in it too); a key whose
    family words are far from every family's gets no per-column guess."""
    with pytest.raises(
        ConfigError,
        match=r"unknown option 'spark.indextables.indexing.typmap.message' \(did you mean "
        r"spark.indextables.indexing.typemap.message\?\)",
    ):
        S.check_key("spark.indextables.indexing.typmap.message", "write")
    assert S.suggestion("spark.indextables.indexing.tokeniser.payload.user") == (
        " (did you mean spark.indextables.indexing.tokenizer.payload.user?)"
    )
    assert S.suggestion("spark.indextables.cache.foo.bar") == ""


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
    assert merge == {"target_size": 4 << 30, "sort_key": None, "min_splits_to_merge": 10, "interval_s": 30.0}
    assert W.merge_on_write_settings("t", {}) is None
    purge = W.purge_on_write_settings("t", {"spark.indextables.purgeonwrite.enabled": "TRUE"})
    assert purge == W.PurgeOnWrite(True, 0, 168, 720)
    assert purge.due(merged=True, version=7) and not purge.due(merged=False, version=7)
    every_2 = W.PurgeOnWrite(False, 2, 168, 720)
    assert [every_2.due(False, v) for v in (1, 2, 3, 4)] == [False, True, False, True]
    assert W.optimize_write_target("t", {}) is None
    assert W.optimize_write_target("t", {"spark.indextables.write.optimizeWrite.enabled": "true"}) == 1 << 30


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("purgeOnWrite.splitRetentionHours", "2", r"splitRetentionHours=2 is below the minimum of 24 hours"),
        (
            "purgeOnWrite.triggerAfterWrites",
            "-1",
            r"write t: option spark.indextables.purgeOnWrite.triggerAfterWrites='-1': expected an integer >= 0",
        ),
        ("purgeOnWrite.enabled", "maybe", r"purgeOnWrite.enabled='maybe': expected true or false"),
    ],
)
def test_bad_purge_on_write_settings_are_named(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        W.purge_on_write_settings("t", {S.PREFIX + key: value})


def test_bad_optimize_write_size_is_named() -> None:
    with pytest.raises(
        ConfigError, match=r"targetSplitSize='big': expected a size such as 104857600, 512K, 100M or 1G"
    ):
        W.optimize_write_target("t", {"spark.indextables.write.optimizeWrite.targetSplitSize": "big"})


# -- one place per setting: typed entries, read through the registry ---------------------------------------

ROOT_PACKAGES = ("executor_lib", "connect_plugin")
# Constants that may spell a spark.indextables.* key outside the contract: file -> {constant: why}.
# (Empty: every key the code reads is a registry entry. Keys quoted inside longer texts, such as error
# messages and docstrings, are documentation and not looked at.)
ALLOWED_KEY_LITERALS: dict[str, dict[str, str]] = {}


def _key_literals(path: Path) -> list[tuple[int, str]]:
    """(line, constant) of each string constant in ``path`` (docstrings aside) that is a registry key, an
    instance of a per-column pattern (``...typemap.message``), a pattern's prefix (``...typemap.``) or
    the prefix of a family of keys (``spark.indextables.azure.``)."""
    import ast

    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    prefixes = {s.prefix.lower() for s in S.SETTINGS if s.is_pattern}
    families = {
        ".".join(s.key.split(".")[:i]).lower() + "."
        for s in S.SETTINGS
        for i in range(len(S.PREFIX.split(".")), len(s.key.split(".")))
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value.lower()
            if text.startswith(S.PREFIX) and (S.lookup(text) is not None or text in prefixes or text in families):
                found.append((node.lineno, node.value))
    return found


def test_no_registry_key_is_spelled_outside_the_contract() -> None:
    """A setting lives in one place, its entry in ``indextables_contract.settings``: the client and the
    cluster read it through the entry (``MERGE_MAX_SOURCE_SPLITS.get(options)``), never by its name."""
    offenders = []
    for package in ROOT_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            relative = str(path.relative_to(REPO))
            allowed = ALLOWED_KEY_LITERALS.get(relative, {})
            offenders += [f"{relative}:{line}: {text!r}" for line, text in _key_literals(path) if text not in allowed]
    assert offenders == [], "spell these keys through indextables_contract.settings:\n" + "\n".join(offenders)


def test_the_literal_check_finds_keys_patterns_and_families(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        '"""spark.indextables.merge.sortKey in a docstring is documentation."""\n'
        'A = "spark.indextables.merge.maxSourceSplitsPerMerge"\n'
        'B = {"spark.indextables.indexing.typemap.message": "text"}\n'
        'C = "spark.indextables.azure."\n'
        'D = f"spark.indextables.indexing.typemap.{A}"\n'
        'E = "set spark.indextables.merge.sortKey to a column"\n'
        'F = "spark.indextables."\n'
    )
    assert sorted(line for line, _ in _key_literals(source)) == [2, 3, 4, 5]


def test_every_entry_the_code_reads_has_a_parser_and_a_typed_default() -> None:
    """The typed default is the documented default parsed (None where the docs describe the default in
    words, "the task's cores": the code chooses); a scoped entry is one the code reads or keeps."""
    scoped = [s for s in S.SETTINGS if s.scopes]
    assert len(scoped) > 60 and all(s.parse is not None for s in scoped)
    for setting in S.SETTINGS:
        assert set(setting.scopes) <= set(S.SCOPES), setting.key
        if setting.parse is None:
            continue
        assert setting.scopes, setting.key
        if setting.value is not None:
            assert setting.value == setting.parse(setting.default), setting.key
    assert S.MERGE_MAX_SOURCE_SPLITS.value == 1000
    assert S.READ_TARGET_PARTITION_BYTES.value == 256 << 20
    assert S.CACHE_MAX_SIZE.value == 10 << 30
    assert S.STATE_COMPACTION_TOMBSTONE_THRESHOLD.value == 0.10
    assert S.PURGE_TX_LOG_RETENTION_HOURS.value == 720.0
    assert S.INDEX_WRITER_HEAP_SIZE.value is None


def test_an_entry_finds_its_key_in_any_case_and_by_its_aliases() -> None:
    entry = S.MERGE_MAX_SOURCE_SPLITS
    assert entry.get({}) == 1000
    assert entry.get({"spark.indextables.merge.maxSourceSplitsPerMerge": "7"}) == 7
    assert entry.get({"spark.indextables.merge.maxsourcesplitspermerge": " 5 "}) == 5  # as Spark lower-cases
    assert S.PURGE_DEFAULT_RETENTION_HOURS.get({"SPARK.INDEXTABLES.PURGE.DEFAULTRETENTIONHOURS": "24"}) == 24.0
    aliased = S.Setting(S.PREFIX + "x.size", S.SUPPORTED, "1G", "doc", parse=S.size, aliases=(S.PREFIX + "x.oldSize",))
    assert aliased.value == 1 << 30
    assert aliased.get({"spark.indextables.x.oldsize": "2M"}) == 2 << 20
    assert aliased.get({"spark.indextables.x.oldSize": "2M", "spark.indextables.X.SIZE": "3M"}) == 3 << 20


@pytest.mark.parametrize(
    ("entry", "value", "message"),
    [
        (S.MERGE_MAX_SOURCE_SPLITS, "0", r"option spark.indextables.merge.maxSourceSplitsPerMerge='0': expected a "),
        (S.READ_TARGET_PARTITION_BYTES, "big", r"targetPartitionBytes='big': expected a size such as"),
        (S.PURGE_DEFAULT_RETENTION_HOURS, "-1", r"defaultRetentionHours='-1': expected hours \(a number >= 0\)"),
        (S.CHECKPOINT_ENABLED, "maybe", r"checkpoint.enabled='maybe': expected true or false"),
        (S.TRANSACTION_GZIP_LEVEL, "10", r"gzip.level='10': expected an integer from 1 to 9"),
        (S.STATE_COMPRESSION, "lz4", r"state.compression='lz4': expected one of zstd, snappy, none"),
        (S.STATE_COMPACTION_TOMBSTONE_THRESHOLD, "2", r"tombstoneThreshold='2': expected a number from 0 to 1"),
    ],
)
def test_a_bad_value_is_an_error_naming_key_value_and_expectation(
    entry: S.Setting[object], value: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        entry.get({entry.key.lower(): value})


def test_log_config_is_derived_from_the_registry() -> None:
    from executor_lib.log.config import FIELDS, OPTION_NAMES, LogConfig

    log_entries = S.entries_for(S.LOG)
    assert sorted(s.key for s in FIELDS.values()) == sorted(s.key for s in log_entries)
    assert len(log_entries) == 28
    assert set(OPTION_NAMES) == {s.name for s in log_entries}
    defaults = LogConfig()
    assert {f: getattr(defaults, f) for f in FIELDS} == {f: s.value for f, s in FIELDS.items()}
    config = LogConfig.from_options({"spark.indextables.checkpoint.INTERVAL": "5", "other": "x"})
    assert config.checkpoint_interval == 5


def test_the_accepted_keys_of_reads_and_writes_are_derived_from_the_registry() -> None:
    from executor_lib.spark import options as O

    assert set(S.keys_for(S.READ)) <= set(O.READ_KEYS)
    assert set(S.keys_for(S.WRITE)) <= set(O.WRITE_KEYS)
    assert set(S.keys_for(S.LOG)) <= set(O.READ_KEYS) & set(O.WRITE_KEYS)
    assert S.patterns_for(S.WRITE) == O.WRITE_COLUMN_PREFIXES
    # no spark.indextables.* key is accepted that the registry does not scope so
    spark_keys = {k for k in (*O.READ_KEYS, *O.WRITE_KEYS) if k.startswith(S.PREFIX)}
    assert spark_keys == set(S.keys_for(S.READ)) | set(S.keys_for(S.WRITE))


def test_settings_is_built_from_the_entries_each_once() -> None:
    """``SETTINGS`` is made by the entries themselves (``_key``, ``_mine``, ``_kept``, ``_n``): every named
    entry of the module is in it, and no key is in it twice (any case)."""
    named = [v for v in vars(S).values() if isinstance(v, S.Setting)]
    assert named and all(any(s is e for s in S.SETTINGS) for e in named)
    assert len({s.key.lower() for s in S.SETTINGS}) == len(S.SETTINGS)
    with pytest.raises(ValueError, match="in the registry twice"):
        S._n(S.MERGE_MAX_SOURCE_SPLITS.name, "1", "a second entry of a known key")
