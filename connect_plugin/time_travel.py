"""Time travel in SQL (issue 76): ``SELECT ... FROM indextables.`<path>` VERSION AS OF 3`` and
``... TIMESTAMP AS OF '2024-05-01 12:00:00'`` (also Spark's ``FOR SYSTEM_VERSION`` / ``FOR SYSTEM_TIME``
spellings) on an IndexTables table, for ``connect_plugin.sql``: the clause after a table becomes the read
options ``versionAsOf`` / ``timestampAsOf`` (as ``connect_plugin.read(version_as_of=...)``) and is blanked
out of the statement, whose positions stay the same. A timestamp without an offset is UTC, as the option
reads it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from connect_plugin.lexer import unquote
from indextables_contract.errors import IndexTablesSQLError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_CLAUSE = re.compile(r"\s+(?:for\s+)?(system_version|version|system_time|timestamp)\s+as\s+of\b\s*", re.IGNORECASE)
_ANY_CLAUSE = re.compile(r"\b(?:system_version|version|system_time|timestamp)\s+as\s+of\b", re.IGNORECASE)
_VERSION = re.compile(r"\d+\b")
_STRING = re.compile(r"[rR]?'[^']*'|[rR]?\"[^\"]*\"")  # in ``code`` a literal's inside is blank


def time_travel(spark: SparkSession, text: str, code: str, options: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """(``text``, ``code``) without the time-travel clauses after IndexTables tables, and ``options`` with
    the read option they give. Unchanged if there are none.

    Raises:
        IndexTablesSQLError: a clause whose value is not a version number / a quoted timestamp, or clauses
            that differ between the statement's IndexTables tables (or name only some of them).
    """
    from connect_plugin.statement import find_table_refs

    if not _ANY_CLAUSE.search(code):
        return text, code, options
    refs = find_table_refs(spark, text, code)
    found: list[tuple[str, str]] = []
    spans: list[tuple[int, int]] = []
    for ref in refs:
        m = _CLAUSE.match(code, ref.end)
        if m is None:
            found.append(("", ""))
            continue
        kind = "versionAsOf" if "version" in m.group(1).lower() else "timestampAsOf"
        value_re = _VERSION if kind == "versionAsOf" else _STRING
        v = value_re.match(code, m.end())
        if v is None:
            wanted = (
                "a version number (VERSION AS OF 3)"
                if kind == "versionAsOf"
                else ("a quoted timestamp (TIMESTAMP AS OF '2024-05-01 12:00:00', UTC unless it gives an offset)")
            )
            said = " ".join(text[m.start() : m.end() + 30].split())
            raise IndexTablesSQLError(f"{said!r}: {m.group(1).upper()} AS OF takes {wanted}")
        literal = text[v.start() : v.end()]
        found.append((kind, literal if kind == "versionAsOf" else unquote(literal)))
        spans.append((m.start(), v.end()))
    if not spans:
        return text, code, options
    if len(set(found)) > 1:
        raise IndexTablesSQLError(
            "time travel here takes one version for every IndexTables table of a statement (VERSION AS OF / "
            "TIMESTAMP AS OF after each, the same); read other versions with connect_plugin.read(spark, path, "
            "version_as_of=...) and a view"
        )
    for start, end in spans:
        text = text[:start] + " " * (end - start) + text[end:]
        code = code[:start] + " " * (end - start) + code[end:]
    kind, value = found[0]
    return text, code, {**options, kind: value}
