"""Reads of a table on S3 (the run's lock-patched moto server) through ``format("indextables")``
while other writers commit: each query plans on one committed version, never a mix.

Queries reuse the snapshot each Python process keeps of the table (``log.snapshot_cache``) and
find newer versions by listing past it, so these tests also check that the cache never hides a
commit (read-after-write) and never goes back in time."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pyarrow as pa

import connect_plugin
import executor_lib
from tests.conftest import BUCKET, SharedS3, s3_options

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.string())])
# Each batch is one commit of two splits of different sizes; a version holding one of a batch's
# splits without the other would count rows that no set of whole batches adds up to.
BATCHES = {"a": (10, 20), "b": (1_000, 2_000)}
BATCHES_PER_WRITER = 6


def _storage(server: SharedS3) -> dict[str, Any]:
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in s3_options(server).items()}


def _append_batches(uri: str, storage: dict[str, str], writer: str, errors: list[BaseException]) -> None:
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.publish import write_and_upload

    try:
        log = executor_lib.open_log(uri, **storage)
        mapping = mapping_for(SCHEMA, {})
        next_id = 0
        for _ in range(BATCHES_PER_WRITER):
            adds = []
            for size in BATCHES[writer]:
                rows = pa.table({"id": range(next_id, next_id + size), "writer": [writer] * size}, schema=SCHEMA)
                next_id += size
                adds.append(write_and_upload(log.store, rows, mapping))
            log.commit(adds)
    except BaseException as e:  # reported by the test
        errors.append(e)


def test_queries_during_concurrent_appends_see_whole_batches_only(classic_spark: Any, moto_server: SharedS3) -> None:
    uri = f"s3://{BUCKET}/tables/{uuid.uuid4().hex}"
    storage = _storage(moto_server)
    executor_lib.create_table(uri, SCHEMA, **storage)
    per_batch = {w: sum(sizes) for w, sizes in BATCHES.items()}
    whole = {
        per_batch["a"] * i + per_batch["b"] * j
        for i in range(BATCHES_PER_WRITER + 1)
        for j in range(BATCHES_PER_WRITER + 1)
    }

    def count() -> int:
        return int(connect_plugin.read(classic_spark, uri, columns=["id"], options=storage).count())

    assert count() == 0
    errors: list[BaseException] = []
    writers = [threading.Thread(target=_append_batches, args=(uri, storage, w, errors)) for w in BATCHES]
    for t in writers:
        t.start()
    seen = []
    while any(t.is_alive() for t in writers):
        seen.append(count())
    for t in writers:
        t.join()
    assert errors == []
    final = count()
    assert final == BATCHES_PER_WRITER * sum(per_batch.values()), "the last commit is seen at once"
    seen.append(final)
    torn = [n for n in seen if n not in whole]
    assert torn == [], f"counts that are not sums of whole batches: {torn} (all: {seen})"
    assert seen == sorted(seen), f"a later query saw an older version: {seen}"
    assert len(set(seen)) >= 3, f"the queries should have seen the table grow: {seen}"


def test_a_commit_between_warm_queries_is_seen_by_the_next(classic_spark: Any, moto_server: SharedS3) -> None:
    """Repeated queries start from the snapshot the driver's processes keep; a commit made after
    them by another log object is seen by the next query (it lists past the kept version)."""
    uri = f"s3://{BUCKET}/tables/{uuid.uuid4().hex}"
    storage = _storage(moto_server)
    executor_lib.create_table(uri, SCHEMA, **storage)
    errors: list[BaseException] = []
    _append_batches(uri, storage, "a", errors)
    assert errors == []
    read = connect_plugin.read(classic_spark, uri, columns=["id", "writer"], options=storage)
    total = BATCHES_PER_WRITER * sum(BATCHES["a"])
    assert read.count() == total and read.count() == total
    log = executor_lib.open_log(uri, **storage)
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.publish import write_and_upload

    rows = pa.table({"id": [10**6], "writer": ["c"]}, schema=SCHEMA)
    log.commit([write_and_upload(log.store, rows, mapping_for(SCHEMA, {}))])
    again = connect_plugin.read(classic_spark, uri, columns=["id", "writer"], options=storage)
    assert again.count() == total + 1
    assert again.filter("writer = 'c'").collect()[0]["id"] == 10**6
