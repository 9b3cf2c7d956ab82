"""Azure Blob Storage and ADLS Gen2 backend. The only module that imports ``azure.*`` (lazily) with
``azure_config``, its options and credentials (``azure.identity``, lazily).

URIs are IndexTables4Spark's: ``abfss://container@account.dfs.core.windows.net/path`` (and
``abfs://``), ``wasbs://container@account.blob.core.windows.net/path`` (and ``wasb://``),
``azure://container/path``, and ``abfss://container/path``, whose account comes from the settings
(``spark.indextables.azure.accountName``, ``AZURE_STORAGE_ACCOUNT_NAME`` or ``~/.azure/credentials``).
Every request goes to the Blob endpoint (ADLS Gen2 accounts serve it too).

put-if-absent is one Put Blob with ``If-None-Match: *``: Azure answers 409 ``BlobAlreadyExists``
(or 412 ``ConditionNotMet``) when the blob exists (-> ObjectAlreadyExistsError, as S3's 412). A
request whose answer was lost (``ServiceResponseError``: the blob may have landed) is an
AmbiguousWriteError, as on S3. Large files are uploaded as staged blocks committed in one Put
Block List (atomic: readers see the old blob or the new one).

Credentials, first found wins, in IndexTables4Spark's order (explicit settings before the
environment): ``connectionString``; a credential object (``azure_credential``: any azure-core
``TokenCredential``, e.g. ``azure.identity.ManagedIdentityCredential()``; Python API only);
``bearerToken`` (an OAuth access token for ``https://storage.azure.com``); a service principal
(``tenantId``, ``clientId``, ``clientSecret``: needs ``azure-identity``); ``accountKey``; a SAS as the
query of ``endpoint``; the environment (``AZURE_STORAGE_CONNECTION_STRING``, ``AZURE_STORAGE_KEY``);
``~/.azure/credentials`` (the JVM's file: ``storage_account``, ``account_key``, ``tenant_id``,
``client_id``, ``client_secret``); ``DefaultAzureCredential`` when ``azure-identity`` is installed
(managed identity, ``AZURE_CLIENT_ID`` ...); else anonymous (public containers). Tokens go over
HTTPS only (an ``http://`` endpoint with one is a ConfigError); the server's certificate is always
verified, against the CA bundle of ``REQUESTS_CA_BUNDLE`` when set (a private CA, an emulator's
self-signed certificate), else certifi's. Secrets never reach a message, a ``repr`` or a log.

Hierarchical namespaces (ADLS Gen2): every operation is a Blob API call, which such accounts
serve on their ``blob`` endpoint; nothing here renames, and listings skip the directory entries
(``hdi_isfolder``) that ADLS keeps for each path prefix, so a table reads and commits the same on
flat and hierarchical accounts (PROTOCOL.md §2).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from executor_lib.storage.azure_config import (  # noqa: F401  (AzureLocation, azure_secrets: re-exported)
    IDENTITY_HINT,
    AzureLocation,
    AzureOptions,
    account_name,
    account_of_endpoint,
    azure_secrets,
    credentials_file,
    explicit_credentials,
    parse_azure_uri,
    resolve_credential,
)
from executor_lib.storage.base import ObjectInfo, ObjectStore, scrub_exception, wants_bytes
from indextables_contract import settings as S
from indextables_contract.errors import (
    AmbiguousWriteError,
    ConfigError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    StorageError,
)

INSTALL_HINT = (
    "Azure storage needs azure-storage-blob: pip install azure-storage-blob (the project's azure extra; "
    "from its checkout: pip install -e '.[azure]')"
)


def _blob() -> Any:
    """``azure.storage.blob``, or a ConfigError naming the extra to install."""
    try:
        import azure.storage.blob as blob
    except ImportError as e:
        raise ConfigError(INSTALL_HINT) from e
    return blob


# azure-core logs every request at INFO (URL and headers, secrets redacted); quiet unless asked for.
for _name in ("azure.core.pipeline.policies.http_logging_policy", "azure.identity"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.WARNING)


RequestHook = Callable[[Any, Callable[[], Any]], Any]


class _HookedTransport:
    """azure-core's requests transport, each request handed to the store's hook when it has one
    (``AzureStore.set_request_hook``: fault injection, counting), below the SDK's retries."""

    def __init__(self, store: AzureStore, inner: Any) -> None:
        self._store = store
        self._inner = inner

    def __enter__(self) -> _HookedTransport:
        self._inner.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self._inner.__exit__(*args)

    def open(self) -> None:
        self._inner.open()

    def close(self) -> None:
        self._inner.close()

    def sleep(self, duration: float) -> None:
        self._inner.sleep(duration)

    def send(self, request: Any, **kwargs: Any) -> Any:
        hook = self._store._request_hook
        if hook is None:
            return self._inner.send(request, **kwargs)
        return hook(request, lambda: self._inner.send(request, **kwargs))


