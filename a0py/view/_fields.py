"""The fields of what clients send, checked: each function returns the
value, or raises :class:`ProtocolError` with a message fit to send back in a
status (naming the field and showing, cut short, what came). Shared by
:mod:`a0py.view._protocol` and :mod:`a0py.view._capabilities`."""

import json

from .errors import ProtocolError

__all__ = ["MAX_ITEMS", "U32_MAX", "array", "dumps", "short", "string", "uint"]

U32_MAX = 0xFFFFFFFF
#: The most items of an array in one client message.
MAX_ITEMS = 10_000


def dumps(obj):
    """Compact JSON (what the server sends)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def short(value):
    """``value`` as a client sent it, cut to 60 characters, for messages."""
    try:
        text = repr(value) if isinstance(value, (bytes, bytearray)) else json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def uint(value, what, maximum=U32_MAX):
    # bool is an int in Python but not a number in JSON's sense here
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ProtocolError(f"{what} must be an integer from 0 to {maximum}, got {short(value)}")
    return value


def string(value, what, maximum, empty=False):
    if not isinstance(value, str) or len(value) > maximum or (not empty and not value):
        raise ProtocolError(f"{what} must be a {'' if empty else 'non-empty '}string of at most {maximum} "
                            f"characters, got {short(value)}")
    return value


def array(msg, key, op):
    """Field ``key`` of message ``msg`` (of operation ``op``): a list of at most :data:`MAX_ITEMS`."""
    value = msg.get(key)
    if not isinstance(value, list):
        raise ProtocolError(f"{op}: field {key!r} must be an array, got {short(value)}")
    if len(value) > MAX_ITEMS:
        raise ProtocolError(f"{op}: {len(value)} items in {key!r}, at most {MAX_ITEMS} per message")
    return value
