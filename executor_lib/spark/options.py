"""Options of ``format("indextables")`` reads and writes: names, validation, canonical spelling.

Spark hands a Python data source its options with lower-cased keys; IndexTables4Spark option
names are camelCase (``spark.indextables.transaction.retry.maxAttempts``). This module maps
every key back to its canonical name (per-column keys to the schema's column name), rejects
unknown ones with a ``ConfigError`` naming the option, and parses the few option values the
Spark layer itself interprets (sizes, versions, timestamps, column lists); a client's read plan is
decoded by ``indextables_contract.read.ReadPlan.from_options`` and checked against the table here
(``read_plan``).
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from executor_lib.storage import SPARK_STORAGE_OPTION_NAMES
from indextables_contract import filters as F
from indextables_contract import read as R
from indextables_contract import settings as S
from indextables_contract.errors import ConfigError
from indextables_contract.read import KEYS as READ_PLAN_KEYS
from indextables_contract.read import PARALLELISM as READ_PARALLELISM
from indextables_contract.read import ReadPlan
from indextables_contract.row_changes import OPTION as ROW_CHANGE_OPTION
from indextables_contract.row_changes import TXN_APP_ID, TXN_VERSION

PREFIX = S.PREFIX

# The spark.indextables.* keys each kind of operation keeps come from the settings registry (their
# scopes: indextables_contract.settings). Reads and writes both keep the storage options (every name
# ``open_store`` takes one by, written down once in executor_lib.storage; not the Python-only
# credential object), the log settings, the cache, progress and merge/purge settings a command or the
# client reads (spark.indextables.merge.sortKey: the session's MERGE SPLITS sort key; the mergeOnWrite
# settings, which the client acts on after a write: connect_plugin.session.write), as clients hand
# every session setting to every operation. sessionTimeZone: the client session's
# spark.sql.session.timeZone, the zone of timestamp literals without an offset in filter trees.
_STORAGE_KEYS = tuple(sorted(SPARK_STORAGE_OPTION_NAMES))
_COMMON_KEYS = ("path", *_STORAGE_KEYS, "sessionTimeZone")
# After-commit work of a batch write (executor_lib.spark.after_write), IndexTables4Spark's names and defaults.
PURGE_ON_WRITE_KEYS = tuple(
    s.key
    for s in (
        S.PURGE_ON_WRITE_ENABLED,
        S.PURGE_ON_WRITE_TRIGGER_AFTER_MERGE,
        S.PURGE_ON_WRITE_TRIGGER_AFTER_WRITES,
        S.PURGE_ON_WRITE_SPLIT_RETENTION_HOURS,
        S.PURGE_ON_WRITE_TX_LOG_RETENTION_HOURS,
    )
)
OPTIMIZE_WRITE_KEYS = (S.OPTIMIZE_WRITE_ENABLED.key, S.OPTIMIZE_WRITE_TARGET_SPLIT_SIZE.key)

# ROW_CHANGE_OPTION: a DELETE, UPDATE or MERGE INTO's write (indextables_contract.row_changes)
WRITE_KEYS = tuple(
    dict.fromkeys((*_COMMON_KEYS, "partitionBy", ROW_CHANGE_OPTION, TXN_APP_ID, TXN_VERSION, *S.keys_for(S.WRITE)))
)
TOKEN_LENGTH_PREFIX = S.INDEXING_TOKEN_LENGTH.prefix


def _is_token_length(text: str) -> bool:
    from executor_lib.splits.doc_mapping import NAMED_TOKEN_LENGTHS

    return text.isdigit() or text in NAMED_TOKEN_LENGTHS


WRITE_COLUMN_PREFIXES = S.patterns_for(S.WRITE)  # typemap., tokenizer., indexrecordoption., tokenLength.


def _list_form_values(prefix: str) -> tuple[str, ...]:
    """The values whose name may stand after ``prefix`` in IndexTables4Spark's list form
    (``typemap.text = "title,body"``: each listed column gets the value)."""
    from executor_lib.splits.doc_mapping import RECORD_OPTIONS, TOKENIZERS

    return {
        S.INDEXING_TYPEMAP.prefix: ("string", "text", "json", "ip"),
        S.INDEXING_TOKENIZER.prefix: TOKENIZERS,
        S.INDEXING_INDEX_RECORD_OPTION.prefix: RECORD_OPTIONS,
    }.get(prefix, ())


# IndexTables4Spark's Iceberg catalog settings (BUILD INDEXTABLES COMPANION FOR ICEBERG), as pyiceberg
# catalog properties: catalogType -> type, uri, warehouse, token, credential, s3Endpoint -> s3.endpoint,
# s3PathStyleAccess -> s3.path-style-access.
ICEBERG_KEYS = tuple(k for k in S.keys_for(S.READ) if k.startswith(S.ICEBERG_PREFIX))
# The read keys of the registry include read.targetPartitionBytes, read.maxSplitsPerPartition and
# companion.parquetTableRoot (a companion's source root, protocol.actions.parquet_table_root).
READ_KEYS = tuple(
    dict.fromkeys(
        (
            *_COMMON_KEYS,
            *S.keys_for(S.READ),
            "versionAsOf",
            "timestampAsOf",
            *READ_PLAN_KEYS,  # what a client's ReadPlan pushes (indextables_contract.read)
            "indexqueryall",
            READ_PARALLELISM,  # the cluster's task slots, sent by the client (indextables_contract.read)
        )
    )
)
READ_COLUMN_PREFIXES = ("indexquery.",)

# Streaming (``writeStream`` / ``readStream``): the options beyond those of batch writes and reads.
STREAM_WRITE_KEYS = ("checkpointLocation", "txnAppId")
STREAM_READ_KEYS = ("startingVersion", "maxFilesPerTrigger", "ignoreDeletes", "ignoreChanges")

# Options Spark itself may add to a data source's options.
_SPARK_INTERNAL = ("__", "spark.sql.")


def canonical_options(
    raw: Mapping[str, Any],
    known: Iterable[str],
    column_prefixes: Iterable[str],
    columns: Iterable[str],
    what: str,
) -> dict[str, str]:
    """``raw`` with canonical key names; ConfigError for a key that is not a known option."""
    by_lower = {k.lower(): k for k in known}
    prefixes = {p.lower(): p for p in column_prefixes}
    column_names = {c.lower(): c for c in columns}
    out: dict[str, str] = {}
    for key, value in raw.items():
        lower = key.lower()
        if lower.startswith(_SPARK_INTERNAL):
            continue
        if lower in by_lower:
            out[by_lower[lower]] = value
            continue
        prefix = next((p for p in prefixes if lower.startswith(p)), None)
        if prefix is not None:
            column = column_names.get(lower[len(prefix) :])
            if column is None and prefixes[prefix] == TOKEN_LENGTH_PREFIX and _is_token_length(lower[len(prefix) :]):
                out[TOKEN_LENGTH_PREFIX + lower[len(prefix) :]] = value  # the JVM's list form: tokenLength.<N>=c1,c2
                continue
            listed = [column_names.get(c.strip().lower()) for c in str(value).split(",") if c.strip()]
            named = lower[len(prefix) :]
            list_form = named in _list_form_values(prefixes[prefix]) or (
                prefixes[prefix] == S.INDEXING_TOKENIZER.prefix and S.ngram_spec(named) is not None
            )  # tokenizer.edge_ngram_2_10 = "title,body" too
            if column is None and list_form and all(listed):
                for name in listed:  # the JVM's list form: typemap.text = "title,body"
                    out[prefixes[prefix] + str(name)] = lower[len(prefix) :]
                continue
            if column is None:
                close = difflib.get_close_matches(lower[len(prefix) :], list(column_names), n=1)
                hint = f"did you mean {prefixes[prefix]}{column_names[close[0]]}?; " if close else ""
                raise ConfigError(
                    f"{what} option {key}: column {key[len(prefix) :]!r} is not in the table ({hint}its columns: "
                    f"{', '.join(sorted(column_names.values()))})"
                )
            out[prefixes[prefix] + column] = value
            continue
        if lower.startswith(PREFIX):
            # Clients hand every session setting to every operation: a setting of another kind of
            # operation (a write's, at a read) is not ours; one that only tunes IndexTables4Spark's JVM
            # is warned about once; one no documentation knows is an error naming the closest key.
            if S.check_key(key, what).status == S.NO_EFFECT:
                S.warn_no_effect(key)
            continue
        raise ConfigError(f"{what}: unknown option {key!r}{_closest(lower, by_lower, prefixes, column_names)}")
    return out


def _closest(lower: str, by_lower: Mapping[str, str], prefixes: Mapping[str, str], columns: Mapping[str, str]) -> str:
    """`` (did you mean <key>?)`` with the known key closest to ``lower`` as a whole, per-column keys
    (``indexquery.<column>`` for each of the table's columns) among them, or ``""``."""
    candidates = dict(by_lower)
    for low_prefix, prefix in prefixes.items():
        candidates.update({low_prefix + low: prefix + column for low, column in columns.items()})
    close = difflib.get_close_matches(lower, list(candidates), n=1)
    return f" (did you mean {candidates[close[0]]}?)" if close else ""


def storage_and_log_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options ``open_log``/``open_store`` understand."""
    keys = set(_STORAGE_KEYS) | {s.key for s in S.entries_for(S.LOG)}
    return {k: v for k, v in options.items() if k in keys}


# Options outside the registry (a command's arguments, a stream's options) are read by the registry's
# parsers too (``indextables_contract.settings.parse_option``): one vocabulary, one message.
_POSITIVE_INT = S.integer()


def parse_size(name: str, value: Any) -> int:
    """``"100M"``, ``"1G"``, ``"512K"`` or bytes (``indextables_contract.settings.size``)."""
    return S.parse_option(S.size, name, value)


def parse_positive_int(name: str, value: Any) -> int:
    return S.parse_option(_POSITIVE_INT, name, value)


def parse_bool(name: str, value: Any) -> bool:
    return S.parse_option(S.boolean, name, value)


def split_keys(raw: Mapping[str, Any], keys: Iterable[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(``raw``'s options named by ``keys``, with canonical names; the other options)."""
    by_lower = {k.lower(): k for k in keys}
    mine = {by_lower[k.lower()]: v for k, v in raw.items() if k.lower() in by_lower}
    rest = {k: v for k, v in raw.items() if k.lower() not in by_lower}
    return mine, rest


def parse_version(value: Any) -> int:
    try:
        version = int(str(value).strip())
    except ValueError as e:
        raise ConfigError(f"option versionAsOf={value!r}: expected a version number") from e
    if version < 0:
        raise ConfigError(f"option versionAsOf={value!r}: versions start at 0")
    return version


def parse_timestamp_ms(value: Any) -> int:
    """``timestampAsOf``: ISO-8601 (``2024-05-01``, ``2024-05-01 12:00:00``; UTC unless it says) or epoch ms."""
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as e:
        raise ConfigError(
            f"option timestampAsOf={value!r}: expected an ISO-8601 timestamp or epoch milliseconds"
        ) from e
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


def parse_columns(name: str, value: Any, available: Iterable[str]) -> list[str]:
    """A comma-separated column list, matched case-insensitively to the table's columns."""
    wanted = [c.strip() for c in str(value).split(",") if c.strip()]
    if not wanted:
        raise ConfigError(f"option {name}={value!r}: expected a comma-separated list of columns")
    return table_columns_named(name, wanted, available)


def table_columns_named(name: str, wanted: Iterable[str], available: Iterable[str]) -> list[str]:
    """``wanted`` matched case-insensitively to the table's columns, without repeats; ConfigError
    naming the option ``name`` and the columns the table does not have."""
    by_lower = {c.lower(): c for c in available}
    unknown = [c for c in wanted if c.lower() not in by_lower]
    if unknown:
        raise ConfigError(
            f"option {name}: columns {unknown} are not in the table (columns: {sorted(by_lower.values())})"
        )
    return list(dict.fromkeys(by_lower[c.lower()] for c in wanted))


def read_plan(options: Mapping[str, Any], table_columns: Sequence[str], what: str) -> ReadPlan:
    """The client's read plan in ``options`` (decoded once, by ``ReadPlan.from_options``) with its names
    checked against the table: ``columns`` matched case-insensitively to the table's columns (unknown
    ones refused), and no match column named like a table column. ``what`` names the read in errors.

    Raises:
        ConfigError / FilterError: an option that does not decode, or names that do not fit the table.

    Example: ``read_plan({"columns": "ID"}, ["id", "msg"], "read /t").columns == ("id",)``
    """
    plan = ReadPlan.from_options(options)
    if plan.columns is not None:
        columns = plan.columns
        virtual = {n.lower() for n, _ in snippet_columns(options, table_columns)}
        if reads_score(options, table_columns):
            virtual.add(R.SCORE_COLUMN)
        if virtual:  # columns a read adds: not matched to the table's
            columns = tuple(c for c in columns if c.lower() not in virtual)
            if not columns:
                raise ConfigError(f"{what}: select at least one column of the table beside {sorted(virtual)}")
        plan = dataclasses.replace(plan, columns=tuple(table_columns_named(R.COLUMNS, columns, table_columns)))
    if plan.top_k_order is not None:  # ORDER BY's column, as the table spells it (Spark's names are case-blind)
        by_lower = {c.lower(): c for c in table_columns}
        column, descending, nulls_first = plan.top_k_order
        plan = dataclasses.replace(plan, top_k_order=(by_lower.get(column.lower(), column), descending, nulls_first))
    if not S.QUERY_FUZZY_TRANSPOSITIONS.get(options):  # a transposition is two edits of a fuzzy term
        plan = dataclasses.replace(
            plan,
            filter=with_fuzzy_setting(plan.filter, options),
            match_columns=tuple((n, F.fuzzy_transpositions(t, False)) for n, t in plan.match_columns),
        )
    for name, _ in plan.match_columns:
        if name in table_columns:
            raise ConfigError(f"{what}: match column {name!r} is a column of the table")
    return plan


def with_fuzzy_setting(tree: F.Filter | None, options: Mapping[str, Any]) -> F.Filter | None:
    """``tree`` with its fuzzy terms counting a transposition as ``spark.indextables.query.fuzzyTranspositions``
    says (true: one edit, as Tantivy's default; false: two)."""
    if tree is None or S.QUERY_FUZZY_TRANSPOSITIONS.get(options):
        return tree
    return F.fuzzy_transpositions(tree, False)


def reads_score(options: Mapping[str, Any], table_columns: Sequence[str]) -> bool:
    """Whether a read (its ``options``) selects ``_score`` (in ``columns`` or ``required_columns``, any
    case), the BM25 score of its index query; a table's own column of that name (written elsewhere) wins."""
    if any(c.lower() == R.SCORE_COLUMN for c in table_columns):
        return False
    plan = ReadPlan.from_options(options)
    names = [*(plan.columns or ()), *(plan.required_columns or ())]
    return any(n.lower() == R.SCORE_COLUMN for n in names)


def snippet_columns(options: Mapping[str, Any], table_columns: Sequence[str]) -> list[tuple[str, str]]:
    """(name, table column) of each ``_snippet_<column>`` a read selects (``columns`` or
    ``required_columns``, any case), in the order named; a table's own column of such a name wins."""
    plan = ReadPlan.from_options(options)
    by_lower = {c.lower(): c for c in table_columns}
    found: dict[str, tuple[str, str]] = {}
    for name in [*(plan.columns or ()), *(plan.required_columns or ())]:
        low = name.lower()
        if low.startswith(R.SNIPPET_PREFIX) and low not in by_lower and low[len(R.SNIPPET_PREFIX) :] in by_lower:
            column = by_lower[low[len(R.SNIPPET_PREFIX) :]]
            found.setdefault(low, (R.SNIPPET_PREFIX + column, column))
    return list(found.values())


def snippet_settings(options: Mapping[str, Any]) -> tuple[tuple[str, str], int]:
    """The tags around each match (``snippetTags``, a JSON list [start, end]) and the most characters
    of a snippet (``snippetMaxChars``)."""
    import json

    tags = ("<b>", "</b>")
    if R.SNIPPET_TAGS in options:
        try:
            value = json.loads(str(options[R.SNIPPET_TAGS]))
        except ValueError:
            value = None
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(t, str) for t in value)):
            raise ConfigError(
                f"read option {R.SNIPPET_TAGS}={options[R.SNIPPET_TAGS]!r}: expected a JSON list of two strings, "
                'e.g. ["<em>", "</em>"]'
            )
        tags = (value[0], value[1])
    chars = 150
    if R.SNIPPET_MAX_CHARS in options:
        chars = parse_positive_int(R.SNIPPET_MAX_CHARS, options[R.SNIPPET_MAX_CHARS])
    return tags, chars


