"""Object storage: one small interface (``ObjectStore``) over the local filesystem, S3, Azure and Google
Cloud Storage.

``open_store(uri, **options)`` picks the backend from the URI scheme. Options use
Python names (``endpoint_url``, ``region``, ``access_key_id``, ``secret_access_key``,
``session_token``, ``path_style``; ``azure_account_name``, ``azure_account_key``, ``azure_endpoint`` ...)
or the IndexTables4Spark option names (``spark.indextables.s3.endpoint``,
``spark.indextables.aws.accessKey``, ``spark.indextables.azure.accountKey``,
``spark.indextables.gcs.endpoint``, ...). A store takes the options of its kind and the shared ones
(timeouts, attempts, part sizes) and ignores the other kinds', so one session may hold settings for
S3, Azure and GCS.
"""

from __future__ import annotations

from typing import Any

from executor_lib.storage.base import _CONTROL, AZURE_SCHEMES, ObjectInfo, ObjectStore, canonical_uri, redact_uri
from executor_lib.storage.local import LocalStore
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError

__all__ = ["LocalStore", "ObjectInfo", "ObjectStore", "normalize_uri", "open_store"]

# IndexTables4Spark option names -> our S3Options field names.
_S3_OPTION_ALIASES = {
    S.S3_ENDPOINT.key: "endpoint_url",
    S.AWS_REGION.key: "region",
    S.AWS_ACCESS_KEY.key: "access_key_id",
    S.AWS_SECRET_KEY.key: "secret_access_key",
    S.AWS_SESSION_TOKEN.key: "session_token",
    S.S3_PATH_STYLE_ACCESS.key: "path_style",
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
# Options every backend with a network takes.
_SHARED_FIELDS = {"multipart_threshold", "multipart_chunksize", "max_attempts", "connect_timeout", "read_timeout"}
# IndexTables4Spark's Azure keys and our Python names -> AzureOptions field names.
_AZURE_KEYS = {
    S.AZURE_ACCOUNT_NAME.key: "account_name",
    S.AZURE_ACCOUNT_KEY.key: "account_key",
    S.AZURE_CONNECTION_STRING.key: "connection_string",
    S.AZURE_BEARER_TOKEN.key: "bearer_token",
    S.AZURE_TENANT_ID.key: "tenant_id",
    S.AZURE_CLIENT_ID.key: "client_id",
    S.AZURE_CLIENT_SECRET.key: "client_secret",
    S.AZURE_ENDPOINT.key: "endpoint",
}
_AZURE_OPTION_ALIASES = {
    **_AZURE_KEYS,
    **{f"azure_{v}": v for v in _AZURE_KEYS.values()},
    # an azure-core TokenCredential object (e.g. azure.identity's): from Python only, no Spark key
    "azure_credential": "credential",
}
# IndexTables' GCS keys and our Python names -> GcsOptions field names (IndexTables4Spark has no GCS keys).
_GCS_KEYS = {
    S.GCS_ENDPOINT.key: "endpoint",
    S.GCS_PROJECT_ID.key: "project_id",
    S.GCS_CREDENTIALS_FILE.key: "credentials_file",
    S.GCS_ACCESS_TOKEN.key: "access_token",
}
_GCS_OPTION_ALIASES = {**_GCS_KEYS, **{f"gcs_{v}": v for v in _GCS_KEYS.values()}}
# Fields whose values are credentials (never echoed) and those that are endpoints (no userinfo).
SECRET_FIELDS = frozenset(
    {"access_key_id", "secret_access_key", "session_token", "account_key", "connection_string", "bearer_token"}
    | {"client_secret", "access_token"}
)
_ENDPOINT_FIELDS = frozenset({"endpoint_url", "endpoint"})
_TEXT_FIELDS = SECRET_FIELDS | _ENDPOINT_FIELDS | {"account_name", "tenant_id", "client_id", "region"}
_TEXT_FIELDS |= {"project_id", "credentials_file"}
# Every name a storage option may be given by (the fields and their IndexTables4Spark/boto3 aliases).
STORAGE_OPTION_NAMES = frozenset(
    _S3_FIELDS | set(_S3_OPTION_ALIASES) | set(_AZURE_OPTION_ALIASES) | set(_GCS_OPTION_ALIASES)
)
# Those a Spark option may carry: all but the credential object, which only Python code can pass.
SPARK_STORAGE_OPTION_NAMES = STORAGE_OPTION_NAMES - {"azure_credential"}


def is_secret_option(name: str) -> bool:
    """Whether storage option ``name`` (any of its spellings) holds a credential, never to be printed."""
    field = {**_S3_OPTION_ALIASES, **_AZURE_OPTION_ALIASES, **_GCS_OPTION_ALIASES}.get(name, name)
    return field in SECRET_FIELDS


def normalize_uri(uri: str) -> str:
    """Strip trailing slashes and map ``s3a://``/``s3n://`` to ``s3://``."""
    return canonical_uri(str(uri))


def _s3_options(options: dict[str, Any]) -> Any:
    from executor_lib.storage.s3 import S3Options

    others = {**_AZURE_OPTION_ALIASES, **_GCS_OPTION_ALIASES}
    return S3Options(**_fields(options, _S3_OPTION_ALIASES, _S3_FIELDS, others))


def _azure_options(options: dict[str, Any]) -> Any:
    from executor_lib.storage.azure import AzureOptions

    own = _SHARED_FIELDS | set(_AZURE_KEYS.values()) | {"credential"}
    others = {**_S3_OPTION_ALIASES, **{f: f for f in _S3_FIELDS - _SHARED_FIELDS}, **_GCS_OPTION_ALIASES}
    return AzureOptions(**_fields(options, _AZURE_OPTION_ALIASES, own, others))


def _gcs_options(options: dict[str, Any]) -> Any:
    from executor_lib.storage.gcs import GcsOptions

    own = _SHARED_FIELDS | set(_GCS_KEYS.values())
    others = {**_S3_OPTION_ALIASES, **{f: f for f in _S3_FIELDS - _SHARED_FIELDS}, **_AZURE_OPTION_ALIASES}
    return GcsOptions(**_fields(options, _GCS_OPTION_ALIASES, own, others))


def _fields(
    options: dict[str, Any], aliases: dict[str, str], fields: set[str], other: dict[str, str]
) -> dict[str, Any]:
    """The option values of one backend by field name: its ``aliases`` mapped, names of the ``other``
    backend and engine options skipped; ConfigError for an unknown name or a bad value."""
    values: dict[str, Any] = {}
    for name, value in options.items():
        if name in other or (name.startswith("spark.indextables.") and name not in aliases):
            continue  # the other backend's option, or an engine option
        field = aliases.get(name, name)
        if field not in fields:
            known = sorted(fields | {n for n in aliases if not n.startswith("spark.")})
            raise ConfigError(f"unknown storage option {name!r} (known: {known})")
        try:
            values[field] = _convert(field, value)
        except (TypeError, ValueError) as e:
            # a credential is never echoed (nor an endpoint written user:password@host, with no scheme)
            hidden = field in SECRET_FIELDS or (field in _ENDPOINT_FIELDS and "@" in str(value))
            shown = "" if hidden else f"={redact_uri(str(value))!r}"
            raise ConfigError(f"storage option {name}{shown}: {e}") from None
    return values


def _convert(field: str, value: Any) -> Any:
    if field in _TEXT_FIELDS and isinstance(value, str):
        if _CONTROL.search(value):
            where = (
                "ends with a line break (as read from a file?)"
                if value.rstrip() != value
                else "holds a control character"
            )
            raise ValueError(f"{where}: strip it")
        if field in _ENDPOINT_FIELDS and (redact_uri(value) != value or ("://" not in value and "@" in value)):
            raise ValueError(
                "the endpoint carries credentials (user:password@): give them as the storage's credential options"
            )
        if field in _ENDPOINT_FIELDS and value and not value.lower().startswith(("http://", "https://")):
            raise ValueError("the endpoint must be a URL: http://host:port or https://host")
    if field == "path_style":
        return S.boolean(value)  # the registry's parser (ValueError "expected true or false")
    if field in ("max_attempts", "multipart_threshold", "multipart_chunksize"):
        number = int(value)
        if number < 1:
            raise ValueError("must be at least 1")
        if field == "multipart_chunksize" and number < 5 * 1024 * 1024:
            raise ValueError("parts must be at least 5 MiB (S3's smallest)")
        return number
    if field in ("connect_timeout", "read_timeout"):
        seconds = float(value)
        if seconds <= 0:
            raise ValueError("must be positive")
        return seconds
    return value


def open_store(uri: str, **options: Any) -> ObjectStore:
    """The store rooted at ``uri`` (a local path, ``file://...``, ``s3://bucket/prefix``, ``gs://bucket/prefix``
    or an Azure URI: ``abfss://container@account.dfs.core.windows.net/prefix``, ``abfs://``, ``wasbs://``, ``wasb://``,
    ``azure://container/prefix``, ``abfss://container/prefix`` with ``spark.indextables.azure.accountName``).

    ``shared_client``: an S3 store uses the process's client for its options (what queries use:
    connections stay open between them); otherwise a client of its own (hooks registered on it,
    such as fault injection, stay on it)."""
    shared_client = bool(options.pop("shared_client", False))
    if _CONTROL.search(uri):  # the OS and the SDKs would each fail on it their own way (a bare ValueError)
        raise ConfigError(f"table URI {redact_uri(uri)!r} holds a control character (NUL, newline...)")
    uri = normalize_uri(uri)
    if redact_uri(uri) != uri:
        raise ConfigError(
            f"{redact_uri(uri)}: credentials in a URI are not accepted (they would reach logs and errors); "
            "give them as options (access_key_id/secret_access_key, spark.indextables.aws.* or "
            "spark.indextables.azure.*, spark.indextables.gcs.*)"
        )
    if uri.startswith("s3://"):
        from executor_lib.storage.s3 import S3Store

        return S3Store(uri, _s3_options(options), shared_client=shared_client)
    if uri.lower().startswith(AZURE_SCHEMES):
        from executor_lib.storage.azure import AzureStore

        return AzureStore(uri, _azure_options(options), shared_client=shared_client)
    if uri.lower().startswith("gs://"):
        from executor_lib.storage.gcs import GcsStore

        return GcsStore(uri, _gcs_options(options), shared_client=shared_client)
    if "://" in uri and not uri.startswith("file://"):
        raise ConfigError(
            f"unsupported storage scheme in {redact_uri(uri)!r} "
            "(supported: local paths, file://, s3://, gs://, abfss://, abfs://, wasbs://, wasb://, azure://)"
        )
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    return LocalStore(path)
