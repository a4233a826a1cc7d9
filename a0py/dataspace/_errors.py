"""The exceptions of the dataspace layer, each a subclass of :class:`a0py.errors.A0Error`.

Each one also derives from the built-in exception a Python programmer would
expect (``TypeError`` for a wrong kind of object, ``ValueError`` for bad text
or bytes, ``KeyError`` for something that is not there), so generic handlers
keep working.
"""

from a0py.errors import A0Error


class DataspaceError(A0Error):
    """Base class of every error raised by :mod:`a0py.dataspace`."""


class DataspaceTypeError(DataspaceError, TypeError):
    """An argument has the wrong kind: a callback that cannot be called, a
    pattern that is not a pattern."""


class InvalidValueError(DataspaceTypeError):
    """An object is not a dataspace value (or not a pattern, where one is
    expected): a dict, a set, an ``int`` subclass, a record label that is not
    a non-empty ``str``, or a pattern used where only a value may go (an
    assertion or a message that contains ``_`` or a capture), or a value or
    pattern nested deeper than ``MAX_DEPTH`` levels. (A list is accepted
    wherever a tuple is, as that tuple.)"""


class DecodeError(DataspaceError, ValueError):
    """Bytes are not the canonical encoding of a value. The message names the
    offset and what was wrong (unknown tag, truncation, a non-minimal length,
    invalid UTF-8, trailing bytes, nesting too deep)."""


class ParseError(DataspaceError, ValueError):
    """Text is not in the dataspace text syntax. ``position`` is the offset
    (0-based) of the offending character in ``text``."""

    def __init__(self, message, text="", position=0):
        self.text = text
        self.position = position
        if text:
            line_start = text.rfind("\n", 0, position) + 1
            line_end = text.find("\n", position)
            line = text[line_start:] if line_end < 0 else text[line_start:line_end]
            message = f"{message} at offset {position}\n  {line}\n  {' ' * (position - line_start)}^"
        super().__init__(message)


class NotAssertedError(DataspaceError, KeyError):
    """Asked to retract a value that is not asserted (over-removal). The index
    is left unchanged."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class UnknownHandlerError(DataspaceError, KeyError):
    """Asked to remove a handler that was already removed, or that belongs to
    another index."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


class FacetStoppedError(DataspaceError):
    """An action was asked of a facet (or a handle of a facet) that has
    stopped."""
