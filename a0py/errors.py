"""The exceptions a0py raises. Every one is a subclass of :class:`A0Error`.

The C core returns error codes; the binding maps each code to one of these
classes and adds what it knows (the arena's name, the field, the sizes), so a
message always names what was wrong.

``__all__`` is the one list of them: :mod:`a0py` takes its names from it
(``from .errors import *``). The compiled core imports them by name (Cython
must see each name, and its ``import *`` would assign the cimported C
globals too); tests/project/test_error_modules.py holds it to this list.
"""

__all__ = [
    "A0Error", "A0OSError", "A0TimeoutError", "ArenaCorruptError", "ArenaExistsError",
    "ArenaFormatError", "ArenaNotFoundError", "ArenaPermissionError", "ArgumentError",
    "BufferTooSmallError", "ClosedError", "EmptyError", "FrameEvictedError", "FrameTooLargeError",
    "LockError", "NoFrameError", "PacketCorruptError", "SeqNotFoundError",
]


class A0Error(Exception):
    """Base class of every error a0py raises."""


class ArenaFormatError(A0Error, ValueError):
    """An arena's header does not describe a valid a0py arena.

    Raised when opening: wrong magic, unsupported format version, wrong header
    size, or a recorded arena size that differs from the mapping (a truncated
    or foreign file).
    """


class ArenaCorruptError(A0Error):
    """Shared state read from the arena failed a bounds or consistency check.

    An offset pointed outside the arena, a frame's recorded seq did not match,
    or the state pages were inconsistent. Nothing was followed or written.
    """


class ArenaNotFoundError(A0Error, FileNotFoundError):
    """The named arena (shared memory object or file) does not exist."""


class ArenaExistsError(A0Error, FileExistsError):
    """Asked to create an arena of one size, and it already exists with
    another (``Arena.shm(name, size=...)``, ``Arena.file(path, size=...)``).
    The message gives both sizes; pass ``size=None`` to attach to it as it
    is, or unlink it to create it anew."""


class ArenaPermissionError(A0Error, PermissionError):
    """An existing shared memory object or file is refused as an arena: this
    process did not create it, and it is not one it may trust.

    Attaching to a name that someone else made would hand them every frame,
    so an object a0py did not create itself (exclusively) is attached only
    if it is a regular file (not a symbolic link, FIFO or device), owned by
    the caller's effective uid (or the ``owner=`` it named) and granting no
    permission beyond the ``mode`` asked for (0600 by default). The message
    names the path, the owner and the mode, and says how to remove it;
    ``path``, ``uid`` and ``mode`` (permission bits; None for a symbolic
    link) hold the same facts. ``api_hint``, when set, is the argument that
    accepts the object on purpose (``pass owner=1000``): the message ends
    with it, and ``reason`` is the message without it (for front ends, such
    as the command line, that have no such argument)."""

    def __init__(self, message, path=None, uid=None, mode=None, api_hint=None):
        super().__init__(message)
        self.path = path
        self.uid = uid
        self.mode = mode
        self.api_hint = api_hint

    @property
    def reason(self):
        """The message without :attr:`api_hint`."""
        return super().__str__()

    def __str__(self):
        return f"{self.reason}; {self.api_hint}" if self.api_hint else self.reason


class FrameTooLargeError(A0Error, ValueError):
    """A frame cannot fit in the arena's workspace even when it is empty."""


class EmptyError(A0Error, LookupError):
    """The operation needs a frame and the arena holds none."""


class NoFrameError(A0Error, LookupError):
    """The cursor is not on a live frame (never placed, evicted, or cleared),
    or there is no next/previous frame to move to."""


class SeqNotFoundError(A0Error, LookupError):
    """``jump(seq)`` asked for a seq that has not been written yet."""


class FrameEvictedError(A0Error):
    """A frame read without the lock was overwritten while it was in use.

    Raised when a ``Transport.read_view()`` block ends and its frame turns out
    to have been evicted (and possibly written over) meanwhile: what the block
    read may be torn, so discard whatever it computed from it and read again.
    The reader fell behind the writers: give the arena more room, or read
    sooner. (Copying reads never raise it: they retry and count the loss in
    ``Transport.missed``.)
    """


class LockError(A0Error):
    """Misuse of the lock: operating on a released lock, nesting, or a lock
    that the previous owner left unrecoverable."""


class A0TimeoutError(A0Error, TimeoutError):
    """A wait reached its deadline before its predicate held."""


class ClosedError(A0Error, ValueError):
    """The arena or transport was closed."""


class ArgumentError(A0Error, ValueError):
    """An argument is out of range or of the wrong kind (names which)."""


class BufferTooSmallError(ArgumentError):
    """``Transport.read_into`` could not place even one frame in the room the
    caller gave it (the buffer from ``offset``, or ``max_bytes``). ``needed``
    is the bytes the next frame takes there (its prefix and data), ``seq`` its seq;
    nothing was read and the cursor did not move."""

    def __init__(self, message, needed=0, seq=0):
        super().__init__(message)
        self.needed = needed
        self.seq = seq


class A0OSError(A0Error, OSError):
    """A system call made by the core failed (errno and strerror are set)."""


class PacketCorruptError(A0Error, ValueError):
    """Bytes that should hold an a0py packet do not: wrong magic or version,
    an offset or size outside the packet, a header that is not UTF-8. The
    message names the field (and the topic and seq when read from one)."""
