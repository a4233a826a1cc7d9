"""The text syntax, written out: :func:`format_term` (``repr`` of records).

The reading half is :mod:`a0py.dataspace._syntax` (``parse``); the syntax
itself is described there and in docs/dataspace.md, "Text syntax".

This module sits below the pattern terms and the Record classes, whose
``repr`` it writes: it formats values itself and asks a pattern term (``_``,
``$``) for its own text through its ``_format_term`` method, so it needs to
import neither.
"""

import json
import re

from a0py.dataspace._errors import InvalidValueError
from a0py.dataspace._values import is_record

# A label (or capture name) written without quotes.
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_\-.]*")


def _format_bytes(b):
    out = ['b"']
    for x in b:
        if x == 0x5C:
            out.append("\\\\")
        elif x == 0x22:
            out.append('\\"')
        elif 0x20 <= x <= 0x7E:
            out.append(chr(x))
        else:
            out.append(f"\\x{x:02x}")
    out.append('"')
    return "".join(out)


def _format_label(label):
    m = IDENT.fullmatch(label)
    return label if m else json.dumps(label, ensure_ascii=False)


def format_term(v):
    """The text syntax of a value or pattern (what ``repr`` of a Record
    prints). Raises :class:`InvalidValueError` for other objects."""
    t = type(v)
    if v is None or t is bool or t is int:
        return repr(v)
    if t is float:
        return repr(v)  # 'nan', 'inf', '-inf', '-0.0', '1e+16' all parse back
    if t is str:
        return json.dumps(v, ensure_ascii=False)
    if t is bytes:
        return _format_bytes(v)
    if t is tuple or t is list:
        return "[" + ", ".join(format_term(x) for x in v) + "]"
    if is_record(v):
        return _format_label(v.label) + "(" + ", ".join(format_term(f) for f in v.fields) + ")"
    own = getattr(t, "_format_term", None)  # the pattern terms _ and $ (_patterns.py)
    if own is not None:
        return own(v)
    raise InvalidValueError(f"{t.__name__} is not a dataspace value or pattern")
