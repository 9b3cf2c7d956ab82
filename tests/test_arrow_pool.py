"""The log's columns are built in the C library's allocator's pool unless the process chose one."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SNIPPET = "import executor_lib.log.files.file_table, pyarrow as pa; print(pa.default_memory_pool().backend_name)"


@pytest.mark.parametrize(("chosen", "expected"), [(None, "system"), ("mimalloc", "mimalloc"), ("jemalloc", "jemalloc")])
def test_the_pool_is_the_systems_unless_the_process_chose_one(chosen: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    out = subprocess.run([sys.executable, "-c", SNIPPET], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected
