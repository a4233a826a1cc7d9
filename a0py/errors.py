"""The exceptions a0py raises. Every one is a subclass of :class:`A0Error`.

The C core returns error codes; the binding maps each code to one of these
classes and adds what it knows (the arena's name, the field, the sizes), so a
message always names what was wrong.
"""


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


class FrameTooLargeError(A0Error, ValueError):
    """A frame cannot fit in the arena's workspace even when it is empty."""


class EmptyError(A0Error, LookupError):
    """The operation needs a frame and the arena holds none."""


class NoFrameError(A0Error, LookupError):
    """The cursor is not on a live frame (never placed, evicted, or cleared),
    or there is no next/previous frame to move to."""


class SeqNotFoundError(A0Error, LookupError):
    """``jump(seq)`` asked for a seq that has not been written yet."""


class LockError(A0Error):
    """Misuse of the lock: operating on a released lock, nesting, or a lock
    that the previous owner left unrecoverable."""


class A0TimeoutError(A0Error, TimeoutError):
    """A wait reached its deadline before its predicate held."""


class ClosedError(A0Error, ValueError):
    """The arena or transport was closed."""


class ArgumentError(A0Error, ValueError):
    """An argument is out of range or of the wrong kind (names which)."""


class A0OSError(A0Error, OSError):
    """A system call made by the core failed (errno and strerror are set)."""
