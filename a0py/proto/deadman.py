"""Deadman on topics: liveness by lock ownership, with tokens.

``Deadman(target)`` takes a topic (a name or :class:`a0py.proto.Topic`: its ``deadman``
arena, ``T.deadman``) or an :class:`a0py.Arena` (the deadman in that arena's header,
as the core's :class:`a0py._core.Deadman`). A process that takes it holds it for as
long as it lives: the lock is a robust process-shared mutex, so when the holder is
killed every other process sees it released at once, with no heartbeat and no timeout.

Tokens. Every take is named by a :class:`DeadmanToken`: the value of the arena's
deadman notify word once it is taken. The word is bumped by every take and every
release and by nothing else while the deadman is held, so a token names one take:
``wait_released(token)`` returns once *that* take is over, even if another process has
taken the deadman again meanwhile (waiting on "released" alone would then wait for the
new holder too). Tokens are their own type, not ints, so ``wait_released(0.5)`` keeps
meaning "wait up to 0.5 s" as on the core class.

Invariants:

* A deadman is held by a *thread*: a robust mutex is released when its owning thread
  ends. :meth:`Deadman.take` holds it in the calling thread (take it from a thread that
  lives as long as the process, the main thread); RPC and PRPC servers
  (:mod:`a0py.proto.reqrep_server`) hold theirs in the keeper thread
  (:func:`keeper_call`), which lives until the process ends.
* Observing never disturbs a holder: ``state()`` reads the lock word without taking it.
* A forked child holds nothing its parent held (robust mutexes belong to the parent's
  threads) and starts without a keeper thread.
"""

import logging
import os
import queue
import threading
import time
from typing import NamedTuple

from .. import _core
from ..errors import A0TimeoutError, ArgumentError, LockError
from .topic import DEADMAN, Topic

__all__ = ["Deadman", "DeadmanState", "DeadmanToken", "keeper_call", "keeper_post"]

_log = logging.getLogger("a0py.deadman")

# wait_released(token) waits on the core's "released" in slices this long, so a take
# released and taken again by someone else within one slice is still seen as released.
_RELEASE_SLICE_S = 0.2


class DeadmanToken:
    """Names one take of one deadman (from ``take()``, ``wait_taken()`` or
    ``state().token``); equal tokens name the same take."""

    __slots__ = ("arena_id", "value")

    def __init__(self, arena_id, value):
        self.arena_id = arena_id
        self.value = value

    def __eq__(self, other):
        return (isinstance(other, DeadmanToken) and other.value == self.value
                and other.arena_id == self.arena_id)

    def __hash__(self):
        return hash((self.arena_id, self.value))

    def __repr__(self):
        return f"DeadmanToken({self.value})"


class DeadmanState(NamedTuple):
    """A snapshot of a deadman: whether a live thread holds it, whether the calling
    thread does, the holder's pid, and the holder's take token (None when free)."""

    is_taken: bool
    is_mine: bool
    owner_pid: int | None
    token: DeadmanToken | None


def _check_timeout(timeout, what):
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout != timeout:
        raise ArgumentError(f"{what}: timeout must be a number of seconds or None, not {timeout!r}")
    if timeout < 0:
        raise ArgumentError(f"{what}: timeout must be >= 0 seconds, not {timeout!r}")
    return float(timeout)


