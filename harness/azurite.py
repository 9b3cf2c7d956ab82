"""An Azure Blob Storage API on 127.0.0.1: Azurite (the npm package), installed and started here.

``ensure_installed()`` runs ``npm install azurite@VERSION`` into ``INDEXTABLES_AZURITE_DIR``
(default ``~/.cache/indextables/azurite``) once, under a file lock (pytest-xdist workers and the
harness may ask at once); it needs Node.js and npm on the PATH and the npm registry.
``AzuriteProcess().start()`` runs ``python -m harness.azurite`` in a child process, which starts
Azurite's blob service with its data in memory, prints ``READY <port>`` and stops Azurite on
SIGTERM/SIGINT or (unless ``--detached``) when the process that started it exits — so a test run
that dies leaves no Node process behind.

Azurite serves the well-known development account ``devstoreaccount1`` (its key is public, in
Microsoft's documentation): ``options(endpoint)`` are the storage options of a table on it, and
``create_container`` makes a container.

Run: ``python -m harness.azurite [--port 0] [--host 127.0.0.1] [--detached]``;
``python -m harness.azurite --install`` only installs. Standard library only at import time.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness import child

VERSION = "3.35.0"
ACCOUNT = "devstoreaccount1"
# Azurite's development account key: public (learn.microsoft.com, "Use Azurite"), not a secret.
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


class AzuriteUnavailable(RuntimeError):
    """Azurite cannot be installed here (no npm) or did not start."""


def install_dir() -> Path:
    """Where Azurite is installed: ``INDEXTABLES_AZURITE_DIR`` or ``~/.cache/indextables/azurite``."""
    return Path(os.environ.get("INDEXTABLES_AZURITE_DIR") or Path.home() / ".cache" / "indextables" / "azurite")


def _binary(root: Path) -> Path:
    return root / "node_modules" / ".bin" / "azurite-blob"


def ensure_installed(timeout_s: float = 600.0) -> Path:
    """The ``azurite-blob`` executable, installed with npm first if missing.

    Raises:
        AzuriteUnavailable: no ``npm``/``node`` on the PATH, or the install failed (npm's output quoted).
    """
    root = install_dir()
    binary = _binary(root)
    if binary.exists():
        return binary
    if shutil.which("npm") is None or shutil.which("node") is None:
        raise AzuriteUnavailable("Azurite needs Node.js and npm on the PATH (npm install azurite); none found")
    root.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(root / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one installer; the others find it installed
        if not binary.exists():
            cmd = ["npm", "install", "--prefix", str(root), "--no-audit", "--no-fund", "--loglevel=error"]
            done = subprocess.run([*cmd, f"azurite@{VERSION}"], capture_output=True, text=True, timeout=timeout_s)
            if done.returncode != 0 or not binary.exists():
                raise AzuriteUnavailable(f"npm install azurite@{VERSION} into {root} failed: {done.stderr[-2000:]}")
    return binary


def options(endpoint: str) -> dict[str, str]:
    """Storage options of a table on the Azurite at ``endpoint`` (``http://127.0.0.1:<port>/devstoreaccount1``)."""
    return {"spark.indextables.azure.endpoint": endpoint, "spark.indextables.azure.accountKey": ACCOUNT_KEY}


def connection_string(endpoint: str) -> str:
    """The development account's connection string for the Azurite at ``endpoint``."""
    return f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};BlobEndpoint={endpoint};"


def create_container(endpoint: str, name: str) -> None:
    """Create container ``name`` (an existing one is fine). Needs azure-storage-blob."""
    from azure.core.exceptions import ResourceExistsError
    from azure.storage.blob import BlobServiceClient

    service = BlobServiceClient(endpoint, credential={"account_name": ACCOUNT, "account_key": ACCOUNT_KEY})
    with contextlib.suppress(ResourceExistsError):
        service.create_container(name)


def serve(port: int, host: str = "127.0.0.1", detached: bool = False) -> None:
    """Run Azurite's blob service until SIGTERM/SIGINT (or the parent's exit unless ``detached``)."""
    binary = ensure_installed()
    cmd = [str(binary), "--blobHost", host, "--blobPort", str(port), "--inMemoryPersistence", "--loose",
           "--skipApiVersionCheck", "--disableTelemetry", "--silent"]  # fmt: skip
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert child.stdout is not None
    listening = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = child.stdout.readline()
        if "listens on" in line:
            listening = int(line.rstrip().rsplit(":", 1)[1])
            break
        if not line and child.poll() is not None:
            break
    if listening is None:
        child.kill()
        raise AzuriteUnavailable("Azurite did not start")
    threading.Thread(target=lambda: [None for _ in child.stdout or ()], daemon=True).start()  # drain its output
    print(f"READY {listening}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    parent = os.getppid()
    while not stop.wait(1.0) and child.poll() is None:
        if not detached and os.getppid() != parent:  # the process that started us is gone: do not linger
            break
    child.terminate()
    try:
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


class AzuriteProcess:
    """Azurite in a child process (``python -m harness.azurite``), on 127.0.0.1 and a free port."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.port: int | None = None

    @property
    def endpoint(self) -> str:
        """The blob endpoint of the development account: ``http://127.0.0.1:<port>/devstoreaccount1``."""
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    def start(self, timeout: float = 120.0) -> AzuriteProcess:
        """Install if needed, start, and wait for ``READY``; AzuriteUnavailable if it cannot."""
        ensure_installed()  # here, so that a missing npm is reported as such
        started = child.start_announcing([sys.executable, "-m", "harness.azurite", "--port", "0"], timeout)
        if started is None:
            raise AzuriteUnavailable("Azurite did not start")
        self.proc, self.port = started
        return self

    def stop(self) -> None:
        """Stop the child (by its pid) and wait for it."""
        child.stop(self.proc, 15)
        self.proc = None

    def __enter__(self) -> AzuriteProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--detached", action="store_true", help="keep running after the parent exits (stop by pid)")
    parser.add_argument("--install", action="store_true", help="only install Azurite (npm) and print its path")
    args = parser.parse_args(argv)
    if args.install:
        print(ensure_installed())
        return
    serve(args.port, host=args.host, detached=args.detached)


if __name__ == "__main__":
    main()
