"""An actor's message loop, in its two kinds: on a thread of its own (:class:`ThreadActor`),
or as one task on an asyncio loop (:class:`AsyncActor`), with the one message-handling
path they share.

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
from .mailbox import Mailbox, Undecodable
from .ref import STOP, LocalRef, Stop

__all__ = ["AsyncActor", "ThreadActor", "as_handler"]

log = logging.getLogger("a0py.actor")

_CONTROL = (Stop, Undecodable)   # messages for the actor itself, not its behaviour


def as_handler(behaviour):
    """The callable that handles a message for `behaviour` (itself, or its ``handle``
    method). ActorConfigError if it is neither."""
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
    """What thread and asyncio actors share: state, the one message-handling path
    (:meth:`_handle_one`), stopping, and the end callbacks. A kind adds how it starts,
    runs its loop over its mailbox and is joined."""

    _awaits = False   # whether an awaitable returned by the handler is awaited

    def __init__(self, system, behaviour, name, mailbox, on_failure):
        self.system = system
        self.handler = as_handler(behaviour)
        self.name = name
        self.mailbox = mailbox
        self.enqueue = mailbox.put
        self.on_failure = on_failure
        self.alive = True
        self.context = ActorContext(self)
        self.done = threading.Event()
        self.handled = 0
        self.ref = LocalRef(self)
        self._end_lock = threading.Lock()
        self._end_callbacks = {}    # token -> fn, run once when the actor has ended
        self._end_tokens = itertools.count()

    def become(self, behaviour):
        """Handle the next messages with ``behaviour`` (:class:`ActorConfigError` if it is
        not one)."""
        self.handler = as_handler(behaviour)

    def _handle_one(self, message):
        """Handle one message, for every kind of actor. Returns True to go on, False once
        the actor should stop, or (asyncio actors only, when the handler returned an
        awaitable) a coroutine that awaits it and then gives that verdict."""
        if isinstance(message, _CONTROL):
            if isinstance(message, Stop):
                return False
            # A frame its mailbox could not decode: nothing to handle, a failure to report.
            self.system._report(self, message, message.error, message.traceback)
            return self.alive
        try:
            result = self.handler(message)
        except Exception as exc:
            return self._failed(message, exc)
        if result is not None and self._awaits and inspect.isawaitable(result):
            return self._await_handler(message, result)
        self.handled += 1
        return self.alive

    async def _await_handler(self, message, awaitable):
        try:
            await awaitable
        except Exception as exc:
            return self._failed(message, exc)
        self.handled += 1
        return self.alive

    def _failed(self, message, exc):
        self.system._report(self, message, exc)
        if self.on_failure == "stop":
            return False
        self.handled += 1
        return self.alive

    def request_stop(self):
        """Stop after the messages already sent."""
        self.mailbox.put(STOP)

    def halt(self):
        """Stop now: the messages not yet taken are dropped."""
        self.alive = False
        self.mailbox.close()

    def _end(self):
        """On the actor's own thread, once, after its last message."""
        self.alive = False
        try:
            self.mailbox.close()
        finally:
            try:
                self.mailbox.close_reader()
            finally:
                self.system._ended(self)
                self._set_done()

    def _on_end(self, fn):
        """Call ``fn()`` when the actor has ended (on its thread; at once, on this one, if
        it already has). Returns a function that cancels the call. Used by the death watch
        to see a local actor's death at once."""
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


class ThreadActor(_Actor):
    """An actor on a thread of its own, taking batches of messages from its mailbox."""

    def __init__(self, system, behaviour, name, mailbox, on_failure):
        super().__init__(system, behaviour, name, mailbox, on_failure)
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
            self._end()

    def join(self, timeout):
        if threading.current_thread() is self.thread:
            return True
        return self.done.wait(timeout)


class AsyncActor(_Actor):
    """An actor that is one asyncio task on ``loop``; its behaviour may be ``async``."""

    _awaits = True

    def __init__(self, system, behaviour, name, loop, on_failure):
        super().__init__(system, behaviour, name, _AsyncMailbox(loop), on_failure)
        self.loop = loop
        self._task = None   # the loop keeps only a weak reference to a task: keep it here

    def start(self):
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.mailbox.loop_thread = threading.get_ident()
            self._task = self.loop.create_task(self._run())
        else:
            self._task = asyncio.run_coroutine_threadsafe(self._run(), self.loop)

    async def _run(self):
        self.mailbox.loop_thread = threading.get_ident()
        _current.set(self.context)
        get = self.mailbox.get
        handle_one = self._handle_one
        try:
            while self.alive:
                go_on = handle_one(await get())
                if go_on is not True and go_on is not False:
                    go_on = await go_on
                if not go_on:
                    break
        finally:
            self._end()

    def join(self, timeout):
        if threading.get_ident() == self.mailbox.loop_thread:
            return self.done.is_set()  # cannot block the loop the actor runs on
        return self.done.wait(timeout)


class _AsyncMailbox(Mailbox):
    """The mailbox of an asyncio actor: an :class:`asyncio.Queue` on its loop. Sends from
    other threads are handed to the loop thread-safely; closing sends :data:`STOP`, so the
    actor's task wakes and ends."""

    def __init__(self, loop):
        self.loop = loop
        self.loop_thread = None
        self._queue = asyncio.Queue()
        self._closed = False

    def _hand(self, message):
        if threading.get_ident() == self.loop_thread:
            self._queue.put_nowait(message)
        else:
            self.loop.call_soon_threadsafe(self._queue.put_nowait, message)

    def put(self, message):
        if not self._closed:
            self._hand(message)

    async def get(self):
        """The next message (the actor's task only)."""
        return await self._queue.get()

    def close(self):
        if not self._closed:
            self._closed = True
            self._hand(STOP)

    @property
    def closed(self):
        """True once :meth:`close` was called."""
        return self._closed
