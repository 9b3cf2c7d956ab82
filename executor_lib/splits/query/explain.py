"""Reading Tantivy query text: where a bad query goes wrong.

Tantivy's query parser says only ``Syntax Error: <query>`` or ``Field does not exist: 'x'``.
``locate`` finds the place a user should look: the first closing bracket without an opener,
the innermost bracket or quote left open, a dangling ``AND``/``OR``/``NOT``, a ``field:`` with
nothing after it, or the named field. ``explain`` turns it into a message with the position and
a caret under the query. No tantivy here: this reads the query text only.
"""

from __future__ import annotations

import re

_PAIRS = {")": "(", "]": "[", "}": "{"}
_OPERATOR = re.compile(r"(?<![\w.])(AND|OR|NOT)(?![\w.])")
_FIELD_NAMED = re.compile(r"Field does not exist: '([^']+)'")
_NO_POSITIONS = re.compile(r"field '([^']+)' does not have positions indexed")


def _bracket_error(query: str) -> tuple[int, str] | None:
    opened: list[tuple[str, int]] = []
    quote_at: int | None = None
    escaped = False
    for i, ch in enumerate(query):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif quote_at is not None:
            if ch == '"':
                quote_at = None
        elif ch == '"':
            quote_at = i
        elif ch in "([{":
            opened.append((ch, i))
        elif ch in _PAIRS:
            if not opened or (opened[-1][0] != _PAIRS[ch] and not (ch in "]}" and opened[-1][0] in "[{")):
                return i, f"{ch!r} closes nothing"
            opened.pop()
    if quote_at is not None:
        return quote_at, "unclosed '\"'"
    if opened:
        ch, i = opened[-1]
        return i, f"unclosed {ch!r}"
    return None


def _operator_error(query: str) -> tuple[int, str] | None:
    for m in _OPERATOR.finditer(query):
        before = query[: m.start()].rstrip()
        after = query[m.end() :].lstrip()
        if m.group(1) != "NOT" and (not before or before.endswith("(")):
            return m.start(), f"{m.group(1)} has nothing on its left"
        if not after or after.startswith(")"):
            return m.start(), f"{m.group(1)} has nothing on its right"
    return None


def _empty_field_error(query: str) -> tuple[int, str] | None:
    for m in re.finditer(r"([\w.]+):(\s*)(?=$|\)|\s)", query):
        return m.end(1), f"field {m.group(1)!r} has no value"
    return None


def _field_position(query: str, field: str) -> int | None:
    m = re.search(rf"(?<![\w.]){re.escape(field)}\s*:", query)
    return m.start() if m else None


def locate(query: str, message: str) -> tuple[int, str] | None:
    """(0-based position, what is wrong there) for Tantivy's error ``message`` on ``query``, if found."""
    for pattern, what in ((_FIELD_NAMED, "no such field {!r}"), (_NO_POSITIONS, "field {!r} has no positions")):
        m = pattern.search(message)
        if m:
            pos = _field_position(query, m.group(1))
            return (pos, what.format(m.group(1))) if pos is not None else None
    for check in (_bracket_error, _operator_error, _empty_field_error):
        found = check(query)
        if found is not None:
            return found
    return None


def explain(query: str, message: str) -> str:
    """``does not parse at position N: <what> (<Tantivy's message>)`` plus the query with a caret."""
    found = locate(query, message)
    if found is None:
        return f"does not parse: {message}"
    pos, what = found
    return f"does not parse at position {pos}: {what} ({message})\n  {query}\n  {' ' * pos}^"
