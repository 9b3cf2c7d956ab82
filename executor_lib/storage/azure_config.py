"""What an Azure store is configured with: its options (``AzureOptions``), the location a URI names
(``parse_azure_uri``: container, account, path) and its credential, found in IndexTables4Spark's
order (``resolve_credential``; see ``executor_lib.storage.azure`` for the order). No ``azure.*`` import here
but ``azure.identity``, lazily, for service principals and DefaultAzureCredential.
"""

from __future__ import annotations

import configparser
import functools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from executor_lib.storage.base import AZURE_SCHEMES
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError

IDENTITY_HINT = (
    "an Azure service principal or DefaultAzureCredential needs azure-identity: "
    "pip install azure-identity (the project's azure-identity extra; from its checkout: "
    "pip install -e '.[azure-identity]')"
)


@dataclass(frozen=True)
class AzureOptions:
    """Connection settings. Secrets are excluded from repr so they never reach a log."""

    account_name: str | None = None
    account_key: str | None = field(default=None, repr=False)
    connection_string: str | None = field(default=None, repr=False)
    bearer_token: str | None = field(default=None, repr=False)
    tenant_id: str | None = None
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    endpoint: str | None = field(default=None, repr=False)  # may carry a SAS as its query
    # an azure-core TokenCredential (Python API only); not hashed: such objects may define __eq__ only
    credential: Any = field(default=None, repr=False, hash=False)
    max_attempts: int = 5
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    multipart_threshold: int = 64 * 1024 * 1024
    multipart_chunksize: int = 16 * 1024 * 1024

    @property
    def endpoint_shown(self) -> str | None:
        """The endpoint without its query (a SAS), for messages and cache identities."""
        if not self.endpoint:
            return None
        parts = urlsplit(self.endpoint)
        host = parts.netloc.rpartition("@")[2]  # never its userinfo (u:PW@host)
        return f"{parts.scheme}://{host}{parts.path}".rstrip("/")


def azure_secrets(o: AzureOptions) -> list[str]:
    """The credential values of Azure settings: keys, tokens, the client secret, an endpoint's SAS
    and userinfo, a connection string and each of its parts."""
    out = [v for v in (o.account_key, o.bearer_token, o.client_secret, o.connection_string) if v]
    if o.endpoint:
        parts = urlsplit(o.endpoint)
        out += [v for v in (parts.query, parts.password, parts.username) if v]
    for part in (o.connection_string or "").split(";"):
        name, _, value = part.partition("=")
        if value and name.strip() in ("AccountKey", "SharedAccessSignature"):
            out.append(value)
    return out


@dataclass(frozen=True)
class AzureLocation:
    """A parsed Azure URI: container, account (None: from the settings), DNS suffix, path prefix."""

    container: str
    account: str | None
    suffix: str  # the endpoint's DNS suffix: core.windows.net (public cloud), core.chinacloudapi.cn ...
    prefix: str


def parse_azure_uri(uri: str) -> AzureLocation:
    """``abfss://c@acct.dfs.core.windows.net/p`` -> ``AzureLocation("c", "acct", "core.windows.net", "p")``.

    Raises:
        ConfigError: not an Azure URI, or no container in it.
    """
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() + "://" not in AZURE_SCHEMES:
        raise ConfigError(f"not an Azure URI: {uri!r} (expected abfss://, abfs://, wasbs://, wasb:// or azure://)")
    authority, _, prefix = rest.partition("/")
    container, at, host = authority.partition("@")
    account, suffix = None, "core.windows.net"
    if at:
        labels = host.split(".")
        account = labels[0] or None
        # account.dfs.core.windows.net / account.blob.core.windows.net -> core.windows.net
        if len(labels) > 2 and labels[1] in ("dfs", "blob"):
            suffix = ".".join(labels[2:])
    if not container:
        raise ConfigError(f"invalid Azure URI {uri!r}: no container (expected {scheme}://container@account.../path)")
    return AzureLocation(container, account, suffix, prefix.strip("/"))


class _StaticToken:
    """A fixed OAuth bearer token (``spark.indextables.azure.bearerToken``) as an azure-core credential."""

    def __init__(self, token: str) -> None:
        self._token = token

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken(self._token, int(time.time()) + 3600)

    def __repr__(self) -> str:
        return "_StaticToken(***)"