def _retry_policy(blob: Any, o: AzureOptions) -> Any:
    """The SDK's exponential retry, except for an untrusted TLS certificate (no retry can fix it)."""

    class _Retry(blob.ExponentialRetry):
        def increment(self, settings: Any, request: Any, response: Any = None, error: Any = None) -> bool:
            if error is not None and _untrusted_certificate(error):
                return False
            return bool(super().increment(settings, request, response, error))

    attempts = max(0, o.max_attempts - 1)
    return _Retry(
        initial_backoff=0.2,
        increment_base=1.5,
        random_jitter_range=0.3,
        retry_total=attempts,
        retry_connect=attempts,
        retry_read=attempts,
        retry_status=attempts,
    )


def _make_service(loc: AzureLocation, o: AzureOptions, store: AzureStore | None = None) -> tuple[Any, str | None, str]:
    """A ``BlobServiceClient`` for the location, the account name it serves and where its credentials
    came from (its requests go through ``store``'s request hook, when given).

    Raises:
        ConfigError: no account, a connection string that does not parse, a token over ``http://``.
    """
    blob = _blob()
    kwargs: dict[str, Any] = {
        # every kind of failure (status, connection, lost answer) may take max_attempts tries in all;
        # waits of about 1.7, 2.5, 3.6, 5.3 s (the SDK's default starts at 15 s)
        "retry_policy": _retry_policy(blob, o),
        "connection_timeout": o.connect_timeout,
        "read_timeout": o.read_timeout,
        "max_single_put_size": o.multipart_threshold,
        "max_block_size": o.multipart_chunksize,
        "max_single_get_size": o.multipart_threshold,
        "max_chunk_get_size": o.multipart_chunksize,
    }
    if store is not None:
        from azure.core.pipeline.transport import RequestsTransport

        kwargs["transport"] = _HookedTransport(
            store, RequestsTransport(connection_timeout=o.connect_timeout, read_timeout=o.read_timeout)
        )
    connection_string = o.connection_string or (
        None if explicit_credentials(o) else os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
    )
    if connection_string:
        try:
            service = blob.BlobServiceClient.from_connection_string(connection_string, **kwargs)
        except ValueError:  # its text may quote the string
            raise ConfigError("spark.indextables.azure.connectionString: not a valid connection string") from None
        source = S.AZURE_CONNECTION_STRING.key if o.connection_string else "AZURE_STORAGE_CONNECTION_STRING"
        return service, service.account_name, source
    file = credentials_file()
    account = account_name(loc, o, file)
    if o.endpoint:
        url = o.endpoint.rstrip("/")
    elif account:
        url = f"https://{account}.blob.{loc.suffix}"
    else:
        raise ConfigError(
            f"Azure container {loc.container!r}: no storage account (set spark.indextables.azure.accountName, "
            "give abfss://container@account.dfs.core.windows.net/path, or spark.indextables.azure.connectionString)"
        )
    if account is None:
        account = account_of_endpoint(url)
    credential, source = resolve_credential(account, o, file)
    if hasattr(credential, "get_token") and not url.lower().startswith("https://"):
        shown = AzureOptions(endpoint=url).endpoint_shown
        raise ConfigError(
            f"Azure container {loc.container!r}: {source} is sent over HTTPS only, but "
            f"spark.indextables.azure.endpoint is {shown}: give its https:// URL"
        )
    return blob.BlobServiceClient(url, credential=credential, **kwargs), account, source


