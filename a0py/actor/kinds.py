"""The kinds of actors: on a thread of their own, or as one task on an asyncio loop.

An actor is a behaviour and a mailbox. The behaviour is any callable taking one message,
or an object with a ``handle(message)`` method; the actor calls it with one message at a
time, so behaviours keep plain state and take no locks.

Invariants kept here:

* one message at a time per actor: a thread actor runs only on its own thread; an asyncio
  actor is one task that awaits its handler before taking the next message;
* an exception in a handler never escapes the actor: it is reported to the system's
  supervisor and the actor goes on with its next message (or stops, if spawned with
  ``on_failure="stop"``);
* an actor ends exactly once: its end callbacks (the death watch's) run after its
  mailbox is closed and its system forgot it.
"""

import asyncio
import inspect
import itertools
import logging
import threading

from .context import ActorContext, _current
from .errors import ActorConfigError
from .mailbox import Mailbox
from .ref import STOP, LocalRef, Stop

log = logging.getLogger("a0py.actor")


def _as_handler(behaviour):
    if callable(behaviour) and not isinstance(behaviour, type):
        return behaviour
    handle = getattr(behaviour, "handle", None)
    if callable(handle) and not isinstance(behaviour, type):
        return handle
    raise ActorConfigError(
        f"a behaviour must be a callable taking one message or an object with a handle() "
        f"method, got {behaviour!r}")


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

    def become(self, behaviour):
        """Handle the next messages with ``behaviour`` (:class:`ActorConfigError` if it is
        not one)."""
        self.handler = _as_handler(behaviour)

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
