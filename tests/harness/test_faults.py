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


def _azure_store(azurite: Any, **options: Any) -> Any:
    from tests.conftest import azure_options, azure_uri

    return open_store(azure_uri(f"faults/{uuid.uuid4().hex}"), **azure_options(azurite), **options)


@pytest.mark.azure
def test_azure_every_request_busy_fails_after_the_sdk_retries(azurite_server: Any) -> None:
    store = _azure_store(azurite_server, max_attempts=2)
    faults = FaultInjector(1.0, seed=1, kinds=["slowdown"]).install_store(store)
    with pytest.raises(StorageError, match=r"k1: write failed: throttled or timed out \(ServerBusy\)") as err:
        store.put("k1", b"x")
    assert err.value.retryable
    assert faults.counts == {"slowdown": 2}  # the first try + 1 retry: max_attempts counts every try
    faults.enabled = False
    store.put("k1", b"x")
    assert store.read("k1") == b"x"


@pytest.mark.azure
def test_azure_ambiguous_put_if_absent_lands_and_a_retry_sees_it(azurite_server: Any) -> None:
    """Without retries the caller cannot know (AmbiguousWriteError); with them the SDK's retry finds
    the caller's own blob: ObjectAlreadyExistsError, as a 412 on S3 (PROTOCOL §2.6)."""
    from indextables_contract.errors import AmbiguousWriteError, ObjectAlreadyExistsError

    store = _azure_store(azurite_server, max_attempts=1)
    faults = FaultInjector(1.0, seed=1, kinds=["ambiguous_put"]).install_store(store)
    with pytest.raises(AmbiguousWriteError, match="k2: conditional write outcome unknown"):
        store.put_if_absent("k2", b"landed")
    faults.enabled = False
    assert store.read("k2") == b"landed"
    store = _azure_store(azurite_server, max_attempts=2)
    faults = FaultInjector(1.0, seed=1, kinds=["ambiguous_put"])
    store.set_request_hook(lambda request, send: send() if faults.counts else faults.azure_hook(request, send))
    with pytest.raises(ObjectAlreadyExistsError):
        store.put_if_absent("k3", b"mine")
    faults.enabled = False
    assert store.read("k3") == b"mine"


@pytest.mark.azure
def test_azure_resets_and_timeouts_are_retried_by_the_sdk(azurite_server: Any) -> None:
    store = _azure_store(azurite_server, max_attempts=5)
    faults = FaultInjector(0.3, seed=7, kinds=["reset", "timeout"]).install_store(store)
    for i in range(4):
        store.put(f"k{i}", b"x")
    assert faults.counts == {"reset": 4, "timeout": 2}  # seed 7: two faults before three of the puts
    faults.enabled = False
    assert [o.key for o in store.list("")] == [f"k{i}" for i in range(4)]
