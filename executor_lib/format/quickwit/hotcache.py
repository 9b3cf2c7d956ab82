"""The split hotcache: the bytes Quickwit's ``HotDirectory`` opens a split's index through.

This module owns the hotcache's byte format (reading and writing) and the choice of what a split
written here caches. Standard library only; no tantivy.

Layout (little-endian), as the Quickwit fork that IndexTables4Spark uses reads it
(``quickwit-directories/src/hot_directory.rs``: ``StaticDirectoryCache::open``,
``StaticSliceCache::open``; header from ``quickwit-storage/src/versioned_component.rs``)::

    [u32 magic = 2557869106][u32 version = 1]
    [u32 n][n bytes: postcard HotDirectoryMeta {file_lengths: map path -> u64,
                                                 slice_offsets: list of (path, u64)}]
    [slice cache of file 1][slice cache of file 2]...     (file i's starts at slice_offsets[i])

    slice cache = [body][postcard SliceCacheIndex {total_len: u64,
                                                   slices: list of {start, stop, addr}}]
                  [u64 LE: body length]

Bytes ``start..stop`` of the file sit at ``addr..addr + (stop - start)`` of the body. Postcard
writes integers as LEB128 varints, strings and paths as a varint byte length then UTF-8, and maps
and lists as a varint count then their items.

What a split written here caches (``choose_ranges``) is described there.
"""

from __future__ import annotations

import itertools
import json
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from executor_lib.format.directory import FOOTER_MAGIC, composite_addresses
from indextables_contract.errors import CorruptSplitError

HOTCACHE_MAGIC = 2_557_869_106
HOTCACHE_VERSION = 1
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_U64_MAX = (1 << 64) - 1

META_JSON = "meta.json"
MANAGED_JSON = ".managed.json"
# A segment's files: <segment id>.<ext> (Tantivy's SegmentComponent), plus <id>.<opstamp>.del.
SEGMENT_EXTENSIONS = ("idx", "pos", "term", "store", "fast", "fieldnorm")
_SSTABLE_DICTIONARY = 2  # the dictionary type of an SSTable term dictionary (1: FST)
# Files of at most this many bytes are cached whole (see ``choose_ranges``).
WHOLE_FILE_MAX_BYTES = 1024
# No single cached range is longer than this.
MAX_RANGE_BYTES = 64 * 1024
# Cached at the end of a segment file whose layout does not parse as expected.
SEGMENT_TAIL_BYTES = 128
_STORE_FOOTER_BYTES = 28  # DocStoreFooter: u32 version, u64 skip index offset, u8 codec, 15 zeros
_COLUMNAR_FOOTER_BYTES = 20  # u64 dictionary length, u32 rows, u32 version, 4 magic bytes


# ---------------------------------------------------------------------------------------------
# Postcard varints


