"""The read plan: what a client pushes into one indexed read, as ``format("indextables")`` read options.

The client (``connect_plugin``) builds a ``ReadPlan`` for each table a statement reads; its
options travel with ``spark.read.format("indextables").options(...)``, and the executors'
option parser (``executor_lib.spark.options``) knows exactly these keys (``KEYS``), beside the
storage, indexing and query options users set themselves.

    plan = ReadPlan(columns=("id", "level"), filter=Term("level", "ERROR"), limit=10)
    plan.to_options() == {"columns": "id,level", "filter": '{"column":"level",...}', "limit": "10"}
    ReadPlan.from_options(plan.to_options()) == plan   # True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from indextables_contract import filters as F
from indextables_contract.errors import ConfigError

COLUMNS = "columns"
REQUIRED_COLUMNS = "requiredColumns"
FILTER = "filter"
LIMIT = "limit"
MATCH_COLUMNS = "matchColumns"
KEYS = (COLUMNS, REQUIRED_COLUMNS, FILTER, LIMIT, MATCH_COLUMNS)
# A setting beside the plan, sent with every read and command: how many tasks the cluster runs at
# once (Spark's default parallelism). Reads whose cost is opening splits (an index query, a LIMIT,
# a pushed aggregate) run as one wave of this many tasks; see ``executor_lib.spark.reader.plan_tasks``.
PARALLELISM = "spark.indextables.read.parallelism"


@dataclass(frozen=True)
class ReadPlan:
    """``columns``: the columns returned (default all); ``required_columns``: the names a statement uses,
    of which the table's columns are read (``*`` for all); ``filter``: rows the read returns (the index
    answers what it can, the rest is checked on the rows); ``limit``: rows per task at most;
    ``match_columns``: boolean columns added to each row, true where the row matches the tree."""

    columns: tuple[str, ...] | None = None
    required_columns: tuple[str, ...] | None = None
    filter: F.Filter | None = None
    limit: int | None = None
    match_columns: tuple[tuple[str, F.Filter], ...] = ()

    def __post_init__(self) -> None:
        limit = self.limit
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ConfigError(f"read option {LIMIT}={self.limit!r}: expected an integer >= 0")

    def to_options(self) -> dict[str, str]:
        """The read options (only the parts that are set)."""
        out: dict[str, str] = {}
        if self.columns is not None:
            out[COLUMNS] = ",".join(self.columns)
        if self.required_columns is not None:
            out[REQUIRED_COLUMNS] = json.dumps(list(self.required_columns))
        if self.filter is not None:
            out[FILTER] = F.to_text(self.filter)
        if self.limit is not None:
            out[LIMIT] = str(self.limit)
        if self.match_columns:
            out[MATCH_COLUMNS] = json.dumps({name: F.to_json(tree) for name, tree in self.match_columns})
        return out

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ReadPlan:
        """The plan a client's options carry (keys as ``to_options`` writes them).

        Raises:
            ConfigError / FilterError: an option that does not decode, named.
        """
        try:
            return cls(
                columns=tuple(options[COLUMNS].split(",")) if COLUMNS in options else None,
                required_columns=tuple(json.loads(options[REQUIRED_COLUMNS])) if REQUIRED_COLUMNS in options else None,
                filter=F.from_json(json.loads(options[FILTER])) if FILTER in options else None,
                limit=int(options[LIMIT]) if LIMIT in options else None,
                match_columns=tuple(
                    (name, F.from_json(tree, f"{MATCH_COLUMNS}.{name}"))
                    for name, tree in json.loads(options[MATCH_COLUMNS]).items()
                ) if MATCH_COLUMNS in options else (),
            )  # fmt: skip
        except (ValueError, TypeError, AttributeError) as e:
            raise ConfigError(f"read options {dict(options)!r} do not decode: {e}") from e
