"""Which of a job's uploaded files a committed version names: the question a failed or aborted
write asks before it deletes what it uploaded.

A Spark job's commit can fail after its version landed: the Python worker running it dies, or the
store answers an error for a write that succeeded. Spark then calls the writer's ``abort`` with the
same commit messages. Deleting every upload there would delete splits a committed version names,
and the table would stop reading. So cleanup asks the log first: every version after the one the
job read is read, and a file any of them adds or removes is kept. The uploads' names are new
(a UUID each), so no version before the job's read version can name them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from executor_lib.protocol.actions import Action, AddAction, RemoveAction
from executor_lib.storage.base import table_key
from indextables_contract.errors import InvalidPathError


class VersionedLog(Protocol):
    """What ``committed_among`` reads of a log (a ``TransactionLog``, which this room never imports:
    the log imports the commit code)."""

    @property
    def uri(self) -> str: ...

    def latest_version(self) -> int: ...

    def version_actions(self, version: int) -> list[Action]: ...


def committed_among(txlog: VersionedLog, keys: Collection[str], after_version: int) -> set[str]:
    """The keys, of ``keys`` (store keys of files a job uploaded), that a version after
    ``after_version`` adds or removes, in any spelling of the path (relative or full URI).

    Raises the log's error (``StorageError``, ``ProtocolError``...) when a version cannot be read:
    the caller then deletes nothing, since it cannot tell.

    Example: ``committed_among(txlog, ["splits/a.split"], read_version)`` is ``{"splits/a.split"}``
    once a commit after ``read_version`` added it.
    """
    wanted = {table_key(txlog.uri, k): k for k in keys}
    found: set[str] = set()
    if not wanted:
        return found
    for version in range(max(after_version, -1) + 1, txlog.latest_version() + 1):
        for action in txlog.version_actions(version):
            if not isinstance(action, (AddAction, RemoveAction)):
                continue
            try:
                key = table_key(txlog.uri, action.path)
            except InvalidPathError:
                continue  # a path outside the table names none of its uploads
            if key in wanted:
                found.add(wanted[key])
    return found
