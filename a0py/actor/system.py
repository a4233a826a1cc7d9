"""Actors, actor refs, the scheduler and the supervisor.

An actor is a behaviour and a mailbox. The behaviour is any callable taking one message,
or an object with a ``handle(message)`` method; the actor calls it with one message at a
time, so behaviours keep plain state and take no locks. Inside a handler,
:func:`current` gives the actor's :class:`ActorContext` (its own ref, ``become``,
``stop``, scheduled sends) and :func:`become` swaps the behaviour for the next message.

Invariants kept here:

* one message at a time per actor: a thread actor runs only on its own thread; an asyncio
  actor is one task that awaits its handler before taking the next message;
* FIFO per sender: mailboxes are FIFO, so messages from one sender arrive in send order
  (the ordered channel is for transports that do not promise this);
* an exception in a handler never escapes the actor: it is reported to the supervisor as a
  :class:`Failure` and the actor goes on with its next message (or stops, if spawned with
  ``on_failure="stop"``);
* scheduled messages (:meth:`ActorSystem.send_after`, :meth:`ActorSystem.send_at`) are the
  only timers; one scheduler thread per system sends them.
"""

import asyncio
import contextvars
import datetime as _dt
import heapq
import inspect
import itertools
import logging
import math
import os
import threading
import time
import traceback as _traceback
from collections import deque
from dataclasses import dataclass, field

from .arena import ArenaMailbox, ArenaRef
from .errors import ActorConfigError, ActorStoppedError, NotInActorError
from .mailbox import Mailbox, QueueMailbox
from .ref import STOP, LocalRef, Stop

__all__ = ["ActorContext", "ActorSystem", "Failure", "Timer", "become", "current"]

log = logging.getLogger("a0py.actor")

_current = contextvars.ContextVar("a0py_actor_current", default=None)


@dataclass
class Failure:
    """What the supervisor is told when a handler raised: the actor's ``name``, the
    ``message`` it was handling, the ``error`` and its formatted ``traceback``."""

    actor: str
    message: object
    error: BaseException
    traceback: str = ""
    pid: int = field(default_factory=os.getpid)

    def __reduce__(self):
        # Exceptions and messages may not pickle; a Failure sent to a supervisor in another
        # process carries their repr instead.
        return (Failure, (self.actor, _safe_repr(self.message), _PicklableError(self.error),
                          self.traceback, self.pid))


class _PicklableError(Exception):
    """A stand-in for an exception that crossed a process boundary in a Failure."""

    def __init__(self, error):
        text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        super().__init__(text)

    def __reduce__(self):
        return (_PicklableError, (str(self),))


def _safe_repr(value, limit=200):
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__} with a failing repr>"
    return text if len(text) <= limit else text[:limit] + "..."


def _as_handler(behaviour):
    if callable(behaviour) and not isinstance(behaviour, type):
        return behaviour
    handle = getattr(behaviour, "handle", None)
    if callable(handle) and not isinstance(behaviour, type):
        return handle
    raise ActorConfigError(
        f"a behaviour must be a callable taking one message or an object with a handle() "
        f"method, got {behaviour!r}")


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
        self._actor.handler = _as_handler(behaviour)

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


def _nothing():
    pass


