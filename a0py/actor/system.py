"""The actor system: spawning, lookup, scheduled sends, supervision and shutdown.

:class:`ActorSystem` runs actors (:mod:`a0py.actor.message_loop`) with in-process or arena
mailboxes, owns their scheduler (:mod:`a0py.actor.scheduler`) and reports their failures.

Invariants kept here:

* FIFO per sender: mailboxes are FIFO, so messages from one sender arrive in send order
  (the ordered channel is for transports that do not promise this);
* a handler's exception is reported as a :class:`Failure` to the supervisor (or the log)
  and kept in :attr:`ActorSystem.failures`; a supervisor that raises is logged;
* scheduled messages (:meth:`ActorSystem.send_after`, :meth:`ActorSystem.send_at`) are the
  only timers; one scheduler thread per system sends them;
* after :meth:`ActorSystem.shutdown` nothing new runs: spawning and scheduling raise
  :class:`ActorStoppedError`.
"""

import asyncio
import datetime as _dt
import itertools
import logging
import os
import threading
import time
import traceback as _traceback
from collections import deque
from dataclasses import dataclass, field

from .arena import ArenaMailbox, ArenaRef
from .errors import ActorConfigError, ActorStoppedError, RemoteFailureError
from .mailbox import Mailbox, QueueMailbox
from .message_loop import AsyncActor, ThreadActor, as_handler
from .ref import STOP
from .scheduler import _check_delay, _Scheduler

__all__ = ["ActorSystem", "Failure"]

log = logging.getLogger("a0py.actor")


@dataclass
class Failure:
    """What the supervisor is told when a handler raised: the actor's ``name``, the
    ``message`` it was handling, the ``error`` and its formatted ``traceback``, and the
    ``pid`` of the actor's process. Also when the actor's mailbox could not decode a
    message: ``message`` is then an :class:`~a0py.actor.mailbox.Undecodable` and
    ``error`` the decoding error."""

    actor: str
    message: object
    error: BaseException
    traceback: str = ""
    pid: int = field(default_factory=os.getpid)

    def __reduce__(self):
        # Exceptions and messages may not pickle; a Failure sent to a supervisor in another
        # process carries their repr instead.
        return (Failure, (self.actor, _safe_repr(self.message), RemoteFailureError(self.error),
                          self.traceback, self.pid))


def _safe_repr(value, limit=200):
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__} with a failing repr>"
    return text if len(text) <= limit else text[:limit] + "..."


def _format_error(exc):
    return "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__))


