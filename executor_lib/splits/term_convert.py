"""SSTable ``.term`` members for the splits this project writes, so that IndexTables4Spark (whose
Tantivy reads only SSTable term dictionaries) can run term queries on them. No tantivy here.

The ``tantivy`` Python package writes FST term dictionaries and reads nothing else, the JVM's
Tantivy the opposite. A split written here therefore holds both, per segment (PROTOCOL.md §15):

- ``<segment>.term``: SSTable dictionaries (``sstable_termdict.py``), the member the JVM opens
  and the one the split's hotcache lists and describes;
- ``<segment>.term.fst``: the FST dictionaries Tantivy wrote (``fst_termdict.py``), which this
  project's reader lays out as ``<segment>.term`` when it extracts the index
  (``protocol.bundle.extract_bundle``).

Both hold the same ``TermInfo``s: the postings (``.idx``) and positions (``.pos``) are untouched,
so their offsets stay valid. Splits written before (FST in ``<segment>.term``, no ``.fst``
member) still open here; merging them converts their dictionaries.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from executor_lib.protocol.bundle import LOCAL_TERM_SUFFIX, FileRange
from executor_lib.splits.composite_file import (
    CompositeSlice,
    encode_composite,
    parse_composite,
    split_footer,
    with_footer,
)
from executor_lib.splits.fst_termdict import fst_dictionary_columns
from executor_lib.splits.sstable_termdict import DICT_TYPE_FST, dictionary_type, encode_sstable_columns
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
    holds FST dictionaries replaced by its SSTable version, the FST bytes kept right after it as
    ``<segment>.term.fst``. A ``.term`` that already has its ``.fst`` member beside it (a segment
    copied from a split written this way) and any other member stay as they are.

    Raises:
        CorruptSplitError, ValueError: as ``fst_to_sstable``.
    """
    out: dict[str, Member] = {}
    for name, member in files.items():
        if name.endswith(".term") and name + ".fst" not in files:
            data = _bytes(member)
            if holds_fst(data, f"{source}: {name}"):
                out[name] = fst_to_sstable(data, f"{source}: {name}")
                out[name + ".fst"] = member  # as given: a local file is copied, not held in memory
                continue
            del data
        out[name] = member
    return out