_SERVICES_LOCK = threading.Lock()
_SHARED_SERVICES: dict[tuple[int, AzureLocation, AzureOptions], tuple[Any, str | None, str]] = {}


def shared_service_for(loc: AzureLocation, options: AzureOptions) -> tuple[Any, str | None, str]:
    """One service client per process, account and settings, for the stores of queries
    (``open_store(..., shared_client=True)``): its connections stay open between queries."""
    key = (os.getpid(), AzureLocation(loc.container, loc.account, loc.suffix, ""), options)
    with _SERVICES_LOCK:
        found = _SHARED_SERVICES.get(key)
    if found is None:
        found = _make_service(loc, options)
        with _SERVICES_LOCK:
            found = _SHARED_SERVICES.setdefault(key, found)
    return found


# Error codes no retry can fix (403s, a missing container, a bad account).
_AUTH_CODES = frozenset(
    {
        "AuthenticationFailed",
        "AuthorizationFailure",
        "AuthorizationPermissionMismatch",
        "AuthorizationSourceIPMismatch",
        "AuthorizationProtocolMismatch",
        "AuthorizationResourceTypeMismatch",
        "AuthorizationServiceMismatch",
        "InsufficientAccountPermissions",
        "InvalidAuthenticationInfo",
        "NoAuthenticationInformation",
        "AccountIsDisabled",
    }
)
_THROTTLE_CODES = frozenset({"ServerBusy", "OperationTimedOut", "InternalError", "TooManyRequests"})


def _untrusted_certificate(e: BaseException) -> bool:
    """Whether ``e`` (or an exception it wraps) is a failed TLS certificate verification."""
    import ssl

    seen: set[int] = set()
    todo: list[BaseException | None] = [e]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(current):
            return True
        inner = getattr(current, "inner_exception", None)
        todo += [current.__cause__, current.__context__, inner if isinstance(inner, BaseException) else None]
        todo += [a for a in current.args if isinstance(a, BaseException)]
    return False


_Page = list[tuple[str, int, int, bool]]  # (name, size, modified_ms, is_dir) of one List Blobs page


def _http_date_ms(text: str | None) -> int:
    """``Thu, 26 Nov 2026 05:00:00 GMT`` in milliseconds since the epoch (0 if absent)."""
    if not text:
        return 0
    from email.utils import parsedate_to_datetime

    return int(parsedate_to_datetime(text).timestamp() * 1000)


