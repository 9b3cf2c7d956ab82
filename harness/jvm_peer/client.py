"""Drive IndexTables4Spark (the JVM implementation) from this project's Python: ``JvmPeer``.

One ``JvmPeer`` is one long-lived process (``runner.py``, in the peer's own PySpark 3.5 virtualenv)
holding one Spark session with one release's shaded jar. It takes jobs one at a time: write rows,
run SQL, read a table; results come back as ``pyarrow.Table``. ``scripts/jvm-peer.sh`` installs the
jars and the virtualenv into ``~/.cache/indextables/jvm`` (``INDEXTABLES_JVM_HOME``); ``install()``
runs it and tells an install that cannot be done (Maven Central does not serve a jar:
``JvmPeerBlocked``) from one that failed.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness import child
from harness.jsonl_peer import JsonLines

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
INSTALL_SCRIPT = REPO_ROOT / "scripts" / "jvm-peer.sh"
RUNNER = Path(__file__).resolve().parent / "runner.py"
# The releases the jvm tests run against: 0.5.3, whose jar scripts/jvm-peer.sh takes from ../shared/jvm/
# beside the checkout (checked against its SHA256SUMS; Maven Central serves no IndexTables4Spark jar, and
# 0.5.4/0.5.5 cannot be built on these machines). INDEXTABLES_JVM_VERSIONS (e.g. "0.5.3 0.5.4"; spaces or
# commas) names others instead: their jars are fetched from Maven Central, or looked for at
# jar_path(version), where a jar Maven Central does not serve can be put by hand (scripts/jvm-peer.sh reads
# the same variable). KNOWN_RELEASES are the others this module knows the format name and settings of.
RELEASES = ("0.5.3",)
KNOWN_RELEASES = ("0.5.3", "0.5.4", "0.5.5")
VERSIONS_ENV = "INDEXTABLES_JVM_VERSIONS"


def versions() -> tuple[str, ...]:
    """The releases to run: ``INDEXTABLES_JVM_VERSIONS`` when set, else ``RELEASES``."""
    named = os.environ.get(VERSIONS_ENV, "").replace(",", " ").split()
    return tuple(dict.fromkeys(named)) or RELEASES


VERSIONS = versions()
# The settings a release needs beside the runner's own (runner.session_conf). 0.5.3 needs
# spark.indextables.read.defaultLimit=1000000: it passes the limit to tantivy4java 0.31.0's search, which
# allocates limit x 40 bytes up front (80 GB for the runner's 2147483647: "memory allocation of
# 85899345880 bytes failed", the JVM aborts); 0.5.4 streams a read whose limit is Int.MaxValue instead
# (core/CompanionColumnarPartitionReader.scala). A million rows per split is far above any jvm test table.
RELEASE_CONF: dict[str, dict[str, str]] = {"0.5.3": {"spark.indextables.read.defaultLimit": "1000000"}}
# INDEXTABLES_JVM_CONF: "key=value" pairs (whitespace between them) every peer's session starts with,
# over RELEASE_CONF and under the ``conf`` a JvmPeer is given.
CONF_ENV = "INDEXTABLES_JVM_CONF"


def env_conf() -> dict[str, str]:
    """The settings ``INDEXTABLES_JVM_CONF`` names (empty when unset)."""
    pairs = os.environ.get(CONF_ENV, "").split()
    bad = [p for p in pairs if "=" not in p.strip("=")]
    if bad:
        raise ValueError(f"{CONF_ENV}: expected key=value pairs, got {' '.join(bad)!r}")
    return dict(p.split("=", 1) for p in pairs)


SPARK_BUILD = "3.5.3"
# The format name each release answers to: the short name "indextables" is registered from 0.5.5 on
# (its META-INF/services/org.apache.spark.sql.sources.DataSourceRegister; the 0.5.3 and 0.5.4 jars have no
# such file). The provider class works in all three, and is what any other release named by
# INDEXTABLES_JVM_VERSIONS uses.
PROVIDER_CLASS = "io.indextables.provider.IndexTablesProvider"
FORMATS = {"0.5.3": PROVIDER_CLASS, "0.5.4": PROVIDER_CLASS, "0.5.5": "indextables"}
BLOCKED_EXIT = 3


class JvmPeerError(RuntimeError):
    """The peer failed: it did not start, or a job failed (the message names which and why)."""


class JvmPeerNotInstalled(JvmPeerError):
    """The peer is not installed (``bash scripts/jvm-peer.sh`` installs it)."""


class JvmPeerBlocked(JvmPeerNotInstalled):
    """The peer cannot be installed here: Maven Central does not serve a jar (the command and error are
    in the message, and in ``$INDEXTABLES_JVM_HOME/BLOCKED``)."""


def peer_home() -> Path:
    return Path(os.environ.get("INDEXTABLES_JVM_HOME") or Path.home() / ".cache" / "indextables" / "jvm")


def jar_path(version: str) -> Path:
    return peer_home() / "jars" / f"indextables_spark-{version}_spark_{SPARK_BUILD}-linux-x86_64-shaded.jar"


def venv_python() -> Path:
    return peer_home() / "venv" / "bin" / "python"


def missing(versions: Iterable[str] = VERSIONS) -> list[str]:
    """What of the install is not there (empty: installed)."""
    paths = [venv_python(), *(jar_path(v) for v in versions)]
    return [str(p) for p in paths if not p.exists()]


def install(timeout: float = 1800) -> None:
    """Run ``scripts/jvm-peer.sh`` (a quick no-op when installed). Raises ``JvmPeerBlocked`` when Maven
    Central does not serve a jar, ``JvmPeerError`` on any other failure."""
    proc = subprocess.run(["bash", str(INSTALL_SCRIPT)], capture_output=True, text=True, timeout=timeout)
    if proc.returncode == 0:
        return
    note = peer_home() / "BLOCKED"
    if proc.returncode == BLOCKED_EXIT:
        text = note.read_text() if note.exists() else proc.stderr
        raise JvmPeerBlocked(text.strip())
    raise JvmPeerError(f"scripts/jvm-peer.sh failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")


def blocked_reason() -> str:
    """One line saying why the peer cannot be installed (from the install's BLOCKED note)."""
    note = peer_home() / "BLOCKED"
    lines = note.read_text().splitlines() if note.exists() else []
    return lines[0] if lines else "the JVM peer is not installed"


class JvmPeer:
    """One PySpark 3.5 session with IndexTables4Spark ``version`` in a process of its own.

    ``version=None`` starts the same runner without any jar: plain PySpark 3.5, for testing the runner
    itself (never a stand-in for the JVM: it has no IndexTables format at all).
    """

    def __init__(
        self,
        version: str | None,
        work_dir: str | os.PathLike[str],
        conf: Mapping[str, str] | None = None,
        startup_timeout: float = 300,
        job_timeout: float = 600,
    ) -> None:
        known = tuple(dict.fromkeys(RELEASES + KNOWN_RELEASES + versions()))
        if version is not None and version not in known:
            raise ValueError(
                f"unknown IndexTables4Spark version {version!r} (known: {', '.join(known)}; "
                f"{VERSIONS_ENV} names others)"
            )
        self.version = version
        self.work_dir = Path(work_dir)
        self.conf = {**RELEASE_CONF.get(version or "", {}), **env_conf(), **(conf or {})}
        self.startup_timeout = startup_timeout
        self.job_timeout = job_timeout
        self.spark_version: str | None = None
        self.startup_s: float | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._channel: JsonLines | None = None
        self._log_path = self.work_dir / f"peer-{version or 'bare'}.log"

    @property
    def format(self) -> str:
        """The name this release's ``spark.read.format`` / ``df.write.format`` take."""
        if self.version is None:
            raise JvmPeerError("a peer without a jar has no IndexTables format")
        return FORMATS.get(self.version, PROVIDER_CLASS)

    def __enter__(self) -> JvmPeer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> JvmPeer:
        if self._proc is not None:
            return self
        jar: Path | None = None
        if self.version is not None:
            jar = jar_path(self.version)
        gone = missing([self.version] if self.version else [])
        if gone:
            raise JvmPeerNotInstalled(
                f"the JVM peer is not installed: {', '.join(gone)} missing (bash scripts/jvm-peer.sh installs it)"
            )
        self.work_dir.mkdir(parents=True, exist_ok=True)
        cmd = [str(venv_python()), str(RUNNER), "--work", str(self.work_dir)]
        if jar is not None:
            cmd += ["--jar", str(jar)]
        for key, value in self.conf.items():
            cmd += ["--conf", f"{key}={value}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_", "PYTHON"))}
        env["PYTHONUNBUFFERED"] = "1"
        started = time.monotonic()
        log = open(self._log_path, "ab")  # noqa: SIM115 (the child keeps it; closed by the OS at its exit)
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env
            )
        finally:
            log.close()
        self._channel = JsonLines(
            self._proc,
            error=JvmPeerError,
            no_answer=lambda what, t: f"{self._name()}: no answer to {what} in {t:.0f} s\n{self._log_tail()}",
            exited=lambda what: f"{self._name()} exited during {what}\n{self._log_tail()}",
            name=f"jvm-peer-{self.version}",
        )
        try:
            ready = self._channel.receive(self.startup_timeout, "start")
        except JvmPeerError:
            self.stop()
            raise
        if not ready.get("ok"):
            self.stop()
            raise JvmPeerError(f"{self._name()} did not start: {ready.get('error')}\n{self._log_tail()}")
        self.spark_version = ready.get("spark")
        self.startup_s = time.monotonic() - started
        return self

    def stop(self) -> None:
        proc, self._proc, channel, self._channel = self._proc, None, self._channel, None
        if proc is None:
            return
        if proc.poll() is None and channel is not None:
            try:
                channel.send({"op": "stop"})
                proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                pass
        child.stop(proc, 10)

    # --- jobs

    def write(
        self,
        rows: pa.Table,
        path: str,
        *,
        mode: str = "append",
        options: Mapping[str, str] | None = None,
        partition_by: Iterable[str] = (),
        schema: str | None = None,
        format: str | None = None,
        repartition: int | None = None,
    ) -> None:
        """Write ``rows`` to the table at ``path`` with the peer's ``df.write`` (``schema``: a Spark DDL
        string to read the rows with, e.g. for types Parquet cannot tell apart)."""
        staging = self.work_dir / "inputs" / f"{uuid.uuid4().hex}.parquet"
        staging.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows, staging)
        try:
            self._job(
                {
                    "op": "write",
                    "input": str(staging),
                    "schema": schema,
                    "path": path,
                    "format": format or self.format,
                    "mode": mode,
                    "options": dict(options or {}),
                    "partition_by": list(partition_by),
                    "repartition": repartition,
                }
            )
        finally:
            staging.unlink(missing_ok=True)

    def ingest(
        self,
        parquet: str,
        path: str,
        *,
        partitions: int = 2,
        repeat: int = 1,
        options: Mapping[str, str] | None = None,
        format: str | None = None,
    ) -> tuple[int, float]:
        """(rows, seconds): the best of ``repeat`` overwrites of the table at ``path`` by the peer's
        ``df.write`` of the Parquet ``parquet``'s rows, cached in ``partitions`` partitions first (the
        ingest benchmark's JVM rate). Example: ``rows, s = peer.ingest("/d/rows.parquet", "/t/jvm")``."""
        job = {
            "op": "ingest",
            "input": parquet,
            "path": path,
            "format": format or self.format,
            "partitions": partitions,
            "repeat": repeat,
            "options": dict(options or {}),
        }
        answer = self._job(job)
        return int(answer["rows"]), float(answer["seconds"])

    def sql(self, text: str) -> pa.Table:
        return self._table(self._job({"op": "sql", "sql": text}))

    def read(
        self,
        path: str,
        *,
        filter: str | None = None,
        select: Iterable[str] | None = None,
        options: Mapping[str, str] | None = None,
        format: str | None = None,
    ) -> pa.Table:
        job = {
            "op": "read",
            "path": path,
            "format": format or self.format,
            "options": dict(options or {}),
            "filter": filter,
            "select": list(select) if select is not None else None,
        }
        return self._table(self._job(job))

    def view(
        self, path: str, name: str, *, options: Mapping[str, str] | None = None, format: str | None = None
    ) -> None:
        """Name the table at ``path`` as the temporary view ``name`` for ``sql``."""
        job = {
            "op": "view",
            "path": path,
            "name": name,
            "format": format or self.format,
            "options": dict(options or {}),
        }
        self._job(job)

    def set_conf(self, settings: Mapping[str, str]) -> None:
        self._job({"op": "conf", "set": dict(settings)})

    # --- plumbing

    def _name(self) -> str:
        return f"IndexTables4Spark {self.version}" if self.version else "the bare PySpark 3.5 runner"

    def _job(self, job: dict[str, Any]) -> dict[str, Any]:
        if self._proc is None or self._channel is None:
            raise JvmPeerError(f"{self._name()} is not running (start() it first)")
        answer = self._channel.ask(job, self.job_timeout)
        if not answer.get("ok"):
            error = "\n".join(str(answer.get("error")).splitlines()[:20])
            raise JvmPeerError(f"{self._name()}: {job['op']} failed: {error}")
        return answer

    @staticmethod
    def _table(answer: dict[str, Any]) -> pa.Table:
        path = Path(answer["arrow"])
        with pa.memory_map(str(path)) as source:
            table = pa.ipc.open_file(source).read_all()
        path.unlink(missing_ok=True)
        return table

    def _log_tail(self, lines: int = 30) -> str:
        try:
            text = self._log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return f"last lines of {self._log_path}:\n" + "\n".join(text[-lines:])
