"""The stress workload of ``harness.stress`` on the docker backend, with faults only containers give.

``run_container_stress(cluster, cfg, work_dir)`` runs the stress roles as processes inside the
cluster's node containers (``docker exec``), talking to the S3 container by its network name:

* ``worker-1``: writers 0 and 1; ``worker-2``: writer 2 and the merger; ``master``: the
  checkpointer, the reader and table B's overwriter, appender and killed writer.

While they run, one thread injects, each at a moment the processes' own reports show:

1. ``kill_mid_write``: ``docker kill`` of worker-1 while one of its writers is uploading splits
   or committing (its last report must show it died there, else it is tried again); the
   container is started again and new writers run in it;
2. ``kill_mid_merge``: the same for worker-2 while the merger merges or commits the merge;
3. ``net_disconnect``: worker-1 cut off the network (so from S3) for ``outage_s`` while a writer
   in it is working, then connected again;
4. ``s3_pause``: the S3 container frozen (``docker pause``) for ``outage_s`` while commits are in
   flight, then thawed.

Each process writes its report to a directory bind-mounted into every node container
(``/exchange``) after every acknowledged commit and phase change, so a killed process still
tells what it was told. Afterwards ``harness.stress.check`` verifies the same invariants as for
the process workload, from the host, through S3's published port; the container faults are
counted in the summary's ``faults[...]``. ``python -m harness.container_stress node ...`` is the
entry point inside a container.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from harness.stress import StressConfig, StressResult, check, ensure_tables, run_role

EXCHANGE = "/exchange"  # where DockerCluster mounts run_dir/exchange in every node container
PLACEMENT = {
    "worker-1": [("writer", 0), ("writer", 1)],
    "worker-2": [("writer", 2), ("merger", 0)],
    "master": [("checkpointer", 0), ("reader", 0), ("overwriter", 0), ("appender_b", 100), ("killed", 0)],
}
FINITE = ("writer", "overwriter", "appender_b")


class ContainerStressError(RuntimeError):
    """A fault found no moment to strike, or the roles did not finish in time."""


# --- inside a container -----------------------------------------------------------------------


class FileBarrier:
    """``barrier.wait``: say ``ready-<name>`` and wait for the orchestrator's ``go`` file."""

    def __init__(self, exchange: Path, name: str) -> None:
        self.exchange, self.name = exchange, name

    def wait(self, timeout: float) -> None:
        (self.exchange / f"ready-{self.name}").touch()
        deadline = time.monotonic() + timeout
        while not (self.exchange / "go").exists():
            if time.monotonic() > deadline:
                raise ContainerStressError(f"no go file in {self.exchange} after {timeout:.0f}s")
            time.sleep(0.05)


