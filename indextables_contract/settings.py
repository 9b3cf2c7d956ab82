"""Every ``spark.indextables.*`` setting this project recognises: one registry, used by the client
(``connect_plugin``) and the cluster (``executor_lib``), and the source of ``docs/settings.md``.

IndexTables4Spark users bring their ``spark-defaults.conf``. Each key they may have set is here:

* ``supported``: the setting works here, with the JVM's name, default and units (or it is one of this
  project's own settings, marked so);
* ``no-effect``: the key only tunes the JVM implementation's internals (its native caches, JNI
  batching, Azure, companion indexes ...). It is accepted, and the first use of each such key in a
  process logs ONE warning naming the key and why it has no effect here (``warn_no_effect``).

A ``spark.indextables.*`` key that is not here is an error that suggests the closest known key
(``check_key``). Per-column settings are patterns ending in ``<column>`` (any suffix matches).

One place per setting: a key the code reads is a named entry here (``MERGE_MAX_SOURCE_SPLITS``, ...)
that holds its name, its JVM aliases, its parser, its default (the text the docs show, parsed once into
the typed ``value``), the operations whose options keep it (``scopes``) and its doc line. Code reads
a setting through its entry, never by spelling the key::

    MERGE_MAX_SOURCE_SPLITS.get(options)   # 1000 unless set; the key found in any case, or by an alias;
                                           # ConfigError naming key, value and what is wrong otherwise

``executor_lib.spark.options`` (the accepted keys of reads and writes), ``executor_lib.log.config``
(``LogConfig``'s keys and defaults) and the commands derive from here; a test fails when a key of this
registry is spelled as a literal in ``executor_lib`` or ``connect_plugin``.

Regenerate the page after changing the registry::

    python -m indextables_contract.settings > docs/settings.md

Standard library only (this package is shared by the thin client and the cluster).
"""

from __future__ import annotations

import difflib
import logging
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from indextables_contract.errors import ConfigError
from indextables_contract.values import as_bool, as_duration, as_size

T = TypeVar("T")

PREFIX = "spark.indextables."
SUPPORTED = "supported"
NO_EFFECT = "no-effect"
COLUMN = "<column>"  # a per-column pattern's last part: matches any suffix

# Scopes: where a key is kept and read. READ / WRITE: a read's (and a command's, which take the read
# keys) / a write's options keep it; LOG: a transaction-log setting (LogConfig); COMMAND: a SQL command
# reads it; SESSION: the client reads it from the Spark session itself.
READ = "read"
WRITE = "write"
LOG = "log"
COMMAND = "command"
SESSION = "session"
SCOPES = (READ, WRITE, LOG, COMMAND, SESSION)
_RW = frozenset({READ, WRITE})

log = logging.getLogger("indextables.settings")

# -- parsers: text -> typed value; ValueError saying what was expected --------------------------------------


def text(value: Any) -> str:
    """A setting's text as given."""
    return str(value)


def word(value: Any) -> str:
    """A setting's text, stripped and lower-cased."""
    return str(value).strip().lower()


def _required(convert: Callable[[Any], T | None], expected: str) -> Callable[[Any], T]:
    """A parser giving ``convert(value)``, ValueError("expected ...") where it gives None."""

    def parse(value: Any) -> T:
        parsed = convert(value)
        if parsed is None:
            raise ValueError(f"expected {expected}")
        return parsed

    return parse


boolean = _required(as_bool, "true or false")  # ``values.as_bool``
size = _required(as_size, "a size such as 104857600, 512K, 100M or 1G")  # bytes (``values.as_size``)
hours = _required(as_duration, "hours (a number >= 0)")  # ``values.as_duration``
seconds = _required(as_duration, "seconds (a number >= 0; 0 turns it off)")  # 0 turns the feature off


def _range(least: float | None, most: float | None, kind: str) -> str:
    if least is not None and most is not None:
        return f"expected {kind} from {least:g} to {most:g}"
    if least == 1 and kind == "an integer":
        return "expected a positive integer"
    return f"expected {kind} >= {least:g}" if least is not None else f"expected {kind}"


def integer(least: int | None = 1, most: int | None = None) -> Callable[[Any], int]:
    """An integer in [least, most] (by default: a positive integer)."""

    def parse(value: Any) -> int:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise ValueError(_range(least, most, "an integer")) from None
        if (least is not None and number < least) or (most is not None and number > most):
            raise ValueError(_range(least, most, "an integer"))
        return number

    return parse


def number(least: float | None = None, most: float | None = None) -> Callable[[Any], float]:
    """A number in [least, most]."""

    def parse(value: Any) -> float:
        try:
            parsed = float(str(value).strip())
        except ValueError:
            raise ValueError(_range(least, most, "a number")) from None
        if (least is not None and not parsed >= least) or (most is not None and not parsed <= most):
            raise ValueError(_range(least, most, "a number"))
        return parsed

    return parse


def choice(*values: str) -> Callable[[Any], str]:
    """One of ``values`` (any case, stripped), lower-cased."""

    def parse(value: Any) -> str:
        parsed = word(value)
        if parsed not in values:
            raise ValueError(f"expected one of {', '.join(values)}")
        return parsed

    return parse


def parse_option(parse: Callable[[Any], T], name: str, value: Any, what: str = "") -> T:
    """``value`` of the option ``name`` read by one of the parsers above; ConfigError naming the option,
    the value and what is wrong (``what``: the operation, first). Entries read theirs so (``Setting.get``),
    and so do the few options outside the registry (a command's ``targetSize``, a stream's ``ignoreDeletes``).

    Example: ``parse_option(size, "targetSize", "512M") == 512 << 20``
    """
    try:
        return parse(value)
    except (TypeError, ValueError) as e:
        where = f"{what}: " if what else ""
        raise ConfigError(f"{where}option {name}={value!r}: {e}") from None


def optional(parse: Callable[[Any], T]) -> Callable[[Any], T | None]:
    """``parse`` for a setting whose default is no value (None): the same parser, typed so."""
    return parse


