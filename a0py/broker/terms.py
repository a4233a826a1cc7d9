"""Values and patterns as the broker takes them: checks, matching, and text.

The broker speaks the dataspace's terms (:mod:`a0py.dataspace`): values (atoms,
``Record``, tuples) and patterns (values with ``_`` and ``capture(...)`` inside). These
helpers are shared by the engine (which matches retract patterns against a client's
claims) and the client (which keeps its own claims to re-assert them).

Invariants:

* **A ``str`` argument is text.** Where the broker takes a value or a pattern, a ``str``
  is read with :func:`a0py.dataspace.parse` (as the dataspace's facets do), never taken
  silently as a string fact: ``claim('temp("kitchen", 21.5)')`` claims the record, and a
  typo is a :class:`~a0py.dataspace.ParseError` with a note saying how to write the
  string itself (quoted: ``claim('"hello"')``). A str *inside* a record or tuple is an
  ordinary string.
* **Matching is canonical**: atoms compare by :func:`a0py.dataspace.canonical_equal`
  (``1``, ``1.0`` and ``True`` differ), and a variable named twice must bind equal values
  everywhere it appears (``pair($x, $x)`` matches ``pair(1, 1)``, not ``pair(1, 2)``).
"""

from a0py.dataspace import (
    DISCARD,
    Capture,
    Discard,
    InvalidValueError,
    ParseError,
    Record,
    analyse,
    canonical_equal,
    encode,
    format_term,
    parse,
)

from .errors import BrokerTypeError

__all__ = [
    "encode_value",
    "has_pattern",
    "match",
    "pattern_text",
    "pattern_vars",
    "to_pattern",
    "to_value",
]


def has_pattern(term):
    """Whether ``term`` holds ``_`` or a capture anywhere (so it is not a value)."""
    t = type(term)
    if t is Discard or t is Capture:
        return True
    if t is Record:
        return term.is_pattern
    if t is tuple or t is list:
        return any(has_pattern(x) for x in term)
    return False


def _parse_text(text, what, call):
    try:
        return parse(text)
    except ParseError as exc:
        exc.add_note(f"{what}: {call} reads a str as the text syntax of parse(); to give "
                     f"the string itself, write it quoted: {format_term(text)!r}")
        raise


def to_value(term, what="argument", call="claim"):
    """``term`` checked as a value to claim (a ``str`` is parsed as text): returns
    ``(encoding, value)``.

    Raises :class:`a0py.dataspace.ParseError` (with a note) for a str that does not parse,
    :class:`BrokerTypeError` for a pattern (``_``/captures inside),
    :class:`a0py.dataspace.InvalidValueError` for anything that is not a dataspace value
    (the message is prefixed with ``what``)."""
    if type(term) is str:
        term = _parse_text(term, what, call)
    if has_pattern(term):
        raise BrokerTypeError(f"{what} is a pattern ({format_term(term)}); only values can be "
                              "claimed (retract and subscribe take patterns)")
    if type(term) is list:
        term = tuple(term)
    try:
        return encode(term), term
    except InvalidValueError as exc:
        raise InvalidValueError(f"{what}: {exc}") from None


def encode_value(term):
    """The canonical encoding of a value already checked by :func:`to_value`."""
    return encode(term)


def to_pattern(term, what="pattern", call="subscribe"):
    """``term`` checked as a pattern (a value is a pattern too; a ``str`` is parsed as
    text): returns it, with lists taken as tuples. Raises
    :class:`a0py.dataspace.ParseError` (with a note) for a str that does not parse and
    :class:`a0py.dataspace.InvalidValueError` for a non-pattern."""
    if type(term) is str:
        term = _parse_text(term, what, call)
    if type(term) is list:
        term = tuple(term)
    try:
        analyse(term)
    except InvalidValueError as exc:
        raise InvalidValueError(f"{what}: {exc}") from None
    return term


def pattern_text(pattern):
    """The pattern in the text syntax (``parse`` gives it back)."""
    return format_term(pattern)


def pattern_vars(pattern):
    """The capture names of ``pattern``, in the order of its capture map (None for an
    anonymous ``$``)."""
    return analyse(pattern).names


def match(pattern, value, env=None):
    """Whether ``value`` matches ``pattern``; a variable named twice must bind equal values.
    ``env`` (a dict) receives the bindings of named captures."""
    return _match(pattern, value, {} if env is None else env)


def _match(p, v, env):
    t = type(p)
    if t is Discard:
        return True
    if t is Capture:
        name = p.name
        if name is not None:
            bound = env.get(name, _UNBOUND)
            if bound is _UNBOUND:
                env[name] = v
            elif not canonical_equal(bound, v):
                return False
        return p.pattern is DISCARD or _match(p.pattern, v, env)
    if t is Record:
        if type(v) is not Record or v.label != p.label:
            return False
        pf, vf = p.fields, v.fields
        if len(pf) != len(vf):
            return False
        for a, b in zip(pf, vf):
            if not _match(a, b, env):
                return False
        return True
    if t is tuple or t is list:
        if type(v) is not tuple or len(v) != len(p):
            return False
        for a, b in zip(p, v):
            if not _match(a, b, env):
                return False
        return True
    return canonical_equal(p, v)


_UNBOUND = object()
