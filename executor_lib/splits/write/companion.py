"""Companion splits built: a source's Parquet files indexed into a split whose rows stay in the
source (``build_companion_split``), IndexTables4Spark's companion splits transcoded into this
project's layout (``transcode_jvm_companion``) and companion splits merged (``merge_companion``).

What a companion split is and how its rows are read back: ``executor_lib.splits.rows.companion``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from executor_lib.format.tantivy4java import parquet_manifest as PM
from executor_lib.format.tantivy4java.parquet_manifest import FILE_HASH_FIELD, ROW_IN_FILE_FIELD
from executor_lib.splits.doc_mapping import DocMapping
from executor_lib.splits.rows.companion import (
    COMPANION_MEMBER,
    FILE_COLUMN,
    READ_BATCH_ROWS,
    ROW_COLUMN,
    CompanionInfo,
    SourceFiles,
    conformed,
    locator_fields,
)
from executor_lib.splits.write.writer import SplitBuilder, WrittenSplit


def _segment_docs(index_dir: Path) -> list[int]:
    """Documents of each segment of a committed index, in ``meta.json``'s order."""
    meta = json.loads((index_dir / "meta.json").read_text())
    return [int(seg["max_doc"]) for seg in meta["segments"]]


def build_companion_split(
    sources: SourceFiles,
    files: Sequence[str],
    source_format: str,
    data_schema: pa.Schema,
    mapping: DocMapping,
    out_dir: Path,
    heap_bytes: int | None = None,
    strip: Mapping[str, str] | None = None,
    fast_field_mode: str = "HYBRID",
    indexing_modes: Mapping[str, str] | None = None,
    identities: dict[str, tuple[int, int]] | None = None,
    footer_crcs: dict[str, int] | None = None,
) -> tuple[WrittenSplit, int]:
    """Index the source ``files`` (relative to ``sources.root``) into one companion split in ``out_dir``;
    returns it and the bytes of source files read. ``data_schema``: the source's data columns; ``strip``:
    column -> a regex whose matches are removed from the column's text before indexing (the source keeps them);
    ``indexing_modes``: column -> its INDEXING MODES value, recorded in the manifest; ``identities``, if
    given, receives each file's (size, modification time in ms) as read, ``footer_crcs`` each file's Parquet
    footer CRC32 (both recorded in the split too: a read of a file rewritten since is CompanionSourceError).

    The split is laid out as tantivy4java's (``parquet_manifest``): ``_parquet_manifest.json`` and the
    ``__pq_file_hash``/``__pq_row_in_file`` fast fields, plus this project's member and locator copy.

    Raises:
        CompanionSourceError: a source file is gone.
    """
    modes = {c: m for c, v in (indexing_modes or {}).items() if (m := PM.indexing_mode_json(v)) is not None}
    derived = {c + PM.COMPANION_SUFFIX for c, m in modes.items() if m["mode"].endswith("_exactonly")}
    fingerprints = {
        f.name[len(PM.PHASH_PREFIX) :]: f.name
        for f in mapping.fields
        if f.name.startswith(PM.PHASH_PREFIX) and f.type == "u64" and data_schema.get_field_index(f.name) < 0
    }
    derived |= set(fingerprints.values())
    indexed = [f.name for f in mapping.fields if f.name not in (FILE_HASH_FIELD, ROW_IN_FILE_FIELD, *derived)]
    mapping = locator_fields(mapping)
    builder = SplitBuilder(mapping, out_dir, heap_bytes, copy_columns=[FILE_COLUMN, ROW_COLUMN])
    file_rows: list[int] = []
    file_identities: list[tuple[int, int]] = []  # each file's size and modification time, read before its rows
    file_footer_crcs: list[int] = []  # each file's Parquet footer CRC32, read before its rows
    entries: list[dict[str, Any]] = []
    columns: list[dict[str, Any]] | None = None
    overrides = PM.tokenizer_overrides(indexing_modes or {})
    kinds = {f.name: f.type for f in mapping.fields if f.type in ("ip", "json")}
    read_bytes = 0
    indexed_schema = pa.schema([data_schema.field(c) for c in indexed])
    try:
        for position, relative in enumerate(files):
            file_identities.append(sources.identity(relative))
            file_footer_crcs.append(sources.footer_crc(relative, file_identities[-1][0]))
            pf = sources.open(relative, expected=file_identities[-1], expected_footer_crc=file_footer_crcs[-1])
            if identities is not None:
                identities[relative] = file_identities[-1]
            if footer_crcs is not None:
                footer_crcs[relative] = file_footer_crcs[-1]
            meta = pf.metadata
            read_bytes += sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))
            if columns is None:
                columns = PM.column_mapping(pf.schema_arrow, PM.field_ids(pf), overrides, kinds)
            file_hash = PM.hash_parquet_path(relative)
            present = [c for c in indexed if c in pf.schema_arrow.names]
            offset = 0
            for batch in pf.iter_batches(batch_size=READ_BATCH_ROWS, columns=present):
                n = batch.num_rows
                data = conformed(pa.Table.from_batches([batch]), indexed_schema, n)
                for column, name in fingerprints.items():
                    data = data.append_column(name, PM.hash_strings(data.column(column)))
                data = _hashed(data, modes)
                for column, pattern in (strip or {}).items():
                    position_of = data.schema.get_field_index(column)
                    stripped = pc.replace_substring_regex(data.column(column), pattern, " ")
                    data = data.set_column(position_of, column, stripped)
                data = data.append_column(FILE_HASH_FIELD, pa.array(np.full(n, file_hash, dtype=np.uint64)))
                data = data.append_column(ROW_IN_FILE_FIELD, pa.array(np.arange(offset, offset + n, dtype=np.uint64)))
                data = data.append_column(FILE_COLUMN, pa.array(np.full(n, position, dtype=np.int32)))
                data = data.append_column(ROW_COLUMN, pa.array(np.arange(offset, offset + n, dtype=np.int64)))
                builder.add(data)
                offset += n
            file_rows.append(offset)
            if offset:  # the JVM's manifest has no empty files (validate)
                entries.append(PM.file_entry(pf, relative, sources.size(relative), sum(file_rows[:-1])))
        if builder.num_rows == 0:
            empty = indexed_schema.empty_table()
            for name in fingerprints.values():
                empty = empty.append_column(name, pa.array([], pa.uint64()))
            empty = _hashed(empty, modes)
            for name, t in (
                (FILE_HASH_FIELD, pa.uint64()),
                (ROW_IN_FILE_FIELD, pa.uint64()),
                (FILE_COLUMN, pa.int32()),
                (ROW_COLUMN, pa.int64()),
            ):
                empty = empty.append_column(name, pa.array([], t))
            builder.add(empty)
        info = CompanionInfo(
            sources.root,
            source_format,
            tuple(files),
            tuple(file_rows),
            tuple(data_schema.names),
            tuple(file_identities),
            tuple(file_footer_crcs),
        )

        def manifest_member(index_dir: Path) -> dict[str, bytes]:
            manifest = PM.build_manifest(entries, columns or [], fast_field_mode, _segment_docs(index_dir), modes)
            manifest["string_hash_fields"].update(fingerprints)
            return {PM.MANIFEST_MEMBER: PM.serialize_manifest(manifest)}

        written = builder.finish(members={COMPANION_MEMBER: info.to_json().encode()}, late_members=manifest_member)
    except BaseException:
        builder.close()
        raise
    # statistics of the source's values only: a hashed column's min/max are hashes, which data skipping
    # would compare with the column's strings
    plain = {c for c in indexed if modes.get(c, {}).get("mode") != "exact_only"}
    mins = {k: v for k, v in written.min_values.items() if k in plain}
    maxs = {k: v for k, v in written.max_values.items() if k in plain}
    return dataclasses.replace(written, min_values=mins, max_values=maxs), read_bytes


