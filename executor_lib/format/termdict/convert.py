"""Term dictionaries converted between the two kinds: SSTable ``.term`` members for the splits this
project writes, so that IndexTables4Spark (whose Tantivy reads only SSTable term dictionaries) can
run term queries on them, and FST ones built from those when a split is read here. No tantivy here.

The ``tantivy`` Python package writes FST term dictionaries and reads nothing else, the JVM's
Tantivy the opposite. A split written here holds the SSTable ones only (PROTOCOL.md §15):

- writing, ``with_sstable_terms`` turns each segment's ``<segment>.term`` (FST, as Tantivy wrote
  it) into SSTable dictionaries (``sstable_termdict.py``): the member the JVM opens and the one the
  split's hotcache lists and describes;
- reading, the member is laid out as ``<segment>.term.sstable`` beside an empty ``<segment>.term``
  (``format.quickwit.bundle.local_files``, ``empty_term_file``), and ``ensure_fst_terms`` adds to that
  file the FST dictionaries of the fields a query is about to read (``sstable_columns.py``,
  ``fst_termdict.encode_fst_dictionary``): the same terms and ``TermInfo``s, the bytes Tantivy
  itself would have written. A rare-word search converts its field's few thousand terms only.

The postings (``.idx``) and positions (``.pos``) are untouched, so their offsets stay valid.
Splits written before keep opening: with a ``<segment>.term.fst`` member (laid out as
``<segment>.term``), or with FST dictionaries in ``<segment>.term`` (copied by
``ensure_fst_terms`` as they are). Merging them drops or converts their FST dictionaries.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Mapping
from pathlib import Path

from executor_lib.format.directory import (
    CompositeSlice,
    encode_composite,
    parse_composite,
    split_footer,
    with_footer,
)
from executor_lib.format.quickwit.bundle import LOCAL_SSTABLE_SUFFIX, LOCAL_TERM_SUFFIX, TERM_SUFFIX, FileRange
from executor_lib.format.quickwit.hotcache import composite_sections
from executor_lib.format.termdict.fst_termdict import encode_fst_dictionary, fst_dictionary_columns
from executor_lib.format.termdict.sstable import DICT_TYPE_FST, dictionary_type, encode_sstable_columns
from executor_lib.format.termdict.sstable_columns import read_sstable_columns
from indextables_contract.errors import CorruptSplitError

FST_TERM_SUFFIX = LOCAL_TERM_SUFFIX  # "<segment>.term.fst"

Member = bytes | Path | FileRange


def fst_to_sstable(data: bytes, source: str) -> bytes:
    """The SSTable ``.term`` file for a segment's FST ``.term`` file: the same fields in the same
    order, the same terms and ``TermInfo``s, the footer's Tantivy version kept.

    Raises:
        CorruptSplitError: ``data`` is not a ``.term`` file of FST dictionaries (names ``source``).
        ValueError: a field's postings or positions are not laid out in term order (Tantivy always
            writes them so; an SSTable stores only their lengths).
    """
    file = split_footer(data, source)
    slices = []
    for piece in parse_composite(file.body, source):
        if piece.idx != 0:
            raise CorruptSplitError(f"{source}: term dictionary slice {piece.idx} of field {piece.field}")
        terms = fst_dictionary_columns(piece.data, f"{source} field {piece.field}")
        slices.append(CompositeSlice(piece.field, 0, encode_sstable_columns(terms)))
    return with_footer(encode_composite(slices), file.version)


def holds_fst(data: bytes, source: str) -> bool:
    """Whether a ``.term`` file holds FST dictionaries (False for SSTable ones, and for a file
    with no field, which needs no conversion)."""
    pieces = parse_composite(split_footer(data, source).body, source)
    return bool(pieces) and dictionary_type(pieces[0].data) == DICT_TYPE_FST


def _bytes(member: Member) -> bytes:
    return member if isinstance(member, bytes) else member.read_bytes()


def with_sstable_terms(files: Mapping[str, Member], source: str = "split") -> dict[str, Member]:
    """``files`` (the members of a bundle to write, in order) with every ``<segment>.term`` that
    holds FST dictionaries replaced by its SSTable version, and no ``<segment>.term.fst`` member (a
    segment copied from a split written before, whose ``.term`` beside it holds SSTables already).
    Every other member stays as it is.

    Raises:
        CorruptSplitError, ValueError: as ``fst_to_sstable``.
    """
    out: dict[str, Member] = {}
    for name, member in files.items():
        if name.endswith(FST_TERM_SUFFIX):
            continue
        if name.endswith(TERM_SUFFIX) and name + ".fst" not in files:
            data = _bytes(member)
            if holds_fst(data, f"{source}: {name}"):
                out[name] = fst_to_sstable(data, f"{source}: {name}")
                continue
            del data
        out[name] = member
    return out


def fst_slice(data: bytes, source: str) -> bytes:
    """One field's FST dictionary (a ``.term`` composite slice) from its SSTable one; an FST one
    (a split written before SSTable members) as it is.

    Raises:
        CorruptSplitError: a dictionary that does not parse (names ``source``).
    """
    if dictionary_type(data) == DICT_TYPE_FST:
        return data
    try:
        return encode_fst_dictionary(read_sstable_columns(data, source))
    except ValueError as e:  # FstError is one: terms out of order
        raise CorruptSplitError(f"{source}: the term dictionary does not convert ({e})") from e


def _local_term_files(index_dir: Path) -> list[tuple[Path, Path]]:
    """Each segment's laid-out SSTable ``.term`` (``<segment>.term.sstable``) and its FST ``.term``."""
    pairs = []
    for sstable in sorted(index_dir.glob(f"*{LOCAL_SSTABLE_SUFFIX}")):
        pairs.append((sstable, index_dir / (sstable.name[: -len(LOCAL_SSTABLE_SUFFIX)] + TERM_SUFFIX)))
    return pairs


