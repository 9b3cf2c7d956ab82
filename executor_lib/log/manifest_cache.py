"""Caches of decoded Avro manifests, keyed by manifest URI.

Manifests are immutable: a new state writes new manifest files and never rewrites one.
So a decoded manifest can be reused by every later snapshot:

* in memory, per process (LRU within an entry budget);
* on local disk, across processes: the decoded entries are stored as a pickle in a private
  directory (mode 0700, owned by the current user), written atomically. A new process
  (a new CLI call, a new Spark driver) then loads a manifest several times faster than
  decoding its Avro. ``INDEXTABLES_MANIFEST_CACHE_DIR`` chooses the directory (default:
  ``<tmp>/indextables-manifests-<uid>``); ``off`` disables the disk layer;
  ``INDEXTABLES_MANIFEST_CACHE_MAX_BYTES`` bounds it (default 2 GiB, oldest files evicted).

Entries written by another version of this code are ignored (the key includes the code's
record layout), and any unreadable cache file is treated as a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pickle
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from executor_lib.protocol.actions import AddAction

log = logging.getLogger(__name__)

_LAYOUT = hashlib.sha256(repr(AddAction._codec().fields).encode()).hexdigest()[:12]


class ManifestCache:
    """In-memory LRU of decoded manifests, within an entry budget, backed by an optional disk layer."""

    def __init__(self, max_entries: int = 500_000, disk: DiskManifestCache | None = None) -> None:
        self.max_entries = max_entries
        self.disk = disk
        self._items: OrderedDict[str, tuple[AddAction, ...]] = OrderedDict()
        self._entries = 0
        self._lock = threading.Lock()
        self.hits = self.disk_hits = self.misses = 0

    def get(self, uri: str) -> tuple[AddAction, ...] | None:
        with self._lock:
            found = self._items.get(uri)
            if found is not None:
                self._items.move_to_end(uri)
                self.hits += 1
                return found
        found = self.disk.get(uri) if self.disk is not None else None
        if found is None:
            self.misses += 1
            return None
        self.disk_hits += 1
        self._remember(uri, found)
        return found

    def put(self, uri: str, adds: tuple[AddAction, ...]) -> None:
        self._remember(uri, adds)
        if self.disk is not None:
            self.disk.put(uri, adds)

    def _remember(self, uri: str, adds: tuple[AddAction, ...]) -> None:
        if len(adds) > self.max_entries:
            return
        with self._lock:
            if uri in self._items:
                return
            self._items[uri] = adds
            self._entries += len(adds)
            while self._entries > self.max_entries:
                _, evicted = self._items.popitem(last=False)
                self._entries -= len(evicted)

    def clear(self, disk: bool = False) -> None:
        with self._lock:
            self._items.clear()
            self._entries = 0
        if disk and self.disk is not None:
            self.disk.clear()


class DiskManifestCache:
    """Decoded manifests as files in a private local directory."""

    def __init__(self, directory: Path, max_bytes: int = 2 << 30) -> None:
        self.directory = directory
        self.max_bytes = max_bytes

    def _path(self, uri: str) -> Path:
        return self.directory / f"{hashlib.sha256(f'{_LAYOUT}|{uri}'.encode()).hexdigest()}.pkl"

    def _ready(self) -> bool:
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = self.directory.stat()
        except OSError:
            return False
        return st.st_uid == os.getuid() and (st.st_mode & 0o077) == 0

    def get(self, uri: str) -> tuple[AddAction, ...] | None:
        path = self._path(uri)
        if not self._ready():
            return None
        try:
            with open(path, "rb") as f:
                found = pickle.load(f)
        except FileNotFoundError:
            return None
        except Exception as e:  # a damaged or foreign file is a miss
            log.debug("manifest cache: ignoring %s (%s)", path, e)
            return None
        if not isinstance(found, tuple) or not all(isinstance(a, AddAction) for a in found[:1]):
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used
        return found

    def put(self, uri: str, adds: tuple[AddAction, ...]) -> None:
        if not self._ready():
            return
        path = self._path(uri)
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                pickle.dump(adds, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except OSError as e:
            log.debug("manifest cache: cannot write %s (%s)", path, e)
            return
        self._evict()

    def _evict(self) -> None:
        try:
            files = sorted(self.directory.glob("*.pkl"), key=lambda p: p.stat().st_mtime)
            total = sum(p.stat().st_size for p in files)
            while files and total > self.max_bytes:
                victim = files.pop(0)
                total -= victim.stat().st_size
                victim.unlink()
        except OSError:
            pass

    def clear(self) -> None:
        for p in self.directory.glob("*.pkl"):
            with contextlib.suppress(OSError):
                p.unlink()


def _default_disk_cache() -> DiskManifestCache | None:
    setting = os.environ.get("INDEXTABLES_MANIFEST_CACHE_DIR", "")
    if setting.strip().lower() == "off":
        return None
    directory = Path(setting) if setting else Path(tempfile.gettempdir()) / f"indextables-manifests-{os.getuid()}"
    max_bytes = int(os.environ.get("INDEXTABLES_MANIFEST_CACHE_MAX_BYTES", str(2 << 30)))
    return DiskManifestCache(directory, max_bytes)


MANIFEST_CACHE = ManifestCache(disk=_default_disk_cache())
