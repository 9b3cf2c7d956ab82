"""The storage contract every backend implements (the project's "LogStore").

A store is rooted at a table URI; keys are relative, '/'-separated paths below that
root (``_transaction_log/00000000000000000007.json``).

The transaction log is correct only because backends guarantee:

* **Atomic put-if-absent.** ``put_if_absent`` either creates the object with the full
  content or raises :class:`ObjectAlreadyExistsError`; two concurrent callers for one
  key never both succeed, and no reader ever sees a partially written object.
* **Atomic overwrite.** ``put`` replaces an object in one step (readers see the old or
  the new content, never a mix).
* **Read-after-write and consistent listing.** Once a put returned, ``read``, ``head``
  and ``list`` see the object. Listings are sorted by key (byte order), which is why log
  file names are zero-padded: ``list(prefix, start_after=...)`` finds the newest
  versions without reading the whole directory.
* **Errors are typed.** A missing object is :class:`ObjectNotFoundError`; other failures
  are :class:`StorageError` with the object's path and never a credential.

A put whose outcome is unknown (the request may have landed, the response was lost)
raises :class:`AmbiguousWriteError` or, on S3 through the SDK's own retries, looks like
:class:`ObjectAlreadyExistsError` for the caller's own write. Callers that need
exactly-once semantics make their objects self-identifying and read them back.
"""

from __future__ import annotations

import abc
import contextlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from indextables_contract.errors import InvalidPathError
from indextables_contract.redaction import AZURE_SCHEMES as AZURE_SCHEMES  # re-exported: the stores use it
from indextables_contract.redaction import is_azure_container as _is_azure_container
from indextables_contract.redaction import redact_uri as redact_uri  # re-exported: one rule on both sides

_SCHEME_ALIASES = {"s3a://": "s3://", "s3n://": "s3://"}
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/@]*)@")


def canonical_uri(uri: str) -> str:
    """``uri`` with the scheme aliases of one store mapped to one name (``s3a://``, ``s3n://`` ->
    ``s3://``) and trailing slashes stripped."""
    uri = _unalias(uri)
    return uri.rstrip("/") if uri != "/" else uri


def _unalias(uri: str) -> str:
    for alias, scheme in _SCHEME_ALIASES.items():
        if uri.startswith(alias):
            return scheme + uri[len(alias) :]
    return uri


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """The one redaction of a message: ``redact_uri``, then every one of ``secrets`` (credential
    option values: keys, tokens, a SAS, a connection string's parts), as given, stripped, and
    percent-escaped, replaced by ``***``. Secrets shorter than 4 characters are left (they would
    blank out ordinary words)."""
    text = redact_uri(text)
    for secret in secrets:
        for form in {secret, secret.strip(), quote(secret.strip(), safe=""), quote(secret.strip())}:
            if len(form) >= 4 and form in text:
                text = text.replace(form, "***")
    return text


def scrub_exception(error: BaseException, secrets: Iterable[str] = ()) -> BaseException:
    """``error`` and every exception chained to it (``__cause__``, ``__context__``, and exceptions held
    in their ``args`` or attributes, as urllib3's ``reason``) redacted in place (``redact``): their
    ``args`` and string attributes. A typed error raised ``from`` an SDK's error then carries no secret
    in any cause a traceback or ``logger.exception`` prints. Returns ``error``."""
    secrets = [s for s in secrets if s]
    seen: set[int] = set()
    todo: list[object] = [error]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        with contextlib.suppress(Exception):
            e.args = tuple(redact(a, secrets) if isinstance(a, str) else a for a in e.args)
        todo += [a for a in e.args if isinstance(a, BaseException)]
        for name, value in list(getattr(e, "__dict__", {}).items()):
            if isinstance(value, str):
                with contextlib.suppress(Exception):
                    setattr(e, name, redact(value, secrets))
            elif isinstance(value, BaseException):
                todo.append(value)
        todo += [e.__cause__, e.__context__]
    return error


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


def check_relative_key(path: str) -> None:
    """InvalidPathError unless ``path`` is a table-relative key: '/'-separated, no leading '/',
    no '\\', no empty, '.' or '..' segment."""
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in path.split("/")):
        raise InvalidPathError(
            f"invalid file path {redact_uri(path)!r}: must be relative to the table (no leading '/', "
            "no '..', '.' or empty segments, no '\\') or a full URI inside the table",
            redact_uri(path),
        )


