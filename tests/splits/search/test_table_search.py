"""``search_table`` over many splits: a search without a limit searches them in threads
(``SEARCH_THREADS``) and answers exactly as one thread does, rows in the same order, on the local
filesystem and S3; a split damaged in the cache is fetched again by the thread that finds it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search import split_opening, table_search
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage import open_store
from tests.census.sweeps import flip_in_place

SPLITS, ROWS = 6, 1_500
OPTIONS = {"spark.indextables.indexing.typemap.body": "text"}
QUERIES = ['body:"gamma row"', "body:alpha AND level:WARN", "id:[100 TO 7000]", "*"]


@pytest.fixture
def many_splits(table: tuple[str, dict[str, Any]]) -> Any:
    """A table of ``SPLITS`` splits of ``ROWS`` rows each, on the parametrized backend."""
    rng = np.random.default_rng(11)
    uri, options = table
    schema = pa.schema([("id", pa.int64()), ("body", pa.string()), ("level", pa.string())])
    log = executor_lib.create_table(uri, schema, configuration=OPTIONS, **options)
    store = open_store(uri, **options)
    for s in range(SPLITS):
        ids = range(s * ROWS, (s + 1) * ROWS)
        words = rng.choice(["alpha", "beta", "gamma", "delta"], ROWS)
        rows = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "body": [f"{w} row {i}" for i, w in zip(ids, words, strict=True)],
                "level": rng.choice(["INFO", "WARN"], ROWS),
            },
            schema=schema,
        )
        log.commit([write_and_upload(store, rows, mapping_for(schema, OPTIONS))])
    split_opening.close_kept_searchers()
    return log


def _answers(log: Any, cache: SplitCache, columns: list[str] | None = None) -> list[pa.Table]:
    snapshot = log.snapshot()
    return [search_table(log.store, snapshot, q, cache, columns=columns) for q in QUERIES]


def test_threads_answer_as_one_thread_does(many_splits: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = SplitCache(tmp_path / "cache")
    monkeypatch.setattr(table_search, "SEARCH_THREADS", 1)
    serial = _answers(many_splits, cache) + _answers(many_splits, cache, ["id"])
    monkeypatch.setattr(table_search, "SEARCH_THREADS", 4)
    used = set()
    real = table_search.ThreadPoolExecutor

    def counting(*args: Any, **kwargs: Any) -> Any:
        used.add(args[0] if args else kwargs["max_workers"])
        return real(*args, **kwargs)

    monkeypatch.setattr(table_search, "ThreadPoolExecutor", counting)
    threaded = _answers(many_splits, cache) + _answers(many_splits, cache, ["id"])
    assert used == {4}, "every search of the six splits ran in four threads"
    assert [t.num_rows for t in threaded] == [t.num_rows for t in serial]
    assert threaded == serial, "the same rows in the same order (splits in path order)"
    assert serial[3].num_rows == SPLITS * ROWS
    assert sorted(serial[3].column("id").to_pylist()) == list(range(SPLITS * ROWS))


def test_a_split_damaged_in_the_cache_is_fetched_again_by_its_thread(
    many_splits: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bit flipped in every cached split's extracted index files in turn: each threaded search
    still answers as the undamaged table does."""
    monkeypatch.setattr(table_search, "SEARCH_THREADS", 3)
    cache = SplitCache(tmp_path / "cache", in_place=False)  # a local split copied whole, as a download is
    expected = _answers(many_splits, cache)
    rng = random.Random(3)
    entries = [p for p in (tmp_path / "cache" / "splits").iterdir() if p.is_dir()]
    assert len(entries) == SPLITS
    flipped = 0
    for entry in entries:
        files = sorted(p for p in entry.rglob("*") if p.is_file() and p.stat().st_size and p.suffix != ".json")
        path = files[rng.randrange(len(files))]
        flip_in_place(path, rng.randrange(path.stat().st_size), rng.randrange(8))
        flipped += 1
    assert _answers(many_splits, cache) == expected, f"{flipped} cached splits damaged at once changed an answer"
