"""Import structure: no import cycles between modules, one-way imports between executor_lib's
subpackages and between the rooms of ``executor_lib.log`` (the read path importing no write code), the
shipped code never imports test support, the protocol layer needs only the standard library, and
the log reads without the optional ``cavro``.

The import graph is static: every ``import`` and ``from ... import`` in a module (function-level
ones included, and those under ``if TYPE_CHECKING:``: a type-only import back into a module is
still a cycle a reader has to untangle), resolved to the modules of the packages below.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import executor_lib
from tests.conftest import REPO_ROOT

PACKAGES = ("executor_lib", "connect_plugin", "indextables_contract", "indextables_demo")
SHIPPED = (*PACKAGES, "pyspark_indextables")
TEST_SUPPORT = ("harness", "tests")

# Cycles that are known and being removed elsewhere. Each entry must still exist (the test fails
# when one is gone, so that it is deleted from here) and no other cycle may appear.
ALLOWED_CYCLES: set[frozenset[str]] = set()

# Heavy third-party packages: none may be imported to use the protocol layer.
HEAVY = ("fastavro", "pyarrow", "tantivy", "boto3", "botocore", "azure", "pyspark", "cavro", "lark", "cramjam")


def _module_files() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package ``__init__``) for every module of ``PACKAGES``."""
    out: dict[str, tuple[Path, bool]] = {}
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, type_only: bool = True) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement at any depth; with ``type_only=False``, only those that can run
    (not in ``if TYPE_CHECKING:`` bodies)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child) and not type_only:
            for statement in child.orelse:
                yield from _imports(ast.Module(body=[statement], type_ignores=[]), type_only)
        else:
            yield from _imports(child, type_only)


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str]]:
    """(name, fallback) pairs a statement imports: ``import a.b`` gives ``a.b``; ``from a import b``
    gives ``a.b`` (a module), else ``a`` (``b`` is a name defined in ``a``)."""
    if isinstance(node, ast.Import):
        yield from ((alias.name, alias.name) for alias in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: from the importing module's package, up level-1 packages
        package = module.split(".") if is_package else module.split(".")[:-1]
        anchor = package[: len(package) - (node.level - 1)]
        base = ".".join([*anchor, *([node.module] if node.module else [])])
    yield from ((f"{base}.{alias.name}", base) for alias in node.names)


def _resolve(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The module of the packages that ``name`` is, or is defined in; None outside them."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(type_only: bool = True) -> dict[str, set[str]]:
    """Module -> the modules of ``PACKAGES`` it imports (``type_only=False``: at run time only)."""
    modules = _module_files()
    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in modules.items():
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path)), type_only):
            for name, fallback in _targets(module, is_package, node):
                target = name if name in modules else _resolve(fallback, modules)
                if target is not None:
                    edges.add(target)
        edges.discard(module)
        graph[module] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def _describe(component: frozenset[str], graph: dict[str, set[str]]) -> str:
    return "; ".join(f"{m} -> {sorted(graph[m] & component)}" for m in sorted(component))


def test_the_cycle_finder_finds_a_cycle_and_only_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_function_level_relative_and_type_checking_imports() -> None:
    graph = import_graph()
    assert (
        "executor_lib.log.maintenance.describe" in graph["executor_lib.spark.commands.log"]
    )  # imported inside a method
    assert "executor_lib.log.snapshot" in graph["executor_lib.log.maintenance.describe"]  # under TYPE_CHECKING
    assert import_graph(type_only=False)["executor_lib"] == set()  # the root imports its names lazily
    assert (
        "indextables_contract.filters" in graph["executor_lib.log.files.pruning"]
    )  # `from indextables_contract import filters`


def test_a_type_only_import_back_is_a_cycle() -> None:
    code = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from a import T\nelse:\n    import b\n"
    tree = ast.parse(code)

    def names(type_only: bool) -> list[str]:
        return [t[1] for node in _imports(tree, type_only) for t in _targets("m", False, node)]

    assert names(type_only=True) == ["typing", "a", "b"]
    assert names(type_only=False) == ["typing", "b"]


