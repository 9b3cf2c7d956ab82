"""A version file another writer is still writing in place (IndexTables4Spark on a Hadoop filesystem creates
the file, then writes its bytes: ``HadoopCloudStorageProvider.writeFileIfNotExists``) is read again, not
taken for a corrupt log: found by tests/jvm/test_two_writers.py, where appends of ours failed with
``CorruptLogError: ... file is empty`` while 0.5.3 committed beside them."""

from __future__ import annotations

import struct
import threading
import time
import zlib
from pathlib import Path

import pytest

from executor_lib.log.state import in_place
from executor_lib.log.state.avro_state import read_state_manifest
from executor_lib.log.tables import open_log
from executor_lib.protocol.actions import actions_to_ndjson
from executor_lib.storage import open_store
from indextables_contract.errors import CorruptLogError
from tests.jvm_reader import Jvm053Log
from tests.log.helpers import add, make_table


def _write_in_place(target: Path, data: bytes, after_s: float) -> threading.Thread:
    """As Hadoop's local filesystem does: the file exists (empty) at once, its bytes come later."""
    target.write_bytes(b"")

    def finish() -> None:
        time.sleep(after_s)
        with open(target, "r+b") as f:
            f.write(data[: len(data) // 2])
            f.flush()
            time.sleep(after_s)
            f.write(data[len(data) // 2 :])

    thread = threading.Thread(target=finish)
    thread.start()
    return thread


def test_a_commit_beside_a_version_file_being_written_waits_for_it(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    log = make_table(uri, {}, partitioned=False)
    theirs = add(None)
    body = actions_to_ndjson([theirs])
    writer = _write_in_place(tmp_path / "t" / "_transaction_log" / "00000000000000000001.json", body, 0.15)
    try:
        ours = add(None)
        version = open_log(uri).commit([ours])  # lists version 1 empty, then half written
    finally:
        writer.join()
    assert version == 2
    files = {f.path for f in log.snapshot().files}
    assert {theirs.path, ours.path} <= files


def test_a_version_file_that_stays_empty_is_still_corrupt(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    make_table(uri, {}, partitioned=False)
    (tmp_path / "t" / "_transaction_log" / "00000000000000000001.json").write_bytes(b"")
    started = time.monotonic()
    with pytest.raises(CorruptLogError, match="file is empty"):
        open_log(uri).snapshot()
    assert time.monotonic() - started < sum(in_place.IN_PROGRESS_RETRIES) + 5


def test_a_state_manifest_written_in_place_is_read_once_it_is_whole(tmp_path: Path) -> None:
    """0.5.3's checkpoint state is created, then written, and its ``.crc`` after it (found by
    test_two_writers: our CHECKPOINT read one half written and failed)."""
    uri = str(tmp_path / "t")
    log = make_table(uri, {}, partitioned=False)
    log.commit([add(None)])
    at = Jvm053Log(uri, {}).checkpoint()
    target = tmp_path / "t" / "_transaction_log" / f"state-v{at:020d}" / "_manifest.avro"
    data = target.read_bytes()
    sidecar = target.with_name(f".{target.name}.crc")
    sidecar.write_bytes(b"")  # Hadoop creates both at once, and closes the checksums last
    writer = _write_in_place(target, data, 0.15)

    def close_checksums() -> None:
        writer.join()
        time.sleep(0.1)
        sidecar.write_bytes(_hadoop_crc(data))

    closer = threading.Thread(target=close_checksums)
    closer.start()
    try:
        manifest = read_state_manifest(open_store(uri), at)
    finally:
        closer.join()
    assert manifest is not None and manifest.state_version == at and manifest.num_files == 1


def _hadoop_crc(data: bytes, chunk: int = 512) -> bytes:
    sums = [zlib.crc32(data[i : i + chunk]) for i in range(0, len(data), chunk)]
    return b"crc\x00" + struct.pack(f">i{len(sums)}I", chunk, *sums)


def test_a_damaged_state_manifest_without_a_checksum_file_is_reported_at_once(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    make_table(uri, {}, partitioned=False).commit([add(None)])
    target = tmp_path / "t" / "_transaction_log" / f"state-v{1:020d}" / "_manifest.avro"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 1
    target.write_bytes(bytes(data))
    started = time.monotonic()
    with pytest.raises(CorruptLogError):
        read_state_manifest(open_store(uri), 1)
    assert time.monotonic() - started < sum(in_place.IN_PROGRESS_RETRIES) / 2, "written whole: not waited for"
