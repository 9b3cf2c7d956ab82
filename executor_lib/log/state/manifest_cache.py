"""Caches of decoded Avro manifests, keyed by manifest URI plus the object's size and modification time.

Manifests are immutable: a new state writes new manifest files and never rewrites one.
So a decoded manifest can be reused by every later snapshot — as long as the object is
still there and unchanged. The key (``manifest_cache_key``) therefore includes the size and
modification time the store reports now: a manifest deleted since (purged, lost) is not
answered from the cache, and one replaced (damaged, rewritten) misses and is read and
checked again. The caches are:

* in memory, per process (LRU within an entry budget);
* on local disk, across processes: the decoded entries as an Arrow IPC file (``file_table``'s
  columns) in a private directory (mode 0700, owned by the current user), written atomically and
  read back memory-mapped. A new process (a new CLI call, a new Spark driver) then has a
  manifest's entries without decoding anything: 20 manifests of a million files load in a
  fraction of a second, against seconds to decode their Avro.
  ``INDEXTABLES_MANIFEST_CACHE_DIR`` chooses the directory (default:
  ``<tmp>/indextables-manifests-<uid>``); ``off`` disables the disk layer;
  ``INDEXTABLES_MANIFEST_CACHE_MAX_BYTES`` bounds it (default 2 GiB, oldest files evicted).

Entries written by another version of this code are ignored (the file name includes the
column layout and its compact forms' version, ``chunk_encoding.PHYSICAL_VERSION``), and any
unreadable cache file, one whose content differs from the SHA-256 it was written with
(``manifest_columns.open_sealed``: damaged on disk), or one whose columns are not the layout's,
is a miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path

import pyarrow as pa

from executor_lib.arrow_pool import give_back_unused
from executor_lib.log.files.chunk_encoding import PHYSICAL_VERSION
from executor_lib.log.files.file_table import COLUMN_LAYOUT, DEFERRED_COLUMNS, DeferredColumns, FileChunk, restore_chunk
from executor_lib.log.state.manifest_columns import open_sealed, sealed_digest, sealed_ipc_file
from executor_lib.private_dir import untrusted_reason
from executor_lib.storage.base import ObjectInfo
from indextables_contract.errors import CorruptLogError

log = logging.getLogger(__name__)

RELEASE_AFTER_ENTRIES = 100_000  # entries decoded or spilled at once after which Arrow's unused memory is released
_SUFFIX = ".arrow"
_DEFERRED_SUFFIX = ".deferred.arrow"
# In a cached chunk's file: the columns it leaves to its ``.deferred.arrow`` file, and that file's digest.
_DEFERRED_NAMES_KEY = b"indextables.cache.deferred"
_DEFERRED_DIGEST_KEY = b"indextables.cache.deferred.sha256"


def manifest_cache_key(uri: str, info: ObjectInfo) -> str:
    """The cache key of the manifest at ``uri`` as the store describes it now (``head``)."""
    return f"{uri}#{info.size}@{info.modified_ms}"


class ManifestCache:
    """In-memory LRU of decoded manifests (Arrow chunks, about 225 bytes an entry), within an entry
    budget, backed by an optional disk layer."""

    def __init__(self, max_entries: int = 2_000_000, disk: DiskManifestCache | None = None) -> None:
        self.max_entries = max_entries
        self.disk = disk
        # Disk copies are written by one background thread, so a load returns as soon as it has
        # decoded; the executor's threads are joined at interpreter exit, so writes finish. A forked
        # child does not inherit the parent's thread: it starts its own (see ``_writer``).
        self._disk_writer: ThreadPoolExecutor | None = None
        self._writer_pid = 0
        self._disk_writes: set[Future[None]] = set()
        self._written = 0  # entries written to disk since memory was last given back
        self._items: OrderedDict[str, FileChunk] = OrderedDict()
        self._entries = 0
        self._lock = threading.Lock()
        self.hits = self.disk_hits = self.misses = 0

    def get(self, uri: str, reread: Callable[[], FileChunk] | None = None) -> FileChunk | None:
        """The chunk cached for ``uri``; ``reread``: how to read it afresh, should its deferred columns
        (left in the disk copy, checked on first use) turn out damaged."""
        with self._lock:
            found = self._items.get(uri)
            if found is not None:
                self._items.move_to_end(uri)
                self.hits += 1
                return found
        found = self.disk.get(uri, reread) if self.disk is not None else None
        if found is None:
            self.misses += 1
            return None
        self.disk_hits += 1
        self._remember(uri, found)
        return found

    def put(self, uri: str, adds: FileChunk) -> None:
        """Keep the chunk ``adds`` in memory now and write the disk copy in the background."""
        self.put_many([(uri, adds)])

    def put_many(self, items: list[tuple[str, FileChunk]]) -> None:
        """``put`` for several manifests, written in one background task (a state load puts each
        manifest as it is decoded, so its disk copy takes its statistics while the rest decode)."""
        for uri, adds in items:
            self._remember(uri, adds)
        if self.disk is None or not items:
            return
        with self._lock:
            write = self._writer().submit(self._write_disk, items)
            self._disk_writes.add(write)
        write.add_done_callback(self._forget_write)

    def _writer(self) -> ThreadPoolExecutor:
        """This process's background writer (called under the lock)."""
        if self._disk_writer is None or self._writer_pid != os.getpid():
            self._disk_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="manifest-cache")
            self._writer_pid = os.getpid()
            self._disk_writes = set()  # a parent's pending writes are not this process's
        return self._disk_writer

    def _write_disk(self, items: list[tuple[str, FileChunk]]) -> None:
        if self.disk is None:
            return
        for uri, adds in items:
            self.disk.put(uri, adds)
        with self._lock:
            self._written += sum(len(adds) for _, adds in items)
            drained = len(self._disk_writes) <= 1  # this write is the last one submitted
            release = drained and self._written >= RELEASE_AFTER_ENTRIES
            if release:
                self._written = 0
        if release:  # the statistics the disk copies took over, given back once a load's writes are done
            give_back_unused()

    def _forget_write(self, write: Future[None]) -> None:
        with self._lock:
            self._disk_writes.discard(write)

    def flush(self) -> None:
        """Wait until every disk copy submitted so far is written."""
        with self._lock:
            pending = list(self._disk_writes)
        wait(pending)

    def _remember(self, uri: str, adds: FileChunk) -> None:
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
        """Forget the in-memory copies (a new process, as far as this cache goes); ``disk``: the disk copies too."""
        self.flush()
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

    def _name(self, uri: str) -> str:
        return hashlib.sha256(f"{COLUMN_LAYOUT}|{PHYSICAL_VERSION}|{uri}".encode()).hexdigest()

    def _path(self, uri: str) -> Path:
        return self.directory / f"{self._name(uri)}{_SUFFIX}"

    def _deferred_path(self, uri: str) -> Path:
        return self.directory / f"{self._name(uri)}{_DEFERRED_SUFFIX}"

    def _ready(self) -> bool:
        try:
            return untrusted_reason(self.directory, private_reads=True) is None
        except OSError:
            return False

    def get(self, uri: str, reread: Callable[[], FileChunk] | None = None) -> FileChunk | None:
        """The chunk of the file cached for ``uri``; its statistics (``DEFERRED_COLUMNS``), kept in a
        file of their own, are only read (and checked) when asked for, and read afresh by ``reread``
        if that file is gone or damaged by then."""
        path = self._path(uri)
        if not self._ready():
            return None
        try:  # checked against the digest it was written with, and validated (``open_sealed``)
            table = open_sealed(pa.memory_map(str(path)))
            metadata = table.schema.metadata or {}
            names = tuple(n for n in metadata.get(_DEFERRED_NAMES_KEY, b"").decode().split(",") if n)
            deferred = None
            if names:
                load = _deferred_loader(self._deferred_path(uri), metadata[_DEFERRED_DIGEST_KEY], names, reread)
                deferred = DeferredColumns(names, table.num_rows, load)
            found = restore_chunk(table.replace_schema_metadata(None), deferred)
        except FileNotFoundError:
            return None
        except Exception as e:  # a damaged or foreign file is a miss, whatever it raises (SystemError...)
            log.debug("manifest cache: ignoring %s (%s: %s)", path, type(e).__name__, e)
            return None
        for used in (path, self._deferred_path(uri)) if found.deferred is not None else (path,):
            with contextlib.suppress(OSError):
                os.utime(used)  # recently used
        return found

    def put(self, uri: str, adds: FileChunk) -> None:
        """Write the chunk ``adds``: its statistics to a file of their own (first), the other columns
        to a file whose metadata names them and binds their digest."""
        if adds.objects is not None or not self._ready():
            return  # a chunk that keeps its objects has fields the columns cannot hold
        try:  # (in the writer thread: off the read path)
            table = adds.full_table().replace_schema_metadata(None)
            names = [n for n in table.column_names if n in DEFERRED_COLUMNS]
            metadata = None
            if names:
                data = sealed_ipc_file(table.select(names), None)
                if not self._write(self._deferred_path(uri), data):
                    return
                digest = sealed_digest(pa.ipc.open_file(pa.py_buffer(data)).schema)
                metadata = {_DEFERRED_NAMES_KEY: ",".join(names).encode(), _DEFERRED_DIGEST_KEY: digest}
            data = sealed_ipc_file(table.drop_columns(names).replace_schema_metadata(metadata), None)
        except pa.ArrowException as e:
            log.debug("manifest cache: cannot encode %s (%s)", uri, e)
            return
        if not self._write(self._path(uri), data):
            return
        if names and adds.deferred is not None and adds.deferred.loaded:  # decoded here: now in the file
            adds.deferred.spill(_deferred_loader(self._deferred_path(uri), digest, tuple(names), adds.deferred.reread))
        self._evict()

    def _write(self, path: Path, data: bytes) -> bool:
        """Write ``data`` to ``path`` atomically (a temporary file renamed); False if it could not."""
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            return True
        except OSError as e:
            log.debug("manifest cache: cannot write %s (%s)", path, e)
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            return False

    def _evict(self) -> None:
        try:
            files = sorted(self.directory.glob(f"*{_SUFFIX}"), key=lambda p: p.stat().st_mtime)
            total = sum(p.stat().st_size for p in files)
            while files and total > self.max_bytes:
                victim = files.pop(0)
                total -= victim.stat().st_size
                victim.unlink()
        except OSError:
            pass

    def clear(self) -> None:
        for p in self.directory.glob(f"*{_SUFFIX}"):
            with contextlib.suppress(OSError):
                p.unlink()


