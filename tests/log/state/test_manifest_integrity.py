"""A state's Avro files are checked before they are decoded or cached (issue 20, hole 4): a
manifest against its content address or its Hadoop ``.crc`` sidecar, a snappy block against its
CRC32, a manifest's record count against the state manifest's ``numEntries``; and the manifest
cache does not answer for a manifest that was deleted or replaced since it was cached."""

from __future__ import annotations

import io
import random
import shutil
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest

import executor_lib
from executor_lib.log.state import avro_state
from executor_lib.log.state.manifest_cache import DiskManifestCache, ManifestCache
from executor_lib.log.state.manifest_integrity import check_hadoop_crc
from executor_lib.storage import open_store
from indextables_contract.errors import CorruptLogError, MissingLogFileError
from tests.log.helpers import add, make_table

MANIFESTS = "_transaction_log/manifests"


@pytest.fixture
def fresh_cache(tmp_path: Path) -> Iterator[ManifestCache]:
    """A private memory + disk manifest cache for the test (the process-wide one is restored after)."""
    original = avro_state.MANIFEST_CACHE
    cache = avro_state.MANIFEST_CACHE = ManifestCache(disk=DiskManifestCache(tmp_path / "manifest-cache"))
    try:
        yield cache
    finally:
        cache.flush()
        avro_state.MANIFEST_CACHE = original


def manifest_keys(uri: str, options: dict[str, Any]) -> list[str]:
    store = open_store(uri, **options)
    return sorted(o.key for o in store.list(MANIFESTS + "/") if o.key.endswith(".avro"))


def snapshot_paths(uri: str, options: dict[str, Any]) -> list[str]:
    return sorted(f.path for f in executor_lib.open_log(uri, **options).snapshot().files)


def data_block_start(data: bytes) -> int:
    """Offset of the first data block (after the header: magic, metadata, sync marker)."""
    return next(iter(fastavro.block_reader(io.BytesIO(data)))).offset


def test_every_sampled_bit_flip_in_a_manifest_is_detected_and_never_cached(
    tmp_path: Path, fresh_cache: ManifestCache
) -> None:
    """Before the fix about one flip in four in the data block decoded silently into other entries."""
    uri = str(tmp_path / "t")
    make_table(uri, {}).commit([add(records=i) for i in range(1, 30)])
    expected = snapshot_paths(uri, {})
    (key,) = manifest_keys(uri, {})
    path = tmp_path / "t" / key
    original = path.read_bytes()
    start = data_block_start(original)
    rng = random.Random(20)
    bits = [*sorted(rng.sample(range(start * 8, len(original) * 8), 60)), 3 * 8, (start - 20) * 8]  # + header
    for bit in bits:
        damaged = bytearray(original)
        damaged[bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(damaged))
        fresh_cache.clear(disk=True)
        with pytest.raises(CorruptLogError, match=path.name):
            executor_lib.open_log(uri).snapshot()
    path.write_bytes(original)
    fresh_cache.flush()
    assert list((tmp_path / "manifest-cache").glob("*.arrow")) == []  # nothing damaged was cached
    assert snapshot_paths(uri, {}) == expected


def test_a_damaged_manifest_is_not_answered_from_a_cache_that_holds_the_original(
    tmp_path: Path, fresh_cache: ManifestCache
) -> None:
    uri = str(tmp_path / "t")
    make_table(uri, {}).commit([add() for _ in range(5)])
    expected = snapshot_paths(uri, {})  # now cached in memory and on disk
    (key,) = manifest_keys(uri, {})
    path = tmp_path / "t" / key
    original = path.read_bytes()
    damaged = bytearray(original)
    damaged[-40] ^= 0x10
    path.write_bytes(bytes(damaged))  # same size, new modification time
    with pytest.raises(CorruptLogError, match=path.name):
        executor_lib.open_log(uri).snapshot()
    path.write_bytes(original)
    assert snapshot_paths(uri, {}) == expected


def test_a_deleted_manifest_is_not_answered_from_the_cache(
    table: tuple[str, dict[str, Any]], fresh_cache: ManifestCache
) -> None:
    """Before the fix the memory and the disk cache both kept answering for a deleted manifest."""
    uri, options = table
    make_table(uri, options).commit([add() for _ in range(5)])
    assert len(snapshot_paths(uri, options)) == 5
    fresh_cache.flush()
    (key,) = manifest_keys(uri, options)
    open_store(uri, **options).delete(key)
    with pytest.raises(MissingLogFileError, match=key.rsplit("/", 1)[1]):
        executor_lib.open_log(uri, **options).snapshot()  # memory layer warm
    fresh_cache.clear()
    with pytest.raises(MissingLogFileError, match=key.rsplit("/", 1)[1]):
        executor_lib.open_log(uri, **options).snapshot()  # a new process: disk layer warm


