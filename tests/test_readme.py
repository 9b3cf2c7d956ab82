"""The Python blocks of the README and docs/*.md run as written (paths and the S3 endpoint swapped
for the test's), use only public names, and give the results the pages show.

Every block runs here or in the test file ``RUN_IN`` names (docs/table-api-and-sql.md's IndexTable block in
tests/connect_plugin/test_table.py, docs/spark.md's streaming pipeline in tests/spark/test_readme_streaming.py),
or is marked ``<!-- not run: why -->``; so does every block in another language (``bash``, ``sql``): the
command lines are read by the parsers of the commands they run, the SQL by IndexTables' grammar. A block
without a language is output a page shows. The Spark blocks here share one classic local session and one table of
the demo's rows (the README's session block also starts the test's Spark Connect server).
"""

from __future__ import annotations

import ast
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import connect_plugin
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


FIRST_STEPS = "## First steps: write a text column, then search it"


def test_readme_opens_with_write_then_search() -> None:
    """The README's first section and first Python (issue 76): get a ``spark`` (``local_session()``), write a
    text column, search it with ``indexquery``; tests/connect_plugin/test_local_session.py runs that local
    session as a newcomer would. The Spark Connect alternative is a block of its own (run top to bottom,
    one block with both made a second session: SESSION_ALREADY_EXIST)."""
    text = (REPO_ROOT / "README.md").read_text()
    assert re.findall(r"^## .*$", text, flags=re.MULTILINE)[0] == FIRST_STEPS
    first = re.search(r"```python\n(.*?)```", text, flags=re.DOTALL)
    assert first is not None
    block = first.group(1)
    assert "spark = connect_plugin.local_session()" in block and ".remote(" not in block
    assert "typemap.message" in block and "indexquery" in block and "connect_plugin.write(" in block
    ast.parse(block)
    for term in ("**split**", "**transaction log**", "**doc mapping**", "**fast\nfield**", "**state**"):
        assert term.replace("\n", " ") in text.replace("\n", " "), term  # each term in a few words


def test_the_readme_first_steps_block_runs(classic_spark: Any, tmp_path: Path) -> None:
    """The first-steps block as written (its path swapped), its ``.show()`` results as its comments say."""
    (block,) = runnable_blocks("README.md", FIRST_STEPS)
    code = swap(
        block,
        {'"/tmp/first-logs"': repr(str(tmp_path / "first-logs")), "/tmp/first-logs": str(tmp_path / "first-logs")},
    )
    code = code.replace(").show()", ")")  # the DataFrames themselves, to collect
    found, counted = collect_all(run_block(code, {}, "README: first steps"))
    assert [r["id"] for r in found] == [1, 3] and found[0]["message"] == "connection timeout after 30 s"
    assert [r["n"] for r in counted] == [1]


def test_readme_command_line_section_says_where_the_command_is() -> None:
    """``indextables`` is installed into .venv/bin, which is not on the PATH unless the venv is active."""
    section = section_text("# Command line")
    assert "`.venv/bin/indextables`" in section and "source .venv/bin/activate" in section
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert 'indextables = "executor_lib.cli:main"' in pyproject  # the console script pip puts in .venv/bin


# Every ```python block of the README and docs/*.md runs in the test suite, or says why not in an HTML
# comment on the line before it (``<!-- not run: needs an Azure storage account -->``). A block runs in the
# test file named here for its page and heading (the nearest heading above it); each such file names the
# heading it reads, and the tests of this file unpack the blocks of their headings exactly, so a block
# added under a heading fails a test until it runs.
@dataclass(frozen=True)
class Block:
    page: str
    heading: str
    line: int
    code: str
    not_run: str | None  # the reason given in ``<!-- not run: reason -->``, or None: it runs
    language: str = "python"


NOT_RUN = re.compile(r"<!-- not run: (.*?) -->")