class Deadman:
    """The deadman of a topic (its ``T.deadman`` arena) or of an :class:`a0py.Arena`.

    ``take(timeout=None)`` waits until the deadman is free (or its holder dies), takes
    it and returns the take's token; ``try_take()`` takes it only if free and returns
    whether it did; ``release()`` gives it back; ``wait_taken(timeout=None)`` waits
    until someone holds it and returns that take's token; ``wait_released(token=None,
    timeout=None)`` waits until the take `token` (default: the current one) is over;
    ``state()`` is a :class:`DeadmanState`. Also, as the core class: ``is_taken()``,
    ``is_mine``, ``owner_pid``, ``with dm:`` (take, then release).

    The calling thread holds what it takes: take it from a thread that lives as long
    as the process. Blocking calls are interruptible (Ctrl-C).

    Raises ArgumentError for a bad topic or target, and the arena errors of
    :func:`a0py.proto.topic.topic_arena` when the topic's arena cannot be made."""

    __slots__ = ("_core", "_where", "arena", "topic")

    def __init__(self, target):
        if isinstance(target, _core.Arena):
            self.topic = None
            self.arena = target
        elif isinstance(target, (str, Topic)):
            self.topic = Topic.of(target)
            self.arena = self.topic.arena(DEADMAN)
        else:
            raise ArgumentError(f"Deadman takes a topic name, an a0py.proto.Topic or an a0py.Arena, "
                                f"not {type(target).__name__} ({target!r})")
        self._core = _core.Deadman(self.arena)
        self._where = self.arena.name or f"heap@{id(self.arena):x}"

    def _label(self):
        if self.topic is not None:
            return f"topic {self.topic.name!r}"
        return repr(self.arena)

    def _notify(self):
        return self.arena.header()["deadman_notify"]

    def _token(self, value):
        return DeadmanToken(self._where, value)

    def state(self):
        """A consistent :class:`DeadmanState` (lock word and token read together)."""
        while True:
            before = self._notify()
            taken, mine, pid = self._core._state()
            if self._notify() == before:
                if not taken:
                    return DeadmanState(False, False, None, None)
                return DeadmanState(True, mine, pid or None, self._token(before))

    def take(self, timeout=None):
        """Takes the deadman, waiting while another live thread holds it; returns this
        take's token. A0TimeoutError at the timeout; LockError if this thread holds it
        already; ArgumentError for a bad timeout."""
        _check_timeout(timeout, f"taking the deadman of {self._label()}")
        self._core.take(timeout)
        return self._token(self._notify())

    def try_take(self):
        """Takes the deadman if it is free (or its holder died); returns whether it did.
        The token is then ``state().token``."""
        return self._core.try_take()

    def release(self):
        """Releases the deadman. LockError if the calling thread does not hold it."""
        self._core.release()

    def wait_taken(self, timeout=None):
        """Waits until a live thread holds the deadman; returns that take's token.
        A0TimeoutError at the timeout; ArgumentError for a bad timeout."""
        timeout = _check_timeout(timeout, f"waiting for the deadman of {self._label()}")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            st = self.state()
            if st.is_taken:
                return st.token
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                self._core.wait_taken(left)
            except A0TimeoutError:
                raise A0TimeoutError(f"{self._label()}: nobody took the deadman within {timeout} s") from None

    def wait_released(self, token=None, timeout=None):
        """Waits until the take named by `token` is over (released, or its holder died);
        with no token, the take current now (returns at once if the deadman is free).
        A number given in place of the token is the timeout (the core class's
        ``wait_released(timeout)``). A0TimeoutError at the timeout; LockError if the
        calling thread holds that take; ArgumentError for a bad token or timeout, or a
        token of another deadman."""
        if isinstance(token, (int, float)) and not isinstance(token, bool):
            if timeout is not None:
                raise ArgumentError(f"wait_released({token!r}, timeout={timeout!r}): the first argument "
                                    "must be a DeadmanToken when a timeout is given")
            token, timeout = None, token
        if token is not None:
            if not isinstance(token, DeadmanToken):
                raise ArgumentError(f"token must be a DeadmanToken from take(), wait_taken() or state(), "
                                    f"not {token!r}")
            if token.arena_id != self._where:
                raise ArgumentError(f"{token!r} names a take of another deadman ({token.arena_id}), "
                                    f"not of {self._label()}")
        timeout = _check_timeout(timeout, f"waiting for the deadman of {self._label()} to be released")
        deadline = None if timeout is None else time.monotonic() + timeout
        if token is None:
            token = self.state().token
            if token is None:
                return
        while True:
            st = self.state()
            if not st.is_taken or st.token != token:
                return
            if st.is_mine:
                raise LockError(f"{self._label()}: this thread holds the deadman; waiting for its "
                                "release would never end")
            slice_s = _RELEASE_SLICE_S
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise A0TimeoutError(f"{self._label()}: the deadman (held by pid {st.owner_pid}) "
                                         f"was not released within {timeout} s")
                slice_s = min(slice_s, left)
            try:
                self._core.wait_released(slice_s)
            except A0TimeoutError:
                pass

    def is_taken(self):
        """Whether a live thread (this one included) holds the deadman."""
        return self._core.is_taken()

    @property
    def is_mine(self):
        """Whether the calling thread holds the deadman."""
        return self._core.is_mine

    @property
    def owner_pid(self):
        """The pid of the live holder, or None."""
        return self._core.owner_pid

    def __enter__(self):
        self.take()
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __repr__(self):
        st = self.state()
        held = f"held by pid {st.owner_pid}" if st.is_taken else "free"
        return f"<a0py.Deadman {self._label()} {held}>"


class _Keeper:
    """A daemon thread that runs small calls for others, so that what it takes (robust
    locks) stays held until released or the process ends, whatever thread asked. Jobs
    come through a SimpleQueue, whose put() is safe even from a finalizer that runs
    while its thread holds some other lock."""

    def __init__(self):
        self.jobs = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name="a0py-deadman-keeper", daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            fn, box, done = self.jobs.get()
            try:
                result = (True, fn())
            except BaseException as e:  # handed back to the caller
                result = (False, e)
                if done is None:
                    _log.exception("a0py keeper: a posted call raised")
            if done is not None:
                box.append(result)
                done.set()

    def call(self, fn):
        if threading.current_thread() is self.thread:
            return fn()
        box, done = [], threading.Event()
        self.jobs.put((fn, box, done))
        done.wait()
        ok, value = box[0]
        if ok:
            return value
        raise value

    def post(self, fn):
        self.jobs.put((fn, None, None))


_keeper = None
_keeper_lock = threading.Lock()


def start_keeper():
    """The keeper thread's handle, starting it if needed (so keeper_post works)."""
    global _keeper
    keeper = _keeper
    if keeper is None:
        with _keeper_lock:
            if _keeper is None:
                _keeper = _Keeper()
            keeper = _keeper
    return keeper


def keeper_call(fn):
    """Runs ``fn()`` on this process's keeper thread (started on first use; it lives
    until the process ends) and returns its result or raises its exception. For taking
    and releasing deadmen that must outlive the thread that asked."""
    return start_keeper().call(fn)


def keeper_post(fn):
    """Has ``fn()`` run on the keeper thread soon, without waiting (an exception is
    logged). Safe from a finalizer (``__del__``) once the keeper is running: it only
    puts on a SimpleQueue. Returns whether it was posted (False: no keeper yet)."""
    keeper = _keeper
    if keeper is None:
        return False
    keeper.post(fn)
    return True


def _reset_after_fork():
    global _keeper, _keeper_lock
    _keeper = None
    _keeper_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)