_UNSET: Any = object()


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One key: its status, its default (as the docs write it) and what it does, or why it has no effect;
    for a key the code reads, its parser, typed default (``value``), scopes and JVM aliases.

    ``value`` is ``parse(default)`` unless given (a default the docs describe in words, e.g. "the task's
    cores", is given as the value the code uses: None)."""

    key: str
    status: str
    default: str
    note: str
    jvm: bool = True  # IndexTables4Spark documents or defines it; False: this project's own setting
    parse: Callable[[Any], T] | None = None
    value: Any = _UNSET
    scopes: frozenset[str] = frozenset()
    aliases: tuple[str, ...] = ()  # other full names the JVM reads it by (any case)

    def __post_init__(self) -> None:
        if self.value is _UNSET:
            object.__setattr__(self, "value", None if self.parse is None else self.parse(self.default))
        unknown = set(self.scopes) - set(SCOPES)
        if unknown:
            raise ValueError(f"{self.key}: unknown scopes {sorted(unknown)}")

    @property
    def is_pattern(self) -> bool:
        return self.key.endswith(COLUMN)

    @property
    def prefix(self) -> str:
        """A per-column pattern's key before ``<column>`` (``spark.indextables.indexing.typemap.``)."""
        return self.key[: -len(COLUMN)] if self.is_pattern else self.key

    @property
    def name(self) -> str:
        """The key without ``spark.indextables.``."""
        return self.key[len(PREFIX) :]

    def find(self, options: Mapping[str, Any]) -> tuple[str, Any] | None:
        """(the name it is given by, its value) in ``options``: the key as spelled, else in any case (as
        the JVM reads it), else an alias; None if absent."""
        if self.key in options:
            return self.key, options[self.key]
        for names in ((self.key,), self.aliases):
            wanted = {n.lower() for n in names}
            for name, value in options.items():
                if name.lower() in wanted:
                    return name, value
        return None

    def raw(self, options: Mapping[str, Any]) -> str | None:
        """The text ``options`` give this setting (stripped), or None."""
        found = self.find(options)
        return None if found is None else str(found[1]).strip()

    def given(self, options: Mapping[str, Any]) -> bool:
        return self.find(options) is not None

    def parse_value(self, value: Any, what: str = "") -> T:
        """``value`` parsed; ConfigError naming the key, the value and what is wrong."""
        if self.parse is None:
            return cast(T, value)
        return parse_option(self.parse, self.key, value, what)

    def get(self, options: Mapping[str, Any], what: str = "") -> T:
        """The setting in ``options`` (parsed), else its typed default.

        Example: ``MERGE_MAX_SOURCE_SPLITS.get({"spark.indextables.merge.maxsourcesplitspermerge": "5"}) == 5``
        """
        found = self.find(options)
        if found is None:
            return cast(T, self.value)
        return self.parse_value(found[1], what)


# Every entry, in the order made: ``_key`` (and ``_mine``, ``_kept``) and ``_n`` add theirs, so
# ``SETTINGS`` is built from the entries themselves, none listed twice.
_ENTRIES: list[Setting[Any]] = []


def _add(entry: Setting[T]) -> Setting[T]:
    if any(e.key.lower() == entry.key.lower() for e in _ENTRIES):
        raise ValueError(f"{entry.key}: in the registry twice")
    _ENTRIES.append(entry)
    return entry


def _n(key: str, default: str, reason: str) -> Setting[Any]:
    """A key that only tunes IndexTables4Spark's JVM: accepted, warned about once (``reason``)."""
    return _add(Setting(PREFIX + key, NO_EFFECT, default, reason))


def _key(
    key: str,
    default: str,
    note: str,
    parse: Callable[[Any], T],
    *,
    scopes: Iterable[str] = (),
    value: Any = _UNSET,
    jvm: bool = True,
    aliases: tuple[str, ...] = (),
) -> Setting[T]:
    """A supported key the code reads: ``_key(name, doc default, doc line, parser, scopes=...)``."""
    return _add(Setting(PREFIX + key, SUPPORTED, default, note, jvm, parse, value, frozenset(scopes), aliases))


def _mine(
    key: str,
    default: str,
    note: str,
    parse: Callable[[Any], T],
    *,
    scopes: Iterable[str] = (),
    value: Any = _UNSET,
) -> Setting[T]:
    """This project's own setting (not IndexTables4Spark's)."""
    return _key(key, default, note, parse, scopes=scopes, value=value, jvm=False)


def _kept(key: str, default: str, note: str, *, scopes: Iterable[str] = (), jvm: bool = True) -> Setting[str | None]:
    """A key parsed where it is used (the storage options, the doc mapping, the Iceberg catalog): the
    operations of its ``scopes`` keep it; ``get`` gives its text, or None."""
    return _key(key, default, note, optional(text), scopes=scopes, value=None, jvm=jvm)


# Families of keys: what a key of each starts with.
INDEXING_PREFIX = PREFIX + "indexing."
AZURE_PREFIX = PREFIX + "azure."
GCS_PREFIX = PREFIX + "gcs."
ICEBERG_PREFIX = PREFIX + "iceberg."

# -- the keys the code reads: one entry each ---------------------------------------------------------------

# index writer
INDEX_WRITER_HEAP_SIZE = _key(
    "indexWriter.heapSize",
    "256M (IndexTables4Spark: 100M)",
    "Tantivy's indexing heap per split being written (a size: 2G, 500M, 1024K)",
    optional(size),
    scopes={WRITE},
    value=None,  # the split writer's own default
)
INDEX_WRITER_THREADS = _key(
    "indexWriter.threads",
    "the task's cores (IndexTables4Spark: 2)",
    "Tantivy's indexing threads per split",
    optional(integer()),
    scopes={WRITE},
    value=None,
)
INDEX_WRITER_TEMP_DIRECTORY = _key(
    "indexWriter.tempDirectoryPath",
    "the system temp directory",
    "where a write task builds its splits before uploading them",
    optional(text),
    scopes={WRITE},
    value=None,
)
# indexing (parsed against the schema by executor_lib.splits.doc_mapping)
INDEXING_TYPEMAP = _kept(
    "indexing.typemap." + COLUMN,
    "string",
    "string (exact), text (tokenized), json or ip; or the list form typemap.<type> = col1,col2",
    scopes={WRITE},
)
# Tantivy's Snowball stemmers, each a tokenizer as ``en_stem`` is (simple tokenizer, long tokens dropped,
# lowercase, stem): tokenizer name -> the language of ``tantivy::tokenizer::Language`` and of the tantivy
# package's ``Filter.stemmer`` (both know exactly these 18 in 0.27). Recorded in the doc mapping as named.
STEMMERS = {
    "ar_stem": "arabic",
    "da_stem": "danish",
    "nl_stem": "dutch",
    "en_stem": "english",
    "fi_stem": "finnish",
    "fr_stem": "french",
    "de_stem": "german",
    "el_stem": "greek",
    "hu_stem": "hungarian",
    "it_stem": "italian",
    "no_stem": "norwegian",
    "pt_stem": "portuguese",
    "ro_stem": "romanian",
    "ru_stem": "russian",
    "es_stem": "spanish",
    "sv_stem": "swedish",
    "ta_stem": "tamil",
    "tr_stem": "turkish",
}
TOKENIZERS = ("default", "whitespace", "raw", *STEMMERS)  # the named values of indexing.tokenizer.<col>
JVM_TOKENIZERS = ("default", "whitespace", "raw", "en_stem")  # the tokenizers IndexTables4Spark knows
# N-gram tokenizers (search-as-you-type, issue 75): ``ngram_<min>_<max>`` indexes every n-gram of min..max
# characters of each word (words as ``default`` makes them: runs of letters and digits, long ones dropped,
# lowercased), ``edge_ngram_<min>_<max>`` each word's prefixes of min..max characters; 1 <= min <= max <=
# NGRAM_MAX. Built by native/src/lib.rs (NgramFilter); recorded in the doc mapping as named.
NGRAM_MAX = 32
_NGRAM_NAME = re.compile(r"(edge_ngram|ngram)_(.*)")
_NGRAM_BOUNDS = re.compile(r"([0-9]+)_([0-9]+)")


@dataclass(frozen=True)
class NgramSpec:
    """An n-gram tokenizer's spec: grams of ``min``..``max`` characters of each word, prefixes only if ``edge``."""

    edge: bool
    min: int
    max: int


def ngram_problem(name: str) -> str | None:
    """What is wrong with an n-gram tokenizer name (``ngram_...``, ``edge_ngram_...``); None if it is right or
    names no n-gram tokenizer. Example: ``ngram_problem("edge_ngram_5_2")`` says max 2 is below min 5."""
    m = _NGRAM_NAME.fullmatch(name)
    if m is None:
        return None
    bounds = _NGRAM_BOUNDS.fullmatch(m.group(2))
    if bounds is None:
        return f"{m.group(2)!r} is not <min>_<max> (whole numbers: {m.group(1)}_2_10)"
    lo, hi = int(bounds.group(1)), int(bounds.group(2))
    if lo < 1:
        return f"min {lo} is below 1"
    if hi < lo:
        return f"max {hi} is below min {lo}"
    if hi > NGRAM_MAX:
        return f"max {hi} is above {NGRAM_MAX}"
    return None


def ngram_spec(name: str | None) -> NgramSpec | None:
    """The spec of a valid n-gram tokenizer name, else None. Example: ``ngram_spec("edge_ngram_2_10")`` is
    ``NgramSpec(edge=True, min=2, max=10)``."""
    m = _NGRAM_NAME.fullmatch(name) if isinstance(name, str) else None
    bounds = _NGRAM_BOUNDS.fullmatch(m.group(2)) if m is not None else None
    if m is None or bounds is None or ngram_problem(name or "") is not None:
        return None
    return NgramSpec(m.group(1) == "edge_ngram", int(bounds.group(1)), int(bounds.group(2)))


def is_tokenizer(name: str) -> bool:
    """Whether ``name`` is a value of ``indexing.tokenizer.<col>``: a named tokenizer or a valid n-gram one."""
    return name in TOKENIZERS or ngram_spec(name) is not None


INDEXING_TOKENIZER = _kept(
    "indexing.tokenizer." + COLUMN,
    "default",
    "default, whitespace, raw or en_stem; or a stemmer of another language (IndexTables4Spark does not know "
    "them): " + ", ".join(n for n in STEMMERS if n != "en_stem") + "; or ngram_<min>_<max> / "
    f"edge_ngram_<min>_<max> (each word's n-grams or prefixes, 1 <= min <= max <= {NGRAM_MAX}; not known to "
    "IndexTables4Spark either); or tokenizer.<name> = col1,col2",
    scopes={WRITE},
)


def jvm_tokenizer_warnings(options: Mapping[str, Any]) -> list[str]:
    """One text per column whose ``indexing.tokenizer`` option (``tokenizer.<col>=<name>`` or the list form
    ``tokenizer.<name>=col1,col2``, key in any case) names a tokenizer IndexTables4Spark does not know.

    Example: ``{"spark.indextables.indexing.tokenizer.body": "de_stem"}`` gives one text naming ``body``
    and ``de_stem``."""
    prefix = INDEXING_TOKENIZER.prefix.lower()
    found: dict[str, str] = {}
    for key, value in options.items():
        if not str(key).lower().startswith(prefix):
            continue
        rest, name = str(key)[len(prefix) :], str(value).strip()
        if is_tokenizer(rest.lower()) and not is_tokenizer(name.lower()):  # the list form
            for column in (c.strip() for c in name.split(",") if c.strip()):
                found.setdefault(column, rest.lower())
        else:
            found.setdefault(rest, name)
    return [
        f"IndexTables4Spark does not know tokenizer {name} of column {column}: the JVM will not search "
        f"{column} correctly (it has no {_jvm_lacks(name)} for its queries: they may find nothing or "
        "fail); IndexTables for Python does"
        for column, name in found.items()
        if (name in STEMMERS or ngram_spec(name) is not None) and name not in JVM_TOKENIZERS
    ]


def _jvm_lacks(name: str) -> str:
    spec = ngram_spec(name)
    if spec is None:
        return f"{STEMMERS[name]} stemmer"
    return f"{'edge ' if spec.edge else ''}n-gram tokenizer of {spec.min}..{spec.max} characters"


INDEXING_INDEX_RECORD_OPTION = _kept(
    "indexing.indexrecordoption." + COLUMN,
    "position",
    "position, freq or basic; or indexrecordoption.<option> = col1,col2",
    scopes={WRITE},
)
INDEXING_TEXT_INDEX_RECORD_OPTION = _kept(
    "indexing.text.indexRecordOption",
    "position",
    "the index record option of every text column without its own",
    scopes={WRITE},
)
INDEXING_TOKEN_LENGTH = _kept(
    "indexing.tokenLength." + COLUMN,
    "255",
    "longest token a tokenized column keeps (or the list form tokenLength.<N|name> = col1,col2)",
    scopes={WRITE},
)
INDEXING_TEXT_MAX_TOKEN_LENGTH = _kept(
    "indexing.text.maxTokenLength",
    "255",
    "longest token kept (bytes; tantivy_max, default, legacy, min)",
    scopes={WRITE},
)
INDEXING_FAST_FIELDS = _kept(
    "indexing.fastfields",
    "numeric, boolean, date, ip and exact-string columns",
    "exactly the columns with fast fields (comma-separated)",
    scopes={WRITE},
)
INDEXING_JSON_MODE = _kept(
    "indexing.json.mode", "full", "full: nested values are also fast fields; minimal: not", scopes={WRITE}
)
INDEXING_STORE_ONLY = _kept("indexing.storeonly", "none", "columns stored but not indexed", scopes={WRITE}, jvm=False)
INDEXING_INDEX_ONLY = _kept(
    "indexing.indexonly", "none", "columns indexed but not stored (they read as null)", scopes={WRITE}, jvm=False
)
# write sizing
OPTIMIZE_WRITE_TARGET_RECORDS = _mine(
    "optimizeWrite.targetRecordsPerSplit",
    "1000000",
    "a write task starts a new split after this many rows",
    integer(),
    scopes={WRITE},
)
AUTO_SIZE_ENABLED = _mine(
    "autoSize.enabled",
    "false",
    "accepted for older configurations; autoSize.targetSplitSize alone sizes splits",
    boolean,
    scopes={WRITE},
)
AUTO_SIZE_TARGET_SPLIT_SIZE = _mine(
    "autoSize.targetSplitSize",
    "none",
    "a write task starts a new split at about this size (e.g. 100M)",
    optional(size),
    scopes={WRITE},
    value=None,
)
OPTIMIZE_WRITE_ENABLED = _key(
    "write.optimizeWrite.enabled",
    "false",
    "before the commit, each partition's new splits are merged into splits of about targetSplitSize "
    "(the JVM shuffles the rows first; the result is the same: few, well-sized splits in one version)",
    boolean,
    scopes={WRITE},
)
OPTIMIZE_WRITE_TARGET_SPLIT_SIZE = _key(
    "write.optimizeWrite.targetSplitSize", "1G", "split size an optimized write aims at", size, scopes={WRITE}
)
PROGRESS_INTERVAL_SECONDS = _mine(
    "progress.intervalSeconds",
    "30",
    "a write or merge task reports progress at this interval (0: off)",
    seconds,
    scopes=_RW,
)
# merge on write (indextables_contract.write_settings)
MERGE_ON_WRITE_ENABLED = _key(
    "mergeOnWrite.enabled",
    "false",
    "after a write's commit, merge the partitions that have enough small splits",
    boolean,
    scopes=_RW | {SESSION},
)
MERGE_ON_WRITE_TARGET_SIZE = _key(
    "mergeOnWrite.targetSize", "4G", "the merge-on-write's target split size", size, scopes=_RW | {SESSION}
)
MERGE_ON_WRITE_MIN_SPLITS = _mine(
    "mergeOnWrite.minSplitsToMerge",
    "10",
    "merge a partition once it has this many small (or, with merge.sortKey, level-0) splits",
    integer(),
    scopes=_RW | {SESSION},
)
MERGE_ON_WRITE_STREAM_INTERVAL = _mine(
    "mergeOnWrite.streamIntervalSeconds",
    "30",
    "connect_plugin.write_stream merges at most this often",
    seconds,
    scopes=_RW | {SESSION},
)
# merge
MERGE_SORT_KEY = _mine(
    "merge.sortKey",
    "none",
    "MERGE SPLITS without SORT BY sorts by this column",
    optional(text),
    scopes=_RW | {COMMAND, SESSION},
    value=None,
)
MERGE_MAX_SOURCE_SPLITS = _key(
    "merge.maxSourceSplitsPerMerge",
    "1000",
    "MERGE SPLITS merges at most this many splits into one",
    integer(),
    scopes=_RW | {COMMAND},
)
# purge on write (indextables_contract.write_settings)
PURGE_ON_WRITE_ENABLED = _key(
    "purgeOnWrite.enabled",
    "false",
    "after a write's commit, purge the table (as PURGE INDEXTABLE) when triggered",
    boolean,
    scopes={WRITE},
)
PURGE_ON_WRITE_TRIGGER_AFTER_MERGE = _key(
    "purgeOnWrite.triggerAfterMerge", "true", "purge after a merge-on-write ran", boolean, scopes={WRITE}
)
PURGE_ON_WRITE_TRIGGER_AFTER_WRITES = _key(
    "purgeOnWrite.triggerAfterWrites",
    "0",
    "purge after every N-th write (0: never); counted by the table's version (the JVM counts per driver)",
    integer(0),
    scopes={WRITE},
)
PURGE_ON_WRITE_SPLIT_RETENTION_HOURS = _key(
    "purgeOnWrite.splitRetentionHours", "168", "the purge's split retention (at least 24)", integer(0), scopes={WRITE}
)
PURGE_ON_WRITE_TX_LOG_RETENTION_HOURS = _key(
    "purgeOnWrite.txLogRetentionHours", "720", "the purge's transaction-log retention", integer(0), scopes={WRITE}
)
# purge
PURGE_DEFAULT_RETENTION_HOURS = _key(
    "purge.defaultRetentionHours",
    "168",
    "PURGE INDEXTABLE without OLDER THAN keeps this many hours of splits",
    hours,
    scopes=_RW | {COMMAND},
)

# transaction log (executor_lib.log.config.LogConfig): every operation's options keep them
_LOG = _RW | {LOG}
CHECKPOINT_ENABLED = _key("checkpoint.enabled", "true", "write checkpoints after commits", boolean, scopes=_LOG)
CHECKPOINT_INTERVAL = _key(
    "checkpoint.interval", "10", "checkpoint when version % interval == 0", integer(), scopes=_LOG
)
CHECKPOINT_ACTIONS_PER_PART = _mine(
    "checkpoint.actionsPerPart", "100000", "multi-part checkpoints above this many actions", integer(), scopes=_LOG
)
CHECKPOINT_MULTIPART_ENABLED = _mine(
    "checkpoint.multiPart.enabled", "true", "allow multi-part checkpoints", boolean, scopes=_LOG
)
CHECKPOINT_CLEANUP_ENABLED = _mine(
    "checkpoint.cleanup.enabled",
    "true",
    "after each checkpoint, delete expired version files and states",
    boolean,
    scopes=_LOG,
)
CHECKPOINT_TOMBSTONE_RETENTION_HOURS = _mine(
    "checkpoint.tombstoneRetentionHours", "168", "keep removes this long in checkpoints", hours, scopes=_LOG
)
TRANSACTION_COMPRESSION_ENABLED = _key(
    "transaction.compression.enabled", "true", "gzip-compress version files", boolean, scopes=_LOG
)
TRANSACTION_GZIP_LEVEL = _mine("transaction.compression.gzip.level", "6", "gzip level, 1-9", integer(1, 9), scopes=_LOG)
TRANSACTION_COMMIT_INFO_ENABLED = _mine(
    "transaction.commitInfo.enabled",
    "false",
    "write a commitInfo line first in each version file",
    boolean,
    scopes=_LOG,
)
TRANSACTION_RETRY_MAX_ATTEMPTS = _key(
    "transaction.retry.maxAttempts", "10", "failed commit writes before giving up", integer(), scopes=_LOG
)
TRANSACTION_RETRY_BASE_DELAY_MS = _key(
    "transaction.retry.baseDelayMs", "100", "commit retry backoff base (ms)", integer(0), scopes=_LOG
)
TRANSACTION_RETRY_MAX_DELAY_MS = _key(
    "transaction.retry.maxDelayMs", "5000", "commit retry backoff cap (ms)", integer(0), scopes=_LOG
)
STATE_FORMAT = _key(
    "state.format",
    "avro",
    "avro (protocol v4 state) or json (v3 JSON checkpoints)",
    choice("avro", "json"),
    scopes=_LOG,
)
STATE_MANIFEST_FORMAT = _mine(
    "state.manifestFormat",
    "avro",
    "state manifest per version: avro (what the JVM reads) or json",
    choice("json", "avro"),
    scopes=_LOG,
)
STATE_COMPRESSION = _key(
    "state.compression",
    "zstd",
    "codec of Avro manifests: zstd, snappy or none",
    choice("zstd", "snappy", "none"),
    scopes=_LOG,
)
STATE_COMPRESSION_LEVEL = _key("state.compressionLevel", "3", "zstd level, 1-22", integer(1, 22), scopes=_LOG)
STATE_ENTRIES_PER_MANIFEST = _key(
    "state.entriesPerManifest", "50000", "most file entries per manifest", integer(), scopes=_LOG
)
STATE_READ_PARALLELISM = _key("state.read.parallelism", "8", "threads reading Avro manifests", integer(), scopes=_LOG)
STATE_SCHEMA_RENORMALIZE_THRESHOLD = _key(
    "state.schema.renormalizeThreshold", "5", "renormalize doc-mapping refs above this many", integer(0), scopes=_LOG
)
STATE_COMPACTION_TOMBSTONE_THRESHOLD = _key(
    "state.compaction.tombstoneThreshold",
    "0.10",
    "rewrite a manifest when its tombstoned entries / entries exceed this",
    number(0, 1),
    scopes=_LOG | {SESSION},
)
STATE_COMPACTION_MAX_TOMBSTONES = _mine(
    "state.compaction.maxTombstones",
    "5000",
    "rewrite the manifests holding the most tombstones while a state would list more than this many",
    integer(0),
    scopes=_LOG,
)
STATE_COMPACTION_MAX_MANIFESTS = _key(
    "state.compaction.maxManifests", "20", "merge small manifests above this many", integer(), scopes=_LOG
)
STATE_COMPACTION_LARGE_REMOVE_THRESHOLD = _key(
    "state.compaction.largeRemoveThreshold",
    "2147483647",
    "compact when one write removes this many files",
    integer(),
    scopes=_LOG,
)
STATE_RETENTION_VERSIONS = _key(
    "state.retention.versions", "2", "cleanup keeps at least this many newest states", integer(), scopes=_LOG
)
STATE_RETENTION_HOURS = _key(
    "state.retention.hours", "168", "cleanup keeps every state younger than this", hours, scopes=_LOG
)
STATE_GC_MIN_MANIFEST_AGE_HOURS = _key(
    "state.gc.minManifestAgeHours",
    "1",
    "cleanup deletes unreferenced manifests only when older than this",
    hours,
    scopes=_LOG,
)
STATE_GC_ALLOW_UNSAFE_MIN_MANIFEST_AGE = _mine(
    "state.gc.allowUnsafeMinManifestAge",
    "false",
    "allow state.gc.minManifestAgeHours below 0.25",
    boolean,
    scopes=_LOG,
)
PURGE_TX_LOG_RETENTION_HOURS = _key(
    "purge.txLogRetentionHours", "720", "cleanup deletes covered version files older than this", hours, scopes=_LOG
)

# reads
READ_TARGET_PARTITION_BYTES = _mine(
    "read.targetPartitionBytes", "256M", "a scan is cut into tasks of about this size", size, scopes={READ}
)
READ_MAX_SPLITS_PER_PARTITION = _mine(
    "read.maxSplitsPerPartition", "64", "most splits one read task searches", integer(), scopes={READ}
)
QUERY_FUZZY_TRANSPOSITIONS = _mine(
    "query.fuzzyTranspositions",
    "true",
    "fuzzyquery's word~N counts a transposition (hte for the) as one edit; false: as two",
    boolean,
    scopes={READ, SESSION},
)
READ_STRICT_QUERIES = _mine(
    "read.strictQueries",
    "false",
    "an indexquery word, phrase or wildcard against an exact-string column (which matches whole values "
    "only) is an error naming the column and spark.indextables.indexing.typemap.<column>=text; false: a "
    "warning, the query runs as IndexTables4Spark runs it",
    boolean,
    scopes={READ, SESSION},
)
READ_PARALLELISM = _mine(
    "read.parallelism",
    "the cluster's task slots",
    "tasks an index query runs as (the client fills it in)",
    optional(integer()),
    scopes={READ, SESSION},
    value=None,
)
# caches
CACHE_DIRECTORY_PATH = _key(
    "cache.directoryPath",
    "INDEXTABLES_CACHE_DIR, or under the system temp directory",
    "the node's split cache directory",
    optional(text),
    scopes=_RW,
    value=None,
)
CACHE_MAX_SIZE = _mine("cache.maxSize", "10G", "the node's split cache size (LRU)", size, scopes=_RW)
CACHE_FETCH = _mine(
    "cache.fetch",
    "pieces (INDEXTABLES_CACHE_FETCH)",
    "how a cold split on object storage is fetched: pieces (the members and ranges queries read) or whole",
    optional(text),
    scopes=_RW,
    value=None,  # executor_lib.cache.split_cache.fetch_by_piece: the environment, else pieces
)
CACHE_LOCAL_SPLITS = _mine(
    "cache.localSplits",
    "in-place (INDEXTABLES_CACHE_LOCAL_SPLITS)",
    "how a local table's splits are read: in-place (where they are, no copy; their members' CRCs checked "
    "at the first open and every 600 s) or copy (into the split cache, as a download: a table on a network "
    "filesystem read from the node's disk)",
    optional(text),
    scopes=_RW,
    value=None,  # executor_lib.cache.split_cache.read_in_place: the environment, else in-place
)
CACHE_UNPACKED_STORES = _mine(
    "cache.unpackedStores",
    "true (INDEXTABLES_CACHE_UNPACKED)",
    "keep a doc store decompressed in the split cache once a read needs a quarter of its blocks (faster "
    "reads of many rows; about 2.6x the store's bytes of the cache's budget); false: never kept or read",
    optional(boolean),
    scopes=_RW,
    value=None,  # executor_lib.cache.split_cache.keep_unpacked: the environment, else true
)
# storage (parsed by executor_lib.storage, which also takes them by their Python names)
AWS_ACCESS_KEY = _kept("aws.accessKey", "the AWS credential chain", "S3 access key id", scopes=_RW)
AWS_SECRET_KEY = _kept("aws.secretKey", "the AWS credential chain", "S3 secret access key", scopes=_RW)
AWS_SESSION_TOKEN = _kept("aws.sessionToken", "the AWS credential chain", "S3 session token", scopes=_RW)
AWS_REGION = _kept("aws.region", "the SDK default", "S3 region", scopes=_RW)
S3_ENDPOINT = _kept("s3.endpoint", "AWS", "S3 API endpoint URL", scopes=_RW)
S3_PATH_STYLE_ACCESS = _kept("s3.pathStyleAccess", "false", "path-style S3 addressing", scopes=_RW)
AZURE_ACCOUNT_NAME = _kept(
    "azure.accountName",
    "the URI's account, AZURE_STORAGE_ACCOUNT_NAME or ~/.azure/credentials",
    "Azure storage account (for abfss://container/path and azure://container/path)",
    scopes=_RW,
)
AZURE_ACCOUNT_KEY = _kept(
    "azure.accountKey", "AZURE_STORAGE_KEY or ~/.azure/credentials", "Azure storage account key", scopes=_RW
)
AZURE_TENANT_ID = _kept(
    "azure.tenantId",
    "none",
    "service principal tenant (with clientId, clientSecret; needs azure-identity)",
    scopes=_RW,
)
AZURE_CLIENT_ID = _kept("azure.clientId", "none", "service principal application (client) id", scopes=_RW)
AZURE_CLIENT_SECRET = _kept("azure.clientSecret", "none", "service principal secret", scopes=_RW)
AZURE_BEARER_TOKEN = _kept("azure.bearerToken", "none", "an OAuth bearer token for Azure storage", scopes=_RW)
AZURE_CONNECTION_STRING = _kept(
    "azure.connectionString",
    "AZURE_STORAGE_CONNECTION_STRING",
    "Azure storage connection string (account key or SAS, endpoints)",
    scopes=_RW,
)
AZURE_ENDPOINT = _kept(
    "azure.endpoint",
    "https://<account>.blob.<suffix of the URI's host>",
    "Azure Blob endpoint URL (emulators, sovereign clouds, private links); a SAS may be its query",
    scopes=_RW,
)
GCS_ENDPOINT = _kept(
    "gcs.endpoint",
    "STORAGE_EMULATOR_HOST, else https://storage.googleapis.com",
    "Google Cloud Storage JSON API endpoint URL (emulators such as fake-gcs-server, private endpoints)",
    scopes=_RW,
    jvm=False,
)
GCS_PROJECT_ID = _kept(
    "gcs.projectId",
    "the credentials' project or GOOGLE_CLOUD_PROJECT",
    "Google Cloud project of the GCS client (gs:// objects are reached by bucket name: most tables need none)",
    scopes=_RW,
    jvm=False,
)
GCS_CREDENTIALS_FILE = _kept(
    "gcs.credentialsFile",
    "GOOGLE_APPLICATION_CREDENTIALS, else Application Default Credentials",
    "path of a Google credentials JSON file (a service account's key) on every node, for gs:// tables",
    scopes=_RW,
    jvm=False,
)
GCS_ACCESS_TOKEN = _kept(
    "gcs.accessToken", "none", "an OAuth2 access token for Google Cloud Storage (gs:// tables)", scopes=_RW, jvm=False
)
# companion indexes
_ICEBERG = "BUILD COMPANION FOR ICEBERG: "
ICEBERG_CATALOG_TYPE = _kept(
    "iceberg.catalogType", "none", _ICEBERG + "the pyiceberg catalog type (sql, rest, glue, ...)", scopes={READ}
)
ICEBERG_URI = _kept(
    "iceberg.uri", "none", _ICEBERG + "the catalog's URI (sqlite:///path for a SQL catalog)", scopes={READ}
)
ICEBERG_WAREHOUSE = _kept(
    "iceberg.warehouse", "none", _ICEBERG + "the catalog's warehouse (WAREHOUSE overrides it)", scopes={READ}
)
ICEBERG_TOKEN = _kept("iceberg.token", "none", _ICEBERG + "a REST catalog's bearer token", scopes={READ})
ICEBERG_CREDENTIAL = _kept("iceberg.credential", "none", _ICEBERG + "a REST catalog's OAuth2 credential", scopes={READ})
ICEBERG_S3_ENDPOINT = _kept(
    "iceberg.s3Endpoint", "none", _ICEBERG + "the S3 endpoint of the table's files", scopes={READ}
)
ICEBERG_S3_PATH_STYLE_ACCESS = _kept(
    "iceberg.s3PathStyleAccess", "false", _ICEBERG + "path-style S3 addressing", scopes={READ}
)
COMPANION_PARQUET_TABLE_ROOT = _key(
    "companion.parquetTableRoot",
    "the metadata's parquetStorageRoot (Iceberg) or sourceTablePath",
    "reading a companion index: the root its source files' relative paths resolve against",
    optional(text),
    scopes={READ},
    value=None,
)
# names
TABLE_NAME = _kept(
    "table." + COLUMN,
    "none",
    "a table name for SQL: spark.indextables.table.<name> = its path",
    scopes={SESSION},
    jvm=False,
)
TABLE_NAME_PREFIX = TABLE_NAME.prefix  # spark.indextables.table.<name> = a table's path (connect_plugin.session)


# Why whole families of JVM keys have no effect here.
_JNI_BATCH = "batches documents for tantivy4java over JNI; here rows go from Arrow batches straight into Tantivy"
_SPLIT_CONVERSION = (
    "parallelism of the JVM's tantivy index to Quickwit split conversion; here splits are written directly"
)
_TXLOG_CACHE = (
    "tunes tantivy4java's native transaction-log cache; here each process caches table snapshots itself "
    "(always on, refreshed on every read)"
)
_MAX_READS = "parallel GETs of tantivy4java's native log reader; here state.read.parallelism sets the manifest readers"
_STATE_RETRY = "retries of the JVM's state-manifest writes; here every commit retries under transaction.retry.*"
_AFTER_MERGE = (
    "compacts the state after a merge in the JVM; here compaction follows state.compaction.* after every "
    "state write, merges included"
)
_STATS_TRUNCATION = (
    "string statistics are always truncated to 32 characters here (split pruning relies on that "
    "length); the JVM's default, so tables stay compatible"
)
_DATA_SKIPPING = (
    "the JVM limits which columns get min/max statistics; here every indexed scalar column gets them "
    "(pruning needs nothing else)"
)
_OPTIMIZE_SHUFFLE = (
    "tunes the shuffle the JVM requests before an optimized write (Spark's "
    "RequiresDistributionAndOrdering, not offered to Python data sources); here an optimized write "
    "merges each partition's new splits before its commit"
)
_ASYNC_MERGE = (
    "schedules the JVM's background merge-on-write batches; here merge-on-write runs once after the "
    "commit, in the committing process"
)
_MERGE_IO = (
    "the JVM's merge downloads and uploads; here a merge reads its sources through the node's split cache and "
    "uploads one split"
)
_BATCH_RETRIEVAL = (
    "tunes tantivy4java's batched document retrieval; here rows come from each split's columnar copy in one read"
)
_ADAPTIVE = "tunes the JVM's adaptive batch sizing of document retrieval; here there is nothing to tune"
_DISK_CACHE = (
    "configures tantivy4java's L2 disk slice cache; here the node's split cache (cache.directoryPath, "
    "cache.maxSize, cache.fetch) keeps what queries fetched"
)
_READ_LIMIT = "the JVM's per-partition row cap without a pushed LIMIT; here a read returns every matching row"
_SPLITS_PER_TASK = (
    "the JVM's splits-per-task choice; here read.maxSplitsPerPartition and read.targetPartitionBytes plan the tasks"
)
_PARTITION_PRUNING = "tunes the JVM's partition-pruning caches; here pruning is one pass over the snapshot's files"
_STRING_PATTERN = (
    "LIKE prefix/suffix/contains filters are always pushed here where the index answers them exactly "
    "(exact string fields), and re-checked by Spark otherwise"
)
_MERGE_TEMP = "merges are built in the system temporary directory here (TMPDIR)"
_PURGE_MIN = "the 24-hour minimum retention of PURGE is fixed here (a younger split may belong to a running write)"
_PURGE_JVM = "tunes the JVM's distributed deletion of purged files; here the purge deletes them in one process"
_NATIVE_MEMORY = "bridges tantivy4java's native memory with Spark's memory manager; no native JVM memory here"
_COMPANION = (
    "tunes the JVM's companion sync (batches, FAIR pool, native reader and writer); here BUILD INDEXTABLES "
    "COMPANION runs one Spark task per companion split and commits once"
)
_DATABRICKS = (
    "Unity Catalog credentials come from a JVM credential provider; here S3 credentials come from options, "
    "the environment or the AWS credential chain"
)
_S3_UPLOAD = "tunes the JVM's S3 multipart uploads; here botocore's transfer manager chooses"
_READ_PREWARM = (
    "the JVM prewarms caches when a read starts; here PREWARM INDEXTABLES CACHE and the node's split cache do that"
)
_AGG_PUSHDOWN = (
    "the JVM fails an aggregate it cannot push down when this is set; here IndexTable.aggregate and "
    "connect_plugin.sql push what they can and let Spark compute the rest"
)

# The keys that have no effect here, by family (each ``_n`` adds its entry to the registry).
_NO_EFFECT_KEYS = (
    # --- index writer ---
    _n("indexWriter.batchSize", "10000", _JNI_BATCH),
    _n("indexWriter.maxBatchBufferSize", "90M", _JNI_BATCH),
    _n("splitConversion.maxParallelism", "available processors", _SPLIT_CONVERSION),
    # --- write sizing ---
    _n("write.optimizeWrite.samplingRatio", "1.1", _OPTIMIZE_SHUFFLE),
    _n("write.optimizeWrite.minRowsForEstimation", "10000", _OPTIMIZE_SHUFFLE),
    _n("write.optimizeWrite.distributionMode", "hash", _OPTIMIZE_SHUFFLE),
    _n("write.optimizeWrite.maxSplitSize", "4G", _OPTIMIZE_SHUFFLE),
    # --- merge on write ---
    _n("mergeOnWrite.async.enabled", "true", _ASYNC_MERGE),
    _n("mergeOnWrite.batchCpuFraction", "0.167", _ASYNC_MERGE),
    _n("mergeOnWrite.maxConcurrentBatches", "3", _ASYNC_MERGE),
    _n("mergeOnWrite.minBatchesToTrigger", "1", _ASYNC_MERGE + " (mergeOnWrite.minSplitsToMerge sets when)"),
    _n("mergeOnWrite.shutdownTimeoutMs", "300000", _ASYNC_MERGE),
    _n("mergeOnWrite.mergeGroupMultiplier", "2.0", _ASYNC_MERGE),
    _n("mergeOnWrite.minDiskSpaceGB", "20", _ASYNC_MERGE),
    _n("mergeOnWrite.maxConcurrentMergesPerWorker", "auto", _ASYNC_MERGE),
    _n("mergeOnWrite.memoryOverheadFactor", "3.0", _ASYNC_MERGE),
    # --- merge ---
    _n("merge.skipSplitThreshold", "0.45", "here a merge leaves alone the splits of at least 90% of the target size"),
    _n("merge.download.maxConcurrencyPerCore", "8", _MERGE_IO),
    _n("merge.download.memoryBudget", "2G", _MERGE_IO),
    _n("merge.download.retries", "3", _MERGE_IO),
    _n("merge.upload.maxConcurrency", "6", _MERGE_IO),
    _n("merge.tempDirectoryPath", "auto", _MERGE_TEMP),
    # --- purge ---
    _n("purge.minRetentionHours", "24", _PURGE_MIN),
    _n("purge.retentionCheckEnabled", "true", _PURGE_MIN),
    _n("purge.parallelism", "auto", _PURGE_JVM),
    _n("purge.maxFilesToDelete", "1000000", _PURGE_JVM),
    _n("purge.deleteRetries", "3", _PURGE_JVM),
    # --- transaction log (log/config.py) ---
    _n("transaction.maxConcurrentReads", "32", _MAX_READS),
    _n("transaction.cache.enabled", "true", _TXLOG_CACHE),
    _n("transaction.cache.ttl.ms", "300000", _TXLOG_CACHE),
    _n("transaction.cache.version.ttl.ms", "300000", _TXLOG_CACHE),
    _n("transaction.cache.snapshot.ttl.ms", "600000", _TXLOG_CACHE),
    _n("transaction.cache.fileList.ttl.ms", "120000", _TXLOG_CACHE),
    _n("transaction.cache.metadata.ttl.ms", "1800000", _TXLOG_CACHE),
    _n("transaction.cache.version.capacity", "1000", _TXLOG_CACHE),
    _n("transaction.cache.snapshot.capacity", "100", _TXLOG_CACHE),
    _n("transaction.cache.fileList.capacity", "50", _TXLOG_CACHE),
    _n("transaction.cache.expirationSeconds", "300", _TXLOG_CACHE),
    _n("state.compaction.afterMerge", "true", _AFTER_MERGE),
    _n("state.retry.maxAttempts", "10", _STATE_RETRY),
    _n("state.retry.baseDelayMs", "100", _STATE_RETRY),
    _n("state.retry.maxDelayMs", "5000", _STATE_RETRY),
    _n("stats.truncation.enabled", "true", _STATS_TRUNCATION),
    _n("stats.truncation.maxLength", "32", _STATS_TRUNCATION),
    _n("dataSkippingStatsColumns", "all", _DATA_SKIPPING),
    _n("dataSkippingNumIndexedCols", "32", _DATA_SKIPPING),
    # --- reads ---
    _n("read.defaultLimit", "250", _READ_LIMIT),
    _n("read.splitsPerTask", "auto", _SPLITS_PER_TASK),
    _n("read.maxSplitsPerTask", "8", _SPLITS_PER_TASK),
    _n("read.aggregate.splitsPerTask", "read.splitsPerTask", _SPLITS_PER_TASK),
    _n("read.aggregate.maxSplitsPerTask", "read.maxSplitsPerTask", _SPLITS_PER_TASK),
    _n("read.requireAggregatePushdown", "false", _AGG_PUSHDOWN),
    _n("read.batchOptimization.enabled", "true", _BATCH_RETRIEVAL),
    _n("read.batchOptimization.profile", "balanced", _BATCH_RETRIEVAL),
    _n("read.batchOptimization.maxRangeSize", "16M", _BATCH_RETRIEVAL),
    _n("read.batchOptimization.gapTolerance", "512K", _BATCH_RETRIEVAL),
    _n("read.batchOptimization.minDocsForOptimization", "50", _BATCH_RETRIEVAL),
    _n("read.batchOptimization.maxConcurrentPrefetch", "8", _BATCH_RETRIEVAL),
    _n("read.adaptiveTuning.enabled", "true", _ADAPTIVE),
    _n("read.adaptiveTuning.minBatchesBeforeAdjustment", "5", _ADAPTIVE),
    _n("partitionPruning.filterCacheEnabled", "true", _PARTITION_PRUNING),
    _n("partitionPruning.indexEnabled", "true", _PARTITION_PRUNING),
    _n("partitionPruning.parallelThreshold", "100", _PARTITION_PRUNING),
    _n("partitionPruning.selectivityOrdering", "true", _PARTITION_PRUNING),
    _n("filter.stringPattern.pushdown", "false", _STRING_PATTERN),
    _n("filter.stringStartsWith.pushdown", "false", _STRING_PATTERN),
    _n("filter.stringEndsWith.pushdown", "false", _STRING_PATTERN),
    _n("filter.stringContains.pushdown", "false", _STRING_PATTERN),
    _n("prewarm.enabled", "false", _READ_PREWARM),
    _n("prewarm.segments", "TERM_DICT,POSTINGS", _READ_PREWARM),
    _n("prewarm.fields", "all", _READ_PREWARM),
    _n("prewarm.splitsPerTask", "2", _READ_PREWARM),
    _n("prewarm.partitionFilter", "all", _READ_PREWARM),
    _n("prewarm.failOnMissingField", "true", _READ_PREWARM),
    _n("prewarm.catchUpNewHosts", "false", _READ_PREWARM),
    # --- caches ---
    _n("cache.disk.enabled", "auto", _DISK_CACHE),
    _n("cache.disk.path", "auto", _DISK_CACHE),
    _n("cache.disk.maxSize", "auto", _DISK_CACHE),
    _n("cache.disk.compression", "lz4", _DISK_CACHE),
    _n("cache.disk.minCompressSize", "4K", _DISK_CACHE),
    _n("cache.disk.manifestSyncInterval", "30", _DISK_CACHE),
    _n("cache.disk.writeQueue.mode", "size", _DISK_CACHE),
    _n("cache.disk.writeQueue.capacity", "1G", _DISK_CACHE),
    _n("cache.disk.dropWritesWhenFull", "true", _DISK_CACHE),
    _n("cache.disk.writeQueue.maxBudget", "0", _DISK_CACHE),
    _n("cache.coalesceMaxGap", "512K", _DISK_CACHE),
    _n("native.memory.enabled", "true", _NATIVE_MEMORY),
    # --- storage ---
    _n("aws.credentialsProviderClass", "none", "a JVM class; here the AWS credential chain of boto3 applies"),
    _n("s3.maxConcurrency", "4", _S3_UPLOAD),
    _n("s3.partSize", "64M", _S3_UPLOAD),
    _n("databricks.workspaceUrl", "none", _DATABRICKS),
    _n("databricks.apiToken", "none", _DATABRICKS),
    _n("databricks.credential.refreshBuffer.minutes", "40", _DATABRICKS),
    _n("databricks.cache.maxSize", "100", _DATABRICKS),
    _n("databricks.fallback.enabled", "true", _DATABRICKS),
    _n("databricks.retry.attempts", "3", _DATABRICKS),
    # --- companion indexes ---
    _n("companion.sync.distributedLogRead.enabled", "true", _COMPANION),
    _n("companion.sync.arrowFfi.enabled", "true", _COMPANION),
    _n("companion.sync.batchSize", "defaultParallelism", _COMPANION),
    _n("companion.sync.maxConcurrentBatches", "6", _COMPANION),
    _n("companion.writerHeapSize", "1G", _COMPANION),
    _n("companion.readerBatchSize", "8192", _COMPANION),
    _n("companion.schedulerPool", "indextables-companion", _COMPANION),
)

SETTINGS: tuple[Setting[Any], ...] = tuple(_ENTRIES)  # every entry above, each once

_BY_KEY = {s.key.lower(): s for s in SETTINGS if not s.is_pattern}
_PATTERNS = tuple((s.key[: -len(COLUMN)].lower(), s) for s in SETTINGS if s.is_pattern)


def keys_for(scope: str) -> tuple[str, ...]:
    """The keys (not per-column patterns) with ``scope``, in registry order: e.g. the keys a read keeps.

    Example: ``MERGE_MAX_SOURCE_SPLITS.key in keys_for(READ)``.
    """
    return tuple(s.key for s in SETTINGS if scope in s.scopes and not s.is_pattern)


def patterns_for(scope: str) -> tuple[str, ...]:
    """The per-column patterns with ``scope``, as prefixes (``spark.indextables.indexing.typemap.``)."""
    return tuple(s.prefix for s in SETTINGS if scope in s.scopes and s.is_pattern)


def entries_for(scope: str) -> tuple[Setting[Any], ...]:
    """The entries with ``scope`` (e.g. ``LOG``: every transaction-log setting)."""
    return tuple(s for s in SETTINGS if scope in s.scopes)


def lookup(key: str) -> Setting[Any] | None:
    """The registry's entry for ``key`` (case-insensitive; a per-column key matches its pattern), or None.

    Example: ``lookup("spark.indextables.indexing.typemap.message").key`` ends with ``typemap.<column>``.
    """
    lower = key.lower()
    found = _BY_KEY.get(lower)
    if found is not None:
        return found
    return next((s for prefix, s in _PATTERNS if lower.startswith(prefix) and len(lower) > len(prefix)), None)


def suggestion(key: str) -> str:
    """`` (did you mean X?)`` with the closest known key, or ``""``; a per-column family is offered with
    the key's own column (``indexing.typmap.message``: ``spark.indextables.indexing.typemap.message``)."""
    # Compared without the common prefix, which would make every key look close to every other.
    by_tail = {s.key[len(PREFIX) :].lower(): s.key for s in SETTINGS if not s.is_pattern}
    given = key[len(PREFIX) :] if key.lower().startswith(PREFIX) else key
    tail = given.lower()
    parts = given.split(".")
    for s in SETTINGS:
        if not s.is_pattern:
            continue
        # A per-column key is the family's words then the column (which may hold dots itself): as many
        # of the key's words as the family has are compared with the family's (alone, or a long column
        # would make any family look close), the rest is kept as the column.
        family = s.prefix[len(PREFIX) :]  # e.g. "indexing.typemap."
        words = family.count(".")
        if len(parts) <= words or not all(parts[words:]):
            continue
        head = ".".join(parts[:words]).lower() + "."
        if difflib.SequenceMatcher(None, head, family.lower()).ratio() >= 0.7:
            column = ".".join(parts[words:])
            by_tail.setdefault((family + column).lower(), s.prefix + column)
    close = difflib.get_close_matches(tail, list(by_tail), n=1, cutoff=0.7)
    return f" (did you mean {by_tail[close[0]]}?)" if close else ""


def check_key(key: str, what: str = "setting") -> Setting[Any]:
    """The entry of a ``spark.indextables.*`` key; ConfigError naming it (and the closest known key)
    if no IndexTables documentation knows it.

    Example: ``check_key("spark.indextables.indexWriter.heapsize").status == "supported"``.
    """
    found = lookup(key)
    if found is None:
        raise ConfigError(
            f"{what}: unknown option {key!r}{suggestion(key)}; the known spark.indextables.* settings are "
            "listed in docs/settings.md"
        )
    return found


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_no_effect(key: str) -> bool:
    """Log the one warning of a ``no-effect`` key, once per key per process; True if it was logged now."""
    found = lookup(key)
    if found is None or found.status != NO_EFFECT:
        return False
    with _warned_lock:
        if found.key in _warned:
            return False
        _warned.add(found.key)
    log.warning("%s has no effect in IndexTables for Python: it %s", key, found.note)
    return True


def accept(options: Iterable[str], what: str = "setting") -> list[str]:
    """The ``spark.indextables.*`` keys among ``options`` that have no effect here (each warned once);
    ConfigError for a key no documentation knows. Other keys are not looked at."""
    dropped = []
    for key in options:
        if not key.lower().startswith(PREFIX):
            continue
        if check_key(key, what).status == NO_EFFECT:
            warn_no_effect(key)
            dropped.append(key)
    return dropped


def markdown() -> str:
    """The settings page (``docs/settings.md``), generated from ``SETTINGS``."""
    supported = [s for s in SETTINGS if s.status == SUPPORTED]
    no_effect = [s for s in SETTINGS if s.status == NO_EFFECT]
    jvm = [s for s in SETTINGS if s.jvm]
    lines = [
        "# Settings (`spark.indextables.*`)",
        "",
        "Generated from `indextables_contract/settings.py` by `python -m indextables_contract.settings "
        "> docs/settings.md`; a test fails when this page and the registry differ. Do not edit by hand.",
        "",
        f"{len(SETTINGS)} keys: {len(supported)} supported ({sum(s.jvm for s in supported)} of them "
        f"IndexTables4Spark's, {sum(not s.jvm for s in supported)} this project's own), {len(no_effect)} accepted "
        f"with no effect. {len(jvm)} are IndexTables4Spark's.",
        "",
        "- **supported**: works here with IndexTables4Spark's name, default and units (*own*: a setting of "
        "this project only).",
        "- **no effect**: tunes IndexTables4Spark's JVM internals. Accepted as a session setting or option; "
        "the first use in a process logs one warning (logger `indextables.settings`) naming the key and the "
        "reason below.",
        "- Any other `spark.indextables.*` key is an error that names the closest known key (a per-column "
        "key with its column: `indexing.typmap.message` is offered `spark.indextables.indexing.typemap.message`).",
        "- `<column>`: a per-column setting (any column name; the list forms are noted).",
        "",
        "| key | status | default | meaning / why no effect |",
        "|---|---|---|---|",
    ]
    for s in sorted(SETTINGS, key=lambda s: s.key.lower()):
        status = s.status if s.status == NO_EFFECT else ("supported" if s.jvm else "supported (own)")
        note = s.note.replace("|", "\\|")
        lines.append(f"| `{s.key}` | {status.replace('-', ' ')} | {s.default} | {note} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
