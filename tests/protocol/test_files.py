"""File names and byte encodings of the log, including the real header-prefixed gzip."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from executor_lib.protocol.files import (
    checkpoint_part_file,
    decode_log_bytes,
    encode_log_bytes,
    parse_checkpoint_file,
    parse_checkpoint_part,
    parse_state_dir,
    parse_version_file,
    state_dir,
    version_file,
)
from indextables_contract.errors import CorruptLogError

PAYLOAD = b'{"protocol":{"minReaderVersion":1,"minWriterVersion":1}}\n'


def test_names_are_zero_padded_and_parse_back() -> None:
    assert version_file(7) == "00000000000000000007.json"
    assert parse_version_file("00000000000000000007.json") == 7
    assert parse_version_file(".00000000000000000007.json.crc") is None
    assert parse_version_file("00000000000000000007.checkpoint.json") is None
    assert parse_checkpoint_file("00000000000000000010.checkpoint.json") == 10
    assert checkpoint_part_file(10, "abcdef123456", 2) == "00000000000000000010.checkpoint.abcdef123456.00002.json"
    assert parse_checkpoint_part(checkpoint_part_file(10, "abcdef123456", 2)) == (10, "abcdef123456", 2)
    assert state_dir(42) == "state-v00000000000000000042"
    assert parse_state_dir("state-v00000000000000000042/") == 42


def test_compressed_files_carry_the_two_byte_header() -> None:
    data = encode_log_bytes(PAYLOAD, compress=True)
    assert data[:4] == b"\x01\x01\x1f\x8b"
    assert decode_log_bytes(data, "f") == PAYLOAD.decode()
    assert encode_log_bytes(PAYLOAD, compress=False) == PAYLOAD


def test_reads_plain_bare_gzip_and_real_jvm_files(compat_root: Path) -> None:
    assert decode_log_bytes(PAYLOAD, "f") == PAYLOAD.decode()
    assert decode_log_bytes(gzip.compress(PAYLOAD), "f") == PAYLOAD.decode()
    real = (compat_root / "01_single_write" / "_transaction_log" / "00000000000000000000.json").read_bytes()
    assert real[:2] == b"\x01\x01"
    assert decode_log_bytes(real, "real").startswith('{"protocol":')


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "file is empty"),
        (b"\x01", "compression header is truncated"),
        (b"\x01\x07abc", "unknown compression codec byte 0x07"),
        (encode_log_bytes(PAYLOAD * 50, compress=True)[:-20], "corrupt or truncated gzip"),
        (b"\x01\x01not gzip at all", "corrupt or truncated gzip"),
    ],
)
def test_corrupt_files_are_named(data: bytes, message: str) -> None:
    with pytest.raises(CorruptLogError) as err:
        decode_log_bytes(data, "/t/_transaction_log/00000000000000000005.json")
    assert "00000000000000000005.json" in str(err.value) and message in str(err.value)