class _Reader:
    """A cursor over bytes that reads postcard values; errors name ``where``."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.pos = 0
        self.where = where

    def fail(self, what: str) -> CorruptSplitError:
        return CorruptSplitError(f"{self.where}: {what} (at byte {self.pos} of {len(self.data)})")

    def varint(self, what: str) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.data):
                raise self.fail(f"truncated {what}")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                break
            shift += 7
            if shift >= 70:
                raise self.fail(f"{what} is a varint longer than 10 bytes")
        if value > _U64_MAX:
            raise self.fail(f"{what} does not fit in 64 bits")
        return value

    def text(self, what: str) -> str:
        length = self.varint(f"length of {what}")
        if length > len(self.data) - self.pos:
            raise self.fail(f"truncated {what} ({length} bytes announced)")
        raw = self.data[self.pos : self.pos + length]
        self.pos += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} is not UTF-8 ({e})") from e

    def end(self, what: str) -> None:
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} unexpected bytes after {what}")


def encode_varint(value: int) -> bytes:
    """Postcard's varint (LEB128) encoding of an unsigned integer below 2**64.

    Raises:
        ValueError: ``value`` is negative or does not fit in 64 bits.

    Example:
        >>> encode_varint(300)
        b'\\xac\\x02'
    """
    if not 0 <= value <= _U64_MAX:
        raise ValueError(f"varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _encode_text(text: str) -> bytes:
    raw = text.encode("utf-8")
    return encode_varint(len(raw)) + raw


# ---------------------------------------------------------------------------------------------
# The model


@dataclass(frozen=True)
class CachedSlice:
    """Bytes ``start`` to ``stop`` of a file, held in the hotcache."""

    start: int
    stop: int
    data: bytes


@dataclass(frozen=True)
class FileSliceCache:
    """The cached ranges of one file: sorted, non-overlapping, within ``total_len``."""

    total_len: int
    slices: tuple[CachedSlice, ...]

    def read(self, start: int, stop: int) -> bytes | None:
        """Bytes ``start..stop`` if one slice holds them all (as ``StaticSliceCache`` serves them)."""
        for piece in self.slices:
            if piece.start <= start and stop <= piece.stop:
                return piece.data[start - piece.start : stop - piece.start]
        return None

    def is_complete(self) -> bool:
        """Whether one slice holds the whole file (Quickwit then serves ``atomic_read`` from it)."""
        return len(self.slices) == 1 and self.slices[0].stop - self.slices[0].start == self.total_len


@dataclass(frozen=True)
class HotCache:
    """A parsed hotcache: the length of each listed file, and the cached slices of some of them.

    ``slice_caches`` keeps the order of the encoded ``slice_offsets``.
    """

    file_lengths: Mapping[str, int]
    slice_caches: Mapping[str, FileSliceCache]


def check_slices(
    cache: HotCache, members: Mapping[str, tuple[int, int]], read: Callable[[int, int], bytes], source: str
) -> None:
    """Check that every slice ``cache`` holds equals the bytes of the member it claims, and every
    length it lists is its member's: Quickwit's ``HotDirectory`` (the JVM's reads) serves a file's
    bytes from the hotcache where a slice holds them, so a damaged slice is wrong data there, though
    this project's reads never use the hotcache.

    Args:
        cache: the split's parsed hotcache.
        members: the split's members, name -> (start, end) in the split (``BundleFooter.files``).
        read: bytes ``start..end`` of the split.
        source: names the split in error messages.

    Raises:
        CorruptSplitError: a slice or length that differs from its member, or a member the split lacks
            (names ``source`` and the member).
    """
    for name, length in cache.file_lengths.items():
        if name not in members:
            raise CorruptSplitError(f"{source}: the hotcache lists member {name!r}, which the split does not hold")
        start, end = members[name]
        if length != end - start:
            raise CorruptSplitError(
                f"{source}: member {name}: the hotcache gives it {length} bytes, the split {end - start} "
                "(damaged hotcache)"
            )
    for name, file in cache.slice_caches.items():
        if name not in members:
            raise CorruptSplitError(f"{source}: the hotcache caches member {name!r}, which the split does not hold")
        offset = members[name][0]
        for piece in file.slices:
            if read(offset + piece.start, offset + piece.stop) != piece.data:
                raise CorruptSplitError(
                    f"{source}: member {name}: the hotcache's slice {piece.start}..{piece.stop} differs from the "
                    "member's bytes (damaged hotcache)"
                )


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_hotcache(data: bytes, source: str) -> HotCache:
    """Parse the hotcache bytes of a split (the region before its last 4 bytes).

    Stricter than Quickwit where it reads leniently (trailing bytes after a postcard value, a
    slice cache whose ``total_len`` differs from the listed file length): such bytes mean the
    writer and this reading of the format disagree.

    Args:
        data: the hotcache, without the trailing u32 length.
        source: names the split in error messages.

    Raises:
        CorruptSplitError: bad magic or version, truncated, undecodable postcard, or a slice that
            is unsorted, overlapping or out of its file or body; the message names ``source`` and,
            where it applies, the file.

    Example:
        >>> meta = b'{"segments": []}'
        >>> cache = parse_hotcache(build_hotcache({"meta.json": 16}, lambda n, s, e: meta[s:e]), "x")
        >>> cache.file_lengths["meta.json"], cache.slice_caches["meta.json"].read(0, 4)
        (16, b'{"se')
    """
    where = f"{source}: hotcache"
    if len(data) < 12:
        raise CorruptSplitError(f"{where} is truncated ({len(data)} bytes, the header needs 12)")
    magic, version, meta_len = struct.unpack_from("<III", data)
    if magic != HOTCACHE_MAGIC:
        raise CorruptSplitError(f"{where} has bad magic {magic} (expected {HOTCACHE_MAGIC})")
    if version != HOTCACHE_VERSION:
        raise CorruptSplitError(f"{where} has unsupported version {version} (expected {HOTCACHE_VERSION})")
    if 12 + meta_len > len(data):
        raise CorruptSplitError(f"{where} is truncated (metadata of {meta_len} bytes, {len(data) - 12} present)")
    file_lengths, offsets = _parse_meta(_Reader(data[12 : 12 + meta_len], f"{where} metadata"))
    region = data[12 + meta_len :]
    return HotCache(file_lengths, _parse_slice_caches(region, offsets, file_lengths, where))


def _parse_meta(reader: _Reader) -> tuple[dict[str, int], list[tuple[str, int]]]:
    file_lengths: dict[str, int] = {}
    for _ in range(reader.varint("file_lengths count")):
        path = reader.text("file_lengths path")
        if path in file_lengths:
            raise reader.fail(f"file_lengths lists {path!r} twice")
        file_lengths[path] = reader.varint(f"file_lengths[{path!r}]")
    offsets: list[tuple[str, int]] = []
    for _ in range(reader.varint("slice_offsets count")):
        path = reader.text("slice_offsets path")
        offsets.append((path, reader.varint(f"slice_offsets[{path!r}]")))
    reader.end("HotDirectoryMeta")
    return file_lengths, offsets


def _parse_slice_caches(
    region: bytes, offsets: list[tuple[str, int]], file_lengths: Mapping[str, int], where: str
) -> dict[str, FileSliceCache]:
    if not offsets:
        if region:
            raise CorruptSplitError(f"{where}: {len(region)} bytes of slice caches but no slice_offsets")
        return {}
    if offsets[0][1] != 0:
        raise CorruptSplitError(f"{where}: slice_offsets start at {offsets[0][1]}, not 0")
    caches: dict[str, FileSliceCache] = {}
    bounds = [offset for _, offset in offsets[1:]] + [len(region)]
    for (path, start), stop in zip(offsets, bounds, strict=True):
        file_where = f"{where}: slice cache of {path!r}"
        if path in caches:
            raise CorruptSplitError(f"{where}: slice_offsets lists {path!r} twice")
        if path not in file_lengths:
            raise CorruptSplitError(f"{file_where}: the file is not in file_lengths")
        if not start <= stop <= len(region):
            raise CorruptSplitError(f"{file_where} spans {start}..{stop}, outside the {len(region)}-byte region")
        cache = _parse_slice_cache(region[start:stop], file_where)
        if cache.total_len != file_lengths[path]:
            raise CorruptSplitError(
                f"{file_where}: total_len {cache.total_len} differs from file_lengths {file_lengths[path]}"
            )
        caches[path] = cache
    return caches


def _parse_slice_cache(data: bytes, where: str) -> FileSliceCache:
    if len(data) < 8:
        raise CorruptSplitError(f"{where} is truncated ({len(data)} bytes, at least 8 needed)")
    (body_len,) = _U64.unpack_from(data, len(data) - 8)
    if body_len > len(data) - 8:
        raise CorruptSplitError(f"{where}: body length {body_len} exceeds the {len(data) - 8} bytes present")
    body = data[:body_len]
    reader = _Reader(data[body_len : len(data) - 8], f"{where} index")
    total_len = reader.varint("total_len")
    slices: list[CachedSlice] = []
    for i in range(reader.varint("slices count")):
        start, stop, addr = (reader.varint(f"slices[{i}].{name}") for name in ("start", "stop", "addr"))
        _check_slice(i, start, stop, addr, total_len, body_len, slices[-1].stop if slices else 0, where)
        slices.append(CachedSlice(start, stop, body[addr : addr + stop - start]))
    reader.end("SliceCacheIndex")
    return FileSliceCache(total_len, tuple(slices))


def _check_slice(
    i: int, start: int, stop: int, addr: int, total_len: int, body_len: int, previous_stop: int, where: str
) -> None:
    if stop < start or stop > total_len:
        raise CorruptSplitError(f"{where}: slice {i} ({start}..{stop}) out of range of the file ({total_len} bytes)")
    if addr + (stop - start) > body_len:
        raise CorruptSplitError(f"{where}: slice {i} at body {addr}+{stop - start} runs past the body ({body_len})")
    if i and start < previous_stop:
        raise CorruptSplitError(f"{where}: slice {i} ({start}..{stop}) overlaps or precedes the one before")


# ---------------------------------------------------------------------------------------------
# Writing


def encode_hotcache(cache: HotCache) -> bytes:
    """The bytes of ``cache`` in the layout of the module docstring (``parse_hotcache`` inverts it).

    Files are listed sorted by name, each with a slice cache (possibly empty, as Quickwit's
    writer gives every listed file one).

    Raises:
        ValueError: a slice cache names a file not in ``file_lengths``, or its slices are
            unsorted, overlapping, out of the file, or their data is not ``stop - start`` bytes.

    Example:
        >>> encode_hotcache(HotCache({}, {}))[:8] == struct.pack("<II", HOTCACHE_MAGIC, 1)
        True
    """
    names = sorted(cache.file_lengths)
    unknown = set(cache.slice_caches) - set(names)
    if unknown:
        raise ValueError(f"slice caches for files not in file_lengths: {sorted(unknown)}")
    region = bytearray()
    offsets: list[tuple[str, int]] = []
    for name in names:
        empty = FileSliceCache(cache.file_lengths[name], ())
        offsets.append((name, len(region)))
        region += _encode_slice_cache(name, cache.slice_caches.get(name, empty))
    meta = bytearray(encode_varint(len(names)))
    for name in names:
        meta += _encode_text(name) + encode_varint(cache.file_lengths[name])
    meta += encode_varint(len(offsets))
    for name, offset in offsets:
        meta += _encode_text(name) + encode_varint(offset)
    return struct.pack("<III", HOTCACHE_MAGIC, HOTCACHE_VERSION, len(meta)) + bytes(meta) + bytes(region)


def _encode_slice_cache(name: str, cache: FileSliceCache) -> bytes:
    body = bytearray()
    index = bytearray(encode_varint(cache.total_len) + encode_varint(len(cache.slices)))
    previous_stop = 0
    for piece in cache.slices:
        if not previous_stop <= piece.start <= piece.stop <= cache.total_len:
            raise ValueError(f"{name}: slice {piece.start}..{piece.stop} unsorted, overlapping or out of the file")
        if len(piece.data) != piece.stop - piece.start:
            raise ValueError(f"{name}: slice {piece.start}..{piece.stop} holds {len(piece.data)} bytes")
        index += encode_varint(piece.start) + encode_varint(piece.stop) + encode_varint(len(body))
        body += piece.data
        previous_stop = piece.stop
    return bytes(body) + bytes(index) + _U64.pack(len(body))


def index_files(meta_json: bytes | None, members: Iterable[str]) -> list[str]:
    """The members of a split that belong to its Tantivy index, as Quickwit's
    ``list_index_files`` names them: ``meta.json``, ``.managed.json`` and each segment's
    component files (``<segment id>.<ext>``, ``<segment id>.<opstamp>.del``) that are present.

    Raises:
        ValueError: ``meta_json`` is not a Tantivy ``meta.json``.

    Example:
        >>> meta = b'{"segments": [{"segment_id": "0a-0b", "deletes": null}]}'
        >>> index_files(meta, ["meta.json", "0a0b.idx", "indextables.columns.arrow"])
        ['0a0b.idx', 'meta.json']
    """
    present = set(members)
    if meta_json is None:
        return []
    try:
        segments = json.loads(meta_json)["segments"]
        wanted = {META_JSON, MANAGED_JSON}
        for segment in segments:
            segment_id = str(segment["segment_id"]).replace("-", "")
            wanted.update(f"{segment_id}.{ext}" for ext in SEGMENT_EXTENSIONS)
            deletes = segment.get("deletes")
            if deletes:
                wanted.add(f"{segment_id}.{int(deletes['opstamp'])}.del")
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"meta.json does not describe a Tantivy index ({type(e).__name__}: {e})") from e
    return sorted(wanted & present)


def choose_ranges(name: str, length: int, read: Callable[[int, int], bytes]) -> list[tuple[int, int]]:
    """The byte ranges of index file ``name`` (``length`` bytes) that a split written here caches:
    sorted, non-overlapping, adjacent ones joined.

    Quickwit's ``write_hotcache`` records what Tantivy reads while it opens the index, a
    searcher, and the inverted index of every indexed field. Without tracing Tantivy from
    Python, this derives those reads from the file layouts (Tantivy's ``Footer::extract_footer``,
    ``CompositeFile::open``, ``InvertedIndexReader::new``, ``TermDictionary::open``,
    ``StoreReader::open``, ``ColumnarReader::open``):

    - ``meta.json`` and ``.managed.json`` whole (Tantivy reads them with ``atomic_read``), and any
      file of at most ``WHOLE_FILE_MAX_BYTES``;
    - every segment file's Tantivy footer (JSON + u32 length + u32 magic 1337);
    - ``.idx .pos .term .fieldnorm`` (composite files): the composite footer (each field's
      offset); per field, ``.idx`` its first 8 bytes (total token count) and ``.term`` what
      ``TermDictionary::open`` reads: of an SSTable dictionary its block index, footer and type
      (as the JVM's splits cache), of an FST one its last 16 bytes (dictionary type and FST footer);
    - ``.store``: the skip index and the doc store footer; ``.fast``: the column dictionary and
      the columnar footer.

    Not cached: a whole FST term dictionary, which ``TermDictionary::open`` of the ``tantivy``
    package reads (IndexTables4Spark's Tantivy refuses FST dictionaries; splits written here give
    it SSTable ones, ``format/termdict/convert.py``). No range above ``MAX_RANGE_BYTES`` is cached.
    Where a layout does not parse as expected, the last ``SEGMENT_TAIL_BYTES`` are cached instead.
    A read the cache misses goes to the split itself, so a missing range costs a read, never a
    wrong answer. The real IndexTables4Spark splits cache the same shape (small files whole,
    footers and the indexes before them).

    Args:
        name: the file's name in the bundle.
        length: its byte length.
        read: ``read(start, stop)`` returns those bytes of the file.

    Example:
        >>> choose_ranges("meta.json", 9000, lambda s, e: b"")
        [(0, 9000)]
    """
    if name in (META_JSON, MANAGED_JSON) or length <= WHOLE_FILE_MAX_BYTES:
        return [(0, length)]
    try:
        ranges = _layout_ranges(name.rsplit(".", 1)[-1], length, read)
    except (ValueError, struct.error):
        ranges = [(max(0, length - SEGMENT_TAIL_BYTES), length)]
    return _join(r for r in ranges if r[1] - r[0] <= MAX_RANGE_BYTES)


def _layout_ranges(ext: str, length: int, read: Callable[[int, int], bytes]) -> list[tuple[int, int]]:
    json_len, magic = struct.unpack("<II", read(length - 8, length))
    body_end = length - 8 - json_len
    if magic != FOOTER_MAGIC or body_end < 0:
        raise ValueError("no Tantivy footer")
    ranges = [(body_end, length)]
    if ext in ("idx", "pos", "term", "fieldnorm"):
        ranges += _composite_ranges(ext, body_end, read)
    elif ext == "store":
        store_footer = body_end - _STORE_FOOTER_BYTES
        (index_start,) = struct.unpack("<Q", read(store_footer + 4, store_footer + 12))
        ranges.append(_checked(index_start, body_end, body_end))
    elif ext == "fast":
        columnar_footer = body_end - _COLUMNAR_FOOTER_BYTES
        (dict_len,) = struct.unpack("<Q", read(columnar_footer, columnar_footer + 8))
        ranges.append(_checked(columnar_footer - dict_len, body_end, body_end))
    return ranges


def _composite_ranges(ext: str, body_end: int, read: Callable[[int, int], bytes]) -> list[tuple[int, int]]:
    (footer_len,) = struct.unpack("<I", read(body_end - 4, body_end))
    footer_start = body_end - 4 - footer_len
    _checked(footer_start, body_end, body_end)
    ranges = [(footer_start, body_end)]
    fields = [*_composite_offsets(read(footer_start, body_end - 4)), footer_start]
    for start, stop in itertools.pairwise(fields):
        _checked(start, stop, footer_start)
        if ext == "idx":
            ranges.append((start, min(stop, start + 8)))
        elif ext == "term":
            ranges.append(_term_dictionary_tail(start, stop, read))
    return ranges


def _term_dictionary_tail(start: int, stop: int, read: Callable[[int, int], bytes]) -> tuple[int, int]:
    """What ``TermDictionary::open`` reads of one field's dictionary (``start..stop`` of ``.term``):
    for an SSTable (type 2 in its last 4 bytes) its block index, footer and type, from
    ``index_offset`` (the u64 24 bytes before the end) on, as the JVM's splits cache; for an FST
    the last 16 bytes (type and FST footer)."""
    if stop - start < 24:
        return max(start, stop - 16), stop
    tail = read(stop - 24, stop)
    (dict_type,) = struct.unpack("<I", tail[20:])
    if dict_type != _SSTABLE_DICTIONARY:
        return stop - 16, stop
    (index_offset,) = struct.unpack("<Q", tail[:8])
    return _checked(start + index_offset, stop, stop)


def _composite_offsets(footer: bytes) -> list[int]:
    """Where each field's bytes start, from a composite file's footer (``directory.composite_addresses``)."""
    return [start for _, start in composite_addresses(footer)]


def _checked(start: int, stop: int, limit: int) -> tuple[int, int]:
    if not 0 <= start <= stop <= limit:
        raise ValueError(f"range {start}..{stop} outside 0..{limit}")
    return start, stop


def _join(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    joined: list[tuple[int, int]] = []
    for start, stop in sorted(r for r in ranges if r[1] > r[0]):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(stop, joined[-1][1]))
        else:
            joined.append((start, stop))
    return joined


def build_hotcache(lengths: Mapping[str, int], read: Callable[[str, int, int], bytes]) -> bytes:
    """The hotcache of a split whose members have ``lengths``: every index file (``index_files``)
    listed with its length, the ranges of ``choose_ranges`` cached. Other members (this project's
    columnar copy and doc mapping, Quickwit's ``split_fields``) are not Tantivy files and are not
    listed, as Quickwit lists none but the index's. A bundle without ``meta.json`` gets a valid
    hotcache that lists nothing.

    Args:
        lengths: every member's name and byte length.
        read: ``read(name, start, stop)`` returns those bytes of member ``name``; called for
            ``meta.json`` (to find the segments) and for each cached range only.

    Raises:
        ValueError: ``meta.json`` is not a Tantivy ``meta.json``, or ``read`` returned a
            short range.

    Example:
        >>> data = {"meta.json": b'{"segments": []}', "indextables.columns.arrow": b"xyz"}
        >>> hot = build_hotcache({n: len(d) for n, d in data.items()}, lambda n, s, e: data[n][s:e])
        >>> dict(parse_hotcache(hot, "example").file_lengths)
        {'meta.json': 16}
    """
    meta = read(META_JSON, 0, lengths[META_JSON]) if META_JSON in lengths else None
    names = index_files(meta, lengths)
    caches = {}
    for name in names:

        def read_file(start: int, stop: int, name: str = name) -> bytes:
            data = read(name, start, stop)
            if len(data) != stop - start:
                raise ValueError(f"{name}: read {len(data)} bytes for range {start}..{stop}")
            return data

        pieces = (CachedSlice(s, e, read_file(s, e)) for s, e in choose_ranges(name, lengths[name], read_file))
        caches[name] = FileSliceCache(lengths[name], tuple(pieces))
    return encode_hotcache(HotCache({n: lengths[n] for n in names}, caches))


# ---------------------------------------------------------------------------------------------
# Fetching by the piece (``cache/split_pieces.py``): what Tantivy reads to open a file, and where
# each field's bytes are in a composite file


COMPOSITE_EXTENSIONS = ("idx", "pos", "term", "fieldnorm")


def open_ranges(name: str, length: int, read: Callable[[int, int], bytes]) -> list[tuple[int, int]]:
    """Every byte range of segment file ``name`` (``length`` bytes) that Tantivy reads when it opens
    the file (as ``choose_ranges`` derives them, with no size cap): its Tantivy footer; for a doc
    store (``.store``) the skip index and doc store footer; for a composite file the composite
    footer; for ``.fast`` the column dictionary and columnar footer. Sorted, joined.

    Raises:
        ValueError: the file's layout does not parse (``read`` returned bytes of another shape).
    """
    try:
        return _join(_layout_ranges(name.rsplit(".", 1)[-1], length, read))
    except struct.error as e:
        raise ValueError(f"{name}: layout does not parse ({e})") from e


def composite_sections(length: int, read: Callable[[int, int], bytes]) -> dict[int, list[tuple[int, int]]]:
    """The byte ranges of each field (Tantivy field id) in a composite file (``.idx .pos .term
    .fieldnorm``) of ``length`` bytes: what a query on that field reads beyond ``open_ranges``.

    Raises:
        ValueError: the layout does not parse.
    """
    try:
        json_len, magic = struct.unpack("<II", read(length - 8, length))
        body_end = length - 8 - json_len
        if magic != FOOTER_MAGIC or body_end < 4:
            raise ValueError("no Tantivy footer")
        (footer_len,) = struct.unpack("<I", read(body_end - 4, body_end))
        footer_start = body_end - 4 - footer_len
        _checked(footer_start, body_end, body_end)
        addresses = composite_addresses(read(footer_start, body_end - 4))
    except struct.error as e:
        raise ValueError(f"composite file does not parse ({e})") from e
    sections: dict[int, list[tuple[int, int]]] = {}
    bounds: list[tuple[int | None, int]] = [*addresses, (None, footer_start)]
    for (field, start), (_, stop) in itertools.pairwise(bounds):
        assert field is not None
        _checked(start, stop, footer_start)
        sections.setdefault(field, []).append((start, stop))
    return sections