def plain_relative_paths(paths: Any) -> Any:
    """For each of ``paths`` (a pyarrow string array), whether it is a table-relative key as
    ``check_relative_key`` accepts it and no URI (then it is its own key, ``table_key``); False where
    ``table_key`` must judge it. Vectorized: a million paths in well under a second."""
    import pyarrow.compute as pc

    bad = [
        pc.equal(paths, ""),
        pc.match_substring(paths, "://"),
        pc.match_substring(paths, "\\"),
        pc.match_substring(paths, "//"),
        pc.match_substring_regex(paths, r"(^|/)\.{1,2}(/|$)"),
        pc.starts_with(paths, "/"),
        pc.ends_with(paths, "/"),
    ]
    rejected = bad[0]
    for b in bad[1:]:
        rejected = pc.or_(rejected, b)
    return pc.invert(pc.fill_null(rejected, True))


# The names of the file system's temporary files, exactly: ".<name>.tmp-<32 hex>" (``local._temp_path``);
# cleanup and PURGE sweep them as a crashed writer's leftovers, so a commit may not name one.
TEMP_NAME = re.compile(r"\..+\.tmp-[0-9a-f]{32}")


def check_path_spelling(path: str) -> None:
    """InvalidPathError unless a path a commit names is in the one spelling every reader, PURGE and
    cleanup agree on: no control character (NUL, newline...), no percent-escape (``splits%2Fx`` is
    not ``splits/x``: a path is given as the file is named), and not a URI missing its ``//``
    (``file:/abs/x`` would be read as a relative key), and not named like a temporary file (``TEMP_NAME``,
    swept by PURGE). Checked at commit (``transaction_log``);
    tables other writers made are read as they are."""
    problem = _spelling_problem(path)
    if problem is not None:
        raise InvalidPathError(f"invalid file path {redact_uri(path)!r}: {problem}", redact_uri(path))


def _spelling_problem(path: str) -> str | None:
    if _CONTROL.search(path):
        return "it holds a control character (NUL, newline...)"
    if _PERCENT_ESCAPE.search(path):
        return "it holds a percent-escape (%XX); give the path as the file is named"
    if TEMP_NAME.fullmatch(path.rsplit("/", 1)[-1]):
        return "it is named like a writer's temporary file (.<name>.tmp-<32 hex>), which PURGE deletes as a leftover"
    first = path.split("/", 1)[0]
    if "://" not in path and first.endswith(":") and len(first) > 1:
        return f"{first!r} looks like a URI scheme without '//' (write {first}//...)"
    return None


_FILE = "file://"


def _resolved(file_uri: str) -> str:
    """A ``file://`` URI with every symbolic link on its path resolved (the part that exists)."""
    return _FILE + os.path.realpath(file_uri[len(_FILE) :])


def table_key(root_uri: str, path: str) -> str:
    """The store key of a file path of a table rooted at ``root_uri`` — the one rule commit, read
    and purge share (PROTOCOL.md §1).

    A path is either relative to the table root, or a full URI (it contains ``://``). A full URI
    inside the root (after mapping ``s3a://``/``s3n://`` to ``s3://``) is the key below the root;
    one outside the root, with credentials in it, or whose remainder is not a valid relative key
    raises InvalidPathError: such a file is never read, written or deleted through the table.
    Local ``file://`` URIs are compared with symbolic links resolved when they differ as written
    (a table opened through a link names one file two ways).

    Example: ``table_key("s3://b/t", "s3a://b/t/splits/x.split")`` is ``"splits/x.split"``.
    """
    if "://" not in path:
        check_relative_key(path)
        return path
    userinfo = _USERINFO.match(path)
    if userinfo and not _is_azure_container(userinfo.group(1), userinfo.group(2)):
        raise InvalidPathError(f"file URI {redact_uri(path)!r} carries credentials; not allowed in a table path")
    root = canonical_uri(root_uri) + "/"
    uri = _unalias(path)
    if not uri.startswith(root) and uri.startswith(_FILE) and root.startswith(_FILE):
        # One local file, two spellings: a table opened through a symbolic link (or a path through
        # one) names its files by both. Compared resolved, so commit, read and PURGE agree.
        uri, root = _resolved(uri), _resolved(root) + "/"
    if not uri.startswith(root) or len(uri) == len(root):
        raise InvalidPathError(f"file URI {path!r} lies outside the table {canonical_uri(root_uri)}", path)
    key = uri[len(root) :]
    check_relative_key(key)
    return key


@dataclass(frozen=True)
class ObjectInfo:
    """One listed object (or, in a non-recursive listing, one common prefix)."""

    key: str
    size: int = 0
    modified_ms: int = 0
    is_dir: bool = False

    @property
    def name(self) -> str:
        """The last path component (without the trailing '/' of a directory)."""
        return self.key.rstrip("/").rsplit("/", 1)[-1]


