"""Amazon S3 (and S3-compatible: MinIO, moto) backend. The only module that imports boto3.

put-if-absent is a single ``PutObject`` with ``IfNoneMatch='*'``: S3 answers 412
PreconditionFailed when the key exists (-> ObjectAlreadyExistsError) and 409
ConditionalRequestConflict when a concurrent conditional write to the same key is in
flight (-> AmbiguousWriteError). Multipart uploads and CopyObject are never used for
conditional writes (their conditions are not honoured everywhere, see PROTOCOL.md).
"""

from __future__ import annotations

import ipaddress
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import boto3
import botocore.config
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from executor_lib.storage.base import ObjectInfo, ObjectStore, scrub_exception, wants_bytes
from indextables_contract.errors import (
    AmbiguousWriteError,
    ConfigError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    StorageError,
)
from indextables_contract.values import as_bool


@dataclass(frozen=True)
class S3Options:
    """Connection settings. Secrets are excluded from repr so they never reach a log."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    path_style: bool = False
    max_attempts: int = 5
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    multipart_threshold: int = 64 * 1024 * 1024
    multipart_chunksize: int = 16 * 1024 * 1024


# Error codes that no retry can fix.
_PERMANENT_ERRORS = frozenset(
    {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidBucketName", "AllAccessDisabled"}
)


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> ``("bucket", "some/prefix")``."""
    rest = uri.split("://", 1)[1] if "://" in uri else uri
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise ConfigError(f"invalid S3 URI {uri!r}: no bucket name")
    return bucket, prefix.strip("/")


def _addressing_style(o: S3Options) -> str:
    """``path`` when asked for (the option, or ``INDEXTABLES_S3_PATH_STYLE=true`` on the node),
    or when the endpoint (the option, else botocore's ``AWS_ENDPOINT_URL_S3``/``AWS_ENDPOINT_URL``)
    is an IP address or localhost, where virtual-hosted bucket names cannot resolve (moto,
    MinIO); otherwise botocore's ``auto``."""
    if o.path_style or as_bool(os.environ.get("INDEXTABLES_S3_PATH_STYLE", "")):
        return "path"
    endpoint = o.endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or ""
    host = (urlparse(endpoint).hostname or "") if endpoint else ""
    if host == "localhost" or _is_ip(host):
        return "path"
    return "auto"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _error_code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def _http_status(e: ClientError) -> int:
    return int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


_SESSION_LOCK = threading.Lock()
_SESSION: tuple[int, Any] | None = None  # (pid, session): a forked child makes its own


def shared_session() -> Any:
    """This process's boto3 session, made once (call with ``_SESSION_LOCK`` held).

    A new session loads botocore's service models and builds the client class again: 70-250 ms a
    store, paid by every query on the driver and by every read task if it were not shared (most of a
    warm S3 query's extra half second, when it was not). Clients made from one session share those but not
    their event hooks, connection pools or credentials.
    """
    global _SESSION
    pid = os.getpid()
    if _SESSION is None or _SESSION[0] != pid:
        _SESSION = (pid, boto3.session.Session())
    return _SESSION[1]


_SHARED_CLIENTS: dict[tuple[int, S3Options], Any] = {}


def shared_client_for(options: S3Options) -> Any:
    """One client per process and connection settings, for the stores of queries
    (``open_store(..., shared_client=True)``): a repeated query reuses its open connections instead
    of connecting again (on S3 a TLS handshake). Event hooks registered on it reach every such
    store, so fault injection and tests use stores with clients of their own."""
    key = (os.getpid(), options)
    client = _SHARED_CLIENTS.get(key)
    if client is None:
        client = S3Store._make_client(options)
        with _SESSION_LOCK:
            client = _SHARED_CLIENTS.setdefault(key, client)
    return client