class FileEvent:
    """``stop.is_set``/``stop.wait``: whether the orchestrator wrote the ``stop`` file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def is_set(self) -> bool:
        return self.path.exists()

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.is_set() and time.monotonic() < deadline:
            time.sleep(min(0.05, timeout))
        return self.is_set()


def node_main(config: str, role: str, arg: int, name: str) -> None:
    """Run one stress role with the config the orchestrator wrote (in a node container)."""
    exchange = Path(config).parent
    cfg = StressConfig(**json.loads(Path(config).read_text()))
    run_role(role, cfg, FileBarrier(exchange, name), FileEvent(exchange / "stop"), str(exchange / f"{name}.json"), arg)


# --- on the host ------------------------------------------------------------------------------


class _Run:
    """The roles of one run: where each runs, its report, whether a container kill ended it."""

    def __init__(self, cluster: Any, exchange: Path) -> None:
        self.cluster, self.exchange = cluster, exchange
        self.roles: dict[str, tuple[str, str, int]] = {}  # name -> (node, role, arg)
        self.killed: set[str] = set()

    def launch(self, node: str, role: str, arg: int) -> str:
        name = f"{role}-{arg}-{len(self.roles)}"
        self.roles[name] = (node, role, arg)
        command = f"exec python -m harness.container_stress node {EXCHANGE}/config.json {role} {arg} {name}"
        self.cluster.exec_detached(node, ["sh", "-c", f"{command} > {EXCHANGE}/{name}.log 2>&1"])
        return name

    def report(self, name: str) -> dict[str, Any]:
        path = self.exchange / f"{name}.json"
        try:
            return dict(json.loads(path.read_text()))
        except (OSError, ValueError):
            return {}

    def on(self, node: str, role: str | None = None) -> list[str]:
        return [
            n
            for n, (where, r, _) in self.roles.items()
            if where == node and n not in self.killed and (role is None or r == role)
        ]

    def kill(self, node: str) -> None:
        self.cluster.kill(node)
        self.killed.update(self.on(node))

    def reports(self) -> list[dict[str, Any]]:
        out = []
        for name, (_, role, _) in self.roles.items():
            report = self.report(name) or {"role": role}
            if name in self.killed:
                report.pop("errors", None)  # it was killed on purpose; what it acknowledged still counts
            elif not report.get("done") and role != "killed":
                report.setdefault("errors", []).append(f"{name}: never finished (see {self.exchange / name}.log)")
            out.append(report)
        return out


def _await(what: str, ready: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise ContainerStressError(f"no moment for {what} within {timeout_s:.0f}s")
        time.sleep(0.05)


def _phase_in(run: _Run, names: list[str], phases: tuple[str, ...]) -> bool:
    return any(run.report(n).get("phase") in phases and not run.report(n).get("done") for n in names)


def _kill_during(run: _Run, node: str, role: str, phases: tuple[str, ...], wait_s: float) -> None:
    """``docker kill`` ``node`` when one of its ``role`` processes is in one of ``phases``, start it
    again and put the same roles back; repeated (up to 3 times) until a killed process's last
    report shows it died in one of those phases (not just after)."""
    for _ in range(3):
        _await(f"a kill of {node} during {role} {phases}", lambda: _phase_in(run, run.on(node, role), phases), wait_s)
        victims = run.on(node)
        run.kill(node)
        run.cluster.restart(node)
        for name in victims:
            _, again, arg = run.roles[name]
            run.launch(node, again, arg + 10)
        if any(run.report(n).get("phase") in phases and run.roles[n][1] == role for n in victims):
            return
    raise ContainerStressError(f"{role} on {node} was never killed during {phases} in 3 tries")


def _faults(run: _Run, cfg: StressConfig, outage_s: float, counts: dict[str, int]) -> None:
    """The container faults, in order, each when the reports show its moment."""
    cluster, wait_s = run.cluster, cfg.timeout_s / 4
    _kill_during(run, "worker-1", "writer", ("uploading", "committing"), wait_s)
    counts["kill_mid_write"] = 1
    _kill_during(run, "worker-2", "merger", ("merging", "committing"), wait_s)
    counts["kill_mid_merge"] = 1
    _await("a network cut", lambda: _phase_in(run, run.on("worker-1", "writer"), ("uploading", "committing")), wait_s)
    cluster.disconnect("worker-1")
    time.sleep(outage_s)
    cluster.connect("worker-1")
    counts["net_disconnect"] = 1
    writers = [n for n, (_, role, _) in run.roles.items() if role == "writer" and n not in run.killed]
    _await("an S3 pause", lambda: _phase_in(run, writers, ("committing",)), wait_s)
    cluster.pause("s3")
    time.sleep(outage_s)
    cluster.unpause("s3")
    counts["s3_pause"] = 1


def run_container_stress(cluster: Any, cfg: StressConfig, work_dir: Path, outage_s: float = 4.0) -> StressResult:
    """Run the workload in ``cluster``'s containers (``cfg.storage`` as the host reaches S3)."""
    start = time.monotonic()
    ensure_tables(cfg)
    exchange = cluster.run_dir / "exchange"
    for old in exchange.iterdir():
        old.unlink()
    node_cfg = replace(
        cfg,
        storage={
            "endpoint_url": "http://s3:9000",
            "region": "us-east-1",
            "path_style": True,
            "access_key_id": "testing",
            "secret_access_key": "testing",
        },
    )
    (exchange / "config.json").write_text(json.dumps(asdict(node_cfg)))
    run = _Run(cluster, exchange)
    for node, roles in PLACEMENT.items():
        for role, arg in roles:
            run.launch(node, role, arg)
    first = list(run.roles)
    _await("all roles ready", lambda: all((exchange / f"ready-{n}").exists() for n in first), 300)
    (exchange / "go").touch()
    counts: dict[str, int] = {}
    failure: list[BaseException] = []
    injector = threading.Thread(target=lambda: _catch(failure, _faults, run, cfg, outage_s, counts))
    injector.start()
    injector.join(timeout=cfg.timeout_s)
    deadline = time.monotonic() + cfg.timeout_s

    def finished() -> bool:
        names = [n for n, (_, role, _) in run.roles.items() if role in FINITE and n not in run.killed]
        return all(run.report(n).get("done") for n in names)

    while not finished() and time.monotonic() < deadline:
        time.sleep(0.2)
    (exchange / "stop").touch()
    loopers = [n for n, (_, role, _) in run.roles.items() if role not in ("killed", *FINITE) and n not in run.killed]
    end = time.monotonic() + 60
    while time.monotonic() < end and not all(run.report(n).get("done") for n in loopers):
        time.sleep(0.2)
    result = check(cfg, run.reports(), work_dir)
    result.faults.update(counts)
    result.errors += [f"fault injection: {type(e).__name__}: {e}" for e in failure]
    result.duration_s = time.monotonic() - start
    return result


def _catch(failure: list[BaseException], fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except BaseException as e:
        failure.append(e)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="run one stress role in a node container")
    parser.add_argument("action", choices=["node"])
    parser.add_argument("config")
    parser.add_argument("role")
    parser.add_argument("arg", type=int)
    parser.add_argument("name")
    args = parser.parse_args(argv)
    node_main(args.config, args.role, args.arg, args.name)


if __name__ == "__main__":
    main()
