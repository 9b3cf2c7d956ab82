"""One table, two writers (issue 68 item 4): IndexTables4Spark 0.5.3 (the JVM peer's process) and processes
of this project (a Spark 4.3 session's ``df.write`` and SQL commands, and a writer process of its own,
``two_writers_child.py``) append, MERGE SPLITS and CHECKPOINT one table on the local filesystem at the same
time, released together. Then: every commit either side acknowledged is in the table, no row is there
twice, both implementations read the same final table, and a conflict on either side is an error, never a
silent overwrite.

The table is partitioned by ``side`` ('jvm' or 'ours'), and each side merges only its own partition, while
the other side appends and checkpoints beside it: 0.5.3 commits a merge without checking that the splits it
removes are still live (``sql/MergeSplitsCommand.scala`` -> ``transaction/TransactionLog.scala``
``writeActionsWithRetry`` retries with the same actions), so two merges of the same splits would make its
merge add rows ours already merged (a known difference of 0.5.3's, PROTOCOL.md §18).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import connect_plugin
import executor_lib
from executor_lib.log.state.avro_state import read_state_manifest
from executor_lib.protocol.actions import removes_of
from executor_lib.spark.commands.merge import merge_group
from executor_lib.spark.common import node_split_cache
from harness import child, jvm_peer
from indextables_contract.errors import CommitConflictError
from tests.jvm import two_writers_child as kid
from tests.jvm.conftest import PeerPool, record

pytestmark = pytest.mark.jvm

REPO = Path(__file__).resolve().parents[2]
ROWS = 40  # rows per batch
RACE_S = 25.0  # no writer starts a batch later than this after the start, past its first MIN_BATCHES
MIN_BATCHES = 5  # the JVM and the Spark session: their merge and checkpoint come among these
JVM_BATCHES = 12  # at most; the first creates the table, before the start
SPARK_BATCHES = 8  # at most; the first, before the start, warms the session's write path
PROC_BATCHES = 15
PROCS = ("proc1", "proc2")
FIRST_ID = {"jvm": 0, "spark": 1_000_000, "proc1": 2_000_000, "proc2": 3_000_000}
DDL = "id long, writer string, batch int, msg string, side string"
OUR_OPTIONS = {"spark.indextables.indexing.typemap.msg": "text"}
JVM_OPTIONS = {"spark.indextables.indexing.typemap.msg": "text"}
DEADLINE_S = 150
# 0.5.3's log line for a lost race (transaction/TransactionLog.scala writeActionsWithRetry)
JVM_LOST_RACE = "Concurrent write conflict at version"


def jvm_rows(batch: int) -> pa.Table:
    rows = kid.batch_rows("jvm", FIRST_ID["jvm"], batch, ROWS)
    return rows.append_column("side", pa.array(["jvm"] * ROWS))


def ids_of(writer: str, batch: int) -> set[int]:
    start = FIRST_ID[writer] + batch * ROWS
    return set(range(start, start + ROWS))


class Side:
    """What one writer did: the batches it reported committed, the commands that returned, the errors."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.acked: list[int] = []
        self.commands: list[str] = []
        self.errors: list[str] = []
        self.failed_batches: list[int] = []

    def run(self, what: str, job: Any, batch: int | None = None) -> None:
        try:
            job()
        except Exception as e:  # an error is reported, counted, and never taken for a commit
            self.errors.append(f"{self.name} {what}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
            if batch is not None:
                self.failed_batches.append(batch)
            return
        if batch is not None:
            self.acked.append(batch)
        else:
            self.commands.append(what)


def is_conflict(error: str) -> bool:
    """A lost race reported as such: ours CommitConflictError / CommitFailedError, 0.5.3's
    TransactionConflictException (``transaction/TransactionLog.scala``)."""
    return any(k in error for k in ("CommitConflictError", "CommitFailedError", "TransactionConflictException"))


def start_writer_process(path: str, writer: str) -> subprocess.Popen[str]:
    """One of this project's writer processes (``two_writers_child``), ready and waiting for the start."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.jvm.two_writers_child", path, writer, str(FIRST_ID[writer]),
         str(PROC_BATCHES), str(ROWS), "--seconds", str(RACE_S), "--checkpoint-after", "4"],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    ready = proc.stdout.readline().strip()
    assert ready == "ready", f"writer process {writer} did not start: {ready!r}"
    return proc


def collect(proc: subprocess.Popen[str], side: Side, timeout: float) -> dict[str, int]:
    """What a writer process reported (into ``side``), once it has ended; its commit counts."""
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"writer process {side.name} failed"
    stats: dict[str, int] = {}
    for line in out.splitlines():
        message = json.loads(line)
        if "version" in message:
            side.acked.append(message["batch"])
        elif "error" in message:
            side.errors.append(f"{side.name} append {message['batch']}: {message['error']}")
            side.failed_batches.append(message["batch"])
        elif "checkpoint" in message:
            side.commands.append("CHECKPOINT")
        elif "checkpoint_error" in message:
            side.errors.append(f"{side.name} checkpoint: {message['checkpoint_error']}")
        else:
            stats = message["stats"]
    return stats


def log_layout(path: str) -> str:
    """What a lost commit needs to be traced: the versions without a version file, and the states
    another implementation wrote (version, entries, newest entry's version)."""
    log_dir = Path(path) / "_transaction_log"
    names = {p.name for p in log_dir.iterdir()}
    versions = {int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit() and len(n) == 25}
    states = sorted(int(n[7:]) for n in names if n.startswith("state-v"))
    foreign = []
    for v in states:
        manifest = read_state_manifest(executor_lib.open_log(path).store, v)
        if manifest is not None and not manifest.written_here:
            newest = max((m.max_added_at_version for m in manifest.manifests), default=-1)
            foreign.append((v, manifest.num_files, newest))
    no_file = [v for v in states if v not in versions]
    return (
        f"versions without a version file {no_file}; other implementation's states (version, files, newest) {foreign}"
    )


def closed_checkpoints(path: str) -> list[int]:
    """The versions a writer here committed only to close a checkpoint 0.5.3 wrote past the log (no
    commit of anyone's); each must be a state of 0.5.3's, not one of ours."""
    log = executor_lib.open_log(path)
    closed = []
    for v in range(1, log.latest_version() + 1):
        info = log.commit_info(v)
        if info is not None and info.operation == "CHECKPOINT" and "closes" in (info.operation_parameters or {}):
            manifest = read_state_manifest(log.store, v)
            assert manifest is not None and not manifest.written_here, f"version {v} closes no state of 0.5.3's"
            closed.append(v)
    return closed


def version_summary(path: str) -> str:
    """Each version's operation, engine and counts of adds and removes: what an extra version needs to be
    traced (a commit that landed twice, a command that wrote a version of its own)."""
    log = executor_lib.open_log(path)
    lines = []
    for v in range(log.latest_version() + 1):
        actions = log.version_actions(v)
        info = log.commit_info(v, actions)
        kinds = Counter(type(a).__name__ for a in actions)
        adds = sorted(getattr(a, "path", "") for a in actions if type(a).__name__ == "AddAction")
        lines.append(
            f"  v{v}: {getattr(info, 'operation', None)} {getattr(info, 'engine', None) or ''} "
            f"{dict(kinds)} first add {adds[:1]}"
        )
    return "\n".join(lines)


@pytest.mark.parametrize("version", jvm_peer.VERSIONS)
def test_one_table_two_writers(
    jvm_peers: PeerPool, tmp_path: Path, request: pytest.FixtureRequest, version: str
) -> None:
    """0.5.3 appends, merges its partition and checkpoints; a Spark 4.3 session of ours appends, merges
    our partition and checkpoints; two writer processes of ours append (one checkpoints): all at once."""
    started = time.monotonic()
    peer = jvm_peers.get(version)
    spark = request.getfixturevalue("classic_spark")  # after the peer: no Spark 4.3 session for a skip
    path = str(tmp_path / "t")
    jvm, ours_spark = Side("jvm"), Side("spark")
    procs = {w: Side(w) for w in PROCS}
    peer_log = peer.work_dir / f"peer-{version}.log"
    log_offset = peer_log.stat().st_size if peer_log.exists() else 0

    # 0.5.3 creates the table (partitioned by side) with its first batch, acknowledged before the start.
    def jvm_append(k: int) -> None:
        peer.write(jvm_rows(k), path, mode="append", options=JVM_OPTIONS, partition_by=["side"], schema=DDL)

    jvm.run("create", lambda: jvm_append(0), batch=0)
    assert jvm.acked == [0], jvm.errors

    def spark_append(k: int) -> None:
        rows = kid.batch_rows("spark", FIRST_ID["spark"], k, ROWS).append_column("side", pa.array(["ours"] * ROWS))
        writer = spark.createDataFrame(rows.to_pylist(), DDL).write.format("indextables").mode("append")
        for key, value in OUR_OPTIONS.items():
            writer = writer.option(key, value)
        writer.option("partitionBy", "side").save(path)

    ours_spark.run("first append", lambda: spark_append(0), batch=0)
    assert ours_spark.acked == [0], ours_spark.errors
    barrier = threading.Barrier(3)

    def jvm_writer() -> None:
        barrier.wait()
        end = time.monotonic() + RACE_S
        for k in range(1, JVM_BATCHES):
            if k > MIN_BATCHES and time.monotonic() > end:
                break
            jvm.run(f"append {k}", lambda k=k: jvm_append(k), batch=k)
            if k == 3:
                jvm.run("MERGE SPLITS", lambda: peer.sql(f"MERGE SPLITS '{path}' WHERE side = 'jvm'"))
            if k == 5:
                jvm.run("CHECKPOINT", lambda: peer.sql(f"CHECKPOINT INDEXTABLES '{path}'"))

    def spark_writer() -> None:
        barrier.wait()
        end = time.monotonic() + RACE_S
        for k in range(1, SPARK_BATCHES):
            if k > MIN_BATCHES and time.monotonic() > end:
                break
            ours_spark.run(f"append {k}", lambda k=k: spark_append(k), batch=k)
            if k == 2:
                sql = f"MERGE SPLITS '{path}' WHERE side = 'ours'"
                ours_spark.run("MERGE SPLITS", lambda sql=sql: connect_plugin.sql(spark, sql).collect())
            if k == 4:
                sql = f"CHECKPOINT INDEXTABLES '{path}'"
                ours_spark.run("CHECKPOINT", lambda sql=sql: connect_plugin.sql(spark, sql).collect())

    running: dict[str, subprocess.Popen[str]] = {}
    try:
        for w in PROCS:
            running[w] = start_writer_process(path, w)
        threads = [threading.Thread(target=f, daemon=True) for f in (jvm_writer, spark_writer)]
        for t in threads:
            t.start()
        barrier.wait()  # the JVM's thread, the Spark session's thread and this one: then the processes
        for proc in running.values():
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        race_started = time.monotonic()
        stats = {w: collect(proc, procs[w], DEADLINE_S) for w, proc in running.items()}
        for t in threads:
            t.join(timeout=max(1.0, DEADLINE_S - (time.monotonic() - started)))
        assert not any(t.is_alive() for t in threads), f"the writers did not finish in {DEADLINE_S} s"
        race_s = time.monotonic() - race_started
    finally:
        for proc in running.values():
            child.stop(proc, 10)

    sides = {"jvm": jvm, "spark": ours_spark, **procs}
    errors = [e for s in sides.values() for e in s.errors]
    conflicts = [e for e in errors if is_conflict(e)]
    assert errors == conflicts, "an error that is not a reported conflict:\n" + "\n".join(errors)
    with open(peer_log, errors="replace") as f:
        f.seek(log_offset)
        jvm_lost_races = f.read().count(JVM_LOST_RACE)
    our_lost_races = sum(s.get("lost_races", 0) for s in stats.values())

    # The final table, read by each implementation through its own reader.
    ours_ids = [int(r["id"]) for r in spark.read.format("indextables").load(path).select("id").collect()]
    jvm_ids = [int(i) for i in peer.read(path, select=["id"]).column("id").to_pylist()]
    acked = {(w, b) for w, s in sides.items() for b in s.acked}
    expected: set[int] = set().union(*(ids_of(w, b) for w, b in acked))
    refused: set[int] = set().union(set(), *(ids_of(w, b) for w, s in sides.items() for b in s.failed_batches))
    lost = len(expected - set(ours_ids)) + len(expected - set(jvm_ids))
    duplicated = sum(n - 1 for n in Counter(ours_ids).values() if n > 1) + sum(
        n - 1 for n in Counter(jvm_ids).values() if n > 1
    )
    snap = executor_lib.open_log(path).snapshot()
    jvm_commits = len(jvm.acked) + jvm.commands.count("MERGE SPLITS")
    our_commits = sum(len(s.acked) for s in sides.values() if s is not jvm) + ours_spark.commands.count("MERGE SPLITS")
    print(
        f"two writers: jvm commits={jvm_commits} ours={our_commits} conflicts={len(conflicts)} "
        f"lost={lost} duplicated={duplicated}"
    )
    print(
        f"  {race_s:.1f} s of concurrent writing (lost races retried: jvm {jvm_lost_races}, our processes "
        f"{our_lost_races}); final version {snap.version}, {len(snap.files)} splits, {len(ours_ids)} rows read "
        f"here, {len(jvm_ids)} by IndexTables4Spark {version}; "
        + ", ".join(f"{s.name} {len(s.acked)} appends {s.commands}" for s in sides.values())
    )
    for error in errors:
        print(f"  conflict: {error}")
    record(request, tables=1, queries=2, differences=[])

    assert lost == 0, (
        f"acknowledged commits lost: ours miss {sorted(expected - set(ours_ids))[:10]}, "
        f"the JVM misses {sorted(expected - set(jvm_ids))[:10]}; {log_layout(path)}"
    )
    assert duplicated == 0, "rows read twice"
    assert sorted(ours_ids) == sorted(jvm_ids), "both implementations read the same final table"
    assert set(ours_ids) == expected, f"rows of batches no writer acknowledged: {sorted(set(ours_ids) - expected)[:10]}"
    assert not (refused & set(ours_ids)), "a batch reported failed is in the table"
    # one version per acknowledged commit, none skipped, none claimed twice (version 0 created the table),
    # and one for each checkpoint 0.5.3 wrote past the log (a state at a version no version file had) that a
    # writer here closed with a version file that changes nothing (PROTOCOL.md §6 "A state ahead of the log")
    closed = closed_checkpoints(path)
    assert snap.version == jvm_commits + our_commits + len(closed), (
        f"version {snap.version} after {jvm_commits + our_commits} commits and {len(closed)} closed checkpoints "
        f"{closed}:\n{version_summary(path)}"
    )
    assert sum(f.num_records or 0 for f in snap.files) == len(expected)


# 0.5.3's merge commit: removes and the merged split, retried with the same actions, never checked against
# what committed meanwhile (PROTOCOL.md §18)
BLIND_MERGE = (
    "IndexTables4Spark 0.5.3 commits MERGE SPLITS without checking that the splits it removes are still live: "
    "sql/MergeSplitsCommand.scala:1154 -> transaction/TransactionLog.scala:809 writeActionsWithRetry (same "
    "actions on every retry), so after a merge of the same splits by another writer its merged split's rows "
    "are in the table twice"
)


def _entries(directory: Path) -> set[str]:
    return {str(Path(d) / n) for d, dirs, files in os.walk(directory) for n in (*dirs, *files)}


@pytest.mark.xfail(strict=True, reason=BLIND_MERGE)
@pytest.mark.parametrize("version", jvm_peer.VERSIONS)
def test_two_merges_of_the_same_splits(
    jvm_peers: PeerPool, tmp_path: Path, request: pytest.FixtureRequest, version: str
) -> None:
    """Ours merges the JVM's splits and commits while 0.5.3's MERGE SPLITS of the same splits is under way
    (its merge has begun: its merge directory has new entries), so ours commits first: 0.5.3's commit then
    adds rows that are already in our merged split. The other order is safe on our side: ours would raise
    CommitConflictError (``test_one_table_two_writers`` keeps each side's merges to its own partition)."""
    peer = jvm_peers.get(version)
    path = str(tmp_path / "t")
    for k in range(5):  # big enough that 0.5.3's merge takes a second or two
        peer.write(kid.batch_rows("jvm", 0, k, 20_000), path, mode="append", options=JVM_OPTIONS)
    log = executor_lib.open_log(path)
    snap = log.snapshot()
    sources = list(snap.files)
    merged = merge_group(log.store, snap, sources, None, 0, node_split_cache({}))  # uploaded, not committed
    merge_dir = peer.work_dir / "it-merge"
    before = _entries(merge_dir)
    outcome: list[BaseException | None] = []

    def jvm_merge() -> None:
        try:
            peer.sql(f"MERGE SPLITS '{path}'")
            outcome.append(None)
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=jvm_merge, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not (_entries(merge_dir) - before) and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    try:
        ours = log.commit(
            [*removes_of(sources, data_change=False), *merged], read_version=snap.version, operation="MERGE SPLITS"
        )
    except CommitConflictError:
        thread.join(120)
        pytest.skip("0.5.3's merge committed first this time (ours raised CommitConflictError, as it must)")
    thread.join(120)
    final = executor_lib.open_log(path).snapshot()
    jvm_error = str(outcome[0]).splitlines()[1][:200] if outcome and outcome[0] else None
    print(
        f"two merges: 0.5.3's MERGE SPLITS: {jvm_error or 'returned'}; live splits {[f.num_records for f in final.files]}"
    )
    spark = request.getfixturevalue("classic_spark")
    ours_ids = [int(r["id"]) for r in spark.read.format("indextables").load(path).select("id").collect()]
    jvm_ids = [int(i) for i in peer.read(path, select=["id"]).column("id").to_pylist()]
    print(
        f"two merges: ours at version {ours}, 0.5.3's at {final.version}; rows {len(ours_ids)} here, {len(jvm_ids)} "
        f"by 0.5.3, {5 * 20_000} written"
    )
    assert len(jvm_ids) == len(set(jvm_ids)) == 5 * 20_000, "0.5.3 reads every row once"
    assert len(ours_ids) == len(set(ours_ids)) == 5 * 20_000, "this project reads every row once"
    assert final.version > ours, "0.5.3 committed its merge after ours"
    assert outcome == [None], outcome