def _deferred_loader(
    path: Path, digest: bytes, names: tuple[str, ...], reread: Callable[[], FileChunk] | None
) -> Callable[[], pa.Table]:
    """Loads a cached chunk's deferred columns from ``path`` (checked: sealed with ``digest``, which
    the chunk's own file named), or, if that file is gone or damaged, from the manifest read afresh."""

    def load() -> pa.Table:
        try:
            table = open_sealed(pa.memory_map(str(path)))
            if sealed_digest(table.schema) != digest:
                raise ValueError("written for other columns (replaced)")
            return table.replace_schema_metadata(None)
        except Exception as e:  # gone, damaged or replaced since (SystemError, ValueError...): read afresh
            log.debug("manifest cache: %s unusable (%s: %s); reading its manifest again", path, type(e).__name__, e)
        if reread is None:
            raise CorruptLogError(f"manifest cache file {path} is unusable and its manifest cannot be read again")
        fresh = reread()
        if not set(names) <= set(fresh.column_names):
            raise CorruptLogError(f"manifest cache file {path} does not match its manifest")
        return fresh.full_table().select(list(names))

    return load


def _default_disk_cache() -> DiskManifestCache | None:
    setting = os.environ.get("INDEXTABLES_MANIFEST_CACHE_DIR", "")
    if setting.strip().lower() == "off":
        return None
    directory = Path(setting) if setting else Path(tempfile.gettempdir()) / f"indextables-manifests-{os.getuid()}"
    max_bytes = int(os.environ.get("INDEXTABLES_MANIFEST_CACHE_MAX_BYTES", str(2 << 30)))
    return DiskManifestCache(directory, max_bytes)


MANIFEST_CACHE = ManifestCache(disk=_default_disk_cache())