def _hashed(data: pa.Table, modes: Mapping[str, Mapping[str, str]]) -> pa.Table:
    """The hashed modes' values (tantivy4java ``add_string_value_to_doc``): an ``exact_only`` column becomes
    its values' ``hash_string_value``; a ``text_*_exactonly`` column gets ``<column>__uuids``, the hashes of
    its pattern's matches (the column's text is stripped of them afterwards, with the strip modes')."""
    for column, mode in modes.items():
        if column not in data.column_names:
            continue
        index = data.schema.get_field_index(column)
        if mode["mode"] == "exact_only":
            data = data.set_column(index, column, PM.hash_strings(data.column(column)))
        elif mode["mode"].endswith("_exactonly"):
            matches = PM.pattern_hashes(data.column(column), PM.pattern_of(mode) or "")
            data = data.append_column(column + PM.COMPANION_SUFFIX, matches)
    return data


def _jvm_mapping(doc_mapping: str, manifest: Mapping[str, Any]) -> DocMapping:
    """The fields of a tantivy4java companion split's doc mapping that ``build_companion_split`` is given
    (its ``__pq_*`` and ``_phash_*`` fields are the builder's own)."""
    # the _phash_ fingerprints (a field's hash field under another name); exact_only columns and
    # <column>__uuids fields are their own hash fields and stay (queries look hashes up in them)
    hidden = {v for k, v in manifest.get("string_hash_fields", {}).items() if v != k}
    fields = DocMapping.from_json(doc_mapping).fields
    return DocMapping(tuple(f for f in fields if f.name not in hidden and not f.name.startswith("__pq_")))


