"""The third census's holes (issue 50), one test each that failed before its fix.

* hole 1: a flipped bit in a split's zstd doc store returned wrong rows silently (blocks carried no
  checksum, the Tantivy footer's CRC was never checked), or raised bare ``ValueError``;
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.format.quickwit.bundle import read_footer
from executor_lib.format.store.blocks import COMPRESSOR_ZSTD, parse_store
from executor_lib.splits.build.publish import write_and_upload
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.table_search import search_table
from indextables_contract import errors

SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string())])
ROWS = 50


def _table(root: Path, rows: int = ROWS) -> executor_lib.TransactionLog:
    log = executor_lib.create_table(str(root), SCHEMA)
    data = pa.table({"id": list(range(rows)), "msg": [f"row {i}" for i in range(rows)]})
    log.commit([write_and_upload(log.store, data, mapping_for(SCHEMA, {}))])
    return log


def _member(split: Path, suffix: str) -> tuple[int, int]:
    (found,) = [r for n, r in read_footer(split).files.items() if n.endswith(suffix)]
    return found


def test_hole1_zstd_doc_store_blocks_carry_a_checksum(tmp_path: Path) -> None:
    log = _table(tmp_path / "t")
    (add,) = log.snapshot().files
    split = tmp_path / "t" / add.path
    start, end = _member(split, ".store")
    store = parse_store(split.read_bytes()[start:end], "s")
    assert store.compressor == COMPRESSOR_ZSTD
    for i in range(len(store.start)):
        frame = bytes(store.blocks[int(store.start[i]) + 4 : int(store.end[i])])
        assert frame[4] & 0x04, "the zstd frame's content checksum flag is set"


def test_hole1_every_bit_flip_of_a_doc_store_fails_loudly(tmp_path: Path) -> None:
    log = _table(tmp_path / "t")
    (add,) = log.snapshot().files
    split = tmp_path / "t" / add.path
    start, end = _member(split, ".store")
    data = split.read_bytes()
    cache = SplitCache(tmp_path / "cache")
    expected = search_table(log.store, log.snapshot(), "*", cache)
    snapshot = log.snapshot()
    silent, kinds = [], set()
    rng = random.Random(50)
    for i in range(start, end):  # every byte, one bit of each (every bit: 8 times as long)
        for bit in [rng.randrange(8)]:
            flipped = bytearray(data)
            flipped[i] ^= 1 << bit
            split.write_bytes(bytes(flipped))
            cache.flush()
            try:
                got = search_table(log.store, snapshot, "*", cache)
            except errors.IndexTablesError as e:
                kinds.add(type(e).__name__)
                assert add.path in str(e), e
            else:
                if not got.equals(expected):
                    silent.append((i - start, bit))
    split.write_bytes(data)
    assert not silent, f"{len(silent)} of {end - start} flips of the doc store changed rows silently"
    assert kinds == {"CorruptSplitError"}
