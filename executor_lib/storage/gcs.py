"""Google Cloud Storage backend (``gs://bucket/prefix``). The only module that imports
``google.cloud.storage`` and ``google.auth`` (both lazily: the install hint at open, not at import).

put-if-absent is one upload with the generation precondition ``ifGenerationMatch=0`` ("create only if
no live object has this name"): GCS answers 412 PreconditionFailed when the object exists
(-> ObjectAlreadyExistsError) and applies the precondition atomically, so of two racing creates
exactly one wins. An upload whose answer was lost (a connection dropped after the request was sent,
a timeout, a 5xx: the object may have landed) is retried; a 412 after such an attempt may be the
store's own write and is an AmbiguousWriteError, as is a run of attempts that ends unanswered (the
transaction log reads the version back, as after S3's).

Every request goes through this module's retry loop (the client library's own retries are off):
``max_attempts`` tries in all for throttling (429), 408, 5xx and connection failures, waits of about
0.2, 0.3, 0.45 ... s; ``connect_timeout`` and ``read_timeout`` bound each request. Uploads above
``multipart_threshold`` bytes go as one resumable upload in ``multipart_chunksize`` parts (rounded
down to a multiple of 256 KiB, GCS's unit), finalized in one step: readers see the old object or
the new one. Downloads stream to the file (a split never passes through memory whole).

Endpoint: ``spark.indextables.gcs.endpoint`` (``gcs_endpoint``), else ``STORAGE_EMULATOR_HOST`` (an
emulator such as fake-gcs-server), else Google's. Credentials, first found wins:
``spark.indextables.gcs.accessToken`` (an OAuth2 access token); ``spark.indextables.gcs.credentialsFile``
(a service-account or other google-auth JSON file); none for an emulator (an ``http://`` endpoint, or
``STORAGE_EMULATOR_HOST``); else Application Default Credentials (``GOOGLE_APPLICATION_CREDENTIALS``,
gcloud's, the metadata server on Google Cloud). Credentials go over HTTPS only (a token or a file
with an ``http://`` endpoint is a ConfigError); none is ever part of a message or a ``repr``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from executor_lib.storage.base import ObjectInfo, ObjectStore, scrub_exception, wants_bytes
from indextables_contract import settings as S
from indextables_contract.errors import (
    AmbiguousWriteError,
    ConfigError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    StorageError,
)

T = TypeVar("T")

INSTALL_HINT = (
    "Google Cloud Storage needs google-cloud-storage: pip install google-cloud-storage (the project's gcs "
    "extra; from its checkout: pip install -e '.[gcs]')"
)
SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"
_CHUNK_UNIT = 256 * 1024  # resumable upload parts are multiples of 256 KiB
# https://cloud.google.com/storage/docs/buckets#naming: 3-63 characters (222 with dots), lower case
_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")


def _storage() -> Any:
    """``google.cloud.storage``, or a ConfigError naming the extra to install."""
    try:
        import google.cloud.storage as storage
    except ImportError as e:
        raise ConfigError(INSTALL_HINT) from e
    return storage


@dataclass(frozen=True)
class GcsOptions:
    """Connection settings. Secrets are excluded from repr so they never reach a log."""

    endpoint: str | None = None
    project_id: str | None = None
    credentials_file: str | None = None
    access_token: str | None = field(default=None, repr=False)
    max_attempts: int = 5
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    multipart_threshold: int = 64 * 1024 * 1024
    multipart_chunksize: int = 16 * 1024 * 1024

    @property
    def resolved_endpoint(self) -> str | None:
        """The JSON API endpoint: the option, else ``STORAGE_EMULATOR_HOST`` (``http://`` added to a bare
        ``host:port``), else None (Google's)."""
        endpoint = self.endpoint or os.environ.get("STORAGE_EMULATOR_HOST") or None
        if endpoint and "://" not in endpoint:
            endpoint = "http://" + endpoint
        return endpoint.rstrip("/") if endpoint else None


def parse_gcs_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/some/prefix`` -> ``("bucket", "some/prefix")``.

    Raises:
        ConfigError: not a ``gs://`` URI, no bucket, or a bucket name GCS cannot have.
    """
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() != "gs":
        raise ConfigError(f"not a Google Cloud Storage URI: {uri!r} (expected gs://bucket/path)")
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ConfigError(f"invalid GCS URI {uri!r}: no bucket name (expected gs://bucket/path)")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket or (len(bucket) > 63 and "." not in bucket):
        raise ConfigError(
            f"invalid GCS URI {uri!r}: {bucket!r} is not a bucket name (3-63 lower-case letters, digits, "
            "'-', '_' or '.', starting and ending with a letter or digit)"
        )
    return bucket, prefix.strip("/")


def _credentials(o: GcsOptions) -> tuple[Any, str | None, str]:
    """(google-auth credentials, their project or None, the setting they came from): see the module
    docstring for the order.

    Raises:
        ConfigError: a credential over ``http://``, an unreadable credentials file, none found.
    """
    from google.auth.credentials import AnonymousCredentials

    endpoint = o.resolved_endpoint
    plain_http = endpoint is not None and endpoint.lower().startswith("http://")
    if o.access_token or o.credentials_file:
        source = S.GCS_ACCESS_TOKEN.key if o.access_token else S.GCS_CREDENTIALS_FILE.key
        if plain_http:
            raise ConfigError(
                f"Google Cloud Storage: {source} is sent over HTTPS only, but the endpoint is {endpoint}: "
                "give its https:// URL (an emulator takes no credentials)"
            )
        if o.access_token:
            import google.oauth2.credentials

            return google.oauth2.credentials.Credentials(token=o.access_token), None, source
        return (*_from_file(str(o.credentials_file), source), source)
    if plain_http or (not o.endpoint and os.environ.get("STORAGE_EMULATOR_HOST")):
        return AnonymousCredentials(), None, "no credentials (an emulator)"
    import google.auth
    import google.auth.exceptions

    env_file = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if env_file:
        return (*_from_file(env_file, "GOOGLE_APPLICATION_CREDENTIALS"), "GOOGLE_APPLICATION_CREDENTIALS")
    try:
        credentials, project = google.auth.default(scopes=[SCOPE])
    except google.auth.exceptions.DefaultCredentialsError:
        raise ConfigError(
            "Google Cloud Storage: no credentials found: set spark.indextables.gcs.credentialsFile (a service "
            "account's JSON key file), spark.indextables.gcs.accessToken or GOOGLE_APPLICATION_CREDENTIALS, "
            "or run where Application Default Credentials are (gcloud auth application-default login, "
            "Google Cloud's metadata server)"
        ) from None
    return credentials, project, "Application Default Credentials"


def _from_file(path: str, source: str) -> tuple[Any, str | None]:
    """The credentials of a google-auth JSON file (never its content in a message)."""
    import google.auth
    import google.auth.exceptions

    if not os.path.isfile(path):
        raise ConfigError(f"Google Cloud Storage: {source}: no such file {path!r}")
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
        kind = info.get("type") if isinstance(info, dict) else None
        if kind == "service_account":
            from google.oauth2 import service_account

            sa = service_account.Credentials.from_service_account_info(info, scopes=[SCOPE])
            return sa, info.get("project_id")
        if kind == "authorized_user":  # gcloud auth application-default login
            import google.oauth2.credentials

            user = google.oauth2.credentials.Credentials.from_authorized_user_info(info, scopes=[SCOPE])
            return user, info.get("quota_project_id")
        if kind is None:
            raise ValueError("no type")
        with warnings.catch_warnings():  # other kinds (external_account ...): the user's own file, as gcloud reads it
            warnings.simplefilter("ignore", DeprecationWarning)
            credentials, project = google.auth.load_credentials_from_file(path, scopes=[SCOPE])
    except (google.auth.exceptions.DefaultCredentialsError, ValueError, OSError, TypeError, KeyError):
        raise ConfigError(
            f"Google Cloud Storage: {source}: {path!r} is not a credentials file google-auth reads "
            "(a service account's JSON key, an authorized user's or an external account's file)"
        ) from None
    return credentials, project


def _make_client(o: GcsOptions) -> tuple[Any, str]:
    """A ``google.cloud.storage.Client`` for these settings and where its credentials came from. Its
    HTTP session keeps up to 32 connections per host (a split's pieces are fetched in parallel)."""
    import requests.adapters
    from google.auth.transport.requests import AuthorizedSession

    storage = _storage()
    credentials, project, source = _credentials(o)
    session = AuthorizedSession(credentials)
    adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=32, max_retries=0)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    endpoint = o.resolved_endpoint
    client = storage.Client(
        project=o.project_id or project or os.environ.get("GOOGLE_CLOUD_PROJECT") or None,
        credentials=credentials,
        _http=session,
        client_options={"api_endpoint": endpoint} if endpoint else None,
    )
    return client, source


_CLIENTS_LOCK = threading.Lock()
_SHARED_CLIENTS: dict[tuple[int, GcsOptions], tuple[Any, str]] = {}


def shared_client_for(options: GcsOptions) -> tuple[Any, str]:
    """One client per process and settings, for the stores of queries (``open_store(...,
    shared_client=True)``): its connections stay open between queries."""
    key = (os.getpid(), options)
    with _CLIENTS_LOCK:
        found = _SHARED_CLIENTS.get(key)
    if found is None:
        found = _make_client(options)
        with _CLIENTS_LOCK:
            found = _SHARED_CLIENTS.setdefault(key, found)
    return found


_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})


