"""Query text to a Tantivy query, with the meaning IndexTables4Spark gives it.

``splits.query.syntax`` reads the text into a tree; here each node becomes a Tantivy query:

* a boolean clause becomes a boolean query; one with no required or optional part (``NOT a``,
  the ``NOT b`` of ``a AND NOT b``) also requires every document, as Quickwit's ``BoolQuery``
  does, so it excludes from all rows instead of matching none;
* a wildcard word (``Config*``, ``*Broker*``, ``Con?ig``) becomes a regex over the field's terms:
  its text lowercased where the field's tokenizer lowercases, ``*`` as ``.*`` and ``?`` as ``.``
  (Quickwit's ``WildcardQuery``); on a JSON field the path is part of the term (``attrs.user:al*``);
* a single-quoted text is the AND of its tokens (Quickwit's ``FullTextMode::Bool``);
* every other leaf (a word, a phrase, a range, a set, ``field:*``, a regex) is handed alone to
  Tantivy's query parser, so it means exactly what it means there.

Where a query could only silently match nothing, it is refused with a QueryError naming the part:
a wildcard whose text the field's tokenizer would cut into several tokens (``foo-bar*``), a token
longer than the field keeps (``splits.tokenizers``), a fuzzy term (``config~1``: the JVM reads it as
the words ``config`` and ``1``; neither project supports fuzzy matching).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import replace
from typing import Any

from executor_lib.splits.doc_mapping import ARRAY_KEY, DocMapping, FieldMapping
from executor_lib.splits.query.explain import explain
from executor_lib.splits.query.plan import PLAN, TANTIVY
from executor_lib.splits.query.syntax import (
    MUST,
    MUST_NOT,
    SHOULD,
    TOO_DEEP,
    Boost,
    Clause,
    Leaf,
    Node,
    check_wildcard_sizes,
    parse,
    wildcard_parts,
    with_default_field,
)
from executor_lib.splits.tokenizers import analyzer, long_tokens, lowercases, ngram_spec, query_gram, splits_text
from indextables_contract import filters
from indextables_contract.errors import QueryError, QuerySyntaxError

_OCCUR = {MUST: "Must", SHOULD: "Should", MUST_NOT: "MustNot"}  # the builder's attribute of each
_FUZZY = re.compile(r"~\d+$")
_FUZZY_TERM = re.compile(r"^(.+?)~([12])(\*?)$", re.DOTALL)  # word~N[*]: fuzzy (filters.QueryString.fuzzy)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # tab, newline and return are spaces
# Compiled queries by (doc mapping, query, default fields, list columns): splits of one doc mapping
# have one Tantivy schema, so a task searching many splits reads and compiles a query once (a
# wildcard's regex costs about 0.4 ms to build). Bounded; errors are not kept.
_COMPILED: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_COMPILED_MAX = 256


def compile_query(
    index: Any,
    mapping: DocMapping,
    query: filters.QueryString,
    default_fields: list[str],
    list_columns: Collection[str] = (),
    plan: bool = False,
) -> Any:
    """The Tantivy query of ``query``: on ``query.column`` if set, else on ``default_fields``.
    A column query on one of ``list_columns`` (lists of scalars, indexed as ``{"_values": [...]}``)
    searches the list's values: ``tags indexquery 'red'`` is ``tags._values:red``.

    Raises QueryError naming the query and what is wrong with it (with the position for syntax).
    ``plan``: the query as a plan for the native engine (``plan.PLAN``), not a ``tantivy`` query.

    Example: ``compile_query(index, mapping, QueryString("Config*", "message"), [])`` is a regex
    query for ``config.*`` on ``message``.
    """
    bad = _CONTROL.search(query.query)
    if bad is not None:  # NUL and 0x01 are Tantivy's JSON path delimiters: it panics on them
        raise QueryError(f"query {query.query!r}: control character {bad.group()!r} at position {bad.start()}")
    fields, columns = tuple(default_fields), frozenset(list_columns)
    key = (mapping, query.query, query.column, fields, columns, query.fuzzy, query.transpositions, plan)
    compiled = _COMPILED.get(key)
    if compiled is None:
        check_wildcard_sizes(query.query)  # before any automaton is built, on every path to a search
        compiled = _compile(index, mapping, query, default_fields, list_columns, PLAN if plan else TANTIVY)
        _COMPILED[key] = compiled
        if len(_COMPILED) > _COMPILED_MAX:
            _COMPILED.popitem(last=False)
    else:
        _COMPILED.move_to_end(key)
    return compiled


def _compile(
    index: Any,
    mapping: DocMapping,
    query: filters.QueryString,
    default_fields: list[str],
    list_columns: Collection[str],
    builder: Any,
) -> Any:
    fields = [query.column] if query.column is not None else default_fields
    try:
        tree = parse(query.query)
    except QuerySyntaxError as e:
        raise _syntax_error(index, query.query, fields, e) from e
    if query.column is not None and query.column in list_columns:
        tree = with_default_field(tree, f"{query.column}.{ARRAY_KEY}")
    return _Compiler(index, mapping, query.query, fields, query.fuzzy, query.transpositions, builder).node(tree)


def _syntax_error(index: Any, text: str, fields: list[str], error: QuerySyntaxError) -> QueryError:
    """The error for text that does not parse, placed by Tantivy's message where it gives one."""
    if error.message.startswith(TOO_DEEP):  # (Tantivy's parser is not asked: it recurses as deep)
        shown = text if len(text) <= 120 else f"{text[:60]}...{text[-60:]}"
        return QueryError(f"query {shown!r} ({len(text)} characters): {error.message} (give a flatter query)")
    try:
        index.parse_query(text, fields, allow_regexes=True)
    except ValueError as e:
        return QueryError(f"query {text!r} {explain(text, str(e))}")
    pos = error.position
    return QueryError(f"query {text!r} does not parse at position {pos}\n  {text}\n  {' ' * pos}^")


