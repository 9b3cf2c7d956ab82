"""IndexTables4Spark users' settings and format names in real Spark sessions (classic local and local
Spark Connect): a JVM-only key never breaks a query or a write, an unknown key fails with a suggestion,
the JVM's list forms and format names work, and the write options ``write.optimizeWrite``,
``mergeOnWrite`` and ``purgeOnWrite`` act through ``df.write.format(...)`` as they do through
``connect_plugin.write``."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
from executor_lib.log.tables import open_log
from executor_lib.spark import options as O
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError
from tests.spark.test_datasource import SCHEMA, TEXT_OPTS, log_rows, make_df, read, write

JVM_ONLY = {
    "spark.indextables.cache.disk.enabled": "true",
    "spark.indextables.transaction.cache.ttl.ms": "1000",
    "spark.indextables.read.batchOptimization.profile": "aggressive",
}
CLIENT_ONLY = {S.PREFIX + "table.<column>", S.PREFIX + "mergeOnWrite.streamIntervalSeconds"}


def test_every_supported_key_is_known_to_an_operation_and_every_option_is_in_the_registry() -> None:
    from executor_lib.log.config import OPTION_NAMES
    from executor_lib.storage import STORAGE_OPTION_NAMES

    known = {k.lower() for k in (*O.WRITE_KEYS, *O.READ_KEYS, *(S.PREFIX + n for n in OPTION_NAMES))}
    known |= {k.lower() for k in STORAGE_OPTION_NAMES}
    prefixes = tuple(p.lower() for p in (*O.WRITE_COLUMN_PREFIXES, *O.READ_COLUMN_PREFIXES))
    for setting in S.SETTINGS:
        if setting.status != S.SUPPORTED or setting.key in CLIENT_ONLY:
            continue
        key = setting.key.lower()
        assert key in known or (setting.is_pattern and key[: -len(S.COLUMN)].startswith(prefixes)), setting.key
    options = [k for k in (*O.WRITE_KEYS, *O.READ_KEYS) if k.lower().startswith(S.PREFIX)]
    assert [k for k in options if (S.lookup(k) or S.Setting("", "", "", "")).status != S.SUPPORTED] == []


def test_a_jvm_only_key_never_breaks_sql_or_writes(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """JVM-only keys in the session (and as options) are accepted, each warned about once on the client."""
    path = str(tmp_path / "t")
    for key in JVM_ONLY:
        S._warned.discard(key)
        spark.conf.set(key, JVM_ONLY[key])
    try:
        with caplog.at_level(logging.WARNING, logger="indextables.settings"):
            connect_plugin.write(make_df(spark, 10), path, options=TEXT_OPTS)
            connect_plugin.write(make_df(spark, 5, start=10), path)
            rows = connect_plugin.sql(spark, f"SELECT count(*) AS n FROM indextables.`{path}`").collect()
            assert rows[0]["n"] == 15
            assert connect_plugin.sql(spark, f"SELECT id FROM '{path}' WHERE msg indexquery 'timeout'").count() == 3
        warned = [r.getMessage() for r in caplog.records if r.name == "indextables.settings"]
        assert sorted(w.split()[0] for w in warned) == sorted(JVM_ONLY), warned  # one line per key
        assert all("has no effect in IndexTables for Python" in w for w in warned)
    finally:
        for key in JVM_ONLY:
            spark.conf.unset(key)
    # As plain data source options (no client in between): accepted by the cluster too.
    write(make_df(spark, 5, start=15), tmp_path / "t", **JVM_ONLY)
    assert read(spark, tmp_path / "t", **JVM_ONLY).count() == 20


def test_an_unknown_key_fails_with_a_suggestion(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    spark.conf.set("spark.indextables.cache.disk.enabeld", "true")
    try:
        with pytest.raises(ConfigError, match=r"did you mean spark.indextables.cache.disk.enabled\?"):
            connect_plugin.write(make_df(spark, 3), str(path))
    finally:
        spark.conf.unset("spark.indextables.cache.disk.enabeld")
    with pytest.raises(Exception) as raised:  # straight to the data source: the cluster says the same
        write(make_df(spark, 3), path, **{"spark.indextables.indexWriter.heapSiz": "64M"})
    assert "did you mean spark.indextables.indexWriter.heapSize?" in str(raised.value)
    assert not path.exists() or not any(path.rglob("*.split"))


def test_the_jvm_list_forms_and_text_record_option(spark: Any, tmp_path: Path) -> None:
    """``typemap.text = "msg"`` (a type, then the columns) and ``text.indexRecordOption`` as in the JVM."""
    path, building = tmp_path / "t", tmp_path / "building"
    write(
        make_df(spark, 20),
        path,
        **{
            "spark.indextables.indexing.typemap.text": "msg",
            "spark.indextables.indexing.text.indexRecordOption": "basic",
            "spark.indextables.indexWriter.tempDirectoryPath": str(building),
        },
    )
    assert building.is_dir() and not any(building.iterdir())  # splits were built there, then uploaded
    snapshot = open_log(str(path)).snapshot()
    mapping = snapshot.doc_mapping(snapshot.files[0]) or ""
    assert '"record":"basic"' in mapping.replace(" ", "")
    assert read(spark, path, **{"indexquery.msg": "timeout"}).count() == 4  # tokenized: a word matches


@pytest.mark.parametrize(
    "name", ["io.indextables.provider.IndexTablesProvider", "io.indextables.spark.core.IndexTables4SparkTableProvider"]
)
def test_the_jvm_format_names_are_this_data_source(spark: Any, tmp_path: Path, name: str) -> None:
    connect_plugin.install(spark)
    path = str(tmp_path / "t")
    make_df(spark, 6).write.format(name).mode("append").options(**TEXT_OPTS).save(path)
    assert spark.read.format(name).load(path).count() == 6
    assert spark.read.format("indextables").load(path).count() == 6
    assert spark.read.format(name).option("indexquery.msg", "timeout").load(path).count() == 2
    make_df(spark, 2, start=6).write.format(name).mode("overwrite").save(path)
    assert sorted(r["id"] for r in spark.read.format(name).load(path).collect()) == [6, 7]


def test_optimize_write_merges_each_partitions_new_splits_before_the_commit(spark: Any, tmp_path: Path) -> None:
    rows = log_rows(300)
    df = spark.createDataFrame(rows, SCHEMA).repartition(3)
    plain, optimized = tmp_path / "plain", tmp_path / "optimized"
    write(df, plain, partitionBy="day", **TEXT_OPTS)
    write(df, optimized, partitionBy="day", **TEXT_OPTS, **{"spark.indextables.write.optimizeWrite.enabled": "true"})
    days = {r[-1] for r in rows}
    assert len(open_log(str(plain)).snapshot().files) > len(days)  # several tasks wrote each day
    log = open_log(str(optimized))
    assert len(log.snapshot().files) == len(days)  # one split per day
    assert [e.operation for e in log.history()] == ["WRITE", "CREATE TABLE"]  # in the write's own version
    assert sorted(map(tuple, read(spark, optimized).collect())) == sorted(map(tuple, read(spark, plain).collect()))
    assert len(list(optimized.rglob("*.split"))) == len(days)  # the unmerged splits are gone


def test_merge_and_purge_on_write_through_df_write(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    merge = {"spark.indextables.mergeOnWrite.enabled": "true", "spark.indextables.mergeOnWrite.minSplitsToMerge": "3"}
    for k in range(2):
        write(make_df(spark, 10, start=10 * k).coalesce(1), path, **TEXT_OPTS, **merge)
    assert len(open_log(str(path)).snapshot().files) == 2  # fewer than 3 small splits: nothing merged
    orphan = path / "splits" / "orphan-from-a-crashed-writer.split"  # purged once older than the retention
    orphan.parent.mkdir(exist_ok=True)
    orphan.write_bytes(b"x" * 10)
    old = time.time() - 48 * 3600
    os.utime(orphan, (old, old))
    write(
        make_df(spark, 10, start=20).coalesce(1),
        path,
        **merge,
        **{
            "spark.indextables.purgeOnWrite.enabled": "true",
            "spark.indextables.purgeOnWrite.splitRetentionHours": "24",
        },
    )
    log = open_log(str(path))
    assert [e.operation for e in log.history()][:2] == ["MERGE SPLITS", "WRITE"]
    assert len(log.snapshot().files) == 1
    assert not orphan.exists()  # purged after the merge (purgeOnWrite.triggerAfterMerge, default true)
    assert sorted(r["id"] for r in read(spark, path).collect()) == list(range(30))


def test_purge_on_write_after_every_nth_write(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    purge = {"spark.indextables.purgeOnWrite.enabled": "true", "spark.indextables.purgeOnWrite.triggerAfterWrites": "2"}
    write(make_df(spark, 5), path, **purge)  # version 0 created with the table, the data at version 1
    orphan = path / "orphan.split"
    orphan.write_bytes(b"x")
    old = time.time() - 200 * 3600  # older than purgeOnWrite.splitRetentionHours (168)
    os.utime(orphan, (old, old))
    write(make_df(spark, 5, start=5), path, **purge)  # version 2: the 2nd, purges
    assert not orphan.exists()
    orphan.write_bytes(b"x")
    os.utime(orphan, (old, old))
    write(make_df(spark, 5, start=10), path, **purge)  # version 3: not due
    assert orphan.exists()
    assert read(spark, path).count() == 15


def test_bad_write_option_values_fail_before_anything_is_written(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    with pytest.raises(Exception) as raised:
        write(make_df(spark, 3), path, **{"spark.indextables.purgeOnWrite.splitRetentionHours": "1"})
    assert "purgeOnWrite.splitRetentionHours=1 is below the minimum of 24 hours" in str(raised.value)
    with pytest.raises(ConfigError, match=r"write.optimizeWrite.targetSplitSize='huge': expected a size"):
        connect_plugin.write(
            make_df(spark, 3), str(path), options={"spark.indextables.write.optimizeWrite.targetSplitSize": "huge"}
        )
    assert not path.exists()


def test_purge_default_retention_and_max_source_splits_settings(classic_spark: Any, tmp_path: Path) -> None:
    """``purge.defaultRetentionHours`` (PURGE without OLDER THAN) and ``merge.maxSourceSplitsPerMerge``
    as session settings, with the JVM's names."""
    from connect_plugin.table import IndexTable

    spark, path = classic_spark, tmp_path / "t"
    for k in range(4):
        write(make_df(spark, 5, start=5 * k).coalesce(1), path)
    orphan = path / "orphan.split"
    orphan.write_bytes(b"x")
    old = time.time() - 48 * 3600
    os.utime(orphan, (old, old))
    table = IndexTable.for_path(spark, str(path))
    listed = {r[1] for r in table.purge(dry_run=True).collect()}
    assert "orphan.split" not in listed  # the default 168 hours keeps it
    settings = {
        "spark.indextables.purge.defaultRetentionHours": "24",
        "spark.indextables.merge.maxSourceSplitsPerMerge": "2",
    }
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        assert "orphan.split" in {r[1] for r in table.purge(dry_run=True).collect()}
        table.merge_splits().collect()
    finally:
        for key in settings:
            spark.conf.unset(key)
    files = open_log(str(path)).snapshot().files
    assert sorted(a.num_merge_ops or 0 for a in files) == [1, 1]  # 4 splits, at most 2 per merge


def test_every_storage_option_name_is_accepted_and_reaches_the_store() -> None:
    """Reads and writes accept every name ``open_store`` takes a storage option by (one list, in
    executor_lib.storage) and hand it on; the Python-only credential object is not an option."""
    from executor_lib.storage import SPARK_STORAGE_OPTION_NAMES, STORAGE_OPTION_NAMES

    only_python = STORAGE_OPTION_NAMES - SPARK_STORAGE_OPTION_NAMES
    assert only_python == {"azure_credential"}
    given = {name: "x" for name in SPARK_STORAGE_OPTION_NAMES}
    for keys, what in ((O.READ_KEYS, "read"), (O.WRITE_KEYS, "write")):
        assert O.canonical_options(given, keys, (), ["a"], what) == given
    assert O.storage_and_log_options({**given, "indexquery": "a:b"}) == given
    with pytest.raises(ConfigError, match=r"unknown option 'azure_credential'"):
        O.canonical_options({"azure_credential": "x"}, O.READ_KEYS, (), ["a"], "read")