class _Attempts:
    """What the retry loop saw: whether an attempt's outcome was unknown (the request may have been applied)."""

    def __init__(self) -> None:
        self.ambiguous = False


def _status(e: BaseException) -> int:
    """The HTTP status of a google-api-core error (0 for a transport failure)."""
    code = getattr(e, "code", None)
    return int(code) if isinstance(code, int) else 0


def _not_sent(e: BaseException) -> bool:
    """Whether a transport failure happened before the request was sent (no connection was made)."""
    import requests.exceptions

    if isinstance(e, requests.exceptions.ConnectTimeout):
        return True
    text = repr(e)
    return isinstance(e, requests.exceptions.ConnectionError) and (
        "NewConnectionError" in text or "Connection refused" in text or "NameResolutionError" in text
    )


def _is_transport(e: BaseException) -> bool:
    import google.auth.exceptions
    import requests.exceptions

    return isinstance(e, (requests.exceptions.RequestException, google.auth.exceptions.TransportError))


class GcsStore(ObjectStore):
    """A path prefix in a Google Cloud Storage bucket."""

    list_page_size = 1000  # names per objects.list request (GCS's maximum)

    def __init__(self, uri: str, options: GcsOptions | None = None, shared_client: bool = False) -> None:
        """The client is made at the first request: the process's client for these settings with
        ``shared_client``, otherwise one of this store's own."""
        self._bucket_name, self._prefix = parse_gcs_uri(uri)
        self._options = options or GcsOptions()
        self._shared_client = shared_client
        self._client: Any | None = None
        self._bucket_obj: Any | None = None
        self._source = "the credentials"  # where they came from: set with the client
        self._bucket_seen = False  # the bucket answered once: a later 404 is an object's
        _storage()  # the install hint at open, not at the first request
        o = self._options
        if o.credentials_file and not os.path.isfile(o.credentials_file):  # named before anything is written
            raise ConfigError(
                f"Google Cloud Storage: {S.GCS_CREDENTIALS_FILE.key}: no such file {o.credentials_file!r}"
            )

    def __repr__(self) -> str:
        return f"GcsStore({self.root_uri!r}, endpoint={self._options.resolved_endpoint!r})"

    @property
    def bucket(self) -> Any:
        """The bucket's handle (no request), made with the client at first use."""
        if self._bucket_obj is None:
            if self._shared_client:
                self._client, self._source = shared_client_for(self._options)
            else:
                self._client, self._source = _make_client(self._options)
            self._bucket_obj = self._client.bucket(self._bucket_name)
        return self._bucket_obj

    @property
    def root_uri(self) -> str:
        return f"gs://{self._bucket_name}/{self._prefix}" if self._prefix else f"gs://{self._bucket_name}"

    @property
    def cache_identity(self) -> str:
        """The bucket prefix and the endpoint serving it (one URI on two endpoints is two tables)."""
        return f"{self.root_uri} @ {self._options.resolved_endpoint or 'google'}"

    def _key(self, key: str) -> str:
        key = self.key_of(key)
        return f"{self._prefix}/{key}" if self._prefix else key

    def _rel(self, full_key: str) -> str:
        return full_key[len(self._prefix) + 1 :] if self._prefix else full_key

    def _blob(self, key: str) -> Any:
        return self.bucket.blob(self._key(key))

    @property
    def _timeout(self) -> tuple[float, float]:
        return (self._options.connect_timeout, self._options.read_timeout)

    def _secrets(self) -> list[str]:
        token = getattr(getattr(self._client, "_credentials", None), "token", None)
        return [v for v in (self._options.access_token, token) if isinstance(v, str) and v]

    def _cause(self, e: BaseException) -> BaseException:
        """``e`` (and its chain) with this store's credentials redacted, to raise the contract's error from."""
        scrub_exception(e, self._secrets())
        return e

    def _bucket_missing(self) -> bool:
        """Whether the bucket is known not to exist (asked once per store, after a 404)."""
        if self._bucket_seen:
            return False
        try:
            exists = bool(self.bucket.exists(timeout=self._timeout, retry=None))
        except Exception:  # no permission to read the bucket's metadata (objectAdmin), or no answer: not
            exists = True  # known missing, and not asked again
        self._bucket_seen = exists
        return not exists

    def _fail(self, key: str, op: str, e: BaseException, conditional: bool = False) -> StorageError:
        """The contract's error for a client failure ``e`` (never its text: it may quote a response)."""
        import google.auth.exceptions

        uri = self.uri_of(key)
        status = _status(e)
        if status == 404:
            if self._bucket_missing():
                return StorageError(f"{uri}: bucket {self._bucket_name!r} does not exist", uri, retryable=False)
            return ObjectNotFoundError(f"{uri}: no such object", uri)
        if isinstance(e, google.auth.exceptions.RefreshError) or status in (401, 403):
            return StorageError(
                f"{uri}: {op} failed: Google Cloud Storage refused the credentials for bucket "
                f"{self._bucket_name!r} ({status or type(e).__name__}); check {self._source}",
                uri,
                retryable=False,
            )
        if conditional and status == 412:
            return ObjectAlreadyExistsError(f"{uri}: already exists", uri)
        if status in _RETRY_STATUS:
            return StorageError(f"{uri}: {op} failed: throttled or unavailable ({status})", uri)
        if status:
            return StorageError(f"{uri}: {op} failed: {status} {type(e).__name__}", uri, retryable=False)
        if _is_transport(e):
            where = self._options.resolved_endpoint or "storage.googleapis.com"
            return StorageError(f"{uri}: {op} failed: no answer from {where} ({type(e).__name__})", uri)
        return StorageError(f"{uri}: {op} failed: {type(e).__name__}", uri)

    def _call(self, key: str, op: str, fn: Callable[[], T], conditional: bool = False) -> T:
        """``fn()``, tried up to ``max_attempts`` times while it fails transiently; the contract's error
        when it cannot succeed. A conditional write whose earlier attempt may have landed turns a 412 or
        a last failure into an AmbiguousWriteError."""
        from google.api_core.exceptions import GoogleAPICallError
        from google.auth.exceptions import GoogleAuthError

        try:
            from google.cloud.storage.exceptions import DataCorruption, InvalidResponse
        except ImportError:  # google-cloud-storage 2.x: google-resumable-media's
            from google.resumable_media.common import DataCorruption, InvalidResponse

        handled = (GoogleAPICallError, GoogleAuthError, InvalidResponse, DataCorruption, _requests_error())
        attempts = _Attempts()
        for attempt in range(1, self._options.max_attempts + 1):
            try:
                return fn()
            except handled as e:
                status = _status(e)
                if isinstance(e, InvalidResponse):  # resumable-media's: its response's status
                    status = int(getattr(e.response, "status_code", 0) or 0)
                    e.code = status  # read by _fail
                transport = _is_transport(e) or isinstance(e, DataCorruption)
                retry = (status in _RETRY_STATUS or transport) and attempt < self._options.max_attempts
                if conditional:
                    uri = self.uri_of(key)
                    if status == 412 and attempts.ambiguous:
                        raise AmbiguousWriteError(
                            f"{uri}: conditional write: exists after an attempt whose outcome was unknown "
                            "(maybe this write)",
                            uri,
                        ) from self._cause(e)
                    if (transport and not _not_sent(e)) or status in (408, 500, 502, 503, 504):
                        attempts.ambiguous = True
                    if not retry and attempts.ambiguous:
                        raise AmbiguousWriteError(
                            f"{uri}: conditional write outcome unknown ({status or type(e).__name__})", uri
                        ) from self._cause(e)
                if not retry:
                    raise self._fail(key, op, e, conditional) from self._cause(e)
                time.sleep(min(5.0, 0.2 * 1.5 ** (attempt - 1)) * random.uniform(0.7, 1.3))
        raise AssertionError("unreachable")  # pragma: no cover

    def read(self, key: str) -> bytes:
        blob = self._blob(key)
        data = self._call(
            key, "read", lambda: blob.download_as_bytes(raw_download=True, timeout=self._timeout, retry=None)
        )
        self._bucket_seen = True
        return bytes(data)

    def read_range(self, key: str, start: int, length: int) -> bytes:
        from google.api_core.exceptions import RequestRangeNotSatisfiable

        if not wants_bytes(start, length):
            return b""
        blob = self._blob(key)

        def ranged() -> bytes:
            try:
                return bytes(
                    blob.download_as_bytes(
                        start=start, end=start + length - 1, raw_download=True, timeout=self._timeout, retry=None
                    )
                )
            except RequestRangeNotSatisfiable:  # the start lies at or after the end
                return b""

        return self._call(key, "ranged read", ranged)

    def put(self, key: str, data: bytes) -> None:
        blob = self._upload_blob(key, len(data))
        self._call(key, "write", lambda: blob.upload_from_string(data, timeout=self._timeout, retry=None))

    def _upload_blob(self, key: str, size: int) -> Any:
        """The blob to upload ``size`` bytes to: in resumable ``multipart_chunksize`` parts above
        ``multipart_threshold`` bytes."""
        blob = self._blob(key)
        if size > self._options.multipart_threshold:
            blob.chunk_size = max(_CHUNK_UNIT, self._options.multipart_chunksize // _CHUNK_UNIT * _CHUNK_UNIT)
        return blob

    def put_file(self, key: str, local_path: str) -> None:
        """Upload a file; above ``multipart_threshold`` bytes as one resumable upload in parts."""
        blob = self._upload_blob(key, os.path.getsize(local_path))
        self._call(key, "upload", lambda: blob.upload_from_filename(local_path, timeout=self._timeout, retry=None))

    def get_file(self, key: str, local_path: str) -> int:
        """Stream ``key`` into ``local_path`` (its checksum verified); its size."""
        blob = self._blob(key)

        def download() -> None:
            with open(local_path, "wb") as f:
                blob.download_to_file(f, raw_download=True, timeout=self._timeout, retry=None)

        try:
            self._call(key, "read", download)
        except StorageError:
            with contextlib.suppress(OSError):  # no partial or empty file left behind
                os.remove(local_path)
            raise
        return os.path.getsize(local_path)

    def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        blob = self._blob(key)
        if metadata:
            blob.metadata = dict(metadata)
        self._call(
            key,
            "conditional write",
            lambda: blob.upload_from_string(data, if_generation_match=0, timeout=self._timeout, retry=None),
            conditional=True,
        )

    def list(self, prefix: str, start_after: str | None = None, recursive: bool = True) -> Iterator[ObjectInfo]:
        """Objects in name order, a page of ``list_page_size`` names per request (each retried alone).
        Folder placeholders (zero-byte objects named ``dir/``, as the console makes) are not objects."""
        full_prefix = self._key(prefix) if prefix else (f"{self._prefix}/" if self._prefix else "")
        after = self._key(start_after) if start_after else None
        token: str | None = None
        while True:

            def page(token: str | None = token) -> tuple[list[ObjectInfo], str | None]:
                client = self.bucket.client
                it = client.list_blobs(
                    self._bucket_name,
                    prefix=full_prefix,
                    delimiter=None if recursive else "/",
                    start_offset=after,
                    page_token=token,
                    page_size=self.list_page_size,
                    timeout=self._timeout,
                    retry=None,
                )
                one = next(it.pages)
                items = [
                    ObjectInfo(self._rel(b.name), int(b.size or 0), _ms(b.updated))
                    for b in one
                    if not b.name.endswith("/") and (after is None or b.name > after)
                ]
                items += [ObjectInfo(self._rel(p), is_dir=True) for p in one.prefixes if after is None or p > after]
                return sorted(items, key=lambda o: o.key), it.next_page_token

            items, token = self._call(prefix, "listing", page)
            self._bucket_seen = True
            yield from items
            if not token:
                return

    def delete(self, key: str) -> None:
        blob = self._blob(key)
        with contextlib.suppress(ObjectNotFoundError):  # a missing object (not a missing bucket)
            self._call(key, "delete", lambda: blob.delete(timeout=self._timeout, retry=None))

    def head(self, key: str) -> ObjectInfo:
        blob = self._blob(key)
        self._call(key, "head", lambda: blob.reload(projection="noAcl", timeout=self._timeout, retry=None))
        self._bucket_seen = True
        return ObjectInfo(key, int(blob.size or 0), _ms(blob.updated))


def _ms(when: Any) -> int:
    return int(when.timestamp() * 1000) if when is not None else 0


def _requests_error() -> type[BaseException]:
    import requests.exceptions

    return requests.exceptions.RequestException
