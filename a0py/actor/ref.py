"""Actor refs: the address of an actor, and the one message every actor understands.

An :class:`ActorRef` is what senders hold: ``ref.send(message)`` (or ``ref(message)``)
puts a message in the actor's mailbox and returns at once. :class:`LocalRef` addresses an
actor of this process; :class:`~a0py.actor.arena.ArenaRef` one reachable by name from any
process. :data:`STOP` asks any actor to stop after the messages sent before it.

This module is the bottom of the actor layer: it imports nothing of it but its errors, so
every other module may use refs without importing each other.
"""

from .errors import NotPicklableRefError

__all__ = ["STOP", "ActorRef", "LocalRef", "Stop"]


class Stop:
    """The stop request: an actor that takes it stops after the messages before it. Compare
    by type (``isinstance(m, Stop)``): it crosses processes by pickling."""

    __slots__ = ()

    def __repr__(self):
        return "STOP"

    def __reduce__(self):
        return (_stop_singleton, ())


def _stop_singleton():
    return STOP


STOP = Stop()


class ActorRef:
    """The address of an actor: ``ref.send(message)`` (or ``ref(message)``) puts a message
    in its mailbox and returns at once. Refs compare and hash by the actor they name."""

    __slots__ = ()

    #: How a death watch (:mod:`a0py.actor.watch`) can follow this actor, as a hashable
    #: key ``(kind, identity)``: kind ``"callback"`` for refs with :meth:`_on_end`,
    #: ``"blocking"`` for refs whose :meth:`wait_dead` blocks a thread cheaply on
    #: something the kernel releases when the actor's process dies; None (the default):
    #: not at all, only polling :meth:`is_alive` finds its death.
    _watch_key = None

    @property
    def name(self):
        """The actor's name (unique in its system; for arena actors, across processes)."""
        raise NotImplementedError

    def send(self, message):
        """Put ``message`` in the actor's mailbox. Messages to a stopped actor are dropped."""
        raise NotImplementedError

    def __call__(self, message):
        self.send(message)

    def is_alive(self):
        """Whether the actor still takes messages."""
        raise NotImplementedError

    def wait_dead(self, timeout=None):
        """Block until the actor is dead or ``timeout`` seconds passed; True if dead."""
        raise NotImplementedError

    def __repr__(self):
        return f"<{type(self).__name__} {self.name!r}>"


class LocalRef(ActorRef):
    """A ref to an actor of this process. It pickles only if the actor has an arena mailbox
    (it then becomes an :class:`~a0py.actor.arena.ArenaRef` to the same actor); otherwise
    pickling raises :class:`NotPicklableRefError`."""

    __slots__ = ("_actor", "send")

    def __init__(self, actor):
        self._actor = actor
        self.send = actor.enqueue  # the hot path: one attribute call, no indirection

    @property
    def name(self):
        return self._actor.name

    @property
    def _watch_key(self):
        return ("callback", self._actor)

    def _on_end(self, fn):
        """Call ``fn()`` once the actor has ended; returns a function that cancels it."""
        return self._actor._on_end(fn)

    def is_alive(self):
        return self._actor.alive

    def wait_dead(self, timeout=None):
        return self._actor.done.wait(timeout)

    @property
    def address(self):
        """The arena name other processes reach this actor by, or None."""
        return self._actor.mailbox.address

    def __call__(self, message):
        self._actor.enqueue(message)

    def __eq__(self, other):
        if isinstance(other, LocalRef):
            return other._actor is self._actor
        address = self._actor.mailbox.address
        return address is not None and getattr(other, "address", None) == address

    def __hash__(self):
        return hash(self._actor.name)

    def __reduce__(self):
        remote = self._actor.mailbox.remote_ref()
        if remote is None:
            raise NotPicklableRefError(
                f"actor {self._actor.name!r} has an in-process mailbox and cannot be addressed "
                f"from another process; spawn it with arena=True")
        return remote.__reduce__()