def fields_to_build(index_dir: Path) -> set[int]:
    """Of a local index directory (``format.quickwit.bundle.local_files``), the fields some segment holds
    an SSTable dictionary of and no FST one yet (``ensure_fst_terms`` builds them; empty when no
    segment's dictionaries are built here). Reads the files' footers only.

    Raises:
        CorruptSplitError: a ``.term`` file that does not parse.
    """
    pending: set[int] = set()
    for sstable, fst in _local_term_files(index_dir):
        pending |= set(_sections(sstable)) - set(_sections(fst))
    return pending


def _sections(path: Path) -> dict[int, list[tuple[int, int]]]:
    """The byte ranges of each field's slices in a local composite file, from its footers."""
    try:
        with open(path, "rb") as f:
            return composite_sections(os.fstat(f.fileno()).st_size, lambda a, b: os.pread(f.fileno(), b - a, a))
    except ValueError as e:
        raise CorruptSplitError(f"{path}: term dictionary file does not parse ({e})") from e


def ensure_fst_terms(index_dir: Path, fields: set[int] | None) -> list[Path]:
    """Add to each segment's ``<segment>.term`` in ``index_dir`` the FST dictionaries of ``fields``
    (Tantivy field ids; None: every field) that it lacks, built from ``<segment>.term.sstable``
    (whose slices of those fields must be present: a split read by the piece fetches them first;
    only those are read). Each file is replaced whole (written aside, renamed), so an index opened
    before keeps reading the file it opened. The caller holds the directory's lock. Returns the files
    written (the caller records their checksums: ``splits.search.searcher``).

    Example: ``ensure_fst_terms(Path("index"), {4})`` before a search of field 4.

    Raises:
        CorruptSplitError: a ``.term`` file or dictionary that does not parse (names the file).
    """
    changed: list[Path] = []
    for sstable, fst in _local_term_files(index_dir):
        built = set(_sections(fst))
        todo = {f: r for f, r in _sections(sstable).items() if f not in built and (fields is None or f in fields)}
        if not todo:
            continue
        current = split_footer(fst.read_bytes(), str(fst))
        if zlib.crc32(current.body) != current.crc:  # never extend (and re-seal) a damaged file
            raise CorruptSplitError(f"{fst}: does not match its Tantivy footer's CRC32 (damaged in the cache entry)")
        slices = parse_composite(current.body, str(fst))
        with open(sstable, "rb") as f:
            for field, ranges in todo.items():
                if len(ranges) != 1:
                    raise CorruptSplitError(f"{sstable}: field {field} has {len(ranges)} term dictionaries")
                start, stop = ranges[0]
                data = os.pread(f.fileno(), stop - start, start)
                slices.append(CompositeSlice(field, 0, fst_slice(data, f"{sstable} field {field}")))
        slices.sort(key=lambda p: p.field)
        tmp = fst.with_name(f"{fst.name}.{os.getpid()}.tmp")
        tmp.write_bytes(with_footer(encode_composite(slices), current.version))
        os.replace(tmp, fst)
        changed.append(fst)
    return changed
