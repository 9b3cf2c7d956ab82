"""The query language of ``indexquery``: Tantivy's grammar, read here into a tree.

IndexTables4Spark hands a query string to Quickwit, which parses it with Tantivy's grammar
(``query-grammar/src/query_grammar.rs``, the strict ``parse_to_ast``) and then gives some leaves
meanings Tantivy's own query parser does not (``quickwit-query/src/query_ast/user_input_query.rs``):
an unquoted word holding an unescaped ``*`` or ``?`` is a *wildcard* (``Config*``, ``*Broker*``,
``Con?ig``), a single-quoted text is the AND of its tokens, and a boolean clause with only excluded
parts excludes from every document (``NOT a``, ``x AND NOT y``). The ``tantivy`` Python package
parses the same text but drops the wildcards (``Config*`` becomes the term ``config``) and makes
``x AND NOT y`` match nothing, so this module reads the text itself and ``splits.query.compile``
builds the Tantivy query, leaf by leaf.

``parse`` returns ``Clause`` / ``Boost`` / ``Leaf`` nodes. Every leaf keeps ``source``, its own
text (without the field), so a plain leaf (a term, phrase, range, set, regex) can be handed back
to Tantivy's parser alone and means exactly what it means there. One extension over the grammar:
a word starting with a wildcard needs no field (``*Broker*`` on a column query), as
IndexTables4Spark's ``transformLeadingWildcardQuery`` does before parsing.

No tantivy here: this reads text only. ``QuerySyntaxError`` carries the position it gave up at.
"""

from __future__ import annotations

import gc
import re
from dataclasses import dataclass, replace

from indextables_contract.errors import QueryError, QuerySyntaxError

MUST, SHOULD, MUST_NOT = "must", "should", "must_not"

# Tantivy's grammar: characters a field name cannot hold unescaped, and those a word cannot hold.
_SPECIAL = set("+^`:{}\"'[]()!\\* ")
_ESCAPE_IN_WORD = set("^`:{}\"'[]()\\")
_KEYWORDS = ("OR", "AND", "NOT", "IN")
_RANGE_WORD_STOP = set('{}"[]()')
# Groups and NOTs nested deeper than this are refused (QuerySyntaxError): each level is a few Python
# frames here and in the compiler, and 500 parentheses were a bare RecursionError.
MAX_DEPTH = 100
TOO_DEEP = "the query nests deeper than"  # how that QuerySyntaxError's message starts


@dataclass(frozen=True)
class Leaf:
    """One leaf. ``kind``: literal, all, exists, range, set, regex.

    ``field`` is the field as written (``None``: the default fields); ``source`` the leaf's text
    after the field. Literals also have ``text`` (escapes read), ``delimiter`` (``""``, ``'"'`` or
    ``"'"``), ``slop`` and ``prefix`` (a phrase ending in ``*``).
    """

    kind: str
    source: str
    field: str | None = None
    text: str = ""
    delimiter: str = ""
    slop: int = 0
    prefix: bool = False

    def with_default_field(self, field: str) -> Leaf:
        """The leaf inside ``field:( ... )``: a leaf naming no field takes it; ``*`` becomes exists."""
        if self.field is not None:
            return self
        if self.kind == "all":
            return replace(self, kind="exists", field=field, source="*")
        if self.kind in ("literal", "range", "set"):
            return replace(self, field=field)
        return self

    @property
    def is_wildcard(self) -> bool:
        """An unquoted word with an unescaped ``*`` or ``?`` (Quickwit's ``is_wildcard``)."""
        return self.kind == "literal" and self.delimiter == "" and wildcard_parts(self.text) is not None


@dataclass(frozen=True)
class Clause:
    """Boolean clause: ``(occur, child)`` pairs, occur None meaning the default operator (OR)."""

    children: tuple[tuple[str | None, Node], ...]


@dataclass(frozen=True)
class Boost:
    child: Node
    boost: float


Node = Leaf | Clause | Boost


WILDCARD_MARKS = ("*", "?")


