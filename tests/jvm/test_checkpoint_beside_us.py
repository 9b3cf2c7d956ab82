"""IndexTables4Spark 0.5.3's CHECKPOINT on a table of ours, then appends of both, one after another: no
row is lost on either side. Its checkpoint finds the newest version's state taken (every commit here
writes one) and writes the same files at the next version, past the log (``StateWriter
.writeStateWithRetry``); its next append takes that number. Found by ``test_two_writers.py`` in CI (280
acknowledged rows lost, on both sides); ``executor_lib.log.state.foreign_states`` has the rule, and
``tests/log/state/test_foreign_states.py`` the same cases on every store with a 0.5.3 stand-in."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import executor_lib
from executor_lib.log.tables import open_log
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.write.publish import write_and_upload
from harness import jvm_peer
from tests.jvm import two_writers_child as kid
from tests.jvm.conftest import PeerPool, record

pytestmark = pytest.mark.jvm
DDL = "id long, writer string, batch int, msg string, side string"
ROWS = 10
OPTIONS = {"spark.indextables.indexing.typemap.msg": "text"}


@pytest.mark.parametrize("version", jvm_peer.VERSIONS)
def test_appends_of_both_after_the_jvms_checkpoint_of_our_table(
    jvm_peers: PeerPool, tmp_path: Path, request: pytest.FixtureRequest, version: str
) -> None:
    peer = jvm_peers.get(version)
    path = str(tmp_path / "t")
    log_dir = tmp_path / "t" / "_transaction_log"

    def jvm_append(k: int) -> None:
        rows = kid.batch_rows("jvm", 0, k, ROWS).append_column("side", pa.array(["jvm"] * ROWS))
        peer.write(rows, path, mode="append", options=OPTIONS, partition_by=["side"], schema=DDL)

    jvm_append(0)  # versions 0 and 1, by 0.5.3
    log = open_log(path)
    mapping = mapping_for(kid.SCHEMA, kid.OPTIONS)

    def our_append(k: int) -> int:
        add = write_and_upload(log.store, kid.batch_rows("ours", 1000, k, ROWS), mapping, {"side": "ours"})
        return log.commit([add], operation="WRITE", new_files=True)

    assert [our_append(k) for k in range(3)] == [2, 3, 4]
    peer.sql(f"CHECKPOINT INDEXTABLES '{path}'")
    assert (log_dir / "state-v00000000000000000005" / "_manifest.avro").exists(), "0.5.3 wrote its state past the log"
    assert not (log_dir / "00000000000000000005.json").exists()
    expected = 4 * ROWS
    jvm_append(1)  # takes version 5, beside its own checkpoint
    expected += ROWS
    assert rows_read_here(path) == expected, "the state beside version 5's file does not hold it: read past"
    assert our_append(3) == 6
    expected += ROWS
    assert rows_read_here(path) == rows_read_by(peer, path) == expected

    peer.sql(f"CHECKPOINT INDEXTABLES '{path}'")  # past the log again, at 7
    assert our_append(4) == 8, "version 7 closed first, then ours"
    jvm_append(2)
    expected += 2 * ROWS
    assert rows_read_here(path) == rows_read_by(peer, path) == expected
    record(request, tables=1, queries=2, differences=[])


def rows_read_here(path: str) -> int:
    return sum(a.num_records or 0 for a in executor_lib.open_log(path).snapshot().files)


def rows_read_by(peer: jvm_peer.JvmPeer, path: str) -> int:
    return len(peer.read(path, select=["id"]).column("id"))
