"""Live files as Arrow columns (``log/files/file_table.py``): exact round trips, the same answers as a dict of
actions under replay, partition selection equal to per-file pruning, and the Avro-state snapshots built on them."""

from __future__ import annotations

import dataclasses
import random
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

import executor_lib
from executor_lib.log.files.file_table import FileChunk
from executor_lib.log.files.live_files import LiveFiles
from executor_lib.log.files.pruning import partition_judge, prune_files
from executor_lib.log.state.avro_state import decode_manifest, decode_manifest_chunk
from executor_lib.log.state.state import TableState, replay
from executor_lib.protocol.actions import AddAction, RemoveAction
from indextables_contract import filters
from tests.conftest import COMPAT_ROOT
from tests.log.helpers import add, make_table

SCHEMA_STRING = (
    '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},'
    '{"name":"day","type":"string","nullable":true,"metadata":{}},'
    '{"name":"hour","type":"integer","nullable":true,"metadata":{}}]}'
)


def varied(i: int) -> AddAction:
    """Adds exercising every kind of field: optional scalars, null/empty/None-valued maps, sets, extras."""
    day = None if i % 7 == 0 else f"2024-01-{i % 5 + 1:02d}"
    return AddAction(
        path=f"day={day}/hour={i % 3}/split-{uuid.uuid4()}.split",
        partition_values={"day": day, "hour": str(i % 3)} if i % 11 else {"hour": str(i % 3)},
        size=1000 + i,
        modification_time=1_700_000_000_000 + i,
        data_change=bool(i % 2),
        stats='{"numRecords": 3}' if i % 4 == 0 else None,
        tags={"k": "v", "n": None} if i % 3 == 0 else ({} if i % 3 == 1 else None),  # type: ignore[dict-item]
        min_values={"id": str(i)} if i % 5 else None,
        max_values={"id": str(i + 9)} if i % 5 else None,
        num_records=10 + i if i % 6 else None,
        footer_start_offset=900 + i,
        footer_end_offset=1000 + i,
        has_footer_offsets=i % 2 == 0,
        split_tags=frozenset({"a", f"t{i % 2}"}) if i % 4 == 1 else None,
        doc_mapping_ref="ref-a" if i % 2 else "ref-b",
        companion_source_files=("x.parquet", "y.parquet") if i == 5 else None,
        extra={"futureField": [1, {"x": i}]} if i % 9 == 0 else {},
    )


def test_a_chunk_gives_back_exactly_the_actions_it_was_built_from() -> None:
    adds = [varied(i) for i in range(60)]
    back = FileChunk.from_actions(adds).actions()
    assert back == adds
    for original, copy in zip(adds, back, strict=True):
        assert vars(copy) == vars(original)  # extra (compare=False) and every attribute included
    assert back[1].extra == {} and back[1].extra is not back[2].extra  # each its own dict


def test_unknown_fields_json_cannot_hold_keep_their_objects() -> None:
    adds = [dataclasses.replace(add(), extra={"blob": b"\x00\x01"}), add()]
    chunk = FileChunk.from_actions(adds)
    assert chunk.objects is not None and "extra" not in chunk.table.column_names
    assert chunk.actions() == adds and chunk.actions()[0].extra == {"blob": b"\x00\x01"}


def _dict_state(adds: list[AddAction]) -> TableState:
    return TableState(version=0, protocol=None, metadata=None, files={a.path: a for a in adds})


def _columnar_state(adds: list[AddAction], tombstones: frozenset[str]) -> TableState:
    chunks = [FileChunk.from_actions(adds[i : i + 17]) for i in range(0, len(adds), 17)]
    return TableState(version=0, protocol=None, metadata=None, files=LiveFiles(chunks, tombstones))


