"""The registrar: a registry of actors by topic that drops the actors it finds dead.

Liveness is the actor's own (:meth:`ActorRef.is_alive`): for an actor in another process
it is the robust lock (:class:`a0py.Deadman`) its process holds on its mailbox for its
life, which the kernel releases the instant the process exits or is killed. So
:meth:`Registrar.lookup` never hands out a dead actor, and with :meth:`Registrar.watch`
the dead are dropped the moment they die.
"""

import threading
from collections import OrderedDict
from dataclasses import dataclass

from .errors import ActorConfigError
from .ref import ActorRef
from .watch import DeathWatch

__all__ = ["Register", "Registrar", "Unregister"]


@dataclass(frozen=True)
class Register:
    """Message to a :class:`Registrar` actor: register ``ref`` under ``topic``."""

    topic: object
    ref: ActorRef


@dataclass(frozen=True)
class Unregister:
    """Message to a :class:`Registrar` actor: remove ``ref`` from ``topic`` (all topics if
    ``topic`` is None)."""

    topic: object
    ref: ActorRef


_REGISTERED = "registered"   # the registrar's one kind of death-watch subscriber


class Registrar:
    """A registry of actors by topic that drops the actors it finds dead.

    Every :meth:`lookup` checks the liveness of what it returns, so an actor whose process
    exited or was killed is never handed out (for cross-process actors the check is the
    robust lock held by the actor's process: the kernel releases it at once).
    :meth:`watch` also follows every registered actor with a death watch
    (:class:`~a0py.actor.watch.DeathWatch`, the one the gathers use): an actor of this
    process by a callback run when it ends, an arena actor by a thread blocked on its
    robust lock (at most one per actor and 256 per registrar; past that cap an actor is
    dropped by the next :meth:`lookup` or :meth:`sweep` instead). A dead actor is dropped
    and ``on_drop(topic, ref)`` is called for each of its topics. Thread-safe; also usable
    as an actor behaviour taking :class:`Register` and :class:`Unregister` messages.

    Raises :class:`ActorConfigError` for a bad ``on_drop``.
    """

    def __init__(self, *, on_drop=None):
        if on_drop is not None and not callable(on_drop):
            raise ActorConfigError(f"on_drop must be callable, got {on_drop!r}")
        self.on_drop = on_drop
        self._topics = {}        # topic -> OrderedDict name -> ref
        self._lock = threading.RLock()
        self._watching = False
        self._death_watch = DeathWatch(self._died)
        self._watched = {}       # name -> death-watch key
        self.dropped = 0

    def register(self, topic, ref):
        """Register ``ref`` under ``topic``. Returns False (and registers nothing) if the
        actor is already dead. Raises :class:`ActorConfigError` if ``ref`` is not an
        :class:`ActorRef` or ``topic`` is not hashable."""
        if not isinstance(ref, ActorRef):
            raise ActorConfigError(f"Registrar.register needs an ActorRef, got {ref!r}")
        try:
            hash(topic)
        except TypeError:
            raise ActorConfigError(f"a topic must be hashable, got {topic!r}") from None
        if not ref.is_alive():
            return False
        with self._lock:
            self._topics.setdefault(topic, OrderedDict())[ref.name] = ref
            if self._watching:
                self._watch_one(ref)
        return True

    def unregister(self, topic, ref):
        """Remove ``ref`` from ``topic`` (from every topic if ``topic`` is None). Returns
        True if it was registered."""
        found = False
        with self._lock:
            topics = list(self._topics) if topic is None else [topic]
            for t in topics:
                members = self._topics.get(t)
                if members and members.pop(ref.name, None) is not None:
                    found = True
                    if not members:
                        del self._topics[t]
            if found and not self._registered(ref.name):
                self._unwatch(ref.name)
        return found

    def handle(self, message):
        """Actor behaviour: apply a :class:`Register` or :class:`Unregister` message.
        Raises :class:`ActorConfigError` for any other message."""
        if isinstance(message, Register):
            self.register(message.topic, message.ref)
        elif isinstance(message, Unregister):
            self.unregister(message.topic, message.ref)
        else:
            raise ActorConfigError(f"a Registrar takes Register/Unregister messages, got {message!r}")

    def _registered(self, name):
        return any(name in members for members in self._topics.values())

    def _drop_dead(self, name):
        """Drop the actor ``name`` from every topic where its ref is found dead; returns the
        (topic, ref) pairs dropped. ``on_drop`` is told under the (reentrant) lock: once a
        lookup has returned, it has been told of every drop, whichever thread found the
        actor dead."""
        dropped = []
        with self._lock:
            for topic in list(self._topics):
                members = self._topics[topic]
                ref = members.get(name)
                if ref is not None and not ref.is_alive():
                    del members[name]
                    dropped.append((topic, ref))
                    if not members:
                        del self._topics[topic]
            if not dropped:
                return dropped
            self.dropped += len(dropped)
            if not self._registered(name):
                self._unwatch(name)
            if self.on_drop is not None:
                for topic, ref in dropped:
                    self.on_drop(topic, ref)
        return dropped

    def lookup(self, topic):
        """The live actors registered under ``topic``, in registration order; the dead ones
        found are dropped (and reported to ``on_drop``)."""
        with self._lock:
            members = list(self._topics.get(topic, {}).values())
        live = []
        for ref in members:
            if ref.is_alive():
                live.append(ref)
            else:
                self._drop_dead(ref.name)
        return live

    def topics(self):
        """The topics with at least one registered actor (dead ones not yet dropped
        included; :meth:`sweep` first for an exact answer)."""
        with self._lock:
            return list(self._topics)

    def sweep(self):
        """Drop every registered actor found dead; return the (topic, ref) pairs dropped."""
        with self._lock:
            names = {name for members in self._topics.values() for name in members}
        dropped = []
        for name in names:
            dropped.extend(self._drop_dead(name))
        return dropped

    def recipients(self, topic_of):
        """A recipient-list function for :func:`start_gather`: ``request -> lookup(topic_of(
        request))``. ``topic_of`` may also be a plain topic (used for every request)."""
        if callable(topic_of):
            return lambda request: self.lookup(topic_of(request))
        return lambda request: self.lookup(topic_of)

    def watch(self):
        """Start watching: every registered actor, and every one registered later, is
        followed by the death watch and dropped the moment it dies. Idempotent;
        :meth:`close` stops it."""
        with self._lock:
            if self._watching:
                return
            self._watching = True
            if self._death_watch is None:
                self._death_watch = DeathWatch(self._died)
            for members in list(self._topics.values()):
                for ref in list(members.values()):
                    self._watch_one(ref)

    def _watch_one(self, ref):
        # Under the lock. The watch may report a death at once, on this thread: _died then
        # drops the actor before its key is recorded, so record it only if still registered.
        name = ref.name
        if name in self._watched:
            return
        key = self._death_watch.watch(ref, _REGISTERED)
        if key is not None and self._registered(name):
            self._watched[name] = key

    def _unwatch(self, name):
        key = self._watched.pop(name, None)
        if key is not None and self._death_watch is not None:
            self._death_watch.unwatch(key, _REGISTERED)

    def _died(self, key, name, subscribers):
        # From the death watch (a watcher thread or the dying actor's own thread).
        with self._lock:
            if self._watched.get(name) == key:
                del self._watched[name]
            self._drop_dead(name)
            # A new actor took the name meanwhile (alive, so kept): follow it instead.
            if self._watching:
                for members in self._topics.values():
                    ref = members.get(name)
                    if ref is not None:
                        self._watch_one(ref)
                        break

    def close(self):
        """Stop watching (registrations are kept): watcher threads end within about a
        second; :meth:`watch` starts again."""
        with self._lock:
            self._watching = False
            death_watch, self._death_watch = self._death_watch, None
            self._watched.clear()
        if death_watch is not None:
            death_watch.close(join=True)
