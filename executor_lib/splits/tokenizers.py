"""The text analyzers of a split's fields, and the longest token they keep.

Tantivy's own ``default``, ``en_stem`` and ``whitespace`` analyzers drop every token of 40 bytes or
more, so a trace id, a hash or a long URL path was never found. IndexTables4Spark (through Quickwit)
keeps tokens up to 255 bytes (``spark.indextables.indexing.text.maxTokenLength``, default 255) and
drops longer ones; so does this project. Every Tantivy index this project opens or writes gets its
analyzers from ``register``, so writing, searching and merging tokenize alike.

The limit is per field: ``FieldMapping.max_token_length`` (None: 255, the JVM's default, recorded
in the doc mapping only when it differs). A field with another limit uses the analyzer named
``<tokenizer>_max<N>`` in the Tantivy schema (tantivy4java names it ``<tokenizer>_limit_<N>``:
both are registered, and ``doc_mapping`` reads that name as the tokenizer and its limit). ``raw``
(exact strings) keeps values of any length.

Splits written before this change were tokenized with Tantivy's 40-byte limit: their tokens of
40..254 bytes are not in their index, so a query for one finds it only in newer splits (MERGE
SPLITS does not re-tokenize).

The stemmers of other languages (``de_stem``, ``fr_stem`` ... ``doc_mapping.STEMMERS``) are built as
``en_stem`` is, with the language's Snowball stemmer; ``native/src/lib.rs`` (``analyzer``) builds the
same for the native writer and search.

The n-gram tokenizers (``ngram_<min>_<max>``, ``edge_ngram_<min>_<max>``, ``doc_mapping.ngram_spec``) index
each word of ``default`` as its n-grams (or prefixes): ``native/src/lib.rs`` (``NgramFilter``) builds them for
the native writer and search. The ``tantivy`` package cannot cut each word into grams (its ``Tokenizer.ngram``
grams the whole text and it has no such filter), and it never indexes here: under an n-gram name ``analyzer``
and ``register`` give the column's *query* analyzer, the words of ``default``. A query's words on such a column
are never handed to Tantivy's parser: ``query.compile`` makes each word one gram (``query_gram``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import tantivy

from executor_lib.splits.doc_mapping import (
    DEFAULT_MAX_TOKEN_LENGTH,
    STEMMERS,
    limits_tokens,
    ngram_spec,
)

ALWAYS_REGISTERED = ("default", "en_stem", "whitespace")  # on every index, named by a field or not

_ALNUM_RUN = re.compile(r"[^\W_]+")  # a run of letters and digits: a token of the simple tokenizer


def analyzer_name(tokenizer: str, max_token_length: int | None) -> str:
    """The analyzer name a field's Tantivy schema uses: the tokenizer's, or ``<tokenizer>_max<N>``."""
    if not limits_tokens(tokenizer) or max_token_length in (None, DEFAULT_MAX_TOKEN_LENGTH):
        return tokenizer
    return f"{tokenizer}_max{max_token_length}"


def analyzer(tokenizer: str, max_token_length: int | None = None) -> Any:
    """The Tantivy analyzer of ``tokenizer`` keeping tokens shorter than ``max_token_length`` bytes (255).

    Example: ``analyzer("default").analyze("Hello World")`` is ``["hello", "world"]``. Under an n-gram name
    (``edge_ngram_2_10``), the column's query analyzer: its words as ``default`` makes them, not their grams.
    """
    limit = DEFAULT_MAX_TOKEN_LENGTH if max_token_length is None else max_token_length
    if tokenizer == "raw":
        return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw()).build()
    if tokenizer == "whitespace":
        whitespace = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
        return whitespace.filter(tantivy.Filter.remove_long(limit)).build()
    builder = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(limit))
        .filter(tantivy.Filter.lowercase())
    )
    if tokenizer in STEMMERS:  # en_stem, de_stem, ...: Tantivy's Snowball stemmer of the language
        builder = builder.filter(tantivy.Filter.stemmer(STEMMERS[tokenizer]))
    return builder.build()


def register(index: Any, fields: Iterable[Any] = ()) -> Any:
    """Register on ``index`` the analyzers of this project (255-byte limit): ``default``, ``en_stem``,
    ``whitespace``, the stemmer of another language where ``fields`` (FieldMappings) name it, and the
    analyzers ``fields`` name with other limits; returns ``index``."""
    fields = list(fields)
    named = {f.tokenizer for f in fields if limits_tokens(f.tokenizer)}
    for tokenizer in (*ALWAYS_REGISTERED, *sorted(named - set(ALWAYS_REGISTERED))):
        index.register_tokenizer(tokenizer, analyzer(tokenizer))
    for f in fields:
        name = analyzer_name(f.tokenizer or "default", f.max_token_length)
        if name != f.tokenizer and limits_tokens(f.tokenizer):
            index.register_tokenizer(name, analyzer(f.tokenizer, f.max_token_length))
            # tantivy4java's name of the same analyzer, which the schema of a split it wrote uses
            index.register_tokenizer(
                f"{f.tokenizer}_limit_{f.max_token_length}", analyzer(f.tokenizer, f.max_token_length)
            )
    return index


def lowercases(tokenizer: str) -> bool:
    """Whether the tokenizer lowercases (Quickwit's normalizer of a wildcard's text: ``lowercase``)."""
    return tokenizer == "default" or tokenizer in STEMMERS or ngram_spec(tokenizer) is not None


def splits_text(tokenizer: str, text: str) -> bool:
    """Whether ``text`` would become more than one token (or none): a wildcard over it cannot match
    one term. ``default`` and the stemmers keep runs of letters and digits, ``whitespace`` splits on spaces."""
    if tokenizer == "raw":
        return False
    if tokenizer == "whitespace":
        return any(ch.isspace() for ch in text)
    return any(not ch.isalnum() for ch in text)


def long_tokens(tokenizer: str, text: str, max_token_length: int | None) -> list[str]:
    """The tokens of ``text`` that ``tokenizer`` would drop for being too long (none for ``raw``)."""
    if not limits_tokens(tokenizer):
        return []
    limit = DEFAULT_MAX_TOKEN_LENGTH if max_token_length is None else max_token_length
    words = text.split() if tokenizer == "whitespace" else _ALNUM_RUN.findall(text)
    return [w for w in words if len(w.encode()) >= limit]


def query_gram(tokenizer: str, word: str) -> list[str]:
    """The terms an n-gram column's query word (one word of its query analyzer) is searched as: the word
    itself, one gram, if it has ``min``..``max`` characters; a longer word: its first ``max`` characters
    on an ``edge_ngram`` column (a prefix of the indexed word), every ``max``-character gram of it on an
    ``ngram`` column (all required: the words holding all of them); a shorter word: none (no gram of it
    is indexed). Example: ``query_gram("edge_ngram_2_4", "errors")`` is ``["erro"]``."""
    spec = ngram_spec(tokenizer)
    assert spec is not None, tokenizer
    if len(word) < spec.min:
        return []
    if len(word) <= spec.max:
        return [word]
    if spec.edge:
        return [word[: spec.max]]
    return list(dict.fromkeys(word[i : i + spec.max] for i in range(len(word) - spec.max + 1)))