def test_replay_over_columnar_files_equals_replay_over_a_dict() -> None:
    rng = random.Random(7)
    adds = [varied(i) for i in range(100)]
    tombstoned = frozenset(a.path for a in rng.sample(adds, 10))
    model = _dict_state([a for a in adds if a.path not in tombstoned])
    state = _columnar_state(adds, tombstoned)
    paths = [a.path for a in adds]
    for version in range(1, 6):
        actions: list[AddAction | RemoveAction] = []
        for _ in range(8):
            path = rng.choice(paths)
            if rng.random() < 0.5:
                actions.append(RemoveAction(path=path))
            else:  # re-added (a replacement) or new
                path = path if rng.random() < 0.5 else f"new-{uuid.uuid4()}"
                actions.append(dataclasses.replace(varied(rng.randrange(100)), path=path))
                paths.append(path)
        model = replay(model, [(version, actions)])
        state = replay(state, [(version, actions)])
        files = state.files
        assert isinstance(files, LiveFiles)
        assert len(files) == len(model.files)
        assert sorted(files) == sorted(model.files)
        assert sorted(files.values(), key=lambda a: a.path) == sorted(model.files.values(), key=lambda a: a.path)
        for path in rng.sample(paths, 20):
            assert (path in files) == (path in model.files)
            assert files.get(path) == model.files.get(path)
        assert files.total("size") == sum(a.size for a in model.files.values())
        assert files.total("num_records") == sum(a.num_records or 0 for a in model.files.values())


PREDICATES = [
    [filters.Term("day", "2024-01-03")],
    [filters.TermIn("hour", (0, 2))],
    [filters.Between("hour", 1, None)],
    [filters.Or((filters.Term("day", "2024-01-01"), filters.Term("id", 42)))],
    [filters.Term("day", "2024-01-02"), filters.Between("id", 10, 30)],
    [filters.Not(filters.Term("day", "2024-01-02"))],
    [filters.Term("day", "nowhere")],
]


@pytest.mark.parametrize("predicates", PREDICATES, ids=[repr(p)[:60] for p in PREDICATES])
def test_partition_selection_then_pruning_equals_pruning_every_file(predicates: list[filters.Filter]) -> None:
    adds = [varied(i) for i in range(120)]
    state = replay(_columnar_state(adds, frozenset({adds[3].path})), [(1, [varied(500), RemoveAction(adds[8].path)])])
    files = state.files
    assert isinstance(files, LiveFiles)
    every = list(files.values())
    keep = partition_judge(predicates, SCHEMA_STRING, ["day", "hour"])
    selected = files.select_partitions(keep, ["day", "hour"])
    expected = prune_files(every, predicates, SCHEMA_STRING, ["day", "hour"])
    assert {a.path for a in expected} <= {a.path for a in selected}  # a superset ...
    assert prune_files(selected, predicates, SCHEMA_STRING, ["day", "hour"]) == expected  # ... pruned to the same


def test_a_chunks_partition_index_is_made_once_and_serves_every_later_filter() -> None:
    """The distinct partitions of a chunk and each row's are kept with the chunk: every filter after
    the first asks ``keep`` once per distinct partition and selects what a fresh chunk selects."""
    adds = [varied(i) for i in range(120)]
    kept = LiveFiles([FileChunk.from_actions(adds)], frozenset())
    distinct = {tuple(sorted((k, v) for k, v in a.partition_values.items() if v is not None)) for a in adds}
    for predicates in PREDICATES:
        judge = partition_judge(predicates, SCHEMA_STRING, ["day", "hour"])
        calls: list[tuple[tuple[str, str], ...]] = []
        keep = _counting(judge, calls)
        fresh = LiveFiles([FileChunk.from_actions(adds)], frozenset())
        expected = {a.path for a in fresh.select_partitions(judge, ["day", "hour"])}
        assert {a.path for a in kept.select_partitions(keep, ["day", "hour"])} == expected
        assert sorted(calls) == sorted(distinct)  # once per distinct partition
    (chunk,) = kept.chunks
    assert list(chunk._partitions) == [("day", "hour")]


def _counting(judge: Any, calls: list[tuple[tuple[str, str], ...]]) -> Any:
    def keep(values: dict[str, str]) -> bool:
        calls.append(tuple(sorted(values.items())))
        return bool(judge(values))

    return keep


