"""The fault injector against the real moto server: what it injects reaches the caller as the
store's errors, after botocore's own retries; bad settings are named."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from executor_lib.storage import open_store
from harness.faults import FaultInjector
from indextables_contract.errors import StorageError
from tests.conftest import BUCKET, s3_options


def test_every_request_slowed_down_fails_after_the_sdk_retries(moto_server: Any) -> None:
    store = open_store(f"s3://{BUCKET}/faults/{uuid.uuid4().hex}", **s3_options(moto_server), max_attempts=3)
    faults = FaultInjector(1.0, seed=1, kinds=["slowdown"]).install(store.client)  # type: ignore[attr-defined]
    with pytest.raises(StorageError, match="k1"):
        store.put("k1", b"x")
    assert faults.counts == {"slowdown": 4}  # the first try + 3 retries: botocore reads max_attempts as retries
    faults.enabled = False
    store.put("k1", b"x")
    assert store.read("k1") == b"x"


def test_ambiguous_put_lands_although_the_caller_sees_an_error(moto_server: Any) -> None:
    store = open_store(f"s3://{BUCKET}/faults/{uuid.uuid4().hex}", **s3_options(moto_server), max_attempts=1)
    faults = FaultInjector(1.0, seed=1, kinds=["ambiguous_put"]).install(store.client)  # type: ignore[attr-defined]
    with pytest.raises(StorageError):
        store.put("k2", b"landed")
    faults.enabled = False
    assert store.read("k2") == b"landed"


@pytest.mark.parametrize(("rate", "kinds"), [(0.1, ["teleport"]), (1.5, ["reset"])])
def test_bad_settings_are_named(rate: float, kinds: list[str]) -> None:
    with pytest.raises(ValueError, match="teleport" if kinds == ["teleport"] else "1.5"):
        FaultInjector(rate, kinds=kinds)
