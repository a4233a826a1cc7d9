"""The death watch: be told at once when an actor dies, with a bounded number of threads.

Used by the gather service (a recipient that dies mid-gather) and by the
:class:`~a0py.actor.Registrar` (an actor that dies is dropped from its topics). Each user
owns one :class:`DeathWatch`; inside it there is one watch per actor, shared by every
*subscriber* that waits for that actor (a gather's correlation id, a registration).

How an actor is followed depends on its ref (:attr:`ActorRef._watch_key`):

* ``"blocking"`` (an arena actor, typically in another process): a daemon thread blocked
  on the actor's robust lock (``ref.wait_dead``, i.e. ``Deadman.wait_released``), which
  returns the moment its holder releases it or its process exits or is killed;
* ``"callback"`` (an actor of this process): a callback its thread runs when it ends (no
  thread);
* anything else, or a blocking watch past the cap on threads: not watched; the caller
  relies on polling ``is_alive()``.

Invariants:

* at most one watcher thread per actor and at most ``limit`` (default
  :data:`MAX_WATCHERS`) per :class:`DeathWatch`;
* a watcher thread blocks in slices of ``slice_s`` seconds (each thread's stretched by a
  random factor up to 1.5, so watchers started together do not wake together); between
  two it ends if no subscriber waits for its actor any more or the watch was closed. So it
  outlives its last subscriber by less than 1.5 slices, and a subscriber arriving meanwhile
  reuses it;
* ``notify`` is never called with the watch's lock held.
"""

import logging
import random
import threading
import time
import weakref

__all__ = ["MAX_WATCHERS", "WATCH_SLICE", "DeathWatch", "close_death_watches"]

log = logging.getLogger("a0py.actor")

WATCH_SLICE = 0.5      # how long a watcher thread blocks before checking it is still needed
MAX_WATCHERS = 256     # watcher threads per DeathWatch; past it: the caller's liveness poll


class _Watch:
    __slots__ = ("cancel", "key", "name", "ref", "subscribers", "thread")

    def __init__(self, key, name, ref):
        self.key = key
        self.name = name
        self.ref = ref
        self.subscribers = set()
        self.thread = None
        self.cancel = None


_death_watches = weakref.WeakSet()


class DeathWatch:
    """Calls ``notify(key, name, subscribers)`` once when a watched actor dies.

    ``key`` is what :meth:`watch` returned for it, ``name`` the actor's name and
    ``subscribers`` a tuple of the subscribers still waiting for it. ``notify`` runs on a
    watcher thread (or the dying actor's) and must not block. Thread-safe.
    """

    def __init__(self, notify, slice_s=WATCH_SLICE, limit=MAX_WATCHERS):
        self._notify = notify
        self._slice = slice_s
        self._limit = limit
        self._lock = threading.Lock()
        self._watches = {}       # key -> _Watch
        self._threads = 0        # watcher threads running
        self._closed = False
        _death_watches.add(self)

    @property
    def threads(self):
        """How many watcher threads are running."""
        with self._lock:
            return self._threads

    def watch(self, ref, subscriber):
        """Watch ``ref`` for ``subscriber`` (any hashable); returns the key to
        :meth:`unwatch` with, or None if ``ref`` cannot be watched (left to the caller's
        poll). ``notify`` may run at once, on this thread, if the actor already ended."""
        key = getattr(ref, "_watch_key", None)
        if key is None:
            return None
        start_thread = run_now = False
        with self._lock:
            if self._closed:
                return None
            watch = self._watches.get(key)
            if watch is None:
                if key[0] == "blocking":
                    if self._threads >= self._limit:
                        return None
                    self._threads += 1
                    start_thread = True
                watch = _Watch(key, ref.name, ref)
                self._watches[key] = watch
                run_now = True
            watch.subscribers.add(subscriber)
        if start_thread:
            watch.thread = threading.Thread(target=self._run, args=(watch,), daemon=True,
                                             name=f"a0py-death-watch-{ref.name}")
            try:
                watch.thread.start()
            except BaseException:
                with self._lock:
                    self._threads -= 1
                    self._watches.pop(key, None)
                raise
        elif run_now:
            cancel = ref._on_end(lambda: self._died(watch))
            with self._lock:
                watch.cancel = cancel if self._watches.get(key) is watch else None
        return key

    def unwatch(self, key, subscriber):
        """``subscriber`` no longer waits for the actor watched under ``key``."""
        cancel = None
        with self._lock:
            watch = self._watches.get(key)
            if watch is None:
                return
            watch.subscribers.discard(subscriber)
            if not watch.subscribers and watch.thread is None:
                del self._watches[key]
                cancel, watch.cancel = watch.cancel, None
        if cancel is not None:
            cancel()

    def _died(self, watch):
        with self._lock:
            if self._watches.get(watch.key) is not watch:
                return
            del self._watches[watch.key]
            watch.cancel = None
            subscribers = tuple(watch.subscribers)
        if subscribers:
            self._notify(watch.key, watch.name, subscribers)

    def _run(self, watch):
        # Watchers started together would otherwise wake together, a burst of threads
        # taking the GIL at once: spread them over half a slice.
        slice_s = self._slice * (1.0 + 0.5 * random.random())
        try:
            while True:
                try:
                    dead = watch.ref.wait_dead(slice_s)
                except Exception:
                    # Not a verdict (e.g. this process closed its mapping): leave the actor
                    # to the poll.
                    log.debug("death watch of %s failed", watch.name, exc_info=True)
                    with self._lock:
                        if self._watches.get(watch.key) is watch:
                            del self._watches[watch.key]
                        return
                if dead:
                    self._died(watch)
                    return
                with self._lock:
                    if self._closed or not watch.subscribers:
                        if self._watches.get(watch.key) is watch:
                            del self._watches[watch.key]
                        return
        finally:
            with self._lock:
                self._threads -= 1

    def close(self, join=False, timeout=None):
        """Stop watching: callbacks are cancelled and watcher threads end within one slice
        (and a half: the jitter). With ``join``, wait for them, at most ``timeout`` seconds
        (default two slices): needed only before this process unmaps the arenas they block
        on (:func:`~a0py.actor.arena.close_cached_arenas` does it). A blocked watcher keeps
        its arena referenced, so it is never unmapped by garbage collection or interpreter
        finalization under it. Idempotent; nothing can be watched afterwards."""
        with self._lock:
            self._closed = True
            watches = list(self._watches.values())
            self._watches.clear()
        threads = []
        for watch in watches:
            if watch.cancel is not None:
                watch.cancel()
            if watch.thread is not None:
                threads.append(watch.thread)
        if not join:
            return
        deadline = time.monotonic() + (2 * self._slice if timeout is None else timeout)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))


def close_death_watches():
    """Close every death watch of this process and wait for its watcher threads: before
    the arena mappings they block on are unmapped."""
    for death_watch in list(_death_watches):
        death_watch.close(join=True)
