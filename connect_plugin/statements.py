"""IndexTables SQL statements to typed objects, in one pass over the parse tree.

``connect_plugin.grammar`` parses a statement; ``build_statement`` turns its tree into what runs:

* ``OnTable``: a command of the contract (``indextables_contract.commands``) on one table's path, or
  on none (``FLUSH INDEXTABLES DISK CACHE`` and the other tableless commands), with the arguments
  only the client uses (PREWARM's segments, fields and parallelism);
* ``OnSession``: a statement the client answers from the session itself (``DESCRIBE INDEXTABLES
  ENVIRONMENT``, the profiler and data-skipping statements ...), named by its rule.

One method per grammar rule, as a lark ``Interpreter`` visits them; a rule named after a contract
command (``C.COMMANDS``) needs no method at all: its ``target`` is the table and each child rule
named after one of the command's fields (``-> dry_run``, ``-> limit``) gives that field its value
(a token typed as the field is; a rule with no token, ``DRY RUN``, is ``True``). A new command is
then a grammar rule, its contract class and its executor module: ``connect_plugin.sql`` runs every
``OnTable`` with ``IndexTable`` unless it shapes the command's output itself.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lark import Token, Tree
from lark.visitors import Interpreter

from connect_plugin.grammar import SparkCondition, contains_node, duration_hours, to_predicate, unquote_name
from connect_plugin.lexer import unquote
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract.errors import IndexTablesSQLError


@dataclass(frozen=True)
class OnTable:
    """A contract command on the table at ``path`` (None: a tableless command), and the arguments only
    the client uses, by name."""

    path: str | None
    command: C.Command
    client: tuple[tuple[str, Any], ...] = ()

    def arg(self, name: str) -> Any:
        """A client argument (None when the statement did not give it)."""
        return dict(self.client).get(name)


@dataclass(frozen=True)
class OnSession:
    """A statement the session answers (its grammar rule) with its arguments."""

    kind: str
    args: tuple[Any, ...] = ()


Statement = OnTable | OnSession


def build_statement(tree: Tree[Token], text: str, resolve: Callable[[Tree[Token]], str]) -> Statement:
    """The statement a parse tree (``grammar.STATEMENT_PARSER``) says.

    Args:
        tree: the statement's tree (not a ``select``: it plans a read).
        text: the statement, for error messages.
        resolve: the path a ``target`` tree names (a table name through the session).

    Raises:
        IndexTablesSQLError: the statement asks for something the grammar allows but no command does.

    Example:
        >>> from connect_plugin.grammar import STATEMENT_PARSER
        >>> tree = STATEMENT_PARSER.parse("CHECKPOINT INDEXTABLES '/t'")
        >>> build_statement(tree, "", lambda t: "/t")
        OnTable(path='/t', command=Checkpoint(), client=())
    """
    built = _Builder(text, resolve).visit(tree)
    assert isinstance(built, (OnTable, OnSession))
    return built


def _children(tree: Tree[Token], rule: str) -> list[Tree[Token]]:
    return [c for c in tree.children if isinstance(c, Tree) and c.data == rule]


def _opts(tree: Tree[Token]) -> dict[str, Tree[Token]]:
    return {str(c.data): c for c in tree.children if isinstance(c, Tree)}


class _Builder(Interpreter[Token, Any]):
    """One method per statement rule; ``__default__`` builds a contract command named by its rule."""

    def __init__(self, text: str, resolve: Callable[[Tree[Token]], str]) -> None:
        self.text = text
        self.resolve = resolve

    # -- helpers --

    def _path(self, tree: Tree[Token]) -> str:
        return self.resolve(_children(tree, "target")[0])

    def _optional_path(self, tree: Tree[Token]) -> str | None:
        targets = _children(tree, "target")
        return self.resolve(targets[0]) if targets else None

    def _filter(self, tree: Tree[Token], options: tuple[str, ...] = ()) -> str | None:
        """The WHERE of a command (partition columns only) as filter text."""
        where = command_where(tree, self.text, options)
        return None if where is None else F.to_text(where)

    # -- commands on a table --

    def merge(self, tree: Tree[Token]) -> OnTable:
        opts = _opts(tree)
        command = C.MergePlan(
            filter=self._filter(tree),
            # without TARGET SIZE: None, the contract's MERGE_TARGET_SIZE (the cluster applies it)
            target_size=str(opts["target_size"].children[0]).replace(" ", "") if "target_size" in opts else None,
            max_dest_splits=int(str(opts["max_dest"].children[0])) if "max_dest" in opts else None,
            max_source_splits_per_merge=int(str(opts["max_sources"].children[0])) if "max_sources" in opts else None,
            sort_key=unquote_name(str(opts["sort_by"].children[0])) if "sort_by" in opts else None,
        )
        return OnTable(self._path(tree), command)

    def purge(self, tree: Tree[Token]) -> OnTable:
        opts = _opts(tree)
        # Without OLDER THAN: None, so the cluster reads spark.indextables.purge.defaultRetentionHours
        # (as IndexTable.purge() without older_than_hours does).
        older = duration_hours(opts["older_than"].children[0]) if "older_than" in opts else None
        log = duration_hours(opts["log_retention"].children[0]) if "log_retention" in opts else None
        return OnTable(self._path(tree), C.Purge(older, log, dry_run="dry_run" in opts))

    def checkpoint(self, tree: Tree[Token]) -> OnTable:
        return OnTable(self._path(tree), C.Checkpoint())

    def truncate(self, tree: Tree[Token]) -> OnTable:
        return OnTable(self._path(tree), C.TruncateTimeTravel(dry_run=bool(_children(tree, "dry"))))

    def drop(self, tree: Tree[Token]) -> OnTable:
        where = self._filter(tree)
        if where is None:  # the grammar requires a WHERE
            raise IndexTablesSQLError(f"{self.text!r}: DROP INDEXTABLES PARTITIONS needs a WHERE clause")
        return OnTable(self._path(tree), C.DropPartitions(filter=where))

    def prewarm(self, tree: Tree[Token]) -> OnTable:
        segments = _children(tree, "segments")
        fields = _children(tree, "fields")
        parallelism = _children(tree, "parallelism")
        client = (
            ("segments", [str(t) for t in segments[0].children] if segments else None),
            ("fields", [unquote_name(str(f.children[0])) for f in fields[0].children] if fields else None),  # type: ignore[union-attr]
            ("parallelism", int(str(parallelism[0].children[0])) if parallelism else None),
        )
        return OnTable(self._path(tree), C.Prewarm(filter=self._filter(tree)), client)

    def describe_state(self, tree: Tree[Token]) -> OnTable:
        return OnTable(self._path(tree), C.DescribeState())

    def describe_transaction_log(self, tree: Tree[Token]) -> OnTable:
        return OnTable(self._path(tree), C.DescribeLog(include_all=bool(_children(tree, "include_all"))))

    def describe_components(self, tree: Tree[Token]) -> OnTable:
        return OnTable(self._path(tree), C.ComponentSizes(filter=self._filter(tree)))

    # -- tableless commands --

    def flush_cache(self, tree: Tree[Token]) -> OnTable:
        return OnTable(None, C.FlushCache())

    def flush_searcher(self, tree: Tree[Token]) -> OnTable:
        return OnTable(None, C.FlushSearcherCache())

    def invalidate_log(self, tree: Tree[Token]) -> OnTable:
        return OnTable(None, C.InvalidateLogCache(table=self._optional_path(tree)))

    # -- statements the session answers --

    def repair(self, tree: Tree[Token]) -> OnSession:
        source, target = (unquote(str(t)) for t in tree.children)
        return OnSession("repair", (source, target))

    def wait_prewarm(self, tree: Tree[Token]) -> OnSession:
        job = _children(tree, "job_id")
        timeout = _children(tree, "timeout")
        return OnSession(
            "wait_prewarm",
            (
                self._optional_path(tree),
                unquote(str(job[0].children[0])) if job else None,
                int(str(timeout[0].children[0])) if timeout else None,
            ),
        )

    def describe_cache(self, tree: Tree[Token]) -> OnSession:  # the JVM's columns, from the describe_cache command
        return OnSession(str(tree.data))

    def describe_profiler(self, tree: Tree[Token]) -> OnSession:
        return OnSession("describe_profiler", (bool(_children(tree, "profiler_cache")),))

    def reset_profiler(self, tree: Tree[Token]) -> OnSession:
        return OnSession("reset_profiler", (bool(_children(tree, "profiler_cache")),))

    def build_companion(self, tree: Tree[Token]) -> OnSession:
        """BUILD INDEXTABLES COMPANION FOR DELTA|PARQUET|ICEBERG '<source>' ... AT LOCATION '<index>' [DRY RUN]:
        the session plans it (``connect_plugin.companion.build_companion``) with these arguments."""
        kind_token, source_token = tree.children[0], tree.children[1]
        kind = str(kind_token).lower()
        if kind not in _COMPANION_FORMATS:
            raise IndexTablesSQLError(
                f"BUILD INDEXTABLES COMPANION FOR {kind_token}: expected DELTA, PARQUET or ICEBERG"
            )
        strings = [c for c in tree.children if not isinstance(c, Tree)]
        opts = _opts(tree)
        _refuse_unsupported(self.text, kind, opts)
        arguments = {
            **_companion_source(self.text, kind, opts),
            **_companion_indexing(self.text, opts),
            **self._companion_where(opts),
            "dry_run": "dry" in opts,
            "invalidate_all": "invalidate_all" in opts,
        }
        return OnSession(
            "build_companion",
            (kind, unquote(str(source_token)), unquote(str(strings[2])), tuple(sorted(arguments.items()))),
        )

    def _companion_where(self, opts: dict[str, Tree[Token]]) -> dict[str, Any]:
        if "companion_where" not in opts:
            return {"where_filter": None, "where_sql": None}
        node = opts["companion_where"].children[0]
        result = to_predicate(node, self.text)
        if not isinstance(result, F.FILTER_TYPES) or contains_node(result, SparkCondition):
            raise IndexTablesSQLError(
                f"{_short(self.text)}: the WHERE of BUILD COMPANION takes partition predicates, not function calls"
            )
        return {"where_filter": F.to_text(result), "where_sql": self.text[node.meta.start_pos : node.meta.end_pos]}  # type: ignore[union-attr]

    def __default__(self, tree: Tree[Token]) -> Statement:
        name = str(tree.data)
        cls = C.COMMANDS.get(name)
        if cls is None:  # a statement of the session without arguments (DESCRIBE INDEXTABLES ENVIRONMENT ...)
            return OnSession(name)
        return _contract_command(cls, tree, self)


# Child rules of a command that are its options, not its WHERE.
OPTION_RULES = (
    "target",
    "merge_opt",
    "purge_opt",
    "dry",
    "target_size",
    "max_",
    "sort_by",
    "older_than",
    "log_retention",
    "dry_run",
    "segments",
    "fields",
    "parallelism",
    "include_all",
)


def command_where(tree: Tree[Token], text: str, options: tuple[str, ...] = ()) -> F.Filter | None:
    """The WHERE of a maintenance command (its one child that is neither an option rule of
    ``OPTION_RULES`` nor one of ``options``): partition predicates only, no function calls.

    Raises:
        IndexTablesSQLError: the WHERE calls a function (Spark would have to evaluate it).
    """
    for child in tree.children:
        if isinstance(child, Tree) and not str(child.data).startswith((*OPTION_RULES, *options)):
            result = to_predicate(child, text)
            if not isinstance(result, F.FILTER_TYPES) or contains_node(result, SparkCondition):
                raise IndexTablesSQLError(f"{text!r}: function calls are not supported in the WHERE of {tree.data}")
            return result
    return None


def _contract_command(cls: type[C.Command], tree: Tree[Token], builder: _Builder) -> OnTable:
    """A contract command from a rule named after it: ``target`` is its table; a child rule named
    after a field gives the field its token's value, typed as the field is (a rule without a token:
    ``True``); ``filter`` is the WHERE."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for child in tree.children:
        if not isinstance(child, Tree) or child.data == "target":
            continue
        name = str(child.data)
        if name in fields:
            values[name] = _typed(hints[name], child.children[0] if child.children else None)
    if "filter" in fields:
        values["filter"] = builder._filter(tree, tuple(fields))
    path = None if issubclass(cls, C.TABLELESS) else builder._path(tree)
    return OnTable(path, cls(**values))


