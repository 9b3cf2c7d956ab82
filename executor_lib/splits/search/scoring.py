"""BM25 scores with table-wide statistics (``_score``), as Elasticsearch's ``dfs_query_then_fetch``.

Tantivy scores a document of one split with that split's statistics: the number of documents
``N``, each query term's document frequency ``n`` and each field's average length ``avgdl``
(its total token count over ``N``). A split-local score therefore depends on how the table
happens to be split and merged. Here the statistics are gathered once from every split a query
reads (``split_stats``, summed with ``ScoreStats.merged``) and each split's scores are rewritten
with them (``table_scores``), exactly as one Tantivy index over all the rows scores them:

    score(term t, doc d) = (k1 + 1) * idf(t) * tf / (tf + k1 * (1 - b + b * dl / avgdl))
    idf(t) = ln(1 + (N - n + 0.5) / (n + 0.5)),  k1 = 1.2, b = 0.75  (f32, as Tantivy)

(a phrase sums its terms' idf and counts the phrase's occurrences as ``tf``). The ``tantivy``
package takes no statistics from outside, so each split is searched as usual, and for each
scoring leaf of the compiled query (a term or phrase query, read from its debug form) the leaf's
split-local score of every hit, with the hit's field length ``dl`` (its fieldnorm byte, read from
the segment's ``.fieldnorm`` file), gives ``tf``; the score is then computed again with the
table's ``N``, ``n`` and ``avgdl``. Leaves scored by a constant (ranges, regexes, sets, ``*``)
score the same in every split. Per-hit work is numpy over arrays; the Python work is per leaf.

A query with a part whose score this module does not model (a term on a JSON, boolean or date
field, a phrase prefix, ...) keeps Tantivy's split-local scores (``table_scores`` returns None).
"""

from __future__ import annotations

import functools
import json
import logging
import re
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from executor_lib.format.quickwit.hotcache import composite_sections

log = logging.getLogger(__name__)

K1 = np.float32(1.2)
B = np.float32(0.75)
SCORE_COLUMN = "_score"


def _fieldnorm_table() -> np.ndarray:
    """Field length of each fieldnorm id (Tantivy stores a document's field length in one byte, as
    Lucene's ``SmallFloat.intToByte4``: ids below 24 are the length, then 3 mantissa bits)."""
    out = []
    for b in range(256):
        if b < 24:
            out.append(b)
            continue
        e = b - 24
        bits, shift = e & 7, e >> 3
        out.append(24 + (bits if shift == 0 else (bits | 8) << (shift - 1)))
    return np.array(out, np.float32)


FIELDNORMS = _fieldnorm_table()


class Unsupported(Exception):
    """A query part whose score is not modelled here: split-local scores are kept."""


# --- statistics ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreStats:
    """BM25 statistics: documents, total tokens per field, document frequency per (field, term)."""

    num_docs: int = 0
    field_tokens: dict[str, int] = field(default_factory=dict)
    doc_freqs: dict[tuple[str, Any], int] = field(default_factory=dict)  # (field, text or number)

    @staticmethod
    def merged(parts: Iterable[ScoreStats]) -> ScoreStats:
        """The sum of several splits' statistics (one index over all their rows)."""
        docs = 0
        tokens: dict[str, int] = {}
        freqs: dict[tuple[str, Any], int] = {}
        for p in parts:
            docs += p.num_docs
            for k, v in p.field_tokens.items():
                tokens[k] = tokens.get(k, 0) + v
            for t, v in p.doc_freqs.items():
                freqs[t] = freqs.get(t, 0) + v
        return ScoreStats(docs, tokens, freqs)

    def to_json(self) -> str:
        return json.dumps(
            {
                "numDocs": self.num_docs,
                "fieldTokens": self.field_tokens,
                "docFreqs": [[f, t, n] for (f, t), n in sorted(self.doc_freqs.items(), key=str)],
            }
        )

    @staticmethod
    def from_json(text: str) -> ScoreStats:
        doc = json.loads(text)
        return ScoreStats(
            int(doc["numDocs"]),
            {str(k): int(v) for k, v in doc["fieldTokens"].items()},
            {(str(f), t): int(n) for f, t, n in doc["docFreqs"]},
        )