def _mode_value(mode: Mapping[str, str]) -> str:
    """A ``StringIndexingMode`` back as its INDEXING MODES value."""
    return mode["mode"] + (":" + mode["regex"] if "regex" in mode else "")


def transcode_jvm_companion(
    split: Path, footer: Any, schema: pa.Schema, doc_mapping: str, root: str | None, out_dir: Path
) -> WrittenSplit:
    """A companion split in tantivy4java's layout (``_parquet_manifest.json``, no stored values, no copy),
    made a split of this project's layout: the rows of the manifest's files, read from ``root``, indexed
    again with the split's doc mapping and indexing modes into ``out_dir`` (its documents are exactly those
    rows, whatever their order in the JVM's index).

    Raises:
        CorruptSplitError: the manifest does not parse, or the table names no source root.
        CompanionSourceError: a source file is gone or was rewritten.
    """
    from executor_lib.format.quickwit.bundle import read_member
    from indextables_contract.errors import CorruptSplitError

    raw = read_member(Path(split), footer, PM.MANIFEST_MEMBER)
    manifest = PM.deserialize_manifest(raw or b"", str(split))
    if not root:
        raise CorruptSplitError(
            f"{split}: a companion split of IndexTables4Spark resolves its files against the source table's root, "
            "and this table's metadata names none: set spark.indextables.companion.parquetTableRoot"
        )
    mapping = _jvm_mapping(doc_mapping, manifest)
    modes = {c: _mode_value(m) for c, m in manifest.get("string_indexing_modes", {}).items()}
    strip = {
        c: PM.pattern_of(m) or ""
        for c, m in manifest.get("string_indexing_modes", {}).items()
        if m["mode"].endswith("_strip")
    }
    sources = SourceFiles(root)
    files = [str(f["relative_path"]) for f in manifest["parquet_files"]]
    in_files: set[str] = set()
    for f in manifest["parquet_files"]:
        in_files.update(sources.open(f["relative_path"], int(f["num_rows"])).schema_arrow.names)
    data_schema = pa.schema([f for f in schema if f.name in in_files])  # partition columns are not in the files
    derived = set(manifest.get("companion_hash_fields", {}))
    mapping = DocMapping(tuple(f for f in mapping.fields if f.name in data_schema.names or f.name in derived))
    mode = {v: k for k, v in PM.FAST_FIELD_MODE_NAMES.items()}.get(manifest["fast_field_mode"], "HYBRID")
    written, _ = build_companion_split(
        sources,
        files,
        "parquet",
        data_schema,
        mapping,
        out_dir,
        strip=strip,
        fast_field_mode=mode,
        indexing_modes=modes,
    )
    return written


