"""The text syntax of values and patterns (from the paper's notation).

::

    present("Alice")            a record: label, then fields in parentheses
    speak("Alice", $what)       $name captures; $ alone captures anonymously
    [_, _]                      a tuple (the record of the reserved label "")
    $who:present(_)             a capture with a subpattern
    "two words"(1, 2.5, b"\\x00", None, True, -0.0, nan, inf)

This module reads it (:func:`parse`); :mod:`a0py.dataspace._format` writes
it (``format_term``, ``repr`` of records). ``parse(repr(v))`` gives back ``v``
for every value whose floats are not NaNs with unusual bits (the text has one
NaN; the byte encoding keeps all bits).
"""

import json
import re

from a0py.dataspace._build_choice import build
from a0py.dataspace._errors import DataspaceTypeError, InvalidValueError, ParseError
from a0py.dataspace._format import IDENT
from a0py.dataspace._patterns import DISCARD, Capture

_NUMBER = re.compile(
    r"[+-]?(?:0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+"
    r"|(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?)"
)
_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_WORDS = {"None": None, "True": True, "False": False, "nan": float("nan"), "inf": float("inf")}
# The parser's own nesting limit, below the values' MAX_DEPTH (256): each
# level costs it three Python frames, and 200 levels stay well inside
# CPython's default recursion limit (1000).
MAX_TEXT_DEPTH = 200
_BYTES_ESCAPES = {"\\": 0x5C, '"': 0x22, "n": 0x0A, "r": 0x0D, "t": 0x09, "0": 0x00}


class _Parser:
    def __init__(self, text, record):
        self.text = text
        self.pos = 0
        self.record = record
        self.depth = 0

    def error(self, message, pos=None):
        return ParseError(message, self.text, self.pos if pos is None else pos)

    def skip(self):
        text, n = self.text, len(self.text)
        while self.pos < n:
            c = text[self.pos]
            if c in " \t\r\n":
                self.pos += 1
            elif c == "#":
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end + 1
            else:
                break

    def peek(self):
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, ch):
        if self.peek() != ch:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "end of text"
            raise self.error(f"expected {ch!r}, found {found}")
        self.pos += 1

    def items(self, close):
        self.depth += 1
        if self.depth > MAX_TEXT_DEPTH:
            raise self.error(f"nesting deeper than {MAX_TEXT_DEPTH}")
        try:
            return self._items(close)
        finally:
            self.depth -= 1

    def _items(self, close):
        items = []
        if self.peek() == close:
            self.pos += 1
            return items
        while True:
            items.append(self.term())
            c = self.peek()
            if c == ",":
                self.pos += 1
                if self.peek() == close:  # trailing comma
                    self.pos += 1
                    return items
            elif c == close:
                self.pos += 1
                return items
            else:
                found = repr(c) if c else "end of text"
                raise self.error(f"expected ',' or {close!r}, found {found}")

    def term(self):
        c = self.peek()
        text, start = self.text, self.pos
        if not c:
            raise self.error("expected a value or pattern, found end of text")
        if c == "[":
            self.pos += 1
            return tuple(self.items("]"))
        if c == "$":
            self.pos += 1
            m = IDENT.match(text, self.pos)
            name = None
            if m:
                name = m.group()
                self.pos = m.end()
            if self.pos < len(text) and text[self.pos] == ":":
                self.pos += 1
                self.depth += 1
                if self.depth > MAX_TEXT_DEPTH:
                    raise self.error(f"nesting deeper than {MAX_TEXT_DEPTH}")
                try:
                    return Capture(self.term(), name)
                finally:
                    self.depth -= 1
            if self.peek() == "(":
                raise self.error("a capture's subpattern follows a colon: write $name:label(...)")
            return Capture(DISCARD, name)
        if c == '"':
            m = _STRING.match(text, self.pos)
            if not m:
                raise self.error("unterminated string or bad escape")
            self.pos = m.end()
            s = json.loads(m.group())
            if self.peek() == "(":
                if not s:
                    raise self.error(
                        "the empty label is reserved for tuples; write [...]", start
                    )
                self.pos += 1
                return self.make_record(s, self.items(")"), start)
            return s
        if c == "b" and text.startswith('b"', self.pos):
            return self.bytes_literal()
        m = IDENT.match(text, self.pos)
        if m:
            word = m.group()
            self.pos = m.end()
            if self.peek() == "(":
                self.pos += 1
                return self.make_record(word, self.items(")"), start)
            if word == "_":
                return DISCARD
            if word in _WORDS:
                return _WORDS[word]
            raise self.error(
                f"bare word {word!r} is not a value; a record needs parentheses ({word}())"
                " and a string needs quotes",
                start,
            )
        if c in "+-" and text.startswith(("inf", "nan"), self.pos + 1):
            word = text[self.pos + 1:self.pos + 4]
            self.pos += 4
            value = _WORDS[word]
            return -value if c == "-" else value
        m = _NUMBER.match(text, self.pos)
        if m:
            self.pos = m.end()
            literal = m.group()
            body = literal.lstrip("+-")
            if body[:2].lower() in ("0x", "0o", "0b"):
                return int(literal, 0)
            if any(ch in body for ch in ".eE"):
                return float(literal)
            return int(literal)
        raise self.error(f"unexpected character {c!r}")

    def bytes_literal(self):
        text, n = self.text, len(self.text)
        start = self.pos
        self.pos += 2
        out = bytearray()
        while True:
            if self.pos >= n:
                raise self.error("unterminated bytes literal", start)
            c = text[self.pos]
            if c == '"':
                self.pos += 1
                return bytes(out)
            if c == "\\":
                e = text[self.pos + 1:self.pos + 2]
                if e == "x":
                    hexdigits = text[self.pos + 2:self.pos + 4]
                    if len(hexdigits) != 2 or not all(h in "0123456789abcdefABCDEF" for h in hexdigits):
                        raise self.error("\\x in bytes needs two hex digits")
                    out.append(int(hexdigits, 16))
                    self.pos += 4
                    continue
                if e in _BYTES_ESCAPES:
                    out.append(_BYTES_ESCAPES[e])
                    self.pos += 2
                    continue
                raise self.error(f"unknown escape \\{e} in bytes")
            if not " " <= c <= "~":
                raise self.error("bytes literals hold printable ASCII; write other bytes as \\xNN")
            out.append(ord(c))
            self.pos += 1

    def make_record(self, label, fields, start):
        try:
            return self.record(label, *fields)
        except InvalidValueError as e:
            raise self.error(str(e), start) from None


def parse(text, *, record=None):
    """Parse the text syntax into a value or a pattern.

    ``parse('present("Alice")')`` is ``Record("present", "Alice")``;
    ``parse('speak("Alice", $what)')`` is a pattern with one capture;
    ``parse("[_, _]")`` is the tuple pattern ``(DISCARD, DISCARD)``. ``#``
    starts a comment. ``record`` is the Record class to build with (the
    package's by default; the benchmark passes the interpreted build's).

    Raises :class:`ParseError` (with ``position``) for text that is not in the
    syntax, :class:`DataspaceTypeError` when ``text`` is not a str.
    """
    if type(text) is not str:
        raise DataspaceTypeError(f"parse takes a str, got {type(text).__name__}")
    if record is None:
        record = build.Record
    p = _Parser(text, record)
    result = p.term()
    if p.peek():
        raise p.error(f"unexpected {p.text[p.pos]!r} after the end of the term")
    return result
