"""A Google Cloud Storage API on 127.0.0.1: fake-gcs-server (Go, Apache-2.0), installed and started here.

``ensure_installed()`` runs ``go install github.com/fsouza/fake-gcs-server@VERSION`` (through the Go
module proxy) into ``INDEXTABLES_FAKE_GCS_DIR`` (default ``~/.cache/indextables/fake-gcs-server``)
once, under a file lock (pytest-xdist workers may ask at once); it needs Go on the PATH (about 1.5
minutes the first time, with an empty module cache). ``FakeGcsProcess().start()`` starts it with
``-scheme http -backend memory`` on 127.0.0.1 and a free port and waits until it answers;
``stop()`` stops it by its pid.

fake-gcs-server applies generation preconditions under its backend's lock: of racing uploads with
``ifGenerationMatch=0`` exactly one creates the object, the others get 412 (what the GCS store's
put-if-absent needs; tests/storage/test_gcs.py checks it).

Run: ``python -m harness.fake_gcs --install`` only installs and prints the binary's path (what
``scripts/fake-gcs-server.sh`` runs); ``python -m harness.fake_gcs [--port P] [--detached]`` serves,
prints ``READY <port>`` and stops fake-gcs-server on SIGTERM/SIGINT or (unless ``--detached``) when the
process that started it exits (how ``python -m harness up --storage gcs`` runs it).
Standard library only at import time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from harness import child

VERSION = "v1.56.1"
MODULE = "github.com/fsouza/fake-gcs-server"


class FakeGcsUnavailable(RuntimeError):
    """fake-gcs-server cannot be installed here (no Go) or did not start."""


def install_dir() -> Path:
    """Where it is installed: ``INDEXTABLES_FAKE_GCS_DIR`` or ``~/.cache/indextables/fake-gcs-server``."""
    return Path(
        os.environ.get("INDEXTABLES_FAKE_GCS_DIR") or Path.home() / ".cache" / "indextables" / "fake-gcs-server"
    )


def _binary(root: Path) -> Path:
    return root / VERSION / "bin" / "fake-gcs-server"


def ensure_installed(timeout_s: float = 900.0) -> Path:
    """The ``fake-gcs-server`` executable, built with ``go install`` first if missing.

    Raises:
        FakeGcsUnavailable: no ``go`` on the PATH, or the install failed (go's output quoted).
    """
    root = install_dir()
    binary = _binary(root)
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise FakeGcsUnavailable(f"fake-gcs-server needs Go on the PATH (go install {MODULE}@{VERSION}); none found")
    root.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(root / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer; the others find it installed
        if not binary.exists():
            env = {**os.environ, "GOBIN": str(binary.parent), "CGO_ENABLED": "0"}
            cmd = [go, "install", f"{MODULE}@{VERSION}"]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=root)
            if done.returncode != 0 or not binary.exists():
                raise FakeGcsUnavailable(f"{' '.join(cmd[1:])} (go) into {binary.parent} failed: {done.stderr[-2000:]}")
    return binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FakeGcsProcess:
    """fake-gcs-server in a child process on 127.0.0.1 (in-memory objects, plain HTTP)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None

    @property
    def endpoint(self) -> str:
        """The JSON API endpoint: ``http://127.0.0.1:<port>`` (a client's ``api_endpoint``)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0, port: int = 0) -> FakeGcsProcess:
        """Install if needed, start on ``port`` (0: a free one, another on a clash) and wait until it answers."""
        binary = ensure_installed()
        wanted = port
        for _ in range(1 if wanted else 3):
            port = wanted or _free_port()
            url = f"http://127.0.0.1:{port}"
            cmd = [str(binary), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1", "-port", str(port)]
            cmd += ["-external-url", url, "-public-host", f"127.0.0.1:{port}", "-log-level", "error"]
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=1) as r:
                        if r.status == 200:
                            self.proc, self.port = proc, port
                            return self
                except OSError:
                    time.sleep(0.05)
            child.stop(proc, 10)
        raise FakeGcsUnavailable("fake-gcs-server did not start")

    def stop(self) -> None:
        """Stop the child (by its pid) and wait for it."""
        child.stop(self.proc, 10)
        self.proc = None

    def __enter__(self) -> FakeGcsProcess:
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def create_bucket(endpoint: str, name: str) -> None:
    """Create bucket ``name`` (an existing one is fine), with the JSON API's ``buckets.insert``."""
    body = json.dumps({"name": name}).encode()
    request = urllib.request.Request(
        f"{endpoint}/storage/v1/b?project=test", data=body, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10):
            pass
    except urllib.error.HTTPError as e:
        if e.code != 409:  # 409: it exists
            raise


def options(endpoint: str) -> dict[str, str]:
    """Storage options of a table on the fake-gcs-server at ``endpoint``."""
    return {"spark.indextables.gcs.endpoint": endpoint, "spark.indextables.gcs.projectId": "test"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--install", action="store_true", help="only install fake-gcs-server (go) and print its path")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--detached", action="store_true", help="keep running after the parent exits (stop by pid)")
    args = parser.parse_args(argv)
    if args.install:
        try:
            print(ensure_installed())
        except FakeGcsUnavailable as e:
            raise SystemExit(f"fake-gcs-server: {e}") from None
        return
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    parent = os.getppid()
    with FakeGcsProcess().start(port=args.port) as server:
        print(f"READY {server.port} {server.endpoint}", flush=True)
        while not stop.wait(1.0) and server.proc is not None and server.proc.poll() is None:
            if not args.detached and os.getppid() != parent:  # the process that started us is gone
                break


if __name__ == "__main__":
    main()
