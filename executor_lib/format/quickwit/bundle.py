"""The Quickwit split bundle: the byte layout of a ``.split`` file. No tantivy here.

Layout (as IndexTables4Spark / tantivy4java write it)::

    [file 1][file 2]...[file n]                  the index files, concatenated
    [magic u32 LE][version u32 LE][offsets JSON] {"files": {name: {"start": s, "end": e}}}
    [u32 LE: length of magic+version+JSON]
    [hotcache bytes]
    [u32 LE: length of hotcache]

``footerStartOffset`` is where the magic starts and ``footerEndOffset`` the file size, so a
reader fetches the whole footer with one ranged read.

The hotcache (``hotcache.py``: format, parser, and what is cached) is what Quickwit's
``HotDirectory`` opens the index through: it lists the length of every Tantivy file of the
split and caches the ranges Tantivy reads on open. ``write_bundle`` builds one for every split;
this project's own readers do not use it (they read the bundle metadata and the members).
"""

from __future__ import annotations

import functools
import json
import math
import mmap
import os
import re
import struct
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from executor_lib.format.directory import file_footer, footer_version, split_footer
from executor_lib.format.quickwit.hotcache import HotCache, build_hotcache, check_slices, parse_hotcache
from indextables_contract.errors import CorruptSplitError

BUNDLE_MAGIC = 0x1812BEAE  # the bytes ae be 12 18 found in real splits
BUNDLE_VERSION = 1
_U32 = struct.Struct("<I")
_COPY_CHUNK = 8 << 20
# A member "<segment>.term.fst" (in splits of earlier versions of this project) holds the FST term dictionaries of
# "<segment>.term" (which holds them as SSTables for IndexTables4Spark): extracted, it becomes
# "<segment>.term". Without it, "<segment>.term" is laid out as "<segment>.term.sstable" and the
# "<segment>.term" the tantivy package opens is built from it, field by field as queries need them,
# starting empty (format/termdict/convert.py: ensure_fst_terms).
LOCAL_TERM_SUFFIX = ".term.fst"
TERM_SUFFIX = ".term"
LOCAL_SSTABLE_SUFFIX = ".term.sstable"
STORE_SUFFIX = ".store"
LOCAL_STORE_SUFFIX = ".docstore"  # a doc store laid out aside (``local_files``)
# Local files laid out aside, each with a stand-in under the member's name (``stand_in``).
ASIDE_SUFFIXES = (LOCAL_STORE_SUFFIX, LOCAL_SSTABLE_SUFFIX)
STORE_TAIL_BYTES = 64 << 10  # holds a doc store's Tantivy footer (its JSON is at most 50,000 bytes)
# A doc store's footer (format/store/blocks.py): version, skip index offset, compressor id, 15 reserved bytes.
DOC_STORE_FOOTER = struct.Struct("<IQB15x")
# A split that keeps its rows in its doc stores (no columnar copy) names their Arrow schema here
# (splits/write/writer.py, splits/rows/doc_store_rows.py).
ROWS_IN_STORE_MEMBER = "indextables.docstore-rows.arrow"
# The CRC32 of every CHECKSUM_CHUNK bytes of each member: {"chunk": 16384, "crc32": {member: [crc of
# chunk 0, ...]}, "segments": {segment file: [...]}}. "crc32" lists every member that is not a Tantivy
# segment file; "segments" (added later: splits written before have none, and older readers ignore it)
# lists the segment files, whose own footers hold only the CRC32 of their whole body, which a split
# fetched by the piece cannot check. Written last of the members by ``write_bundle``; a split without it
# (written before) is not checked.
CHECKSUMS_MEMBER = "indextables.checksums.json"
CHECKSUM_CHUNK = 16 << 10


@dataclass(frozen=True)
class BundleFooter:
    """Where each file of a split lives, and where the footer is."""

    files: dict[str, tuple[int, int]]  # name -> (start, end)
    footer_start: int
    footer_end: int


@dataclass(frozen=True)
class FileRange:
    """Bytes ``start`` to ``end`` of a local file: a member of another bundle, copied as it is."""

    path: Path
    start: int
    end: int

    def read_bytes(self) -> bytes:
        """The range's bytes (as ``Path.read_bytes`` of a whole file)."""
        with open(self.path, "rb") as f:
            f.seek(self.start)
            return f.read(self.end - self.start)