def wildcard_parts(text: str) -> list[tuple[str, str]] | None:
    """``text`` as ``("text", piece)``, ``("*", "")`` and ``("?", "")`` parts, or None when it has no
    unescaped wildcard. Escapes read as Quickwit's ``parse_wildcard_query``: ``\\*`` is a literal
    star, and a trailing backslash is dropped.

    Example: ``wildcard_parts("Con?ig*")`` is ``[("text", "Con"), ("?", ""), ("text", "ig"), ("*", "")]``.
    """
    parts: list[tuple[str, str]] = []
    literal: list[str] = []
    found = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 < len(text):
                literal.append(text[i + 1])
            i += 2
            continue
        if ch in WILDCARD_MARKS:
            found = True
            if literal:
                parts.append(("text", "".join(literal)))
                literal = []
            parts.append((ch, ""))
        else:
            literal.append(ch)
        i += 1
    if literal:
        parts.append(("text", "".join(literal)))
    return parts if found else None


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.depth = 0  # leaves being read, one inside another (groups, NOTs)
        self.n = len(text)

    # -- characters --

    def ws(self, i: int) -> int:
        while i < self.n and self.s[i].isspace():
            i += 1
        return i

    def ws1(self, i: int) -> int | None:
        j = self.ws(i)
        return j if j > i else None

    def at_end_or_ws(self, i: int) -> bool:
        return i >= self.n or self.s[i].isspace()

    # -- leaves --

    def field_name(self, i: int) -> tuple[str, int] | None:
        """``name:`` (spaces allowed around the colon): (the name as written, after the colon)."""
        j = i
        if j < self.n and self.s[j] == "\\" and j + 1 < self.n and self.s[j + 1] in _SPECIAL:
            j += 2
        elif j < self.n and self.s[j] not in _SPECIAL and self.s[j] != "-":
            j += 1
        else:
            return None
        while j < self.n:
            ch = self.s[j]
            if ch == "\\":
                j += 2 if j + 1 < self.n and self.s[j + 1] in _SPECIAL else 1
            elif ch not in _SPECIAL:
                j += 1
            else:
                break
        k = self.ws(j)
        if k >= self.n or self.s[k] != ":":
            return None
        return self.s[i:j], self.ws(k + 1)

    def word(self, i: int) -> tuple[str, int] | None:
        """A word (escapes kept as written); ``None`` for a keyword or nothing. A word may start with
        ``*`` (``*Broker*``): ``leaf`` reads a lone ``*`` as every document before it gets here."""
        j = i
        first = True
        while j < self.n:
            ch = self.s[j]
            if ch == "\\" and j + 1 < self.n:
                j += 2
            elif ch.isspace() or ch in _ESCAPE_IN_WORD or (first and ch == "-"):
                break
            else:
                j += 1
            first = False
        raw = self.s[i:j]
        if not raw or raw in _KEYWORDS:
            return None
        return raw, j

    def quoted(self, i: int) -> tuple[str, str, int] | None:
        """``"…"`` or ``'…'``: (delimiter, text with escapes read, after the closing quote)."""
        if i >= self.n or self.s[i] not in "\"'":
            return None
        quote, j, out = self.s[i], i + 1, []
        while j < self.n:
            ch = self.s[j]
            if ch == "\\" and j + 1 < self.n:
                out.append(self.s[j + 1])
                j += 2
            elif ch == quote:
                return quote, "".join(out), j + 1
            else:
                out.append(ch)
                j += 1
        return None

    def negative_number(self, i: int) -> int | None:
        if i >= self.n or self.s[i] != "-":
            return None
        j = i + 1
        while j < self.n and self.s[j].isdigit():
            j += 1
        if j == i + 1:
            return None
        if j + 1 < self.n and self.s[j] == "." and self.s[j + 1].isdigit():
            j += 1
            while j < self.n and self.s[j].isdigit():
                j += 1
        return j

    def term_or_phrase(self, i: int) -> tuple[Leaf, int] | None:
        end = self.negative_number(i)
        if end is not None:
            text, delimiter = self.s[i:end], ""
        else:
            quoted = self.quoted(i)
            if quoted is not None:
                delimiter, text, end = quoted
            else:
                found = self.word(i)
                if found is None:
                    return None
                raw, end = found
                text, delimiter = _interpret_escapes(raw), ""
        slop, prefix = 0, False
        if end < self.n and self.s[end] == "*":
            prefix, end = True, end + 1
        elif end < self.n and self.s[end] == "~":
            j = end + 1
            while j < self.n and self.s[j].isdigit():
                j += 1
            if j > end + 1:
                slop, end = int(self.s[end + 1 : j]), j
        leaf = Leaf("literal", self.s[i:end], text=text, delimiter=delimiter, slop=slop, prefix=prefix)
        return leaf, end

    def exists(self, i: int) -> int | None:
        j = self.ws(i)
        if j < self.n and self.s[j] == "*":
            k = j + 1
            if k >= self.n or self.s[k].isspace() or self.s[k] in _ESCAPE_IN_WORD:
                return k
        return None

    def range_value(self, i: int) -> int | None:
        end = self.negative_number(i)
        if end is not None:
            return end
        j = i
        if j < self.n and not self.s[j].isspace() and self.s[j] not in _RANGE_WORD_STOP and self.s[j] != "`":
            j += 1
            while j < self.n and not self.s[j].isspace() and self.s[j] not in _RANGE_WORD_STOP:
                j += 1
            return j
        return None

    def range(self, i: int) -> int | None:
        j = self.ws(i)
        for sign in (">=", "<=", "<", ">"):
            if self.s.startswith(sign, j):
                return self.range_value(self.ws(j + len(sign)))
        if j >= self.n or self.s[j] not in "{[":
            return None
        lower_end = self.range_value(self.ws(j + 1))
        to = self.ws1(lower_end) if lower_end is not None else None
        if to is None or not self.s.startswith("TO", to):
            return None
        upper = self.ws1(to + 2)
        upper_end = self.range_value(upper) if upper is not None else None
        if upper_end is None:
            return None
        close = self.ws(upper_end)
        return close + 1 if close < self.n and self.s[close] in "}]" else None

    def set(self, i: int) -> int | None:
        j = self.ws(i)
        if not self.s.startswith("IN", j):
            return None
        bracket = self.ws1(j + 2)
        if bracket is None or bracket >= self.n or self.s[bracket] != "[":
            return None
        j = self.ws(bracket + 1)
        while True:
            if j < self.n and self.s[j] == "]":
                return j + 1
            found = self.term_or_phrase(j)
            if found is None:
                return None
            _, j = found
            if j < self.n and self.s[j] == "]":
                return j + 1
            k = self.ws1(j)
            if k is None:
                return None
            j = k

    def regex(self, i: int) -> int | None:
        if i >= self.n or self.s[i] != "/":
            return None
        j = i + 1
        while j < self.n and self.s[j] != "/":
            j += 2 if self.s[j] == "\\" and j + 1 < self.n and self.s[j + 1] == "/" else 1
        if j >= self.n or j == i + 1:
            return None
        j += 1
        return j if self.at_end_or_ws(j) else None

    def literal(self, i: int) -> tuple[Node, int] | None:
        named = self.field_name(i)
        if named is not None:
            field, after = named
            group = self.group(after)
            if group is not None:
                node, end = group
                return with_default_field(node, field), end
            found = self.leaf_after_field(after)
            if found is None:
                return None
            leaf, end = found
            return replace(leaf, field=field), end
        return self.leaf_after_field(i)

    def leaf_after_field(self, i: int) -> tuple[Leaf, int] | None:
        j = self.ws(i)
        if j < self.n and self.s[j] not in "<>{[I*/":  # (what a range, set, exists or regex starts with)
            return self.term_or_phrase(i)
        for kind, read in (("range", self.range), ("set", self.set), ("exists", self.exists), ("regex", self.regex)):
            end = read(i)
            if end is not None:
                return Leaf(kind, self.s[i:end].strip()), end
        return self.term_or_phrase(i)

    def group(self, i: int) -> tuple[Node, int] | None:
        if i >= self.n or self.s[i] != "(":
            return None
        found = self.ast(self.ws(i + 1))
        if found is None:
            return None
        node, j = found
        return (node, j + 1) if j < self.n and self.s[j] == ")" else None

    def leaf(self, i: int) -> tuple[Node, int] | None:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise QuerySyntaxError(f"{TOO_DEEP} {MAX_DEPTH} levels of parentheses or NOT", i)
            return self._leaf(i)
        finally:
            self.depth -= 1

    def _leaf(self, i: int) -> tuple[Node, int] | None:
        group = self.group(i)
        if group is not None:
            return group
        if i < self.n and self.s[i] == "*" and (i + 1 >= self.n or self.s[i + 1] in " \t\r\n()^"):
            return Leaf("all", "*"), i + 1
        if self.s.startswith("NOT", i):
            j = self.ws1(i + 3)
            if j is not None:
                found = self.leaf(j)
                if found is not None:
                    node, end = found
                    return Clause(((MUST_NOT, node),)), end
        return self.literal(i)

    def boosted_leaf(self, i: int) -> tuple[Node, int] | None:
        found = self.leaf(i)
        if found is None:
            return None
        node, j = found
        if j < self.n and self.s[j] == "^":
            k = j + 1
            while k < self.n and self.s[k].isdigit():
                k += 1
            if k > j + 1 and k + 1 < self.n and self.s[k] == "." and self.s[k + 1].isdigit():
                k += 1
                while k < self.n and self.s[k].isdigit():
                    k += 1
            if k > j + 1:
                boost = float(self.s[j + 1 : k])
                if abs(boost - 1.0) > 1e-12:
                    node = Boost(node, boost)
                j = k
        return node, j

    def occur_leaf(self, i: int) -> tuple[str | None, Node, int] | None:
        occur = None
        if i < self.n and self.s[i] in "+-":
            occur, i = (MUST if self.s[i] == "+" else MUST_NOT), i + 1
        found = self.boosted_leaf(i)
        if found is None:
            return None
        return occur, found[0], found[1]

    def ast(self, i: int) -> tuple[Node, int] | None:
        i = self.ws(i)
        first = self.occur_leaf(i)
        if first is None:
            return None
        occur, node, j = first
        leafs: list[tuple[str | None, str | None, Node]] = [(None, occur, node)]
        while True:
            # the second leaf must be set apart by a space; later ones follow any space (Tantivy's
            # ``separated_pair(occur_leaf, multispace1, many1(operand_leaf))``)
            k = self.ws1(j) if len(leafs) == 1 else self.ws(j)
            if k is None or k >= self.n:
                break
            operator = None
            for word in ("AND", "OR"):
                if self.s.startswith(word + " ", k):
                    operator, k = word, self.ws(k + len(word) + 1)
                    break
            found = self.occur_leaf(k)
            if found is None:
                break
            leafs.append((operator, found[0], found[1]))
            j = found[2]
        if len(leafs) == 1:
            node = Clause(((MUST_NOT, node),)) if occur == MUST_NOT else node
            return node, self.ws(j)
        return _aggregate(leafs), self.ws(j)