def _typed(hint: Any, token: Any) -> Any:
    """A token's value as a field of type ``hint`` holds it (``int | None`` reads an int)."""
    if token is None:
        return True
    kinds = typing.get_args(hint) or (hint,)
    text = str(token)
    if int in kinds:
        return int(text)
    if float in kinds:
        return float(text)
    if bool in kinds:
        return text.lower() == "true"
    return unquote(text) if text[:1] in ("'", '"', "`") else text


_COMPANION_FORMATS = ("delta", "parquet", "iceberg")
_FAST_FIELD_MODES = ("hybrid", "disabled", "parquet_only")


def _short(text: str) -> str:
    return repr(" ".join(text.split())[:80])


def _refuse_unsupported(text: str, kind: str, opts: dict[str, Tree[Token]]) -> None:
    """BUILD COMPANION clauses of IndexTables4Spark's that this project does not run, each refused with why."""
    unsupported = (
        (
            "streaming",
            "WITH STREAMING POLL INTERVAL runs the JVM's long-lived companion manager; run BUILD again to sync",
        ),
        ("table_roots", "TABLE ROOTS (relocating the source) is not built here yet (issue 35)"),
        (
            "catalog" if kind == "delta" else "",
            "FOR DELTA with CATALOG resolves the table through Unity Catalog's REST API, a live service; "
            "give the Delta table's path",
        ),
    )
    for clause, why in unsupported:
        if clause and clause in opts:
            raise IndexTablesSQLError(f"{_short(text)} is not supported here: {why}")