class _Compiler:
    def __init__(
        self,
        index: Any,
        mapping: DocMapping,
        text: str,
        fields: list[str],
        fuzzy: bool = False,
        transpositions: bool = True,
        builder: Any = TANTIVY,
    ) -> None:
        self.q = builder  # what builds the queries: ``tantivy``'s, or plans (``plan``)
        self.fuzzy = fuzzy  # the project's extension: word~N is a fuzzy term (filters.QueryString.fuzzy)
        self.transpositions = transpositions  # a fuzzy term's transposition: one edit, else two
        self.index = index
        self.schema = index.schema
        self.mapping = mapping
        self.text = text
        self.fields = fields

    def fail(self, what: str) -> QueryError:
        return QueryError(f"query {self.text!r}: {what}")

    def node(self, node: Node) -> Any:
        if isinstance(node, Boost):
            return self.q.boost_query(self.node(node.child), node.boost)
        if isinstance(node, Clause):
            return self.clause(node)
        return self.leaf(node)

    def clause(self, clause: Clause) -> Any:
        parts = [(getattr(self.q, _OCCUR[occur or SHOULD]), self.node(child)) for occur, child in clause.children]
        if not any(occur != self.q.MustNot for occur, _ in parts):
            parts.append((self.q.Must, self.q.all_query()))  # exclude from every row
        if len(parts) == 1:
            return parts[0][1]
        return self.q.boolean_query(parts)

    def leaf(self, leaf: Leaf) -> Any:
        if leaf.kind == "all":
            return self.q.all_query()
        if leaf.kind == "literal":
            fuzzy = _FUZZY_TERM.match(leaf.text) if self.fuzzy and leaf.delimiter == "" else None
            if fuzzy is not None:
                return self.any_field(leaf, self.fuzzy_term)
            if leaf.is_wildcard:
                return self.any_field(leaf, self.wildcard)
            if leaf.delimiter == "" and _FUZZY.search(leaf.text):
                raise self.fail(
                    f"{leaf.source!r} looks like a fuzzy term: fuzzy matching (term~N) is not supported "
                    "(IndexTables4Spark reads it as words); use a wildcard (confi*) or a regex (field:/conf.g/)"
                )
            self.check_token_lengths(leaf)
            targets = self.targets(leaf)
            if targets and any(ngram_spec(f.tokenizer) is not None for f, _ in targets):
                return self.any_field(leaf, self.grams_or_parsed)
            if leaf.delimiter == "'":
                return self.any_field(leaf, self.all_tokens)
        if leaf.kind == "regex":
            target = self.resolve(leaf.field) if leaf.field is not None else None
            if target is not None and target[1]:
                return self.json_regex(leaf, *target)
        if leaf.kind == "exists" and leaf.field is not None and self.resolve(leaf.field) is None:
            raise self.fail(f"{leaf.field}:* names no field of the table")  # Tantivy would fail only at search
        return self.delegate(leaf)

    # -- fields --

    def targets(self, leaf: Leaf) -> list[tuple[FieldMapping, str]] | None:
        """(field, JSON path or "") of each field the leaf searches; None if one is not in the mapping."""
        names = [leaf.field] if leaf.field is not None else self.fields
        found = [self.resolve(name) for name in names]
        return None if any(t is None for t in found) else [t for t in found if t is not None]

    def resolve(self, written: str) -> tuple[FieldMapping, str] | None:
        name = re.sub(r"\\(.)", r"\1", written)
        field = self.mapping.field(name)
        if field is not None:
            return field, ""
        base, _, path = name.partition(".")
        field = self.mapping.field(base)
        if field is not None and field.type == "json" and path:
            return field, path
        return None

    def any_field(self, leaf: Leaf, build: Any) -> Any:
        targets = self.targets(leaf)
        if targets is None:
            return self.delegate(leaf)  # Tantivy names the missing field
        queries = [build(leaf, field, path) for field, path in targets]
        if len(queries) == 1:
            return queries[0]
        return self.q.boolean_query([(self.q.Should, q) for q in queries])

    # -- leaves --

    def delegate(self, leaf: Leaf) -> Any:
        """The leaf alone through Tantivy's parser (a bare range, set or regex on one field gets its
        name, as Quickwit gives it)."""
        if leaf.field is not None:
            text = f"{leaf.field}:{leaf.source}"
        elif leaf.kind in ("range", "set", "regex") and len(self.fields) == 1:
            text = f"{self.fields[0]}:{leaf.source}"
        else:
            text = leaf.source
        try:
            return self.q.parsed(self.index, text, self.fields)
        except ValueError as e:
            raise QueryError(f"query {self.text!r} {explain(self.text, str(e))}") from e

    def fuzzy_term(self, leaf: Leaf, field: FieldMapping, path: str) -> Any:
        """``word~N`` (N 1 or 2: edits, a transposition one, or two where ``transpositions`` is off) or
        ``word~N*`` (within N edits of a term's prefix), the word as the field's tokenizer makes it (one
        token)."""
        m = _FUZZY_TERM.match(leaf.text)
        assert m is not None
        word, distance, prefix = m.group(1), int(m.group(2)), bool(m.group(3))
        if field.type not in ("text", "json"):
            raise self.fail(
                f"fuzzy term {leaf.source!r} on column {field.name!r} of type {field.type}: needs a text field"
            )
        tokens = analyzer(field.tokenizer or "default", field.max_token_length).analyze(word)
        if len(tokens) != 1:
            raise self.fail(
                f"fuzzy term {leaf.source!r}: {word!r} is {len(tokens)} tokens of column {field.name!r} "
                f"(tokenizer {field.tokenizer or 'default'}); a fuzzy term matches one token"
            )
        name = f"{field.name}.{path}" if path else field.name
        return self.q.fuzzy_term_query(self.schema, name, tokens[0], distance, self.transpositions, prefix)

    def wildcard(self, leaf: Leaf, field: FieldMapping, path: str) -> Any:
        if field.type not in ("text", "json"):
            raise self.fail(
                f"wildcard {leaf.source!r} on column {field.name!r} of type {field.type}: "
                "wildcards need a text, string or JSON field"
            )
        tokenizer = field.tokenizer or "default"
        pattern = []
        for kind, piece in wildcard_parts(leaf.text) or []:
            if kind == "*":
                pattern.append(".*")
            elif kind == "?":
                pattern.append(".")
            else:
                if splits_text(tokenizer, piece):
                    raise self.fail(
                        f"wildcard {leaf.source!r} cannot match: {piece!r} is not one token of column "
                        f"{field.name!r} (tokenizer {tokenizer}), and a wildcard matches one token; "
                        "search its words separately or as a phrase"
                    )
                pattern.append(filters.regex_escape(piece.lower() if lowercases(tokenizer) else piece))
        return self.term_regex(field, path, "".join(pattern))

    def term_regex(self, field: FieldMapping, path: str, pattern: str) -> Any:
        """A regex over the field's terms; on a JSON field, over the terms at ``path`` (any path if "")."""
        if field.type != "json":
            return self.q.regex_query(self.schema, field.name, "(?s)" + pattern)
        # a JSON term is <path segments joined by 0x01> 0x00 's' <text>
        prefix = "\\x01".join(filters.regex_escape(segment) for segment in path.split(".")) if path else "[^\\x00]*"
        return self.q.regex_query(self.schema, field.name, f"(?s){prefix}\\x00s{pattern}")

    def json_regex(self, leaf: Leaf, field: FieldMapping, path: str) -> Any:
        pattern = leaf.source[1:-1].replace("\\/", "/")
        return self.term_regex(field, path, f"(?:{pattern})")

    def all_tokens(self, leaf: Leaf, field: FieldMapping, path: str) -> Any:
        if field.type not in ("text", "json") or (field.type == "json" and not path):
            quoted = leaf.text.replace("\\", "\\\\").replace('"', '\\"')
            return self.delegate(Leaf("literal", f'"{quoted}"', leaf.field, leaf.text, '"'))
        tokens = analyzer(field.tokenizer or "default", field.max_token_length).analyze(leaf.text)
        if not tokens:
            return self.q.empty_query()
        name = f"{field.name}.{path}" if path else field.name
        # Frequencies, not positions (as Tantivy's query parser builds term queries): only phrase
        # queries read a field's positions (split_pieces.query_needs)
        terms = [(self.q.Must, self.q.term_query(self.schema, name, t, "freq")) for t in tokens]
        return terms[0][1] if len(terms) == 1 else self.q.boolean_query(terms)

    def grams_or_parsed(self, leaf: Leaf, field: FieldMapping, path: str) -> Any:
        """A word, phrase or quoted text on one field: as ``grams`` on an n-gram column, else as on any other
        column (the leaf on this field alone)."""
        if ngram_spec(field.tokenizer) is None:
            name = f"{field.name}.{path}" if path else field.name
            one = replace(leaf, field=name.replace(":", "\\:"))
            return self.all_tokens(one, field, path) if leaf.delimiter == "'" else self.delegate(one)
        return self.grams(leaf, field, path)

    def grams(self, leaf: Leaf, field: FieldMapping, path: str) -> Any:
        """A word, phrase or quoted text on an n-gram column (``edge_ngram_2_10``): its words as the column's
        query analyzer makes them (``default``'s: runs of letters and digits, lowercased), each searched as
        one gram (``tokenizers.query_gram``), never cut into grams itself (``erro`` would match every word
        sharing a 2-gram). ``'a b'`` requires each word; a phrase (``"quick bro"``, or a word the analyzer
        cuts in several, ``foo-bar``) is a phrase of the words' grams (each gram sits at its word's
        position); a word shorter than the column's grams is refused (it could only match nothing)."""
        tokenizer = field.tokenizer or ""
        spec = ngram_spec(tokenizer)
        assert spec is not None, tokenizer
        if field.type == "json" and not path:
            raise self.fail(f"{leaf.source!r} on JSON column {field.name!r} (tokenizer {tokenizer}): name a path")
        words = analyzer(tokenizer, field.max_token_length).analyze(leaf.text)
        if not words:
            return self.q.empty_query()
        grams = [query_gram(tokenizer, w) for w in words]
        short = [w for w, g in zip(words, grams, strict=True) if not g]
        if short:
            raise self.fail(
                f"word {short[0]!r} is shorter than the grams of column {field.name!r} (tokenizer {tokenizer}: "
                f"{spec.min} characters or more; shorter ones are not indexed)"
            )
        name = f"{field.name}.{path}" if path else field.name
        if leaf.delimiter == "'" or len(words) == 1:
            terms = [(self.q.Must, self.q.term_query(self.schema, name, g, "freq")) for gs in grams for g in gs]
            return terms[0][1] if len(terms) == 1 else self.q.boolean_query(terms)
        if any(len(g) > 1 for g in grams) or leaf.prefix:
            raise self.fail(
                f"phrase {leaf.source!r} on column {field.name!r} (tokenizer {tokenizer}): "
                + (
                    'a phrase prefix ("..."*) is not supported there'
                    if leaf.prefix
                    else f"a word longer than its {spec.max}-character grams cannot be in a phrase"
                )
                + "; search the words as 'a b' (each required)"
            )
        if field.record != "position":
            raise self.fail(
                f"phrase {leaf.source!r}: column {field.name!r} records no positions (indexrecordoption {field.record})"
            )
        return self.q.phrase_query(self.schema, name, [g[0] for g in grams], leaf.slop)

    def check_token_lengths(self, leaf: Leaf) -> None:
        for field, _ in self.targets(leaf) or []:
            if field.type not in ("text", "json"):
                continue
            too_long = long_tokens(field.tokenizer or "default", leaf.text, field.max_token_length)
            if too_long:
                limit = field.max_token_length or 255
                raise self.fail(
                    f"token {too_long[0][:40]!r}... is {len(too_long[0].encode())} bytes, longer than column "
                    f"{field.name!r} keeps ({limit - 1}; tokens of {limit} bytes or more are not indexed, "
                    "spark.indextables.indexing.text.maxTokenLength)"
                )