def check_score_query(queries: Sequence[F.Filter], what: str, column: str = R.SCORE_COLUMN) -> None:
    """ConfigError unless a read selecting ``_score`` (or a ``_snippet_<column>``) has an index query
    to score (``queries``: the query strings of its filter, options and match columns)."""
    if not queries:
        kind = "the BM25 score" if column == R.SCORE_COLUMN else "the fragment around the matches"
        raise ConfigError(
            f"{what}: column {column} is {kind} of an index query, and this read has none; "
            "add one (WHERE col indexquery '...', _indexall indexquery '...', textsearch, fieldmatch, the "
            f"indexquery.<col> / indexqueryall options, or IndexTable.search), or do not select {column}"
        )


def output_columns(plan: ReadPlan, table_columns: list[str], types: Mapping[str, str]) -> list[str] | None:
    """The table's columns a read returns (None: all of them, in table order): ``plan.columns``, narrowed
    to the names a statement uses (``plan.required_columns``, ``*`` for all) when the plan has them."""
    if plan.required_columns is None:
        return None if plan.columns is None else list(plan.columns)
    required = required_columns(plan.required_columns, table_columns, types)
    return [c for c in (plan.columns or table_columns) if c in required]


def required_columns(names: Sequence[str], table_columns: list[str], types: Mapping[str, str]) -> list[str]:
    """The table's columns among ``names`` (the names a statement uses; ``"*"`` for all),
    case-insensitively, in table order. Names that are not columns are ignored (a statement's
    aliases, functions, other tables' columns); if none is a column, one column is read so rows can
    still be counted, a numeric one where there is one (``types``: column -> type name)."""
    if "*" in names:
        return list(table_columns)
    wanted = {n.lower() for n in names}
    chosen = [c for c in table_columns if c.lower() in wanted]
    if chosen or not table_columns:
        return chosen
    numeric = [c for c in table_columns if types.get(c) in ("long", "integer", "short", "byte", "double", "float")]
    return [(numeric or table_columns)[0]]


def query_filters(options: Mapping[str, str]) -> list[F.Filter]:
    """The Tantivy query strings of ``indexquery.<column>`` and ``indexqueryall`` options."""
    out: list[F.Filter] = []
    for key, value in options.items():
        if key == "indexqueryall":
            out.append(F.QueryString(_query_text(key, value), None))
        elif key.startswith("indexquery."):
            out.append(F.QueryString(_query_text(key, value), key[len("indexquery.") :]))
    return out


def _query_text(key: str, value: Any) -> str:
    text = str(value)
    if not text.strip():
        raise ConfigError(f"option {key}: the query is empty")
    return text
