"""The session's ``spark.indextables.*`` settings as data source options: what every read, write and
command of the client carries (Spark does not hand session settings to Python data sources)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from indextables_contract import settings as S
from indextables_contract.read import PARALLELISM
from indextables_contract.settings import accept

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Table names: ``spark.indextables.table.<name>`` = the table's path (see ``connect_plugin.session``).
TABLE_NAME_PREFIX = S.TABLE_NAME_PREFIX
SESSION_TIME_ZONE = "spark.sql.session.timeZone"


def session_options(spark: SparkSession) -> dict[str, str]:
    """The session's ``spark.indextables.*`` settings (table names excluded), and its time zone as
    ``sessionTimeZone``: what ``read``, ``write`` and the commands add to their options.

    Every read, write and command takes its options from here first, so this is also where a classic
    session becomes the calling thread's active one (``bind_to_this_thread``).

    Example: ``session_options(spark)["spark.indextables.indexWriter.heapSize"]`` after setting it.
    """
    bind_to_this_thread(spark)
    items = _all_settings(spark)
    options = {k: v for k, v in items.items() if k.startswith(S.PREFIX) and not k.startswith(TABLE_NAME_PREFIX)}
    time_zone = items.get(SESSION_TIME_ZONE) or _default_time_zone(spark)
    if time_zone:
        options["sessionTimeZone"] = str(time_zone)  # timestamp literals without an offset are in this zone
    return options


_default_zones: dict[str, str | None] = {}  # a Connect session's id -> its server's default time zone


def _default_time_zone(spark: SparkSession) -> str | None:
    """The session's time zone where it set none (then ``getAll`` leaves it out): the server's default,
    which a Connect session keeps for its life, so it is asked once per session (a request saved on every
    statement; a zone the session sets comes with ``getAll``)."""
    session_id = getattr(spark, "session_id", None) if getattr(spark, "_jsparkSession", None) is None else None
    if session_id is None:
        return spark.conf.get(SESSION_TIME_ZONE, None)
    key = str(session_id)
    if key not in _default_zones:
        _default_zones[key] = spark.conf.get(SESSION_TIME_ZONE, None)
    return _default_zones[key]


def bind_to_this_thread(spark: SparkSession) -> None:
    """Make a classic session the active session of the JVM thread serving this Python thread.

    Spark looks Python data sources up in the *active* session (``SparkSession.active``), which is
    per JVM thread; a Python thread other than the one that built the session is served by a JVM
    thread with none, so ``format("indextables")`` was not found there (``DATA_SOURCE_NOT_FOUND``,
    e.g. MERGE SPLITS from a worker thread). A Spark Connect session has no JVM here: nothing to do.
    """
    jvm, jsession = getattr(spark, "_jvm", None), getattr(spark, "_jsparkSession", None)
    if jvm is not None and jsession is not None:
        found = _session_class.get(id(jvm))
        if found is None or found[0] is not jvm:  # each step of the class's name is a py4j call (~1 ms)
            found = _session_class[id(jvm)] = (jvm, jvm.org.apache.spark.sql.SparkSession)
        found[1].setActiveSession(jsession)


_session_class: dict[int, tuple[Any, Any]] = {}  # id of a classic session's py4j view -> (it, its SparkSession class)


_SEPARATOR = "\x1f"  # ASCII unit separator: in no setting's name or value


def _all_settings(spark: SparkSession) -> dict[str, str]:
    """Every setting of the session. A classic session's ``spark.conf.getAll`` turns the JVM's map
    into a dict with a py4j call per setting (11 ms a read on local[2]); its names and its values
    are fetched here as one string each (0.3 ms). Connect's ``getAll`` is one request already."""
    jvm_session = getattr(spark, "_jsparkSession", None)
    if jvm_session is not None:
        settings = jvm_session.conf().getAll()  # a Scala Map: names and values iterate in one order
        names = str(settings.keys().mkString(_SEPARATOR)).split(_SEPARATOR)
        values = str(settings.values().mkString(_SEPARATOR)).split(_SEPARATOR)
        if len(names) == len(values) == settings.size():
            return dict(zip(names, values, strict=True))
    get_all = getattr(spark.conf, "getAll", None)
    if get_all is None:
        return {}
    return dict(get_all() if callable(get_all) else get_all)


def merged_options(spark: SparkSession, options: Mapping[str, Any] | None, what: str = "option") -> dict[str, str]:
    """The session's settings and ``options`` (over them), as every read, write and command sends them.

    Raises:
        ConfigError: a ``spark.indextables.*`` key no IndexTables documentation knows (naming the closest
        known key). A key that only tunes IndexTables4Spark's JVM is left out, with one warning per key
        per process (``indextables_contract.settings``): a JVM-only key in the session never breaks a query.
    """
    merged = session_options(spark)
    merged.update({k: _option_text(v) for k, v in (options or {}).items()})
    for key in accept(merged, what):
        del merged[key]
    return merged


# How long a Connect session's measured parallelism is reused (executors come and go).
PARALLELISM_TTL_S = 300.0
_parallelism_by_session: dict[str, tuple[float, int]] = {}


def cluster_parallelism(spark: SparkSession) -> int | None:
    """How many tasks the session's cluster runs at once (Spark's default parallelism), or None if
    it cannot tell. Reads and commands send it (``spark.indextables.read.parallelism``) so that the
    executors plan an index query as one wave of tasks.

    A classic session asks its SparkContext. A Connect client has none: it reads the number of
    slices Spark plans for ``spark.range(1)`` (the default parallelism) from the plan's explain text,
    an analysis call that runs no job, and reuses it for ``PARALLELISM_TTL_S`` seconds.

    Example: ``cluster_parallelism(spark)`` is 2 on ``local[2]``.
    """
    if not type(spark).__module__.startswith("pyspark.sql.connect"):
        return int(spark.sparkContext.defaultParallelism)
    key = str(getattr(spark, "session_id", id(spark)))
    seen = _parallelism_by_session.get(key)
    now = time.monotonic()
    if seen is not None and now - seen[0] < PARALLELISM_TTL_S:
        return seen[1]
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        spark.range(1).explain()
    found = re.search(r"\bsplits=(\d+)", text.getvalue())
    if found is None:
        return None
    _parallelism_by_session[key] = (now, int(found.group(1)))
    return int(found.group(1))


def read_options(spark: SparkSession, options: Mapping[str, Any] | None) -> dict[str, str]:
    """``merged_options`` for a read or a command: also the cluster's parallelism, unless set."""
    merged = merged_options(spark, options)
    if PARALLELISM not in merged:
        slots = cluster_parallelism(spark)
        if slots:
            merged[PARALLELISM] = str(slots)
    return merged


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)
