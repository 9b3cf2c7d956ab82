"""Log-level invariant checks for concurrency and fault tests.

Client return values can lie (an unpatched moto lets two conditional writers both
"win"); the log cannot. ``check_log`` reads every version file once and reports gaps,
duplicate transaction ids and duplicate file adds, plus the rows each version's data adds
and every path ever removed; ``lost_commits`` compares what
writers were told against what the log holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from executor_lib.log.state.version_files import list_log, read_version_actions
from executor_lib.protocol.actions import AddAction, CommitInfoAction, RemoveAction
from executor_lib.storage import open_store


@dataclass
class LogReport:
    versions: list[int]
    txn_ids: Counter[str] = field(default_factory=Counter)
    added_paths: dict[str, int] = field(default_factory=dict)  # path -> version
    duplicate_adds: list[str] = field(default_factory=list)
    data_rows_added: dict[int, int] = field(default_factory=dict)  # version -> rows of its data-change adds
    removed_paths: set[str] = field(default_factory=set)

    @property
    def contiguous(self) -> bool:
        return self.versions == list(range(len(self.versions)))

    @property
    def duplicate_txn_ids(self) -> list[str]:
        return [t for t, n in self.txn_ids.items() if n > 1]


def check_log(uri: str, **options: Any) -> LogReport:
    store = open_store(uri, **options)
    versions = sorted(list_log(store).versions)
    report = LogReport(versions=versions)
    for v in versions:
        for action in read_version_actions(store, v):
            if isinstance(action, CommitInfoAction):
                report.txn_ids[action.txn_id] += 1
            elif isinstance(action, AddAction):
                if action.path in report.added_paths:
                    report.duplicate_adds.append(action.path)
                report.added_paths[action.path] = v
                if action.data_change:
                    report.data_rows_added[v] = report.data_rows_added.get(v, 0) + (action.num_records or 0)
            elif isinstance(action, RemoveAction):
                report.removed_paths.add(action.path)
    return report


def live_files_from_version_files(uri: str, **options: Any) -> set[str]:
    """Live file paths by replaying every version file from 0 (ignores checkpoints and states)."""
    store = open_store(uri, **options)
    live: set[str] = set()
    for v in sorted(list_log(store).versions):
        for action in read_version_actions(store, v):
            if isinstance(action, AddAction):
                live.add(action.path)
            elif isinstance(action, RemoveAction):
                live.discard(action.path)
    return live


def lost_commits(report: LogReport, acknowledged: Iterable[tuple[int, str]]) -> list[tuple[int, str]]:
    """Acknowledged ``(version, added path)`` pairs that the log does not hold at that version."""
    return [(v, p) for v, p in acknowledged if report.added_paths.get(p) != v]
