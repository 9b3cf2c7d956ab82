"""Column sidecars of Avro manifests (``log/state/manifest_columns.py``): written with every manifest,
equal to decoding the Avro, used only when bound to the manifest's bytes, collected with it."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

import executor_lib
from executor_lib.log.config import LogConfig
from executor_lib.log.state.avro_state import FILE_ENTRY_ONLY_FIELDS, decode_manifest_chunk
from executor_lib.log.state.manifest_cache import MANIFEST_CACHE
from executor_lib.log.state.manifest_columns import decode_sidecar, encode_sidecar, owning_manifest, sidecar_key
from executor_lib.log.state.state_writer import write_manifest
from executor_lib.protocol.actions import RemoveAction
from executor_lib.storage import open_store
from tests.log.files.test_file_table import varied
from tests.log.helpers import add, make_table
from tests.log.maintenance.test_cleanup import NOW_RETENTION

LOG = "_transaction_log"


@pytest.fixture
def cold_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every manifest read misses the caches (memory and disk) for the test's duration."""
    MANIFEST_CACHE.clear()
    monkeypatch.setattr(MANIFEST_CACHE, "disk", None)
    monkeypatch.setattr(MANIFEST_CACHE, "max_entries", 0)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest_keys(uri: str, options: dict[str, Any]) -> tuple[list[str], list[str]]:
    listed = sorted(o.key for o in open_store(uri, **options).list(f"{LOG}/manifests/"))
    return [k for k in listed if k.endswith(".avro")], [k for k in listed if owning_manifest(k)]


def test_a_sidecar_holds_what_decoding_its_manifest_gives(tmp_path: Any) -> None:
    """Every kind of field (optional scalars, empty and null maps, sets, dictionary columns)."""
    store = open_store(str(tmp_path))
    adds = [varied(i) for i in range(1, 300) if i % 3]  # no unknown extras (they keep objects) nor None tags
    info = write_manifest(store, [(a, 3, 1000) for a in adds], LogConfig())
    key = f"{LOG}/{info.path}"
    manifest, sidecar = store.read(key), store.read(sidecar_key(key))
    from_sidecar = decode_sidecar(sidecar, _sha256(manifest), "sidecar")
    decoded = decode_manifest_chunk(manifest, key)
    assert from_sidecar is not None
    assert from_sidecar.table.equals(decoded.table)
    assert from_sidecar.actions() == decoded.actions()
    assert [a.path for a in decoded.actions()] == [a.path for a in adds]


def test_a_sidecar_of_other_bytes_or_damaged_is_ignored(tmp_path: Any) -> None:
    store = open_store(str(tmp_path))
    first = write_manifest(store, [(add(), 1, 0) for _ in range(5)], LogConfig())
    second = write_manifest(store, [(add(), 2, 0) for _ in range(5)], LogConfig())
    manifest = store.read(f"{LOG}/{first.path}")
    sidecar = store.read(sidecar_key(f"{LOG}/{first.path}"))
    assert decode_sidecar(sidecar, _sha256(manifest), "s") is not None
    assert decode_sidecar(store.read(sidecar_key(f"{LOG}/{second.path}")), _sha256(manifest), "s") is None
    assert decode_sidecar(sidecar[: len(sidecar) // 2], _sha256(manifest), "s") is None
    assert decode_sidecar(b"not arrow", _sha256(manifest), "s") is None


def test_cold_loads_read_sidecars_bound_to_their_manifest(table: tuple[str, dict[str, Any]], cold_cache: None) -> None:
    """A reader that misses its caches takes a manifest's entries from its sidecar: shown with a
    sidecar re-bound to the manifest but holding other paths (which only the sidecar can give);
    one bound to other bytes is ignored and the Avro decoded."""
    uri, options = table
    log = make_table(uri, options, **{"spark.indextables.state.format": "avro"})
    files = [add(f"2024-03-0{i % 3 + 1}") for i in range(12)]
    log.commit(files)
    manifests, sidecars = _manifest_keys(uri, options)
    assert manifests and {owning_manifest(s) for s in sidecars} == set(manifests)
    expected = {f.path for f in files}
    assert {f.path for f in executor_lib.open_log(uri, **options).snapshot().files} == expected

    store = open_store(uri, **options)
    key = manifests[0]
    manifest = store.read(key)
    chunk = decode_manifest_chunk(manifest, key)
    records = [{**r, "path": "renamed/" + r["path"]} for r in _records(chunk)]
    names = list(records[0])
    store.put(sidecar_key(key), encode_sidecar(records, names, FILE_ENTRY_ONLY_FIELDS, _sha256(manifest)) or b"")
    renamed = {f.path for f in executor_lib.open_log(uri, **options).snapshot().files}
    assert renamed == {"renamed/" + p if p in set(chunk.paths.to_pylist()) else p for p in expected}

    foreign = encode_sidecar(records, names, FILE_ENTRY_ONLY_FIELDS, _sha256(b"x"))
    store.put(sidecar_key(key), foreign or b"")
    assert {f.path for f in executor_lib.open_log(uri, **options).snapshot().files} == expected


def _records(chunk: Any) -> list[dict[str, Any]]:
    """Avro-style FileEntry records of a chunk's actions (the keys ``FileChunk.from_records`` reads)."""
    from executor_lib.log.state.state_writer import _file_entry

    return [_file_entry(a, 1, 0) for a in chunk.actions()]


def test_cleanup_collects_a_sidecar_with_its_manifest_only(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    log = make_table(uri, options, **{"spark.indextables.state.compaction.maxManifests": "3"})
    files = []
    for _ in range(6):
        files.append(add())
        log.commit([files[-1]])
    log.commit([RemoveAction(files[0].path, 1, partition_values=files[0].partition_values, size=files[0].size)])
    before_manifests, before_sidecars = _manifest_keys(uri, options)
    report = executor_lib.open_log(uri, **options, **NOW_RETENTION).cleanup()
    manifests, sidecars = _manifest_keys(uri, options)
    assert report.deleted_manifests and len(manifests) < len(before_manifests)
    assert {owning_manifest(s) for s in sidecars} == set(manifests), "each kept manifest keeps its sidecar"
    gone = set(before_sidecars) - set(sidecars)
    assert gone and gone <= set(report.deleted_manifests)
    assert {f.path for f in executor_lib.open_log(uri, **options).snapshot().files} == {f.path for f in files[1:]}