# --- the compiled query's scoring structure, from its debug form ---------------------------------


class _Text(str):
    """A string literal of the debug form (an atom, such as a number, is a plain ``str``)."""


@dataclass(frozen=True)
class _Node:
    name: str
    items: tuple[tuple[str | None, Any], ...] = ()

    def get(self, key: str) -> Any:
        for k, v in self.items:
            if k == key:
                return v
        raise Unsupported(f"{self.name} has no {key}")


_TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|([()\[\]{},:=])|([^\s()\[\]{},:="]+))')
_CLOSE = {"(": ")", "[": "]", "{": "}"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", '"': '"', "'": "'", "\\": "\\"}


def _unescape(literal: str) -> str:
    def one(m: re.Match[str]) -> str:
        text = m.group(1)
        if text.startswith("u{"):
            return chr(int(text[2:-1], 16))
        return _ESCAPES.get(text, text)

    return re.sub(r"\\(u\{[0-9a-fA-F]+\}|.)", one, literal[1:-1])


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise Unsupported(f"query form does not read at {pos}: {text[pos : pos + 40]!r}")
        if m.group(1) is not None:
            out.append(("str", _unescape(m.group(1))))
        elif m.group(2) is not None:
            out.append(("punct", m.group(2)))
        else:
            out.append(("atom", m.group(3)))
        pos = m.end()
    return out


def parse_debug(text: str) -> Any:
    """A Rust ``{:?}`` form (``Query(BooleanQuery { subqueries: [...] })``) as ``_Node``s, lists,
    tuples, strings (decoded) and atoms."""
    toks = _tokens(text)
    pos = 0

    def value() -> Any:
        nonlocal pos
        kind, tok = toks[pos]
        if kind == "str":
            pos += 1
            return _Text(tok)
        if kind == "punct" and tok in _CLOSE:
            pos += 1
            items = group(tok)
            return list(v for _, v in items) if tok == "[" else tuple(v for _, v in items)
        if kind == "atom":
            pos += 1
            if pos < len(toks) and toks[pos] in (("punct", "("), ("punct", "{")):
                opener = toks[pos][1]
                pos += 1
                return _Node(tok, tuple(group(opener)))
            return _Node(tok) if tok[:1].isupper() else tok
        raise Unsupported(f"unexpected {tok!r} in the query form")

    def group(opener: str) -> list[tuple[str | None, Any]]:
        nonlocal pos
        closer = _CLOSE[opener]
        items: list[tuple[str | None, Any]] = []
        while toks[pos] != ("punct", closer):
            key = None
            if toks[pos][0] == "atom" and pos + 1 < len(toks) and toks[pos + 1] in (("punct", "="), ("punct", ":")):
                key = toks[pos][1]
                pos += 2
            items.append((key, value()))
            if toks[pos] == ("punct", ","):
                pos += 1
        pos += 1
        return items

    try:
        result = value()
    except IndexError as e:
        raise Unsupported("query form ends early") from e
    return result


@dataclass
class _Leaf:
    """A BM25-scored leaf: a term (one term) or a phrase (several) of one field."""

    field: str
    terms: tuple[Any, ...]  # texts, or numbers of a number field
    slop: int | None  # None: a term query
    local: np.ndarray | None = None  # split-local scores over the hits (0 where it does not match)
    mask: np.ndarray | None = None

    def query(self, schema: Any) -> Any:
        if self.slop is None:
            return tantivy.Query.term_query(schema, self.field, self.terms[0], "freq")
        return tantivy.Query.phrase_query(schema, self.field, list(self.terms), self.slop)


_CONSTANT = frozenset(
    {"AllQuery", "EmptyQuery", "RangeQuery", "RegexQuery", "TermSetQuery", "ExistsQuery", "FuzzyTermQuery"}
)


_NUMBERS: dict[str, Callable[[str], Any]] = {"I64": int, "U64": int, "F64": float}


def _term_text(term: Any, field_names: Sequence[str]) -> tuple[str, Any]:
    """(field name, value) of a ``Term(field=1, type=Str, "x")`` of a string field (the text) or of
    a ``Term(field=0, type=I64, 5)`` of a number field (the number)."""
    if not isinstance(term, _Node) or term.name != "Term":
        raise Unsupported("not a term")
    kinds = [v.name if isinstance(v, _Node) else v for k, v in term.items if k == "type"]
    if len(kinds) != 1 or (kinds[0] != "Str" and kinds[0] not in _NUMBERS):
        raise Unsupported(f"a term of type {kinds}")
    field_id = int(term.get("field"))
    values = [v for k, v in term.items if k is None and isinstance(v, str)]
    if len(values) != 1 or field_id >= len(field_names):
        raise Unsupported("a term without a value")
    if kinds[0] == "Str":
        if not isinstance(values[0], _Text):
            raise Unsupported("a string term without text")
        return field_names[field_id], str(values[0])
    try:
        return field_names[field_id], _NUMBERS[kinds[0]](values[0])
    except ValueError as e:
        raise Unsupported(f"a {kinds[0]} term {values[0]!r}") from e


def _structure(node: Any, field_names: Sequence[str]) -> Any:
    """The query's scoring tree: ("bool", [(occur, child)], msm) / ("boost", child, x) /
    ("const", child) / _Leaf / ("all",) / ("empty",) / ("opaque",)."""
    if not isinstance(node, _Node):
        raise Unsupported(f"unexpected {node!r}")
    if node.name == "Query":
        return _structure(node.items[0][1], field_names)
    if node.name == "BooleanQuery":
        children = [(str(occur.name), _structure(child, field_names)) for occur, child in node.get("subqueries")]
        return ("bool", children, int(node.get("minimum_number_should_match")))
    if node.name == "Boost":
        return ("boost", _structure(node.get("query"), field_names), float(node.get("boost")))
    if node.name == "Const":
        return ("const", _structure(node.get("query"), field_names))
    if node.name == "TermQuery":
        name, text = _term_text(node.items[0][1], field_names)
        return _Leaf(name, (text,), None)
    if node.name == "PhraseQuery":
        terms = [_term_text(t, field_names) for _, t in node.get("phrase_terms")]
        offsets = [int(o) for o, _ in node.get("phrase_terms")]
        if offsets != list(range(len(offsets))) or len({f for f, _ in terms}) != 1:
            raise Unsupported("a phrase with gaps")
        return _Leaf(terms[0][0], tuple(t for _, t in terms), int(node.get("slop")))
    if node.name == "AllQuery":
        return ("all",)
    if node.name == "EmptyQuery":
        return ("empty",)
    if node.name in _CONSTANT:
        return ("opaque",)
    raise Unsupported(f"{node.name} is not modelled")


def _leaves(tree: Any) -> list[_Leaf]:
    if isinstance(tree, _Leaf):
        return [tree]
    if tree[0] == "bool":
        return [leaf for occur, child in tree[1] if occur != "MustNot" for leaf in _leaves(child)]
    if tree[0] == "boost":
        return _leaves(tree[1])
    return []  # a constant score hides its query's scores


# A regex query's debug form dumps its compiled automaton (many lines) up to its field.
_REGEX_DUMP = re.compile(r'Regex\(".*?(?=, field: Field\()', re.DOTALL)


def scoring_tree(compiled: Any, field_names: Sequence[str]) -> Any:
    """The compiled query's scoring tree (raises ``Unsupported``)."""
    return _structure(parse_debug(_REGEX_DUMP.sub("Regex", repr(compiled))), field_names)


def query_terms(compiled: Any, field_names: Sequence[str]) -> list[tuple[str, Any]]:
    """The (field, term) pairs whose statistics score ``compiled`` (raises ``Unsupported``)."""
    found = {(leaf.field, t) for leaf in _leaves(scoring_tree(compiled, field_names)) for t in leaf.terms}
    return sorted(found, key=str)


# --- one split's statistics and files ------------------------------------------------------------


@dataclass(frozen=True)
class SplitFiles:
    """What scoring reads of one split's index beyond Tantivy: its segments (meta.json order, the
    order of ``DocAddress.segment_ord``), their document counts and a reader of each member."""

    segments: tuple[str, ...]
    max_docs: tuple[int, ...]
    read: Callable[[str], tuple[int, Callable[[int, int], bytes]]]  # member -> (length, read(start, stop))
    field_ids: dict[str, int]
    parsed: dict[str, Any] = field(default_factory=dict, compare=False)  # member -> its sections (immutable)


def _sections(files: SplitFiles, member: str) -> tuple[Callable[[int, int], bytes], dict[int, Any]]:
    if member not in files.parsed:
        length, read = files.read(member)
        files.parsed[member] = (read, composite_sections(length, read))
    return files.parsed[member]


def field_tokens(files: SplitFiles, name: str) -> int:
    """Total tokens of field ``name`` in the split: each segment's postings (``.idx``) section of the
    field starts with it (u64, little-endian)."""
    total = 0
    field_id = files.field_ids[name]
    for segment in files.segments:
        read, sections = _sections(files, f"{segment}.idx")
        ranges = sections.get(field_id)
        if ranges:
            start, stop = ranges[0]
            if stop - start >= 8:
                total += struct.unpack("<Q", read(start, start + 8))[0]
    return total


def fieldnorm_ids(files: SplitFiles, name: str) -> list[np.ndarray]:
    """Each segment's fieldnorm id per document for field ``name`` (id 1, a length of one, where the
    field keeps no fieldnorms, as Tantivy reads it)."""
    out = []
    field_id = files.field_ids[name]
    for segment, max_doc in zip(files.segments, files.max_docs, strict=True):
        read, sections = _sections(files, f"{segment}.fieldnorm")
        ranges = sections.get(field_id)
        if not ranges:
            out.append(np.ones(max_doc, np.uint8))
            continue
        start, stop = ranges[0]
        out.append(np.frombuffer(read(start, stop), np.uint8))
    return out


def split_stats(searcher: Any, compiled: Any, files: SplitFiles, field_names: Sequence[str]) -> ScoreStats:
    """One split's statistics for the terms and fields that score ``compiled`` (raises ``Unsupported``)."""
    terms = query_terms(compiled, field_names)
    fields = sorted({f for f, _ in terms})
    return ScoreStats(
        int(searcher.num_docs),
        {f: field_tokens(files, f) for f in fields},
        {(f, t): int(searcher.doc_freq(f, t)) for f, t in terms},
    )


# --- scores ---------------------------------------------------------------------------------------


def _idf(doc_freq: int, num_docs: int) -> np.float32:
    x = (np.float32(num_docs - doc_freq) + np.float32(0.5)) / (np.float32(doc_freq) + np.float32(0.5))
    return np.float32(np.log(np.float32(1.0) + x))


def _weight_and_norms(leaf: _Leaf, stats: ScoreStats) -> tuple[np.float32, np.ndarray]:
    """(weight, norm by fieldnorm id) of a leaf under ``stats``, as Tantivy's ``Bm25Weight``."""
    idf = np.float32(0.0)
    for t in leaf.terms:
        idf = np.float32(idf + _idf(stats.doc_freqs.get((leaf.field, t), 0), stats.num_docs))
    tokens = stats.field_tokens.get(leaf.field, 0)
    average = np.float32(tokens) / np.float32(stats.num_docs) if stats.num_docs else np.float32(1.0)
    norms = (K1 * (np.float32(1.0) - B + B * FIELDNORMS / average)).astype(np.float32)
    return np.float32(idf * (np.float32(1.0) + K1)), norms


def _mask(tree: Any, n: int) -> np.ndarray | None:
    """Which hits a subtree matches (None: not known here)."""
    if isinstance(tree, _Leaf):
        return tree.mask
    kind = tree[0]
    if kind == "all":
        return np.ones(n, bool)
    if kind == "empty":
        return np.zeros(n, bool)
    if kind in ("boost", "const"):
        return _mask(tree[1], n)
    if kind == "opaque":
        return None
    result = np.ones(n, bool)
    shoulds = []
    musts = 0
    for occur, child in tree[1]:
        m = _mask(child, n)
        if m is None:
            return None
        if occur == "Must":
            musts += 1
            result &= m
        elif occur == "MustNot":
            result &= ~m
        else:
            shoulds.append(m)
    least = tree[2] if (musts or tree[2]) else 1
    if shoulds and least:
        result &= np.sum(shoulds, axis=0) >= least
    return result


def _corrections(
    tree: Any, active: np.ndarray, boost: float, n: int, out: list[tuple[_Leaf, np.ndarray, float]]
) -> None:
    """(leaf, hits where its score counts, boost) of each scoring leaf whose score counts in the total."""
    if isinstance(tree, _Leaf):
        out.append((tree, active, boost))
        return
    kind = tree[0]
    if kind == "boost":
        _corrections(tree[1], active, boost * tree[2], n, out)
    elif kind == "bool":
        for occur, child in tree[1]:
            if occur == "MustNot" or not _leaves(child):
                continue
            if occur == "Must":
                _corrections(child, active, boost, n, out)
                continue
            m = _mask(child, n)
            if m is None:
                raise Unsupported("an optional part whose matches are not known")
            _corrections(child, active & m, boost, n, out)


def table_scores(
    searcher: Any,
    schema: Any,
    compiled: Any,
    hits: Sequence[tuple[float, Any]],
    files: SplitFiles,
    field_names: Sequence[str],
    stats: ScoreStats,
) -> np.ndarray | None:
    """The scores of ``hits`` (Tantivy's ``(score, DocAddress)`` of ``compiled`` on this split, whose
    ``searcher`` and ``schema`` are given) under
    the table's ``stats``; None where the query has a part not modelled here (the split-local
    scores then stand, and a warning says so)."""
    n = len(hits)
    scores = np.fromiter((s for s, _ in hits), np.float32, n)
    if n == 0:
        return scores
    try:
        tree = scoring_tree(compiled, field_names)
        leaves = _leaves(tree)
        if not leaves:
            return scores
        keys = np.fromiter(((a.segment_ord << 32) | a.doc for _, a in hits), np.int64, n)
        order = np.argsort(keys)
        sorted_keys = keys[order]
        local = ScoreStats(
            int(searcher.num_docs),
            {f: field_tokens(files, f) for f in {leaf.field for leaf in leaves}},
            {(leaf.field, t): int(searcher.doc_freq(leaf.field, t)) for leaf in leaves for t in leaf.terms},
        )
        norms_by_field = {f: fieldnorm_ids(files, f) for f in {leaf.field for leaf in leaves}}
        only_hits = tantivy.Query.const_score_query(compiled, 0.0)
        for leaf in leaves:
            q = tantivy.Query.boolean_query([(tantivy.Occur.Must, only_hits), (tantivy.Occur.Must, leaf.query(schema))])
            found = searcher.search(q, n, count=False).hits
            found_keys = np.fromiter(((a.segment_ord << 32) | a.doc for _, a in found), np.int64, len(found))
            at = order[np.searchsorted(sorted_keys, found_keys)]
            leaf.local = np.zeros(n, np.float32)
            leaf.local[at] = np.fromiter((s for s, _ in found), np.float32, len(found))
            leaf.mask = np.zeros(n, bool)
            leaf.mask[at] = True
        counted: list[tuple[_Leaf, np.ndarray, float]] = []
        _corrections(tree, np.ones(n, bool), 1.0, n, counted)
        segs = (keys >> 32).astype(np.int64)
        docs = (keys & 0xFFFFFFFF).astype(np.int64)
        total = scores.astype(np.float64)
        for leaf, active, boost in counted:
            ids = np.zeros(n, np.uint8)
            for s, per_doc in enumerate(norms_by_field[leaf.field]):
                in_seg = segs == s
                ids[in_seg] = per_doc[docs[in_seg]]
            w_local, norms_local = _weight_and_norms(leaf, local)
            w_table, norms_table = _weight_and_norms(leaf, stats)
            assert leaf.local is not None
            s_local = leaf.local[active]
            norm_l = norms_local[ids[active]]
            f = s_local / w_local
            tf = np.rint(f.astype(np.float64) * norm_l / np.maximum(1.0 - f.astype(np.float64), 1e-12))
            tf = np.maximum(tf, 1.0).astype(np.float32)
            check = (w_local * (tf / (tf + norm_l))).astype(np.float32)
            if not np.allclose(check, s_local, rtol=1e-4, atol=1e-6):
                raise Unsupported(f"the scores of {leaf.field}:{leaf.terms} do not follow BM25")
            norm_t = norms_table[ids[active]]
            s_table = (w_table * (tf / (tf + norm_t))).astype(np.float32)
            total[active] += boost * (s_table.astype(np.float64) - s_local.astype(np.float64))
        return total.astype(np.float32)
    except Unsupported as e:
        log.warning("_score: split-local BM25 scores for query %r (%s)", repr(compiled)[:200], e)
        return None


def split_files(index_dir: Path, pieces: Any, field_names: Sequence[str]) -> SplitFiles:
    """A split's segments and members as scoring reads them: from its local index directory, or
    (``pieces``, a ``SplitPieces``) fetched by the piece, the ranges read fetched as they are read."""
    meta = json.loads((index_dir / "meta.json").read_text())
    segments = tuple(str(seg["segment_id"]).replace("-", "") for seg in meta["segments"])
    max_docs = tuple(int(seg["max_doc"]) for seg in meta["segments"])

    def read(member: str) -> tuple[int, Any]:
        if pieces is not None:
            start, stop = pieces.footer.files[member]
            return stop - start, functools.partial(pieces.read, member)
        path = index_dir / member

        def read_local(start: int, stop: int) -> bytes:
            with open(path, "rb") as f:
                f.seek(start)
                return f.read(stop - start)

        return path.stat().st_size, read_local

    return SplitFiles(segments, max_docs, read, {name: i for i, name in enumerate(field_names)})


def marked_snippets(
    generator: Any, column: str, texts: Sequence[str | None], tags: tuple[str, str]
) -> list[str | None]:
    """Each of ``texts`` as its snippet (``generator``: a ``tantivy.SnippetGenerator`` of ``column``),
    each match between ``tags``; None stays None. One snippet per returned row (a top k, a page)."""
    start, end = tags[0].encode(), tags[1].encode()
    out: list[str | None] = []
    for text in texts:
        if text is None:
            out.append(None)
            continue
        doc = tantivy.Document()
        doc.add_text(column, text)
        snippet = generator.snippet_from_doc(doc)
        fragment = snippet.fragment().encode()
        parts, pos = [], 0
        for r in snippet.highlighted():
            parts += [fragment[pos : r.start], start, fragment[r.start : r.end], end]
            pos = r.end
        parts.append(fragment[pos:])
        out.append(b"".join(parts).decode())
    return out
