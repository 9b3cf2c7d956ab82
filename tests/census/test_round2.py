"""The second census's holes (issue 33), one test each that failed before its fix.

* hole 1: a flipped bit in a state manifest changed the table silently (one made it read as empty,
  and the next append wrote a state without the old files);
* hole 2: a secret holding ``/`` or ``@`` in a URI was echoed in errors;
* hole 3: an add path spelled ``file:/abs/...`` or percent-escaped was accepted at commit, unreadable
  on read, and its live split deleted by PURGE;
* hole 4: a live split whose name holds ``.tmp-`` was hidden from listings and swept as a leftover;
* low: a split re-added as a full URI while live under its relative path was listed twice (rows doubled);
* hole 5: ``state.gc.minManifestAgeHours=0`` was accepted, and a concurrent cleanup could then delete a
  manifest another writer's new state referenced;
* hole 7: a corrupt schema read through a pruned listing, a NUL byte in a path or a partition value
  raised bare ``KeyError``/``ValueError`` (or was accepted, then made the table unreadable);
* hole 8: a split found damaged while searching stayed in the split cache (a repaired split was
  never fetched again), and the error was a bare ``ArrowIndexError``;
* hole 9: the default split cache directory was used even when another user owned it or could
  write to it (a planted split was served); ``cache flush --cache-dir <a table>`` deleted the
  table's splits, and ``--cache-dir /dev/null`` was a traceback;
* hole 10: classifying an error's text was quadratic in a run of word characters;
* low: 2,000 nested ``NOT`` (SQL or filter JSON) was a ``RecursionError``, ``LIMIT 99999999999999999999``
  a bare ``Py4JError``, and a misspelt ``-o spark.indextables.*`` option was ignored by the CLI.
"""

from __future__ import annotations

import os
import random
import string
import time
from pathlib import Path

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.cli import main as cli_main
from executor_lib.log.state.avro_state import read_state_manifest
from executor_lib.protocol.files import LOG_DIR, state_dir
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.split_opening import damage_of_split
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage.base import redact_uri
from indextables_contract import errors

SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string())])
FORMATS = {"avro": {}, "json": {"spark.indextables.state.manifestFormat": "json"}}


def _table(root: Path, options: dict[str, str], commits: int = 3) -> executor_lib.TransactionLog:
    log = executor_lib.create_table(str(root), SCHEMA, **options)
    mapping = mapping_for(SCHEMA, {})
    for i in range(commits):
        log.commit([write_and_upload(log.store, pa.table({"id": [i], "msg": [f"row {i}"]}), mapping)])
    return log


def _state_file(root: Path, version: int) -> Path:
    found = sorted((root / LOG_DIR / state_dir(version)).glob("_manifest.*"))
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_hole1_every_bit_flip_of_a_state_manifest_fails_loudly(tmp_path: Path, fmt: str) -> None:
    log = _table(tmp_path / "t", FORMATS[fmt], commits=2)
    path = _state_file(tmp_path / "t", 2)
    data = path.read_bytes()
    silent, kinds = 0, set()
    for i in range(len(data)):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[i] ^= 1 << bit
            path.write_bytes(bytes(flipped))
            try:
                read_state_manifest(log.store, 2)
            except errors.IndexTablesError as e:
                kinds.add(type(e).__name__)
            else:
                silent += 1
    path.write_bytes(data)
    assert silent == 0, f"{silent} of {len(data) * 8} single-bit flips of {path.name} went unnoticed"
    assert kinds == {"CorruptLogError"}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_hole1_a_damaged_state_is_read_around_and_never_built_on(tmp_path: Path, fmt: str) -> None:
    root = tmp_path / "t"
    log = _table(root, FORMATS[fmt])
    path = _state_file(root, 3)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    fresh = executor_lib.open_log(str(root), **FORMATS[fmt])
    assert sorted(a.path for a in fresh.snapshot().files) == sorted(a.path for a in log.snapshot(3).files)
    assert len(fresh.snapshot().files) == 3  # exact: state 2 plus version file 3
    mapping = mapping_for(SCHEMA, {})
    fresh.commit([write_and_upload(fresh.store, pa.table({"id": [9], "msg": ["new"]}), mapping)])
    after = executor_lib.open_log(str(root), **FORMATS[fmt]).snapshot()
    assert after.version == 4 and len(after.files) == 4  # the old files survive the append
    read_state_manifest(fresh.store, 4)  # the new state is sound


def test_hole1_a_damaged_state_without_version_files_fails_closed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _table(root, {})
    (root / LOG_DIR / "00000000000000000003.json").unlink()
    path = _state_file(root, 3)
    data = bytearray(path.read_bytes())
    data[-20] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(errors.CorruptLogError, match=r"state-v0+3/_manifest.avro: .*SHA-256"):
        executor_lib.open_log(str(root)).snapshot()


