"""The docker backend: the topology of ``harness.cluster`` as containers, driven with the docker CLI.

``DockerCluster(run_dir, workers=2).up()`` builds or reuses the images (``harness.docker_images``)
and starts, on one user-defined bridge network of its own:

* ``s3``: moto's server with the lock patch (the S3 image), bucket ``indextables``; or, with
  ``storage="azure"``, ``azure``: Azurite (the Azurite image), container ``indextables``, every node
  given the development account's connection string (``AZURE_STORAGE_CONNECTION_STRING``, blob
  endpoint ``http://azure:10000/devstoreaccount1``);
* ``master``: a Spark standalone master;
* ``worker-1`` .. ``worker-N``: Spark workers, each with its own named volume mounted at
  ``/cache`` as its split cache (standing in for its NVMe disk);
* ``connect``: a Spark Connect server driving that master (the Spark driver runs in it).

Node containers bind-mount ``run_dir/exchange`` at ``/exchange`` (where the container stress
workload leaves its reports). Containers reach each other by these names; the host reaches S3,
the master, its UI and Connect through ports published on 127.0.0.1 only (free ports, so several
clusters can coexist), which ``ClusterInfo`` records like the process backend's. Every
container, the network and the volumes carry the label ``indextables.cluster=<id>``; ``down()``
removes everything with that label, so nothing is left behind even after a failed ``up``.
``cluster.json`` in ``run_dir`` records the endpoints, container names and host pids; ``attach`` re-opens it.

Faults only containers give (used by ``harness.container_stress``): ``kill`` (``docker kill``:
SIGKILL to every process in it), ``restart`` after a kill, ``disconnect``/``connect`` a container
from the network (its store becomes unreachable), ``pause``/``unpause`` (a frozen store).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from executor_lib.spark.connect_server import free_port
from executor_lib.spark.worker_daemon import DAEMON_CONF
from harness.cluster import (
    BUCKET,
    CREDENTIALS,
    ClusterError,
    ClusterInfo,
    _all_pids,
    _parent_pid,
    _wait,
    cluster_identity,
)
from harness.docker_images import DockerUnavailableError, docker, docker_available, ensure_images

__all__ = ["DockerCluster", "DockerUnavailableError", "docker_available"]

LABEL = "indextables.cluster"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
NODE_ENV = {
    **CREDENTIALS,
    "AWS_ENDPOINT_URL_S3": "http://s3:9000",
    "INDEXTABLES_S3_PATH_STYLE": "true",
    "SPARK_NO_DAEMONIZE": "1",
}


class DockerCluster:
    """The docker backend; the same ``up``/``status``/``down``/``executor_pids`` as ``ProcessCluster``."""

    def __init__(
        self,
        run_dir: str | Path,
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "1g",
        storage: str = "s3",
    ) -> None:
        self.run_dir, self.id = cluster_identity(run_dir, storage)
        if storage == "gcs":
            raise ClusterError(
                "the docker backend has no GCS image yet: python -m harness up --storage gcs (processes)"
            )
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.info = ClusterInfo(
            run_dir=str(self.run_dir), workers=workers, backend="docker", network=f"{self.id}-net", storage=storage
        )
        self.images: dict[str, str] = {}

    # -- names ----------------------------------------------------------------------------------
    def container(self, node: str) -> str:
        """The container name of ``node`` (``s3``, ``master``, ``worker-N``, ``connect``)."""
        return f"{self.id}-{node}"

    def _exchange(self) -> Path:
        path = self.run_dir / "exchange"
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def state_file(self) -> Path:
        return self.run_dir / "cluster.json"

    def _save(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps(asdict(self.info), indent=2))

    # -- up -------------------------------------------------------------------------------------
    def up(self, timeout_s: float = 300.0) -> ClusterInfo:
        self.up_storage(timeout_s)
        try:
            self._start_master(timeout_s)
            for i in range(1, self.info.workers + 1):
                self._start_worker(i)
            _wait(
                lambda: self.alive_workers() >= self.info.workers,
                timeout_s,
                f"{self.info.workers} workers registered at {self.info.master_ui}",
            )
            self._start_connect(timeout_s)
        except BaseException:
            self.down()
            raise
        return self.info

    def up_storage(self, timeout_s: float = 300.0) -> ClusterInfo:
        """The first part of ``up``: the images, the network and the store's container."""
        if self.state_file.exists() and self._labelled("ps", "-a"):
            raise ClusterError(f"a docker cluster already runs from {self.run_dir} (python -m harness down)")
        images = ensure_images(azure=self.info.storage == "azure")
        self.images = {"node": images.node, "s3": images.s3, "azurite": images.azurite}
        try:
            docker("network", "create", "--label", f"{LABEL}={self.id}", self.info.network)
            self.start_storage(timeout_s)
        except BaseException:
            self.down()
            raise
        return self.info

    def _run(
        self,
        node: str,
        image: str,
        command: list[str],
        ports: dict[int, int] | None = None,
        env: dict[str, str] | None = None,
        volumes: dict[str, str] | None = None,
    ) -> None:
        args = [
            "run",
            "--detach",
            "--init",
            "--name",
            self.container(node),
            "--hostname",
            node,
            "--label",
            f"{LABEL}={self.id}",
            "--network",
            self.info.network,
            "--network-alias",
            node,
        ]
        for host_port, port in (ports or {}).items():
            args += ["--publish", f"127.0.0.1:{host_port}:{port}"]
        for key, value in {**NODE_ENV, **self.node_storage_env(), **(env or {})}.items():
            args += ["--env", f"{key}={value}"]
        if image == self.images["node"]:  # the stress workload's reports (harness.container_stress)
            volumes = {**(volumes or {}), str(self._exchange()): "/exchange"}
        for volume, mount in (volumes or {}).items():
            args += ["--volume", f"{volume}:{mount}"]
        docker(*args, image, *command, timeout=120)
        self.info.containers[node] = self.container(node)
        self.info.pids[node] = self.host_pid(node)
        self._save()

    def start_storage(self, timeout_s: float) -> None:
        """Start the object store's container, moto (S3) or Azurite (Azure), with the bucket or
        container (the network must exist)."""
        if self.info.storage == "azure":
            self._start_azure(timeout_s)
        else:
            self._start_s3(timeout_s)

    def node_storage_env(self) -> dict[str, str]:
        """What the nodes need besides ``NODE_ENV`` to reach the store on the cluster's network."""
        if self.info.storage != "azure":
            return {}
        from harness.azurite import ACCOUNT, connection_string

        return {"AZURE_STORAGE_CONNECTION_STRING": connection_string(f"http://azure:10000/{ACCOUNT}")}

    def storage_env(self) -> dict[str, str]:
        """What a client on the host needs to reach the store (through its published port)."""
        if self.info.storage == "azure":
            from harness.azurite import connection_string

            return {"AZURE_STORAGE_CONNECTION_STRING": connection_string(self.info.azure_endpoint)}
        return {**CREDENTIALS, "AWS_ENDPOINT_URL_S3": self.info.s3_endpoint}

    def _start_azure(self, timeout_s: float) -> None:
        from harness.azurite import ACCOUNT

        port = free_port()
        self._run("azure", self.images["azurite"], [], ports={port: 10000})
        self._wait_node("azure", lambda: "READY" in self.logs("azure"), timeout_s, "Azurite")
        self.info.azure_endpoint = f"http://127.0.0.1:{port}/{ACCOUNT}"
        self._save()
        _wait(self._create_container, 60, f"container {BUCKET} at {self.info.azure_endpoint}")

    def _create_container(self) -> bool:
        from azure.core.exceptions import AzureError

        from harness.azurite import create_container

        try:
            create_container(self.info.azure_endpoint, BUCKET)
        except AzureError:
            return False
        return True

    def _start_s3(self, timeout_s: float) -> None:
        port = free_port()
        self.info.s3_endpoint = f"http://127.0.0.1:{port}"
        self._run("s3", self.images["s3"], [], ports={port: 9000})
        self._wait_node("s3", lambda: "READY" in self.logs("s3"), timeout_s, "the S3 server")
        _wait(self._create_bucket, 60, f"bucket {BUCKET} at {self.info.s3_endpoint}")

    def _create_bucket(self) -> bool:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        s3 = boto3.client(
            "s3",
            endpoint_url=self.info.s3_endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        try:
            s3.create_bucket(Bucket=BUCKET)
        except (BotoCoreError, ClientError):
            return False
        return True

    def _start_master(self, timeout_s: float) -> None:
        port, ui = free_port(), free_port()
        self.info.master_url = f"spark://127.0.0.1:{port}"
        self.info.master_ui = f"http://127.0.0.1:{ui}"
        command = [
            "/opt/spark/bin/spark-class",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "master",
            "--port",
            "7077",
            "--webui-port",
            "8080",
        ]
        self._run("master", self.images["node"], command, ports={port: 7077, ui: 8080})
        self._wait_node("master", lambda: self.master_status() is not None, timeout_s, "the master UI")

    def _start_worker(self, i: int) -> None:
        node, volume = f"worker-{i}", f"{self.id}-cache-{i}"
        docker("volume", "create", "--label", f"{LABEL}={self.id}", volume)
        self.info.volumes.append(volume)
        command = [
            "/opt/spark/bin/spark-class",
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            node,
            "--cores",
            str(self.worker_cores),
            "--memory",
            self.worker_memory,
            "spark://master:7077",
        ]
        self._run(node, self.images["node"], command, volumes={volume: "/cache"})
        mount = docker("volume", "inspect", "--format", "{{.Mountpoint}}", volume).stdout.strip()
        self.info.cache_dirs.append(mount)
        self._save()

    def _start_connect(self, timeout_s: float) -> None:
        port = free_port()
        conf = {
            "spark.cores.max": str(self.info.workers * self.worker_cores),
            "spark.executor.cores": "1",
            "spark.executor.memory": "768m",
            "spark.driver.memory": "1g",
            "spark.sql.shuffle.partitions": "4",
            "spark.driver.host": "connect",
            "spark.driver.bindAddress": "0.0.0.0",
            "spark.connect.grpc.binding.port": "15002",
            "spark.connect.session.planCache.alwaysCacheDataSourceReadsEnabled": "false",
            **DAEMON_CONF,  # the executors' Python workers start from the read path's daemon
        }
        command = ["/opt/spark/bin/spark-submit", "--class", CONNECT_CLASS, "--master", "spark://master:7077"]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        self._run("connect", self.images["node"], [*command, "spark-internal"], ports={port: 15002})
        self.info.connect_url = f"sc://127.0.0.1:{port}"
        self._save()
        self._wait_node("connect", self.connect_listening, timeout_s, "Spark Connect")

    def _wait_node(self, node: str, ready: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Wait until ``ready()``; a container that exits meanwhile fails at once, with its log."""

        def ready_or_exited() -> bool:
            if ready():
                return True
            if self.host_pid(node) == 0:
                raise ClusterError(
                    f"{what} in container {self.container(node)}: the container exited; "
                    f"the end of its log:\n{self.logs(node)[-3000:]}"
                )
            return False

        _wait(ready_or_exited, timeout_s, f"{what} in container {self.container(node)}")

    # -- status ---------------------------------------------------------------------------------
    def logs(self, node: str) -> str:
        done = docker("logs", "--tail", "200", self.container(node), check=False, timeout=60)
        return done.stdout + done.stderr

    def host_pid(self, node: str) -> int:
        """The host pid of the container's init process (0 when it does not run)."""
        done = docker("inspect", "--format", "{{.State.Pid}}", self.container(node), check=False, timeout=60)
        return int(done.stdout.strip() or 0) if done.returncode == 0 else 0

    def running(self) -> dict[str, bool]:
        names = set(self._labelled("ps", filters=["status=running"]))
        return {node: name in names for node, name in self.info.containers.items()}

    def master_status(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{self.info.master_ui}/json/", timeout=2) as response:
                return dict(json.loads(response.read()))
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> int:
        return int((self.master_status() or {}).get("aliveworkers", 0))

    def connect_listening(self) -> bool:
        """Whether the Connect server accepts connections inside its container (the published
        port always accepts: docker's proxy answers even before the server listens)."""
        probe = "import socket; socket.create_connection(('127.0.0.1', 15002), timeout=2)"
        return docker("exec", self.container("connect"), "python", "-c", probe, check=False, timeout=30).returncode == 0

    def status(self) -> dict[str, Any]:
        alive = self.running()
        return {
            **asdict(self.info),
            "alive": alive,
            "alive_workers": self.alive_workers(),
            "connect_listening": alive.get("connect", False) and self.connect_listening(),
        }

    def executor_pids(self) -> list[int]:
        """Host pids of the executor JVMs in the worker containers (as root, ``os.kill`` reaches them)."""
        roots = {self.host_pid(n) for n in self.info.containers if n.startswith("worker-")} - {0}
        pids = _all_pids()
        workers = [p for p in pids if _parent_pid(p) in roots]  # the Worker JVM under the container's init
        return [p for p in pids if _parent_pid(p) in workers and _is_executor(p)]

    # -- faults ---------------------------------------------------------------------------------
    def kill(self, node: str) -> None:
        """``docker kill``: SIGKILL to every process of the container at once."""
        docker("kill", self.container(node), timeout=60)

    def restart(self, node: str) -> None:
        """Start a killed container again (same command, network, volume)."""
        docker("start", self.container(node), timeout=120)
        self.info.pids[node] = self.host_pid(node)
        self._save()

    def disconnect(self, node: str) -> None:
        docker("network", "disconnect", "--force", self.info.network, self.container(node), timeout=60)

    def connect(self, node: str) -> None:
        docker("network", "connect", "--alias", node, self.info.network, self.container(node), timeout=60)

    def pause(self, node: str) -> None:
        docker("pause", self.container(node), timeout=60)

    def unpause(self, node: str) -> None:
        docker("unpause", self.container(node), timeout=60)

    def exec_detached(self, node: str, command: list[str], env: dict[str, str] | None = None) -> None:
        """Start ``command`` in the running container ``node`` and return at once."""
        args = ["exec", "--detach"]
        for key, value in (env or {}).items():
            args += ["--env", f"{key}={value}"]
        docker(*args, self.container(node), *command, timeout=60)

    # -- down -----------------------------------------------------------------------------------
    def _labelled(self, *kind: str, filters: list[str] | None = None) -> list[str]:
        args = [*kind, "--filter", f"label={LABEL}={self.id}"]
        for f in filters or []:
            args += ["--filter", f]
        fmt = "{{.Name}}" if kind[0] in ("network", "volume") else "{{.Names}}"
        return docker(*args, "--format", fmt, timeout=60).stdout.split()

    def leftovers(self) -> list[str]:
        """Containers, networks and volumes of this cluster that still exist."""
        return [*self._labelled("ps", "-a"), *self._labelled("network", "ls"), *self._labelled("volume", "ls")]

    def down(self) -> list[str]:
        """Remove every container, the network and the volumes labelled with this cluster's id."""
        reason = docker_available()
        if reason:
            raise DockerUnavailableError(reason)
        containers = self._labelled("ps", "-a")
        running = set(self._labelled("ps", filters=["status=running"]))
        paused = [c for c in containers if c not in running]
        if paused:  # a paused container cannot be removed; an exited one just says so
            docker("unpause", *paused, check=False, timeout=60)
        if containers:
            docker("rm", "--force", "--volumes", *containers, timeout=300)
        for network in self._labelled("network", "ls"):
            docker("network", "rm", network, timeout=60)
        volumes = self._labelled("volume", "ls")
        if volumes:
            docker("volume", "rm", "--force", *volumes, timeout=120)
        self.info.pids.clear()
        if self.run_dir.exists():
            self._save()
        prefix = f"{self.id}-"
        return [c.removeprefix(prefix) for c in containers if c in running]

    @classmethod
    def attach(cls, run_dir: str | Path) -> DockerCluster:
        info = ClusterInfo.load(run_dir)
        cluster = cls(run_dir, workers=info.workers, storage=info.storage)
        cluster.info = info
        return cluster


def _is_executor(pid: int) -> bool:
    try:
        return b"CoarseGrainedExecutorBackend" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def attach_cluster(run_dir: str | Path) -> Any:
    """The cluster recorded in ``run_dir/cluster.json``, of whichever backend started it."""
    from harness.cluster import ProcessCluster

    state = Path(run_dir).resolve() / "cluster.json"
    if state.exists() and json.loads(state.read_text()).get("backend") == "docker":
        return DockerCluster.attach(run_dir)
    return ProcessCluster.attach(run_dir)