def _interpret_escapes(raw: str) -> str:
    """A word's escapes as Tantivy reads them: ``\\x`` is ``x`` where ``x`` needs escaping in a word
    (space, ``-`` and the word's special characters), else the backslash stays."""
    if "\\" not in raw:
        return raw
    out, i = [], 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            if not (nxt.isspace() or nxt in _ESCAPE_IN_WORD or nxt == "-"):
                out.append("\\")
            out.append(nxt)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def with_default_field(node: Node, field: str) -> Node:
    """``node`` with ``field`` on every leaf that names none (as inside ``field:( ... )``)."""
    if isinstance(node, Leaf):
        return node.with_default_field(field)
    if isinstance(node, Boost):
        return Boost(with_default_field(node.child, field), node.boost)
    return Clause(tuple((occur, with_default_field(child, field)) for occur, child in node.children))


def _aggregate(leafs: list[tuple[str | None, str | None, Node]]) -> Node:
    """Tantivy's ``aggregate_infallible_expressions``: AND binds tighter than OR."""
    clauses: list[list[tuple[str | None, Node]]] = []
    next_operators = [operator for operator, _, _ in leafs[1:]] + [None]
    for (operator, occur, node), next_operator in zip(leafs, next_operators, strict=True):
        if operator == "AND":
            entry = (occur or MUST, node)
            if clauses:
                clauses[-1].append(entry)
            else:
                clauses.append([entry])
            continue
        default = MUST if next_operator == "AND" else (SHOULD if operator == "OR" or next_operator == "OR" else None)
        if occur == MUST_NOT and default == SHOULD:
            clauses.append([(SHOULD, Clause(((MUST_NOT, node),)))])
        else:
            clauses.append([(occur or default, node)])
    if len(clauses) == 1:
        only = clauses[0]
        if len(only) == 1 and only[0][0] != MUST_NOT:
            return only[0][1]
        return Clause(tuple(only))
    final: list[tuple[str | None, Node]] = []
    for sub in clauses:
        final.append(sub[0] if len(sub) == 1 else (SHOULD, Clause(tuple(sub))))
    return Clause(tuple(final))