_SECRET_ALPHABET = string.ascii_letters + string.digits + "/+=@:%-_.!*~$&"


def test_hole2_no_random_secret_survives_redaction() -> None:
    rng = random.Random(33)
    for _ in range(1000):
        secret = "".join(rng.choice(_SECRET_ALPHABET) for _ in range(rng.randint(8, 48)))
        key = "AKIA" + "".join(rng.choice(string.ascii_uppercase) for _ in range(12))
        uri = f"s3://{key}:{secret}@bucket/t/_transaction_log/_last_checkpoint"
        for text in (uri, f"[INDEXTABLES_STORAGE] {uri}: read failed", f"open '{uri}' failed", f"{uri}\n{uri}"):
            redacted = redact_uri(text)
            assert secret not in redacted and key not in redacted, (secret, redacted)


def test_hole2_a_secret_with_a_slash_is_not_echoed_by_open_log() -> None:
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    with pytest.raises(errors.IndexTablesError) as raised:
        executor_lib.open_log(f"s3://AKIAIOSFODNN7EXAMPLE:{secret}@bucket/t")
    assert "K7MDENG" not in str(raised.value) and "AKIAIOSFODNN7EXAMPLE" not in str(raised.value)


def test_hole4_a_live_file_named_like_a_temporary_one_stays(tmp_path: Path) -> None:
    log = _table(tmp_path / "t", {}, commits=1)
    live = tmp_path / "t" / "part.tmp-1.split"
    live.write_bytes(b"x")
    listed = {o.key for o in log.store.list("")}
    assert "part.tmp-1.split" in listed
    assert "part.tmp-1.split" not in {o.key for o in log.store.list_temporary("")}
    leftover = tmp_path / "t" / f".part.split.tmp-{'0' * 32}"
    leftover.write_bytes(b"y")
    assert {o.key for o in log.store.list_temporary("")} == {leftover.name}
    assert leftover.name not in {o.key for o in log.store.list("")}


def test_hole10_classifying_a_huge_error_text_is_linear() -> None:
    text = "a" * 1_000_000 + " QueryError: [INDEXTABLES_QUERY] x"
    started = time.perf_counter()
    assert errors.error_class_in(text) is errors.QueryError
    assert errors.error_class_in("b" * 1_000_000) is None
    assert time.perf_counter() - started < 5  # quadratic took hours at this size


def test_hole8_a_split_found_damaged_while_searching_leaves_the_cache(tmp_path: Path) -> None:
    log = _table(tmp_path / "t", {}, commits=1)
    cache = SplitCache(tmp_path / "cache")
    assert search_table(log.store, log.snapshot(), "*", cache).num_rows == 1  # cached now
    (add,) = log.snapshot().files
    assert cache.describe()["splitsCached"] == 1
    damaged = rf"{add.path}: the split cannot be searched \(ArrowIndexError"
    with pytest.raises(errors.CorruptSplitError, match=damaged), damage_of_split(cache, log.store, add.path):
        pa.table({"x": [1]}).take([5])  # what a damaged columnar copy raised
    assert cache.describe()["splitsCached"] == 0  # fetched again next time
    assert search_table(log.store, log.snapshot(), "*", cache).num_rows == 1
    with pytest.raises(errors.QueryError), damage_of_split(cache, log.store, add.path):
        raise errors.QueryError("a query error is not damage")
    assert cache.describe()["splitsCached"] == 1


def test_hole9_a_cache_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared-cache"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(errors.ConfigError, match=r"shared-cache is open to other users \(mode 0o777\)"):
        SplitCache(shared)
    if os.getuid() == 0:  # only root can give a directory away
        planted = tmp_path / "planted"
        planted.mkdir(mode=0o700)
        os.chown(planted, 12345, 12345)
        with pytest.raises(errors.ConfigError, match="owned by user id 12345"):
            SplitCache(planted)
    private = tmp_path / "private"
    SplitCache(private)
    assert private.stat().st_mode & 0o777 == 0o700


