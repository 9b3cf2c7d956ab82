"""Per-manifest tombstones (issue 54, item 3): a state write counts the base files a commit removes
per manifest (``tombstoneCount`` / ``liveEntryCount``) and rewrites only the manifests whose
tombstones pass ``state.compaction.tombstoneThreshold``, or hold the most while more than
``state.compaction.maxTombstones`` would be listed; no compaction of the whole table for tombstones.

Checked against a dict model after every commit: this project's reader, the JVM-style reader
(``tests/jvm_reader.py``) and the states' own invariants."""

from __future__ import annotations

import dataclasses
import itertools
import random
from pathlib import Path
from typing import Any

import pytest

import executor_lib
from executor_lib.log.config import split_options
from executor_lib.log.state.avro_state import StateManifest, read_state_chunks, read_state_files, read_state_manifest
from executor_lib.log.state.state_writer import put_state
from executor_lib.log.state.tombstone_counts import counts_known
from executor_lib.log.transaction_log import TransactionLog
from executor_lib.protocol.actions import AddAction, RemoveAction
from executor_lib.storage import open_store
from executor_lib.storage.base import ObjectStore
from tests.jvm_reader import jvm_read
from tests.log.helpers import add, make_table
from tests.log.test_snapshot_cache import CountingStore


def _remove(a: AddAction) -> RemoveAction:
    return RemoveAction(a.path, 1, partition_values=a.partition_values, size=a.size)


def _check_state(store: ObjectStore, s: StateManifest, model: dict[str, AddAction], max_tombstones: int) -> None:
    """The state's live files are the model's, and its per-manifest counts are exact."""
    live = {a.path: a for a in read_state_files(store, s)}
    assert set(live) == set(model), f"state {s.state_version}: live files differ from the replay"
    assert all(live[p].size == model[p].size for p in model)
    assert s.num_files == len(model) and s.total_bytes == sum(a.size for a in model.values())
    assert counts_known(s), f"state {s.state_version}: counts not exact"
    assert len(s.tombstones) <= max_tombstones
    for info, chunk in zip(s.manifests, read_state_chunks(store, s), strict=True):
        paths = chunk.paths.to_pylist()
        hit = sum(p in s.tombstones for p in paths)
        assert (info.tombstone_count, info.live_entry_count) == (hit, len(paths) - hit), info.path
    listed = sum(i.tombstone_count for i in s.manifests)
    assert listed == len(s.tombstones), "every tombstone falls on exactly one entry"