RUN_IN = {
    ("README.md", "## First steps: write a text column, then search it"): "tests/test_readme.py",
    ("README.md", "## A Spark session of your own"): "tests/test_readme.py",
    ("docs/log-and-splits.md", "## Using the transaction log"): "tests/test_readme.py",
    ("docs/log-and-splits.md", "## Splits and search"): "tests/test_readme.py",
    ("docs/spark.md", '# Spark: `format("indextables")`'): "tests/test_readme.py",
    ("docs/relevance.md", "# Relevance: `_score`, the best k rows, snippets, fuzzy terms"): "tests/test_readme.py",
    ("docs/spark.md", "## Streaming: `writeStream` and `readStream`"): "tests/spark/test_readme_streaming.py",
    (
        "docs/table-api-and-sql.md",
        "# Client plugin: table API and SQL (Spark Connect or classic)",
    ): "tests/connect_plugin/test_table.py",
    ("docs/row-changes.md", "## The statements"): "tests/connect_plugin/test_row_changes.py",
    ("docs/adding-a-command.md", "# Adding a SQL command"): "tests/connect_plugin/test_adding_a_command.py",
    # blocks in other languages
    ("docs/cli.md", "## Command line"): "tests/test_readme.py",
    (
        "README.md",
        "## Quick start (fresh machine: Python 3.10+ with `venv`, Java 17 for Spark, Rust's `cargo`)",
    ): "tests/test_readme.py",
    (
        "docs/table-api-and-sql.md",
        "## Companion indexes: search a Delta, Iceberg or Parquet table without copying its rows",
    ): "tests/test_readme.py",
}


def doc_blocks(languages: tuple[str, ...] | None = ("python",)) -> list[Block]:
    """Every ```python block (or every block in one of ``languages``; None: in any language) of the
    README and docs/*.md, with its page, nearest heading and marker."""
    out = []
    for page in DOCS:
        lines = (REPO_ROOT / page).read_text().split("\n")
        heading, fence, start = "", None, 0
        for i, line in enumerate(lines):
            if fence is None and line.startswith("```"):
                fence, start = line[3:].strip(), i
            elif fence is not None and line.startswith("```"):
                if fence and (languages is None or fence in languages):
                    before = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
                    marker = NOT_RUN.fullmatch(before.strip())
                    code = "\n".join(lines[start + 1 : i]) + "\n"
                    out.append(Block(page, heading, start + 1, code, marker.group(1) if marker else None, fence))
                fence = None
            elif fence is None and re.match(r"#{1,6} ", line):
                heading = line
    return out


def runnable_blocks(page: str, heading: str) -> list[str]:
    return [b.code for b in doc_blocks() if (b.page, b.heading) == (page, heading) and b.not_run is None]


def test_every_python_block_in_the_readme_and_docs_runs_or_says_why_not() -> None:
    blocks = doc_blocks()
    assert len(blocks) >= 12 and {b.page for b in blocks} >= {"README.md", "docs/spark.md", "docs/relevance.md"}
    for b in blocks:
        _assert_run_or_marked(b, f"{b.page}:{b.line} (under {b.heading!r})")
    every = doc_blocks(None)
    for page in DOCS:  # a marker (a line of its own) stands right before a block
        markers = [line for line in (REPO_ROOT / page).read_text().split("\n") if NOT_RUN.fullmatch(line.strip())]
        assert len(markers) == sum(b.not_run is not None for b in every if b.page == page), page


def test_every_block_in_another_language_runs_or_says_why_not() -> None:
    """Every ```bash or ```sql block (any language but Python) is read by what it runs (in the test that
    ``RUN_IN`` names for its page and heading), or says why not."""
    blocks = [b for b in doc_blocks(None) if b.language != "python"]
    assert {b.language for b in blocks} >= {"bash", "sql"}
    for b in blocks:
        _assert_run_or_marked(b, f"{b.page}:{b.line} ({b.language}, under {b.heading!r})")