class S3Store(ObjectStore):
    """A bucket prefix on S3."""

    def __init__(
        self, uri: str, options: S3Options | None = None, client: Any | None = None, shared_client: bool = False
    ) -> None:
        """``client``: the boto3 client to use; else one is made at the first request: the process's
        client for these options with ``shared_client`` (``shared_client_for``: its connections stay
        open between queries), otherwise a client of this store's own."""
        self._bucket, self._prefix = parse_s3_uri(uri)
        self._options = options or S3Options()
        self._client = client
        self._shared_client = shared_client

    @property
    def client(self) -> Any:
        """The boto3 client, made at first use (a read task that finds its splits cached makes none)."""
        if self._client is None:
            self._client = shared_client_for(self._options) if self._shared_client else self._make_client(self._options)
        return self._client

    @staticmethod
    def _make_client(o: S3Options) -> Any:
        """A client of its own (event hooks registered on it stay on it), made from the process's
        shared boto3 session: 4 ms instead of 70-250 ms for a new session's (see ``shared_session``)."""
        config = botocore.config.Config(
            retries={"mode": "standard", "max_attempts": o.max_attempts},
            s3={"addressing_style": _addressing_style(o)},
            connect_timeout=o.connect_timeout,
            read_timeout=o.read_timeout,
        )
        with _SESSION_LOCK:  # a boto3 session is not thread-safe; its clients are
            return shared_session().client(
                "s3",
                endpoint_url=o.endpoint_url,
                region_name=o.region,
                aws_access_key_id=o.access_key_id,
                aws_secret_access_key=o.secret_access_key,
                aws_session_token=o.session_token,
                config=config,
            )

    @property
    def cache_identity(self) -> str:
        """The bucket prefix and the endpoint serving it (one URI on two endpoints is two tables)."""
        return f"{self.root_uri} @ {self._options.endpoint_url or 'aws'} as {self._options.access_key_id or ''}"

    @property
    def root_uri(self) -> str:
        return f"s3://{self._bucket}/{self._prefix}" if self._prefix else f"s3://{self._bucket}"

    def _key(self, key: str) -> str:
        key = self.key_of(key)
        return f"{self._prefix}/{key}" if self._prefix else key

    def _rel(self, full_key: str) -> str:
        return full_key[len(self._prefix) + 1 :] if self._prefix else full_key

    def _cause(self, e: Exception) -> Exception:
        """``e`` (and its chain) with this store's credentials redacted, to raise the contract's error from."""
        o = self._options
        scrub_exception(e, [v for v in (o.access_key_id, o.secret_access_key, o.session_token) if v])
        return e

    def _fail(self, key: str, op: str, e: Exception) -> StorageError:
        uri = self.uri_of(key)
        if isinstance(e, ClientError):
            code, status = _error_code(e), _http_status(e)
            if code == "NoSuchBucket":
                return StorageError(f"{uri}: bucket {self._bucket!r} does not exist", uri, retryable=False)
            if code in _PERMANENT_ERRORS or status == 403:
                return StorageError(f"{uri}: {op} failed: {code or status}", uri, retryable=False)
            if code in ("NoSuchKey", "404", "NotFound") or (status == 404 and not code):
                return ObjectNotFoundError(f"{uri}: no such object", uri)
            if status == 404:  # another 404 is no missing object: versitygw's XAdminUserNotFound (a wrong key)
                return StorageError(f"{uri}: {op} failed: {code}", uri, retryable=False)
            if code in ("PreconditionFailed", "412") or status == 412:
                return ObjectAlreadyExistsError(f"{uri}: already exists", uri)
            if code == "ConditionalRequestConflict" or (status == 409 and not code):
                return AmbiguousWriteError(f"{uri}: {op} conflicted with a concurrent write", uri)
            if status == 409:  # no race: versitygw's ObjectParentIsFile/ExistingObjectIsDirectory (a file/dir clash)
                return StorageError(f"{uri}: {op} failed: {code}", uri, retryable=code == "OperationAborted")
            return StorageError(f"{uri}: {op} failed: {code or status}", uri)
        return StorageError(f"{uri}: {op} failed: {type(e).__name__}", uri)

    def read(self, key: str) -> bytes:
        try:
            resp = self.client.get_object(Bucket=self._bucket, Key=self._key(key))
            return bytes(resp["Body"].read())
        except (ClientError, BotoCoreError) as e:
            raise self._fail(key, "read", e) from self._cause(e)

    def read_range(self, key: str, start: int, length: int) -> bytes:
        if not wants_bytes(start, length):
            return b""
        try:
            resp = self.client.get_object(
                Bucket=self._bucket, Key=self._key(key), Range=f"bytes={start}-{start + length - 1}"
            )
            return bytes(resp["Body"].read())
        except ClientError as e:
            if _error_code(e) == "InvalidRange":
                return b""
            raise self._fail(key, "ranged read", e) from self._cause(e)
        except BotoCoreError as e:
            raise self._fail(key, "ranged read", e) from self._cause(e)

    def put(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self._bucket, Key=self._key(key), Body=data)
        except (ClientError, BotoCoreError) as e:
            raise self._fail(key, "write", e) from self._cause(e)

    def put_file(self, key: str, local_path: str) -> None:
        """Upload a file; above ``multipart_threshold`` bytes as a multipart upload (never used for
        conditional writes: splits have unique names and need none)."""
        config = self._transfer_config()
        try:
            self.client.upload_file(local_path, self._bucket, self._key(key), Config=config)
        except (ClientError, BotoCoreError) as e:
            raise self._fail(key, "upload", e) from self._cause(e)
        except boto3.exceptions.S3UploadFailedError as e:
            raise StorageError(
                f"{self.uri_of(key)}: upload failed: {type(e).__name__}", self.uri_of(key)
            ) from self._cause(e)

    def _transfer_config(self) -> Any:
        """Whole-file transfers in ``multipart_chunksize`` parts above ``multipart_threshold`` bytes."""
        from boto3.s3.transfer import TransferConfig

        return TransferConfig(
            multipart_threshold=self._options.multipart_threshold, multipart_chunksize=self._options.multipart_chunksize
        )

    def get_file(self, key: str, local_path: str) -> int:
        """Download in ``multipart_chunksize`` ranges (bounded memory), above ``multipart_threshold``
        bytes several at once."""
        config = self._transfer_config()
        try:
            self.client.download_file(self._bucket, self._key(key), local_path, Config=config)
        except (ClientError, BotoCoreError) as e:
            raise self._fail(key, "read", e) from self._cause(e)
        except boto3.exceptions.Boto3Error as e:  # s3transfer's RetriesExceededError, S3TransferFailedError
            raise StorageError(
                f"{self.uri_of(key)}: download failed: {type(e).__name__}", self.uri_of(key)
            ) from self._cause(e)
        return os.path.getsize(local_path)

    def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        kwargs: dict[str, Any] = {
            "Bucket": self._bucket,
            "Key": self._key(key),
            "Body": data,
            "IfNoneMatch": "*",
        }
        if metadata:
            kwargs["Metadata"] = metadata
        try:
            self.client.put_object(**kwargs)
        except ClientError as e:
            raise self._fail(key, "conditional write", e) from self._cause(e)
        except BotoCoreError as e:
            uri = self.uri_of(key)
            if isinstance(e, (BotoConnectionError, HTTPClientError)):
                raise AmbiguousWriteError(
                    f"{uri}: conditional write outcome unknown ({type(e).__name__})", uri
                ) from self._cause(e)
            raise StorageError(
                f"{uri}: conditional write failed: {type(e).__name__}", uri, retryable=False
            ) from self._cause(e)

    def list(self, prefix: str, start_after: str | None = None, recursive: bool = True) -> Iterator[ObjectInfo]:
        kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": self._key(prefix)}
        if start_after:
            kwargs["StartAfter"] = self._key(start_after)
        if not recursive:
            kwargs["Delimiter"] = "/"
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(**kwargs):
                items = [
                    ObjectInfo(self._rel(o["Key"]), int(o["Size"]), int(o["LastModified"].timestamp() * 1000))
                    for o in page.get("Contents", [])
                ]
                items += [ObjectInfo(self._rel(p["Prefix"]), is_dir=True) for p in page.get("CommonPrefixes", [])]
                items.sort(key=lambda o: o.key)
                yield from items
        except (ClientError, BotoCoreError) as e:
            raise self._fail(prefix, "listing", e) from self._cause(e)

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self._bucket, Key=self._key(key))
        except (ClientError, BotoCoreError) as e:
            err = self._fail(key, "delete", e)
            if not isinstance(err, ObjectNotFoundError):
                raise err from self._cause(e)

    def head(self, key: str) -> ObjectInfo:
        try:
            resp = self.client.head_object(Bucket=self._bucket, Key=self._key(key))
        except (ClientError, BotoCoreError) as e:
            raise self._fail(key, "head", e) from self._cause(e)
        return ObjectInfo(key, int(resp["ContentLength"]), int(resp["LastModified"].timestamp() * 1000))
