"""Pattern-only building blocks: the discard ``_`` and captures ``$``.

They live in a plain Python module of their own so that both builds of the
skeleton code (compiled ``a0py.dataspace._compiled`` and interpreted
``a0py.dataspace._interpreted``) recognise the same objects.
"""

import struct

from a0py.dataspace._errors import DataspaceTypeError
from a0py.dataspace._format import format_term

_DOUBLE = struct.Struct("<d")


def _same(a, b):
    # Canonical equality without knowing the Record class: Records compare
    # canonically themselves; atoms compare with their type (1, 1.0 and True
    # differ); floats compare by bit pattern.
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return _DOUBLE.pack(a) == _DOUBLE.pack(b)
    if type(a) is tuple:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


class Discard:
    """The pattern ``_``: matches anything and binds nothing. Use the
    singleton :data:`DISCARD` (also exported as ``_``)."""

    __slots__ = ()
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def _format_term(self):
        return "_"

    __repr__ = _format_term

    def __reduce__(self):
        return (Discard, ())


DISCARD = Discard()


class Capture:
    """The pattern ``$name:sub``: matches what ``sub`` matches and binds the
    matched value. Build it with :func:`capture`."""

    __slots__ = ("name", "pattern")

    def __init__(self, pattern=DISCARD, name=None):
        if name is not None and type(name) is not str:
            raise DataspaceTypeError(f"a capture's name must be a str or None, got {type(name).__name__}")
        object.__setattr__(self, "pattern", pattern)
        object.__setattr__(self, "name", name)

    def __setattr__(self, key, value):
        raise AttributeError("Capture is immutable")

    def __eq__(self, other):
        if type(other) is not Capture:
            return NotImplemented
        return self.name == other.name and _same(self.pattern, other.pattern)

    def __hash__(self):
        return hash(("$", self.name, type(self.pattern).__name__))

    def _format_term(self):
        text = "$" + (self.name or "")
        if self.pattern is not DISCARD:
            text += ":" + format_term(self.pattern)
        return text

    __repr__ = _format_term

    def __reduce__(self):
        return (Capture, (self.pattern, self.name))


def capture(sub=DISCARD, *, name=None):
    """A capture pattern: matches what ``sub`` matches (anything by default)
    and reports the matched value in the event's captures tuple.

    Captures appear in the tuple in the order a left-to-right, outside-in walk
    meets them: ``capture(Record("A", capture()))`` gives ``(A(x), x)``.

    Raises :class:`DataspaceTypeError` when ``name`` is not a str. ``sub`` is
    checked when the pattern is used (``Index.add_handler``, ``analyse``).
    """
    return Capture(sub, name)