def _numbered(action: AddAction, n: int) -> AddAction:
    """``action`` with a path numbered ``n`` (in its partition) instead of a random one."""
    return dataclasses.replace(action, path=f"{action.path.rsplit('/', 1)[0]}/split-{n:05d}.split")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_adds_and_removes_match_the_replay_after_every_commit(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    uri = str(tmp_path / "t")
    limits = {
        "spark.indextables.state.entriesPerManifest": "6",
        "spark.indextables.state.compaction.maxManifests": "4",
        "spark.indextables.state.compaction.maxTombstones": "5",
        "spark.indextables.state.compaction.tombstoneThreshold": "0.4",
    }
    log = make_table(uri, {}, **limits)
    store = open_store(uri)
    model: dict[str, AddAction] = {}
    removed: list[AddAction] = []
    dates = ["2024-01-01", "2024-01-02", "2024-01-03"]
    previous: StateManifest | None = None
    readded = 0
    numbers = itertools.count()
    partial_rewrites = 0  # states that dropped tombstones while keeping manifests of the base
    for step in range(45):
        actions: list[Any] = []
        if model and rng.random() < 0.6:
            gone = rng.sample(sorted(model), rng.randint(1, min(4, len(model))))
            taken = [model.pop(p) for p in gone]
            actions += [_remove(a) for a in taken]
            removed += taken
        if not actions or rng.random() < 0.5:
            # numbered paths, not add()'s random ones: the seed alone decides the run (which files the
            # removals pick, and so whether a tombstone-only rewrite happens, asserted after the loop)
            new = [_numbered(add(rng.choice(dates)), next(numbers)) for _ in range(rng.randint(1, 8))]
            if removed and rng.random() < 0.15:  # a removed path added again (a later version)
                new.append(removed.pop(rng.randrange(len(removed))))
                readded += 1
            actions += [a for a in new if a.path not in {r.path for r in actions}]
            model.update((a.path, a) for a in new if a in actions)
        version = log.commit(actions)
        s = read_state_manifest(store, version)
        assert s is not None
        _check_state(store, s, model, 5)
        assert set(executor_lib.open_log(uri).snapshot().state.files) == set(model), f"step {step}"
        assert set(jvm_read(uri).files) == set(model), f"step {step}: the JVM-style reader differs"
        if previous is not None and len(s.tombstones) < len(previous.tombstones):
            partial_rewrites += bool({m.path for m in s.manifests} & {m.path for m in previous.manifests})
        previous = s
    assert partial_rewrites, "some state rewrote a manifest for its tombstones and kept the rest"
    assert readded, "some removed path was added again"


def test_a_state_with_tombstones_reads_the_same_in_the_jvm_reader(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    log = make_table(uri, {}, **{"spark.indextables.state.entriesPerManifest": "10"})
    files = [add(d) for d in ("2024-01-01", "2024-01-02") for _ in range(10)]
    log.commit(files)
    log.commit([_remove(files[0]), _remove(files[15])])  # 1 of 10 in each manifest: not past 10%
    s = read_state_manifest(open_store(uri), 2)
    assert s is not None and s.tombstones == {files[0].path, files[15].path}
    assert [(m.tombstone_count, m.live_entry_count) for m in s.manifests] == [(1, 9), (1, 9)]
    view = jvm_read(uri)
    assert view.state_version == 2 and set(view.files) == {f.path for f in files} - s.tombstones
    assert set(view.files) == set(executor_lib.open_log(uri).snapshot().state.files)


def test_removing_past_the_share_rewrites_that_manifest_only(tmp_path: Path) -> None:
    """N manifests; a commit that takes one past the tombstone share writes one manifest, not N."""
    uri = str(tmp_path / "t")
    options = {"spark.indextables.state.entriesPerManifest": "10"}
    make_table(uri, {}, **options)
    config, storage = split_options(options)
    store = _PutCounter(open_store(uri, **storage))
    log = TransactionLog(store, config)
    files = [add(f"2024-01-{d:02d}") for d in range(1, 9) for _ in range(10)]
    log.commit(files)  # 8 full manifests, one per date
    before = read_state_manifest(store, 1)
    assert before is not None and len(before.manifests) == 8
    store.manifest_puts = 0
    log.commit([_remove(files[30])])  # 1 of 10: at the 10% share, not past it
    assert store.manifest_puts == 0, "a remove alone writes no manifest"
    log.commit([_remove(files[31])])  # 2 of 10: past it
    assert store.manifest_puts == 1, f"{store.manifest_puts} manifests written; only the one past the share"
    after = read_state_manifest(store, 3)
    assert after is not None and not after.tombstones and after.num_files == 78
    kept = {m.path for m in before.manifests} & {m.path for m in after.manifests}
    assert len(kept) == 7 and [m.num_entries for m in after.manifests] == [10, 10, 10, 8, 10, 10, 10, 10]


def test_the_tombstone_list_stays_below_its_bound(tmp_path: Path) -> None:
    """Removes spread thin over many manifests: none passes its share, and the manifests holding the
    most tombstones are rewritten whenever more than ``maxTombstones`` would be listed."""
    uri = str(tmp_path / "t")
    options = {
        "spark.indextables.state.entriesPerManifest": "20",
        "spark.indextables.state.compaction.maxTombstones": "6",
    }
    make_table(uri, {}, **options)
    config, storage = split_options(options)
    store = _PutCounter(open_store(uri, **storage))
    log = TransactionLog(store, config)
    files = [add(f"2024-01-{d:02d}") for d in range(1, 11) for _ in range(20)]
    log.commit(files)
    live = {f.path: f for f in files}
    for n in range(10):  # one file of each manifest: 1 of 20, under the 10% share
        for offset in (0, 1):
            gone = files[20 * n + offset]
            store.manifest_puts = 0
            version = log.commit([_remove(live.pop(gone.path))])
            s = read_state_manifest(store, version)
            assert s is not None
            _check_state(store, s, live, 6)
            assert store.manifest_puts <= 1, "one manifest rewritten at most"


def test_counts_another_writer_left_out_are_counted_again(tmp_path: Path) -> None:
    """A base with tombstones but no counts (0 and -1, as IndexTables4Spark writes them): the next
    state locates every tombstone afresh and records exact counts."""
    uri = str(tmp_path / "t")
    log = make_table(uri, {}, **{"spark.indextables.state.entriesPerManifest": "10"})
    files = [add(d) for d in ("2024-01-01", "2024-01-02") for _ in range(10)]
    log.commit(files)
    log.commit([_remove(files[0])])
    store = open_store(uri)
    s2 = read_state_manifest(store, 2)
    assert s2 is not None and counts_known(s2)
    uncounted = dataclasses.replace(
        s2, manifests=tuple(dataclasses.replace(m, tombstone_count=0, live_entry_count=-1) for m in s2.manifests)
    )
    store.delete(f"_transaction_log/state-v{2:020d}/_manifest.avro")
    assert put_state(store, uncounted, s2.protocol(), log.config)
    s2 = read_state_manifest(store, 2)
    assert s2 is not None and not counts_known(s2)
    log.commit([_remove(files[12])])
    s3 = read_state_manifest(store, 3)
    assert s3 is not None
    _check_state(store, s3, {f.path: f for f in files if f not in (files[0], files[12])}, 5000)


class _PutCounter(CountingStore):
    """Counts the manifests written (``manifests/manifest-*.avro``, not their column sidecars)."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.manifest_puts = 0

    def put(self, key: str, data: bytes) -> None:
        if key.startswith("_transaction_log/manifests/") and key.endswith(".avro"):
            self.manifest_puts += 1
        super().put(key, data)


def test_live_files_missing_matches_set_membership() -> None:
    """``LiveFiles.missing`` (what a remove is validated with) agrees with membership in the mapping,
    for chunk rows, shadowed rows, overlay adds, and paths sharing a chunk's prefix or suffix."""
    from executor_lib.log.files.file_table import FileChunk
    from executor_lib.log.files.live_files import LiveFiles

    rng = random.Random(5)
    adds = [add(rng.choice(["2024-01-01", "2024-01-02"])) for _ in range(40)]
    chunks = [FileChunk.from_actions(adds[:20]), FileChunk.from_actions(adds[20:])]
    shadowed = frozenset(a.path for a in adds[::7])
    overlay = {a.path: a for a in [add(), adds[7]]}  # a new file, and a shadowed one added again
    files = LiveFiles(chunks, shadowed | {adds[7].path}, overlay)
    strangers = [adds[0].path[:-1], adds[1].path + "x", "date=2024-01-01/splits/split-.split", "x"]
    asked = [a.path for a in adds] + list(overlay) + strangers
    assert files.missing(asked) == [p for p in asked if p not in set(files)]