def test_no_import_cycles_between_modules() -> None:
    """Counting type-only imports: ``log.maintenance.checkpointing`` works through ``log.maintenance.interfaces.MaintainedLog``
    and never imports ``log.transaction_log``, which calls it."""
    graph = import_graph()
    assert "executor_lib.log.transaction_log" not in graph["executor_lib.log.maintenance.checkpointing"]
    found = set(cycles(graph))
    new = [_describe(c, graph) for c in found - ALLOWED_CYCLES]
    assert not new, f"import cycles (move the shared piece down a layer): {new}"
    gone = [sorted(c) for c in ALLOWED_CYCLES - found]
    assert not gone, f"these allowed cycles no longer exist: delete them from ALLOWED_CYCLES: {gone}"


def _layer(module: str) -> str:
    """executor_lib's subpackage a module belongs to (``executor_lib.log``), or the module itself."""
    parts = module.split(".")
    if parts[0] != "executor_lib" or len(parts) == 1:
        return module
    candidate = ".".join(parts[:2])
    return candidate if (REPO_ROOT / "executor_lib" / parts[1]).is_dir() else module


def test_executor_lib_subpackages_import_one_way() -> None:
    """storage -> protocol -> log -> cache/splits -> spark: no subpackage imports one that imports it
    (``splits`` and ``cache`` used to import each other through the split bundle format)."""
    layers: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        if module.startswith("executor_lib"):
            layers.setdefault(_layer(module), set()).update(
                _layer(t) for t in targets if t.startswith("executor_lib") and _layer(t) != _layer(module)
            )
    found = cycles(layers)
    assert not found, [_describe(c, layers) for c in found]


# executor_lib.log's places, lowest first: its rooms (subpackages) and its top-level modules. A module
# of the log imports the log's modules of its own place and of the places before it, never after.
LOG_ORDER = (
    "config",  # the log's settings: nothing of the log
    "files",  # the live files as Arrow columns, pruning
    "state",  # version files, checkpoints, the Avro state (read, and written by state_writer)
    "snapshot",  # a table at one version, built on the state
    "snapshot_cache",  # the newest snapshot of each table in the process
    "maintenance",  # checkpoints, cleanup, PURGE, describe, history (through interfaces.MaintainedLog)
    "commit",  # what a commit is checked against, its commit point, the state it leaves
    "transaction_log",  # the commit loop, with reading and maintenance behind one object
    "tables",  # open_log, create_table
)
# The state room's writing modules (only state_writer imports the other two).
STATE_WRITING = tuple(f"executor_lib.log.state.{m}" for m in ("state_writer", "compaction_policy", "tombstone_counts"))
# What writes a table: the read path imports none of it (modules, or packages and all below them).
WRITE_CODE = (
    *STATE_WRITING,
    "executor_lib.log.commit",
    "executor_lib.log.maintenance",
    "executor_lib.log.transaction_log",
    "executor_lib.log.tables",
    "executor_lib.splits.write",
)


