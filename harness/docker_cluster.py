"""The docker backend: the same topology as ``harness.cluster`` from ``docker/compose.yaml``
(MinIO instead of moto). Needs a running Docker engine; without one every call raises
``DockerUnavailableError`` with the reason, and the tests that need it skip."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from harness.cluster import ClusterInfo

COMPOSE_FILE = Path(__file__).resolve().parent.parent / "docker" / "compose.yaml"


class DockerUnavailableError(RuntimeError):
    """No docker client, or no engine answering it."""


def docker_available() -> str | None:
    """``None`` when a Docker engine answers, else why not."""
    if shutil.which("docker") is None:
        return "no docker client on PATH"
    done = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                          capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
    if done.returncode != 0:
        return f"no Docker engine answers `docker info`: {(done.stderr or done.stdout).strip()[:300]}"
    return None


class DockerCluster:
    def __init__(self, run_dir: str | Path, workers: int = 2) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.workers = workers

    def _compose(self, *args: str) -> str:
        reason = docker_available()
        if reason:
            raise DockerUnavailableError(reason)
        cmd = ["docker", "compose", "-f", str(COMPOSE_FILE), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
        if done.returncode != 0:
            raise DockerUnavailableError(f"{' '.join(cmd)} failed: {done.stderr.strip()[-2000:]}")
        return done.stdout

    def up(self) -> ClusterInfo:
        self._compose("up", "-d", "--build", "--wait", "--scale", f"worker={self.workers}")
        return self.info()

    def info(self) -> ClusterInfo:
        return ClusterInfo(
            run_dir=str(self.run_dir), workers=self.workers, s3_endpoint="http://127.0.0.1:9000",
            master_url="spark://127.0.0.1:7077", master_ui="http://127.0.0.1:8080",
            connect_url="sc://127.0.0.1:15002",
        )  # fmt: skip

    def status(self) -> dict[str, Any]:
        running = self._compose("ps", "--services", "--status", "running").split()
        return {"alive": {name: name in running for name in ("minio", "master", "worker", "connect")},
                "alive_workers": running.count("worker"), "workers": self.workers,
                "connect_url": self.info().connect_url, "connect_listening": "connect" in running}  # fmt: skip

    def down(self) -> list[str]:
        self._compose("down", "--remove-orphans")
        return ["minio", "master", "worker", "connect"]