def credentials_file() -> dict[str, str]:
    """The ``[default]`` section of ``~/.azure/credentials`` (IndexTables4Spark's and tantivy4java's file)."""
    path = Path(os.path.expanduser("~")) / ".azure" / "credentials"
    if not path.is_file():
        return {}
    parser = configparser.ConfigParser()
    try:
        parser.read(path)
    except configparser.Error:
        return {}
    return dict(parser["default"]) if parser.has_section("default") else {}


def account_name(loc: AzureLocation, o: AzureOptions, file: dict[str, str]) -> str | None:
    return (
        loc.account
        or o.account_name
        or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
        or os.environ.get("AZURE_STORAGE_ACCOUNT")
        or file.get("storage_account")
    )


@functools.lru_cache(maxsize=16)
def _identity(tenant: str | None, client: str | None, secret: str | None) -> Any:
    """A service principal's credential, or ``DefaultAzureCredential``: one per process and
    principal, so its token is fetched once, not by every store."""
    try:
        import azure.identity as identity
    except ImportError as e:
        raise ConfigError(IDENTITY_HINT) from e
    if tenant and client and secret:
        return identity.ClientSecretCredential(tenant, client, secret)
    return identity.DefaultAzureCredential()


def resolve_credential(account: str | None, o: AzureOptions, file: dict[str, str]) -> tuple[Any, str]:
    """The credential for ``account`` and the setting it came from (named in errors): see the
    module docstring for the order. The environment's connection string is taken by ``_make_service``."""
    if o.credential is not None:
        if not callable(getattr(o.credential, "get_token", None)):
            raise ConfigError(
                f"azure_credential must be an azure-core TokenCredential (an object with get_token), "
                f"got a {type(o.credential).__name__}"
            )
        return o.credential, "the credential object (azure_credential)"
    if o.bearer_token:
        return _StaticToken(o.bearer_token), "the bearer token (spark.indextables.azure.bearerToken)"
    given = (o.tenant_id, o.client_id, o.client_secret)
    if any(given):
        if not all(given):
            names = (S.AZURE_TENANT_ID.key, S.AZURE_CLIENT_ID.key, S.AZURE_CLIENT_SECRET.key)
            missing = [n for n, v in zip(names, given, strict=True) if not v]
            raise ConfigError(f"Azure service principal: {', '.join(missing)} not set (all three are needed)")
        return _identity(*given), "the service principal (spark.indextables.azure.tenantId/clientId/clientSecret)"
    if o.account_key:
        return {"account_name": account, "account_key": o.account_key}, S.AZURE_ACCOUNT_KEY.key
    if o.endpoint and "?" in o.endpoint:
        return None, "the SAS in spark.indextables.azure.endpoint"
    if os.environ.get("AZURE_STORAGE_KEY"):
        return {"account_name": account, "account_key": os.environ["AZURE_STORAGE_KEY"]}, "AZURE_STORAGE_KEY"
    if file.get("account_key"):
        return {"account_name": account, "account_key": file["account_key"]}, "account_key of ~/.azure/credentials"
    if file.get("tenant_id") and file.get("client_id") and file.get("client_secret"):
        principal = _identity(file["tenant_id"], file["client_id"], file["client_secret"])
        return principal, "the service principal of ~/.azure/credentials"
    try:
        import azure.identity  # noqa: F401
    except ImportError:
        return None, "the settings: no credentials were given (anonymous access reads public containers only)"
    return _identity(None, None, None), "DefaultAzureCredential (managed identity, AZURE_CLIENT_ID ...)"


def explicit_credentials(o: AzureOptions) -> bool:
    """Whether the settings name credentials or an endpoint (then the environment's are not used)."""
    return any(
        (o.credential is not None, o.bearer_token, o.tenant_id, o.client_id, o.client_secret, o.account_key, o.endpoint)
    )


def account_of_endpoint(url: str) -> str | None:
    """The account an endpoint serves: ``https://acct.blob.core.windows.net`` -> ``acct``; an emulator's
    path-style ``http://127.0.0.1:10000/devstoreaccount1`` -> ``devstoreaccount1``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host == "localhost" or host.replace(".", "").isdigit() or ":" in host:
        return parts.path.strip("/").split("/")[0] or None
    return host.split(".")[0] or None