def _log_place(module: str) -> str | None:
    """The room or top-level module of ``executor_lib.log`` that ``module`` is in (None: outside it,
    or the package itself)."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["executor_lib", "log"] and len(parts) > 2 else None


def _read_path(modules: Iterable[str]) -> list[str]:
    """The log's modules a read of a table uses: the snapshot (and its cache), the files room, and the
    state room but for its writing modules."""
    return sorted(
        m
        for m in modules
        if _log_place(m) in ("snapshot", "snapshot_cache", "files", "state") and m not in STATE_WRITING
    )


def _is_write_code(module: str) -> bool:
    return any(module == w or module.startswith(f"{w}.") for w in WRITE_CODE)


def test_every_log_module_has_a_place_in_the_order() -> None:
    """A new room or top-level module of ``executor_lib.log`` is given its place in ``LOG_ORDER``."""
    places = {_log_place(m) for m in _module_files()} - {None}
    assert places == set(LOG_ORDER), sorted(places ^ set(LOG_ORDER))


def test_the_log_rooms_import_one_way() -> None:
    """config -> files -> state -> snapshot -> snapshot_cache -> maintenance -> commit -> transaction_log
    -> tables: maintenance never imports the commit code or the log object that calls it, the state never
    imports the snapshot built on it, the files room imports nothing else of the log (type-only imports
    count)."""
    rank = {place: i for i, place in enumerate(LOG_ORDER)}
    upward = []
    for module, targets in import_graph().items():
        place = _log_place(module)
        if place is None:
            continue
        upward += [
            f"{module} -> {t}" for t in sorted(targets) if (p := _log_place(t)) is not None and rank[p] > rank[place]
        ]
    assert not upward, f"imports against LOG_ORDER (move the shared piece down): {upward}"


def test_the_read_path_imports_no_write_code() -> None:
    """Reading a table (``Snapshot``, the live files and pruning, the state read) loads none of the code
    that writes one: not the Avro state writer, the commit or maintenance rooms, the log object, nor the
    split writer (``executor_lib.splits.write``). Checked on each module's imports (type-only ones too)
    and on everything they import in turn at run time."""
    typed, run_time = import_graph(), import_graph(type_only=False)
    readers = _read_path(typed)
    assert "executor_lib.log.snapshot" in readers and "executor_lib.log.files.pruning" in readers
    assert "executor_lib.log.state.avro_state" in readers and STATE_WRITING[0] not in readers
    offenders = [f"{m} -> {t}" for m in readers for t in sorted(typed[m]) if _is_write_code(t)]
    for root in readers:  # the chain of run-time imports that reaches write code, if one does
        parents: dict[str, str | None] = {root: None}
        todo = [root]
        while todo:
            module = todo.pop()
            for target in sorted(run_time.get(module, ())):
                if target in parents:
                    continue
                parents[target] = module
                if _is_write_code(target):
                    chain = [target]
                    while (up := parents[chain[-1]]) is not None:
                        chain.append(up)
                    offenders.append(" -> ".join(reversed(chain)))
                else:
                    todo.append(target)
    assert not offenders, f"the read path imports write code: {sorted(set(offenders))}"


ENGINE = ("tantivy", "executor_lib.splits", "executor_lib.cache", "executor_lib.log", "executor_lib.spark")


def test_file_formats_import_no_engine() -> None:
    """``executor_lib.format`` holds the bytes as Tantivy, Quickwit and tantivy4java write them: it
    imports neither ``tantivy`` nor the engine that uses it (splits, cache, log, Spark)."""
    offenders = []
    for module, (path, _) in _module_files().items():
        if not module.startswith("executor_lib.format"):
            continue
        for node in _imports(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            offenders += [f"{module}: {n}" for n in names if n == "tantivy" or n.startswith(ENGINE)]
    assert not offenders, offenders


def test_the_contract_imports_only_itself() -> None:
    """The contract sits below both sides: the thin client and the executors import it, it imports
    neither (nor anything but the standard library, which the blocked-import test checks)."""
    graph = import_graph()
    outside = {
        module: sorted(t for t in targets if not t.startswith("indextables_contract"))
        for module, targets in graph.items()
        if module.startswith("indextables_contract")
    }
    assert not {m: t for m, t in outside.items() if t}, outside


def test_shipped_code_never_imports_test_support() -> None:
    """The demo and the library are installed without the test harness: they must not import it."""
    offenders = []
    for package in SHIPPED:
        paths = (
            [REPO_ROOT / f"{package}.py"] if package == "pyspark_indextables" else (REPO_ROOT / package).rglob("*.py")
        )
        for path in paths:
            for node in _imports(ast.parse(path.read_text(), str(path)), type_only=False):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                offenders += [f"{path.relative_to(REPO_ROOT)}: {n}" for n in names if n.split(".")[0] in TEST_SUPPORT]
    assert not offenders


_BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys
    BLOCKED = set(sys.argv[1].split(","))
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked in this test")
            return None
    sys.meta_path.insert(0, Block())
    """
)


