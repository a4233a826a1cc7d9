"""Mailboxes: where an actor's messages wait until it takes them, one at a time.

A mailbox has a sending side (:meth:`Mailbox.put`, called from any thread) and a
receiving side (:meth:`Mailbox.take`, called only by the actor's own thread). The actor
system runs every thread actor the same way, whatever the mailbox::

    open_reader(); while alive: for message in take(): handle(message); close_reader()

so an in-process queue and a cross-process arena (:class:`a0py.actor.arena.ArenaMailbox`)
are interchangeable. ``open_reader``/``close_reader`` run on the actor's thread, which
lets the arena mailbox hold its liveness lock (a robust mutex is owned by a thread) for
exactly the actor's life.
"""

import queue
import traceback as _traceback

from .errors import ActorConfigError

__all__ = ["Mailbox", "QueueMailbox", "Undecodable"]


class Mailbox:
    """The mailbox interface. Subclasses implement :meth:`put`, :meth:`take` and
    :meth:`close`; the hooks default to doing nothing."""

    #: The name other processes address this mailbox by, or None if it is in-process only.
    address = None

    def put(self, message):
        """Append ``message``. Thread-safe; never runs user code. Messages put after
        :meth:`close` are dropped. Subclasses document their own errors (a cross-process
        mailbox may raise :class:`~a0py.actor.MailboxFullError`)."""
        raise NotImplementedError

    def take(self, timeout=None):
        """Block until at least one message is there and return the messages waiting, in
        order, as a list; return ``[]`` once closed, or when ``timeout`` seconds passed. A
        message that could not be decoded is an :class:`Undecodable` in its place."""
        raise NotImplementedError

    def close(self):
        """Stop taking messages and wake a blocked :meth:`take`. Idempotent."""
        raise NotImplementedError

    def open_reader(self):
        """Called on the actor's thread before its first :meth:`take`."""

    def close_reader(self):
        """Called on the actor's thread after its last :meth:`take`."""

    def release(self):
        """Free what the mailbox owns (an arena, a name) once no actor uses it."""

    def remote_ref(self):
        """A ref that reaches this mailbox from other processes (it pickles), or None if
        the mailbox is in-process only (the default)."""
        return None


class Undecodable:
    """What :meth:`Mailbox.take` returns in place of a message it could not decode: a
    frame of a cross-process mailbox that does not unpickle here (a class this process
    cannot import, a frame written by something else). An actor does not pass it to its
    behaviour: it reports it to its system's supervisor (or the log) as a
    :class:`~a0py.actor.Failure` whose ``message`` is this object and ``error`` the
    decoding error, and goes on.

    ``mailbox``: the mailbox's name; ``size``: the frame's size in bytes; ``head``: its
    first 64 bytes; ``error``: the exception; ``traceback``: the error's traceback, as text
    (the exception keeps none, so the batch it was read in is not kept alive).
    """

    __slots__ = ("error", "head", "mailbox", "size", "traceback")

    def __init__(self, mailbox, data, error):
        self.mailbox = mailbox
        self.size = len(data)
        self.head = bytes(data[:64])
        self.traceback = "".join(_traceback.format_exception(type(error), error, error.__traceback__))
        error.__traceback__ = None
        self.error = error

    def __repr__(self):
        return (f"<undecodable frame of {self.size} bytes in mailbox {self.mailbox!r}: "
                f"{type(self.error).__name__}: {self.error}>")


_CLOSED = object()


class QueueMailbox(Mailbox):
    """An unbounded in-process FIFO mailbox (a :class:`queue.SimpleQueue`).

    ``batch`` bounds how many messages one :meth:`take` returns (so a stop request is
    seen between batches). Raises :class:`ActorConfigError` for a bad ``batch``.
    """

    __slots__ = ("_batch", "_closed", "_queue")

    def __init__(self, batch=256):
        if not isinstance(batch, int) or batch < 1:
            raise ActorConfigError(f"QueueMailbox batch must be an int >= 1, got {batch!r}")
        self._queue = queue.SimpleQueue()
        self._closed = False
        self._batch = batch

    def put(self, message):
        if not self._closed:
            self._queue.put(message)

    def take(self, timeout=None):
        if self._closed:
            return []
        q = self._queue
        try:
            first = q.get(timeout=timeout)
        except queue.Empty:
            return []
        if first is _CLOSED:
            return []
        batch = [first]
        for _ in range(self._batch - 1):
            try:
                message = q.get_nowait()
            except queue.Empty:
                break
            if message is _CLOSED:
                self._queue.put(_CLOSED)  # seen by the next take
                break
            batch.append(message)
        return batch

    def close(self):
        if not self._closed:
            self._closed = True
            self._queue.put(_CLOSED)

    @property
    def closed(self):
        """True once :meth:`close` was called."""
        return self._closed

    def __len__(self):
        return self._queue.qsize()
