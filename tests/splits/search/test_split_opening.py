"""Searchers kept open across searches (``split_opening.open_searcher``), on the local filesystem (a
whole split in the cache) and S3 (a split fetched by the piece): a kept searcher is reused while its
cached files are as written, and a bit flipped in any of them — the extracted index, the split, a
fetched range — is found at the next use: the split is fetched again and the answer stays right."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache import entry_checksums as checks
from executor_lib.cache.split_cache import SplitCache
from executor_lib.cache.split_pieces import PIECES_DIR, STATE_FILE
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search import split_opening
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage import open_store
from tests.census.sweeps import flip_in_place

N = 4_000
WORDS = np.array(["alpha", "beta", "gamma", "delta"])
OPTIONS = {"spark.indextables.indexing.typemap.body": "text"}
QUERIES = ["body:alpha", "body:gamma AND level:WARN", "id:[100 TO 300]"]


@pytest.fixture
def searched(table: tuple[str, dict[str, Any]], tmp_path: Path) -> tuple[Any, SplitCache, list[pa.Table]]:
    """A one-split table on the parametrized backend, searched once through a cache: (log, cache, answers)."""
    rng = np.random.default_rng(5)
    words = rng.choice(WORDS, N)
    rows = pa.table(
        {
            "id": pa.array(range(N), pa.int64()),
            "body": [f"{w} row {i}" for i, w in enumerate(words)],
            "level": rng.choice(["INFO", "WARN"], N),
        }
    )
    uri, options = table
    log = executor_lib.create_table(uri, rows.schema, configuration=OPTIONS, **options)
    log.commit([write_and_upload(open_store(uri, **options), rows, mapping_for(rows.schema, OPTIONS))])
    split_opening.close_kept_searchers()
    cache = SplitCache(tmp_path / "cache", in_place=False)  # a local split copied whole, as a download is
    return log, cache, _answers(log, cache)


def _answers(log: Any, cache: SplitCache) -> list[pa.Table]:
    snapshot = log.snapshot()
    return [search_table(log.store, snapshot, q, cache).sort_by("id") for q in QUERIES]


def _entry(log: Any, cache: SplitCache) -> Path:
    (add,) = log.snapshot().files
    return cache._entry_dir(log.store.uri_of(add.path))


def _kept(log: Any, cache: SplitCache) -> Any:
    snapshot = log.snapshot()
    (add,) = snapshot.files
    args = (snapshot.arrow_schema(), snapshot.doc_mapping(add), add.size, add.footer_start_offset)
    return split_opening.open_searcher(cache, log.store, add.path, *args)


def _targets(entry: Path) -> list[tuple[Path, int]]:
    """Where a flip lands in a cached entry: a byte of every fetched range of a split fetched by the
    piece, else of every file of a whole split's entry (its split, read in place: nothing is extracted
    for the native engine); and of every file made beside the index (stand-ins of a split read by the
    piece, term dictionaries built for the ``tantivy`` package)."""
    if (entry / STATE_FILE).exists():
        state = json.loads((entry / STATE_FILE).read_text())
        fetched = [(entry / PIECES_DIR / n, start) for n, ranges in state["present"].items() for start, _ in ranges]
        index_dir = entry / PIECES_DIR
    else:
        recorded = json.loads((entry / checks.CHECKSUMS).read_text())
        fetched = [(entry / name, 0) for name in sorted(recorded)]
        index_dir = entry / "index"
    made_record = index_dir / checks.CHECKSUMS
    made = json.loads(made_record.read_text()) if made_record.exists() else {}
    return [(p, start) for p, start in fetched + [(index_dir / n, 0) for n in sorted(made)] if p.stat().st_size]


def test_a_kept_searcher_is_reused_while_its_files_are_as_written(
    searched: tuple[Any, SplitCache, list[pa.Table]],
) -> None:
    log, cache, expected = searched
    first = _kept(log, cache)
    assert _kept(log, cache) is first, "the searcher the search opened is kept"
    assert _answers(log, cache) == expected
    assert _kept(log, cache) is first


def test_a_bit_flipped_under_a_kept_searcher_is_found_at_its_next_use(
    searched: tuple[Any, SplitCache, list[pa.Table]],
) -> None:
    """Each cached file in turn (a byte at a seeded position of it): the next search answers as before,
    from a copy fetched again, and never from the searcher opened over the damaged one."""
    log, cache, expected = searched
    rng = random.Random(7)
    entry = _entry(log, cache)
    targets = _targets(entry)
    if (entry / STATE_FILE).exists():  # fetched by the piece
        assert len(targets) >= 3
        assert any(p.name.endswith(".term") for p, _ in targets), "a term dictionary built here is among them"
    else:  # a whole copy, read in place: nothing extracted beside it
        assert [p.name for p, _ in targets] == [checks.DATA_FILE] and not (entry / "index").exists()
    for n in range(len(targets)):
        path, start = _targets(_entry(log, cache))[n % len(_targets(_entry(log, cache)))]
        before = _kept(log, cache)
        size = path.stat().st_size
        flip_in_place(path, min(size - 1, start + rng.randrange(max(1, min(4096, size - start)))), rng.randrange(8))
        got = _answers(log, cache)
        assert got == expected, f"a bit flipped in {path.name} under a kept searcher changed the answer"
        assert _kept(log, cache) is not before, f"a flip in {path.name}: the searcher over it was kept"