def _rewrite(node: Node) -> Node:
    """Tantivy's ``rewrite_ast``: children rewritten, duplicates dropped, one-child clauses unwrapped."""
    if not isinstance(node, Clause):
        return node
    seen = dict.fromkeys((occur, _rewrite(child)) for occur, child in node.children)  # in order, hashed: linear
    out = []
    for occur, child in seen:
        if occur is None and isinstance(child, Clause) and len(child.children) == 1:
            out.append(child.children[0])
        else:
            out.append((occur, child))
    return Clause(tuple(out))


def parse(text: str) -> Node:
    """The tree of query ``text``; QuerySyntaxError when it is not a query of Tantivy's grammar.

    Example: ``parse("Config* AND level:ERROR")`` is a clause of two must leaves, the first a
    wildcard literal.
    """
    parser = _Parser(text)
    start = parser.ws(0)
    if start >= len(text):
        return Clause(())
    collecting = gc.isenabled()
    gc.disable()  # a long query is many small objects, none of them cyclic: the collector's passes were a third
    try:
        found = parser.ast(start)
        if found is None:
            raise QuerySyntaxError("the query does not parse", start)
        node, end = found
        if end < len(text):
            raise QuerySyntaxError(f"the query does not parse after position {end}", end)
        return _rewrite(node)
    finally:
        if collecting:
            gc.enable()