def _run_blocked(blocked: tuple[str, ...], code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter where importing any of ``blocked`` raises ImportError."""
    script = _BLOCKER + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script, ",".join(blocked)],
        cwd=REPO_ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_blocker_blocks() -> None:
    done = _run_blocked(("pyarrow",), "import pyarrow")
    assert done.returncode != 0 and "pyarrow is blocked in this test" in done.stderr


@pytest.mark.parametrize(
    "module",
    [
        "executor_lib",
        "indextables_contract.errors",
        "indextables_contract.filters",
        "indextables_contract.commands",
        "indextables_contract.aggregate",
        "executor_lib.protocol.actions",
        "executor_lib.protocol.files",
        "executor_lib.format.quickwit.bundle",
        "executor_lib.protocol.schema_registry",
    ],
)
def test_protocol_layer_imports_with_the_standard_library_only(module: str) -> None:
    done = _run_blocked(
        HEAVY,
        f"""
        import {module}
        from executor_lib import AddAction, CommitConflictError
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not loaded, loaded
        print(AddAction.__module__, CommitConflictError.code)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["executor_lib.protocol.actions", "INDEXTABLES_COMMIT_CONFLICT"]


def test_every_public_name_and_every_name_exported_before_resolves() -> None:
    from executor_lib import _COMPAT, _PUBLIC

    assert sorted(executor_lib.__all__) == sorted(_PUBLIC)
    for name in [*_PUBLIC, *_COMPAT]:
        value = getattr(executor_lib, name)
        assert value is getattr(sys.modules[(_PUBLIC | _COMPAT)[name]], name), name
    assert executor_lib.log.tables.open_log is executor_lib.open_log  # subpackages as attributes
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = executor_lib.nope


def test_the_log_reads_without_cavro(tmp_path: Path) -> None:
    """cavro is an optional extra: without it fastavro decodes the Avro state, with the same result."""
    uri = str(tmp_path / "t")
    log = executor_lib.create_table(uri, pa.schema([("id", pa.int64()), ("day", pa.string())]), ["day"])
    for i in range(3):
        path = f"day={i}/splits/s{i}.split"
        log.commit([executor_lib.AddAction(path, {"day": str(i)}, 10, 1, data_change=True, num_records=i + 1)])
    log.checkpoint()
    expected = sorted((a.path, a.num_records) for a in executor_lib.open_log(uri).snapshot().files)
    done = _run_blocked(
        ("cavro",),
        f"""
        import json
        import executor_lib
        from executor_lib.log.state import avro_records
        snap = executor_lib.open_log({uri!r}).snapshot()
        assert "cavro" not in sys.modules
        print(json.dumps([avro_records.default_decoder(), snap.base, sorted((a.path, a.num_records) for a in snap.files)]))
        """,
        INDEXTABLES_MANIFEST_CACHE_DIR="off",  # decode the manifests, not a cached copy
    )
    assert done.returncode == 0, done.stderr
    decoder, base, files = json.loads(done.stdout)
    assert (decoder, base.startswith("state-v"), [tuple(f) for f in files]) == ("fastavro", True, expected)


def test_the_s3_image_server_runs_without_executor_lib() -> None:
    """The docker backend's S3 image holds moto and ``harness/`` only (docker/Dockerfile.s3)."""
    done = _run_blocked(
        ("executor_lib", "pyarrow", "tantivy", "pyspark"),
        "import runpy, sys; "
        "sys.argv = ['moto_server', '--help']; runpy.run_module('harness.moto_server', run_name='__main__')",
    )
    assert done.returncode == 0, done.stderr
    assert "--unpatched" in done.stdout
