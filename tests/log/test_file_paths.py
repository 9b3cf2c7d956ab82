"""One rule for an add's path in commit, read and purge (issue 20, hole 1): a path relative to the
table root and the full URI of the same file are one storage key; a URI outside the table is refused.

Before the fix the commit skipped path rules for ``://`` paths, readers took the URI as a relative
key (the read failed) and PURGE compared listed keys with the raw paths, so it deleted the live
split of an add written as a full URI.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.log.maintenance.purge import purge_table
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.publish import write_and_upload
from executor_lib.storage.base import redact_uri, table_key
from indextables_contract.errors import InvalidActionError, InvalidPathError

Table = tuple[str, dict[str, Any]]
SCHEMA = pa.schema([("id", pa.int64()), ("msg", pa.string())])
EIGHT_DAYS_LATER_MS = int((time.time() + 8 * 24 * 3600) * 1000)


def _table_with_uri_add(table: Table, alias: bool = False) -> tuple[Any, str]:
    uri, options = table
    log = executor_lib.create_table(uri, SCHEMA, **options)
    add = write_and_upload(log.store, pa.table({"id": [1, 2], "msg": ["a", "b"]}), mapping_for(SCHEMA, {}))
    full = f"{log.store.root_uri}/{add.path}"
    if alias and full.startswith("s3://"):
        full = "s3a://" + full[len("s3://") :]
    log.commit([dataclasses.replace(add, path=full)])
    return log, add.path


@pytest.mark.parametrize("alias", [False, True], ids=["uri", "s3a-alias"])
def test_purge_keeps_a_live_split_whose_add_is_a_full_uri(table: Table, tmp_path: Path, alias: bool) -> None:
    log, key = _table_with_uri_add(table, alias)
    cache = SplitCache(tmp_path / "cache")
    assert search_table(log.store, log.snapshot(), "*", cache).num_rows == 2
    report = purge_table(log, now_ms=EIGHT_DAYS_LATER_MS)  # the split is "old": only the log protects it
    assert report.deleted_splits == []
    assert log.store.exists(key)
    cache.flush()
    assert sorted(search_table(log.store, log.snapshot(), "*", cache).column("id").to_pylist()) == [1, 2]


def test_purge_still_deletes_an_orphan_beside_a_uri_add(table: Table) -> None:
    log, key = _table_with_uri_add(table)
    orphan = write_and_upload(log.store, pa.table({"id": [3], "msg": ["c"]}), mapping_for(SCHEMA, {}))
    report = purge_table(log, now_ms=EIGHT_DAYS_LATER_MS)
    assert [k for k, _ in report.deleted_splits] == [orphan.path]
    assert log.store.exists(key) and not log.store.exists(orphan.path)


def test_commit_refuses_a_uri_outside_the_table_and_writes_nothing(table: Table) -> None:
    uri, options = table
    log = executor_lib.create_table(uri, SCHEMA, **options)
    add = write_and_upload(log.store, pa.table({"id": [1], "msg": ["a"]}), mapping_for(SCHEMA, {}))
    root = log.store.root_uri
    for bad in (f"{root}-other/{add.path}", f"{root}/../x/{add.path}", f"{root}/", "file:///etc/passwd"):
        with pytest.raises(InvalidActionError, match=r"outside the table|invalid file path"):
            log.commit([dataclasses.replace(add, path=bad)])
    with pytest.raises(InvalidActionError, match="added twice"):
        log.commit([add, dataclasses.replace(add, path=f"{root}/{add.path}")])
    assert log.latest_version() == 0


def test_table_key_is_the_one_rule() -> None:
    root = "s3://bucket/tables/t"
    assert table_key(root, "a=1/splits/x.split") == "a=1/splits/x.split"
    assert table_key(root, "s3://bucket/tables/t/a=1/x.split") == "a=1/x.split"
    assert table_key(root + "/", "s3n://bucket/tables/t/x.split") == "x.split"
    for bad in (
        "s3://bucket/tables/t2/x.split",
        "s3://other/tables/t/x.split",
        "s3://bucket/tables/t/a//x",
        "s3://bucket/tables/t/../u/x",
        "/abs/x.split",
        "a/../x",
        "",
        "a\\b",
    ):
        with pytest.raises(InvalidPathError):
            table_key(root, bad)
    with pytest.raises(InvalidPathError) as e:
        table_key(root, "s3://AKIAKEY:SECRET@bucket/tables/t/x.split")
    assert "SECRET" not in str(e.value) and "AKIAKEY" not in str(e.value)
    assert redact_uri("open s3://k:s@b/p failed") == "open s3://***@b/p failed"


@pytest.mark.parametrize("committed_through", ["real", "link"])
def test_a_table_reached_through_a_symbolic_link_keeps_its_uri_adds(tmp_path: Path, committed_through: str) -> None:
    """One local table, two spellings of its root (a symbolic link to it): an add written as a full URI
    through either spelling is the same file through the other. Before, PURGE through the other spelling
    took it for a file outside the table and deleted the live split."""
    real, link = tmp_path / "real", tmp_path / "link"
    real.mkdir()
    link.symlink_to(real, target_is_directory=True)
    first, other = (real, link) if committed_through == "real" else (link, real)
    _, key = _table_with_uri_add((str(first), {}))
    through_other = executor_lib.open_log(str(other))
    (live,) = through_other.snapshot().files
    assert table_key(through_other.store.root_uri, live.path) == key
    report = purge_table(through_other, now_ms=EIGHT_DAYS_LATER_MS)
    assert report.deleted_splits == [] and (real / key).exists()
    with pytest.raises(InvalidActionError, match="already live as"):  # one file, one spelling
        through_other.commit([dataclasses.replace(live, path=f"{through_other.store.root_uri}/{key}")])
    cache = SplitCache(tmp_path / "cache")
    assert sorted(search_table(through_other.store, through_other.snapshot(), "*", cache).column("id").to_pylist()) == [
        1,
        2,
    ]


def test_nothing_is_written_or_deleted_through_a_directory_linked_outside_the_table(tmp_path: Path) -> None:
    """A partition directory that is a symbolic link to elsewhere: the split is not written there
    (InvalidPathError names the key), and a file there is never deleted through the table."""
    root, outside = tmp_path / "t", tmp_path / "elsewhere"
    outside.mkdir()
    log = executor_lib.create_table(str(root), SCHEMA)
    (root / "day=x").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InvalidPathError, match="leads outside the table through a symbolic link"):
        log.store.put("day=x/splits/a.split", b"data")
    assert list(outside.iterdir()) == []
    (outside / "precious.split").write_bytes(b"keep")
    with pytest.raises(InvalidPathError, match="leads outside the table"):
        log.store.delete("day=x/precious.split")
    assert (outside / "precious.split").read_bytes() == b"keep"
    log.store.put("day=y/splits/b.split", b"inside")  # a real directory inside: written as always
    assert (root / "day=y" / "splits" / "b.split").read_bytes() == b"inside"


def test_plain_relative_paths_are_what_check_relative_key_accepts_without_a_uri() -> None:
    """PURGE judges a million paths at once: the vectorized rule agrees with the per-path one."""
    import pyarrow as pa

    from executor_lib.storage.base import check_relative_key, plain_relative_paths
    from indextables_contract.errors import InvalidPathError

    cases = ["a/b.split", "", "/a", "a/", "a//b", "./a", "a/./b", "a/..", "..", ".", "a/../b", "a\\b", "s3://x/y"]
    cases += ["a/.b", "a/..b", "..a/b", "a/b..", "x/.hidden/y", "date=2024-01-01/splits/x.split", "é/ü.split"]

    def accepted(path: str) -> bool:
        try:
            check_relative_key(path)
        except InvalidPathError:
            return False
        return "://" not in path

    mask = plain_relative_paths(pa.array([*cases, None], pa.string())).to_pylist()
    assert mask == [accepted(c) for c in cases] + [False]