def copy_range(source: int, dest: int, start: int, length: int) -> None:
    """Copy ``length`` bytes at ``start`` of the file ``source`` to the current position of ``dest``
    (file descriptors), in the kernel where it can (``copy_file_range``: no pass through Python's
    memory; a reflink on file systems that share extents), else in chunks."""
    done = 0
    copy_file_range = getattr(os, "copy_file_range", None)
    while copy_file_range is not None and done < length:
        try:
            n = copy_file_range(source, dest, length - done, start + done)
        except OSError:  # EXDEV, ENOSYS, EINVAL on some file systems: copy the rest in chunks
            break
        if n == 0:
            raise CorruptSplitError(f"copying a split member: the source ends {length - done} bytes early")
        done += n
    while done < length:
        chunk = os.pread(source, min(_COPY_CHUNK, length - done), start + done)
        if not chunk:
            raise CorruptSplitError(f"copying a split member: the source ends {length - done} bytes early")
        _write_all(dest, chunk)
        done += len(chunk)


def write_bundle(files: Mapping[str, bytes | Path | FileRange], out: Path, checksums: bool = True) -> BundleFooter:
    """Write ``files`` (contents, local files, or ranges of local files, copied in the kernel) as
    one split bundle to ``out``, then (``checksums``) the ``CHECKSUMS_MEMBER`` of its members, with
    its hotcache (``hotcache.build_hotcache``: built from the members' lengths and the few ranges it
    caches, read back from the written file). Returns its footer.

    Raises:
        ValueError: ``files`` holds a ``meta.json`` that is not a Tantivy ``meta.json``.
    """
    offsets: dict[str, tuple[int, int]] = {}
    position = 0
    with open(out, "wb+", buffering=0) as f:
        last = [(CHECKSUMS_MEMBER, None)] if checksums else []
        for name, data in [*((n, d) for n, d in files.items() if n != CHECKSUMS_MEMBER), *last]:
            if data is None:  # last: the CRC32s of the members written before
                reader = _member_reader(f.fileno(), offsets)
                crcs = {n: chunk_crcs(functools.partial(reader, n), e - s) for n, (s, e) in offsets.items()}
                sums = {
                    "chunk": CHECKSUM_CHUNK,
                    "crc32": {n: c for n, c in crcs.items() if is_checksummed(n)},
                    "segments": {n: c for n, c in crcs.items() if is_segment_file(n)},
                }
                data = json.dumps(sums, separators=(",", ":")).encode()
            if isinstance(data, bytes):
                _write_all(f.fileno(), data)
                length = len(data)
            else:
                part = data if isinstance(data, FileRange) else FileRange(data, 0, data.stat().st_size)
                length = part.end - part.start
                with open(part.path, "rb", buffering=0) as source:
                    copy_range(source.fileno(), f.fileno(), part.start, length)
            offsets[name] = (position, position + length)
            position += length
        hot = build_hotcache({n: e - s for n, (s, e) in offsets.items()}, _member_reader(f.fileno(), offsets))
        table = {"files": {n: {"start": s, "end": e} for n, (s, e) in offsets.items()}}
        header = _U32.pack(BUNDLE_MAGIC) + _U32.pack(BUNDLE_VERSION) + json.dumps(table).encode()
        _write_all(f.fileno(), header + _U32.pack(len(header)) + hot + _U32.pack(len(hot)))
        os.fsync(f.fileno())
    end = position + len(header) + 4 + len(hot) + 4
    return BundleFooter(offsets, position, end)


def _member_reader(fd: int, offsets: Mapping[str, tuple[int, int]]) -> Callable[[str, int, int], bytes]:
    """``read(name, start, stop)`` over the members already written to ``fd``."""

    def read(name: str, start: int, stop: int) -> bytes:
        base, end = offsets[name]
        if not 0 <= start <= stop <= end - base:
            raise ValueError(f"{name}: range {start}..{stop} outside the member ({end - base} bytes)")
        return os.pread(fd, stop - start, base + start)

    return read


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def footer_length_hint() -> int:
    """How many tail bytes to fetch first when footer offsets are unknown (footers are small;
    ``footer_length_needed`` says whether a larger one needs more)."""
    return 64 * 1024


