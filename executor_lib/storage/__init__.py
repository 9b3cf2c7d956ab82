"""Object storage: one small interface (``ObjectStore``) over the local filesystem and S3.

``open_store(uri, **options)`` picks the backend from the URI scheme. Options use
Python names (``endpoint_url``, ``region``, ``access_key_id``, ``secret_access_key``,
``session_token``, ``path_style``) or the IndexTables4Spark option names
(``spark.indextables.s3.endpoint``, ``spark.indextables.aws.accessKey``, ...).
"""

from __future__ import annotations

from typing import Any

from executor_lib.storage.base import ObjectInfo, ObjectStore, canonical_uri, redact_uri
from executor_lib.storage.local import LocalStore
from indextables_contract.errors import ConfigError
from indextables_contract.values import as_bool

__all__ = ["LocalStore", "ObjectInfo", "ObjectStore", "normalize_uri", "open_store"]

# IndexTables4Spark option names -> our S3Options field names.
_S3_OPTION_ALIASES = {
    "spark.indextables.s3.endpoint": "endpoint_url",
    "spark.indextables.aws.region": "region",
    "spark.indextables.aws.accessKey": "access_key_id",
    "spark.indextables.aws.secretKey": "secret_access_key",
    "spark.indextables.aws.sessionToken": "session_token",
    "spark.indextables.s3.pathStyleAccess": "path_style",
    "endpoint": "endpoint_url",
    "aws_access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "aws_session_token": "session_token",
    "region_name": "region",
}
_S3_FIELDS = {
    "multipart_threshold",
    "multipart_chunksize",
    "endpoint_url",
    "region",
    "access_key_id",
    "secret_access_key",
    "session_token",
    "path_style",
    "max_attempts",
    "connect_timeout",
    "read_timeout",
}
# Every name a storage option may be given by (the fields and their IndexTables4Spark/boto3 aliases).
STORAGE_OPTION_NAMES = frozenset(_S3_FIELDS | set(_S3_OPTION_ALIASES))


def normalize_uri(uri: str) -> str:
    """Strip trailing slashes and map ``s3a://``/``s3n://`` to ``s3://``."""
    return canonical_uri(str(uri))


def _s3_options(options: dict[str, Any]) -> Any:
    from executor_lib.storage.s3 import S3Options

    values: dict[str, Any] = {}
    for name, value in options.items():
        if name.startswith("spark.indextables.") and name not in _S3_OPTION_ALIASES:
            continue  # an engine option, not a storage one
        field = _S3_OPTION_ALIASES.get(name, name)
        if field not in _S3_FIELDS:
            raise ConfigError(f"unknown storage option {name!r} (known: {sorted(_S3_FIELDS)})")
        try:
            values[field] = _convert(field, value)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"storage option {name}={value!r}: {e}") from None
    return S3Options(**values)


def _convert(field: str, value: Any) -> Any:
    if field == "path_style":
        parsed = as_bool(value)
        if parsed is None:
            raise ValueError("expected true or false")
        return parsed
    if field in ("max_attempts", "multipart_threshold", "multipart_chunksize"):
        number = int(value)
        if number < 1:
            raise ValueError("must be at least 1")
        if field == "multipart_chunksize" and number < 5 * 1024 * 1024:
            raise ValueError("S3 parts must be at least 5 MiB")
        return number
    if field in ("connect_timeout", "read_timeout"):
        seconds = float(value)
        if seconds <= 0:
            raise ValueError("must be positive")
        return seconds
    return value


def open_store(uri: str, **options: Any) -> ObjectStore:
    """The store rooted at ``uri`` (a local path, ``file://...`` or ``s3://bucket/prefix``).

    ``shared_client``: an S3 store uses the process's client for its options (what queries use:
    connections stay open between them); otherwise a client of its own (hooks registered on it,
    such as fault injection, stay on it)."""
    shared_client = bool(options.pop("shared_client", False))
    uri = normalize_uri(uri)
    if redact_uri(uri) != uri:
        raise ConfigError(
            f"{redact_uri(uri)}: credentials in a URI are not accepted (they would reach logs and errors); "
            "give them as options (access_key_id/secret_access_key or spark.indextables.aws.*)"
        )
    if uri.startswith("s3://"):
        from executor_lib.storage.s3 import S3Store

        return S3Store(uri, _s3_options(options), shared_client=shared_client)
    if "://" in uri and not uri.startswith("file://"):
        raise ConfigError(f"unsupported storage scheme in {redact_uri(uri)!r} (supported: local paths, file://, s3://)")
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    return LocalStore(path)
