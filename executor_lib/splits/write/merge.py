"""Merging splits without re-indexing: the sources' Tantivy segments go into one index as they are.

A Tantivy index is a ``meta.json`` listing self-contained segments (``<segment id>.idx``,
``.term``, ``.pos``, ``.store``, ``.fast``, ``.fieldnorm``). Sources written with the same
doc mapping have the same Tantivy schema, so a merged split is the union of their segment
files with one ``meta.json`` listing every segment, plus the sources' columnar copies
concatenated in source order. Nothing is tokenized or re-encoded: a merge costs about a copy
of the bytes.

Row numbers: each source numbers its documents' ``__row`` from 0, so in a merged split a
document's row in the columnar copy is its ``__row`` plus its segment's row offset (where
its source's rows start). The offsets are in the ``indextables.segments.json`` member
(``{"row_offsets": {segment id: offset}}``), and the columnar copy of such a split is stored
as ``indextables.columns-by-segment.arrow`` so that a reader that does not know offsets finds
no columnar copy of its kind and reads the rows through the doc store instead of reading
wrong rows.

Where segments cannot be combined (Tantivy schemas or index settings differ, a segment has
deletes or appears twice, or the merged index would hold more than ``MAX_SEGMENTS``
segments), the rows are indexed again through ``SplitBuilder``'s bulk path; splits with index-only
columns (whose values are not stored) cannot be indexed again, so they are always combined.

``sort_and_cut`` is the other kind of merge (level 1 of a sort key, ``splits.write.merge_plan``): the
rows are sorted by the key with Arrow and indexed again into several splits, cut where the key
changes.
"""

from __future__ import annotations

import json
import mmap
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.format.quickwit.bundle import (
    ROWS_IN_STORE_MEMBER,
    BundleFooter,
    FileRange,
    read_footer,
    read_member,
    write_bundle,
)
from executor_lib.format.termdict.convert import FST_TERM_SUFFIX, with_sstable_terms
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.rows.columnar import ColumnarCopyWriter, RowCopy
from executor_lib.splits.rows.doc_store_rows import DocStoreRows, open_doc_store_rows
from executor_lib.splits.write.writer import (
    DOC_MAPPING_MEMBER,
    FEED_BATCH_ROWS,
    SEGMENTED_COLUMNS_MEMBER,
    SEGMENTS_MEMBER,
    SplitBuilder,
    WrittenSplit,
    _has_stats,
    _stats,
    column_part_member,
    columns_members,
    in_columnar_copy,
    open_columns,
    stat_values,
)
from indextables_contract.errors import ConfigError, CorruptSplitError

MAX_SEGMENTS = 64  # more segments make every query slower: re-index instead


Stats = tuple[Mapping[str, str], Mapping[str, str]]  # a split's min and max values by column


@dataclass(frozen=True)
class MergeSource:
    """One split to merge: its index files by name (``meta.json`` and each segment's files, as
    local files or as ranges of the split bundle), its rows (a table, or its columnar copy read
    lazily), its segments' row offsets (None: all 0), the members of its columnar copy as ranges of
    its bundle (``copy_parts``; empty: it has none to copy), and its min/max statistics as the log
    records them (``stats``; None: unknown, recomputed from the rows)."""

    index_files: Mapping[str, Path | FileRange]
    rows: pa.Table | RowCopy
    row_offsets: dict[str, int] | None = None
    copy_parts: tuple[FileRange, ...] = ()
    stats: Stats | None = None

    @classmethod
    def from_bundle(cls, split: Path) -> MergeSource | None:
        """A split of this project's format read in place: no index file is extracted, the merged
        bundle copies the segments' byte ranges. None for a split without a columnar copy (an
        IndexTables4Spark split, which has to be transcoded first). CorruptSplitError if its
        parts do not agree."""
        footer = read_footer(split)
        members = columns_members(footer)
        if ROWS_IN_STORE_MEMBER in footer.files:
            return cls._in_store(split, footer)
        if members is None:
            return None
        try:
            rows = open_columns(split, footer)  # read lazily: a merge copies the compressed parts
            offsets_json = read_member(split, footer, SEGMENTS_MEMBER)
            offsets = None
            if offsets_json is not None:
                offsets = {str(k): int(v) for k, v in json.loads(offsets_json)["row_offsets"].items()}
            meta = json.loads(read_member(split, footer, "meta.json") or b"null")
            documents = sum(int(seg["max_doc"]) for seg in meta["segments"])
        except (ValueError, KeyError, TypeError, OSError) as e:  # ArrowInvalid is a ValueError
            raise CorruptSplitError(f"{split}: the split's parts do not read ({type(e).__name__}: {e})") from e
        if documents != rows.num_rows:
            raise CorruptSplitError(f"{split}: the index has {documents} documents, its columnar copy {rows.num_rows}")
        files = {name: FileRange(split, s, e) for name, (s, e) in footer.files.items()}
        return cls(files, rows, offsets, tuple(files[m] for m in members))

    @classmethod
    def _in_store(cls, split: Path, footer: BundleFooter) -> MergeSource:
        """A split that keeps its rows in its doc stores, read in place (memory-mapped)."""
        files = {name: FileRange(split, s, e) for name, (s, e) in footer.files.items()}
        try:
            mapping_json = read_member(split, footer, DOC_MAPPING_MEMBER)
            types = {f.name: f.type for f in DocMapping.from_json((mapping_json or b"null").decode()).fields}
            with open(split, "rb") as f:
                mapped = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        except (ValueError, KeyError, TypeError, AttributeError, OSError) as e:
            raise CorruptSplitError(f"{split}: the split's parts do not read ({type(e).__name__}: {e})") from e

        def store(stem: str) -> tuple[memoryview, None]:
            start, end = footer.files[f"{stem}.store"]
            return mapped[start:end], None

        rows = open_doc_store_rows(
            files[ROWS_IN_STORE_MEMBER].read_bytes(), files["meta.json"].read_bytes(), types, store, str(split)
        )
        return cls(files, rows)