def footer_length_needed(tail: bytes, file_size: int) -> int:
    """How many bytes from the end of a split of ``file_size`` bytes its footer (bundle metadata
    and hotcache) spans, as far as its last ``len(tail)`` bytes tell. More than ``len(tail)``
    means: read that many and ask again (where the metadata's length is not in ``tail`` yet, the
    answer adds ``footer_length_hint()`` for it, so a second read mostly suffices).

    Example:
        >>> footer_length_needed(struct.pack("<II", 0, 3000), 10**6)  # a 3000-byte hotcache
        68544
    """
    if len(tail) < 8:
        return min(file_size, footer_length_hint())
    (hotcache_len,) = _U32.unpack(tail[-4:])
    if len(tail) < 8 + hotcache_len:
        return min(file_size, 8 + hotcache_len + footer_length_hint())
    (header_len,) = _U32.unpack(tail[len(tail) - 8 - hotcache_len : len(tail) - 4 - hotcache_len])
    return min(file_size, 8 + hotcache_len + header_len)


def hotcache_in(tail: bytes) -> bytes | None:
    """The hotcache of a split whose last bytes are ``tail`` (without its trailing u32 length), or None
    when ``tail`` does not hold all of it.

    Example:
        >>> hotcache_in(b"footer" + b"hot" + struct.pack("<I", 3)), hotcache_in(struct.pack("<I", 9))
        (b'hot', None)
    """
    if len(tail) < 4:
        return None
    (length,) = _U32.unpack(tail[-4:])
    return tail[len(tail) - 4 - length : -4] if length <= len(tail) - 4 else None


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
    damaged = next((name for name in files if _damaged_checksums_name(name)), None)
    if damaged is not None:  # a flipped bit in the name would turn the member checks off silently
        raise CorruptSplitError(
            f"{source}: split footer names a member {damaged!r}, a damaged {CHECKSUMS_MEMBER} (differs in "
            f"{sum(a != b for a, b in zip(damaged, CHECKSUMS_MEMBER, strict=True))} of its characters)"
        )
    return BundleFooter(files, footer_start, file_size)


def _damaged_checksums_name(name: str) -> bool:
    """Whether ``name`` is ``CHECKSUMS_MEMBER`` with one or two characters changed (a flipped bit or two
    in the footer). No member of a split, this project's or IndexTables4Spark's, is named so otherwise."""
    if len(name) != len(CHECKSUMS_MEMBER) or name == CHECKSUMS_MEMBER:
        return False
    return sum(a != b for a, b in zip(name, CHECKSUMS_MEMBER, strict=True)) <= 2


