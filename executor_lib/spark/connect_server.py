"""A local Spark Connect server on 127.0.0.1, started from the pip-installed ``pyspark`` package
(for the main job ``python -m indextables_demo``, the test harness and the tests).

``ConnectServer(master="local[2]")`` runs ``$SPARK_HOME/sbin/start-connect-server.sh`` (the
``pyspark`` package folder is ``$SPARK_HOME``) on a free port, with ``PYSPARK_PYTHON`` set to
this interpreter so the server's Python workers find ``executor_lib`` and the statically
registered ``indextables`` data source, and waits until the port accepts connections.
``url`` is the ``sc://`` address for ``SparkSession.builder.remote``. ``stop()`` runs
``stop-connect-server.sh`` with the same identity, so only this server is stopped.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from indextables_contract.errors import ConnectServerError


def free_port() -> int:
    """A port nobody listens on right now on 127.0.0.1 (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class ConnectServer:
    """``work_dir`` holds ``logs/`` and ``pids/`` (default: a new temporary directory);
    ``ident`` names the pid file; ``extra_env`` is added to the server's environment."""

    CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

    def __init__(
        self,
        master: str = "local[2]",
        conf: dict[str, str] | None = None,
        timeout_s: float = 120,
        work_dir: Path | None = None,
        ident: str | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        import pyspark

        self.spark_home = Path(pyspark.__file__).parent
        self.master = master
        from executor_lib.spark.worker_daemon import DAEMON_CONF

        self.conf = {**DAEMON_CONF, **dict(conf or {})}  # its Python workers start from the read path's daemon
        self.timeout_s = timeout_s
        self.port = free_port()
        self.work = work_dir or Path(tempfile.mkdtemp(prefix="indextables-connect-"))
        self.ident = ident or f"indextables-{uuid.uuid4().hex[:8]}"
        self.env = {
            **os.environ,
            "SPARK_HOME": str(self.spark_home),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.work / "logs"),
            "SPARK_PID_DIR": str(self.work / "pids"),
            "SPARK_IDENT_STRING": self.ident,
            **(extra_env or {}),
        }

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> ConnectServer:
        args = [
            "bash",
            str(self.spark_home / "sbin" / "start-connect-server.sh"),
            "--master",
            self.master,
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            f"spark.connect.grpc.binding.port={self.port}",
        ]
        for key, value in self.conf.items():
            args += ["--conf", f"{key}={value}"]
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise ConnectServerError(f"start-connect-server.sh failed: {done.stdout}{done.stderr}")
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if port_open(self.port):
                return self
            time.sleep(0.5)
        self.stop()
        raise ConnectServerError(
            f"Spark Connect server did not listen on {self.port} within {self.timeout_s}s: {self.log()}"
        )

    @property
    def pid_file(self) -> Path:
        return self.work / "pids" / f"spark-{self.ident}-{self.CLASS}-1.pid"

    def log(self) -> str:
        logs = sorted((self.work / "logs").glob("*.out"))
        return logs[-1].read_text(errors="replace")[-4000:] if logs else "(no log)"

    def stop(self) -> None:
        subprocess.run(
            ["bash", str(self.spark_home / "sbin" / "stop-connect-server.sh")],
            env=self.env,
            capture_output=True,
            timeout=60,
            check=False,
        )

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
