"""A search of a table in a new process imports no pandas: pyarrow imports it (0.25-1 s) at its first
``pa.array``/``pa.scalar`` of Python values, ``to_numpy`` or ``Schema.empty_table``, which the first
query of the Python API would pay (``executor_lib.arrow_arrays`` builds and reads arrays from
their buffers instead). The child's answers must equal the same searches run here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from tests.conftest import REPO_ROOT

OPTIONS = {"spark.indextables.indexing.typemap.body": "text"}
# (query, columns, limit, scored): ranked with a partition column, a limit, every hit (threads), no hit
SEARCHES = [
    ("body:alpha body:row", ["id", "day", "score"], 10, True),
    ("level:WARN", None, 25, False),
    ("body:gamma", ["id", "day"], None, False),
    ("body:nowhere", ["id", "day"], 10, True),
]
SEARCH = """
import json, sys, tempfile
from pathlib import Path
import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.splits.search.table_search import search_table
log = executor_lib.open_log(sys.argv[1])
cache = SplitCache(Path(tempfile.mkdtemp(dir=sys.argv[2])))
found = [search_table(log.store, log.snapshot(), q, cache, c, limit=k, scored=s) for q, c, k, s in json.loads(sys.argv[3])]
imported = "pandas" in sys.modules
print(json.dumps({"pandas": imported, "answers": [t.to_pydict() for t in found]}, default=str))
"""


def _table(uri: str) -> None:
    schema = pa.schema([("id", pa.int64()), ("body", pa.string()), ("level", pa.string()), ("score", pa.float64())])
    schema = schema.append(pa.field("day", pa.string()))
    log = executor_lib.create_table(uri, schema, partition_columns=["day"], configuration=OPTIONS)
    rng = np.random.default_rng(5)
    for s, day in enumerate(["2024-01-01", "2024-01-02", "2024-01-01"]):
        ids = np.arange(s * 400, (s + 1) * 400)
        rows = pa.table(
            {
                "id": ids,
                "body": [f"{w} row {i}" for i, w in zip(ids, rng.choice(["alpha", "beta", "gamma"], 400), strict=True)],
                "level": rng.choice(["INFO", "WARN"], 400),
                "score": rng.random(400),
            }
        )
        add = write_and_upload(log.store, rows, mapping_for(schema.remove(4), OPTIONS), {"day": day})
        log.commit([add])


def test_searching_a_table_in_a_new_process_imports_no_pandas(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _table(uri)
    done = subprocess.run(
        [sys.executable, "-c", SEARCH, uri, str(tmp_path), json.dumps(SEARCHES)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    child = json.loads(done.stdout)
    log = executor_lib.open_log(uri)
    cache = SplitCache(tmp_path / "here")
    here = [search_table(log.store, log.snapshot(), q, cache, c, limit=k, scored=s) for q, c, k, s in SEARCHES]
    assert child["answers"] == json.loads(json.dumps([t.to_pydict() for t in here], default=str))
    assert [len(next(iter(a.values()))) for a in child["answers"]][:2] == [10, 25]
    assert not child["pandas"], "a search imported pandas (a pa.array/pa.scalar/to_numpy/empty_table on its path)"