class AzureStore(ObjectStore):
    """A path prefix in an Azure Blob Storage (or ADLS Gen2) container."""

    list_page_size = 5000  # names per List Blobs request (Azure's maximum)

    def __init__(self, uri: str, options: AzureOptions | None = None, shared_client: bool = False) -> None:
        """The client is made at the first request: the process's client for these settings with
        ``shared_client``, otherwise one of this store's own."""
        self._uri = uri.rstrip("/")
        self._loc = parse_azure_uri(self._uri)
        self._container = self._loc.container
        self._prefix = self._loc.prefix
        self._options = options or AzureOptions()
        self._shared_client = shared_client
        self._service: Any | None = None
        self._container_client: Any | None = None
        self._account: str | None = self._loc.account or self._options.account_name
        self._request_hook: RequestHook | None = None
        self._source = "the credentials"  # where they came from: set with the client
        _blob()  # the install hint at open, not at the first request

    def set_request_hook(self, hook: RequestHook | None) -> None:
        """Hand each HTTP request of this store to ``hook(request, send)`` (below the SDK's retries):
        it may call ``send()`` and return its response, return another, or raise an azure-core error.
        For fault injection (``harness.faults``). Stores opened with ``shared_client`` take none.

        Raises:
            ConfigError: the store shares the process's client (a hook would reach every such store).
        """
        if self._shared_client:
            raise ConfigError("a request hook needs a store with its own client (open_store without shared_client)")
        self._request_hook = hook

    def __repr__(self) -> str:
        return f"AzureStore({self._uri!r}, endpoint={self._options.endpoint_shown!r})"

    @property
    def container_client(self) -> Any:
        """The container's client, made at first use (a read task that finds its splits cached makes none)."""
        if self._container_client is None:
            if self._shared_client:
                service, account, source = shared_service_for(self._loc, self._options)
            else:
                service, account, source = _make_service(self._loc, self._options, self)
            self._account = account or self._account
            self._source = source
            self._service = service
            self._container_client = service.get_container_client(self._container)
        return self._container_client

    def _blob_client(self, key: str) -> Any:
        return self.container_client.get_blob_client(self._key(key))

    @property
    def root_uri(self) -> str:
        return self._uri

    @property
    def cache_identity(self) -> str:
        """The root URI and the endpoint serving it (one URI on two endpoints is two tables)."""
        return f"{self._uri} @ {self._endpoint_shown()} as {self._account or ''}"

    def _endpoint_shown(self) -> str:
        """The blob endpoint (no query: no SAS): the option, a connection string's, or the account's."""
        o = self._options
        if o.endpoint_shown:
            return o.endpoint_shown
        connection = o.connection_string or (
            None if explicit_credentials(o) else os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        )
        if connection:
            parts = dict(p.split("=", 1) for p in connection.split(";") if "=" in p)
            if parts.get("BlobEndpoint"):
                return AzureOptions(endpoint=parts["BlobEndpoint"]).endpoint_shown or "azure"
            suffix = parts.get("EndpointSuffix", "core.windows.net")
            return f"https://{parts.get('AccountName', '')}.blob.{suffix}"
        return f"https://{self._account or '(account)'}.blob.{self._loc.suffix}"

    def _key(self, key: str) -> str:
        key = self.key_of(key)
        return f"{self._prefix}/{key}" if self._prefix else key

    def _rel(self, full_key: str) -> str:
        return full_key[len(self._prefix) + 1 :] if self._prefix else full_key

    def _where(self) -> str:
        return f"container {self._container!r} of storage account {self._account or '(unknown)'!r}"

    def _fail(self, key: str, op: str, e: Exception, conditional: bool = False) -> StorageError:
        """The contract's error for an azure-core exception ``e`` (never its text: it may quote a request)."""
        from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

        uri = self.uri_of(key)
        if isinstance(e, HttpResponseError) and e.response is not None:
            status = int(e.status_code or 0)
            headers = getattr(e.response, "headers", None) or {}
            raw = getattr(e, "error_code", None) or headers.get("x-ms-error-code") or status
            code = str(getattr(raw, "value", raw))  # the SDK's StorageErrorCode is an enum
            if code == "ContainerNotFound":
                return StorageError(f"{uri}: {op} failed: {self._where()} does not exist", uri, retryable=False)
            if code in ("ResourceNotFound", "AccountNotFound") and status == 404 and not key:
                return StorageError(f"{uri}: {op} failed: {self._where()} not found", uri, retryable=False)
            if status == 404:
                return ObjectNotFoundError(f"{uri}: no such object", uri)
            if code in _AUTH_CODES or status in (401, 403):
                return StorageError(
                    f"{uri}: {op} failed: storage account {self._account or '(unknown)'!r} refused the credentials "
                    f"for container {self._container!r} ({code}); check {self._source}",
                    uri,
                    retryable=False,
                )
            if conditional and (status == 412 or code in ("BlobAlreadyExists", "ConditionNotMet")):
                return ObjectAlreadyExistsError(f"{uri}: already exists", uri)
            if status == 429 or code in _THROTTLE_CODES or status == 503:
                return StorageError(f"{uri}: {op} failed: throttled or timed out ({code})", uri)
            if status in (400, 405, 409, 411, 413, 416) or code in ("InvalidResourceName", "OutOfRangeInput"):
                return StorageError(f"{uri}: {op} failed: {code}", uri, retryable=False)
            return StorageError(f"{uri}: {op} failed: {code}", uri)
        if isinstance(e, ServiceResponseError):
            if conditional:
                return AmbiguousWriteError(f"{uri}: conditional write outcome unknown ({type(e).__name__})", uri)
            return StorageError(f"{uri}: {op} failed: no answer ({type(e).__name__})", uri)
        if isinstance(e, ServiceRequestError):
            endpoint = self._endpoint_shown()
            if _untrusted_certificate(e):  # the handshake failed: no request was sent
                return StorageError(
                    f"{uri}: {op} failed: the TLS certificate of {endpoint} is not trusted "
                    "(CERTIFICATE_VERIFY_FAILED); a private CA or an emulator's self-signed certificate is "
                    "trusted with REQUESTS_CA_BUNDLE=<PEM file>",
                    uri,
                    retryable=False,
                )
            if conditional:
                return AmbiguousWriteError(f"{uri}: conditional write outcome unknown ({type(e).__name__})", uri)
            return StorageError(f"{uri}: {op} failed: cannot reach {endpoint} ({type(e).__name__})", uri)
        return StorageError(f"{uri}: {op} failed: {type(e).__name__}", uri)

    def _cause(self, e: Exception) -> Exception | None:
        """``e`` (and its chain) with this store's credentials redacted (``scrub_exception``), as the cause
        of the contract's error; None when a SAS in the endpoint could be quoted by it."""
        scrub_exception(e, azure_secrets(self._options))
        return None if (self._options.endpoint and "?" in self._options.endpoint) else e

    def read(self, key: str) -> bytes:
        from azure.core.exceptions import AzureError

        try:
            return bytes(self._blob_client(key).download_blob().readall())
        except AzureError as e:
            raise self._fail(key, "read", e) from self._cause(e)

    def read_range(self, key: str, start: int, length: int) -> bytes:
        from azure.core.exceptions import AzureError, HttpResponseError

        if not wants_bytes(start, length):
            return b""
        try:
            return bytes(self._blob_client(key).download_blob(offset=start, length=length).readall())
        except HttpResponseError as e:
            if e.status_code == 416:  # InvalidRange: the start lies at or after the end
                return b""
            raise self._fail(key, "ranged read", e) from self._cause(e)
        except AzureError as e:
            raise self._fail(key, "ranged read", e) from self._cause(e)

    def put(self, key: str, data: bytes) -> None:
        from azure.core.exceptions import AzureError

        try:
            self._blob_client(key).upload_blob(data, overwrite=True)
        except AzureError as e:
            raise self._fail(key, "write", e) from self._cause(e)

    def put_file(self, key: str, local_path: str) -> None:
        """Upload a file; above ``multipart_threshold`` bytes as blocks of ``multipart_chunksize``
        (four in flight), committed in one Put Block List."""
        from azure.core.exceptions import AzureError

        size = os.path.getsize(local_path)
        try:
            with open(local_path, "rb") as f:
                self._blob_client(key).upload_blob(f, length=size, overwrite=True, max_concurrency=4)
        except AzureError as e:
            raise self._fail(key, "upload", e) from self._cause(e)

    def get_file(self, key: str, local_path: str) -> int:
        """Download in ``multipart_chunksize`` ranges (four at once) above ``multipart_threshold`` bytes."""
        from azure.core.exceptions import AzureError

        try:
            with open(local_path, "wb") as f:
                return int(self._blob_client(key).download_blob(max_concurrency=4).readinto(f))
        except AzureError as e:
            raise self._fail(key, "read", e) from self._cause(e)

    def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        from azure.core.exceptions import AzureError

        # Azure metadata names are C# identifiers: indextables-txn-id -> indextables_txn_id.
        meta = {k.replace("-", "_"): v for k, v in (metadata or {}).items()} or None
        try:
            self._blob_client(key).upload_blob(data, overwrite=False, metadata=meta)  # If-None-Match: *
        except AzureError as e:
            raise self._fail(key, "conditional write", e, conditional=True) from self._cause(e)

    def list(self, prefix: str, start_after: str | None = None, recursive: bool = True) -> Iterator[ObjectInfo]:
        """Blobs in name order. Azure has no StartAfter: ``start_after`` is applied to the listing
        (same result, the prefix's earlier names are listed too). Directory entries of hierarchical
        namespaces (``hdi_isfolder``) are not objects and are skipped.

        The List Blobs pages are requested through the SDK's pipeline (its credentials, retries and
        request hook) and parsed here with ElementTree: the SDK's own decoding of a page costs about
        0.25 ms a blob, which every commit paid for every version file of the log."""
        from azure.core.exceptions import AzureError

        full_prefix = self._key(prefix) if prefix else self._key_prefix()
        after = self._key(start_after) if start_after else None
        try:
            for page in self._list_pages(full_prefix, None if recursive else "/"):
                items = [
                    ObjectInfo(self._rel(name), size, modified, is_dir)
                    for name, size, modified, is_dir in page
                    if after is None or name > after
                ]
                items.sort(key=lambda o: o.key)
                yield from items
        except AzureError as e:
            raise self._fail(prefix, "listing", e) from self._cause(e)

    def _list_pages(self, full_prefix: str, delimiter: str | None) -> Iterator[_Page]:
        """``(name, size, modified_ms, is_dir)`` of each page of a List Blobs of ``full_prefix``."""
        from urllib.parse import quote, unquote
        from xml.etree import ElementTree

        from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
        from azure.core.rest import HttpRequest

        client = self.container_client
        base, _, sas = str(client.url).partition("?")
        query = ["restype=container", "comp=list", "include=metadata", f"maxresults={self.list_page_size}"]
        query.append("prefix=" + quote(full_prefix, safe=""))
        if delimiter:
            query.append("delimiter=" + quote(delimiter, safe=""))
        marker = ""
        while True:
            url = f"{base}?{'&'.join(query)}" + (f"&marker={quote(marker, safe='')}" if marker else "")
            request = HttpRequest("GET", url + (f"&{sas}" if sas else ""), headers={"x-ms-version": client.api_version})
            response = client._pipeline.run(request).http_response
            if response.status_code != 200:
                error = ResourceNotFoundError if response.status_code == 404 else HttpResponseError
                raise error(response=response)
            root = ElementTree.fromstring(response.body())
            page: _Page = []
            for node in root.iter():
                if node.tag not in ("Blob", "BlobPrefix"):
                    continue
                name_node = node.find("Name")
                if name_node is None or name_node.text is None:
                    continue
                name = unquote(name_node.text) if name_node.get("Encoded") == "true" else name_node.text
                if node.tag == "BlobPrefix":
                    page.append((name, 0, 0, True))
                    continue
                if node.findtext("Metadata/hdi_isfolder") == "true":
                    continue
                size = int(node.findtext("Properties/Content-Length") or 0)
                page.append((name, size, _http_date_ms(node.findtext("Properties/Last-Modified")), False))
            yield page
            marker = root.findtext("NextMarker") or ""
            if not marker:
                return

    def _key_prefix(self) -> str:
        return f"{self._prefix}/" if self._prefix else ""

    def delete(self, key: str) -> None:
        from azure.core.exceptions import AzureError

        try:
            self._blob_client(key).delete_blob()
        except AzureError as e:
            err = self._fail(key, "delete", e)
            if not isinstance(err, ObjectNotFoundError):
                raise self._fail(key, "delete", e) from self._cause(e)

    def head(self, key: str) -> ObjectInfo:
        from azure.core.exceptions import AzureError

        try:
            props = self._blob_client(key).get_blob_properties()
        except AzureError as e:
            raise self._fail(key, "head", e) from self._cause(e)
        if (props.metadata or {}).get("hdi_isfolder") == "true":  # a directory of a hierarchical namespace
            raise ObjectNotFoundError(f"{self.uri_of(key)}: no such object (a directory)", self.uri_of(key))
        modified = int(props.last_modified.timestamp() * 1000) if props.last_modified else 0
        return ObjectInfo(key, int(props.size), modified)
