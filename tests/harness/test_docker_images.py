"""The docker backend's images copy what the cluster imports (no Docker engine needed): the
Dockerfiles' COPY lines, the ``.dockerignore`` allow-list and ``IMAGE_SOURCES`` (the content
hash) name the same files, and every first-party package the cluster code imports is among
them — a package left out builds fine and fails only when a query reaches it on an executor."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from harness.docker_images import IMAGE_SOURCES

REPO = Path(__file__).resolve().parents[2]
DOCKERFILES = ("docker/Dockerfile", "docker/Dockerfile.s3")
CLUSTER_PACKAGES = ("executor_lib", "connect_plugin", "harness")  # what runs in the node image


def copied_sources(dockerfile: str) -> set[str]:
    """The repository paths a Dockerfile's COPY lines take (the wheels directory aside)."""
    sources: set[str] = set()
    for line in (REPO / dockerfile).read_text().splitlines():
        if line.startswith("COPY ") and "--from" not in line:
            sources.update(s.rstrip("/") for s in line.split()[1:-1] if not s.startswith("docker/wheels"))
    return sources


def dockerignore_allowed() -> set[str]:
    return {line[1:].rstrip("/") for line in (REPO / ".dockerignore").read_text().splitlines() if line.startswith("!")}


def first_party_imports(package: str) -> set[str]:
    """Top-level first-party packages that modules of ``package`` import (at any level)."""
    found: set[str] = set()
    for path in (REPO / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if (REPO / top / "__init__.py").exists() or (REPO / f"{top}.py").exists():
                    found.add(top)
    return found


def test_dockerfiles_the_allow_list_and_the_image_hash_name_the_same_sources() -> None:
    copied = set().union(*(copied_sources(d) for d in DOCKERFILES))
    assert copied, "no COPY line parsed"
    assert copied <= dockerignore_allowed(), f"copied but excluded by .dockerignore: {copied - dockerignore_allowed()}"
    hashed = set(IMAGE_SOURCES) - set(DOCKERFILES) - {"docker/Dockerfile.azurite"}
    assert copied == hashed, f"COPY lines {sorted(copied)} vs IMAGE_SOURCES {sorted(hashed)}"


def test_the_node_image_holds_every_package_the_cluster_code_imports() -> None:
    node_image = copied_sources("docker/Dockerfile")
    imported = set().union(*(first_party_imports(p) for p in CLUSTER_PACKAGES))
    assert "indextables_contract" in imported  # the scan sees the package that was once left out
    missing = {p for p in imported if p not in node_image and f"{p}.py" not in node_image}
    assert not missing, f"docker/Dockerfile does not copy {sorted(missing)}, which the cluster code imports"


def test_the_s3_image_copies_only_what_its_server_needs() -> None:
    assert copied_sources("docker/Dockerfile.s3") == {"harness"}
    command = re.search(r"CMD \[(.*)\]", (REPO / "docker/Dockerfile.s3").read_text())
    assert command is not None and "harness.moto_server" in command.group(1)


def test_the_azurite_image_copies_its_npm_install_and_the_harness_and_runs_the_harness_launcher() -> None:
    """Built from docker/azurite/ (node_modules from the host's npm install and a copy of harness/,
    ``ensure_azurite_image``), not the repository root: the root's context leaves it out."""
    assert copied_sources("docker/Dockerfile.azurite") == {"node_modules", "harness"}
    assert "docker/Dockerfile.azurite" in IMAGE_SOURCES  # its changes rebuild it
    assert "docker/azurite" not in dockerignore_allowed()
    command = re.search(r"CMD \[(.*)\]", (REPO / "docker/Dockerfile.azurite").read_text())
    assert command is not None and '"harness.azurite"' in command.group(1) and '"0.0.0.0"' in command.group(1)