def _strings(opts: dict[str, Tree[Token]], name: str) -> list[str] | None:
    return [unquote(str(t)) for t in opts[name].children] if name in opts else None


def _companion_source(text: str, kind: str, opts: dict[str, Tree[Token]]) -> dict[str, Any]:
    """Where the companion's source is read from: SCHEMA SOURCE, CATALOG, WAREHOUSE, FROM VERSION/SNAPSHOT."""
    from_version = None
    for clause, applies in (("from_version", "delta"), ("from_snapshot", "iceberg")):
        if clause in opts:
            if kind != applies:
                raise IndexTablesSQLError(
                    f"{_short(text)}: {clause.replace('_', ' ').upper()} applies to FOR {applies.upper()} only"
                )
            from_version = int(str(opts[clause].children[0]))
    if "schema_source" in opts and kind != "parquet":
        raise IndexTablesSQLError(f"{_short(text)}: SCHEMA SOURCE applies to FOR PARQUET only")
    catalog = catalog_type = None
    if "catalog" in opts:
        catalog = unquote(str(opts["catalog"].children[0]))
        type_token = opts["catalog"].children[1]
        catalog_type = None if type_token is None else unquote(str(type_token))
    return {
        "schema_source": unquote(str(opts["schema_source"].children[0])) if "schema_source" in opts else None,
        "catalog": catalog,
        "catalog_type": catalog_type,
        "warehouse": unquote(str(opts["warehouse"].children[0])) if "warehouse" in opts else None,
        "from_version": from_version,
    }