def read_footer(path: Path) -> BundleFooter:
    """The footer of a local split file."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        tail = os.pread(f.fileno(), min(size, footer_length_hint()), max(0, size - footer_length_hint()))
        for _ in range(3):
            needed = footer_length_needed(tail, size)
            if needed <= len(tail):
                break
            tail = os.pread(f.fileno(), needed, size - needed)
    return parse_footer(tail, size, str(path))


_SEGMENT_FILE = re.compile(r"^[0-9a-f]{32}\.(idx|pos|term|fieldnorm|fast|store)$")  # files ending in a Tantivy footer


def check_member_crcs(path: Path, footer: BundleFooter, source: str) -> None:
    """Check every segment file of a local split (``.idx .pos .term .fieldnorm .fast .store``) against
    its Tantivy file footer's CRC32 of its body (memory-mapped, no copy; about 2 GB/s). Tantivy itself
    reads these files by the slice and never checks them. Every other member against its chunks' CRC32s
    (``CHECKSUMS_MEMBER``, ``check_checksums``), and the hotcache against the members (``check_hotcache``).

    Raises:
        CorruptSplitError: a file's footer does not parse or its CRC differs, a chunk's CRC32 differs, the
            hotcache differs (names ``source`` and the member).
    """
    damaged = None
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped, memoryview(mapped) as view:
        other = check_checksums(view, footer, source)  # the members that are not segment files
        for name, (start, end) in footer.files.items():
            if not _SEGMENT_FILE.match(name):
                continue
            with view[start:end] as member:
                tail = bytes(member[-min(len(member), STORE_TAIL_BYTES) :])  # holds the footer (JSON <= 50,000 bytes)
                file = split_footer(tail, f"{source}: {name}")
                with member[: len(member) - (len(tail) - len(file.body))] as body:
                    if zlib.crc32(body) != file.crc:
                        damaged = name
                        break
    if damaged is not None:  # raised with the mapping closed
        raise CorruptSplitError(f"{source}: member {damaged} does not match its Tantivy footer's CRC32 (damaged)")
    if other is not None:
        raise CorruptSplitError(f"{source}: member {other} (damaged)")
    check_hotcache(path, footer, source)


def check_hotcache(path: Path, footer: BundleFooter, source: str) -> None:
    """Check a local split's hotcache against its members (``hotcache.check_slices``): every cached
    slice equals the member bytes it claims (the JVM's reads are served from it), every listed length
    is its member's.

    Raises:
        CorruptSplitError: the hotcache does not parse, or differs from a member (names ``source`` and it).
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        (length,) = _U32.unpack(os.pread(f.fileno(), 4, max(0, size - 4)).rjust(4, b"\0"))
        if size < 4 + length or size - 4 - length < footer.footer_start:
            raise CorruptSplitError(f"{source}: hotcache of {length} bytes does not fit after the split's footer")
        cache = parse_hotcache(os.pread(f.fileno(), length, size - 4 - length), source)
        check_slices(cache, footer.files, lambda start, end: os.pread(f.fileno(), end - start, start), source)


def is_checksummed(name: str) -> bool:
    """Whether ``CHECKSUMS_MEMBER`` lists a member: every member but segment files and itself."""
    return name != CHECKSUMS_MEMBER and not is_segment_file(name)


def chunk_crcs(read: Callable[[int, int], bytes], length: int) -> list[int]:
    """The CRC32 of each ``CHECKSUM_CHUNK`` bytes of a member of ``length`` bytes (``read(start, stop)``)."""
    return [zlib.crc32(read(k, min(length, k + CHECKSUM_CHUNK))) for k in range(0, length, CHECKSUM_CHUNK)]


def parse_checksums(data: bytes, files: Mapping[str, tuple[int, int]], source: str) -> dict[str, list[int]]:
    """The chunk CRC32s of ``CHECKSUMS_MEMBER`` (member -> one per chunk), checked against the split's
    members ``files`` (bundle names): every member it must list is listed, with one CRC per chunk. Segment
    files are in it when the split was written with their chunks (``"segments"``), all of them.

    Raises:
        CorruptSplitError: it does not parse or does not fit the members (names ``source``).
    """
    try:
        table = json.loads(data)
        crcs = {str(n): [int(c) for c in cs] for n, cs in table["crc32"].items()}
        segments = {str(n): [int(c) for c in cs] for n, cs in table.get("segments", {}).items()}
        if table["chunk"] != CHECKSUM_CHUNK:
            raise ValueError(f"chunk size {table['chunk']!r}, not {CHECKSUM_CHUNK}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CorruptSplitError(f"{source}: member {CHECKSUMS_MEMBER} does not parse ({type(e).__name__}: {e})") from e
    for listed, kind, of_kind in ((crcs, "crc32", is_checksummed), (segments, "segments", is_segment_file)):
        if kind == "segments" and "segments" not in table:
            continue  # written before segment files had chunks
        for name, (start, end) in files.items():
            if of_kind(name) and len(listed.get(name, ())) != math.ceil((end - start) / CHECKSUM_CHUNK):
                raise CorruptSplitError(
                    f"{source}: member {CHECKSUMS_MEMBER} does not list the {end - start}-byte member {name} (damaged)"
                )
        unknown = sorted(set(listed) - {n for n in files if of_kind(n)})
        if unknown:
            raise CorruptSplitError(f"{source}: member {CHECKSUMS_MEMBER} lists {unknown[0]!r}, not a member (damaged)")
    return crcs | segments


def check_checksums(view: memoryview, footer: BundleFooter, source: str) -> str | None:
    """The first member of a whole split (``view``: its bytes) whose chunks differ from
    ``CHECKSUMS_MEMBER``, or None (also for a split written before it).

    Raises:
        CorruptSplitError: ``CHECKSUMS_MEMBER`` does not parse or fit (``parse_checksums``).
    """
    if CHECKSUMS_MEMBER not in footer.files:
        return None
    start, end = footer.files[CHECKSUMS_MEMBER]
    crcs = parse_checksums(bytes(view[start:end]), footer.files, source)
    for name, expected in crcs.items():
        if not is_checksummed(name):
            continue  # a segment file: a whole one is checked against its own footer (check_member_crcs)
        base, stop = footer.files[name]
        for k, crc in enumerate(expected):
            chunk_start = base + k * CHECKSUM_CHUNK
            with view[chunk_start : min(stop, chunk_start + CHECKSUM_CHUNK)] as chunk:
                if zlib.crc32(chunk) != crc:
                    return f"{name}: bytes {k * CHECKSUM_CHUNK}.. differ from the split's {CHECKSUMS_MEMBER}"
    return None


def is_segment_file(name: str) -> bool:
    """Whether a member is a segment file ending in a Tantivy footer with the CRC32 of its body."""
    return _SEGMENT_FILE.match(name) is not None


def check_tantivy_crc(data: bytes | memoryview, source: str) -> None:
    """Check a whole Tantivy segment file's body against its footer's CRC32.

    Raises:
        CorruptSplitError: the footer does not parse or the CRC differs (names ``source``).
    """
    tail = bytes(data[-min(len(data), STORE_TAIL_BYTES) :])
    file = split_footer(tail, source)
    if zlib.crc32(data[: len(data) - (len(tail) - len(file.body))]) != file.crc:
        raise CorruptSplitError(f"{source} does not match its Tantivy footer's CRC32 (damaged)")


def check_stand_ins(index_dir: Path, source: str) -> None:
    """Check the files a cache entry builds beside members laid out aside (``stand_in``), and the FST
    ``.term`` files built from SSTable ones (``format/termdict/convert.py``), against their Tantivy
    footers' CRC32s: no member's CRC or chunk checksum covers them (read at every open of the index).

    Raises:
        CorruptSplitError: a file differs from its CRC32 (names ``source`` and the file).
    """
    for aside in ASIDE_SUFFIXES:
        for laid_out in index_dir.glob(f"*{aside}"):
            built = stand_in_name(laid_out.name)
            try:
                data = (index_dir / built).read_bytes()
            except FileNotFoundError:
                continue
            check_tantivy_crc(data, f"{source}: {built} (built in the cache entry)")


def stand_in_name(local: str) -> str:
    """The file a local directory holds beside ``local``, a member laid out aside (``stand_in``)."""
    if local.endswith(LOCAL_STORE_SUFFIX):
        return local[: -len(LOCAL_STORE_SUFFIX)] + STORE_SUFFIX
    return local[: -len(LOCAL_SSTABLE_SUFFIX)] + TERM_SUFFIX


def read_hotcache(path: Path) -> HotCache:
    """The parsed hotcache of a local split.

    Raises:
        CorruptSplitError: the split is shorter than its hotcache says, or the hotcache does not
            parse (``hotcache.parse_hotcache``); the message names ``path``.
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        (length,) = _U32.unpack(os.pread(f.fileno(), 4, max(0, size - 4)).rjust(4, b"\0"))
        if size < 4 + length:
            raise CorruptSplitError(f"{path}: hotcache of {length} bytes does not fit in the {size}-byte split")
        return parse_hotcache(os.pread(f.fileno(), length, size - 4 - length), str(path))


def local_files(files: Mapping[str, tuple[int, int]], stores_aside: bool = True) -> dict[str, tuple[int, int]]:
    """The index files a local directory of the split holds, by name -> the member's range: a member
    ``<segment>.term.fst`` (``LOCAL_TERM_SUFFIX``) under the name ``<segment>.term``, in place of that
    member's SSTable dictionaries, which the ``tantivy`` package cannot read; a ``<segment>.term``
    without it as ``<segment>.term.sstable`` (``LOCAL_SSTABLE_SUFFIX``: ``<segment>.term`` is then
    ``empty_term_file``, filled from it as queries need); with ``stores_aside``,
    each doc store ``<segment>.store`` under the name ``<segment>.docstore`` (``LOCAL_STORE_SUFFIX``:
    the ``tantivy`` package cannot read zstd doc stores, and searches here never read rows through
    it; ``<segment>.store`` is then ``empty_doc_store``); every other member as is."""
    out: dict[str, tuple[int, int]] = {}
    for name, span in files.items():
        if name.endswith(TERM_SUFFIX):
            if name + ".fst" not in files:  # its FST version is built from it (``empty_term_file``)
                out[name[: -len(TERM_SUFFIX)] + LOCAL_SSTABLE_SUFFIX] = span
            continue  # else the SSTable version of the FST member, which is laid out under this name
        if stores_aside and name.endswith(STORE_SUFFIX):
            out[name[: -len(STORE_SUFFIX)] + LOCAL_STORE_SUFFIX] = span
            continue
        out[name[: -len(".fst")] if name.endswith(LOCAL_TERM_SUFFIX) else name] = span
    return out


def member_name(local: str) -> str:
    """The bundle member a file of a local directory (``local_files``) holds."""
    if local.endswith(LOCAL_STORE_SUFFIX):
        return local[: -len(LOCAL_STORE_SUFFIX)] + STORE_SUFFIX
    if local.endswith(LOCAL_SSTABLE_SUFFIX):
        return local[: -len(LOCAL_SSTABLE_SUFFIX)] + TERM_SUFFIX
    return local


# A composite file of no slice: VInt 0 entries, then the u32 length (1) of that footer.
EMPTY_COMPOSITE = b"\x80" + _U32.pack(1)


def empty_term_file(sstable_tail: bytes, source: str) -> bytes:
    """A ``.term`` file of no field's dictionary, with the Tantivy version of the SSTable ``.term``
    file whose last bytes are ``sstable_tail``: what a local directory holds as ``<segment>.term``
    beside ``<segment>.term.sstable`` until queries need fields' dictionaries
    (``format/termdict/convert.py``). A query on a field still missing fails (Tantivy: "Failed to open
    field's term dictionary"); it never finds nothing.

    Raises:
        CorruptSplitError: ``sstable_tail`` does not end with a Tantivy footer (names ``source``).
    """
    version = footer_version(sstable_tail, "term dictionary", source)
    return EMPTY_COMPOSITE + file_footer(version, zlib.crc32(EMPTY_COMPOSITE))


def stand_in(local: str, tail: bytes, source: str) -> tuple[str, bytes]:
    """The file a local directory holds beside a member laid out aside (``local_files``; ``local``
    ends with one of ``ASIDE_SUFFIXES``), given the member's last bytes: ``empty_doc_store`` as
    ``<segment>.store`` for ``<segment>.docstore``, ``empty_term_file`` as ``<segment>.term`` for
    ``<segment>.term.sstable``.

    Raises:
        CorruptSplitError: as those (names ``source``).
    """
    if local.endswith(LOCAL_STORE_SUFFIX):
        return stand_in_name(local), empty_doc_store(tail, source)
    return stand_in_name(local), empty_term_file(tail, source)


def empty_doc_store(store_tail: bytes, source: str) -> bytes:
    """A doc store of no block, lz4 (which the ``tantivy`` package reads), with the Tantivy version
    of the real store whose last bytes are ``store_tail`` (at least its Tantivy footer): what a
    local directory holds as ``<segment>.store`` beside the real ``<segment>.docstore``. Searches
    never read documents there (a read of one fails; it never returns a wrong row).

    Layout (``format/store/blocks.py``): an empty skip index (VInt 0: ``0x80``), the doc store footer
    (version 2, skip index at 0, compressor 1 = lz4, 15 reserved bytes), the Tantivy footer.

    Raises:
        CorruptSplitError: ``store_tail`` does not end with a Tantivy footer (names ``source``).
    """
    version = footer_version(store_tail, "doc store", source)
    body = b"\x80" + DOC_STORE_FOOTER.pack(2, 0, 1)  # no layer; version 2, skip index at 0, lz4
    return body + file_footer(version, zlib.crc32(body))


def extract_bundle(
    path: Path, footer: BundleFooter, dest: Path, stores_aside: bool = True, copy_stores: bool = True
) -> None:
    """Lay the index files of a local split out in ``dest`` (tantivy opens a directory), under their
    local names (``local_files``), with their ``stand_in``s: an ``empty_term_file`` as the ``.term``
    of each segment whose FST dictionaries are built here; with ``stores_aside``, an
    ``empty_doc_store`` as each segment's ``.store``. Without it, the doc stores are where the
    ``tantivy`` package reads them (a split whose rows are read through it: IndexTables4Spark's,
    transcoded). Without ``copy_stores`` (with ``stores_aside``), the doc stores laid aside are not
    copied: their reader maps them in the split file itself."""
    dest.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size
    with open(path, "rb", buffering=0) as f:
        for name, (start, end) in local_files(footer.files, stores_aside).items():
            if "/" in name or name in ("", ".", ".."):
                raise CorruptSplitError(f"{path}: split lists an invalid file name {name!r}")
            if end > size:
                raise CorruptSplitError(f"{path}: split is truncated (file {name!r} ends past the data)")
            if copy_stores or not name.endswith(LOCAL_STORE_SUFFIX):
                with open(dest / name, "wb", buffering=0) as out:
                    copy_range(f.fileno(), out.fileno(), start, end - start)
            if name.endswith(ASIDE_SUFFIXES):
                tail_len = min(end - start, STORE_TAIL_BYTES)
                tail = os.pread(f.fileno(), tail_len, end - tail_len)
                stand_in_name, data = stand_in(name, tail, f"{path}: {member_name(name)}")
                (dest / stand_in_name).write_bytes(data)


def read_member(path: Path, footer: BundleFooter, name: str) -> bytes | None:
    """One file of the bundle, or None if the split does not hold it."""
    if name not in footer.files:
        return None
    start, end = footer.files[name]
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(end - start)
