"""Tables this project writes are readable by IndexTables4Spark 0.5.x, and its writers race safely.

Every check compares ``indextables describe`` (this project's reader) with ``tests.jvm_reader``,
an independent reader that decodes the newest ``state-v<N>/_manifest.avro`` with the schemas
embedded in the real 0.5.4 files and replays the version files after it, rejecting action lines
a JVM parser does not know.
"""

from __future__ import annotations

import io
import json
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.cli import main as cli_main
from executor_lib.log.config import LogConfig
from executor_lib.log.transaction_log import TransactionLog
from executor_lib.protocol.actions import AddAction, RemoveAction, removes_of
from executor_lib.splits.write.publish import merge_splits
from executor_lib.storage import open_store
from executor_lib.storage.local import LocalStore
from tests.conftest import BUCKET, COMPAT_ROOT, requires_compat, s3_options
from tests.jvm_reader import Jvm05Committer, jvm_read
from tests.log.helpers import add, make_table

TABLES = sorted(p.name for p in COMPAT_ROOT.iterdir()) if COMPAT_ROOT.is_dir() else []
LOG = "_transaction_log"


def describe(uri: str, capsys: pytest.CaptureFixture[str], options: dict[str, Any]) -> dict[str, Any]:
    extra = [f"--option={k}={v}" for k, v in options.items()]
    assert cli_main(["describe", uri, "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def assert_jvm_sees_what_describe_says(uri: str, capsys: pytest.CaptureFixture[str], options: dict[str, Any]) -> None:
    doc = describe(uri, capsys, options)
    jvm = jvm_read(uri, **options)
    assert jvm.version == doc["version"]
    assert sorted(jvm.files) == sorted(f["path"] for f in doc["files"])
    assert {p: e["numRecords"] for p, e in jvm.files.items()} == {f["path"]: f["numRecords"] for f in doc["files"]}


def state_manifest_names(uri: str, options: dict[str, Any]) -> set[str]:
    store = open_store(uri, **options)
    return {o.key.rsplit("/", 1)[-1] for o in store.list(f"{LOG}/state-v")}


def only_avro_states_from(uri: str, options: dict[str, Any], first_version: int) -> None:
    """Every state this project wrote (from ``first_version`` on) is ``_manifest.avro``, in the JVM's schemas."""
    store = open_store(uri, **options)
    for o in store.list(f"{LOG}/state-v"):
        version = int(o.key.split("state-v")[1][:20])
        if version >= first_version:
            assert o.key.endswith("/_manifest.avro"), o.key
            reader = fastavro.reader(io.BytesIO(store.read(o.key)))
            assert reader.writer_schema["name"] == "io.indextables.state.StateManifest"  # type: ignore[index]


@pytest.mark.parametrize("name", TABLES)
def test_append_merge_drop_on_a_copy_reads_the_same_in_the_jvm_reader(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Append, merge-shaped rewrite (remove N, add one with dataChange=false) and a partition drop by
    this project on a copy of each 0.5.4 table: the JVM-style read equals ``describe`` after each."""
    copy = tmp_path / name
    shutil.copytree(COMPAT_ROOT / name, copy)
    uri = str(copy)
    log = executor_lib.open_log(uri)
    before = log.snapshot()
    first_ours = before.version + 1
    template = before.files[0] if before.files else None
    partition = dict(template.partition_values) if template else {c: "x" for c in before.partition_columns}
    ref = template.doc_mapping_ref if template else None
    new = [
        AddAction(
            f"part-py-{uuid.uuid4()}.split",
            partition,
            size=100 + i,
            modification_time=1,
            data_change=True,
            num_records=7,
            doc_mapping_ref=ref,
        )
        for i in range(3)
    ]
    log.commit(new, operation="WRITE")
    assert_jvm_sees_what_describe_says(uri, capsys, {})

    merged = AddAction(
        f"part-py-merged-{uuid.uuid4()}.split",
        partition,
        size=300,
        modification_time=2,
        data_change=False,
        num_records=21,
        num_merge_ops=1,
        doc_mapping_ref=ref,
    )
    log.commit([merged, *(RemoveAction(a.path, 2, data_change=False, size=a.size) for a in new)], operation="MERGE")
    assert_jvm_sees_what_describe_says(uri, capsys, {})

    snap = log.snapshot()
    groups: dict[tuple[Any, ...], list[AddAction]] = {}
    for f in snap.files:
        if f.path.endswith(".split") and (copy / f.path).is_file():  # the JVM's real splits
            groups.setdefault((tuple(sorted(f.partition_values.items())), snap.doc_mapping(f)), []).append(f)
    sources = next((g[:2] for g in groups.values() if len(g) >= 2), None)
    if sources is not None:  # MERGE SPLITS' own code: a real merged split of the JVM's splits
        mapping = {a.path: snap.doc_mapping(a) for a in sources}
        real = merge_splits(log.store, sources, snap.arrow_schema(), mapping, SplitCache(tmp_path / "cache"))
        assert real.num_records == sum(a.num_records or 0 for a in sources)
        log.commit([real, *removes_of(sources, data_change=False)], operation="MERGE", read_version=snap.version)
        assert_jvm_sees_what_describe_says(uri, capsys, {})
        snap = log.snapshot()
    doomed = [f for f in snap.files if f.partition_values == partition]
    log.commit(
        [RemoveAction(f.path, 3, partition_values=f.partition_values, size=f.size) for f in doomed],
        operation="DROP PARTITIONS",
    )
    assert_jvm_sees_what_describe_says(uri, capsys, {})
    only_avro_states_from(uri, {}, first_ours)
    assert not any(
        p.name.endswith(".json")
        and p.name[:20].isdigit()
        and int(p.name[:20]) >= first_ours
        and b"commitInfo" in p.read_bytes()
        for p in (copy / LOG).iterdir()
    )


def test_a_table_created_with_defaults_is_jvm_readable(
    table: tuple[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    uri, options = table
    log = make_table(uri, options)
    files = [add(f"2024-01-0{d}") for d in (1, 1, 2, 2, 3)]
    log.commit(files[:3])
    log.commit(files[3:])
    assert_jvm_sees_what_describe_says(uri, capsys, options)
    merged = add("2024-01-01", records=20)
    log.commit(
        [merged, *(RemoveAction(f.path, 1, data_change=False, size=f.size) for f in files[:2])], operation="MERGE"
    )
    log.commit([RemoveAction(f.path, 2, size=f.size) for f in files[2:4]], operation="DROP PARTITIONS")
    log.checkpoint()
    assert_jvm_sees_what_describe_says(uri, capsys, options)
    assert state_manifest_names(uri, options) == {"_manifest.avro"}
    only_avro_states_from(uri, options, 0)


def test_a_streamed_table_is_jvm_readable(
    table: tuple[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    """Streaming micro-batches (their identifiers in split tags and the state's file metadata, no new action
    line), a replayed batch, a merge and a checkpoint: the 0.5.x-style reader sees what ``describe`` says."""
    from executor_lib.log.state.streaming_txns import StreamingTxn

    uri, options = table
    log = make_table(uri, options)
    for batch in range(3):
        assert log.commit_streaming_batch([add("2024-01-01"), add("2024-01-02")], StreamingTxn("q1", batch))
    assert log.commit_streaming_batch([add("2024-01-01")], StreamingTxn("q1", 2)) is None
    assert_jvm_sees_what_describe_says(uri, capsys, options)
    files = [f for f in log.snapshot().files if f.partition_values["date"] == "2024-01-01"]
    log.commit([add("2024-01-01", records=30), *removes_of(files, data_change=False)], operation="MERGE")
    log.checkpoint()
    assert_jvm_sees_what_describe_says(uri, capsys, options)
    only_avro_states_from(uri, options, 0)
    assert executor_lib.open_log(uri, **options).streaming_txns()["q1"].batch_id == 2


def test_json_manifest_layout_still_works_when_asked_for(table: tuple[str, dict[str, Any]]) -> None:
    uri, options = table
    log = make_table(uri, options, **{"spark.indextables.state.manifestFormat": "json"})
    log.commit([add()])
    assert state_manifest_names(uri, options) == {"_manifest.json"}
    later = executor_lib.open_log(uri, **options)  # the default: moves to .avro on its next state write
    later.commit([add()])
    assert state_manifest_names(uri, options) == {"_manifest.json", "_manifest.avro"}
    assert len(executor_lib.open_log(uri, **options).snapshot().files) == 2


def _upload(src: Path, uri: str, options: dict[str, Any]) -> None:
    store = open_store(uri, **options)
    for path in sorted(src.rglob("*")):
        if path.is_file() and not path.name.endswith(".crc"):
            store.put(str(path.relative_to(src)), path.read_bytes())


def _race(uri: str, options: dict[str, Any], ours: int, jvms: int, commits: int) -> tuple[list, list, list]:
    """``ours`` writers of this project and ``jvms`` 0.5.x-style committers, released at one barrier,
    each appending ``commits`` times. Returns (our acks, JVM acks, errors): acks are (version, path)."""
    barrier = threading.Barrier(ours + jvms)
    our_acks: list[tuple[int, str]] = []
    jvm_acks: list[tuple[int, str]] = []
    errors: list[BaseException] = []

    def our_writer() -> None:
        try:
            log = executor_lib.open_log(uri, **options)
            barrier.wait()
            for _ in range(commits):
                a = add(None)
                our_acks.append((log.commit([a]), a.path))
        except BaseException as e:
            errors.append(e)

    def jvm_writer() -> None:
        try:
            committer = Jvm05Committer(uri, options)
            barrier.wait()
            for _ in range(commits):
                path = f"part-jvm-{uuid.uuid4()}.split"
                jvm_acks.append((committer.commit([path]), path))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=our_writer) for _ in range(ours)]
    threads += [threading.Thread(target=jvm_writer) for _ in range(jvms)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    return our_acks, jvm_acks, errors


def _check_race(
    uri: str, options: dict[str, Any], our_acks: list, jvm_acks: list, first: int, capsys: pytest.CaptureFixture[str]
) -> None:
    acked = our_acks + jvm_acks
    versions = [v for v, _ in acked]
    assert len(set(versions)) == len(versions), "no version acknowledged to two writers"
    jvm = jvm_read(uri, **options)
    snap = executor_lib.open_log(uri, **options).snapshot()
    assert jvm.version == snap.version == first + len(acked), "versions contiguous, none lost or doubled"
    for version, path in acked:
        assert path in jvm.files, f"acknowledged commit of {path} at version {version} lost for the JVM reader"
    assert sorted(jvm.files) == sorted(f.path for f in snap.files)
    store = open_store(uri, **options)
    for v in range(first + 1, snap.version + 1):  # no version left with a withdrawn (ghost) version file
        has_file = store.exists(f"{LOG}/{v:020d}.json")
        assert has_file or store.exists(f"{LOG}/state-v{v:020d}/_manifest.avro"), f"version {v} missing"
    assert_jvm_sees_what_describe_says(uri, capsys, options)


@pytest.mark.s3
@requires_compat  # the 0.5.x committer writes the JVM schema read from the fixture files
def test_racing_a_05x_committer_on_a_table_created_here(moto_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A table created here (version files) that 0.5.x writers append to while ours do: the
    commit point moves to the state manifest once a version exists only as a state."""
    options = s3_options(moto_server)
    uri = f"s3://{BUCKET}/jvm-race/{uuid.uuid4().hex}"
    make_table(uri, options, partitioned=False)
    our_acks, jvm_acks, errors = _race(uri, options, ours=3, jvms=2, commits=6)
    assert not errors, errors
    _check_race(uri, options, our_acks, jvm_acks, 0, capsys)


@pytest.mark.s3
@requires_compat  # the 0.5.x committer writes the JVM schema read from the fixture files
def test_racing_a_05x_committer_on_a_05x_table(moto_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A real 0.5.4 table on S3: both sides commit by the state manifest's put-if-absent."""
    options = s3_options(moto_server)
    uri = f"s3://{BUCKET}/jvm-race/{uuid.uuid4().hex}"
    _upload(COMPAT_ROOT / "07_two_writes_no_checkpoint", uri, options)
    first = executor_lib.open_log(uri, **options).snapshot().version
    our_acks, jvm_acks, errors = _race(uri, options, ours=2, jvms=2, commits=6)
    assert not errors, errors
    _check_race(uri, options, our_acks, jvm_acks, first, capsys)
    store = open_store(uri, **options)
    assert not any(store.exists(f"{LOG}/{v:020d}.json") for v in range(first + 1, first + 25)), (
        "on a 0.5.x table this project commits as 0.5.x does: no version files"
    )


class _JvmStealsTheStateAfterOurVersionFile(LocalStore):
    """A real local store on which a 0.5.x writer commits version N (its state manifest) right after
    this project's writer put ``N.json`` and before it writes the state: both "won" version N."""

    def __init__(self, root: Path, version: int) -> None:
        super().__init__(root)
        self.uri, self.key, self.fired = str(root), f"{LOG}/{version:020d}.json", False
        self.jvm_path = f"part-jvm-{uuid.uuid4()}.split"

    def put_if_absent(self, key: str, data: bytes, metadata: dict[str, str] | None = None) -> None:
        super().put_if_absent(key, data, metadata)
        if key == self.key and not self.fired:
            self.fired = True
            Jvm05Committer(self.uri, {}).commit([self.jvm_path])


def test_a_version_file_beside_a_05x_state_of_the_same_version_is_withdrawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "t")
    make_table(uri, {}, partitioned=False).commit([add(None)])  # version 1 (version file + state)
    store = _JvmStealsTheStateAfterOurVersionFile(Path(uri), 2)
    log = TransactionLog(store, LogConfig())
    mine = add(None)
    assert log.commit([mine]) == 3, "version 2 went to the 0.5.x writer; this commit retried at 3"
    assert store.fired and log.commit_stats["lost_races"] == 1
    assert not store.exists(f"{LOG}/{2:020d}.json"), "the ghost version file was withdrawn"
    assert not store.exists(f"{LOG}/{3:020d}.json"), "version 2 is state-only: 3 is committed as 0.5.x does"
    jvm = jvm_read(uri)
    assert jvm.version == 3 and {store.jvm_path, mine.path} <= set(jvm.files)
    assert_jvm_sees_what_describe_says(uri, capsys, {})