def merge_sources(sources: Sequence[MergeSource], mapping: DocMapping, out_dir: Path) -> WrittenSplit:
    """One split in ``out_dir`` holding every row of ``sources``, in source order.

    Sources that keep their rows in their doc stores (``store_rows``) are combined only with each
    other (their rows are document ordinals; the others' are ``__row`` numbers); a mix of both
    kinds is indexed again."""
    metas = source_metas(sources)
    index_only = [f.name for f in mapping.fields if not f.stored]
    in_store = [isinstance(s.rows, DocStoreRows) for s in sources]
    if any(in_store) and not (all(in_store) and _same_stored_schema(sources)):
        if index_only:
            raise ConfigError(
                "merge: these splits keep their rows in different ways (doc stores, columnar copies) and "
                f"their rows cannot be indexed again: columns {index_only} are index-only (their values are not stored)"
            )
        return _reindex(sources, mapping, out_dir)
    if _combinable(metas, max_segments=None if index_only else MAX_SEGMENTS):
        return _combine(sources, metas, mapping, out_dir)
    if index_only:
        raise ConfigError(
            f"merge: these splits' segments cannot be combined and their rows cannot be indexed again: "
            f"columns {index_only} are index-only (their values are not stored)"
        )
    return _reindex(sources, mapping, out_dir)


def source_metas(sources: Sequence[MergeSource]) -> list[dict[str, Any]]:
    """Each source's ``meta.json``."""
    return [json.loads(s.index_files["meta.json"].read_bytes()) for s in sources]


def combine_segments(
    sources: Sequence[MergeSource],
    mapping: DocMapping,
    out_dir: Path,
    copy_columns: Sequence[str],
    members: Mapping[str, bytes],
) -> WrittenSplit:
    """The sources' segments combined as they are (``_combine``), or ConfigError if they cannot be
    (schemas differ, or deletes): for splits whose rows cannot be indexed again (companion splits)."""
    metas = source_metas(sources)
    if not _combinable(metas, max_segments=None):
        raise ConfigError(
            "merge: these splits' segments cannot be combined (their Tantivy schemas or index "
            "settings differ, or a segment has deletes), and their rows are not in the splits"
        )
    return _combine(sources, metas, mapping, out_dir, copy_columns, members)


def _reader_schema(meta: dict[str, Any]) -> list[Any]:
    """A ``meta.json`` schema without ``coerce`` (how JSON values are parsed when indexing: segments
    indexed either way read the same)."""
    return [{**f, "options": {k: v for k, v in f.get("options", {}).items() if k != "coerce"}} for f in meta["schema"]]


def _combinable(metas: list[dict[str, Any]], max_segments: int | None) -> bool:
    first = metas[0]
    segments = [seg for meta in metas for seg in meta["segments"]]
    schema = _reader_schema(first)
    return (
        all(_reader_schema(m) == schema and m.get("index_settings") == first.get("index_settings") for m in metas)
        and all(seg.get("deletes") is None for seg in segments)
        and len({seg["segment_id"] for seg in segments}) == len(segments)
        and (max_segments is None or len(segments) <= max_segments)
    )


