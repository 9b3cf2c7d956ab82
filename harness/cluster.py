"""A multi-node Spark cluster on 127.0.0.1, started and stopped by pid: S3 (moto), Azure
(Azurite) or Google Cloud Storage (fake-gcs-server), master, workers, Connect.

``ProcessCluster(run_dir, workers=2).up()`` starts, each as its own OS process:

* an S3 API — the lock-patched moto server (``harness.moto_server``) with the bucket
  ``indextables`` — reachable at ``s3_endpoint``; or, with ``storage="azure"``, Azure Blob Storage
  — Azurite (``harness.azurite``) with the container ``indextables`` — at ``azure_endpoint``, the
  account's connection string given to every node as ``AZURE_STORAGE_CONNECTION_STRING``
  (tables: ``abfss://indextables@devstoreaccount1.dfs.core.windows.net/<path>``); or, with
  ``storage="gcs"``, fake-gcs-server (``harness.fake_gcs``) with the bucket ``indextables`` at
  ``gcs_endpoint``, given to every node as ``STORAGE_EMULATOR_HOST`` (tables: ``gs://indextables/<path>``);
* a Spark standalone master and ``workers`` workers (``spark-daemon.sh``: the PySpark pip
  package has no ``start-master.sh``), each worker with its own split-cache directory
  (``INDEXTABLES_CACHE_DIR``) and local dir standing in for its NVMe disk;
* a Spark Connect server driving that master (``connect_url``).

Every JVM gets ``PYSPARK_PYTHON`` = this interpreter (where ``executor_lib`` is installed) and
the S3 endpoint and test credentials as ``AWS_*`` variables, so clients need neither. Logs, pid
files and ``cluster.json`` (endpoints and pids) live under ``run_dir``; ``down()`` stops only
the processes whose pids it recorded. ``ProcessCluster.attach(run_dir)`` re-opens a running
cluster from ``cluster.json`` (this is how ``python -m harness status|down`` find it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from executor_lib.spark.connect_server import ConnectServer, free_port, port_open
from indextables_contract.errors import ConnectServerError

BUCKET = "indextables"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(RuntimeError):
    """The cluster could not be started, found or stopped; the message names the log to read."""


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped by the process that started it, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class ClusterInfo:
    """What ``cluster.json`` records: endpoints and the pid of every process started."""

    run_dir: str
    workers: int
    s3_endpoint: str = ""
    bucket: str = BUCKET
    storage: str = "s3"  # or "azure": Azurite instead of moto
    azure_endpoint: str = ""  # the blob endpoint of Azurite's development account
    gcs_endpoint: str = ""  # fake-gcs-server's JSON API endpoint (storage "gcs")
    master_url: str = ""
    master_ui: str = ""
    connect_url: str = ""
    pids: dict[str, int] = field(default_factory=dict)
    cache_dirs: list[str] = field(default_factory=list)
    backend: str = "process"
    # docker backend only: node name -> container name, the network and the cache volumes
    containers: dict[str, str] = field(default_factory=dict)
    network: str = ""
    volumes: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, run_dir: str | Path) -> ClusterInfo:
        """What ``run_dir/cluster.json`` records (ClusterError if nothing was started there)."""
        state = Path(run_dir).resolve() / "cluster.json"
        if not state.exists():
            raise ClusterError(f"no cluster.json in {run_dir}: nothing started there")
        return cls(**json.loads(state.read_text()))


def cluster_identity(run_dir: str | Path, storage: str) -> tuple[Path, str]:
    """A cluster's run directory (resolved) and the name its processes or containers carry,
    ``indextables-<10 hex digits of the directory's hash>``: what both backends start from.

    Raises:
        ClusterError: ``storage`` is not ``s3``, ``azure`` or ``gcs``.
    """
    if storage not in ("s3", "azure", "gcs"):
        raise ClusterError(f"unknown storage {storage!r} (s3, azure or gcs)")
    resolved = Path(run_dir).resolve()
    return resolved, "indextables-" + hashlib.sha1(str(resolved).encode()).hexdigest()[:10]


class ProcessCluster:
    """The process backend: every node is a local process, stopped by the pid it recorded."""

    def __init__(
        self,
        run_dir: str | Path,
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        storage: str = "s3",
    ) -> None:
        self.run_dir, self.ident = cluster_identity(run_dir, storage)
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.info = ClusterInfo(run_dir=str(self.run_dir), workers=workers, storage=storage)

    # -- paths and environment -------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.run_dir / "cluster.json"

    def _dir(self, *parts: str) -> Path:
        path = self.run_dir.joinpath(*parts)
        path.mkdir(parents=True, exist_ok=True)
        return path

    def storage_env(self) -> dict[str, str]:
        """What every node (and a client) needs to reach the cluster's store: the S3 endpoint and test
        credentials, Azurite's connection string, or fake-gcs-server's endpoint."""
        if self.info.storage == "gcs":
            return {"STORAGE_EMULATOR_HOST": self.info.gcs_endpoint}
        if self.info.storage == "azure":
            from harness.azurite import connection_string

            return {"AZURE_STORAGE_CONNECTION_STRING": connection_string(self.info.azure_endpoint)}
        return {**CREDENTIALS, "AWS_ENDPOINT_URL_S3": self.info.s3_endpoint}

    def _env(self, **extra: str) -> dict[str, str]:
        return {
            **os.environ,
            **self.storage_env(),
            "SPARK_HOME": str(spark_home()),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self._dir("logs")),
            "SPARK_PID_DIR": str(self._dir("pids")),
            "SPARK_IDENT_STRING": self.ident,
            **extra,
        }

    # -- up ----------------------------------------------------------------------------------
    def up(self, timeout_s: float = 180.0) -> ClusterInfo:
        if self.state_file.exists() and self.attach_alive():
            raise ClusterError(f"a cluster already runs from {self.run_dir} (python -m harness down --run-dir ...)")
        self._dir("logs")
        try:
            self.start_storage(timeout_s)
            self._start_master(timeout_s)
            for i in range(1, self.info.workers + 1):
                self._start_worker(i)
            self._wait_for_workers(timeout_s)
            self._start_connect(timeout_s)
        except BaseException:
            self.down()
            raise
        return self.info

    def _save(self) -> None:
        self.state_file.write_text(json.dumps(asdict(self.info), indent=2))

    def start_storage(self, timeout_s: float) -> None:
        """Start the object store: moto (S3), Azurite (Azure) or fake-gcs-server (GCS), with the bucket or
        container."""
        if self.info.storage == "gcs":
            self._start_gcs(timeout_s)
        elif self.info.storage == "azure":
            self._start_azure(timeout_s)
        else:
            self._start_s3(timeout_s)

    def _start_azure(self, timeout_s: float) -> None:
        from harness.azurite import AzuriteUnavailable, create_container, ensure_installed

        try:
            ensure_installed()
        except AzuriteUnavailable as e:
            raise ClusterError(str(e)) from e
        port = self._start_server("azure", "harness.azurite", "Azurite", timeout_s)
        from harness.azurite import ACCOUNT

        self.info.azure_endpoint = f"http://127.0.0.1:{port}/{ACCOUNT}"
        self._save()
        create_container(self.info.azure_endpoint, BUCKET)

    def _start_gcs(self, timeout_s: float) -> None:
        from harness.fake_gcs import FakeGcsUnavailable, create_bucket, ensure_installed

        try:
            ensure_installed()
        except FakeGcsUnavailable as e:
            raise ClusterError(str(e)) from e
        port = self._start_server("gcs", "harness.fake_gcs", "fake-gcs-server", timeout_s)
        self.info.gcs_endpoint = f"http://127.0.0.1:{port}"
        self._save()
        create_bucket(self.info.gcs_endpoint, BUCKET)

    def _start_s3(self, timeout_s: float) -> None:
        port = self._start_server("s3", "harness.moto_server", "S3 server", timeout_s)
        self.info.s3_endpoint = f"http://127.0.0.1:{port}"
        self._save()
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=self.info.s3_endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        s3.create_bucket(Bucket=BUCKET)

    def _start_server(self, name: str, module: str, what: str, timeout_s: float) -> int:
        """Start ``python -m <module> --port P --detached`` (a storage server that prints READY), logged
        to ``logs/<name>.log``, its pid recorded under ``name`` before it is waited for; returns P."""
        port = free_port()
        log = self.run_dir / "logs" / f"{name}.log"
        cmd = [sys.executable, "-m", module, "--port", str(port), "--detached"]
        with log.open("w") as out:
            proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=_repo_root(),
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.info.pids[name] = proc.pid
        self._save()
        _wait(lambda: "READY" in log.read_text(), timeout_s, f"{what} (see {log})", proc)
        return port

    def _daemon(self, action: str, cls: str, instance: int, args: list[str], env: dict[str, str]) -> None:
        cmd = ["bash", str(spark_home() / "sbin" / "spark-daemon.sh"), action, cls, str(instance), *args]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0 and action == "start":
            raise ClusterError(f"{' '.join(cmd)} failed: {done.stdout}{done.stderr}")

    def _pid_file(self, cls: str, instance: int) -> Path:
        return self.run_dir / "pids" / f"spark-{self.ident}-{cls}-{instance}.pid"

    def _record_pid(self, name: str, cls: str, instance: int) -> None:
        pid_file = self._pid_file(cls, instance)
        _wait(pid_file.exists, 30, f"pid file {pid_file}")
        self.info.pids[name] = int(pid_file.read_text().strip())
        self._save()

    def _start_master(self, timeout_s: float) -> None:
        port, ui = free_port(), free_port()
        self.info.master_url = f"spark://127.0.0.1:{port}"
        self.info.master_ui = f"http://127.0.0.1:{ui}"
        args = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)]
        self._daemon("start", MASTER_CLASS, 1, args, self._env())
        self._record_pid("master", MASTER_CLASS, 1)
        _wait(lambda: self.master_status() is not None, timeout_s, f"master UI {self.info.master_ui}")

    def _start_worker(self, i: int) -> None:
        cache = self._dir("cache", f"worker-{i}")
        env = self._env(
            INDEXTABLES_CACHE_DIR=str(cache),
            SPARK_LOCAL_DIRS=str(self._dir("local", f"worker-{i}")),
            SPARK_WORKER_DIR=str(self._dir("work", f"worker-{i}")),
        )
        args = [
            "--host",
            "127.0.0.1",
            "--cores",
            str(self.worker_cores),
            "--memory",
            self.worker_memory,
            "--webui-port",
            str(free_port()),
            self.info.master_url,
        ]
        self._daemon("start", WORKER_CLASS, i, args, env)
        self.info.cache_dirs.append(str(cache))
        self._record_pid(f"worker-{i}", WORKER_CLASS, i)

    def _wait_for_workers(self, timeout_s: float) -> None:
        def alive() -> bool:
            status = self.master_status() or {}
            return int(status.get("aliveworkers", 0)) >= self.info.workers

        _wait(alive, timeout_s, f"{self.info.workers} workers registered at {self.info.master_ui}")

    def _start_connect(self, timeout_s: float) -> None:
        conf = {
            "spark.cores.max": str(self.info.workers * self.worker_cores),
            "spark.executor.cores": "1",
            "spark.executor.memory": "768m",
            "spark.driver.memory": "1g",
            "spark.ui.port": "0",
            "spark.sql.shuffle.partitions": "4",
            "spark.connect.session.planCache.alwaysCacheDataSourceReadsEnabled": "false",
        }
        server = ConnectServer(
            self.info.master_url, conf, timeout_s, work_dir=self.run_dir, ident=self.ident, extra_env=self.storage_env()
        )
        try:
            server.start()
        except ConnectServerError as e:
            raise ClusterError(f"Spark Connect (logs in {self.run_dir / 'logs'}): {e}") from e
        self.info.pids["connect"] = int(server.pid_file.read_text().strip())
        self.info.connect_url = server.url
        self._save()

    # -- status and down ---------------------------------------------------------------------
    def master_status(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{self.info.master_ui}/json/", timeout=2) as response:
                return dict(json.loads(response.read()))
        except (OSError, ValueError):
            return None

    def status(self) -> dict[str, Any]:
        master = self.master_status() or {}
        connect_port = int(self.info.connect_url.rsplit(":", 1)[1]) if self.info.connect_url else 0
        return {
            **asdict(self.info),
            "alive": {name: pid_alive(pid) for name, pid in self.info.pids.items()},
            "alive_workers": int(master.get("aliveworkers", 0)),
            "connect_listening": bool(connect_port) and port_open(connect_port),
        }

    def attach_alive(self) -> bool:
        try:
            other = ProcessCluster.attach(self.run_dir)
        except ClusterError:
            return False
        return any(pid_alive(pid) for pid in other.info.pids.values())

    @classmethod
    def attach(cls, run_dir: str | Path) -> ProcessCluster:
        info = ClusterInfo.load(run_dir)
        cluster = cls(run_dir, workers=info.workers, storage=info.storage)
        cluster.info = info
        return cluster

    def executor_pids(self) -> list[int]:
        """Executor JVMs: the children of the workers this cluster started."""
        workers = [pid for name, pid in self.info.pids.items() if name.startswith("worker-")]
        return [pid for pid in _all_pids() if _parent_pid(pid) in workers]

    def down(self) -> list[str]:
        """Stop every recorded process (Connect, workers, master, S3 or Azure), newest first; returns their names."""
        stopped = []
        for name, pid in reversed(list(self.info.pids.items())):
            if pid_alive(pid):
                _terminate(pid)
                stopped.append(name)
        self.info.pids.clear()
        if self.run_dir.exists():
            self._save()
            for pid_file in (self.run_dir / "pids").glob("*.pid"):
                pid_file.unlink()
        return stopped


def _terminate(pid: int, grace_s: float = 20.0) -> None:
    children = [c for c in _all_pids() if _parent_pid(c) == pid]  # executors of a worker, servers' Python workers
    for target in (pid, *children):
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(pid_alive(p) for p in (pid, *children)):
        time.sleep(0.2)
    for target in (pid, *children):
        if pid_alive(target):
            os.kill(target, signal.SIGKILL)


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _parent_pid(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat.rsplit(")", 1)[1].split()[1])


def _repo_root() -> str:
    return str(Path(__file__).resolve().parent.parent)


def _wait(ready: Any, timeout_s: float, what: str, proc: subprocess.Popen[Any] | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        if proc is not None and proc.poll() is not None:
            raise ClusterError(f"{what}: the process exited with code {proc.returncode}")
        time.sleep(0.3)
    raise ClusterError(f"timed out after {timeout_s:.0f}s waiting for {what}")
