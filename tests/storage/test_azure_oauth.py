"""OAuth on Azure: a table read and written with a bearer token (``spark.indextables.azure.bearerToken``)
and with a credential object (``azure_credential``, the path of azure-identity's credentials),
against Azurite over HTTPS with its token checks on (``--oauth basic``: issuer, audience, lifetime;
no signature). The self-signed certificate is trusted by these tests only, through
``REQUESTS_CA_BUNDLE``; without it the error names the untrusted certificate. A refused token is one
clear error naming account and container and which setting held the token, never the token."""

from __future__ import annotations

import importlib.util
import logging
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage import open_store
from harness.azurite import ACCOUNT, ACCOUNT_KEY, AzuriteProcess, AzuriteUnavailable, create_container, oauth_token
from indextables_contract.errors import ConfigError, ObjectNotFoundError, StorageError

pytestmark = pytest.mark.azure

CONTAINER = "oauth-tables"
SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string())])


@pytest.fixture(scope="module")
def azurite_https(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AzuriteProcess]:
    """Azurite over HTTPS checking bearer tokens, its certificate made for this module."""
    server = AzuriteProcess(oauth=True, cert_dir=tmp_path_factory.mktemp("azurite-tls"))
    try:
        server.start()
    except AzuriteUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"Azure tests in CI: {e}")
        pytest.skip(f"Azure backend: {e}")
    try:
        previous = os.environ.get("REQUESTS_CA_BUNDLE")
        os.environ["REQUESTS_CA_BUNDLE"] = str(server.ca_bundle)
        try:
            create_container(server.endpoint, CONTAINER)  # with the account key
        finally:
            if previous is None:
                os.environ.pop("REQUESTS_CA_BUNDLE", None)
            else:
                os.environ["REQUESTS_CA_BUNDLE"] = previous
        yield server
    finally:
        server.stop()


@pytest.fixture
def https(azurite_https: AzuriteProcess, monkeypatch: pytest.MonkeyPatch) -> AzuriteProcess:
    """The HTTPS Azurite with its certificate trusted and no Azure credentials in the environment
    (so only what a test passes can authenticate)."""
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(azurite_https.ca_bundle))
    for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_KEY"):
        monkeypatch.delenv(name, raising=False)
    return azurite_https


def _uri(path: str) -> str:
    return f"abfss://{CONTAINER}@{ACCOUNT}.dfs.core.windows.net/{path}/{uuid.uuid4().hex}"


def _token_options(server: AzuriteProcess, token: str) -> dict[str, Any]:
    return {"spark.indextables.azure.endpoint": server.endpoint, "spark.indextables.azure.bearerToken": token}


def _write_and_search(uri: str, tmp_path: Path, **options: Any) -> Any:
    """Create a table, commit one split, search it: what every read and write of a table does."""
    log = executor_lib.create_table(uri, SCHEMA, **options)
    rows = pa.table({"id": [1, 2, 3], "msg": ["alpha", "beta", "gamma"]})
    log.commit([write_and_upload(log.store, rows, mapping_for(SCHEMA, {}))])
    found = search_table(log.store, executor_lib.open_log(uri, **options).snapshot(), "msg:gamma", SplitCache(tmp_path))
    assert found.column("id").to_pylist() == [3]  # a string field: the whole value
    return log


def test_a_bearer_token_writes_commits_and_searches_a_table(https: AzuriteProcess, tmp_path: Path) -> None:
    uri = _uri("bearer")
    log = _write_and_search(uri, tmp_path / "cache", **_token_options(https, oauth_token()))
    assert log.latest_version() == 1
    # the same blobs through the account key: the token reached the same account and container
    by_key = {"spark.indextables.azure.endpoint": https.endpoint, "spark.indextables.azure.accountKey": ACCOUNT_KEY}
    assert executor_lib.open_log(uri, **by_key).snapshot().num_records == 3
    # and the token is used, not skipped: without any credential this server refuses the read
    # (with azure-identity installed no credential means DefaultAzureCredential, not anonymous)
    if importlib.util.find_spec("azure.identity") is not None:
        return
    anonymous = open_store(uri, **{"spark.indextables.azure.endpoint": https.endpoint, "max_attempts": 1})
    with pytest.raises(StorageError, match=r"\(AuthorizationFailure\); check the settings: no credentials were given"):
        anonymous.read("_transaction_log/00000000000000000000.json")