def test_mapping_keys_are_the_live_files_distinct_mapping_pairs() -> None:
    """Inline mappings, refs and neither, some only on tombstoned or removed files: the pairs are
    those of the live files' own actions."""

    def with_mapping(i: int) -> AddAction:
        a = varied(i)
        if i % 13 == 0:
            return dataclasses.replace(a, doc_mapping_json=f'[{{"name":"f{i % 2}"}}]', doc_mapping_ref=None)
        return dataclasses.replace(a, doc_mapping_ref=None) if i % 17 == 0 else a

    adds = [with_mapping(i) for i in range(120)]
    only_dead = dataclasses.replace(varied(121), doc_mapping_ref="ref-dead")
    gone = dataclasses.replace(varied(122), doc_mapping_ref="ref-gone")
    state = _columnar_state([*adds, only_dead, gone], frozenset({only_dead.path}))
    state = replay(state, [(1, [with_mapping(500), RemoveAction(gone.path)])])
    files = state.files
    assert isinstance(files, LiveFiles)
    expected = {(a.doc_mapping_json, a.doc_mapping_ref) for a in files.values()}
    assert files.mapping_keys() == expected
    assert ("ref-dead" not in {r for _, r in expected}) and (None, None) in expected


@pytest.mark.parametrize("columns", [["day", "hour"], ["day"], []])
def test_partition_totals_are_the_live_files_sums_per_partition(columns: list[str]) -> None:
    """Summed through the chunks' partition indexes: tombstoned and removed files left out (a partition
    all of whose files are gone is no key), null values a key of their own; None once a live file has
    no record count."""
    adds = [dataclasses.replace(varied(i), num_records=10 + i) for i in range(120)]
    lonely = dataclasses.replace(varied(7), partition_values={"day": "2030-01-01", "hour": "9"}, num_records=5)
    state = _columnar_state([*adds, lonely], frozenset({adds[3].path, lonely.path}))
    state = replay(state, [(1, [dataclasses.replace(varied(500), num_records=3), RemoveAction(adds[8].path)])])
    files = state.files
    assert isinstance(files, LiveFiles)
    expected: dict[tuple[str | None, ...], int] = {}
    for a in files.values():
        key = tuple(a.partition_values.get(c) for c in columns)
        expected[key] = expected.get(key, 0) + (a.num_records or 0)
    assert files.partition_totals("num_records", columns) == expected
    assert ("2030-01-01", "9")[: len(columns)] not in expected or not columns
    unknown = replay(state, [(2, [dataclasses.replace(varied(501), num_records=None)])]).files
    assert isinstance(unknown, LiveFiles) and unknown.partition_totals("num_records", columns) is None


@pytest.mark.parametrize("inline", [False, True])
def test_the_doc_mapping_column_is_each_files_mapping_with_each_text_once(inline: bool) -> None:
    """Refs resolved through the registry (two refs of one text share an entry; an unknown ref and no
    ref are null), inline texts taking precedence: the same as ``doc_mapping`` per file."""
    from executor_lib.log.snapshot import Snapshot

    refs = ["ref-a", "ref-b", "ref-c", "ref-unknown", None]
    adds = [dataclasses.replace(varied(i), doc_mapping_ref=refs[i % 5], doc_mapping_json=None) for i in range(60)]
    if inline:
        adds = [
            dataclasses.replace(a, doc_mapping_json='[{"name":"a"}]') if i % 7 == 0 else a for i, a in enumerate(adds)
        ]
    registry = {"ref-a": '[{"name":"a"}]', "ref-b": '[{"name":"b"}]', "ref-c": '[{"name":"a"}]'}
    state = TableState(0, None, None, LiveFiles([FileChunk.from_actions(adds)]), schema_registry=registry)
    snap = Snapshot("file:///t", state, "test")
    table = state.files.columns(["doc_mapping_json", "doc_mapping_ref"])  # type: ignore[attr-defined]
    column = snap.doc_mapping_column(table).combine_chunks()
    assert column.type.value_type == "string" and len(set(column.dictionary.to_pylist())) == len(column.dictionary)
    assert column.cast("string").to_pylist() == [snap.doc_mapping(a) for a in adds]


