"""DELETE, UPDATE and MERGE INTO as the client and the cluster share them: copy-on-write of the
splits that hold the rows changed, committed as one version. Standard library only.

A row change runs in three Spark steps (the client, ``connect_plugin.row_changes``, drives them):

1. ``MatchCounts`` (a read command): the live splits that can hold a row the predicate matches,
   found by partition pruning, min/max skipping and then a count of the predicate's hits in each
   split's index, all at one version of the table;
2. a read of exactly those splits at that version (``ReadPlan.splits``) with a match column
   (``MATCH_COLUMN``) marking the rows the predicate matches; Spark drops (DELETE) or changes
   (UPDATE, MERGE) them;
3. a write of the rows that come out with the option ``rowChange`` (``RowChange.to_options``): its
   commit removes the splits read and adds the splits written in one version whose read version is
   step 1's, so an append in between commutes and a MERGE SPLITS, PURGE or other row change that
   removed one of those splits first makes it fail with a conflict naming the split.

    change = RowChange("DELETE", "5f1c", read_version=7, replaced=("p-0.split",), metrics=(("numDeletedRows", 3),))
    RowChange.from_options(change.to_options()) == change   # True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from indextables_contract.errors import ConfigError

OPTION = "rowChange"  # the write option that makes a write a row change
OPERATIONS = ("DELETE", "UPDATE", "MERGE")
# The match column of step 2's read: true on the rows the statement's predicate matches (not a
# column any table may have: writes refuse names starting with "_indextables_").
MATCH_COLUMN = "_indextables_matched"
# Idempotent writes (any batch write, a row change's too; Delta's option names): a write with
# ``txnAppId`` and ``txnVersion`` commits only if the table holds no version of that application id as
# high; otherwise it is skipped and nothing is committed (``foreachBatch`` replays a batch after a failure).
TXN_APP_ID = "txnAppId"
TXN_VERSION = "txnVersion"
# The commitInfo operation parameter that records a change's id (``ChangeResult`` finds it).
CHANGE_ID_PARAMETER = "changeId"
# The metrics a change records in its commitInfo (and ``ChangeResult`` returns), each a row count.
METRICS = ("numDeletedRows", "numUpdatedRows", "numInsertedRows")


@dataclass(frozen=True)
class RowChange:
    """What a row change's write commits: ``operation`` (one of ``OPERATIONS``), its ``change_id``,
    the ``read_version`` its splits were found at, the split paths it ``replaced`` (as the log names
    them) and its ``metrics`` (name, rows) of ``METRICS``.

    Raises:
        ConfigError: an operation, version, path list or metric that is not one of these.
    """

    operation: str
    change_id: str
    read_version: int
    replaced: tuple[str, ...]
    metrics: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        where = f"write option {OPTION}"
        if self.operation not in OPERATIONS:
            raise ConfigError(f"{where}: operation {self.operation!r} is not one of {list(OPERATIONS)}")
        if not self.change_id:
            raise ConfigError(f"{where}: a change id is required")
        if isinstance(self.read_version, bool) or not isinstance(self.read_version, int) or self.read_version < 0:
            raise ConfigError(f"{where}: readVersion={self.read_version!r}: expected a version (an integer >= 0)")
        if not all(isinstance(p, str) and p for p in self.replaced):
            raise ConfigError(f"{where}: replaced must be a list of split paths")
        for name, rows in self.metrics:
            if name not in METRICS or isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
                raise ConfigError(f"{where}: metric {name}={rows!r}: expected one of {list(METRICS)} with a count")

    def to_options(self) -> dict[str, str]:
        """The write option carrying this change (one JSON value)."""
        doc = {
            "operation": self.operation,
            "changeId": self.change_id,
            "readVersion": self.read_version,
            "replaced": list(self.replaced),
            "metrics": dict(self.metrics),
        }
        return {OPTION: json.dumps(doc, sort_keys=True)}

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> RowChange | None:
        """The change in a write's ``options`` (the key in any case), or None for a plain write.

        Example: ``RowChange.from_options({"rowChange": '{"operation": "DELETE", ...}'})``
        """
        raw = next((v for k, v in options.items() if str(k).lower() == OPTION.lower()), None)
        if raw is None:
            return None
        try:
            doc = json.loads(str(raw))
            return cls(
                operation=doc["operation"],
                change_id=doc["changeId"],
                read_version=doc["readVersion"],
                replaced=tuple(doc["replaced"]),
                metrics=tuple(sorted(dict(doc.get("metrics") or {}).items())),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ConfigError(f"write option {OPTION}={str(raw)[:200]!r}: not a row change ({e!r})") from e

    def parameters(self, removed: int, added: int) -> dict[str, str]:
        """The commitInfo operation parameters of this change, with the splits it removed and added."""
        return {
            CHANGE_ID_PARAMETER: self.change_id,
            "numRemovedSplits": str(removed),
            "numAddedSplits": str(added),
            **{name: str(rows) for name, rows in self.metrics},
        }
