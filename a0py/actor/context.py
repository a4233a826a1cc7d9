"""The actor context: what a running handler reaches through :func:`current`.

Each actor sets its :class:`ActorContext` in a context variable on the thread (or asyncio
task) that runs it, so :func:`current` and :func:`become` work from any code its handler
calls, and raise :class:`NotInActorError` anywhere else.
"""

import contextvars

from .errors import NotInActorError

__all__ = ["ActorContext", "become", "current"]

_current = contextvars.ContextVar("a0py_actor_current", default=None)


class ActorContext:
    """What a handler can reach through :func:`current`: ``self`` (its own ref), ``name``,
    ``system``, :meth:`become`, :meth:`stop` and scheduled sends to itself or others."""

    __slots__ = ("_actor",)

    def __init__(self, actor):
        self._actor = actor

    @property
    def self(self):
        """This actor's ref."""
        return self._actor.ref

    @property
    def name(self):
        """This actor's name."""
        return self._actor.name

    @property
    def system(self):
        """The :class:`ActorSystem` running this actor."""
        return self._actor.system

    def become(self, behaviour):
        """Handle the next message (and the ones after) with ``behaviour``.

        Raises :class:`ActorConfigError` if ``behaviour`` is not callable and has no
        ``handle``."""
        self._actor.become(behaviour)

    def stop(self):
        """Stop this actor once the current message is handled; later messages are dropped."""
        self._actor.alive = False

    def send_after(self, delay, target, message):
        """Shorthand for ``system.send_after(delay, target, message)``."""
        return self._actor.system.send_after(delay, target, message)

    def send_at(self, when, target, message):
        """Shorthand for ``system.send_at(when, target, message)``."""
        return self._actor.system.send_at(when, target, message)


def current():
    """The :class:`ActorContext` of the actor whose handler is running.

    Raises :class:`NotInActorError` outside a handler."""
    context = _current.get()
    if context is None:
        raise NotInActorError("current() called outside an actor's handler")
    return context


def become(behaviour):
    """Make the running actor handle its next message with ``behaviour``.

    Raises :class:`NotInActorError` outside a handler, :class:`ActorConfigError` for a bad
    behaviour."""
    current().become(behaviour)