def wants_bytes(start: int, length: int) -> bool:
    """Whether a ranged read of ``length`` bytes from ``start`` reads anything (a length of 0 does not);
    every backend's ``read_range`` checks its arguments here.

    Raises:
        ValueError: ``start`` or ``length`` is negative (a caller's bug, named with both).

    Example: ``if not wants_bytes(start, length): return b""``
    """
    if start < 0 or length < 0:
        raise ValueError(f"invalid range start={start} length={length}: neither may be negative")
    return length > 0


class ObjectStore(abc.ABC):
    """An object store rooted at one URI. See the module docstring for the contract."""

    @property
    @abc.abstractmethod
    def root_uri(self) -> str:
        """The URI this store is rooted at (no credentials in it)."""

    @property
    def cache_identity(self) -> str:
        """What tells this store's objects apart from another store's in a process-wide cache (the
        root URI; an S3 store adds its endpoint): two stores with one identity hold the same objects."""
        return self.root_uri

    def uri_of(self, key: str) -> str:
        """The full URI of ``key``, for messages and for other tools."""
        return f"{self.root_uri.rstrip('/')}/{self.key_of(key)}" if key else self.root_uri

    def key_of(self, path: str) -> str:
        """The key of ``path``: a key as it is, a full URI inside the root as the key below it
        (``table_key``); InvalidPathError for a URI outside the root, and for a key that would leave it
        (a ``..`` or ``.`` segment, a leading ``/``), which a client library may resolve into another
        table's object (Azure's does): every backend reaches its objects through here.

        Example: ``store.key_of("../other/splits/x.split")`` raises InvalidPathError."""
        if "://" in path:
            return table_key(self.root_uri, path)
        if path.startswith("/") or any(p in (".", "..") for p in path.split("/")):
            raise InvalidPathError(f"{redact_uri(self.root_uri)}: key {path!r} escapes the store root", path)
        return path

    @abc.abstractmethod
    def read(self, key: str) -> bytes:
        """Whole content of ``key``."""

    @abc.abstractmethod
    def read_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes from offset ``start`` (fewer at the end of the object)."""

    @abc.abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Create or atomically replace ``key``."""

    @abc.abstractmethod
    def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        """Create ``key`` atomically; raise ObjectAlreadyExistsError if it exists."""

    def put_file(self, key: str, local_path: str) -> None:
        """Upload a local file to ``key`` (create or replace). Backends stream large files; a local
        store may take the file itself (a hard link), so the caller must not change it afterwards."""
        with open(local_path, "rb") as f:
            self.put(key, f.read())

    def local_path(self, key: str) -> Path | None:
        """The file holding ``key`` if this store is a local file system and it exists (read it in
        place, never write it); None for remote stores."""
        return None

    def get_file(self, key: str, local_path: str) -> int:
        """Download ``key`` into the local file ``local_path`` (created or truncated); its size.
        Backends stream large objects (a split never passes through memory whole) and copy local
        files in the kernel."""
        data = self.read(key)
        with open(local_path, "wb") as f:
            f.write(data)
        return len(data)

    @abc.abstractmethod
    def list(self, prefix: str, start_after: str | None = None, recursive: bool = True) -> Iterator[ObjectInfo]:
        """Objects whose key starts with ``prefix`` and sorts after ``start_after``, in key order.

        With ``recursive=False`` the listing stops at the next '/' after the prefix and
        reports each such sub-"directory" once as an ``ObjectInfo(is_dir=True)`` whose
        key ends with '/'.
        """

    @abc.abstractmethod
    def delete(self, key: str) -> None:
        """Delete ``key``; deleting a missing key is not an error."""

    def list_temporary(self, prefix: str) -> Iterator[ObjectInfo]:
        """Temporary objects under ``prefix`` that ``list`` hides: what a writer killed mid-write
        left (a file system's ``.<name>.tmp-<id>``). Object stores write atomically and leave none."""
        return iter(())

    def remove_empty_dir(self, prefix: str) -> None:
        """Forget the "directory" ``prefix`` (ending in '/') if nothing is left under it.

        Object stores have no directories, so this does nothing; a file system removes the
        empty directory, so that a non-recursive listing stops reporting it.
        """
        return None

    @abc.abstractmethod
    def head(self, key: str) -> ObjectInfo:
        """Size and modification time of ``key``; ObjectNotFoundError if missing."""

    def exists(self, key: str) -> bool:
        from indextables_contract.errors import ObjectNotFoundError

        try:
            self.head(key)
        except ObjectNotFoundError:
            return False
        return True
