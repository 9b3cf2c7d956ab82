"""The thin client (``connect_plugin`` + ``indextables_contract``) imports and plans without the
cluster's packages: tantivy, executor_lib, pyarrow's engine parts and boto3 are blocked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

BLOCKED = ("tantivy", "executor_lib", "boto3", "fastavro", "cavro", "pyspark_indextables")
SCRIPT = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
import connect_plugin
from connect_plugin.sql import aggregate_shape, plan_statement
from indextables_contract.aggregate import AggregatePlan, Measure
shape = aggregate_shape("level, count(*)", "level, count(*)", "GROUP BY level")
assert shape[0] == AggregatePlan(("level",), (Measure("count"),)), shape
print("ok")
"""


def test_thin_client_needs_no_cluster_package() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