def _companion_indexing(text: str, opts: dict[str, Tree[Token]]) -> dict[str, Any]:
    """How the companion indexes: columns, indexing modes, fast fields, the input size per split."""
    modes = None
    if "indexing_modes" in opts:
        modes = {
            unquote(str(m.children[0])): unquote(str(m.children[1]))  # type: ignore[union-attr]
            for m in opts["indexing_modes"].children
        }
    fast = None
    if "fastfields_mode" in opts:
        fast = str(opts["fastfields_mode"].children[0]).lower()
        if fast not in _FAST_FIELD_MODES:
            raise IndexTablesSQLError(f"FASTFIELDS MODE {fast.upper()}: expected HYBRID, DISABLED or PARQUET_ONLY")
        fast = fast.upper()
    hashed: dict[str, list[str]] = {}
    if "hashed_fastfields" in opts:
        mode_token, *names = opts["hashed_fastfields"].children
        if str(mode_token).upper() not in ("INCLUDE", "EXCLUDE"):
            raise IndexTablesSQLError(f"{_short(text)}: HASHED FASTFIELDS takes INCLUDE or EXCLUDE, not {mode_token}")
        hashed[str(mode_token).lower()] = [unquote(str(n)) for n in names]
    size = None
    if "target_input_size" in opts:
        token = opts["target_input_size"].children[0]
        size = (unquote(str(token)) if getattr(token, "type", None) == "STRING" else str(token)).replace(" ", "")
    return {
        "include_columns": _strings(opts, "include_columns"),
        "exclude_columns": _strings(opts, "exclude_columns"),
        "indexing_modes": modes,
        "fast_field_mode": fast,
        "target_input_size": size,
        "hashed_fastfields_include": hashed.get("include"),
        "hashed_fastfields_exclude": hashed.get("exclude"),
    }
