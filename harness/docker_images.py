"""The docker backend's images, built here without a registry and reused by content hash.

``ensure_images()`` returns the tags of the node image (``docker/Dockerfile``: Java 17, Python
with this project and PySpark) and the S3 image (``docker/Dockerfile.s3``: moto's server with the
lock patch), building only what is missing:

1. the base ``indextables-base:<hash>``: a Debian root filesystem made by ``mmdebstrap`` from
   Debian's packages (``BASE_PACKAGES``), loaded with ``docker import``; the hash covers the
   suite, the mirror and the package list, so a second run finds the image and skips this;
2. ``docker/wheels/``: every Python dependency as a wheel (``pip wheel`` with this interpreter,
   using the host's pip cache and configuration), so ``docker build`` runs with ``--no-index``
   and needs no network; a stamp file holds the hash of the requirements it was made for;
3. ``indextables-node:<hash>`` and ``indextables-s3:<hash>``: ``docker build`` with ``BASE`` set
   to the local base; the hash covers the Dockerfile, the base, the wheels and every file the
   image copies, so an unchanged checkout reuses the images and a changed one rebuilds only its
   source layers (Docker's layer cache keeps the dependency layer);
4. with ``azure=True`` (``--storage azure``), ``indextables-azurite:<hash>`` (``docker/Dockerfile.azurite``):
   Azurite on a second Debian base with ``python3`` and ``nodejs`` (``AZURITE_BASE_PACKAGES``), its
   npm package copied from the host's install (``harness.azurite.ensure_installed``, npm registry)
   into ``docker/azurite/``, so this build needs no registry either.

Older tags of the same images are removed after a build, so disk use stays bounded. Errors are
``DockerUnavailableError`` naming the command that failed and the end of its output.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
WHEELS = REPO_ROOT / "docker" / "wheels"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-venv", "openjdk-17-jre-headless", "procps")
# Besides pyproject's dependencies and its spark, s3 and azure extras: moto for the S3 image and the
# build backend for installing this project offline.
EXTRA_WHEELS = ("moto[server]>=5.0.20", "setuptools>=77", "wheel")
NATIVE_PACKAGE = "indextables-native"  # pyproject's requirement of the native engine ...
NATIVE_DIR = "./native"  # ... whose wheel is built from this checkout
# The Azurite image's base: Debian's Node.js (18) runs the npm package, python3 its launcher.
AZURITE_BASE_PACKAGES = ("python3", "nodejs")
AZURITE_FILES = REPO_ROOT / "docker" / "azurite"
# What the Dockerfiles copy from the repository (the .dockerignore allow-list says the same;
# tests/harness/test_docker_images.py checks the three agree).
IMAGE_SOURCES = (
    "pyproject.toml",
    "README.md",
    "PROTOCOL.md",
    "pyspark_indextables.py",
    "pyspark_indextables_provider.py",
    "pyspark_indextables_spark.py",
    "executor_lib",
    "connect_plugin",
    "indextables_contract",
    "harness",
    "docker/Dockerfile",
    "docker/Dockerfile.s3",
    "docker/Dockerfile.azurite",
)


class DockerUnavailableError(RuntimeError):
    """No docker client, no engine answering it, or an image that could not be built."""


@dataclass(frozen=True)
class Images:
    base: str
    node: str
    s3: str
    seconds: dict[str, float]  # what was built in this call and how long it took (empty: all reused)
    azurite: str = ""  # with ensure_images(azure=True)


def docker(*args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the docker client; a failure raises ``DockerUnavailableError`` with its stderr."""
    env = {**os.environ, "DOCKER_BUILDKIT": "0"}  # the legacy builder: no buildx plugin needed
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False, env=env)
    if check and done.returncode != 0:
        output = (done.stderr or done.stdout).strip()[-2000:]
        raise DockerUnavailableError(f"docker {' '.join(args[:6])} failed (exit {done.returncode}): {output}")
    return done


