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
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from indextables_contract import filters as F
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError, FilterError

COLUMNS = "columns"
REQUIRED_COLUMNS = "requiredColumns"
FILTER = "filter"
LIMIT = "limit"
MATCH_COLUMNS = "matchColumns"
TOP_K = "scoreTopK"
# ``ORDER BY <column> [ASC|DESC] [NULLS FIRST|LAST] LIMIT k``: with this option (``"ts DESC"``) the k of
# ``scoreTopK`` is each task's best rows by that column (Spark's order: nulls first ascending, last
# descending, NaN above every number) instead of by ``_score``.
TOP_K_ORDER = "topKOrderBy"
# The BM25 score of a read with an index query: not a column of any table (writes refuse the name),
# selected like one (``columns``, ``required_columns``); a float, best rows highest.
SCORE_COLUMN = "_score"
# ``_snippet_<column>``: the fragment of a text column around the index query's matches, each match
# between the tags of the read option ``snippetTags`` (a JSON list ``[start, end]``, default <b>, </b>),
# at most ``snippetMaxChars`` (150) characters. Selected like a column, as ``_score``.
SNIPPET_PREFIX = "_snippet_"
SNIPPET_TAGS = "snippetTags"
SNIPPET_MAX_CHARS = "snippetMaxChars"
# A read of some splits only (a JSON list of their paths as the log names them, all live at the read's
# version): DELETE, UPDATE and MERGE INTO read the splits they rewrite (``indextables_contract.row_changes``).
SPLITS = "splits"
KEYS = (
    COLUMNS,
    REQUIRED_COLUMNS,
    FILTER,
    LIMIT,
    MATCH_COLUMNS,
    TOP_K,
    TOP_K_ORDER,
    SNIPPET_TAGS,
    SNIPPET_MAX_CHARS,
    SPLITS,
)
# A setting beside the plan, sent with every read and command: how many tasks the cluster runs at
# once (Spark's default parallelism). Reads whose cost is opening splits (an index query, a LIMIT,
# a pushed aggregate) run as one wave of this many tasks; see ``executor_lib.spark.reader.plan_tasks``.
PARALLELISM = S.READ_PARALLELISM.key  # spark.indextables.read.parallelism
# A read's schema field metadata key: the warnings about its queries on that column (a JSON list of
# texts, ``executor_lib.splits.query.exact_words``), which the client shows as ``QueryWarning``s.
QUERY_WARNINGS_METADATA = "indextables.queryWarnings"


@dataclass(frozen=True)
class ReadPlan:
    """``columns``: the columns returned (default all); ``required_columns``: the names a statement uses,
    of which the table's columns are read (``*`` for all); ``filter``: rows the read returns (the index
    answers what it can, the rest is checked on the rows); ``limit``: rows per task at most (0: none);
    ``match_columns``: boolean columns added to each row, true where the row matches the tree;
    ``top_k``: each task returns at most this many rows, its best by ``_score`` (``ORDER BY _score
    DESC LIMIT k``: the caller sorts and cuts the tasks' rows; scores use the whole read's statistics);
    ``top_k_order``: (column, descending, nulls first) — then ``top_k`` is each task's best rows by that
    column, in Spark's order (``ORDER BY column [ASC|DESC] LIMIT k``), not by ``_score``;
    ``splits``: only these splits are read (paths as the log names them, each live at the read's version).
    A bare limit (``one_task``) is read in one task: at most ``limit`` rows in all.

    This is the one decoder of these options: the client builds a plan and sends ``to_options()``,
    the executors decode it with ``from_options`` (then match its names to the table's columns:
    ``executor_lib.spark.options.read_plan``). A plan that could not travel is refused when built.

    Raises:
        ConfigError: a limit below 0, an empty column list, a column name the comma-separated
            ``columns`` option cannot carry, or two match columns of the same name.
    """

    columns: tuple[str, ...] | None = None
    required_columns: tuple[str, ...] | None = None
    filter: F.Filter | None = None
    limit: int | None = None
    match_columns: tuple[tuple[str, F.Filter], ...] = ()
    top_k: int | None = None
    top_k_order: tuple[str, bool, bool] | None = None
    splits: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.top_k_order is not None and self.top_k is None:
            raise ConfigError(f"read option {TOP_K_ORDER}: needs {TOP_K} (the number of rows each task keeps)")
        for key, limit in ((LIMIT, self.limit), (TOP_K, self.top_k)):
            if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
                raise ConfigError(f"read option {key}={limit!r}: expected an integer >= 0")
        if self.columns is not None:
            if not self.columns:
                raise ConfigError(f"read option {COLUMNS}: expected at least one column")
            bad = [c for c in self.columns if not c or "," in c or c != c.strip()]
            if bad:
                raise ConfigError(
                    f"read option {COLUMNS}: column names {bad} cannot be sent in a comma-separated list "
                    "(empty, a comma, or spaces around the name)"
                )
        names = [name for name, _ in self.match_columns]
        if len(set(names)) != len(names):
            raise ConfigError(f"read option {MATCH_COLUMNS}: a match column is named twice in {names}")

    def one_task(self, options: Mapping[str, Any]) -> bool:
        """Whether this is a bare LIMIT: a limit, and no filter, match column or ``indexquery.<col>`` /
        ``indexqueryall`` option among ``options``. The executors read a bare LIMIT in one task, which
        returns at most ``limit`` rows in all (opening splits one by one until it has them), so a client
        may put Spark's limit at ``limit + 1``: Spark then reads the task's output to its end and keeps
        the task's Python worker (a task ended at exactly ``limit`` rows loses its worker).

        Example: ``ReadPlan(limit=20).one_task({})`` is True; with ``{"indexquery.msg": "x"}`` False.
        """
        queries = any(str(k).lower() == "indexqueryall" or str(k).lower().startswith("indexquery.") for k in options)
        return self.limit is not None and self.filter is None and not self.match_columns and not queries

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
        if self.top_k is not None:
            out[TOP_K] = str(self.top_k)
        if self.top_k_order is not None:
            column, descending, nulls_first = self.top_k_order
            out[TOP_K_ORDER] = f"{column} {'DESC' if descending else 'ASC'} NULLS {'FIRST' if nulls_first else 'LAST'}"
        if self.splits is not None:
            out[SPLITS] = json.dumps(list(self.splits))
        return out

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ReadPlan:
        """The plan in ``options`` (keys as ``to_options`` writes them; other keys are ignored).

        ``columns`` is read as users write it too: spaces around names and empty items are dropped.
        Fractional numbers in filter trees are read as ``Decimal`` (as Spark SQL reads ``2.5``).

        Raises:
            ConfigError: an option that does not decode, named with its value.
            FilterError: a filter tree that does not decode, named with its path.

        Example: ``ReadPlan.from_options({"limit": "10", "columns": "id, level"})``
        ``== ReadPlan(columns=("id", "level"), limit=10)``
        """
        return cls(
            columns=_columns(options[COLUMNS]) if COLUMNS in options else None,
            required_columns=_names(options[REQUIRED_COLUMNS]) if REQUIRED_COLUMNS in options else None,
            filter=F.from_text(str(options[FILTER]), f"read option {FILTER}") if FILTER in options else None,
            limit=_limit(options[LIMIT]) if LIMIT in options else None,
            match_columns=_match_columns(options[MATCH_COLUMNS]) if MATCH_COLUMNS in options else (),
            top_k=_limit(options[TOP_K], TOP_K) if TOP_K in options else None,
            top_k_order=_order(options[TOP_K_ORDER]) if TOP_K_ORDER in options else None,
            splits=_splits(options[SPLITS]) if SPLITS in options else None,
        )


