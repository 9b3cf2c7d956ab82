"""The README's Python examples of executor_lib run as written (paths and the S3 endpoint swapped
for the test's), use only public names, and give the results the README shows.

The Spark and connect_plugin examples need Spark sessions: the README's IndexTable block runs as written
(only its path swapped) in tests/connect_plugin/test_table.py; the Spark tests cover the other calls.
"""

from __future__ import annotations

import ast
import re
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

import executor_lib
from tests.conftest import BUCKET, REPO_ROOT

SECTIONS = ("## Using the transaction log", "## Splits and search")


DOCS = ("README.md", *sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "docs").glob("*.md")))


def section_text(heading: str) -> str:
    """The text under ``heading`` (a whole Markdown heading line, e.g. ``## Splits and search``) in the
    README or the docs page that holds it, up to the next heading of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    for name in DOCS:
        text = (REPO_ROOT / name).read_text()
        start = text.find(heading + "\n")
        if start >= 0:
            out, fenced = [], False
            for line in text[start + len(heading) + 1 :].split("\n"):
                fenced ^= line.startswith("```")
                if not fenced and re.match("#{1," + str(level) + "} ", line):
                    break
                out.append(line)
            return "\n".join(out)
    raise AssertionError(f"no README or docs page has the heading {heading!r}")


def python_blocks(section: str) -> list[str]:
    """The ```python blocks of one section of the README or a docs page."""
    return re.findall(r"```python\n(.*?)```", section_text(section), flags=re.DOTALL)


def swap(code: str, replacements: dict[str, str]) -> str:
    for old, new in replacements.items():
        assert old in code, f"the README example no longer contains {old!r}: update this test"
        code = code.replace(old, new)
    return code


def test_readme_examples_import_only_public_names() -> None:
    """``from executor_lib.<module> import ...`` of deep internals is not how the README teaches it."""
    for section in SECTIONS:
        for block in python_blocks(section):
            deep = re.findall(r"^\s*(?:from|import) (executor_lib\.\S+)", block, flags=re.MULTILINE)
            assert not deep, f"{section}: import public names from executor_lib instead of {deep}"


def test_readme_log_and_search_examples_run(tmp_path: Path, moto_server: Any) -> None:
    local, s3 = python_blocks(SECTIONS[0])
    (search,) = python_blocks(SECTIONS[1])
    table = str(tmp_path / "events")
    env: dict[str, Any] = {}
    exec(compile(swap(local, {'"/data/events"': repr(table)}), "README: log", "exec"), env)
    rows = env["rows"]
    assert env["v"] == 1 and env["snap"].num_records == rows.num_rows
    assert [a.path for a in env["hits"].files] == [env["add"].path]  # its id range [1, 150] reaches 100
    assert (Path(table) / env["add"].path).stat().st_size == env["add"].size

    exec(compile(search, "README: search", "exec"), env)
    expected = [r for r in rows.to_pylist() if "error" in r["message"].split() and 1 <= r["id"] <= 99]
    assert env["hits"].to_pylist() == [{**r, "date": "2024-01-01"} for r in expected]
    shown = re.search(r"hits\.to_pylist\(\)\s+# (.*)", search)
    assert shown is not None and ast.literal_eval(shown.group(1)) == env["hits"].to_pylist()  # as the README shows

    uri = f"s3://{BUCKET}/readme/{uuid.uuid4().hex}"
    options = {"endpoint_url": moto_server.endpoint_url, "access_key_id": "testing", "secret_access_key": "testing"}
    executor_lib.create_table(uri, pa.schema([("id", pa.int64())]), path_style=True, **options)
    code = swap(
        s3,
        {
            '"s3://bucket/events"': repr(uri),
            '"http://127.0.0.1:9000"': repr(moto_server.endpoint_url),
            'access_key_id="..."': 'access_key_id="testing"',
            'secret_access_key="..."': 'secret_access_key="testing"',
        },
    )
    exec(compile(code, "README: S3", "exec"), env)
    assert env["s3"].snapshot().version == 0


def test_readme_first_python_example_builds_a_session_that_works() -> None:
    """The first Python a reader meets shows how to get a ``spark`` (``local_session()``, or Spark Connect
    and ``install``); tests/connect_plugin/test_local_session.py runs that local session as a newcomer would."""
    text = (REPO_ROOT / "README.md").read_text()
    first = re.search(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert first is not None
    block = first.group(1)
    assert "spark = connect_plugin.local_session()" in block
    assert ".remote(" in block and "connect_plugin.install(spark)" in block
    ast.parse(block)


def test_readme_command_line_section_says_where_the_command_is() -> None:
    """``indextables`` is installed into .venv/bin, which is not on the PATH unless the venv is active."""
    section = section_text("# Command line")
    assert "`.venv/bin/indextables`" in section and "source .venv/bin/activate" in section
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert 'indextables = "executor_lib.cli:main"' in pyproject  # the console script pip puts in .venv/bin
