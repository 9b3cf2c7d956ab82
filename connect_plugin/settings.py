"""The session's ``spark.indextables.*`` settings as data source options: what every read, write and
command of the client carries (Spark does not hand session settings to Python data sources)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Table names: ``spark.indextables.table.<name>`` = the table's path (see ``connect_plugin.session``).
TABLE_NAME_PREFIX = "spark.indextables.table."
SESSION_TIME_ZONE = "spark.sql.session.timeZone"


def session_options(spark: SparkSession) -> dict[str, str]:
    """The session's ``spark.indextables.*`` settings (table names excluded), and its time zone as
    ``sessionTimeZone``: what ``read``, ``write`` and the commands add to their options.

    Example: ``session_options(spark)["spark.indextables.indexWriter.heapSize"]`` after setting it.
    """
    get_all = getattr(spark.conf, "getAll", None)
    if get_all is None:
        return {}
    items = dict(get_all() if callable(get_all) else get_all)
    options = {
        k: v for k, v in items.items() if k.startswith("spark.indextables.") and not k.startswith(TABLE_NAME_PREFIX)
    }
    time_zone = items.get(SESSION_TIME_ZONE) or spark.conf.get(SESSION_TIME_ZONE, None)
    if time_zone:
        options["sessionTimeZone"] = str(time_zone)  # timestamp literals without an offset are in this zone
    return options


def _options(spark: SparkSession, options: Mapping[str, Any] | None) -> dict[str, str]:
    merged = session_options(spark)
    merged.update({k: _option_text(v) for k, v in (options or {}).items()})
    return merged


def _option_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)