def test_an_avro_state_snapshot_holds_columnar_files_and_lists_a_partition(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    log = make_table(uri, {"spark.indextables.state.entriesPerManifest": "40"})
    days = [f"2024-02-{d:02d}" for d in range(1, 11)]
    log.commit([add(days[i % 10], records=i + 1) for i in range(200)])
    snap = executor_lib.open_log(uri).snapshot()
    gone = snap.files[5]
    log.commit([RemoveAction(gone.path)])
    snap = executor_lib.open_log(uri).snapshot()
    assert isinstance(snap.state.files, LiveFiles)
    assert len(snap.files) == 199 and gone.path not in snap.state.files
    assert snap.num_records == sum(range(1, 201)) - (gone.num_records or 0)
    listed = snap.list_files([filters.Term("date", "2024-02-03")])
    assert sorted(a.path for a in listed) == sorted(
        a.path for a in snap.files if a.partition_values["date"] == "2024-02-03"
    )
    assert len(listed) == 20 - (gone.partition_values["date"] == "2024-02-03")


def _manifests() -> list[Path]:
    return sorted(p for p in COMPAT_ROOT.rglob("manifest-*.avro")) if COMPAT_ROOT.is_dir() else []


def test_records_become_the_same_columns_as_their_actions(tmp_path: Path) -> None:
    """The cold-load path (Avro records straight to columns) against the object path, on every
    IndexTables4Spark manifest of the compat tables and on one this project writes."""
    log = make_table(str(tmp_path / "t"), {})
    log.commit([add(f"2024-03-0{i % 3 + 1}", records=i) for i in range(30)])
    ours = sorted((tmp_path / "t" / "_transaction_log").rglob("*.avro"))
    manifests = [p for p in ours if "_manifest" not in p.name] + _manifests()
    assert len(manifests) > (1 if COMPAT_ROOT.is_dir() else 0)  # without ../shared: this project's only
    for path in manifests:
        data = path.read_bytes()
        chunk = decode_manifest_chunk(data, str(path))
        assert chunk.actions() == list(decode_manifest(data, str(path))), path
        assert chunk.table.equals(FileChunk.from_actions(chunk.actions()).table), path


COLUMNS = ["path", "size", "num_records", "partition_values", "doc_mapping_ref", "data_change", "split_tags"]


def _expected_rows(adds: list[AddAction], columns: list[str]) -> list[tuple[object, ...]]:
    def value(a: AddAction, c: str) -> object:
        v = getattr(a, c)
        if c == "partition_values":
            return sorted(v.items()) if v is not None else None
        return sorted(v) if isinstance(v, frozenset) else v

    return sorted(tuple(value(a, c) for c in columns) for a in adds)


def _rows(table: object, columns: list[str]) -> list[tuple[object, ...]]:
    def value(v: object, c: str) -> object:
        return sorted(v) if c in ("partition_values", "split_tags") and v is not None else v  # type: ignore[call-overload]

    return sorted(tuple(value(r[c], c) for c in columns) for r in table.to_pylist())  # type: ignore[attr-defined]


def test_file_columns_are_the_live_files_attributes_after_replay() -> None:
    """Shadowed rows left out, the overlay's rows in, defaults where a chunk leaves a column out."""
    from executor_lib.log.files.live_files import file_columns

    rng = random.Random(11)
    adds = [varied(i) for i in range(90)]
    state = _columnar_state(adds, frozenset(a.path for a in rng.sample(adds, 9)))
    state = replay(state, [(1, [RemoveAction(adds[4].path), dataclasses.replace(varied(7), path="new-a")])])
    model = list(state.files.values())
    assert _rows(file_columns(state.files, COLUMNS), COLUMNS) == _expected_rows(model, COLUMNS)
    as_dict = _dict_state(model)  # a JSON checkpoint's files: a dict of actions
    assert _rows(file_columns(as_dict.files, COLUMNS), COLUMNS) == _expected_rows(model, COLUMNS)
    one_chunk_without_tags = LiveFiles([FileChunk.from_actions([add(), add()])])
    assert (
        file_columns(one_chunk_without_tags, ["split_tags", "data_change"]).to_pylist()
        == [{"split_tags": None, "data_change": True}] * 2
    )
    with pytest.raises(ValueError, match="unknown file attribute 'sizes'"):
        file_columns(state.files, ["sizes"])


@pytest.mark.parametrize("predicates", PREDICATES, ids=[repr(p)[:60] for p in PREDICATES])
def test_file_columns_of_selected_partitions_equal_the_selected_files(predicates: list[filters.Filter]) -> None:
    adds = [varied(i) for i in range(120)]
    state = replay(_columnar_state(adds, frozenset({adds[3].path})), [(1, [varied(500), RemoveAction(adds[8].path)])])
    files = state.files
    assert isinstance(files, LiveFiles)
    keep = partition_judge(predicates, SCHEMA_STRING, ["day", "hour"])
    selected = files.select_partitions(keep, ["day", "hour"])
    table = files.columns(["path", "size"], keep, ["day", "hour"])
    assert sorted(table.column("path").to_pylist()) == sorted(a.path for a in selected)


def test_a_snapshot_answers_counts_mappings_and_newest_file_from_columns(tmp_path: Path) -> None:
    """``num_files``, ``newest_file``, ``doc_mapping_texts`` and ``list_partitions`` of an Avro-state
    snapshot (chunks plus later commits) equal what its ``files`` say."""
    import pyarrow as pa

    uri = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    log = executor_lib.create_table(uri, schema, ["day"], **{"spark.indextables.state.format": "avro"})
    first = [dataclasses.replace(add(), partition_values={"day": f"d{i % 3}"}, doc_mapping_ref=None) for i in range(20)]
    log.commit(first)
    log.checkpoint()
    later = dataclasses.replace(
        add(), partition_values={"day": "d9"}, modification_time=max(a.modification_time for a in first) + 1
    )
    log.commit([later, RemoveAction(path=first[0].path)])
    snap = executor_lib.open_log(uri).snapshot()
    files = snap.files
    assert snap.num_files == len(files) == 20
    assert snap.newest_file() == max(files, key=lambda a: (a.modification_time, a.path)) == later
    assert snap.doc_mapping_texts() == {snap.doc_mapping(a) for a in files}
    day = [filters.Term("day", "d1")]
    assert sorted(a.path for a in snap.list_partitions(day)) == sorted(
        a.path for a in files if a.partition_values["day"] == "d1"
    )
    assert sorted(snap.file_columns(["path"], day).column("path").to_pylist()) == sorted(
        a.path for a in files if a.partition_values["day"] == "d1"
    )


def test_actions_of_paths_are_the_live_files_in_order_within_the_partitions_kept() -> None:
    adds = [varied(i) for i in range(120)]
    dead = varied(200)
    state = _columnar_state([*adds, dead], frozenset({dead.path}))
    later = varied(300)
    state = replay(state, [(1, [later, RemoveAction(adds[3].path)])])
    files = state.files
    assert isinstance(files, LiveFiles)
    wanted = [later.path, adds[40].path, adds[7].path, adds[41].path]
    assert files.actions_of(wanted) == [files[p] for p in wanted]
    day = adds[40].partition_values.get("day")
    in_day = [a.path for a in adds[4:] if a.partition_values.get("day") == day][:5]
    keep = lambda v: v.get("day") == day  # noqa: E731
    assert files.actions_of(in_day, keep, ["day", "hour"]) == [files[p] for p in in_day]
    other = next(a.path for a in adds[4:] if a.partition_values.get("day") != day)
    for missing in (other, adds[3].path, dead.path, "day=x/nowhere.split"):  # another partition, removed, tombstoned
        with pytest.raises(KeyError, match=re.escape(missing)):
            files.actions_of([*in_day, missing], keep, ["day", "hour"])
        assert files.actions_of([missing, *in_day], keep, ["day", "hour"], missing_ok=True) == [
            files[p] for p in in_day
        ]


def test_by_partition_yields_each_kept_partitions_live_files_once() -> None:
    adds = [varied(i) for i in range(150)]
    dead = varied(400)
    state = _columnar_state([*adds, dead], frozenset({dead.path}))
    state = replay(state, [(1, [varied(300), varied(301), RemoveAction(adds[5].path)])])
    files = state.files
    assert isinstance(files, LiveFiles)
    columns = ["day", "hour"]
    keep = lambda v: v.get("hour") != "1"  # noqa: E731  (some partitions left out)
    parts = list(files.by_partition(keep, columns))
    expected = files.select_partitions(keep, columns)
    assert sorted(a.path for part in parts for a in part) == sorted(a.path for a in expected)
    keys = [{tuple(a.partition_values.get(c) for c in columns) for a in part} for part in parts]
    assert all(len(k) == 1 for k in keys) and len({next(iter(k)) for k in keys}) == len(parts)  # one each
    by_path = {a.path: a for a in expected}
    assert all(a == by_path[a.path] for part in parts for a in part)
