"""A table on Google Cloud Storage (the run's fake-gcs-server, ``gs://``) through ``format("indextables")``:
a write and a search, the endpoint given as an option (Spark hands Python data sources no session
settings); MERGE SPLITS in SQL with the endpoint as a session setting; and a write to a missing
bucket failing with the bucket named."""

from __future__ import annotations

import uuid
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
