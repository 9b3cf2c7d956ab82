"""Credentials never printed: the userinfo of every URI in a message replaced by ``***``.

Standard library only, so that both sides use the one rule: the cluster's errors and log lines
(``executor_lib.storage.base.redact``, which also blanks credential option values) and the client's
plan strings (``connect_plugin.explain``), which name table URIs a user may have written with a key in them.
"""

from __future__ import annotations

import re

# Azure's Hadoop schemes name the container where other URIs put a user:
# ``abfss://container@account.dfs.core.windows.net/path``. That "userinfo" is a container name
# (3-63 lower-case letters, digits and hyphens, or $root/$web), never a credential.
AZURE_SCHEMES = ("abfs://", "abfss://", "wasb://", "wasbs://", "azure://")
_CONTAINER = re.compile(r"\$root|\$web|[a-z0-9](?:[a-z0-9-]{1,61}[a-z0-9])")
_URI_START = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_URI_END = re.compile(r"[\s'\"<>`]")  # where a URI written inside a message ends


def is_azure_container(scheme: str, userinfo: str) -> bool:
    """True when ``userinfo`` (before the ``@`` of ``scheme://userinfo@host``) is an Azure container name."""
    return scheme.lower() in AZURE_SCHEMES and _CONTAINER.fullmatch(userinfo) is not None


def redact_uri(text: str) -> str:
    """``text`` with the userinfo of every URI (``s3://KEY:SECRET@bucket``) replaced by ``***``, so
    that no message ever echoes a credential given in a URI.

    The userinfo is found by reading each URI, not by a character class: a pasted secret may hold
    ``/``, ``@``, ``:``, ``+`` or ``%`` (half of AWS secret keys hold a ``/``). In ``scheme://rest``
    (up to a space or a quote), the userinfo runs to the last ``@`` before which ``rest`` has a
    ``:`` (``key:secret``) or no ``/`` (``token@host``). A path with an ``@`` after a ``:`` is
    redacted too: hiding a little path is safe, showing a secret is not.

    The container of an Azure URI (``abfss://container@account.dfs.core.windows.net/t``) is kept.

    Example: ``redact_uri("s3://AKIA:wJa/K7@b/t failed")`` is ``"s3://***@b/t failed"``.
    """
    out, pos = [], 0
    for start in _URI_START.finditer(text):
        if start.start() < pos:
            continue  # inside the previous URI
        rest_start = start.end()
        end_match = _URI_END.search(text, rest_start)
        rest_end = end_match.start() if end_match else len(text)
        rest = text[rest_start:rest_end]
        cut = _userinfo_end(rest)
        if cut is not None and is_azure_container(start.group(0), rest[:cut]):
            cut = None
        if cut is not None:
            out.append(text[pos:rest_start] + "***")
            pos = rest_start + cut
        else:
            out.append(text[pos:rest_end])
            pos = rest_end
    out.append(text[pos:])
    return "".join(out)


def _userinfo_end(rest: str) -> int | None:
    """The position of the ``@`` that ends a URI's userinfo in ``rest`` (after ``scheme://``), if any."""
    end, colon, slash = None, False, False
    for i, ch in enumerate(rest):
        if ch == "@" and (colon or not slash):
            end = i
        colon, slash = colon or ch == ":", slash or ch == "/"
    return end