def docker_available() -> str | None:
    """``None`` when a Docker engine answers, else why not."""
    if shutil.which("docker") is None:
        return "no docker client on PATH (bash scripts/docker-engine.sh installs and starts one)"
    done = docker("info", "--format", "{{.ServerVersion}}", timeout=30, check=False)
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip()[:300]
        return f"no Docker engine answers `docker info` (bash scripts/docker-engine.sh starts one): {reason}"
    return None


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False, timeout=60).returncode == 0


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def base_tag(packages: tuple[str, ...] = BASE_PACKAGES, repo: str = "indextables-base") -> str:
    return f"{repo}:" + _digest(SUITE, MIRROR, *packages, "mmdebstrap-apt-v1")


def ensure_base(packages: tuple[str, ...] = BASE_PACKAGES, repo: str = "indextables-base") -> tuple[str, float]:
    """The tag of a Debian base image with ``packages``, and the seconds spent making it (0 when it existed)."""
    tag = base_tag(packages, repo)
    if image_exists(tag):
        return tag, 0.0
    start = time.monotonic()
    _ensure_mmdebstrap()
    with tempfile.TemporaryDirectory(prefix="indextables-rootfs-") as tmp:
        tar = Path(tmp) / "rootfs.tar"
        cmd = [
            "mmdebstrap",
            "--variant=apt",
            f"--include={','.join(packages)}",
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-exclude=/usr/share/locale/*",
            # openjdk's postinst links its man page into man1, which must exist
            '--setup-hook=mkdir -p "$1/usr/share/man/man1"',
            SUITE,
            str(tar),
            MIRROR,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
        if done.returncode != 0:
            raise DockerUnavailableError(f"mmdebstrap failed (exit {done.returncode}): {done.stderr[-2000:]}")
        docker(
            "import",
            "-c",
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "-c",
            "ENV LANG=C.UTF-8",
            str(tar),
            tag,
            timeout=600,
        )
    return tag, time.monotonic() - start


def _ensure_mmdebstrap() -> None:
    if shutil.which("mmdebstrap"):
        return
    if os.geteuid() != 0:
        raise DockerUnavailableError("mmdebstrap is needed to build the base image: apt-get install mmdebstrap")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "mmdebstrap"],
    ):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, env=env)
        if done.returncode != 0:
            raise DockerUnavailableError(f"{' '.join(cmd)} failed: {done.stderr[-1000:]}")


def ensure_wheels() -> float:
    """Fill ``docker/wheels`` for the current requirements; seconds spent (0 when up to date)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10 (the package's oldest): the same parser, as the tomli backport
        import tomli as tomllib

    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    requirements = [*project["dependencies"], *extras["spark"], *extras["s3"], *extras["azure"], *EXTRA_WHEELS]
    # the native engine is this checkout's: its wheel is built from native/ (cargo, through maturin)
    requirements = [NATIVE_DIR if r.startswith(NATIVE_PACKAGE) else r for r in requirements]
    stamp_value = _digest(*requirements, _native_digest())
    stamp = WHEELS / ".requirements-hash"
    if stamp.exists() and stamp.read_text() == stamp_value and any(WHEELS.glob("pyspark-*.whl")):
        return 0.0
    start = time.monotonic()
    for old in WHEELS.glob("*.whl"):
        old.unlink()
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(WHEELS), *requirements]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise DockerUnavailableError(f"{' '.join(cmd)} failed: {done.stderr[-2000:]}")
    stamp.write_text(stamp_value)
    return time.monotonic() - start


def _native_digest() -> str:
    h = hashlib.sha256()
    for f in sorted((REPO_ROOT / "native").rglob("*")):
        if f.is_file() and "target" not in f.relative_to(REPO_ROOT / "native").parts:
            h.update(str(f.relative_to(REPO_ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _sources_digest(*extra: str) -> str:
    h = hashlib.sha256()
    for name in IMAGE_SOURCES:
        path = REPO_ROOT / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for f in files:
            if "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            h.update(str(f.relative_to(REPO_ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    for wheel in sorted(WHEELS.glob("*.whl")):
        h.update(f"{wheel.name}:{wheel.stat().st_size}".encode())
    for part in extra:
        h.update(part.encode())
    return h.hexdigest()[:16]


def _build(dockerfile: str, tag: str, build_args: dict[str, str], context: Path = REPO_ROOT) -> float:
    start = time.monotonic()
    args = ["build", "--quiet", "-f", str(REPO_ROOT / dockerfile), "-t", tag]
    for key, value in {**build_args, "PIP_OPTIONS": "--no-index"}.items():
        args += ["--build-arg", f"{key}={value}"]
    docker(*args, str(context), timeout=1800)
    _remove_other_tags(tag)
    return time.monotonic() - start


def _remove_other_tags(tag: str) -> None:
    repo = tag.split(":", 1)[0]
    listed = docker("image", "ls", "--format", "{{.Repository}}:{{.Tag}}", repo, timeout=60).stdout.split()
    for old in listed:
        if old != tag:
            docker("image", "rm", old, check=False, timeout=300)  # in use by a running cluster: kept


def ensure_azurite_files() -> float:
    """Fill ``docker/azurite`` (the Azurite image's build context) with the host's Azurite install
    (npm), for an offline image build; seconds spent (0 when it holds this version already).

    Raises:
        DockerUnavailableError: Azurite cannot be installed on the host (no npm).
    """
    from harness.azurite import VERSION, AzuriteUnavailable, ensure_installed, install_dir

    stamp = AZURITE_FILES / ".azurite-version"
    if stamp.exists() and stamp.read_text() == VERSION and (AZURITE_FILES / "node_modules").is_dir():
        return 0.0
    start = time.monotonic()
    try:
        ensure_installed()
    except AzuriteUnavailable as e:
        raise DockerUnavailableError(f"the Azurite image copies the host's Azurite: {e}") from e
    shutil.rmtree(AZURITE_FILES / "node_modules", ignore_errors=True)
    AZURITE_FILES.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        if (install_dir() / name).exists():
            shutil.copy2(install_dir() / name, AZURITE_FILES / name)
    shutil.copytree(install_dir() / "node_modules", AZURITE_FILES / "node_modules", symlinks=True)
    stamp.write_text(VERSION)
    return time.monotonic() - start


def ensure_azurite_image(seconds: dict[str, float]) -> str:
    """The Azurite image's tag, built if missing (its base and files first); ``seconds`` gets what was built."""
    from harness.azurite import VERSION

    base, spent = ensure_base(AZURITE_BASE_PACKAGES, "indextables-azurite-base")
    if spent:
        seconds["azurite-base"] = spent
    spent = ensure_azurite_files()
    if spent:
        seconds["azurite-files"] = spent
    tag = "indextables-azurite:" + _sources_digest(base, "azurite", VERSION)
    if not image_exists(tag):
        # its own build context (node_modules and a copy of harness/): the repository's context
        # leaves docker/azurite out, so the other images' builds do not send its 190 MB
        shutil.rmtree(AZURITE_FILES / "harness", ignore_errors=True)
        shutil.copytree(
            REPO_ROOT / "harness", AZURITE_FILES / "harness", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
        seconds["azurite"] = _build("docker/Dockerfile.azurite", tag, {"BASE": base}, context=AZURITE_FILES)
    return tag


def ensure_images(azure: bool = False) -> Images:
    """Build whatever of base, wheels, node and S3 image (and with ``azure`` the Azurite image) is
    missing; return the tags."""
    reason = docker_available()
    if reason:
        raise DockerUnavailableError(reason)
    seconds: dict[str, float] = {}
    base, spent = ensure_base()
    if spent:
        seconds["base"] = spent
    spent = ensure_wheels()
    if spent:
        seconds["wheels"] = spent
    node = "indextables-node:" + _sources_digest(base)
    if not image_exists(node):
        seconds["node"] = _build("docker/Dockerfile", node, {"BASE": base})
    s3 = "indextables-s3:" + _sources_digest(base, "s3")
    if not image_exists(s3):
        seconds["s3"] = _build("docker/Dockerfile.s3", s3, {"BASE": base})
    azurite = ensure_azurite_image(seconds) if azure else ""
    return Images(base=base, node=node, s3=s3, seconds=seconds, azurite=azurite)
