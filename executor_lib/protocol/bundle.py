"""The Quickwit split bundle: the byte layout of a ``.split`` file. No tantivy here.

Layout (as IndexTables4Spark / tantivy4java write it)::

    [file 1][file 2]...[file n]                  the index files, concatenated
    [magic u32 LE][version u32 LE][offsets JSON] {"files": {name: {"start": s, "end": e}}}
    [u32 LE: length of magic+version+JSON]
    [hotcache bytes]
    [u32 LE: length of hotcache]

``footerStartOffset`` is where the magic starts and ``footerEndOffset`` the file size, so a
reader fetches the whole footer with one ranged read. This project writes an empty
hotcache (its readers do not use one).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from indextables_contract.errors import CorruptSplitError

BUNDLE_MAGIC = 0x1812BEAE  # the bytes ae be 12 18 found in real splits
BUNDLE_VERSION = 1
_U32 = struct.Struct("<I")
_COPY_CHUNK = 8 << 20


@dataclass(frozen=True)
class BundleFooter:
    """Where each file of a split lives, and where the footer is."""

    files: dict[str, tuple[int, int]]  # name -> (start, end)
    footer_start: int
    footer_end: int


def write_bundle(files: Mapping[str, bytes | Path], out: Path) -> BundleFooter:
    """Write ``files`` (contents, or local files copied in chunks) as one split bundle to ``out``.

    Returns its footer."""
    offsets: dict[str, tuple[int, int]] = {}
    position = 0
    with open(out, "wb") as f:
        for name, data in files.items():
            if isinstance(data, Path):
                with open(data, "rb") as source:
                    shutil.copyfileobj(source, f, _COPY_CHUNK)
                length = f.tell() - position
            else:
                f.write(data)
                length = len(data)
            offsets[name] = (position, position + length)
            position += length
        table = {"files": {n: {"start": s, "end": e} for n, (s, e) in offsets.items()}}
        header = _U32.pack(BUNDLE_MAGIC) + _U32.pack(BUNDLE_VERSION) + json.dumps(table).encode()
        f.write(header)
        f.write(_U32.pack(len(header)))
        f.write(_U32.pack(0))  # empty hotcache
        f.flush()
        os.fsync(f.fileno())
    end = position + len(header) + 8
    return BundleFooter(offsets, position, end)


def footer_length_hint() -> int:
    """How many tail bytes to fetch when footer offsets are unknown (footers are small)."""
    return 64 * 1024


def parse_footer(tail: bytes, file_size: int, source: str) -> BundleFooter:
    """Parse the footer from the last ``len(tail)`` bytes of a split of ``file_size`` bytes."""
    try:
        (hotcache_len,) = _U32.unpack(tail[-4:])
        end_of_header = len(tail) - 4 - hotcache_len
        (header_len,) = _U32.unpack(tail[end_of_header - 4 : end_of_header])
        header_start = end_of_header - 4 - header_len
        if header_start < 0:
            raise CorruptSplitError(f"{source}: split footer is longer than the bytes read ({len(tail)})")
        header = tail[header_start : end_of_header - 4]
        (magic,) = _U32.unpack(header[:4])
        if magic != BUNDLE_MAGIC:
            raise CorruptSplitError(f"{source}: not a split bundle (magic 0x{magic:08x})")
        table = json.loads(header[8:])
        files = {name: (int(r["start"]), int(r["end"])) for name, r in table["files"].items()}
    except CorruptSplitError:
        raise
    except (struct.error, ValueError, KeyError, TypeError) as e:
        raise CorruptSplitError(f"{source}: split footer does not parse ({type(e).__name__}: {e})") from e
    footer_start = file_size - len(tail) + header_start
    if any(s < 0 or e < s or e > footer_start for s, e in files.values()):
        raise CorruptSplitError(f"{source}: split footer lists file ranges outside the data section")
    return BundleFooter(files, footer_start, file_size)


def read_footer(path: Path) -> BundleFooter:
    """The footer of a local split file."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        f.seek(max(0, size - footer_length_hint()))
        tail = f.read()
    footer = parse_footer(tail, size, str(path))
    return footer


def extract_bundle(path: Path, footer: BundleFooter, dest: Path) -> None:
    """Lay the index files of a local split out in ``dest`` (tantivy opens a directory)."""
    dest.mkdir(parents=True, exist_ok=True)
    with open(path, "rb") as f:
        for name, (start, end) in footer.files.items():
            if "/" in name or name in ("", ".", ".."):
                raise CorruptSplitError(f"{path}: split lists an invalid file name {name!r}")
            f.seek(start)
            data = f.read(end - start)
            if len(data) != end - start:
                raise CorruptSplitError(f"{path}: split is truncated (file {name!r} ends past the data)")
            (dest / name).write_bytes(data)


def read_member(path: Path, footer: BundleFooter, name: str) -> bytes | None:
    """One file of the bundle, or None if the split does not hold it."""
    if name not in footer.files:
        return None
    start, end = footer.files[name]
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)