def test_a_bearer_token_wins_over_an_account_key_and_the_environment(
    https: AzuriteProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """IndexTables4Spark's order: connectionString, then the bearer token, then the account key; and
    settings before the environment. An expired token beside a good key (or a node's environment
    with a good connection string and key) is refused, so the token was the one sent."""
    from harness.azurite import connection_string

    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", connection_string(https.endpoint))
    monkeypatch.setenv("AZURE_STORAGE_KEY", ACCOUNT_KEY)
    expired = _token_options(https, oauth_token(lifetime_s=-600))
    for options in (expired, {**expired, "spark.indextables.azure.accountKey": ACCOUNT_KEY}):
        with pytest.raises(StorageError, match=r"check the bearer token \(spark\.indextables\.azure\.bearerToken\)"):
            open_store(_uri("order"), **options, max_attempts=1).put_if_absent("k", b"1")
    # the environment alone still works (a cluster's nodes get their account that way)
    from_env = open_store(_uri("order"))
    from_env.put_if_absent("k", b"1")
    assert from_env.read("k") == b"1"


@pytest.mark.parametrize(
    "token",
    [
        oauth_token(lifetime_s=-600),  # expired
        oauth_token(audience="https://management.azure.com"),  # for another service
        oauth_token(issuer="https://evil.example.com/tenant/"),  # not an Azure AD issuer
        "not-a-jwt-but-long-enough-to-look-like-one-0123456789",
    ],
    ids=["expired", "wrong-audience", "wrong-issuer", "not-a-jwt"],
)
def test_a_refused_token_is_one_clear_error_naming_account_and_container_never_the_token(
    https: AzuriteProcess, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    uri = _uri("refused")
    store = open_store(uri, **_token_options(https, token))
    calls = (
        lambda: store.read("k"),
        lambda: store.put_if_absent("k", b"1"),
        lambda: list(store.list("")),
        lambda: executor_lib.create_table(uri, SCHEMA, **_token_options(https, token)),
    )
    for call in calls:
        start = time.monotonic()
        with pytest.raises(StorageError) as err:
            call()
        assert time.monotonic() - start < 5, "a refused token is not retried"
        text = str(err.value)
        assert not err.value.retryable and not isinstance(err.value, ObjectNotFoundError)
        assert f"storage account {ACCOUNT!r} refused the credentials for container {CONTAINER!r}" in text
        assert "(AuthenticationFailed); check the bearer token (spark.indextables.azure.bearerToken)" in text
        chain: list[BaseException] = [err.value]
        while chain[-1].__cause__ is not None:
            chain.append(chain[-1].__cause__)  # type: ignore[arg-type]
        for e in chain:
            assert token not in str(e) and token not in repr(e)
    for text in (repr(store), repr(store._options), *(r.getMessage() for r in caplog.records)):  # type: ignore[attr-defined]
        assert token not in text


class CountingCredential:
    """An azure-core TokenCredential: what azure-identity's credentials are to the SDK (``get_token``
    for a scope). Its tokens live ``lifetime_s`` seconds; it records every request for one."""

    def __init__(self, lifetime_s: float) -> None:
        self.lifetime_s = lifetime_s
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        self.scopes.append(scopes)
        return AccessToken(oauth_token(self.lifetime_s), int(time.time() + self.lifetime_s))


def test_a_credential_object_gets_tokens_for_storage_and_is_asked_again_near_expiry(
    https: AzuriteProcess, tmp_path: Path
) -> None:
    """A credential (``azure_credential=``, e.g. ``azure.identity.ManagedIdentityCredential()``) is
    asked for a token for Azure Storage once while it lives, and again when it nears expiry (the
    SDK renews tokens within 5 minutes of it)."""
    lasting = CountingCredential(lifetime_s=3600)
    options = {"spark.indextables.azure.endpoint": https.endpoint, "azure_credential": lasting}
    store = open_store(_uri("credential"), **options)
    for i in range(5):
        store.put(f"k{i}", b"v")
    assert [o.key for o in store.list("")] == [f"k{i}" for i in range(5)]
    assert lasting.scopes == [("https://storage.azure.com/.default",)]

    short = CountingCredential(lifetime_s=120)  # inside the SDK's renewal window from the start
    store = open_store(_uri("credential"), **{**options, "azure_credential": short})
    for i in range(3):
        store.put(f"k{i}", b"v")
    assert len(short.scopes) == 3

    _write_and_search(_uri("credential-table"), tmp_path / "cache", **options)
    with pytest.raises(ConfigError, match=r"azure_credential must be an azure-core TokenCredential .* got a str"):
        open_store(_uri("credential"), **{**options, "azure_credential": "a-sas-or-a-key?"}).read("k")


def test_a_token_over_plain_http_is_a_config_error_before_any_request(
    azurite_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK refuses to send a token over HTTP and retries that refusal as a connection error;
    here it is one ConfigError at once, naming the setting and the endpoint."""
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    options = {
        "spark.indextables.azure.endpoint": azurite_server.endpoint,
        "spark.indextables.azure.bearerToken": "t0k",
    }
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"bearerToken\) is sent over HTTPS only, .* is http://127\.0\.0\.1:\d+/"):
        open_store(_uri("http"), **options).read("k")
    with pytest.raises(ConfigError, match="HTTPS only"):
        open_store(_uri("http"), **{**options, "azure_credential": CountingCredential(60)}).read("k")
    assert time.monotonic() - start < 2


def test_an_untrusted_certificate_is_named_and_not_retried(
    azurite_https: AzuriteProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Certificates are always verified: without the test's CA bundle the self-signed certificate
    is refused, and the error says so (not "cannot reach"), at once, for a commit too."""
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    store = open_store(_uri("tls"), **_token_options(azurite_https, oauth_token()))
    for call in (lambda: store.read("k"), lambda: store.put_if_absent("k", b"1")):
        start = time.monotonic()
        with pytest.raises(StorageError) as err:
            call()
        assert time.monotonic() - start < 5
        assert f"the TLS certificate of {azurite_https.endpoint} is not trusted" in str(err.value)
        assert "REQUESTS_CA_BUNDLE" in str(err.value) and not err.value.retryable
