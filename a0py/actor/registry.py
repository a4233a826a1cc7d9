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


class Registrar:
    """A registry of actors by topic that drops the actors it finds dead.

    Every :meth:`lookup` checks the liveness of what it returns, so an actor whose process
    exited or was killed is never handed out (for cross-process actors the check is the
    robust lock held by the actor's process: the kernel releases it at once).
    :meth:`watch` also starts one thread per registered actor that blocks until the actor
    dies and then drops it and calls ``on_drop(topic, ref)`` for each of its topics.
    Thread-safe; also usable as an actor behaviour taking :class:`Register` and
    :class:`Unregister` messages.

    Raises :class:`ActorConfigError` for a bad ``on_drop``.
    """

    def __init__(self, *, on_drop=None):
        if on_drop is not None and not callable(on_drop):
            raise ActorConfigError(f"on_drop must be callable, got {on_drop!r}")
        self.on_drop = on_drop
        self._topics = {}        # topic -> OrderedDict name -> ref
        self._lock = threading.RLock()
        self._watching = False
        self._watchers = {}      # name -> thread
        self._closed = threading.Event()
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

    def _drop(self, name, only_topic=None):
        dropped = []
        with self._lock:
            for topic in list(self._topics):
                if only_topic is not None and topic != only_topic:
                    continue
                members = self._topics[topic]
                ref = members.pop(name, None)
                if ref is not None:
                    dropped.append((topic, ref))
                    if not members:
                        del self._topics[topic]
            self.dropped += len(dropped)
            # Under the (reentrant) lock: once a lookup has returned, on_drop has been told
            # of every drop, whichever thread found the actor dead.
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
                self._drop(ref.name)
        return live

    def topics(self):
        """The topics with at least one registered actor (dead ones not yet dropped
        included; :meth:`sweep` first for an exact answer)."""
        with self._lock:
            return list(self._topics)

    def sweep(self):
        """Drop every registered actor found dead; return the (topic, ref) pairs dropped."""
        with self._lock:
            refs = {ref.name: ref for members in self._topics.values() for ref in members.values()}
        dropped = []
        for name, ref in refs.items():
            if not ref.is_alive():
                dropped.extend(self._drop(name))
        return dropped

    def recipients(self, topic_of):
        """A recipient-list function for :func:`start_gather`: ``request -> lookup(topic_of(
        request))``. ``topic_of`` may also be a plain topic (used for every request)."""
        if callable(topic_of):
            return lambda request: self.lookup(topic_of(request))
        return lambda request: self.lookup(topic_of)

    def watch(self):
        """Start watching: each registered actor gets a thread that waits for its death
        (for cross-process actors, on its robust lock) and then drops it at once.
        Idempotent; :meth:`close` stops the threads."""
        with self._lock:
            self._watching = True
            for members in self._topics.values():
                for ref in members.values():
                    self._watch_one(ref)

    def _watch_one(self, ref):
        if ref.name in self._watchers:
            return

        def watcher():
            try:
                while not self._closed.is_set():
                    if ref.wait_dead(0.25):
                        self._drop(ref.name)
                        return
            finally:
                with self._lock:
                    self._watchers.pop(ref.name, None)

        thread = threading.Thread(target=watcher, name=f"a0py-registrar-{ref.name}", daemon=True)
        self._watchers[ref.name] = thread
        thread.start()

    def close(self):
        """Stop the watcher threads (registrations are kept)."""
        self._closed.set()
        with self._lock:
            self._watching = False
            threads = list(self._watchers.values())
        for thread in threads:
            thread.join(1)
