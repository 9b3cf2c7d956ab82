"""The bad-input census: hostile input of every kind, each case asserting a clear error (a type from
``indextables_contract/errors.py`` whose message names the file, option, path or query) and no change on
disk (the table's listing and checksums before and after the failed operation).

* corrupt files of every kind a reader meets — version files, JSON checkpoints, ``_last_checkpoint``,
  state manifests, Avro manifests, splits — emptied, truncated, bit-flipped or replaced by garbage;
* protocol errors (a reader version from the future, an unknown action), option errors, hostile
  paths (traversal, absolute, outside the table, credentials in URIs), hostile table and column
  names, bad queries and limits.

Cases that expose a bug another change owns are ``xfail(strict=False)`` with the hole's number.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.cli import main as cli_main
from executor_lib.log.maintenance.purge import purge_table
from executor_lib.protocol.files import LOG_DIR
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from indextables_contract import errors

SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string())])
JSON_STATE = {"spark.indextables.state.format": "json", "spark.indextables.checkpoint.interval": "2"}
ROWS = 3


# --- template tables (built once, copied per case) ----------------------------------------------


def _build(root: Path, options: dict[str, str]) -> None:
    log = executor_lib.create_table(str(root), SCHEMA, **options)
    mapping = mapping_for(SCHEMA, {"spark.indextables.indexing.typemap.msg": "text"})
    for i in range(ROWS):
        log.commit([write_and_upload(log.store, pa.table({"id": [i], "msg": [f"hello {i}"]}), mapping)])


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("census-templates")
    out = {"avro": base / "avro", "json": base / "json"}
    _build(out["avro"], {})
    _build(out["json"], JSON_STATE)
    return out


def _copy(templates: dict[str, Path], kind: str, tmp_path: Path) -> Path:
    root = tmp_path / "table"
    shutil.copytree(templates[kind], root)
    return root


def disk_state(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path -> sha256): the listing and the checksums."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


def _options(kind: str) -> dict[str, str]:
    return JSON_STATE if kind == "json" else {}


def read_table(root: Path, kind: str, cache: Path) -> int:
    log = executor_lib.open_log(str(root), **_options(kind))
    return search_table(log.store, log.snapshot(), "*", SplitCache(cache)).num_rows


# --- corrupt files ------------------------------------------------------------------------------


def _log_file(name: str) -> Callable[[Path], Path]:
    return lambda root: root / LOG_DIR / name


def _latest_state_manifest(root: Path) -> Path:
    latest = sorted((root / LOG_DIR).glob("state-v*"))[-1]
    return sorted(p for p in latest.iterdir() if p.name.startswith("_manifest"))[0]


def _newest_avro_manifest(root: Path) -> Path:
    state = (
        json.loads(_latest_state_manifest(root).read_bytes())
        if _latest_state_manifest(root).suffix == ".json"
        else None
    )
    if state is not None:
        return root / LOG_DIR / state["manifests"][-1]["path"]
    return sorted((root / LOG_DIR / "manifests").glob("*.avro"))[-1]


def _a_split(root: Path) -> Path:
    return sorted(root.rglob("*.split"))[0]


FILE_KINDS: dict[str, tuple[str, Callable[[Path], Path]]] = {
    "version-file": ("json", _log_file("00000000000000000003.json")),
    "checkpoint": ("json", _log_file("00000000000000000002.checkpoint.json")),
    "last-checkpoint": ("json", _log_file("_last_checkpoint")),
    "last-checkpoint-avro": ("avro", _log_file("_last_checkpoint")),
    "state-manifest": ("avro", _latest_state_manifest),
    "avro-manifest": ("avro", _newest_avro_manifest),
    "split": ("avro", _a_split),
}


def _empty(data: bytes) -> bytes:
    return b""


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _bitflip(data: bytes) -> bytes:
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0x10]) + data[i + 1 :]


def _garbage(data: bytes) -> bytes:
    return hashlib.sha256(data).digest() * (len(data) // 32 + 1)


CORRUPTIONS = {"empty": _empty, "truncated": _truncate, "bitflip": _bitflip, "garbage": _garbage}
# A hint file may be ignored: the reader then lists the log and must still read the right rows. So
# may a damaged checkpoint or state manifest where the version files after an older base are all
# retained (issue 33, hole 1): the reader falls back, exactly.
HINTS = {"last-checkpoint", "last-checkpoint-avro", "checkpoint", "state-manifest"}
# Cases that expose a hole another change owns (none now: a bit flip inside a split's data, which kept the
# size the add records, is caught since issue 50 by the Tantivy CRC32s checked when a split is extracted).
KNOWN_HOLES: dict[tuple[str, str], str] = {}


def _file_cases() -> list[Any]:
    cases = []
    for kind in FILE_KINDS:
        for corruption in CORRUPTIONS:
            marks = []
            if (kind, corruption) in KNOWN_HOLES:
                marks.append(pytest.mark.xfail(strict=False, reason=KNOWN_HOLES[(kind, corruption)]))
            cases.append(pytest.param(kind, corruption, id=f"{kind}-{corruption}", marks=marks))
    return cases


@pytest.mark.parametrize(("kind", "corruption"), _file_cases())
def test_corrupt_file(templates: dict[str, Path], tmp_path: Path, kind: str, corruption: str) -> None:
    table_kind, locate = FILE_KINDS[kind]
    root = _copy(templates, table_kind, tmp_path)
    target = locate(root)
    target.write_bytes(CORRUPTIONS[corruption](target.read_bytes()))
    before = disk_state(root)
    try:
        rows = read_table(root, table_kind, tmp_path / "cache")
    except errors.IndexTablesError as e:
        assert target.name in str(e), f"the error does not name {target.name}: {e}"
    else:
        assert kind in HINTS, f"corrupt {target.name} ({corruption}) was read without an error ({rows} rows)"
        assert rows == ROWS
    assert disk_state(root) == before


def test_missing_version_file_is_named(templates: dict[str, Path], tmp_path: Path) -> None:
    root = _copy(templates, "json", tmp_path)
    (root / LOG_DIR / "00000000000000000001.json").unlink()
    (root / LOG_DIR / "00000000000000000002.checkpoint.json").unlink()
    before = disk_state(root)
    with pytest.raises(errors.ProtocolError, match="00000000000000000001"):
        read_table(root, "json", tmp_path / "cache")
    assert disk_state(root) == before


# --- protocol errors -----------------------------------------------------------------------------


def _append_line(root: Path, line: dict[str, Any]) -> None:
    (root / LOG_DIR / "00000000000000000004.json").write_text(json.dumps(line) + "\n")


@pytest.mark.parametrize(
    ("line", "error", "fragment"),
    [
        ({"protocol": {"minReaderVersion": 99, "minWriterVersion": 99}}, errors.UnsupportedProtocolError, "99"),
        ({"someFutureAction": {"x": 1}}, errors.ProtocolError, "00000000000000000004"),
        ({"add": {"path": 7}}, errors.ProtocolError, "00000000000000000004"),
    ],
    ids=["reader-version-99", "unknown-action", "add-path-not-a-string"],
)
def test_protocol_errors(
    templates: dict[str, Path], tmp_path: Path, line: dict[str, Any], error: type, fragment: str
) -> None:
    root = _copy(templates, "json", tmp_path)
    _append_line(root, line)
    before = disk_state(root)
    with pytest.raises(error, match=fragment):
        read_table(root, "json", tmp_path / "cache")
    assert disk_state(root) == before


# --- operations refused before anything is written -----------------------------------------------


def _refused(root: Path, call: Callable[[], Any], error: type, fragment: str) -> None:
    before = disk_state(root)
    with pytest.raises(error) as excinfo:
        call()
    assert fragment in str(excinfo.value), str(excinfo.value)
    assert disk_state(root) == before


def _add(root: Path, path: str | None = None) -> Any:
    log = executor_lib.open_log(str(root))
    add = next(iter(log.snapshot().files))
    return log, dataclasses.replace(add, path=path or add.path)


HOSTILE_PATHS = ["../outside.split", "/etc/passwd", "file:///etc/passwd", "a\\b.split", "a//b.split", "./x.split", ""]


@pytest.mark.parametrize("path", HOSTILE_PATHS, ids=[f"path-{i}" for i in range(len(HOSTILE_PATHS))])
def test_hostile_add_paths_are_refused(templates: dict[str, Path], tmp_path: Path, path: str) -> None:
    root = _copy(templates, "avro", tmp_path)
    log, add = _add(root)
    bad = dataclasses.replace(add, path=path)
    _refused(root, lambda: log.commit([bad]), errors.InvalidActionError, "path")


def test_a_uri_outside_the_table_is_refused(templates: dict[str, Path], tmp_path: Path) -> None:
    root = _copy(templates, "avro", tmp_path)
    log, add = _add(root)
    bad = dataclasses.replace(add, path=f"file://{tmp_path}/elsewhere/{Path(add.path).name}")
    _refused(root, lambda: log.commit([bad]), errors.InvalidActionError, "outside the table")


def test_a_split_of_another_schema_is_refused(templates: dict[str, Path], tmp_path: Path) -> None:
    root = _copy(templates, "avro", tmp_path)
    log = executor_lib.open_log(str(root))
    rows = pa.table({"id": [9], "other": ["x"]})
    add = write_and_upload(log.store, rows, mapping_for(rows.schema, {}))
    _refused(root, lambda: log.commit([add]), errors.InvalidActionError, add.path)


@pytest.mark.parametrize(
    ("name", "rule"), [("", "must not be empty"), ("-x", "must not start with '-'"), ("__row", "reserved")]
)
def test_hostile_column_names(tmp_path: Path, name: str, rule: str) -> None:
    schema = pa.schema([("id", pa.int64()), (name, pa.string())])
    root = tmp_path / "new"
    _refused(root, lambda: executor_lib.create_table(str(root), schema), errors.ConfigError, rule)


@pytest.mark.parametrize(
    "uri",
    ["ftp://host/table", "s3://AKIAEXAMPLE:SECRETKEY@bucket/table", "hdfs://nn/table"],
    ids=["ftp", "credentials-in-uri", "hdfs"],
)
def test_hostile_table_uris(tmp_path: Path, uri: str) -> None:
    with pytest.raises(errors.ConfigError) as excinfo:
        executor_lib.create_table(uri, SCHEMA)
    assert "SECRETKEY" not in str(excinfo.value) and "AKIAEXAMPLE" not in str(excinfo.value)
    assert ("***@" if "@" in uri else uri.split(":")[0]) in str(excinfo.value)


def test_create_over_an_existing_table_is_refused(templates: dict[str, Path], tmp_path: Path) -> None:
    root = _copy(templates, "avro", tmp_path)
    _refused(root, lambda: executor_lib.create_table(str(root), SCHEMA), errors.TableAlreadyExistsError, "already")


# --- option errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"spark.indextables.checkpoint.interval": "zero"}, "checkpoint.interval"),
        ({"spark.indextables.checkpoint.interval": "-3"}, "checkpoint.interval"),
        ({"spark.indextables.transaction.compression.gzip.level": "42"}, "gzip.level"),
        ({"spark.indextables.state.format": "xml"}, "state.format"),
    ],
    ids=["interval-word", "interval-negative", "gzip-level", "state-format"],
)
def test_option_errors(templates: dict[str, Path], tmp_path: Path, options: dict[str, str], fragment: str) -> None:
    root = _copy(templates, "avro", tmp_path)
    _refused(root, lambda: executor_lib.open_log(str(root), **options), errors.ConfigError, fragment)


def test_purge_below_the_minimum_retention(templates: dict[str, Path], tmp_path: Path) -> None:
    root = _copy(templates, "avro", tmp_path)
    log = executor_lib.open_log(str(root))
    _refused(root, lambda: purge_table(log, retention_hours=1), errors.ConfigError, "below the minimum")


def test_a_missing_table(tmp_path: Path) -> None:
    _refused(
        tmp_path / "nothing",
        lambda: executor_lib.open_log(str(tmp_path / "nothing")),
        errors.TableNotFoundError,
        "nothing",
    )


# --- bad queries ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "kwargs", "fragment"),
    [
        ("msg:(hello", {}, "msg:(hello"),
        ("nope:x", {}, "nope:x"),
        ('msg:"unclosed', {}, "unclosed"),
        ("*", {"columns": ["nope"]}, "nope"),
        ("*", {"limit": -1}, "limit -1"),
    ],
    ids=["unbalanced", "unknown-field", "unclosed-phrase", "unknown-column", "negative-limit"],
)
def test_bad_queries(templates: dict[str, Path], tmp_path: Path, query: str, kwargs: dict, fragment: str) -> None:
    root = _copy(templates, "avro", tmp_path)
    log = executor_lib.open_log(str(root))
    cache = SplitCache(tmp_path / "cache")
    _refused(
        root, lambda: search_table(log.store, log.snapshot(), query, cache, **kwargs), errors.IndexTablesError, fragment
    )


def test_cli_negative_limit(templates: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(templates, "avro", tmp_path)
    before = disk_state(root)
    with pytest.raises(SystemExit) as excinfo:
        cli_main(["search", str(root), "*", "--limit", "-1"])
    assert excinfo.value.code == 2
    assert "--limit: -1 is negative" in capsys.readouterr().err
    assert disk_state(root) == before
