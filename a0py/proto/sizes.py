"""Sizes in bytes, written once: the grammar every size setting is read in, how a size
is written back for a user to copy, and the bytes a packet adds to its payload.

**The grammar.** ``Topic(size=)``, ``A0PY_TOPIC_SIZES``, ``A0PY_ARENA_SIZE[_PROTOCOL]``,
the bridge's sizes and every ``BYTES`` option of the command line (``--size``,
``--max-bytes``) read a size with :func:`read_size`: a whole number of bytes, or a
number followed by one of the binary units ``K``, ``M``, ``G``, ``T`` (2**10, 2**20,
2**30, 2**40), then optionally ``B`` or ``iB``. Units are read in either case and
always binary: ``64M``, ``64m``, ``64MiB`` and ``64mb`` are all 67108864 bytes.
Spaces around the number and the unit are allowed; nothing else (no fractions, no
sign). An int is taken as it is. :func:`size_text` writes a size back in this grammar.

Arena arithmetic (how many bytes a frame takes, the arena that holds N of them) is the
binding's, from the C headers: :func:`a0py._core.frame_span`,
:func:`a0py._core.arena_size_for`.
"""

import re

from .. import _core
from ..errors import ArgumentError

__all__ = ["MAX_SIZE", "PACKET_OVERHEAD", "power_of_two_size", "read_size", "size_text"]

#: The largest size any setting may name (the core's sizes are signed 64-bit).
MAX_SIZE = 2**63 - 1
#: The bytes of a packet besides its payload when it has no headers of its own: the
#: fixed header and the standard block, where the header index starts.
PACKET_OVERHEAD = _core.PACKET_LAYOUT["index_off"]

_SIZE_RE = re.compile(r"\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)
_UNIT_SHIFTS = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}


def read_size(value, what=None):
    """Bytes from an int or a size string in the grammar of this module (``"4096"``,
    ``"512k"``, ``"64M"``, ``"1GiB"``). `what` names the setting in error messages.

    Raises :class:`a0py.ArgumentError`: a bool or another type, a string that is not a
    size, or a size above :data:`MAX_SIZE`."""
    where = f"{what}: " if what else ""
    if isinstance(value, bool):
        raise ArgumentError(f"{what or 'a size'} must be a number of bytes, not {value!r}")
    if isinstance(value, int):
        size = value
    elif isinstance(value, str):
        match = _SIZE_RE.fullmatch(value)
        if match is None:
            raise ArgumentError(f"{where}{value!r} is not a size: give bytes, or a number with a "
                                "binary unit K, M, G or T (4096, 512K, 64M, 1G)")
        size = int(match.group(1)) << _UNIT_SHIFTS[match.group(2).lower()]
    else:
        raise ArgumentError(f"{what or 'a size'} must be a number of bytes, not {type(value).__name__}")
    if size > MAX_SIZE:
        raise ArgumentError(f"{where}{value!r} is too large a size (at most {MAX_SIZE} bytes)")
    return size


def size_text(size):
    """`size` bytes as :func:`read_size` reads them, in the largest binary unit up to
    ``G`` that divides it (``"32M"``, ``"1536K"``, ``"4097"``)."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return str(size)


def power_of_two_size(need, minimum):
    """The smallest power of two that is at least `need` and at least `minimum` (a
    power of two itself): the arena sizes a0py suggests."""
    return max(minimum, 1 << (need - 1).bit_length())
