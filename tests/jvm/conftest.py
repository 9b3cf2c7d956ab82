"""The JVM peer for the ``jvm`` tests: IndexTables4Spark itself (0.5.3, from ../shared/jvm; others named by
INDEXTABLES_JVM_VERSIONS), one PySpark 3.5 process per release for the whole run (``harness.jvm_peer``), installed by ``scripts/jvm-peer.sh`` when missing.

A test asks ``jvm_peers.get(version)`` once its own side's answers are computed. The peer skips (one line) only when the install
is impossible: the jar is not in ../shared/jvm and Maven Central does not serve it (``JvmPeerBlocked``); any other failure to install or
start fails the test. Each comparison is recorded and the run ends with a summary line."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import jvm_peer


class PeerPool:
    """Starts each release's peer on first use and stops them all at the end of the run."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.peers: dict[str, jvm_peer.JvmPeer] = {}
        self._checked = False
        self._blocked: str | None = None

    def ensure_installed(self) -> None:
        """Installs the peer once per run (scripts/jvm-peer.sh); skips when no release can be installed
        (a release that cannot, beside one that can, is skipped by ``get`` alone)."""
        if not self._checked and jvm_peer.missing():
            try:
                jvm_peer.install()
            except jvm_peer.JvmPeerBlocked:
                self._blocked = f"JVM peer cannot be installed: {jvm_peer.blocked_reason()}"
        self._checked = True
        if not self.available():
            STATS["blocked"] = self._blocked or "the JVM peer is not installed"
            pytest.skip(STATS["blocked"])

    def available(self) -> tuple[str, ...]:
        """The releases of ``jvm_peer.VERSIONS`` whose jar (and the venv) are installed."""
        return tuple(v for v in jvm_peer.VERSIONS if not jvm_peer.missing([v]))

    def get(self, version: str) -> jvm_peer.JvmPeer:
        self.ensure_installed()
        if version not in self.available():
            pytest.skip(f"IndexTables4Spark {version}: {self._blocked or 'not installed'}")
        peer = self.peers.get(version)
        if peer is None:
            peer = jvm_peer.JvmPeer(version, self.work / version).start()
            self.peers[version] = peer
            STATS["startup_s"][version] = round(peer.startup_s or 0.0, 1)
        return peer

    def stop(self) -> None:
        for peer in self.peers.values():
            peer.stop()


@pytest.fixture(scope="session")
def jvm_peers() -> Iterator[PeerPool]:
    work = Path(tempfile.mkdtemp(prefix="indextables-jvm-peer-"))
    pool = PeerPool(work)
    try:
        yield pool
    finally:
        pool.stop()


# --- the summary: tables and queries compared, differences found (``record`` in each test)

STATS: dict[str, Any] = {"tables": 0, "queries": 0, "differences": [], "startup_s": {}, "blocked": None}


def record(request: pytest.FixtureRequest, tables: int, queries: int, differences: list[str]) -> None:
    request.node.user_properties.append(
        ("jvm_compare", json.dumps({"tables": tables, "queries": queries, "differences": differences}))
    )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for key, value in report.user_properties:
        if key == "jvm_compare":
            item = json.loads(str(value))
            STATS["tables"] += item["tables"]
            STATS["queries"] += item["queries"]
            STATS["differences"].extend(item["differences"])


# --- tantivy4java (tests/jvm/test_tantivy4java.py): splits and queries compared, differences, in this process

T4J_STATS: dict[str, Any] = {
    "splits": 0,
    "queries": 0,
    "differences": [],
    "notes": [],
    "startup_s": None,
    "blocked": None,
}


def record_tantivy4java(
    request: pytest.FixtureRequest | None = None,
    splits: int = 0,
    queries: int = 0,
    differences: list[str] | None = None,
    notes: list[str] | None = None,
    startup_s: float | None = None,
    blocked: str | None = None,
) -> None:
    T4J_STATS["splits"] += splits
    T4J_STATS["queries"] += queries
    T4J_STATS["differences"].extend(differences or [])
    T4J_STATS["notes"].extend(n for n in notes or [] if n not in T4J_STATS["notes"])
    if startup_s is not None:
        T4J_STATS["startup_s"] = round(startup_s, 1)
    if blocked is not None:
        T4J_STATS["blocked"] = blocked


def _tantivy4java_summary(terminalreporter: Any) -> None:
    if not (T4J_STATS["splits"] or T4J_STATS["startup_s"] is not None or T4J_STATS["blocked"]):
        return
    terminalreporter.section("tantivy4java peer")
    if T4J_STATS["blocked"]:
        terminalreporter.write_line(f"tantivy4java: nothing compared: {T4J_STATS['blocked']}")
        return
    known = [r for r in terminalreporter.stats.get("xfailed", []) if "test_tantivy4java" in r.nodeid]
    terminalreporter.write_line(
        f"tantivy4java: {T4J_STATS['splits']} splits and {T4J_STATS['queries']} queries compared, "
        f"{len(T4J_STATS['differences'])} differences found, {len(known)} known ones kept as strict xfails "
        f"(JVM started in {T4J_STATS['startup_s']} s)"
    )
    for difference in T4J_STATS["differences"]:
        terminalreporter.write_line(f"  difference: {difference}")
    for report in known:
        terminalreporter.write_line(f"  known: {report.nodeid.split('::')[-1]}")
    for note in T4J_STATS["notes"]:
        terminalreporter.write_line(f"  note: {note}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    _tantivy4java_summary(terminalreporter)
    if not (STATS["tables"] or STATS["startup_s"] or STATS["blocked"]):
        return
    terminalreporter.section("JVM peer (IndexTables4Spark)")
    if STATS["blocked"]:
        terminalreporter.write_line(f"jvm: nothing compared: {STATS['blocked']}")
        return
    starts = ", ".join(f"{v} started in {s} s" for v, s in sorted(STATS["startup_s"].items()))
    known = [
        r
        for r in terminalreporter.stats.get("xfailed", [])
        if r.nodeid.startswith("tests/jvm/") and "test_tantivy4java" not in r.nodeid
    ]
    terminalreporter.write_line(
        f"jvm: {STATS['tables']} tables and {STATS['queries']} queries compared, "
        f"{len(STATS['differences'])} differences found, {len(known)} known JVM-side differences kept as "
        "strict xfails" + (f" ({starts})" if starts else "")
    )
    for difference in STATS["differences"]:
        terminalreporter.write_line(f"  difference: {difference}")
    for report in known:
        terminalreporter.write_line(f"  known: {report.nodeid.split('::')[-1]}")
