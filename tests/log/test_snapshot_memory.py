"""What a loaded snapshot holds per live file (issue 54: a million files in at most 150 MB), measured in
new processes on a generated table of 50,000 files: the Arrow bytes its chunks keep resident, and what
the process grew by (RSS) after loading it from the manifest disk cache and reading every page of those
chunks, as ``bench/state_benchmark.py`` measures it. Bounds are generous; they catch a regression to
the plain columns (about 215 bytes a file) or to objects per file (about 3 KB), not noise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import executor_lib
from bench.state_benchmark import SCHEMA, make_adds

FILES = 50_000
PARTITIONS = 100
# Measured in this layout: about 80 bytes a file held (path about 50, the rest under 35); before it,
# about 215 (min/max maps, plain paths and partition maps resident).
MAX_HELD_BYTES_PER_FILE = 130
MAX_GROWN_BYTES_PER_FILE = 400  # RSS: noisier (allocator, pages shared with the libraries)

_MEASURE = """
import json, os, sys
import numpy as np
import executor_lib
def rss(): return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = rss()
s = executor_lib.open_log(sys.argv[1]).snapshot()
files = s.state.files
held = sum(c.table.nbytes for c in files.chunks)
for chunk in files.chunks:  # every page, so mapped bytes count as resident
    for buffer in (b for column in chunk.table.columns for a in column.chunks for b in a.buffers() if b is not None):
        np.frombuffer(buffer, np.uint8)[::4096].sum()
print(json.dumps({"files": len(files), "held": held, "grown": rss() - before}))
"""


def _measure(uri: str, cache: Path) -> dict[str, int]:
    env = {**os.environ, "INDEXTABLES_MANIFEST_CACHE_DIR": str(cache)}
    run = [sys.executable, "-c", _MEASURE, uri]
    subprocess.run(run, env=env, check=True, capture_output=True)  # fills the disk cache
    return dict(json.loads(subprocess.run(run, env=env, check=True, capture_output=True, text=True).stdout))


def _table(uri: str, files: int) -> str:
    executor_lib.create_table(uri, SCHEMA, ["day"])
    executor_lib.open_log(uri).commit(make_adds(files, day_of=lambda i: i * PARTITIONS // files))
    return uri


def test_held_memory_per_live_file(tmp_path: Path) -> None:
    small = _measure(_table(str(tmp_path / "small"), 10), tmp_path / "cache")
    large = _measure(_table(str(tmp_path / "large"), FILES), tmp_path / "cache")
    assert large["files"] == FILES
    held_per_file = (large["held"] - small["held"]) / FILES
    grown_per_file = (large["grown"] - small["grown"]) / FILES  # the process's first-use costs cancel out
    assert held_per_file <= MAX_HELD_BYTES_PER_FILE, (held_per_file, large, small)
    assert grown_per_file <= MAX_GROWN_BYTES_PER_FILE, (grown_per_file, large, small)
