"""Idempotent batch writes (``txnAppId`` + ``txnVersion``, Delta's options) in classic and Spark Connect
sessions: a write commits once per application id and version, a replay or an older version is skipped
with nothing committed and no split left behind, another application id commits, and a bad pair is
refused naming the option before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import connect_plugin
import executor_lib
from indextables_contract.errors import ConfigError
from tests.spark.test_datasource import make_df


def _write(spark: Any, table: Path, start: int, **txn: Any) -> None:
    options = {k: str(v) for k, v in txn.items()}
    connect_plugin.write(make_df(spark, 5, start=start), str(table), mode="append", options=options)


def _splits(table: Path) -> set[str]:
    return {p.name for p in table.rglob("*.split")}


def test_a_write_commits_once_per_application_and_version(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    _write(spark, table, 0, txnAppId="loader", txnVersion=0)  # the first write creates the table
    log = executor_lib.open_log(str(table))
    assert log.latest_version() == 1 and log.snapshot().num_records == 5
    files = _splits(table)
    for start, version in ((5, 0), (10, 0)):  # a replay of version 0, with other rows: skipped
        _write(spark, table, start, txnAppId="loader", txnVersion=version)
    assert log.latest_version() == 1 and _splits(table) == files, "nothing committed, no split left behind"
    _write(spark, table, 5, txnAppId="loader", txnVersion=3)
    _write(spark, table, 10, txnAppId="loader", txnVersion=2)  # older than the table holds: skipped
    _write(spark, table, 10, txnAppId="backfill", txnVersion=0)  # another application
    snapshot = log.snapshot()
    assert (snapshot.version, snapshot.num_records) == (3, 15)
    assert {app: r.batch_id for app, r in log.streaming_txns().items()} == {"loader": 3, "backfill": 0}
    ids = sorted(r["id"] for r in connect_plugin.read(spark, str(table)).collect())
    assert ids == list(range(15))


def test_a_bad_pair_is_refused_before_anything_is_written(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "bad"
    with pytest.raises(ConfigError, match="option txnAppId needs txnVersion too"):
        _write(spark, table, 0, txnAppId="loader")
    with pytest.raises(ConfigError, match="option txnVersion needs txnAppId too"):
        _write(spark, table, 0, txnVersion=1)
    with pytest.raises(ConfigError, match=r"option txnVersion='-1': expected an integer >= 0"):
        _write(spark, table, 0, txnAppId="loader", txnVersion=-1)
    assert not table.exists()


def test_two_runs_of_one_write_racing_commit_it_once(tmp_path: Path) -> None:
    """Two runs of the same idempotent write both pass the check before their jobs (the table does not
    hold it yet) and index their rows; the second to commit finds the transaction committed at its
    commit: it commits nothing and deletes its uploads."""
    import pyarrow as pa
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from executor_lib.spark.writer import IndexTablesWriter

    table = tmp_path / "race"
    executor_lib.create_table(str(table), pa.schema([("id", pa.int64()), ("msg", pa.string())]), [])
    schema = StructType([StructField("id", LongType()), StructField("msg", StringType())])
    options = {"path": str(table), "txnAppId": "loader", "txnVersion": "4"}
    first, second = IndexTablesWriter(dict(options), schema, False), IndexTablesWriter(dict(options), schema, False)
    assert not first.skip and not second.skip
    batch = pa.record_batch([pa.array([1, 2, 3], pa.int64()), pa.array(["a", "b", "c"])], names=["id", "msg"])
    messages = [first.write(iter([batch])), second.write(iter([batch]))]
    first.commit([messages[0]])
    second.commit([messages[1]])
    log = executor_lib.open_log(str(table))
    assert (log.latest_version(), log.snapshot().num_records) == (1, 3)
    assert {f.path.split("/")[-1] for f in log.snapshot().files} == _splits(table), "the loser's uploads are gone"
    assert IndexTablesWriter(dict(options), schema, False).skip, "a third run is skipped before its job"
