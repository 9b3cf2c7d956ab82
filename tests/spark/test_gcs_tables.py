"""A table on Google Cloud Storage (the run's fake-gcs-server, ``gs://``) through ``format("indextables")``:
a write and a search, the endpoint given as an option (Spark hands Python data sources no session
settings); MERGE SPLITS in SQL with the endpoint as a session setting; and a write to a missing
bucket failing with the bucket named; a stream written exactly once across a replayed batch."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

import connect_plugin
import executor_lib
from connect_plugin.sql import sql
from tests.conftest import GCS_BUCKET, gcs_options
from tests.spark.test_datasource import log_rows

pytestmark = pytest.mark.gcs

SCHEMA = "id long, level string, msg string, score double, ts timestamp, day string"
WRITE_OPTS = {"spark.indextables.indexing.typemap.msg": "text", "spark.indextables.indexing.fastfields": "score,id"}


def _save(spark: Any, uri: str, storage: dict[str, str], rows: int = 20) -> None:
    writer = spark.createDataFrame(log_rows(rows), SCHEMA).write.format("indextables").mode("append")
    for key, value in {**WRITE_OPTS, **storage}.items():
        writer = writer.option(key, value)
    writer.save(uri)


def test_a_write_and_a_search_on_gcs(spark: Any, gcs_server: Any) -> None:
    uri = f"gs://{GCS_BUCKET}/spark-short/{uuid.uuid4().hex}"
    storage = gcs_options(gcs_server)
    _save(spark, uri, storage)
    hits = connect_plugin.read(spark, uri, columns=["id"], options={**storage, "indexquery.msg": "timeout"})
    assert sorted(r["id"] for r in hits.collect()) == [0, 5, 10, 15]
    assert connect_plugin.read(spark, uri, options=storage).count() == 20


def test_merge_splits_on_gcs_with_the_endpoint_as_a_session_setting(spark: Any, gcs_server: Any) -> None:
    uri = f"gs://{GCS_BUCKET}/spark-merge/{uuid.uuid4().hex}"
    storage = gcs_options(gcs_server)
    _save(spark, uri, storage)
    _save(spark, uri, storage)
    try:
        for key, value in storage.items():
            spark.conf.set(key, value)
        merged = sql(spark, f"MERGE SPLITS '{uri}' TARGET SIZE 100M").collect()
        assert len(merged) == 1  # one partition merged
        assert sql(spark, f"SELECT count(*) AS n FROM indextables.`{uri}`").collect()[0]["n"] == 40
    finally:
        for key in storage:
            spark.conf.unset(key)
    assert len(executor_lib.open_log(uri, **storage).snapshot().files) == 1  # two splits became one


def test_a_write_to_a_missing_bucket_names_it(spark: Any, gcs_server: Any) -> None:
    with pytest.raises(Exception, match="bucket 'no-such-bucket-gcs' does not exist"):
        _save(spark, "gs://no-such-bucket-gcs/t", gcs_options(gcs_server))


def test_a_stream_into_a_gcs_table_commits_each_batch_once(classic_spark: Any, gcs_server: Any, tmp_path: Path) -> None:
    """writeStream into a gs:// table (its checkpoint on local disk): one version per micro-batch, and a
    batch replayed after a driver died between the table commit and Spark's is skipped."""
    from tests.spark.test_streaming import INPUT_SCHEMA, expected_ids, forget_batch_commit, put_file

    uri, storage = f"gs://{GCS_BUCKET}/stream/{uuid.uuid4().hex}", gcs_options(gcs_server)
    source, checkpoint = tmp_path / "in", tmp_path / "ck"
    for i in range(2):
        put_file(source, i)

    def run() -> None:
        df = classic_spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
        options = {"spark.indextables.indexing.typemap.msg": "text", **storage}
        connect_plugin.write_stream(
            df, uri, checkpoint_location=str(checkpoint), trigger={"availableNow": True}, options=options
        ).awaitTermination()

    run()
    log = executor_lib.open_log(uri, **storage)
    assert log.latest_version() == 2
    ids = sorted(r["id"] for r in connect_plugin.read(classic_spark, uri, columns=["id"], options=storage).collect())
    assert ids == expected_ids(range(2))
    forget_batch_commit(checkpoint, 1)
    run()
    assert log.latest_version() == 2 and (checkpoint / "commits" / "1").exists()
