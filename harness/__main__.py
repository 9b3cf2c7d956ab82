"""``python -m harness up|down|status|images [--run-dir DIR] [--workers N] [--backend process|docker]
[--storage s3|azure|gcs]``.

``up`` starts S3 (or, with ``--storage azure``, Azure Blob Storage: Azurite; with ``--storage gcs``, Google
Cloud Storage: fake-gcs-server, process backend only), a Spark master, N
workers and a Spark Connect server (processes on 127.0.0.1, or containers with ``--backend docker``)
and prints their endpoints; ``status`` prints what runs and exits 0 when everything recorded is up, 1
when part of it is down, and 3 when nothing is running (nothing was started in the run directory, or
``down`` stopped it: ``STATUS_NOT_RUNNING``, as an init script's ``status``); ``down`` stops exactly
what ``up`` recorded in ``DIR/cluster.json`` (whichever backend started it); ``images`` builds or
reuses the docker backend's images (with ``--storage azure`` the Azurite image too) and prints their
tags and what building took.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from harness.cluster import ClusterError, ProcessCluster
from harness.docker_cluster import DockerCluster, DockerUnavailableError, attach_cluster
from harness.docker_images import ensure_images

DEFAULT_RUN_DIR = ".harness"
# ``status`` exit codes: all up, part of it down, an error (bad flags...), nothing running.
STATUS_UP, STATUS_PARTLY_DOWN, STATUS_ERROR, STATUS_NOT_RUNNING = 0, 1, 2, 3


def _cluster(args: argparse.Namespace, attach: bool) -> Any:
    if attach:
        return attach_cluster(args.run_dir)
    if args.backend == "docker":
        return DockerCluster(args.run_dir, workers=args.workers, storage=args.storage)
    return ProcessCluster(args.run_dir, workers=args.workers, storage=args.storage)


def _print_endpoints(info: Any) -> None:
    print(f"Spark Connect : {info.connect_url}")
    print(f"Spark master  : {info.master_url}  (UI {info.master_ui})")
    if getattr(info, "storage", "s3") == "gcs":
        print(
            f"GCS endpoint  : {info.gcs_endpoint}  bucket {info.bucket}  (fake-gcs-server; every node has "
            "STORAGE_EMULATOR_HOST)"
        )
        print(f"tables        : gs://{info.bucket}/<path>")
    elif getattr(info, "storage", "s3") == "azure":
        from harness.azurite import ACCOUNT

        print(
            f"Azure endpoint: {info.azure_endpoint}  container {info.bucket}  (Azurite; every node has "
            "AZURE_STORAGE_CONNECTION_STRING)"
        )
        print(f"tables        : abfss://{info.bucket}@{ACCOUNT}.dfs.core.windows.net/<path>")
    else:
        print(f"S3 endpoint   : {info.s3_endpoint}  bucket {info.bucket}  (credentials testing/testing)")
    if info.backend == "docker":
        print(f"containers    : {' '.join(info.containers.values())}  (network {info.network})")
        print(f"run directory : {info.run_dir}  (cluster.json; worker caches are the volumes {' '.join(info.volumes)})")
    else:
        print(f"run directory : {info.run_dir}  (logs/, pids/, cache/worker-N/)")


def _images(storage: str) -> int:
    images = ensure_images(azure=storage == "azure")
    built = ", ".join(f"{name} {s:.0f}s" for name, s in images.seconds.items()) or "nothing (all reused)"
    azurite = f"\nazurite {images.azurite}" if images.azurite else ""
    print(f"base  {images.base}\nnode  {images.node}\ns3    {images.s3}{azurite}\nbuilt {built}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["up", "down", "status", "images"])
    parser.add_argument("--run-dir", default=DEFAULT_RUN_DIR, help="logs, pid files, caches")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--backend",
        choices=["process", "docker"],
        default="process",
        help="for up; status and down use the backend that started the cluster",
    )
    parser.add_argument(
        "--storage",
        choices=["s3", "azure", "gcs"],
        default="s3",
        help="for up and images: moto (S3), Azurite (Azure Blob Storage) or fake-gcs-server (GCS; process backend)",
    )
    parser.add_argument("--json", action="store_true", help="status as one JSON object")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    try:
        if args.action == "images":
            return _images(args.storage)
        if args.action == "up":
            _print_endpoints(_cluster(args, attach=False).up())
            return 0
        if args.action == "status":
            return _status(args)
        cluster = _cluster(args, attach=True)
        if args.action == "down":
            stopped = cluster.down()
            print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
            return 0
        raise AssertionError(f"unhandled action {args.action}")  # argparse allows no other
    except (ClusterError, DockerUnavailableError) as e:
        print(f"harness {args.action}: {e}", file=sys.stderr)
        return STATUS_ERROR


def _status(args: argparse.Namespace) -> int:
    """``status``: what runs, and ``STATUS_UP`` / ``STATUS_PARTLY_DOWN`` / ``STATUS_NOT_RUNNING``."""
    try:
        status = _cluster(args, attach=True).status()
    except ClusterError as e:
        if "no cluster.json" not in str(e):
            raise
        status = None
    running = status is not None and any(status["alive"].values())
    if args.json:
        print(json.dumps({"running": running, **(status or {})}, indent=2))
    if status is None or not running:
        how = "nothing was started there" if status is None else "its processes are stopped (down) or gone"
        if not args.json:
            print(f"nothing is running in {args.run_dir}: {how}; python -m harness up starts a cluster")
        return STATUS_NOT_RUNNING
    if not args.json:
        print(_status_text(status))
    return STATUS_UP if all(status["alive"].values()) else STATUS_PARTLY_DOWN


def _status_text(status: dict[str, Any]) -> str:
    alive = ", ".join(f"{name}={'up' if ok else 'DOWN'}" for name, ok in status["alive"].items())
    return (
        f"{status['backend']} backend: {alive or 'nothing'}\n"
        f"workers registered: {status['alive_workers']}/{status['workers']}\n"
        f"connect {status['connect_url']} listening={status['connect_listening']}"
    )


if __name__ == "__main__":
    sys.exit(main())