class _Actor:
    """State shared by thread and asyncio actors."""

    def __init__(self, system, behaviour, name, mailbox, on_failure):
        self.system = system
        self.handler = _as_handler(behaviour)
        self.name = name
        self.mailbox = mailbox
        self.on_failure = on_failure
        self.alive = True
        self.context = ActorContext(self)
        self.done = threading.Event()
        self.handled = 0
        self.ref = None  # set by the subclass once enqueue exists
        self._end_lock = threading.Lock()
        self._end_callbacks = {}    # token -> fn, run once when the actor has ended
        self._end_tokens = itertools.count()

    def _on_end(self, fn):
        """Call ``fn()`` when the actor has ended (on its thread; at once, on this one, if
        it already has). Returns a function that cancels the call. Used by the gather
        service to see a local recipient's death at once."""
        with self._end_lock:
            if not self.done.is_set():
                token = next(self._end_tokens)
                self._end_callbacks[token] = fn
                return lambda: self._cancel_end(token)
        fn()
        return _nothing

    def _cancel_end(self, token):
        with self._end_lock:
            self._end_callbacks.pop(token, None)

    def _set_done(self):
        with self._end_lock:
            self.done.set()
            callbacks, self._end_callbacks = self._end_callbacks, {}
        for fn in callbacks.values():
            try:
                fn()
            except Exception:
                log.exception("an end callback of actor %s failed", self.name)

    def _handle_one(self, message):
        """Handle one message; False once the actor should stop."""
        if isinstance(message, Stop):
            return False
        try:
            self.handler(message)
        except Exception as exc:
            self.system._report(self, message, exc)
            if self.on_failure == "stop":
                return False
        self.handled += 1
        return self.alive


class _ThreadActor(_Actor):
    def __init__(self, system, behaviour, name, mailbox, on_failure):
        super().__init__(system, behaviour, name, mailbox, on_failure)
        self.enqueue = mailbox.put
        self.ref = LocalRef(self)
        self.thread = threading.Thread(target=self._run, name=f"a0py-actor-{name}", daemon=True)
        self._ready = threading.Event()
        self._start_error = None

    def start(self):
        self.thread.start()
        self._ready.wait()
        if self._start_error is not None:
            raise self._start_error

    def _run(self):
        mailbox = self.mailbox
        _current.set(self.context)
        try:
            mailbox.open_reader()
        except BaseException as exc:
            self._start_error = exc
            self.alive = False
            self._ready.set()
            self._set_done()
            return
        self._ready.set()
        try:
            handle_one = self._handle_one
            while self.alive:
                batch = mailbox.take()
                if not batch:
                    if getattr(mailbox, "closed", False):
                        break
                    continue
                for message in batch:
                    if not handle_one(message):
                        self.alive = False
                        break
        finally:
            self.alive = False
            mailbox.close()
            try:
                mailbox.close_reader()
            finally:
                self.system._ended(self)
                self._set_done()

    def request_stop(self):
        self.mailbox.put(STOP)

    def halt(self):
        self.alive = False
        self.mailbox.close()

    def join(self, timeout):
        if threading.current_thread() is self.thread:
            return True
        return self.done.wait(timeout)


class _AsyncActor(_Actor):
    """An actor that is one asyncio task on ``loop``; its behaviour may be ``async``."""

    def __init__(self, system, behaviour, name, loop, on_failure):
        super().__init__(system, behaviour, name, _AsyncMailbox(self), on_failure)
        self.loop = loop
        self.queue = asyncio.Queue()
        self.loop_thread = None
        self.future = None
        self.ref = LocalRef(self)

    def start(self):
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.loop_thread = threading.get_ident()
            self.future = self.loop.create_task(self._run())
        else:
            self.future = asyncio.run_coroutine_threadsafe(self._run(), self.loop)

    def enqueue(self, message):
        if not self.alive:
            return
        if threading.get_ident() == self.loop_thread:
            self.queue.put_nowait(message)
        else:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, message)

    async def _run(self):
        self.loop_thread = threading.get_ident()
        _current.set(self.context)
        try:
            while self.alive:
                message = await self.queue.get()
                if message is _HALT or isinstance(message, Stop):
                    break
                try:
                    result = self.handler(message)
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:
                    self.system._report(self, message, exc)
                    if self.on_failure == "stop":
                        break
                self.handled += 1
        finally:
            self.alive = False
            self.system._ended(self)
            self._set_done()

    def request_stop(self):
        self.enqueue(STOP)

    def halt(self):
        if self.alive:
            self.enqueue(_HALT)
            self.alive = False

    def join(self, timeout):
        if threading.get_ident() == self.loop_thread:
            return self.done.is_set()  # cannot block the loop the actor runs on
        return self.done.wait(timeout)


