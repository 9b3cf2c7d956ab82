"""Ambiguous puts: the version file landed but the writer saw an error. Every commit must
land exactly once: no duplicate version for a retried write, no commit reported lost."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ConnectionClosedError, EndpointConnectionError
from botocore.httpsession import URLLib3Session

import executor_lib
from executor_lib.log.config import LogConfig
from executor_lib.log.transaction_log import TransactionLog
from executor_lib.storage import open_store
from executor_lib.storage.local import LocalStore
from harness.log_checker import check_log
from indextables_contract.errors import AmbiguousWriteError, CommitFailedError, ObjectAlreadyExistsError, StorageError
from tests.conftest import BUCKET, s3_options
from tests.log.helpers import add, make_table

VERSION_1 = "_transaction_log/00000000000000000001.json"


class S3Fault:
    """A botocore before-send hook for PutObject on one key: land-then-lose or fail-before-send."""

    def __init__(self, key: str, mode: str, times: int = 1) -> None:
        self.key, self.mode, self.remaining = key, mode, times
        self.http = URLLib3Session()

    def __call__(self, request: Any, **_: Any) -> Any:
        if self.remaining <= 0 or request.method != "PUT" or not request.url.split("?")[0].endswith(self.key):
            return None
        self.remaining -= 1
        if self.mode == "land-then-lose":
            self.http.send(request)  # the write reaches S3 ...
            raise ConnectionClosedError(endpoint_url=request.url)  # ... and the response is lost
        raise EndpointConnectionError(endpoint_url=request.url)  # nothing sent


def s3_log(uri: str, server: Any, max_attempts: int = 5) -> TransactionLog:
    make_table(uri, s3_options(server))
    return executor_lib.open_log(uri, **s3_options(server), max_attempts=max_attempts)


@pytest.mark.parametrize("sdk_retries", [5, 1], ids=["sdk-retry-sees-412", "no-sdk-retry"])
def test_s3_write_landed_response_lost(s3_server: Any, sdk_retries: int) -> None:
    uri = f"s3://{BUCKET}/ambiguous/{uuid.uuid4().hex}"
    log = s3_log(uri, s3_server, sdk_retries)
    fault = S3Fault(VERSION_1, "land-then-lose")
    log.store.client.meta.events.register("before-send.s3.PutObject", fault)  # type: ignore[attr-defined]
    a = add()
    assert log.commit([a]) == 1
    assert fault.remaining == 0
    report = check_log(uri, **s3_options(s3_server))
    assert report.versions == [0, 1]
    assert report.added_paths == {a.path: 1}
    assert not report.duplicate_txn_ids
    assert log.commit([add()]) == 2


def test_s3_failure_before_send_is_retried(s3_server: Any) -> None:
    uri = f"s3://{BUCKET}/ambiguous/{uuid.uuid4().hex}"
    log = s3_log(uri, s3_server, max_attempts=1)
    fault = S3Fault(VERSION_1, "fail-before-send", times=2)
    log.store.client.meta.events.register("before-send.s3.PutObject", fault)  # type: ignore[attr-defined]
    a = add()
    assert log.commit([a]) == 1
    report = check_log(uri, **s3_options(s3_server))
    assert report.versions == [0, 1] and report.added_paths == {a.path: 1}


class FlakyLocalStore(LocalStore):
    """A real local store whose conditional puts of one key fail in a chosen way."""

    def __init__(self, root: Path, key: str, mode: str, times: int = 1) -> None:
        super().__init__(root)
        self.key, self.mode, self.remaining = key, mode, times

    def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        if key == self.key and self.remaining > 0:
            self.remaining -= 1
            if self.mode.startswith("land-then-lose"):
                super().put_if_absent(key, data, metadata)
                raise AmbiguousWriteError(f"{key}: connection reset after write", key)
            raise StorageError(f"{key}: disk hiccup", key)
        super().put_if_absent(key, data, metadata)

    def read(self, key: str) -> bytes:
        if key == self.key and self.mode == "land-then-lose-unreadable" and self.remaining > -1:
            self.remaining -= 1  # the read-back right after the ambiguous write fails too
            raise StorageError(f"{key}: timeout", key)
        return super().read(key)


@pytest.mark.parametrize("mode", ["land-then-lose", "fail-before-write", "land-then-lose-unreadable"])
def test_local_ambiguous_and_failed_puts(tmp_path: Path, mode: str) -> None:
    uri = str(tmp_path / "t")
    make_table(uri, {})
    times = 1 if mode == "land-then-lose-unreadable" else 2
    log = TransactionLog(FlakyLocalStore(Path(uri), VERSION_1, mode, times=times), LogConfig())
    a = add()
    assert log.commit([a]) == 1
    report = check_log(uri)
    assert report.versions == [0, 1] and report.added_paths == {a.path: 1}
    assert not report.duplicate_adds


def test_storage_that_never_recovers_fails_cleanly(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    make_table(uri, {})
    config = LogConfig(retry_max_attempts=3, retry_base_delay_ms=1)
    log = TransactionLog(FlakyLocalStore(Path(uri), VERSION_1, "fail-before-write", times=99), config)
    with pytest.raises(CommitFailedError, match=r"3 failed writes .*disk hiccup") as err:
        log.commit([add()])
    assert isinstance(err.value.__cause__, StorageError)
    assert check_log(uri).versions == [0]
    assert not open_store(uri).exists(VERSION_1)


@pytest.mark.parametrize("error", [ObjectAlreadyExistsError, AmbiguousWriteError])
def test_checkpoint_whose_answer_is_lost_stays_readable(tmp_path: Path, error: type[StorageError]) -> None:
    """A multi-part checkpoint manifest that landed but came back as 412/unknown must keep its parts."""

    class LandThenRaise(LocalStore):
        def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
            super().put_if_absent(key, data, metadata)
            if key.endswith(".checkpoint.json"):
                raise error(f"{key}: answer lost", key)

    uri = str(tmp_path / "t")
    make_table(uri, {}, **{"spark.indextables.state.format": "json"})
    config = LogConfig(checkpoint_interval=3, checkpoint_actions_per_part=2, state_format="json")
    log = TransactionLog(LandThenRaise(Path(uri)), config)
    added = [add() for _ in range(3)]
    for a in added:
        log.commit([a])
    snap = executor_lib.open_log(uri).snapshot()
    assert snap.base == "checkpoint 3"
    assert {f.path for f in snap.files} == {a.path for a in added}