# Tantivy builds a wildcard's automaton with at most 1000 states; a longer word seldom fits, and one
# near the limit takes seconds to build ("a" + "*" * 999 + "b" * 990: 54 s before Tantivy refused it),
# so a wildcard word longer than this is refused before any automaton is built (255: 1.5 s at most).
WILDCARD_CHARS = 255
_WORD = re.compile(r"\S+")
_FIELD_PREFIX = re.compile(r"^[(+\-]*[\w.]+:")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')  # a phrase: its * and ? are literal characters
_ESCAPED = re.compile(r"\\.")


def check_wildcard_sizes(text: str) -> None:
    """QueryError if a wildcard word of ``text`` (one with an unescaped ``*`` or ``?`` outside a quoted
    phrase, after its ``field:``) is longer than ``WILDCARD_CHARS``: bounded before its automaton is built
    (its length is what the check costs)."""
    unquoted = _QUOTED.sub(lambda m: " " * len(m.group()), text)  # positions kept
    for word in _WORD.finditer(unquoted):
        token = word.group()
        bare = _ESCAPED.sub("", token)
        if "*" not in bare and "?" not in bare:
            continue
        pattern = _FIELD_PREFIX.sub("", token)
        if len(pattern) > WILDCARD_CHARS:
            raise QueryError(
                f"query {_shown_query(text)!r}: the wildcard at position {word.start()} is {len(pattern)} characters "
                f"long, longer than the {WILDCARD_CHARS} a query may give (a wildcard or a regex: Tantivy's automaton "
                "for it would pass its 1000 states, or take seconds to build); give a shorter wildcard"
            )


def _shown_query(text: str) -> str:
    return text if len(text) <= 200 else f"{text[:200]}... ({len(text)} characters)"