def merge_companion(splits: Sequence[Path], mapping: DocMapping, out_dir: Path) -> WrittenSplit:
    """MERGE SPLITS of companion splits (of this project's layout, one source root): their segments combined
    as they are; the merged file list is the sources' lists in order, each source's ``__pq_file`` locators
    shifted past the files before it; the ``__pq_file_hash``/``__pq_row_in_file`` fast fields need nothing; the
    manifests combined as tantivy4java's ``combine_parquet_manifests`` does, with the merged index's segments.

    Raises:
        ConfigError: a split is in tantivy4java's layout only, or the splits have different source roots.
        CorruptSplitError: a split's members do not read, or their manifests cannot be combined.
    """
    from executor_lib.format.quickwit.bundle import read_footer, read_member
    from executor_lib.splits.write.merge import MergeSource, combine_segments, source_metas
    from indextables_contract.errors import ConfigError

    sources, infos, manifests = [], [], []
    for split in splits:
        footer = read_footer(split)
        member = read_member(split, footer, COMPANION_MEMBER)
        source = MergeSource.from_bundle(split)
        if member is None or source is None:
            raise ConfigError(
                f"merge: companion split {split.name} is in IndexTables4Spark's layout only (no locator copy); "
                "run BUILD INDEXTABLES COMPANION again to rebuild it here, or merge it with IndexTables4Spark"
            )
        infos.append(CompanionInfo.from_json(member, str(split)))
        raw = read_member(split, footer, PM.MANIFEST_MEMBER)
        manifests.append(None if raw is None else PM.deserialize_manifest(raw, str(split)))
        sources.append(source)
    if len({i.source_root for i in infos}) != 1:
        roots = sorted({i.source_root for i in infos})
        raise ConfigError(f"merge: companion splits of different source roots: {roots}")
    shifted, before = [], 0
    for source, info in zip(sources, infos, strict=True):
        locators = source.rows.select([FILE_COLUMN, ROW_COLUMN])  # read: the file numbers are shifted
        locators = locators if isinstance(locators, pa.Table) else locators.read_all()
        files = pc.add(locators.column(FILE_COLUMN), pa.scalar(before, pa.int32()))
        rows = locators.set_column(0, FILE_COLUMN, files)
        shifted.append(MergeSource(source.index_files, rows, source.row_offsets))
        before += len(info.files)
    first = infos[0]
    merged = CompanionInfo(
        first.source_root,
        first.source_format,
        tuple(f for i in infos for f in i.files),
        tuple(n for i in infos for n in i.file_rows),
        first.data_columns,
        (
            tuple(x for i in infos for x in i.file_identities or ())
            if all(i.file_identities is not None for i in infos)
            else None
        ),
        (
            tuple(x for i in infos for x in i.file_footer_crcs or ())
            if all(i.file_footer_crcs is not None for i in infos)
            else None
        ),
    )
    members = {COMPANION_MEMBER: merged.to_json().encode()}
    if all(m is not None for m in manifests):  # splits written before the manifest have none: then neither has this
        combined = PM.combine_manifests([m for m in manifests if m is not None], "merge of companion splits")
        docs = [int(seg["max_doc"]) for meta in source_metas(sources) for seg in meta["segments"]]
        combined["segment_row_ranges"] = PM.build_manifest(
            combined["parquet_files"], combined["column_mapping"], combined["fast_field_mode"], docs, {}
        )["segment_row_ranges"]
        members[PM.MANIFEST_MEMBER] = PM.serialize_manifest(combined)
    return combine_segments(shifted, mapping, out_dir, [FILE_COLUMN, ROW_COLUMN], members)