def _segment_files(index_files: Mapping[str, Path | FileRange], segment_id: str) -> dict[str, Path | FileRange]:
    stem = segment_id.replace("-", "")
    return {name: file for name, file in sorted(index_files.items()) if name.split(".")[0] == stem}


def _combine(
    sources: Sequence[MergeSource],
    metas: list[dict[str, Any]],
    mapping: DocMapping,
    out_dir: Path,
    copy_columns: Sequence[str] | None = None,
    members: Mapping[str, bytes] | None = None,
) -> WrittenSplit:
    """The sources' segments as one index; ``copy_columns``: the columnar copy's columns (default: the
    mapping's stored fields); ``members``: more bundle members."""
    files: dict[str, bytes | Path | FileRange] = {}
    offsets: dict[str, int] = {}
    base = 0
    for source, meta in zip(sources, metas, strict=True):
        for segment in meta["segments"]:
            segment_id = segment["segment_id"]
            offsets[segment_id] = base + (source.row_offsets or {}).get(segment_id, 0)
            files.update(_segment_files(source.index_files, segment_id))
        base += source.rows.num_rows
    merged_meta = {
        "index_settings": metas[0].get("index_settings"),
        "segments": [seg for meta in metas for seg in meta["segments"]],
        "schema": metas[0]["schema"],
        "opstamp": max(int(m.get("opstamp", 0)) for m in metas),
    }
    files["meta.json"] = json.dumps(merged_meta, indent=2).encode()
    tantivy_files = [n for n in files if not n.endswith(FST_TERM_SUFFIX)]
    files[".managed.json"] = json.dumps(sorted([*tantivy_files, ".managed.json"])).encode()
    # segments of splits written before SSTable .term members (or of a transcoded index) get them
    files = with_sstable_terms(files, "merged split")
    out_dir.mkdir(parents=True, exist_ok=True)
    files[DOC_MAPPING_MEMBER] = mapping.to_json().encode()
    files.update(members or {})
    path = out_dir / f"split-{uuid.uuid4()}.split"
    first = sources[0]
    if isinstance(first.rows, DocStoreRows):  # rows stay in the doc stores: document ordinals, in order
        files[ROWS_IN_STORE_MEMBER] = first.index_files[ROWS_IN_STORE_MEMBER].read_bytes()
        footer = write_bundle(files, path)
        stats = _merged_stats([s.stats for s in sources], mapping, first.rows.schema)
        if stats is None:
            stats = _stats(pa.concat_tables(s.rows.read_all() for s in sources), mapping)
        mins, maxs = stats
        return WrittenSplit(path, footer, base, footer.footer_start, dict(mins), dict(maxs), mapping.to_json())
    files[SEGMENTS_MEMBER] = json.dumps({"row_offsets": offsets}, sort_keys=True).encode()
    # the columnar copy's columns: given (a companion split's locators), else the stored fields
    # (index-only columns read as nulls)
    stored = list(copy_columns) if copy_columns is not None else [f.name for f in mapping.fields if in_columnar_copy(f)]
    if _parts_copyable(sources, stored):
        parts = [part for source in sources for part in source.copy_parts]
        files.update((column_part_member(k), part) for k, part in enumerate(parts))
        footer = write_bundle(files, path)
        stats = _merged_stats([s.stats for s in sources], mapping, sources[0].rows.schema)
        if stats is None:
            stat_columns = [f.name for f in mapping.fields if f.name in stored]
            stats = _stats(open_columns(path, footer).select(stat_columns).read_all(), mapping)
        mins, maxs = stats
        return WrittenSplit(path, footer, base, footer.footer_start, dict(mins), dict(maxs), mapping.to_json())
    columns = out_dir / f"columns-{uuid.uuid4()}.arrow"
    try:
        schema = sources[0].rows.select(stored).schema
        copy = ColumnarCopyWriter(columns, schema)
        try:
            for source in sources:
                for batch in _table(source.rows.select(stored)).cast(schema).to_batches(FEED_BATCH_ROWS):
                    copy.write(batch)
            copy.close()
        finally:
            copy.abandon()
        files[SEGMENTED_COLUMNS_MEMBER] = columns
        footer = write_bundle(files, path)
        with pa.memory_map(str(columns)) as mapped:
            mins, maxs = _stats(pa.ipc.open_file(mapped).read_all(), mapping)
    finally:
        columns.unlink(missing_ok=True)
    return WrittenSplit(path, footer, base, footer.footer_start, mins, maxs, mapping.to_json())