def _columns(value: Any) -> tuple[str, ...]:
    names = tuple(c.strip() for c in str(value).split(",") if c.strip())
    if not names:
        raise ConfigError(f"read option {COLUMNS}={value!r}: expected a comma-separated list of columns")
    return names


def _names(value: Any) -> tuple[str, ...]:
    try:
        names = json.loads(str(value))
    except ValueError as e:
        raise ConfigError(f"read option {REQUIRED_COLUMNS}={str(value)[:200]!r}: not JSON ({e})") from e
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"read option {REQUIRED_COLUMNS}={str(value)[:200]!r}: expected a JSON list of names")
    return tuple(names)


def _splits(value: Any) -> tuple[str, ...]:
    try:
        paths = json.loads(str(value))
    except ValueError as e:
        raise ConfigError(f"read option {SPLITS}={str(value)[:200]!r}: not JSON ({e})") from e
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise ConfigError(f"read option {SPLITS}={str(value)[:200]!r}: expected a JSON list of split paths")
    return tuple(paths)


def _limit(value: Any, key: str = LIMIT) -> int:
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()):  # refuses a sign, a fraction, a word
        raise ConfigError(f"read option {key}={value!r}: expected an integer >= 0")
    return int(text)


_ORDER = re.compile(r"^(.+?)(?:\s+(asc|desc))?(?:\s+nulls\s+(first|last))?$", re.IGNORECASE | re.DOTALL)


def _order(value: Any) -> tuple[str, bool, bool]:
    """``"<column> [ASC|DESC] [NULLS FIRST|LAST]"`` as (column, descending, nulls first); nulls as Spark
    places them by default: first ascending, last descending."""
    m = _ORDER.match(str(value).strip())
    if m is None or not m.group(1).strip():
        raise ConfigError(f"read option {TOP_K_ORDER}={value!r}: expected '<column> [ASC|DESC] [NULLS FIRST|LAST]'")
    descending = (m.group(2) or "asc").lower() == "desc"
    nulls_first = not descending if m.group(3) is None else m.group(3).lower() == "first"
    return m.group(1).strip(), descending, nulls_first


def _match_columns(value: Any) -> tuple[tuple[str, F.Filter], ...]:
    where = f"read option {MATCH_COLUMNS}"
    try:
        doc = json.loads(str(value), parse_float=Decimal)
    except ValueError as e:
        raise ConfigError(f"{where}={str(value)[:200]!r}: not JSON ({e})") from e
    except RecursionError:
        raise FilterError(f"{where}: nests deeper than {F.MAX_DEPTH} levels") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}={str(value)[:200]!r}: expected a JSON object (match column -> filter tree)")
    return tuple((str(name), F.from_json(tree, f"{where}.{name}")) for name, tree in doc.items())
