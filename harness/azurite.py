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

OAuth: ``AzuriteProcess(oauth=True)`` serves HTTPS (Azurite takes bearer tokens over HTTPS only)
with a self-signed certificate for 127.0.0.1 made here (``self_signed_cert``; the client trusts
it through ``REQUESTS_CA_BUNDLE=<ca_bundle>``) and checks tokens as ``--oauth basic`` does: the
token must be a JWT whose issuer is an Azure AD token service, whose audience is Azure Storage and
whose lifetime covers the request; its signature is not checked. ``oauth_token()`` makes one.

Run: ``python -m harness.azurite [--port 0] [--host 127.0.0.1] [--detached] [--cert C --key K --oauth]``;
``python -m harness.azurite --install`` only installs (and, as root without Node.js, first installs
Debian's ``nodejs`` and ``npm``: how CI gets Azurite). Standard library only at import time.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
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


def ensure_node(timeout_s: float = 900.0) -> None:
    """Node.js and npm on the PATH, installed from Debian's packages (``apt-get install nodejs npm``)
    when missing and this runs as root (CI machines); what ``python -m harness.azurite --install`` does
    first, so that CI installs Azurite itself.

    Raises:
        AzuriteUnavailable: missing, and not root or no apt-get, or the install failed.
    """
    if shutil.which("npm") and shutil.which("node"):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise AzuriteUnavailable("Azurite needs Node.js and npm on the PATH: apt-get install nodejs npm")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "nodejs", "npm"],
    ):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False, env=env)
        if done.returncode != 0:
            raise AzuriteUnavailable(f"{' '.join(cmd)} failed: {done.stderr[-1000:]}")
    if not (shutil.which("npm") and shutil.which("node")):
        raise AzuriteUnavailable("apt-get installed nodejs and npm, but node or npm is still not on the PATH")


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


def self_signed_cert(directory: Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """A self-signed certificate for ``host`` (and ``localhost``), valid for a day, and its key:
    ``(cert.pem, key.pem)`` in ``directory``. The certificate is its own CA: a client trusts it with
    ``REQUESTS_CA_BUNDLE=cert.pem``. Needs ``cryptography``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.timezone.utc)
    alt: list[x509.GeneralName] = [x509.DNSName("localhost")]
    try:
        alt.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        alt.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return cert_path, key_path


def oauth_token(
    lifetime_s: float = 3600.0,
    audience: str = "https://storage.azure.com",
    issuer: str = "https://sts.windows.net/00000000-0000-0000-0000-000000000000/",
) -> str:
    """A bearer token Azurite's ``--oauth basic`` accepts: a JWT with an Azure AD issuer, the Azure
    Storage audience and ``lifetime_s`` seconds to live (negative: already expired). Unsigned in
    substance (Azurite checks no signature), so it is good for Azurite only."""

    def part(value: dict[str, Any] | bytes) -> str:
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    now = int(time.time())
    claims = {
        "aud": audience,
        "iss": issuer,
        "iat": now - 60,
        "nbf": now - 60,
        "exp": int(now + lifetime_s),
        "tid": issuer.rstrip("/").rsplit("/", 1)[-1],
        "oid": "indextables-test",
    }
    return ".".join([part({"alg": "HS256", "typ": "JWT"}), part(claims), part(b"not-checked-by-azurite")])


def serve(
    port: int,
    host: str = "127.0.0.1",
    detached: bool = False,
    cert: str | None = None,
    key: str | None = None,
    oauth: bool = False,
) -> None:
    """Run Azurite's blob service until SIGTERM/SIGINT (or the parent's exit unless ``detached``);
    over HTTPS with ``cert`` and ``key`` (PEM files), checking bearer tokens with ``oauth``."""
    binary = ensure_installed()
    cmd = [
        str(binary),
        "--blobHost",
        host,
        "--blobPort",
        str(port),
        "--inMemoryPersistence",
        "--loose",
        "--skipApiVersionCheck",
        "--disableTelemetry",
        "--silent",
    ]
    if cert and key:
        cmd += ["--cert", cert, "--key", key]
    if oauth:
        cmd += ["--oauth", "basic"]
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
    """Azurite in a child process (``python -m harness.azurite``), on 127.0.0.1 and a free port.
    With ``oauth``: over HTTPS with a self-signed certificate made in ``cert_dir`` (``ca_bundle``),
    taking bearer tokens besides the account key."""

    def __init__(self, oauth: bool = False, cert_dir: Path | None = None) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.port: int | None = None
        self.oauth = oauth
        self.cert_dir = cert_dir
        self.ca_bundle: Path | None = None

    @property
    def endpoint(self) -> str:
        """The blob endpoint of the development account: ``http://127.0.0.1:<port>/devstoreaccount1``
        (``https://`` with ``oauth``)."""
        return f"{'https' if self.oauth else 'http'}://127.0.0.1:{self.port}/{ACCOUNT}"

    def start(self, timeout: float = 120.0) -> AzuriteProcess:
        """Install if needed, start, and wait for ``READY``; AzuriteUnavailable if it cannot."""
        ensure_installed()  # here, so that a missing npm is reported as such
        cmd = [sys.executable, "-m", "harness.azurite", "--port", "0"]
        if self.oauth:
            if self.cert_dir is None:
                raise AzuriteUnavailable("AzuriteProcess(oauth=True) needs a cert_dir for its certificate")
            cert, key = self_signed_cert(self.cert_dir)
            self.ca_bundle = cert
            cmd += ["--cert", str(cert), "--key", str(key), "--oauth"]
        started = child.start_announcing(cmd, timeout)
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
    parser.add_argument("--cert", help="serve HTTPS with this certificate (PEM; with --key)")
    parser.add_argument("--key", help="the certificate's private key (PEM)")
    parser.add_argument("--oauth", action="store_true", help="check bearer tokens (Azurite's --oauth basic; HTTPS)")
    args = parser.parse_args(argv)
    if args.install:
        if not _binary(install_dir()).exists():
            ensure_node()
        print(ensure_installed())
        return
    if bool(args.cert) != bool(args.key):
        parser.error("--cert and --key go together")
    if args.oauth and not args.cert:
        parser.error("--oauth needs --cert and --key: Azurite takes bearer tokens over HTTPS only")
    serve(args.port, host=args.host, detached=args.detached, cert=args.cert, key=args.key, oauth=args.oauth)


if __name__ == "__main__":
    main()