def _assert_run_or_marked(b: Block, where: str) -> None:
    """The block says why it does not run, or ``RUN_IN`` names the test (naming its heading) that runs it."""
    if b.not_run is not None:
        assert len(b.not_run.split()) >= 3, f"{where}: say why the block does not run, not just {b.not_run!r}"
        return
    test = RUN_IN.get((b.page, b.heading))
    assert test is not None, f"{where}: run this block in a test and add it to RUN_IN, or mark it <!-- not run: why -->"
    assert b.heading.lstrip("# ") in (REPO_ROOT / test).read_text(), f"{test} does not name {b.heading!r}"


def other_blocks(page: str, heading: str, language: str) -> list[str]:
    return [b.code for b in doc_blocks((language,)) if (b.page, b.heading) == (page, heading) and b.not_run is None]


def test_the_command_line_synopsis_names_the_commands_and_flags_there_are(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/cli.md's ``## Command line`` block: each line's command is one of ``indextables``' and each
    ``--flag`` it shows is one that command takes (its ``--help``); ``--version`` runs."""
    from executor_lib.cli import build_parser, main

    (block,) = other_blocks("docs/cli.md", "## Command line", "bash")
    parser = build_parser()
    for line in block.strip().splitlines():
        words = line.split("#")[0].split()
        assert words[0] == "indextables", line
        if words[1] == "--version":
            with pytest.raises(SystemExit) as done:
                main(["--version"])
            assert done.value.code == 0 and capsys.readouterr().out.startswith("indextables ")
            continue
        command = words[1].split("|")[0]
        with pytest.raises(SystemExit):
            parser.parse_args([command, "--help"])
        usage = capsys.readouterr().out
        flags = re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", " ".join(words[2:]))
        assert all(f in usage for f in flags), (line, flags)
        for action in (a for a in words[2:] if "|" in a and len(a) > 1 and not a.startswith("[")):
            assert all(choice in usage for choice in action.split("|")), (line, action)


def test_the_demo_flags_block_parses() -> None:
    """README ``## Quick start``'s flags block: every ``bash scripts/demo.sh ...`` line's arguments are
    ones ``python -m indextables_demo`` (which the script runs with them) accepts."""
    import shlex

    from indextables_demo.__main__ import parse_args

    heading = "## Quick start (fresh machine: Python 3.10+ with `venv`, Java 17 for Spark, Rust's `cargo`)"
    (block,) = other_blocks("README.md", heading, "bash")
    commands = [shlex.split(line) for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) >= 4
    for argv in commands:
        assert argv[:2] == ["bash", "scripts/demo.sh"], argv
        args = parse_args(argv[2:])
        assert args.rows >= 1 and all("=" in o for o in args.option), argv


def test_the_sql_blocks_are_indextables_statements() -> None:
    """docs/table-api-and-sql.md's companion block: every statement is one IndexTables' grammar reads (the
    one ``connect_plugin.sql`` parses it with)."""
    from connect_plugin.grammar import parse_statement

    (block,) = other_blocks(
        "docs/table-api-and-sql.md",
        "## Companion indexes: search a Delta, Iceberg or Parquet table without copying its rows",
        "sql",
    )
    statements = [s.split("--")[0].strip() for s in block.split(";\n") if s.split("--")[0].strip()]
    assert [parse_statement(s.rstrip(";")).data for s in statements] == ["build_companion", "select", "build_companion"]


def run_block(code: str, env: dict[str, Any], name: str) -> list[Any]:
    """Exec a docs block; returns the values of its top-level expression statements (the DataFrames a
    reader would look at next), which the tests then collect: a lazy read that is wrong fails there."""
    tree = ast.parse(code)
    for i, node in enumerate(tree.body):
        if isinstance(node, ast.Expr):
            call = ast.parse("_shown.append(None)").body[0]
            assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
            call.value.args = [node.value]
            tree.body[i] = ast.copy_location(call, node)
    ast.fix_missing_locations(tree)
    env["_shown"] = shown = []
    exec(compile(tree, name, "exec"), env)
    return shown


def collect_all(values: list[Any]) -> list[list[Any]]:
    """Every DataFrame among ``values`` collected (the others, e.g. ``.show()``'s None, left out)."""
    return [v.collect() for v in values if hasattr(v, "collect") and hasattr(v, "schema")]


@pytest.fixture(scope="module")
def demo_table(classic_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    """The demo's log rows (``indextables_demo.corpus``, 4,000 rows over 2 days) as ``df``, and a table
    written from them by docs/spark.md's write block (its ``s3://bucket/logs`` swapped for a local path)."""
    from indextables_demo import corpus

    df = corpus.generate(classic_spark, 4_000, days=2)
    path = str(tmp_path_factory.mktemp("docs") / "logs")
    (_install, write, _read) = runnable_blocks("docs/spark.md", '# Spark: `format("indextables")`')
    run_block(swap(write, {'"s3://bucket/logs"': repr(path)}), {"df": df, "connect_plugin": connect_plugin}, "write")
    return df, path


def test_the_spark_page_install_write_and_read_blocks_run(classic_spark: Any, demo_table: tuple[Any, str]) -> None:
    df, path = demo_table
    install, _write, read = runnable_blocks("docs/spark.md", '# Spark: `format("indextables")`')
    env: dict[str, Any] = {"spark": classic_spark, "df": df}
    run_block(install, env, "docs/spark.md: install")
    assert classic_spark.read.format("indextables").load(path).count() == 2 * 4_000  # the write block writes twice
    results = collect_all(run_block(swap(read, {'"s3://bucket/logs"': repr(path)}), {**env, "path": path}, "read"))
    rows = df.collect()
    errors = [r for r in rows if r["level"] == "ERROR" and r["latency_ms"] > 500]
    assert len(results[0]) == 2 * len(errors)  # the filter pushed to Tantivy
    both = sum("timeout" in r["message"].split() and "upstream" in r["message"].split() for r in rows)
    assert both > 0 and len(results[1]) == 2 * both  # indexquery.message: 'timeout AND upstream'
    assert 0 < len(results[3]) <= 100


def test_the_relevance_block_runs(classic_spark: Any, demo_table: tuple[Any, str]) -> None:
    _df, path = demo_table
    (block,) = runnable_blocks("docs/relevance.md", "# Relevance: `_score`, the best k rows, snippets, fuzzy terms")
    assert block.count('"/data/logs"') >= 3
    env: dict[str, Any] = {"spark": classic_spark}
    results = collect_all(run_block(block.replace("/data/logs", path), env, "docs/relevance.md"))
    read, top = results
    assert read and all(r["_score"] > 0 for r in read)
    scores = [r["_score"] for r in top]
    assert 0 < len(top) <= 20 and scores == sorted(scores, reverse=True)


def test_the_readme_session_blocks_run(classic_spark: Any, connect_spark: Any, tmp_path: Path) -> None:
    """README's session blocks: ``local_session()`` (here it finds the test's classic local session), then,
    on its own, the Spark Connect one on the test's Connect session (the only swap: no server at
    sc://127.0.0.1:15002)."""
    local, remote = runnable_blocks("README.md", "## A Spark session of your own")
    for name, block in (("local", local), ("connect", remote)):
        path = str(tmp_path / name / "first-table")
        code = swap(
            block,
            {
                'SparkSession.builder.remote("sc://127.0.0.1:15002").getOrCreate()': "connect_spark",
                '"/tmp/first-table"': repr(path),
            }
            if name == "connect"
            else {'"/tmp/first-table"': repr(path)},
        )
        env: dict[str, Any] = {"connect_spark": connect_spark}
        run_block(code, env, f"README: {name} session")
        assert env["spark"] is (connect_spark if name == "connect" else classic_spark)
        assert sorted(r["id"] for r in classic_spark.read.format("indextables").load(path).collect()) == [0, 1, 2]
