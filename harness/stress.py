"""Concurrent-commit stress workload on S3, with faults, and the invariants checked after it.

``run_stress(cfg)`` creates (or joins) a shared table A and a private table B, then starts
processes released together by a barrier:

* ``cfg.writers`` appenders on A (each commit adds two splits of ``rows_per_split`` rows);
* a merger (merges A's smallest splits and commits remove+add atomically), a checkpointer and
  a reader on A (the reader checks every snapshot it sees: versions never go back, the row
  count is a whole number of commits — no partial commit — and, every few snapshots, the rows
  read from the splits equal the snapshot's ``numRecords``);
* on B: an overwriter (replace everything, failing on a concurrent add), an appender, and a
  writer killed (SIGKILL) between uploading its splits and committing;
* every process's S3 client (or Azure store) gets a ``FaultInjector`` (503s, resets, timeouts,
  ambiguous puts).

Afterwards ``check`` verifies, at log level (never trusting what writers were told): versions
contiguous; every acknowledged commit present exactly once at its version; no transaction or
file added twice; every file of the latest state exists; rows read = sum of ``numRecords`` =
rows added by data commits; readers saw no violation; and on B, a purge (clock moved past the
retention) deletes the killed writer's orphaned splits and nothing the table still needs: every
version purge keeps readable still has all its files.
``StressResult.summary()`` is the one-line report. Several ``run_stress`` calls (pytest-xdist
workers) can share table A: each checks the invariants on the prefix of the log it saw.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing as mp
import os
import signal
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from harness.faults import FaultInjector
from harness.log_checker import LogReport, check_log

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.string()), ("body", pa.string())])


@dataclass(frozen=True)
class StressConfig:
    table_a: str  # shared by every run_stress call of one test run
    table_b: str  # private to this call
    storage: dict[str, Any]
    writers: int = 3
    commits_per_writer: int = 6
    rows_per_split: int = 50
    fault_rate: float = 0.03
    merges: bool = True
    checkpoints: bool = True
    readers: int = 1
    table_b_workload: bool = True
    seed: int = 0
    timeout_s: float = 600.0


@dataclass
class StressResult:
    attempted: int = 0
    landed: int = 0
    acknowledged: int = 0
    conflicts: int = 0
    retries: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    rows_written: int = 0
    rows_read: int = 0
    lost: list[Any] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    reader_snapshots: int = 0
    orphans_purged: int = 0
    duration_s: float = 0.0

    # What the summary's counts mean (printed once above the summaries).
    LEGEND = (
        "legend: attempted = commits this run's writers and merger tried (data and MERGE); landed = versions "
        "in the logs holding a split this run uploaded (an attempt whose outcome was unknown may land; other "
        "runs sharing table A are not counted), so attempted >= landed; acked = commits a writer was told it "
        "won, so landed >= acked; rows written = rows of the acked data commits, rows read = rows of the "
        "tables' final states (B's overwrites remove rows); lost = acked commits missing from the log (must be "
        "0, except in the unpatched-moto self-test, which proves the checker catches losses)"
    )

    def summary(self, label: str = "stress") -> str:
        """One line; ``label`` names the run (a self-test where losses are expected says so)."""
        faults = ",".join(f"{k}={v}" for k, v in sorted(self.faults.items())) or "none"
        return (
            f"{label}: commits attempted={self.attempted} landed={self.landed} acked={self.acknowledged} "
            f"conflicts={self.conflicts} retries={self.retries} faults[{faults}] rows written={self.rows_written} "
            f"read={self.rows_read} reader snapshots={self.reader_snapshots} orphans purged={self.orphans_purged} "
            f"lost={len(self.lost)} duplicated={len(self.duplicated)} violations={len(self.violations)} "
            f"in {self.duration_s:.1f}s"
        )


# --- the processes --------------------------------------------------------------------------


def _open(uri: str, storage: dict[str, Any], fault_rate: float, seed: int) -> tuple[Any, FaultInjector]:
    import executor_lib

    log = executor_lib.open_log(uri, **storage)
    faults = FaultInjector(fault_rate, seed=seed)
    if hasattr(log.store, "set_request_hook") or getattr(log.store, "client", None) is not None:
        faults.install_store(log.store)
    return log, faults


def _rows(tag: str, n: int) -> pa.Table:
    base = uuid.uuid4().int % (1 << 40)
    return pa.table(
        {"id": pa.array(range(base, base + n), pa.int64()), "writer": [tag] * n, "body": [f"row of {tag}"] * n},
        schema=SCHEMA,
    )


def _upload(log: Any, tag: str, rows: int, splits: int) -> list[Any]:
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.publish import write_and_upload

    mapping = mapping_for(SCHEMA, {})
    return [write_and_upload(log.store, _rows(tag, rows), mapping) for _ in range(splits)]


def run_role(role: str, cfg: StressConfig, barrier: Any, stop: Any, out: str, arg: int) -> None:
    """Entry point of every stress process (one ``role``: writer, merger, checkpointer ...); writes its
    report as JSON to ``out`` — after every acknowledged commit and phase change too (``_flush``), so a
    process killed from outside leaves what it was told and what it was doing. ``done`` is set at the end."""
    report: dict[str, Any] = {"role": role, "out": out, "acks": [], "errors": [], "conflicts": 0, "attempted": 0}
    log = faults = None
    try:
        uri = cfg.table_b if role in ("overwriter", "appender_b", "killed") else cfg.table_a
        log, faults = _open(uri, cfg.storage, 0.0 if role == "killed" else cfg.fault_rate, cfg.seed * 1000 + arg)
        report["_faults"], report["_log"] = faults, log
        barrier.wait(timeout=300)
        ROLES[role](log, cfg, stop, report, arg)
    except BaseException as e:  # reported to the parent, which fails the run
        report["errors"].append(f"{role}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}")
    finally:
        report["done"] = True
        _flush(report)


def _flush(report: dict[str, Any], phase: str | None = None) -> None:
    """Write ``report`` (with the fault counts and commit stats so far) atomically to its file."""
    if phase is not None:
        report["phase"] = phase
    faults, log = report.get("_faults"), report.get("_log")
    if faults is not None:
        report["faults"] = dict(faults.counts)
    if log is not None:
        report["commit_stats"] = dict(log.commit_stats)
    out = Path(report["out"])
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({k: v for k, v in report.items() if not k.startswith("_")}))
    os.replace(tmp, out)


def _append(log: Any, cfg: StressConfig, stop: Any, report: dict[str, Any], arg: int) -> None:
    from indextables_contract.errors import CommitFailedError, StorageError

    for k in range(cfg.commits_per_writer):
        report["attempted"] += 1
        adds: list[Any] = []
        try:
            _flush(report, "uploading")
            adds = _upload(log, f"w{arg}-{k}", cfg.rows_per_split, 2)
            _flush(report, "committing")
            version = log.commit(adds, new_files=True)  # new uploads: no live-file lookup, as the Spark writer
        except (CommitFailedError, StorageError) as e:  # faults beyond every retry: not acknowledged
            _abandon(report, adds, e)
            continue
        report["acks"].append([version, [a.path for a in adds], sum(a.num_records or 0 for a in adds)])
        _flush(report, "committed")


def _merge(log: Any, cfg: StressConfig, stop: Any, report: dict[str, Any], arg: int) -> None:
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.protocol.actions import removes_of
    from executor_lib.splits.write.publish import merge_splits
    from indextables_contract.errors import CommitConflictError, CommitFailedError, StorageError

    cache = SplitCache(Path(tempfile.mkdtemp(prefix="stress-merge-cache-")))
    while not stop.is_set():
        snap = log.snapshot()
        sources = sorted(snap.files, key=lambda a: (a.size, a.path))[:3]
        if len(sources) < 3:
            time.sleep(0.2)
            continue
        report["attempted"] += 1
        merged = []
        try:
            _flush(report, "merging")
            mappings = {a.path: snap.doc_mapping(a) for a in sources}
            merged = [merge_splits(log.store, sources, snap.arrow_schema(), mappings, cache)]
            _flush(report, "committing")
            log.commit([*removes_of(sources, data_change=False), *merged], read_version=snap.version, operation="MERGE")
            report["merges"] = report.get("merges", 0) + 1
            report.setdefault("merged", []).extend(a.path for a in merged)
            _flush(report, "committed")
        except CommitConflictError:
            report["conflicts"] += 1  # another merge took one of the sources first: expected
            _abandon(report, merged, None)
        except (CommitFailedError, StorageError) as e:
            _abandon(report, merged, e)


def _abandon(report: dict[str, Any], uploaded: list[Any], error: BaseException | None) -> None:
    """A commit that failed or conflicted: its uploaded splits are orphans (unless an ambiguous
    commit landed after all, which the log shows) for purge to collect."""
    report.setdefault("abandoned", []).extend(a.path for a in uploaded)
    if error is not None:
        report.setdefault("unacknowledged", []).append(f"{type(error).__name__}: {error}")


def _checkpoint(log: Any, cfg: StressConfig, stop: Any, report: dict[str, Any], arg: int) -> None:
    from indextables_contract.errors import StorageError

    while not stop.wait(0.4):
        report["attempted"] += 1
        try:
            log.checkpoint()
        except StorageError as e:
            report.setdefault("unacknowledged", []).append(f"checkpoint: {e}")


def _read(log: Any, cfg: StressConfig, stop: Any, report: dict[str, Any], arg: int) -> None:
    from executor_lib.cache.split_cache import SplitCache
    from indextables_contract.errors import StorageError

    cache = SplitCache(Path(tempfile.mkdtemp(prefix="stress-read-cache-")))
    unit = 2 * cfg.rows_per_split
    last, seen, violations = -1, 0, report.setdefault("violations", [])
    while not stop.is_set():
        try:
            snap = log.snapshot()
        except StorageError:
            continue  # a fault the retries did not absorb: try again
        seen += 1
        if snap.version < last:
            violations.append(f"snapshot went back from version {last} to {snap.version}")
        if snap.num_records % unit:
            violations.append(f"version {snap.version}: {snap.num_records} rows is not a whole number of commits")
        if seen % 5 == 0:
            rows = _count_rows(log.store, snap, cache)
            if rows != snap.num_records:
                violations.append(f"version {snap.version}: read {rows} rows, numRecords says {snap.num_records}")
        last = snap.version
        time.sleep(0.05)
    report["snapshots"] = seen


def _overwrite(log: Any, cfg: StressConfig, stop: Any, report: dict[str, Any], arg: int) -> None:
    from executor_lib.protocol.actions import removes_of
    from indextables_contract.errors import CommitConflictError, CommitFailedError, StorageError

    for k in range(max(2, cfg.commits_per_writer // 2)):
        report["attempted"] += 1
        snap = log.snapshot()
        adds: list[Any] = []
        try:
            adds = _upload(log, f"ow-{k}", cfg.rows_per_split, 1)
            version = log.commit(
                [*removes_of(snap.files, data_change=True), *adds],
                read_version=snap.version,
                operation="OVERWRITE",
                fail_on_concurrent_add=True,
            )
        except CommitConflictError:
            report["conflicts"] += 1
            _abandon(report, adds, None)
            continue
        except (CommitFailedError, StorageError) as e:
            _abandon(report, adds, e)
            continue
        report["acks"].append([version, [a.path for a in adds], sum(a.num_records or 0 for a in adds)])


def _killed(log: Any, cfg: StressConfig, stop: Any, report: dict[str, Any], arg: int) -> None:
    """Upload two splits, record them, then die before committing (SIGKILL: no cleanup runs)."""
    adds = _upload(log, "killed", cfg.rows_per_split, 2)
    report["orphans"] = [a.path for a in adds]
    _flush(report, "killed")
    os.kill(os.getpid(), signal.SIGKILL)


ROLES: dict[str, Callable[..., None]] = {
    "writer": _append,
    "merger": _merge,
    "checkpointer": _checkpoint,
    "reader": _read,
    "overwriter": _overwrite,
    "appender_b": _append,
    "killed": _killed,
}


def _count_rows(store: Any, snap: Any, cache: Any) -> int:
    from executor_lib.splits.search.table_search import search_table

    return int(search_table(store, snap, None, cache, columns=["id"]).num_rows)


# --- orchestration and checks ---------------------------------------------------------------


def ensure_tables(cfg: StressConfig) -> None:
    """Create A (if no other run did) and B; a concurrent creator of A is fine."""
    import executor_lib
    from indextables_contract.errors import TableAlreadyExistsError

    for uri in (cfg.table_a, cfg.table_b):
        with contextlib.suppress(TableAlreadyExistsError):
            executor_lib.create_table(uri, SCHEMA, **cfg.storage)


def run_stress(cfg: StressConfig, work_dir: Path) -> StressResult:
    ensure_tables(cfg)
    roles = [("writer", i) for i in range(cfg.writers)]
    roles += [("merger", 0)] * cfg.merges + [("checkpointer", 0)] * cfg.checkpoints
    roles += [("reader", i) for i in range(cfg.readers)]
    if cfg.table_b_workload:
        roles += [("overwriter", 0), ("appender_b", 100), ("killed", 0)]
    start = time.monotonic()
    reports = _run_processes(cfg, roles, work_dir)
    result = check(cfg, reports, work_dir)
    result.duration_s = time.monotonic() - start
    return result


def _run_processes(cfg: StressConfig, roles: list[tuple[str, int]], work_dir: Path) -> list[dict[str, Any]]:
    ctx = mp.get_context("spawn")
    barrier, stop = ctx.Barrier(len(roles)), ctx.Event()
    outs = [work_dir / f"{role}-{i}-{n}.json" for n, (role, i) in enumerate(roles)]
    procs = [
        ctx.Process(target=run_role, args=(role, cfg, barrier, stop, str(out), i))
        for (role, i), out in zip(roles, outs, strict=True)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + cfg.timeout_s
    finite = [p for p, (role, _) in zip(procs, roles, strict=True) if role in ("writer", "overwriter", "appender_b")]
    for p in finite:
        p.join(timeout=max(1.0, deadline - time.monotonic()))
    stop.set()
    for p in procs:
        p.join(timeout=max(5.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()
    reports = []
    for out, (role, _), p in zip(outs, roles, procs, strict=True):
        if not out.exists():
            reports.append({"role": role, "errors": [f"{role}: exited with {p.exitcode} and no report"]})
        else:
            reports.append(json.loads(out.read_text()))
    return reports


def check(cfg: StressConfig, reports: list[dict[str, Any]], work_dir: Path) -> StressResult:
    result = StressResult()
    for r in reports:
        result.errors += r.get("errors", [])
        result.violations += r.get("violations", [])
        result.conflicts += r.get("conflicts", 0)
        result.faults.update(r.get("faults", {}))
        stats = r.get("commit_stats", {})
        result.retries += stats.get("lost_races", 0) + stats.get("failed_writes", 0)
        result.reader_snapshots += r.get("snapshots", 0)
        if r["role"] in ("writer", "overwriter", "appender_b", "merger"):
            result.attempted += r.get("attempted", 0)
            result.acknowledged += len(r.get("acks", [])) + r.get("merges", 0)
    a_reports = [r for r in reports if r["role"] == "writer"]
    ours_a = _uploaded([*a_reports, *(r for r in reports if r["role"] == "merger")])
    _check_table(cfg, cfg.table_a, a_reports, result, data_removes=False, ours=ours_a)
    if cfg.table_b_workload:
        b_reports = [r for r in reports if r["role"] in ("overwriter", "appender_b")]
        b_log = _check_table(cfg, cfg.table_b, b_reports, result, data_removes=True, ours=_uploaded(b_reports))
        orphans = [p for r in reports if r["role"] == "killed" for p in r.get("orphans", [])]
        abandoned = {p for r in b_reports for p in r.get("abandoned", [])}
        _check_purge(cfg, orphans, abandoned | b_log.removed_paths, result)
    return result


def _uploaded(reports: list[dict[str, Any]]) -> set[str]:
    """Every split these processes uploaded for a commit: acknowledged, merged, or abandoned (whose commit
    failed, conflicted, or had an unknown outcome)."""
    paths = {p for r in reports for _, ack_paths, _ in r.get("acks", []) for p in ack_paths}
    return paths | {p for r in reports for p in (*r.get("merged", []), *r.get("abandoned", []))}


def _check_table(
    cfg: StressConfig,
    uri: str,
    writers: list[dict[str, Any]],
    result: StressResult,
    data_removes: bool,
    ours: set[str] | None = None,
) -> LogReport:
    import executor_lib
    from executor_lib.cache.split_cache import SplitCache

    log = executor_lib.open_log(uri, **cfg.storage)
    snap = log.snapshot()
    report = check_log(uri, **cfg.storage)
    versions = [v for v in report.versions if v <= snap.version]
    if versions != list(range(snap.version + 1)):
        result.violations.append(f"{uri}: versions not contiguous: {versions[:5]}...{versions[-5:]}")
    result.duplicated += report.duplicate_txn_ids + report.duplicate_adds
    result.landed += _data_commits(report) if ours is None else _commits_of(report, ours)
    for r in writers:
        for version, paths, rows in r.get("acks", []):
            result.rows_written += rows
            result.lost += [(uri, version, p) for p in paths if report.added_paths.get(p) != version]
    missing = [a.path for a in snap.files if not _exists(log.store, a.path)]
    if missing:
        result.violations.append(f"{uri}: {len(missing)} live files missing, e.g. {missing[:3]}")
    rows = _count_rows(log.store, snap, SplitCache(Path(tempfile.mkdtemp(prefix="stress-check-cache-"))))
    result.rows_read += rows
    if rows != snap.num_records:
        result.violations.append(f"{uri}: read {rows} rows at version {snap.version}, numRecords {snap.num_records}")
    if not data_removes:
        expected = sum(rows for v, rows in report.data_rows_added.items() if v <= snap.version)
        if expected != snap.num_records:
            result.violations.append(f"{uri}: data commits added {expected} rows, the state holds {snap.num_records}")
    return report


def _data_commits(report: LogReport) -> int:
    return len(report.versions) - 1  # every version but the table's creation


def _commits_of(report: LogReport, paths: set[str]) -> int:
    """The versions that added at least one of ``paths`` (this run's commits, in a log other runs share)."""
    return len({report.added_paths[p] for p in paths if p in report.added_paths})


def _exists(store: Any, key: str) -> bool:
    from indextables_contract.errors import ObjectNotFoundError

    try:
        store.head(key)
    except ObjectNotFoundError:
        return False
    return True


def _check_purge(cfg: StressConfig, orphans: list[str], deletable: set[str], result: StressResult) -> None:
    """Purge B with the clock moved past the retention: orphans go, the live table stays whole,
    and nothing is deleted beyond the orphans and ``deletable`` (abandoned uploads, removed files)."""
    import executor_lib
    from executor_lib.log.maintenance.purge import purge_table

    if not orphans:
        result.violations.append("the killed writer left no record of its uploaded splits")
        return
    log = executor_lib.open_log(cfg.table_b, **cfg.storage)
    live_before = {a.path for a in log.snapshot().files}
    purged = purge_table(log, retention_hours=24, now_ms=int(time.time() * 1000) + 25 * 3600 * 1000)
    deleted = {key for key, _ in purged.deleted_splits}
    result.orphans_purged = len(deleted & set(orphans))
    if set(orphans) - deleted:
        result.violations.append(f"purge kept orphaned splits {sorted(set(orphans) - deleted)}")
    if deleted & live_before:
        result.violations.append(f"purge deleted live splits {sorted(deleted & live_before)}")
    unexpected = deleted - set(orphans) - deletable
    if unexpected:
        result.violations.append(f"purge deleted splits nobody abandoned or removed: {sorted(unexpected)}")
    after = executor_lib.open_log(cfg.table_b, **cfg.storage)
    for version in range(purged.earliest_version, after.latest_version() + 1):
        missing = [a.path for a in after.snapshot(version=version).files if not _exists(log.store, a.path)]
        if missing:
            result.violations.append(f"after purge, version {version} (retained) misses files {missing}")