_HALT = object()


class _AsyncMailbox(Mailbox):
    """The sending side of an asyncio actor (its queue lives in the actor)."""

    def __init__(self, actor):
        self._actor = actor

    def put(self, message):
        self._actor.enqueue(message)

    def close(self):
        pass


class Timer:
    """A scheduled send. :meth:`cancel` prevents it if it has not fired yet."""

    __slots__ = ("cancelled", "deadline", "fired", "message", "target")

    def __init__(self, deadline, target, message):
        self.deadline = deadline
        self.target = target
        self.message = message
        self.cancelled = False
        self.fired = False

    def cancel(self):
        """Cancel the send; True if it had not fired yet."""
        if self.fired:
            return False
        self.cancelled = True
        return True

    def __repr__(self):
        state = "fired" if self.fired else "cancelled" if self.cancelled else "pending"
        return f"<Timer {state} in {self.deadline - time.monotonic():.3f}s to {self.target!r}>"


class _Scheduler:
    """One thread, one heap of (deadline, seq, timer) on the monotonic clock."""

    def __init__(self, system):
        self._system = system
        self._heap = []
        self._seq = itertools.count()
        self._cond = threading.Condition(threading.Lock())
        self._stopped = False
        self._thread = None

    def schedule(self, deadline, target, message):
        timer = Timer(deadline, target, message)
        with self._cond:
            if self._stopped:
                raise ActorStoppedError("the actor system is shut down; nothing can be scheduled")
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="a0py-actor-scheduler",
                                                daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (deadline, next(self._seq), timer))
            if self._heap[0][2] is timer:
                self._cond.notify()
        return timer

    def _run(self):
        heap = self._heap
        cond = self._cond
        while True:
            with cond:
                while True:
                    if self._stopped:
                        return
                    if heap:
                        delay = heap[0][0] - time.monotonic()
                        if delay <= 0:
                            break
                        cond.wait(delay)
                    else:
                        cond.wait()
                due = []
                now = time.monotonic()
                while heap and heap[0][0] <= now:
                    due.append(heapq.heappop(heap)[2])
            for timer in due:
                if timer.cancelled:
                    continue
                timer.fired = True
                try:
                    timer.target(timer.message)
                except Exception as exc:
                    self._system._report_scheduler(timer, exc)

    def stop(self):
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def pending(self):
        with self._cond:
            return sum(1 for _, _, t in self._heap if not t.cancelled)


def _check_delay(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ActorConfigError(f"{what} must be a number of seconds, got {value!r}")
    return float(value)


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
        self._scheduler = _Scheduler(self)
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
        (``a0py.actor.<name>``, ``arena_size`` bytes), so other processes reach it with
        ``ArenaRef(name)``; the system unlinks that arena at shutdown.
        ``on_failure``: ``"resume"`` (default) or ``"stop"`` after reporting a failure.

        Raises :class:`ActorConfigError` (bad behaviour, name, mailbox or policy; a name in
        use in this system), :class:`ActorNameTakenError` (an arena actor of that name is
        alive in another process), :class:`ActorStoppedError` after shutdown, and the
        arena's errors (:class:`a0py.A0Error`) when creating the mailbox fails.
        """
        handler_check = _as_handler(behaviour)  # fail before reserving anything
        del handler_check
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
            actor = _ThreadActor(self, behaviour, name, mailbox, on_failure)
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
        _as_handler(behaviour)
        if on_failure not in ("resume", "stop"):
            raise ActorConfigError(f"on_failure must be 'resume' or 'stop', got {on_failure!r}")
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                raise ActorConfigError("spawn_async needs loop= when no event loop is running") from None
        name = self._register(name, "async")
        actor = _AsyncActor(self, behaviour, name, loop, on_failure)
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

    def _report(self, actor, message, exc):
        failure = Failure(actor.name, message, exc, _traceback.format_exc())
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
        failure = Failure("<scheduler>", timer.message, exc, _traceback.format_exc())
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