def test_hole9_cache_flush_refuses_a_directory_that_is_not_a_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _table(tmp_path / "t", {}, commits=1)
    before = sorted(p.name for p in (tmp_path / "t").rglob("*"))
    assert cli_main(["cache", "flush", "--cache-dir", str(tmp_path / "t")]) != 0
    assert "not a split cache" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "t").rglob("*")) == before
    assert cli_main(["cache", "flush", "--cache-dir", "/dev/null"]) != 0
    assert "split cache directory /dev/null" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("spell", "problem"),
    [
        (lambda root, path: f"file:{root}/{path}", "looks like a URI scheme without '//'"),
        (lambda root, path: path.replace("/", "%2F"), "percent-escape"),
        (lambda root, path: path + "\x00", "control character"),
    ],
)
def test_hole3_a_path_in_another_spelling_is_refused_at_commit(tmp_path: Path, spell: object, problem: str) -> None:
    import dataclasses

    root = tmp_path / "t"
    log = _table(root, {}, commits=0)
    add = write_and_upload(log.store, pa.table({"id": [1], "msg": ["a"]}), mapping_for(SCHEMA, {}))
    before = sorted(p.name for p in (root / LOG_DIR).iterdir())
    with pytest.raises(errors.InvalidActionError, match=problem):
        log.commit([dataclasses.replace(add, path=spell(str(root), add.path))])  # type: ignore[operator]
    assert sorted(p.name for p in (root / LOG_DIR).iterdir()) == before


def test_hole7_bad_bytes_and_corrupt_schemas_raise_typed_errors(tmp_path: Path) -> None:
    import dataclasses

    from executor_lib.log.files.pruning import column_types

    log = _table(tmp_path / "t", {}, commits=0)
    with pytest.raises(errors.InvalidPathError, match="NUL"):
        log.store.read("splits/a\x00b")
    with pytest.raises(errors.CorruptLogError, match="not a Spark schema"):
        column_types('{"no": "fields"}')
    add = write_and_upload(log.store, pa.table({"id": [1], "msg": ["a"]}), mapping_for(SCHEMA, {}))
    with pytest.raises(errors.InvalidActionError, match="NUL byte"):
        log.commit([dataclasses.replace(add, partition_values={"day": "a\x00b"})])


def test_low_deep_nesting_and_huge_limits_are_named() -> None:
    from connect_plugin.grammar import IndexTablesSQLError, parse_predicate
    from connect_plugin.sql import _limit
    from indextables_contract import filters

    with pytest.raises(IndexTablesSQLError, match="nests too deeply"):
        parse_predicate("NOT " * 2000 + "a = 1")
    deep: dict[str, object] = {"op": "term", "column": "a", "value": 1}
    for _ in range(2000):
        deep = {"op": "not", "child": deep}
    with pytest.raises(errors.FilterError, match="nests deeper than 256"):
        filters.from_json(deep)
    with pytest.raises(errors.FilterError, match="nests deeper than 256"):
        filters.from_text('{"op": "not", "child": ' * 5000 + "{}" + "}" * 5000)
    with pytest.raises(IndexTablesSQLError, match="LIMIT 99999999999999999999 is larger than Spark's largest"):
        _limit("99999999999999999999")
    assert _limit("2147483647") == 2147483647


def test_hole5_a_manifest_age_that_endangers_concurrent_writers_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        errors.ConfigError, match=r"minManifestAgeHours=0: below 0.25 hours .*allowUnsafeMinManifestAge"
    ):
        executor_lib.create_table(
            str(tmp_path / "t"), SCHEMA, **{"spark.indextables.state.gc.minManifestAgeHours": "0"}
        )
    assert not (tmp_path / "t").exists()  # refused before anything was written
    executor_lib.create_table(str(tmp_path / "a"), SCHEMA, **{"spark.indextables.state.gc.minManifestAgeHours": "0.25"})
    single_writer = {
        "spark.indextables.state.gc.minManifestAgeHours": "0",
        "spark.indextables.state.gc.allowUnsafeMinManifestAge": "true",
    }
    assert executor_lib.create_table(str(tmp_path / "b"), SCHEMA, **single_writer).config.gc_min_manifest_age_hours == 0


def test_low_a_misspelt_cli_option_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _table(tmp_path / "t", {}, commits=1)
    with pytest.raises(SystemExit) as exited:
        cli_main(["checkpoint", str(tmp_path / "t"), "-o", "spark.indextables.checkpoint.intreval=5"])
    assert "did you mean spark.indextables.checkpoint.interval?" in str(exited.value)
    assert cli_main(["checkpoint", str(tmp_path / "t"), "-o", "spark.indextables.checkpoint.interval=5"]) == 0
    capsys.readouterr()


def test_low_a_live_split_re_added_in_another_spelling_is_refused(tmp_path: Path) -> None:
    import dataclasses

    root = tmp_path / "t"
    log = _table(root, {}, commits=1)
    (live,) = log.snapshot().files
    uri = f"{log.store.root_uri}/{live.path}"
    with pytest.raises(errors.InvalidActionError, match="already live as"):
        log.commit([dataclasses.replace(live, path=uri)])
    assert len(executor_lib.open_log(str(root)).snapshot().files) == 1