def test_state_manifest_entry_count_must_match_the_manifest(tmp_path: Path, fresh_cache: ManifestCache) -> None:
    from tests.log.state.test_avro_state import FILE_ENTRY_SCHEMA, STATE_SCHEMA, avro_bytes, entry, write_v0

    uri = str(tmp_path / "t")
    write_v0(uri, {})
    store = open_store(uri)
    store.put(f"{MANIFESTS}/manifest-m.avro", avro_bytes(FILE_ENTRY_SCHEMA, [entry("a.split", 1)] * 2, "null"))
    manifest = {
        "formatVersion": 1,
        "stateVersion": 1,
        "createdAt": 5,
        "numFiles": 3,
        "totalBytes": 1,
        "manifests": [
            {"path": "manifests/manifest-m.avro", "numEntries": 3, "minAddedAtVersion": 0, "maxAddedAtVersion": 0}
        ],
        "tombstones": [],
        "schemaRegistry": {},
        "protocolVersion": 4,
        "metadata": None,
    }
    store.put(
        "_transaction_log/state-v00000000000000000001/_manifest.avro", avro_bytes(STATE_SCHEMA, [manifest], "null")
    )
    with pytest.raises(CorruptLogError, match=r"manifest-m\.avro: 2 entries, but .*numEntries=3"):
        executor_lib.open_log(uri).snapshot()


def test_a_damaged_snappy_block_fails_its_crc(tmp_path: Path, fresh_cache: ManifestCache) -> None:
    """fastavro does not check the snappy codec's CRC32; a corrupted CRC (or content) must not pass."""
    uri = str(tmp_path / "t")
    make_table(uri, {}, **{"spark.indextables.state.compression": "snappy"}).commit([add() for _ in range(3)])
    (key,) = manifest_keys(uri, {})
    data = (tmp_path / "t" / key).read_bytes()
    block = next(iter(fastavro.block_reader(io.BytesIO(data))))
    crc_at = block.offset + block.size - 16 - 4
    assert data[crc_at : crc_at + 4] == zlib.crc32(block.bytes_.getvalue()).to_bytes(4, "big")
    damaged = data[:crc_at] + bytes(b ^ 0xFF for b in data[crc_at : crc_at + 4]) + data[crc_at + 4 :]
    # A non-content-addressed name (as the JVM writes), so only the CRC can notice.
    store = open_store(uri)
    store.put(f"{MANIFESTS}/manifest-0badc0de.avro", damaged)
    with pytest.raises(CorruptLogError, match=r"manifest-0badc0de\.avro: .*snappy CRC32"):
        avro_state.decode_manifest(damaged, store.uri_of(f"{MANIFESTS}/manifest-0badc0de.avro"))
    assert len(avro_state.decode_manifest(data, "intact")) == 3


def test_jvm_files_are_checked_against_their_hadoop_crc_sidecars(
    compat_root: Path, tmp_path: Path, fresh_cache: ManifestCache
) -> None:
    table = tmp_path / "05"
    shutil.copytree(compat_root / "05_many_transactions", table)
    for p in table.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    expected = snapshot_paths(str(table), {})  # every sidecar matches
    assert len(expected) == 30
    # Flips that zstd and Avro decode without complaint into other records (found by trying each bit).
    state = "_transaction_log/state-v00000000000000000015/_manifest.avro"
    for key, offset, bit in ((f"{MANIFESTS}/manifest-1cda15c1.avro", 118, 2), (state, 148, 0)):
        victim = table / key
        original = victim.read_bytes()
        damaged = bytearray(original)
        damaged[data_block_start(original) + offset] ^= 1 << bit
        victim.write_bytes(bytes(damaged))
        fresh_cache.clear(disk=True)
        with pytest.raises(CorruptLogError, match=rf"{victim.name}: bytes .* do not match its Hadoop checksum"):
            executor_lib.open_log(str(table)).snapshot()
        victim.write_bytes(original)
    assert snapshot_paths(str(table), {}) == expected


def test_hadoop_crc_sidecar_format_errors_are_named() -> None:
    data = bytes(range(256)) * 5
    good = (
        b"crc\x00"
        + (512).to_bytes(4, "big")
        + b"".join(zlib.crc32(data[i : i + 512]).to_bytes(4, "big") for i in range(0, len(data), 512))
    )
    check_hadoop_crc(data, good, "m.avro")
    with pytest.raises(CorruptLogError, match=r"m\.avro: .*covers 3 chunks"):
        check_hadoop_crc(data + b"x" * 600, good, "m.avro")
    with pytest.raises(CorruptLogError, match=r"m\.avro: its Hadoop checksum file \(\.crc\) is malformed"):
        check_hadoop_crc(data, b"xyz\x00" + good[4:], "m.avro")
