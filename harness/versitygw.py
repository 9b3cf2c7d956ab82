"""A real S3 implementation on 127.0.0.1: versitygw (Go, Apache-2.0) with its posix backend, installed and
started here.

moto is a mock (its conditional writes are made atomic by a lock patch, ``harness/moto_server.py``);
versitygw serves the S3 API over a directory tree and applies ``If-None-Match``/``If-Match`` itself, so
the storage, concurrency and stress tests run on it too, unpatched (tests/conftest.py, ``s3_backend``).

``ensure_installed()`` runs ``go install github.com/versity/versitygw/cmd/versitygw@VERSION`` (through
the Go module proxy) into ``INDEXTABLES_VERSITYGW_DIR`` (default ``~/.cache/indextables/versitygw``)
once, under a file lock (pytest-xdist workers may ask at once); it needs Go on the PATH (about 3
minutes the first time on 2 cores, with an empty module cache). ``VersityGwProcess().start()`` starts
it with ``posix <temp dir>`` on 127.0.0.1 and a free port, with the access key and secret below, waits
until it answers and creates the test bucket; ``stop()`` stops it by its pid and removes the directory.

Run: ``python -m harness.versitygw --install`` only installs and prints the binary's path (what
``scripts/versitygw.sh`` runs); ``python -m harness.versitygw [--port P] [--detached]`` serves, prints
``READY <port> <endpoint>`` and stops on SIGTERM/SIGINT or (unless ``--detached``) when the process that
started it exits. Standard library only at import time (boto3 for the bucket, at call time).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from harness import child

VERSION = "v1.8.0"
MODULE = "github.com/versity/versitygw"
PACKAGE = f"{MODULE}/cmd/versitygw"  # the module's root holds no main package
ACCESS_KEY = "versitygw-test-access"
SECRET_KEY = "versitygw-test-secret"


class VersityGwUnavailable(RuntimeError):
    """versitygw cannot be installed here (no Go, a failed build) or did not start."""


def install_dir() -> Path:
    """Where it is installed: ``INDEXTABLES_VERSITYGW_DIR`` or ``~/.cache/indextables/versitygw``."""
    return Path(os.environ.get("INDEXTABLES_VERSITYGW_DIR") or Path.home() / ".cache" / "indextables" / "versitygw")


def binary_path() -> Path:
    """Where the executable is (or will be) for ``VERSION``."""
    return install_dir() / VERSION / "bin" / "versitygw"


def ensure_installed(timeout_s: float = 1200.0) -> Path:
    """The ``versitygw`` executable, built with ``go install`` first if missing.

    Raises:
        VersityGwUnavailable: no ``go`` on the PATH, or the install failed (go's output quoted).
    """
    binary = binary_path()
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise VersityGwUnavailable(f"versitygw needs Go on the PATH (go install {PACKAGE}@{VERSION}); none found")
    root = install_dir()
    root.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(root / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer; the others find it installed
        if not binary.exists():
            env = {**os.environ, "GOBIN": str(binary.parent), "CGO_ENABLED": "0"}
            cmd = [go, "install", f"{PACKAGE}@{VERSION}"]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=root)
            if done.returncode != 0 or not binary.exists():
                failed = f"{' '.join(cmd[1:])} (go) into {binary.parent} failed"
                raise VersityGwUnavailable(f"{failed}: {done.stderr[-2000:]}")
    return binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(url: str) -> bool:
    """Whether an HTTP server answers at ``url`` (an unsigned request: S3's 403 is an answer)."""
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


class VersityGwProcess:
    """versitygw in a child process on 127.0.0.1, serving a fresh temporary directory (posix backend)."""

    def __init__(self, bucket: str | None = None) -> None:
        self.bucket = bucket
        self.proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.root: Path | None = None
        self._log: Any = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def options(self) -> dict[str, Any]:
        """Storage options of a table on this server."""
        return options(self.endpoint_url)

    def start(self, timeout: float = 30.0, port: int = 0) -> VersityGwProcess:
        """Install if needed, start on ``port`` (0: a free one, another on a clash), wait until it answers
        and create ``bucket`` if one was named."""
        binary = ensure_installed()
        self.root = Path(tempfile.mkdtemp(prefix="indextables-versitygw-"))
        wanted = port
        for _ in range(1 if wanted else 3):
            port = wanted or _free_port()
            cmd = [str(binary), "--access", ACCESS_KEY, "--secret", SECRET_KEY, "--port", f"127.0.0.1:{port}"]
            cmd += ["--region", "us-east-1", "--quiet", "posix", str(self.root)]
            log = tempfile.TemporaryFile()  # noqa: SIM115 (kept open while it runs; a pipe could fill and block it)
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and proc.poll() is None:
                if _answers(f"http://127.0.0.1:{port}/"):
                    self.proc, self.port, self._log = proc, port, log
                    if self.bucket:
                        try:
                            create_bucket(self.endpoint_url, self.bucket)
                        except BaseException:
                            self.stop()
                            raise
                    return self
                time.sleep(0.05)
            child.stop(proc, 10)
            log.seek(0)
            err = log.read().decode(errors="replace")
            log.close()
        shutil.rmtree(self.root, ignore_errors=True)
        raise VersityGwUnavailable(f"versitygw did not start: {err[-1000:]}")

    def stop(self) -> None:
        """Stop the child (by its pid), wait for it and remove its directory."""
        child.stop(self.proc, 10)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> VersityGwProcess:
        return self if self.proc is not None else self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def options(endpoint_url: str) -> dict[str, Any]:
    """Storage options of a table on the versitygw at ``endpoint_url``."""
    return {
        "endpoint_url": endpoint_url,
        "region": "us-east-1",
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET_KEY,
        "path_style": True,
    }


def create_bucket(endpoint_url: str, name: str) -> None:
    """Create bucket ``name`` (one this account owns already is fine)."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--install", action="store_true", help="only install versitygw (go) and print its path")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--bucket", default=None, help="a bucket to create once it answers")
    parser.add_argument("--detached", action="store_true", help="keep running after the parent exits (stop by pid)")
    args = parser.parse_args(argv)
    if args.install:
        try:
            print(ensure_installed())
        except VersityGwUnavailable as e:
            raise SystemExit(f"versitygw: {e}") from None
        return
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    parent = os.getppid()
    with VersityGwProcess(bucket=args.bucket).start(port=args.port) as server:
        print(f"READY {server.port} {server.endpoint_url}", flush=True)
        while not stop.wait(1.0) and server.proc is not None and server.proc.poll() is None:
            if not args.detached and os.getppid() != parent:  # the process that started us is gone
                break


if __name__ == "__main__":
    main()
