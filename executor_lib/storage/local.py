"""Local filesystem backend (plain paths and ``file://`` URIs).

put-if-absent writes the content to a temporary file in the target directory and
then ``os.link``s it to the final name: ``link`` fails with EEXIST if the name is
taken, so there is no check-then-write race, and the object appears complete or not
at all. ``put`` uses a temporary file plus ``os.replace`` (atomic rename).
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from executor_lib.storage.base import TEMP_NAME, ObjectInfo, ObjectStore, wants_bytes
from indextables_contract.errors import InvalidPathError, ObjectAlreadyExistsError, ObjectNotFoundError, StorageError

_TMP_MARKER = ".tmp-"
# The names of this store's temporary files, exactly: ".<name>.tmp-<32 hex>" (``_temp_path``). A live
# file whose name merely contains ".tmp-" is neither hidden from listings nor swept as a leftover.
_TMP_NAME = TEMP_NAME


def _is_temp_name(name: str) -> bool:
    return _TMP_NAME.fullmatch(name) is not None


def _temp_path(target: Path) -> Path:
    return target.parent / f".{target.name}{_TMP_MARKER}{uuid.uuid4().hex}"


def _fsync(path: Path) -> None:
    """Make a file's data, or a directory's new entries, durable (a crash must not lose an
    acknowledged commit)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalStore(ObjectStore):
    """A directory on the local filesystem."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(os.path.abspath(root))
        self._real_root = os.path.realpath(self._root)

    @property
    def root_uri(self) -> str:
        return f"file://{self._root}"

    def uri_of(self, key: str) -> str:
        return str(self._path(key)) if key else str(self._root)

    def _path(self, key: str) -> Path:
        if not key:
            return self._root
        key = self.key_of(key)
        if key.startswith("/") or ".." in key.split("/"):
            raise InvalidPathError(f"{self._root}: key {key!r} escapes the store root", key)
        if "\x00" in key:  # the OS refuses it with a bare ValueError
            raise InvalidPathError(f"{self._root}: key {key!r} holds a NUL byte", key)
        return self._root / key

    def _changed_path(self, key: str) -> Path:
        """``_path(key)`` for a write or a delete: InvalidPathError if a symbolic link on the way
        leads outside the table (a partition directory linked elsewhere), so that no write lands
        outside the table and no delete removes a file outside it."""
        path = self._path(key)
        real = os.path.realpath(path.parent)
        if real != self._real_root and not real.startswith(self._real_root.rstrip(os.sep) + os.sep):
            raise InvalidPathError(
                f"{self._root}: key {key!r} leads outside the table through a symbolic link (to {real}); "
                "nothing is written or deleted there",
                key,
            )
        return path

    @contextlib.contextmanager
    def _reading(self, key: str) -> Iterator[None]:
        """Errors of reading ``key`` as the storage contract's (a missing file, a directory, others)."""
        try:
            yield
        except FileNotFoundError as e:
            raise ObjectNotFoundError(f"{self.uri_of(key)}: no such file", self.uri_of(key)) from e
        except IsADirectoryError as e:
            raise ObjectNotFoundError(f"{self.uri_of(key)}: is a directory", self.uri_of(key)) from e
        except OSError as e:
            raise StorageError(f"{self.uri_of(key)}: read failed: {e.strerror}", self.uri_of(key)) from e

    def read(self, key: str) -> bytes:
        with self._reading(key):
            return self._path(key).read_bytes()

    def read_range(self, key: str, start: int, length: int) -> bytes:
        wants_bytes(start, length)  # (a length of 0 still says whether the file is there)
        try:
            with open(self._path(key), "rb") as f:
                f.seek(start)
                return f.read(length)
        except FileNotFoundError as e:
            raise ObjectNotFoundError(f"{self.uri_of(key)}: no such file", self.uri_of(key)) from e
        except OSError as e:
            raise StorageError(f"{self.uri_of(key)}: read failed: {e.strerror}", self.uri_of(key)) from e

    def _write_temp(self, target: Path, data: bytes) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_path(target)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def put(self, key: str, data: bytes) -> None:
        target = self._changed_path(key)
        try:
            tmp = self._write_temp(target, data)
            os.replace(tmp, target)
            _fsync(target.parent)
        except OSError as e:
            raise StorageError(f"{self.uri_of(key)}: write failed: {e.strerror}", self.uri_of(key)) from e

    def put_file(self, key: str, local_path: str) -> None:
        target = self._changed_path(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = _temp_path(target)
            try:
                os.link(local_path, tmp)  # same file system: the file itself, no copy (callers drop theirs)
            except OSError:
                shutil.copyfile(local_path, tmp)
            _fsync(tmp)  # the data is durable before its name is
            os.replace(tmp, target)
            _fsync(target.parent)
        except OSError as e:
            raise StorageError(f"{self.uri_of(key)}: write failed: {e.strerror}", self.uri_of(key)) from e

    def local_path(self, key: str) -> Path | None:
        path = self._path(key)
        return path if path.is_file() else None

    def get_file(self, key: str, local_path: str) -> int:
        with self._reading(key):
            shutil.copyfile(self._path(key), local_path)  # sendfile: no copy through Python
            return os.path.getsize(local_path)

    def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        target = self._changed_path(key)
        try:
            tmp = self._write_temp(target, data)
        except OSError as e:
            raise StorageError(f"{self.uri_of(key)}: write failed: {e.strerror}", self.uri_of(key)) from e
        try:
            os.link(tmp, target)
            _fsync(target.parent)
        except FileExistsError as e:
            raise ObjectAlreadyExistsError(f"{self.uri_of(key)}: already exists", self.uri_of(key)) from e
        except OSError as e:
            raise StorageError(f"{self.uri_of(key)}: write failed: {e.strerror}", self.uri_of(key)) from e
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def list(self, prefix: str, start_after: str | None = None, recursive: bool = True) -> Iterator[ObjectInfo]:
        base_dir = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        directory = self._path(base_dir)
        if not directory.is_dir():
            return iter(())
        found: builtins.list[ObjectInfo] = []
        self._collect(directory, base_dir, prefix, recursive, found)
        found.sort(key=lambda o: o.key)
        return (o for o in found if start_after is None or o.key > start_after)

    def _collect(
        self, directory: Path, dir_key: str, prefix: str, recursive: bool, out: builtins.list[ObjectInfo]
    ) -> None:
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            return
        except OSError as e:
            raise StorageError(f"{directory}: listing failed: {e.strerror}", str(directory)) from e
        for entry in entries:
            if _is_temp_name(entry.name):
                continue
            key = f"{dir_key}/{entry.name}" if dir_key else entry.name
            if entry.is_dir(follow_symlinks=False):
                dir_prefix = key + "/"
                if not (dir_prefix.startswith(prefix) or prefix.startswith(dir_prefix)):
                    continue
                if recursive or prefix.startswith(dir_prefix):
                    self._collect(Path(entry.path), key, prefix, recursive, out)
                else:
                    out.append(ObjectInfo(dir_prefix, is_dir=True))
            elif key.startswith(prefix):
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue  # deleted while listing
                out.append(ObjectInfo(key, st.st_size, int(st.st_mtime * 1000)))

    def list_temporary(self, prefix: str) -> Iterator[ObjectInfo]:
        base_dir = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        directory = self._path(base_dir)
        found: builtins.list[ObjectInfo] = []
        for dirpath, dirnames, names in os.walk(directory):
            dirnames[:] = [d for d in dirnames if not _is_temp_name(d)]
            for name in names:
                if not _is_temp_name(name):
                    continue
                path = Path(dirpath) / name
                key = str(path.relative_to(self._root))
                if not key.startswith(prefix):
                    continue
                with contextlib.suppress(FileNotFoundError):  # renamed into place meanwhile
                    st = path.stat()
                    found.append(ObjectInfo(key, st.st_size, int(st.st_mtime * 1000)))
        return iter(sorted(found, key=lambda o: o.key))

    def delete(self, key: str) -> None:
        path = self._changed_path(key)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as e:
            if e.errno == errno.EISDIR:
                return
            raise StorageError(f"{self.uri_of(key)}: delete failed: {e.strerror}", self.uri_of(key)) from e

    def remove_empty_dir(self, prefix: str) -> None:
        if not prefix.strip("/"):
            return  # never the store's root
        with contextlib.suppress(OSError):  # not empty (a concurrent writer), or already gone
            os.rmdir(self._path(prefix.rstrip("/")))

    def head(self, key: str) -> ObjectInfo:
        try:
            st = self._path(key).stat()
        except FileNotFoundError as e:
            raise ObjectNotFoundError(f"{self.uri_of(key)}: no such file", self.uri_of(key)) from e
        except OSError as e:
            raise StorageError(f"{self.uri_of(key)}: stat failed: {e.strerror}", self.uri_of(key)) from e
        if self._path(key).is_dir():
            raise ObjectNotFoundError(f"{self.uri_of(key)}: is a directory", self.uri_of(key))
        return ObjectInfo(key, st.st_size, int(st.st_mtime * 1000))
