"""The checksums of a whole-split cache entry: what its files were when written, and when they were
last found so.

A split cache entry (``split_cache.SplitCache``) records the size and CRC32 of each file it writes
(``data.split``, the index files extracted from it) in ``checksums.json``. A searcher's open checks
them (``damaged_files``); a file that differs makes the entry be fetched again.

Reading every byte of an entry costs about 10 ms per 100 MB, and Spark forks a fresh Python worker
after every task it ends early (``show()``, ``limit()``), so a check in every process paid that on
every first look at a table. A check that finds the files as written is remembered, in the process
and in the entry (``verified.json``: the files' inode, modification time and size then, and when),
and trusted for ``REVERIFY_SECONDS`` by every process of the node while the files' ``stat`` stays
the same. So a file rewritten or replaced is read again at its next open; bit rot at rest, which
changes no ``stat``, is found by the first open after the entry's last check is
``REVERIFY_SECONDS`` old (before: the first open in a new process; a reused Python worker never
looked again). Doc-store blocks and a split's own members carry their own checks at every read
(``format.store``, ``split_pieces``).

    >>> damaged_files(entry)        # [] when every recorded file is as written
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import zlib
from collections.abc import Mapping
from pathlib import Path

CHECKSUMS = "checksums.json"  # an entry's files (relative path -> [size, CRC32]) as written, checked at open
VERIFIED = "verified.json"  # {"stats": the files' [inode, mtime_ns, size] when last found as written, "at": epoch s}
REVERIFY_SECONDS = 600.0  # how long a check that found an entry's files as written is trusted, node-wide
DATA_FILE = "data.split"

Stats = tuple[tuple[int, int, int], ...]

_VERIFIED: dict[Path, tuple[Stats, float]] = {}  # entry -> its files' stats when verified, and when
_VERIFIED_LOCK = threading.Lock()


def file_crc(path: Path) -> tuple[int, int]:
    """A file's size and CRC32 (read in 8 MiB chunks).

    Example: ``file_crc(Path("data.split"))`` -> ``(54489704, 268111602)``
    """
    crc, size = 0, 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(8 << 20):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, crc


def record_checksums(entry: Path, files: Mapping[str, Path]) -> None:
    """Record in ``entry``'s ``CHECKSUMS`` the size and CRC32 of ``files`` (name in the entry -> the
    file now, e.g. a download's temporary file before it is renamed); the caller holds the entry's lock.

    Example: ``record_checksums(entry, {"data.split": Path(tmp)})``
    """
    _record(entry, {name: file_crc(path) for name, path in files.items()})


def recorded(entry: Path, name: str) -> bool:
    """Whether ``entry``'s ``CHECKSUMS`` records the file ``name`` (what its open checks).

    Example: ``recorded(entry, "data.split")`` -> ``True``
    """
    return name in (_read_checksums(entry) or {})


def record_written(entry: Path, name: str, size: int, crc: int) -> None:
    """Record in ``entry``'s ``CHECKSUMS`` the ``size`` and ``crc`` of its file ``name``, computed as
    it was written, and remember it as found as written when it is the only file ``entry`` records
    (the next open need not read it again); the caller holds the lock that guards ``entry``.

    Example: ``record_written(entry / "unpacked", "5f2d....unpacked", 35450293, 1886932297)``
    """
    if list(_record(entry, {name: (size, crc)})) == [name]:
        _remember_now(entry, name)


def remember_as_written(entry: Path, name: str) -> None:
    """Remember ``entry``'s file ``name`` as found as written now, when it is the only file the entry
    records and its size and CRC32 were just computed from it (``record_checksums`` of a download,
    ``record_written``): the open that follows need not read it again. The caller holds the entry's lock.

    Example: ``remember_as_written(entry, "data.split")`` after the download's rename
    """
    if list(_read_checksums(entry) or {}) == [name]:
        _remember_now(entry, name)


def _remember_now(entry: Path, name: str) -> None:
    stats = _stats(entry, [CHECKSUMS, name])
    if stats:
        _remember(entry, stats, time.time())


def damaged_files(entry: Path, required: str | None = DATA_FILE) -> list[str]:
    """The files of a whole-split entry that differ from their recorded size and CRC32 (``CHECKSUMS``;
    a missing or unreadable record, or a missing record of ``required``, names ``CHECKSUMS`` itself).
    Any directory of files recorded so is checked the same way (``required=None``: no file must be).

    Every recorded file is read unless a check of this node found them as written less than
    ``REVERIFY_SECONDS`` ago and their inode, modification time and size are still what they were
    then (a ``stat`` each; see the module docstring).

    Example: ``damaged_files(cache.directory / "splits" / "c697…")`` -> ``[]``
    """
    record = _read_checksums(entry)
    if record is None or (required is not None and required not in record):
        return [CHECKSUMS]
    stats = _stats(entry, [CHECKSUMS, *record])
    if stats and _recently_verified(entry, stats):
        return []
    damaged = []
    for name, (size, crc) in record.items():
        try:
            if file_crc(entry / name) != (size, crc):
                damaged.append(name)
        except OSError:
            damaged.append(name)
    with _VERIFIED_LOCK:
        _VERIFIED.pop(entry, None)
    if stats and not damaged:
        _remember(entry, stats, time.time())
    return damaged


def _stats(entry: Path, names: list[str]) -> Stats:
    """The inode, modification time and size of each of ``names`` in ``entry``; () if one is missing."""
    try:
        return tuple((st.st_ino, st.st_mtime_ns, st.st_size) for st in (os.stat(entry / n) for n in names))
    except OSError:
        return ()


def _recently_verified(entry: Path, stats: Stats) -> bool:
    """Whether a check found ``entry``'s files as written, with these ``stats``, within the window:
    this process's memory first, then the entry's ``VERIFIED`` (a damaged or foreign one is ignored)."""
    now = time.time()
    with _VERIFIED_LOCK:
        seen = _VERIFIED.get(entry)
    if seen is not None and seen[0] == stats and 0 <= now - seen[1] < REVERIFY_SECONDS:
        return True
    try:
        memo = json.loads((entry / VERIFIED).read_text())
        at, recorded = float(memo["at"]), tuple(tuple(int(x) for x in s) for s in memo["stats"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if recorded != stats or not 0 <= now - at < REVERIFY_SECONDS:
        return False
    with _VERIFIED_LOCK:
        _VERIFIED[entry] = (stats, at)
    return True


def _remember(entry: Path, stats: Stats, at: float) -> None:
    with _VERIFIED_LOCK:
        _VERIFIED[entry] = (stats, at)
        while len(_VERIFIED) > 4096:
            _VERIFIED.pop(next(iter(_VERIFIED)))
    with contextlib.suppress(OSError):  # an entry evicted meanwhile, a read-only cache: the next process checks
        _write_json(entry / VERIFIED, {"stats": [list(s) for s in stats], "at": at})


def _record(entry: Path, sums: Mapping[str, tuple[int, int]]) -> dict[str, list[int]]:
    """``entry``'s ``CHECKSUMS`` with ``sums`` (name -> size, CRC32) added, written; the record now."""
    record = _read_checksums(entry) or {}
    record.update({name: list(sizes) for name, sizes in sums.items()})
    _write_json(entry / CHECKSUMS, record)
    return record


def _read_checksums(entry: Path) -> dict[str, list[int]] | None:
    try:
        record = json.loads((entry / CHECKSUMS).read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(record, dict) and all(
        isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v) for v in record.values()
    )
    return record if ok else None


def _write_json(path: Path, value: object) -> None:
    """``value`` as JSON at ``path``, replaced whole (readers never see half of it)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)
