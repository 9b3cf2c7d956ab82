"""The README's streaming pipeline runs as written (local paths) in a classic session,
and raises the query's error when a query died, instead of showing an empty result (issue 34)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT


def _pipeline() -> str:
    text = (REPO_ROOT / "docs" / "spark.md").read_text()
    section = text[text.index("## Streaming: `writeStream` and `readStream`") :]
    return section[
        section.index("```python\n") + len("```python\n") : section.index("```", section.index("```python") + 9)
    ]


def _run(spark: Any, tmp_path: Path, replacements: dict[str, str]) -> dict[str, Any]:
    code = _pipeline()
    for old, new in {
        'table, checkpoints = "s3://bucket/logs", "s3://bucket/checkpoints"': f"table, checkpoints = {str(tmp_path / 'logs')!r}, {str(tmp_path / 'checkpoints')!r}",
        ".show()": ".collect()",
        **replacements,
    }.items():
        assert old in code, f"the README's streaming example no longer contains {old!r}: update this test"
        code = code.replace(old, new)
    env: dict[str, Any] = {"spark": spark}
    try:
        exec(compile(code, "README: streaming", "exec"), env)
    finally:
        for name in ("ingest", "timeouts"):
            if name in env:
                with contextlib.suppress(Exception):
                    env[name].stop()
    return env


@pytest.mark.timeout(600)
def test_readme_streaming_pipeline_runs(classic_spark: Any, tmp_path: Path) -> None:
    _run(classic_spark, tmp_path, {})
    count, first, last = classic_spark.sql("SELECT count(*), min(id), max(id) FROM timeouts").collect()[0]
    assert count > 0 and first % 10 == 0 and last % 10 == 0


@pytest.mark.timeout(600)
def test_readme_streaming_pipeline_raises_when_a_query_died(classic_spark: Any, tmp_path: Path) -> None:
    """The ingest dies in its first micro-batch (a typemap value the writer refuses): the example raises
    the query's error naming it, rather than waiting forever or printing an empty count."""
    bad = {
        '"spark.indextables.indexing.typemap.message": "text"': '"spark.indextables.indexing.typemap.message": "txt"'
    }
    with pytest.raises(Exception, match=r"typemap.message='txt'|typemap\.message=.txt"):
        _run(classic_spark, tmp_path, bad)