def _same_stored_schema(sources: Sequence[MergeSource]) -> bool:
    """Whether sources that keep their rows in their doc stores describe them alike."""
    members = [s.index_files.get(ROWS_IN_STORE_MEMBER) for s in sources]
    if any(m is None for m in members):
        return False
    schemas = [pa.ipc.open_stream(m.read_bytes()).schema for m in members if m is not None]
    return all(schema.equals(schemas[0]) for schema in schemas)


def _parts_copyable(sources: Sequence[MergeSource], stored: list[str]) -> bool:
    """Whether the merged split's columnar copy can be the sources' copies as they are (compressed
    parts, ``columnar_copy.PartedCopy``): every source has one, all with the columns ``stored`` in
    that order and the same types, and the parts are no more than ``MAX_SEGMENTS``."""
    if not all(s.copy_parts and not isinstance(s.rows, pa.Table) for s in sources):
        return False
    if sum(len(s.copy_parts) for s in sources) > MAX_SEGMENTS:
        return False
    first = sources[0].rows.schema.remove_metadata()
    return first.names == stored and all(s.rows.schema.remove_metadata().equals(first) for s in sources)


def _merged_stats(stats: Sequence[Stats | None], mapping: DocMapping, schema: pa.Schema) -> Stats | None:
    """The merged split's min/max values from its sources' (the min of their mins and the max of their
    maxes, compared as the column's type, written as ``writer._stats`` writes them); a column some
    source has no statistic for gets none. None when a source's statistics are unknown or do not
    parse as the column's type (the caller then reads the rows)."""
    if any(s is None for s in stats):
        return None
    known = [s for s in stats if s is not None]
    extremes: dict[str, pa.Array] = {}
    for f in mapping.fields:
        if f.name not in schema.names or not _has_stats(schema.field(f.name).type):
            continue
        found = [low.get(f.name) for low, _ in known] + [high.get(f.name) for _, high in known]
        values = [v for v in found if v is not None]
        if len(values) < len(found):
            continue
        try:
            extremes[f.name] = stat_values(values, schema.field(f.name).type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
    return _stats(pa.table(extremes), mapping) if extremes else ({}, {})


def _table(rows: pa.Table | RowCopy) -> pa.Table:
    return rows if isinstance(rows, pa.Table) else rows.read_all()


def _reindex(sources: Sequence[MergeSource], mapping: DocMapping, out_dir: Path) -> WrittenSplit:
    builder = SplitBuilder(mapping, out_dir)
    try:
        for source in sources:
            builder.add(_table(source.rows))
    except BaseException:
        builder.close()
        raise
    return builder.finish()


def sort_and_cut(
    sources: Sequence[MergeSource], mapping: DocMapping, out_dir: Path, sort_key: str, rows_per_split: int
) -> Iterator[WrittenSplit]:
    """The rows of ``sources`` sorted by ``sort_key`` (nulls last), indexed into consecutive splits
    of about ``rows_per_split`` rows, each cut moved forward past a run of equal keys so that no
    key value is in two splits. Splits are yielded one at a time (the caller uploads each)."""
    index_only = [f.name for f in mapping.fields if not f.stored]
    if index_only:
        raise ConfigError(
            f"merge sorted by {sort_key!r}: the rows cannot be indexed again: columns {index_only} "
            "are index-only (their values are not stored)"
        )
    columns = [f.name for f in mapping.fields]
    if sort_key not in columns:
        raise ConfigError(f"merge sorted by {sort_key!r}: no such data column (columns: {columns})")
    schema = sources[0].rows.select(columns).schema
    table = pa.concat_tables([_table(s.rows.select(columns)).cast(schema) for s in sources])
    order = pc.sort_indices(table, sort_keys=[(sort_key, "ascending")])  # nulls last (Arrow's default)
    table = table.take(order)
    keys = table.column(sort_key)
    start = 0
    while start < table.num_rows:
        end = _cut_after_run(keys, min(start + rows_per_split, table.num_rows))
        builder = SplitBuilder(mapping, out_dir)
        try:
            builder.add(table.slice(start, end - start))
        except BaseException:
            builder.close()
            raise
        yield builder.finish()
        start = end


def _cut_after_run(keys: pa.ChunkedArray, cut: int) -> int:
    """``cut`` moved forward past the rows whose key equals the key just before it (sorted keys)."""
    if cut >= len(keys) or cut == 0:
        return cut
    before = keys[cut - 1]
    if not before.is_valid:  # nulls are last: the rest are nulls too
        return len(keys)
    equal = pc.equal(keys.slice(cut), before)  # sorted: the equal keys come first
    return cut + int(pc.sum(pc.fill_null(equal, False)).as_py() or 0)