class ActorSystem:
    """Runs actors, their scheduled messages and their supervision.

    ``supervisor`` receives a :class:`Failure` each time a handler raises: an
    :class:`ActorRef`, or a callable run on the failing actor's thread (an exception it
    raises is logged, never propagated). Without one, failures are logged on the
    ``a0py.actor`` logger. Either way the last ``keep_failures`` failures are kept in
    :attr:`failures`.

    Use it as a context manager, or call :meth:`shutdown`.
    """

    def __init__(self, name=None, *, supervisor=None, keep_failures=1000):
        if supervisor is not None and not callable(supervisor):
            raise ActorConfigError(f"supervisor must be an ActorRef or a callable, got {supervisor!r}")
        self.name = name or f"system-{os.getpid()}"
        self.supervisor = supervisor
        self.failures = deque(maxlen=keep_failures)
        self._actors = {}
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._scheduler = _Scheduler(self._report_scheduler)
        self._shut = False
        self._owned = []        # mailboxes to release at shutdown
        self._services = {}     # lazily started helpers (the gather service), by key

    # -- spawning -----------------------------------------------------------------------

    def _register(self, name, prefix):
        with self._lock:
            if self._shut:
                raise ActorStoppedError("the actor system is shut down")
            if name is None:
                name = f"{prefix}-{os.getpid()}-{next(self._ids)}"
            elif not isinstance(name, str) or not name:
                raise ActorConfigError(f"an actor name must be a non-empty str, got {name!r}")
            if name in self._actors:
                raise ActorConfigError(f"an actor named {name!r} is already running in this system")
            self._actors[name] = None  # reserved
        return name

    def _unreserve(self, name):
        with self._lock:
            if self._actors.get(name) is None:
                self._actors.pop(name, None)

    def spawn(self, behaviour, name=None, *, mailbox=None, arena=False, arena_size=None,
              on_failure="resume"):
        """Start an actor on its own thread and return its :class:`LocalRef`.

        ``mailbox``: a :class:`Mailbox` (default: a new :class:`QueueMailbox`). With
        ``arena=True`` the mailbox is a shared-memory arena named after the actor
        (``a0py-actor:<name>``, ``arena_size`` bytes), so other processes reach it with
        ``ArenaRef(name)``; the system unlinks that arena at shutdown.
        ``on_failure``: ``"resume"`` (default) or ``"stop"`` after reporting a failure.

        Raises :class:`ActorConfigError` (bad behaviour, name, mailbox or policy; a name in
        use in this system), :class:`ActorNameTakenError` (an arena actor of that name is
        alive in another process), :class:`ActorStoppedError` after shutdown, and the
        arena's errors (:class:`a0py.A0Error`) when creating the mailbox fails.
        """
        as_handler(behaviour)  # fail before reserving anything
        if on_failure not in ("resume", "stop"):
            raise ActorConfigError(f"on_failure must be 'resume' or 'stop', got {on_failure!r}")
        if mailbox is not None and not isinstance(mailbox, Mailbox):
            raise ActorConfigError(f"mailbox must be a Mailbox, got {mailbox!r}")
        if arena and mailbox is not None:
            raise ActorConfigError("give either mailbox or arena=True, not both")
        if arena and name is None:
            name = f"actor-{os.getpid()}-{next(self._ids)}-{os.urandom(3).hex()}"
        name = self._register(name, "actor")
        owned = False
        try:
            if arena:
                mailbox = ArenaMailbox(name, size=arena_size, create=True)
                owned = True
            elif mailbox is None:
                mailbox = QueueMailbox()
            actor = ThreadActor(self, behaviour, name, mailbox, on_failure)
            with self._lock:
                self._actors[name] = actor
            actor.start()
        except BaseException:
            self._unreserve(name)
            with self._lock:
                if self._actors.get(name) is not None and not self._actors[name].alive:
                    self._actors.pop(name, None)
            if owned:
                mailbox.release()
            raise
        if owned:
            with self._lock:
                self._owned.append(mailbox)
        return actor.ref

    def spawn_async(self, behaviour, name=None, *, loop=None, on_failure="resume"):
        """Start an actor as a task on an asyncio event loop and return its :class:`LocalRef`.

        ``loop`` defaults to the running loop. The behaviour may be a coroutine function
        (awaited before the next message is taken). Sends from other threads are handed to
        the loop thread-safely; scheduled sends work the same.

        Raises :class:`ActorConfigError` (bad behaviour or name; no loop given and none
        running), :class:`ActorStoppedError` after shutdown.
        """
        as_handler(behaviour)
        if on_failure not in ("resume", "stop"):
            raise ActorConfigError(f"on_failure must be 'resume' or 'stop', got {on_failure!r}")
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                raise ActorConfigError("spawn_async needs loop= when no event loop is running") from None
        name = self._register(name, "async")
        actor = AsyncActor(self, behaviour, name, loop, on_failure)
        with self._lock:
            self._actors[name] = actor
        actor.start()
        return actor.ref

    def _ended(self, actor):
        with self._lock:
            if self._actors.get(actor.name) is actor:
                del self._actors[actor.name]

    # -- lookup ---------------------------------------------------------------------------

    def ref(self, name):
        """A ref to the actor called ``name``: this system's own actor if it runs one,
        else an :class:`~a0py.actor.arena.ArenaRef` to the arena mailbox of that name in
        any process (the arena is opened on first send)."""
        with self._lock:
            actor = self._actors.get(name)
        if actor is not None:
            return actor.ref
        return ArenaRef(name)

    def actors(self):
        """The names of the running actors."""
        with self._lock:
            return sorted(n for n, a in self._actors.items() if a is not None)

    # -- timers ---------------------------------------------------------------------------

    def send_after(self, delay, target, message):
        """Send ``message`` to ``target`` (a ref or any callable) after ``delay`` seconds
        (monotonic clock). Returns a :class:`Timer`.

        Raises :class:`ActorConfigError` for a delay that is not a number (a negative delay
        sends at once), :class:`ActorStoppedError` after shutdown."""
        delay = _check_delay(delay, "delay")
        if not callable(target):
            raise ActorConfigError(f"target must be a ref or a callable, got {target!r}")
        return self._scheduler.schedule(time.monotonic() + max(delay, 0.0), target, message)

    def send_at(self, when, target, message):
        """Send ``message`` to ``target`` at wall-clock time ``when``: a
        :class:`datetime.datetime` (naive means local time) or a ``time.time()`` timestamp.
        The time is turned into a monotonic deadline now, so later wall-clock steps do not
        move it. Returns a :class:`Timer`.

        Raises :class:`ActorConfigError` for a bad ``when`` or target,
        :class:`ActorStoppedError` after shutdown."""
        if isinstance(when, _dt.datetime):
            when = when.timestamp()
        when = _check_delay(when, "when")
        return self.send_after(when - time.time(), target, message)

    def pending_timers(self):
        """How many scheduled sends have not fired nor been cancelled."""
        return self._scheduler.pending()

    # -- supervision ----------------------------------------------------------------------

    def _report(self, actor, message, exc, traceback=None):
        failure = Failure(actor.name, message, exc,
                          _format_error(exc) if traceback is None else traceback)
        self.failures.append(failure)
        supervisor = self.supervisor
        if supervisor is None:
            log.error("actor %s failed on %s:\n%s", actor.name, _safe_repr(message),
                      failure.traceback)
            return
        try:
            supervisor(failure)
        except Exception:
            log.exception("the supervisor of %s failed while handling a failure", actor.name)

    def _report_scheduler(self, timer, exc):
        failure = Failure("<scheduler>", timer.message, exc, _format_error(exc))
        self.failures.append(failure)
        log.error("scheduled send to %r failed: %r", timer.target, exc)

    # -- stopping -------------------------------------------------------------------------

    def stop(self, ref, timeout=5.0):
        """Ask the actor behind ``ref`` to stop after the messages already sent to it, and
        wait up to ``timeout`` seconds for it. Returns True if it stopped in time. For a
        ref to another process's actor this only sends :data:`STOP`."""
        actor = getattr(ref, "_actor", None)
        if actor is None or actor.system is not self:
            ref.send(STOP)
            return False
        actor.request_stop()
        return actor.join(timeout)

    def shutdown(self, timeout=5.0):
        """Stop every actor now (messages not yet taken are dropped), stop the scheduler,
        and release owned arena mailboxes. Idempotent. Returns the names of actors that
        did not stop within ``timeout`` seconds (still handling a message)."""
        with self._lock:
            if self._shut:
                return []
            self._shut = True
            actors = [a for a in self._actors.values() if a is not None]
            services = list(self._services.values())
        for service in services:
            closer = getattr(service, "close", None)
            if closer is not None:
                closer()
        self._scheduler.stop()
        for actor in actors:
            actor.halt()
        deadline = time.monotonic() + timeout
        stuck = [a.name for a in actors if not a.join(max(0.0, deadline - time.monotonic()))]
        with self._lock:
            owned, self._owned = self._owned, []
        for mailbox in owned:
            try:
                mailbox.release()
            except Exception:
                log.exception("releasing the mailbox of %s failed", mailbox)
        return stuck

    @property
    def is_shut_down(self):
        """True once :meth:`shutdown` ran."""
        return self._shut

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    def __repr__(self):
        return f"<ActorSystem {self.name!r} actors={len(self._actors)}>"
