"""Spark SQL's lexical rules, for finding what a statement really says: comments, string literals
(with Spark's escapes), raw strings and back-quoted names, blanked or unquoted as Spark reads them.

``lex(text)`` returns two copies of ``text`` with every position kept: one with comments blanked
(what the parsers see), one with the insides of literals and quoted names blanked too (where
keywords, operators and names are searched, so words inside strings never count).
"""

from __future__ import annotations

import re

# What starts a comment, a string literal (r'..' raw) or a back-quoted name, as Spark's lexer reads them.
_LEXEME_START = re.compile(r"--|/\*|['\"`]|(?<![\w`])[rR](?=['\"])")
_QUOTED = {
    "'": re.compile(r"'(?:[^'\\]|\\.|'')*'", re.DOTALL),
    '"': re.compile(r'"(?:[^"\\]|\\.|"")*"', re.DOTALL),
    "`": re.compile(r"`(?:[^`]|``)*`"),
}


def _blank(text: str) -> str:
    """``text`` with every character but line breaks replaced by a space (positions stay put)."""
    return re.sub(r"[^\n]", " ", text)


def lex(text: str) -> tuple[str, str]:
    """(``text`` with its comments blanked, ``text`` with comments and the insides of string literals
    and back-quoted names blanked too), read as Spark's lexer reads them: ``--`` line comments,
    nested ``/* */`` comments, '..' and ".." strings with backslash escapes and doubled quotes,
    r'..' raw strings, `..` names with doubled back-quotes. Both keep every position of ``text``."""
    parse, code = [], []
    i = 0
    while (m := _LEXEME_START.search(text, i)) is not None:
        start = m.start()
        parse.append(text[i:start])
        code.append(text[i:start])
        end = _lexeme_end(text, start)
        lexeme = text[start:end]
        if lexeme.startswith(("--", "/*")):
            parse.append(_blank(lexeme))
            code.append(_blank(lexeme))
        else:
            opening = 2 if lexeme[0] in "rR" else 1
            parse.append(lexeme)
            code.append(lexeme[:opening] + _blank(lexeme[opening:-1]) + lexeme[-1:])
        i = end
    parse.append(text[i:])
    code.append(text[i:])
    return "".join(parse), "".join(code)


def _lexeme_end(text: str, start: int) -> int:
    """Where the comment, string or quoted name at ``start`` ends (the end of ``text`` if it does not)."""
    return _lexeme_span(text, start)[0]


def _lexeme_span(text: str, start: int) -> tuple[int, bool]:
    """(where the comment, string or quoted name at ``start`` ends, whether it is closed there)."""
    if text.startswith("--", start):
        end = text.find("\n", start)
        return (len(text) if end < 0 else end), True
    if text.startswith("/*", start):
        depth, i = 0, start
        while (m := re.compile(r"/\*|\*/").search(text, i)) is not None:
            depth += 1 if m.group() == "/*" else -1
            i = m.end()
            if depth == 0:
                return i, True
        return len(text), False
    if text[start] in "rR":  # raw string: no escapes, ends at the next quote of its kind
        end = text.find(text[start + 1], start + 2)
        return (len(text), False) if end < 0 else (end + 1, True)
    m = _QUOTED[text[start]].match(text, start)
    return (m.end(), True) if m else (len(text), False)


_UNCLOSED = {
    "'": "the string literal that starts here is never closed (a ' without its closing ')",
    '"': 'the string literal that starts here is never closed (a " without its closing ")',
    "`": "the back-quoted name that starts here is never closed (a ` without its closing `)",
    "/*": "the comment that starts here is never closed (a /* without its closing */)",
}


def unclosed(text: str) -> tuple[int, str] | None:
    """(position, what is wrong) of the first string literal, back-quoted name or comment of ``text``
    that never closes, or None. Spark reports one as a syntax error somewhere after it.

    Example: ``unclosed("SELECT 'a")`` is ``(7, "the string literal that starts here is never closed ...")``.
    """
    i = 0
    while (m := _LEXEME_START.search(text, i)) is not None:
        end, closed = _lexeme_span(text, m.start())
        if not closed:
            lexeme = text[m.start() : m.start() + 2]
            quote = lexeme[1] if lexeme[0] in "rR" else "/*" if lexeme == "/*" else lexeme[0]
            return m.start(), _UNCLOSED[quote]
        i = end
    return None


def line_and_column(text: str, position: int) -> tuple[int, int]:
    """The 1-based line and column of ``position`` in ``text``."""
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


_SPARK_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a", "%": "\\%", "_": "\\_"}
_ESCAPES = {  # per quote: a backslash escape, or the doubled quote (one pass, left to right, as Spark reads)
    q: re.compile(r"\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-3][0-7]{2})|(.))|(" + q + q + ")", re.DOTALL)
    for q in "'\""
}


def unquote(token: str) -> str:
    """The value of a quoted token by Spark's rules: `a``b` is a name with a back-quote; r'..' is
    raw; in '..' and "..", a doubled quote is the quote and backslash escapes are Spark's
    (\\n, \\t, \\uXXXX, octal \\101; \\% and \\_ keep their backslash; any other char stands for itself)."""
    if token.startswith("`"):
        return token[1:-1].replace("``", "`")
    if token[0] in "rR":
        return token[2:-1]
    return _ESCAPES[token[0]].sub(_unescape, token[1:-1])


def _unescape(m: re.Match[str]) -> str:
    unicode4, unicode8, octal, char, doubled = m.groups()
    if doubled:
        return doubled[0]
    if unicode4 or unicode8:
        return chr(int(unicode4 or unicode8, 16))
    if octal:
        return chr(int(octal, 8))
    return _SPARK_ESCAPES.get(char, char)
