"""The block-at-a-time Avro record decoder: cavro and the fastavro fallback agree with
fastavro's own reader on every codec, on IndexTables4Spark's files, and on corrupt input."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

import fastavro
import pytest

from executor_lib.log.state import avro_records
from executor_lib.log.state.avro_records import DECODER_ENV, AvroRecords, default_decoder
from executor_lib.log.state.avro_state import decode_manifest
from indextables_contract.errors import ConfigError, CorruptLogError
from tests.log.state.test_avro_state import FILE_ENTRY_SCHEMA, avro_bytes, entry

DECODERS = ["cavro", "fastavro"]
# Every field type a FileEntry uses: maps, a nullable map, nullable long/int/string, an array.
RICH_SCHEMA: dict[str, Any] = {
    **FILE_ENTRY_SCHEMA,
    "fields": [
        *FILE_ENTRY_SCHEMA["fields"],
        {"name": "minValues", "type": ["null", {"type": "map", "values": "string"}], "default": None},
        {"name": "splitTags", "type": ["null", {"type": "array", "items": "string"}], "default": None},
        {"name": "numMergeOps", "type": ["null", "int"], "default": None},
    ],
}


def rich_entries(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        e = entry(f"day=2024-01-{i % 28 + 1:02d}/split-{i}.split", i * 1000)
        e.update(
            partitionValues={"day": f"2024-01-{i % 28 + 1:02d}"},
            size=-i if i % 7 == 0 else 2**40 + i,  # negative and large longs
            minValues=None if i % 3 == 0 else {"id": str(i), "msg": "é✓"},
            splitTags=None if i % 2 else [f"t{i}", "x"],
            numMergeOps=None if i % 5 else i,
            someFutureField=None if i % 4 else f"future-{i}",
            hasFooterOffsets=bool(i % 2),
        )
        out.append(e)
    return out


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("codec", ["zstandard", "snappy", "deflate", "null"])
def test_every_codec_decodes_like_fastavro(decoder: str, codec: str) -> None:
    records = rich_entries(3000)  # several blocks
    data = avro_bytes(RICH_SCHEMA, records, codec)
    container = AvroRecords(data, decoder)
    assert container.decoder == decoder
    assert container.field_names == [f["name"] for f in RICH_SCHEMA["fields"]]
    decoded = list(container.records())
    assert decoded == records
    assert decoded == list(fastavro.reader(io.BytesIO(data)))  # type: ignore[arg-type]


@pytest.mark.parametrize("decoder", DECODERS)
def test_an_empty_manifest_has_no_records(decoder: str) -> None:
    assert list(AvroRecords(avro_bytes(FILE_ENTRY_SCHEMA, [], "zstandard"), decoder).records()) == []


@pytest.mark.parametrize("decoder", DECODERS)
def test_indextables4spark_files_decode_like_fastavro(compat_root: Path, decoder: str) -> None:
    files = sorted(compat_root.rglob("*.avro"))
    assert files, f"no Avro files under {compat_root}"
    for path in files:
        data = path.read_bytes()
        assert list(AvroRecords(data, decoder).records()) == list(fastavro.reader(io.BytesIO(data))), path


@pytest.mark.parametrize("decoder", DECODERS)
def test_corrupt_manifests_raise_corrupt_log_error_naming_the_file(
    decoder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DECODER_ENV, decoder)
    good = avro_bytes(FILE_ENTRY_SCHEMA, [entry(f"p{i}.split", i) for i in range(300)], "null")
    assert len(decode_manifest(good, "s3://b/t/m.avro")) == 300
    rng = random.Random(7)
    failures = 0
    for _ in range(300):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data))]
        try:
            decode_manifest(bytes(data), "s3://b/t/m.avro")
        except CorruptLogError as e:
            assert "s3://b/t/m.avro" in str(e)
            failures += 1
    assert failures > 200  # most damage is detected; the rest only changed string contents


def test_decoder_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DECODER_ENV, raising=False)
    assert default_decoder() == "cavro"  # installed with the package
    monkeypatch.setenv(DECODER_ENV, "fastavro")
    assert default_decoder() == "fastavro"
    monkeypatch.setenv(DECODER_ENV, "avro-rs")
    with pytest.raises(ConfigError, match=rf"{DECODER_ENV}='avro-rs'"):
        decode_manifest(avro_bytes(FILE_ENTRY_SCHEMA, [], "null"), "m.avro")
    monkeypatch.delenv(DECODER_ENV)
    monkeypatch.setattr(avro_records, "cavro", None)  # a platform without a cavro wheel
    assert default_decoder() == "fastavro"


def test_a_schema_cavro_rejects_is_decoded_by_fastavro() -> None:
    schema = {**FILE_ENTRY_SCHEMA, "name": "File-Entry"}  # fastavro takes this name, cavro's name rules do not
    records = [entry(f"p{i}.split", i) for i in range(5)]
    container = AvroRecords(avro_bytes(schema, records, "zstandard"), "cavro")
    assert list(container.records()) == records
