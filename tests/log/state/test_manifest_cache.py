"""Decoded manifests are reused in memory and, across processes, from a private disk cache."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from executor_lib.log.files.file_table import FileChunk
from executor_lib.log.files.live_files import file_columns
from executor_lib.log.snapshot import SnapshotLoader
from executor_lib.log.state.manifest_cache import DiskManifestCache, ManifestCache
from executor_lib.protocol.actions import AddAction
from executor_lib.storage import open_store
from tests.log.helpers import add, make_table


def test_memory_then_disk_then_decode(tmp_path: Path) -> None:
    import executor_lib.log.state.avro_state as avro_state

    uri = str(tmp_path / "t")
    log = make_table(uri, {})
    for _ in range(3):
        log.commit([add() for _ in range(5)])
    disk = DiskManifestCache(tmp_path / "cache")
    cache = ManifestCache(disk=disk)
    original = avro_state.MANIFEST_CACHE
    avro_state.MANIFEST_CACHE = cache
    try:
        loader = SnapshotLoader(open_store(uri), log.config)
        first = {f.path: f for f in loader.load().files}
        assert (cache.misses, cache.hits, cache.disk_hits) == (3, 0, 0)
        cache.flush()  # disk copies are written in the background
        assert len(list((tmp_path / "cache").glob("*.arrow"))) == 3
        assert {f.path: f for f in loader.load().files} == first
        assert cache.hits == 3
        cache.clear()  # a new process: memory empty, disk warm
        assert {f.path: f for f in loader.load().files} == first
        assert cache.disk_hits == 3
        damages = iter([b"not arrow", _arrow_file(pa.table({"path": [1]})), _arrow_file(pa.table({"x": ["a"]}))[:-9]])
        for p, damage in zip((tmp_path / "cache").glob("*.arrow"), damages, strict=True):
            p.write_bytes(damage)  # garbage, a foreign layout, a truncated file: misses, not errors
        cache.clear()
        assert {f.path: f for f in loader.load().files} == first
        assert cache.misses == 6
    finally:
        avro_state.MANIFEST_CACHE = original


def test_shared_or_foreign_cache_directories_are_not_used(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    disk = DiskManifestCache(shared)
    disk.put("s3://b/m.avro", FileChunk.from_actions([add()]))
    assert list(shared.iterdir()) == []
    assert disk.get("s3://b/m.avro") is None


def test_a_new_process_reads_the_disk_cache(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    make_table(uri, {}).commit([add() for _ in range(4)])
    env = {**os.environ, "INDEXTABLES_MANIFEST_CACHE_DIR": str(tmp_path / "cache")}
    code = (
        "import sys,executor_lib; from executor_lib.log.state.manifest_cache import MANIFEST_CACHE as C;"
        "s=executor_lib.open_log(sys.argv[1]).snapshot(); print(len(s.files), C.misses, C.disk_hits)"
    )
    outs = [
        subprocess.run(
            [sys.executable, "-c", code, uri], env=env, check=True, capture_output=True, text=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert outs == [["4", "1", "0"], ["4", "0", "1"]]


def test_a_forked_child_writes_its_own_disk_copies(tmp_path: Path) -> None:
    """The background writer thread does not survive fork: the child must start its own."""
    import multiprocessing

    cache = ManifestCache(disk=DiskManifestCache(tmp_path / "cache"))
    cache.put("s3://b/parent.avro", FileChunk.from_actions([add()]))
    cache.flush()  # the parent's writer thread now exists

    def child() -> None:
        cache.put("s3://b/child.avro", FileChunk.from_actions([add(), add()]))
        cache.flush()

    process = multiprocessing.get_context("fork").Process(target=child, daemon=True)
    process.start()
    process.join(timeout=30)
    if process.is_alive():  # the child's write never ran: its flush waits forever
        process.kill()
        process.join()
    assert process.exitcode == 0
    fresh = DiskManifestCache(tmp_path / "cache")
    found = fresh.get("s3://b/child.avro")
    assert found is not None and len(found) == 2


def _arrow_file(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _with_stats(i: int) -> AddAction:
    return dataclasses.replace(add(), min_values={"id": str(i)}, max_values={"id": str(i + 9)})


def test_statistics_are_read_from_the_disk_copy_only_when_asked(tmp_path: Path) -> None:
    """A chunk from the disk cache leaves its min/max columns in a file of their own, unread until a
    caller asks; a damaged or missing one is read afresh from the manifest, never answered wrongly."""
    import executor_lib.log.state.avro_state as avro_state

    uri = str(tmp_path / "t")
    log = make_table(uri, {})
    adds = [_with_stats(i) for i in range(6)]
    log.commit(adds)
    cache = ManifestCache(disk=DiskManifestCache(tmp_path / "cache"))
    original = avro_state.MANIFEST_CACHE
    avro_state.MANIFEST_CACHE = cache
    try:
        loader = SnapshotLoader(open_store(uri), log.config)
        loader.load()
        cache.flush()
        deferred_files = list((tmp_path / "cache").glob("*.deferred.arrow"))
        assert len(deferred_files) == 1
        expected = {a.path: (dict(a.min_values or {}), dict(a.max_values or {})) for a in adds}
        for damage in (None, b"not arrow", _arrow_file(pa.table({"min_values": [1]})), "missing"):
            if damage == "missing":
                deferred_files[0].unlink()
            elif isinstance(damage, bytes):
                deferred_files[0].write_bytes(damage)
            cache.clear()  # a new process: memory empty, disk warm
            state = loader.load().state
            (chunk,) = state.files.chunks  # type: ignore[attr-defined]
            assert chunk.deferred is not None and not chunk.deferred.loaded
            assert "min_values" not in chunk.table.column_names
            table = file_columns(state.files, ["path", "min_values", "max_values"])
            assert chunk.deferred.loaded
            got = {p: (dict(lo), dict(hi)) for p, lo, hi in zip(*table.to_pydict().values(), strict=True)}
            assert got == expected
            assert {a.path: a for a in state.files.values()} == {a.path: a for a in adds}
    finally:
        avro_state.MANIFEST_CACHE = original


def test_a_decoded_chunk_hands_its_statistics_to_the_disk_copy(tmp_path: Path) -> None:
    """A chunk decoded in this process (no disk copy yet) holds its min/max columns in memory only
    until the disk copy is written; then they are read from it when asked, or from the manifest
    afresh if that file is damaged or gone by then — the same values every time."""
    import executor_lib.log.state.avro_state as avro_state

    uri = str(tmp_path / "t")
    log = make_table(uri, {})
    adds = [_with_stats(i) for i in range(6)]
    log.commit(adds)
    expected = {a.path: (dict(a.min_values or {}), dict(a.max_values or {})) for a in adds}
    original = avro_state.MANIFEST_CACHE
    try:
        for damage in (None, b"not arrow", "missing"):
            avro_state.MANIFEST_CACHE = cache = ManifestCache(disk=DiskManifestCache(tmp_path / f"cache-{damage!r}"))
            state = SnapshotLoader(open_store(uri), log.config).load().state
            (chunk,) = state.files.chunks  # type: ignore[attr-defined]
            assert cache.misses == 1 and chunk.deferred is not None
            assert "min_values" not in chunk.table.column_names
            cache.flush()
            assert not chunk.deferred.loaded  # handed over to the disk copy
            (stats_file,) = (tmp_path / f"cache-{damage!r}").glob("*.deferred.arrow")
            if damage == "missing":
                stats_file.unlink()
            elif isinstance(damage, bytes):
                stats_file.write_bytes(damage)
            table = file_columns(state.files, ["path", "min_values", "max_values"])
            got = {p: (dict(lo), dict(hi)) for p, lo, hi in zip(*table.to_pydict().values(), strict=True)}
            assert got == expected and chunk.deferred.loaded
            assert {a.path: a for a in state.files.values()} == {a.path: a for a in adds}
    finally:
        avro_state.MANIFEST_CACHE = original


def test_without_a_disk_cache_a_decoded_chunk_keeps_its_statistics(tmp_path: Path) -> None:
    import executor_lib.log.state.avro_state as avro_state

    uri = str(tmp_path / "t")
    log = make_table(uri, {})
    log.commit([_with_stats(i) for i in range(3)])
    original = avro_state.MANIFEST_CACHE
    avro_state.MANIFEST_CACHE = ManifestCache(disk=None)
    try:
        (chunk,) = SnapshotLoader(open_store(uri), log.config).load().state.files.chunks  # type: ignore[attr-defined]
        assert chunk.deferred is None and "min_values" in chunk.table.column_names
    finally:
        avro_state.MANIFEST_CACHE = original
