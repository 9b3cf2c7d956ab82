"""tantivy4java (IndexTables4Spark's search engine: the real native library in its Maven Central jar) beside
this project. ``Tantivy4JavaPeer`` runs this project's own small Java program (``Peer.java``, compiled with
``javac`` against the fetched jars into the cache) in one JVM and sends it JSON jobs: search or count a split
by its footer offsets and doc mapping, or write documents into a new split with tantivy4java.
``scripts/tantivy4java.sh`` fetches the jars into ``~/.cache/indextables/jvm/tantivy4java``."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from harness.jsonl_peer import JsonLines

VERSION = os.environ.get("TANTIVY4JAVA_VERSION", "0.31.0")
JACKSON = "2.15.2"
SOURCE = Path(__file__).with_name("Peer.java")
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "tantivy4java.sh"
_BYTES_TEXT = re.compile(r"Bytes\(\[([0-9, ]*)\]\)")


class Tantivy4JavaError(RuntimeError):
    """The peer could not be installed, compiled or started, or it stopped answering."""


class Tantivy4JavaBlocked(Tantivy4JavaError):
    """Maven Central does not serve a jar the peer needs (``blocked_reason()`` names command and error)."""


class Tantivy4JavaJobError(Tantivy4JavaError):
    """tantivy4java refused one job (the peer goes on): ``error`` is its exception class and message."""

    def __init__(self, op: str, error: str) -> None:
        super().__init__(f"tantivy4java {op}: {error}")
        self.op = op
        self.error = error


def home() -> Path:
    return Path(os.environ.get("INDEXTABLES_JVM_HOME", Path.home() / ".cache/indextables/jvm")) / "tantivy4java"


def jars() -> list[Path]:
    names = [f"tantivy4java-{VERSION}.jar"] + [
        f"jackson-{part}-{JACKSON}.jar" for part in ("databind", "core", "annotations")
    ]
    return [home() / name for name in names]


def missing() -> list[str]:
    return [jar.name for jar in jars() if not (jar.is_file() and jar.stat().st_size > 0)]


def blocked_reason() -> str:
    note = home() / "BLOCKED"
    text = note.read_text().strip() if note.is_file() else "unknown reason"
    return " | ".join(line for line in text.splitlines() if line.strip())


def install(timeout: float = 900) -> None:
    """Fetches the jars (scripts/tantivy4java.sh); Tantivy4JavaBlocked when Maven Central does not serve one."""
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=timeout)
    if done.returncode == 3:
        raise Tantivy4JavaBlocked(blocked_reason())
    if done.returncode != 0 or missing():
        raise Tantivy4JavaError(f"{SCRIPT} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")


def compile_peer() -> Path:
    """The directory of the compiled peer (keyed by its source and jars), compiling it the first time."""
    key = hashlib.sha256(SOURCE.read_bytes() + "|".join(j.name for j in jars()).encode()).hexdigest()[:16]
    classes = home() / "classes" / key
    if (classes / "Peer.class").is_file():
        return classes
    classes.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="peer-", dir=classes.parent))
    cmd = ["javac", "-nowarn", "-d", str(tmp), "-cp", os.pathsep.join(map(str, jars())), str(SOURCE)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise Tantivy4JavaError(f"javac failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    try:
        tmp.rename(classes)
    except OSError:  # another process compiled it first
        shutil.rmtree(tmp, ignore_errors=True)
    return classes


@dataclass(frozen=True)
class SearchAnswer:
    """tantivy4java's answer to one query on one split: its hit count and its hits' stored fields
    (field -> list of values; dates as UTC datetimes, bytes as bytes)."""

    count: int
    docs: list[dict[str, list[Any]]]
    # bytes values tantivy4java returned as Rust debug text ("Bytes([0, 1])") and this client decoded
    bytes_as_text: int = 0


class Tantivy4JavaPeer:
    """One JVM running the peer; jobs are answered in order (one at a time)."""

    def __init__(self, work: Path | None = None, heap: str = "512m") -> None:
        self.work = Path(work or tempfile.mkdtemp(prefix="tantivy4java-peer-"))
        self.heap = heap
        self.startup_s: float | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._channel: JsonLines | None = None
        self._log: IO[str] | None = None

    def __enter__(self) -> Tantivy4JavaPeer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self, timeout: float = 120) -> Tantivy4JavaPeer:
        if self._proc is not None:
            return self
        if missing():
            raise Tantivy4JavaError(f"tantivy4java jars missing in {home()}: {missing()} (run {SCRIPT})")
        began = time.monotonic()
        classes = compile_peer()
        self.work.mkdir(parents=True, exist_ok=True)
        self._log = open(self.work / "peer.log", "w")  # noqa: SIM115 (closed in stop)
        classpath = os.pathsep.join([str(classes), *map(str, jars())])
        self._proc = subprocess.Popen(
            ["java", f"-Xmx{self.heap}", "-cp", classpath, "Peer"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            encoding="utf-8",
            cwd=self.work,
        )
        self._channel = JsonLines(
            self._proc,
            error=Tantivy4JavaError,
            no_answer=lambda what, timeout: f"the peer did not answer {what} within {timeout} s {self._log_tail()}",
            exited=lambda what: f"the peer exited during {what} {self._log_tail()}",
            name="tantivy4java-peer",
        )
        ready = self._channel.receive(timeout, "start")
        if not ready.get("ready"):
            self.stop()
            raise Tantivy4JavaError(f"the peer did not start: {ready} {self._log_tail()}")
        self.startup_s = time.monotonic() - began
        return self

    def stop(self) -> None:
        proc, self._proc, self._channel = self._proc, None, None
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    # --- jobs

    def search(
        self,
        split: str,
        footer_start: int,
        footer_end: int,
        doc_mapping: str | None,
        query: str,
        num_docs: int = 0,
        default_fields: Sequence[str] = (),
        limit: int = 10_000,
        fields: Sequence[str] | None = None,
        storage: Mapping[str, Any] | None = None,
    ) -> SearchAnswer:
        """tantivy4java's SplitSearcher on ``split`` (a path or URL) answering ``query`` (its query syntax)."""
        job = self._split_job("search", split, footer_start, footer_end, doc_mapping, query, num_docs, storage)
        job.update(default_fields=list(default_fields), limit=limit)
        if fields is not None:
            job["fields"] = list(fields)
        answer = self._job(job)
        types = {f["name"]: f["type"] for f in json.loads(doc_mapping)} if doc_mapping else {}
        decoded = 0
        docs = []
        for doc in answer["docs"]:
            out: dict[str, list[Any]] = {}
            for name, values in doc.items():
                out[name] = []
                for value in values:
                    plain, was_text = _decode(value, types.get(name))
                    decoded += was_text
                    out[name].append(plain)
            docs.append(out)
        return SearchAnswer(count=int(answer["count"]), docs=docs, bytes_as_text=decoded)

    def count(
        self,
        split: str,
        footer_start: int,
        footer_end: int,
        doc_mapping: str | None,
        query: str,
        num_docs: int = 0,
        default_fields: Sequence[str] = (),
        storage: Mapping[str, Any] | None = None,
    ) -> int:
        job = self._split_job("count", split, footer_start, footer_end, doc_mapping, query, num_docs, storage)
        job["default_fields"] = list(default_fields)
        return int(self._job(job)["count"])

    def aggregate(
        self,
        split: str,
        footer_start: int,
        footer_end: int,
        doc_mapping: str | None,
        query: str,
        aggregations: Sequence[Mapping[str, Any]],
        num_docs: int = 0,
        storage: Mapping[str, Any] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """tantivy4java's aggregations over the hits of ``query`` (read from the split's fast fields): each of
        ``aggregations`` ({name, kind: stats|terms, field, size}) -> {count, sum, min, max} or
        {buckets: [[key text, doc count], ...]}."""
        job = self._split_job("aggregate", split, footer_start, footer_end, doc_mapping, query, num_docs, storage)
        job["aggregations"] = [dict(a) for a in aggregations]
        answer: dict[str, dict[str, Any]] = self._job(job)["aggregations"]
        return answer

    def write(
        self, split: Path, fields: Iterable[Mapping[str, Any]], docs: Iterable[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Indexes ``docs`` (tantivy JSON documents; dates RFC 3339, bytes base64) with tantivy4java under the
        schema ``fields`` ({name, type: text|string|i64|f64|bool|date|bytes|ip|json, stored, indexed, fast,
        tokenizer}) and converts the index into the split ``split``; its metadata (footer offsets, num_docs,
        doc_mapping_json, ...)."""
        index_dir = Path(tempfile.mkdtemp(prefix="index-", dir=self.work))
        try:
            return self._job(
                {
                    "op": "write",
                    "index_dir": str(index_dir),
                    "split": str(split),
                    "fields": list(fields),
                    "docs": list(docs),
                }
            )
        finally:
            shutil.rmtree(index_dir, ignore_errors=True)

    def merge(self, splits: Sequence[Path | str], split: Path) -> dict[str, Any]:
        """Merges the split files ``splits`` into ``split`` with tantivy4java (``QuickwitSplit.mergeSplits``, what
        IndexTables4Spark's MERGE SPLITS runs); the merged split's metadata, as ``write`` gives it."""
        temp = Path(tempfile.mkdtemp(prefix="merge-", dir=self.work))
        try:
            return self._job(
                {"op": "merge", "splits": [str(s) for s in splits], "split": str(split), "temp_dir": str(temp)}
            )
        finally:
            shutil.rmtree(temp, ignore_errors=True)

    # --- the transport

    @staticmethod
    def _split_job(
        op: str,
        split: str,
        footer_start: int,
        footer_end: int,
        doc_mapping: str | None,
        query: str,
        num_docs: int,
        storage: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        job: dict[str, Any] = {
            "op": op,
            "split": split,
            "footer_start": footer_start,
            "footer_end": footer_end,
            "doc_mapping": doc_mapping,
            "num_docs": num_docs,
            "query": query,
        }
        if storage:
            job["storage"] = dict(storage)
        return job

    def _job(self, job: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
        if self._proc is None or self._channel is None:
            raise Tantivy4JavaError("the peer is not started")
        answer = self._channel.ask(job, timeout)
        if not answer.get("ok"):
            raise Tantivy4JavaJobError(str(job["op"]), str(answer.get("error")))
        return answer

    def _log_tail(self, lines: int = 20) -> str:
        path = self.work / "peer.log"
        if not path.is_file():
            return ""
        tail = path.read_text(errors="replace").splitlines()[-lines:]
        return "(peer log: " + " | ".join(tail) + ")" if tail else ""


def _decode(value: Any, field_type: str | None) -> tuple[Any, int]:
    """A value of the peer's JSON as Python (and 1 when it was bytes given as debug text)."""
    if isinstance(value, dict) and "$bytes" in value:
        return base64.b64decode(value["$bytes"]), 0
    if isinstance(value, dict) and "$date" in value:
        return datetime.datetime.fromisoformat(value["$date"]).replace(tzinfo=datetime.timezone.utc), 0
    if field_type == "bytes" and isinstance(value, str):
        match = _BYTES_TEXT.fullmatch(value)
        if match:
            return bytes(int(b) for b in match.group(1).split(",") if b.strip()), 1
    return value, 0


__all__ = [
    "JACKSON",
    "SCRIPT",
    "VERSION",
    "SearchAnswer",
    "Tantivy4JavaBlocked",
    "Tantivy4JavaError",
    "Tantivy4JavaJobError",
    "Tantivy4JavaPeer",
    "blocked_reason",
    "compile_peer",
    "home",
    "install",
    "jars",
    "missing",
]
