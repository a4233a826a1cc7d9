"""The dispatcher: one thread serves every subscriber of the process.

``watch(arena, fn)`` asks for ``fn()`` to be called on a dispatcher thread whenever the
arena changes (a commit, an eviction, a clear), and once right away. A dispatcher thread
sleeps on all its arenas at once (:class:`a0py._core.MultiWait`: Linux ``futex_waitv``,
or its polling fallback), so 200 subscribers on 50 topics cost one thread, asleep while
nothing is written. A thread serves up to 127 arenas; more arenas start more threads.

Invariants:

* **No lost change.** Each round takes a snapshot of every arena's notify word
  (``changed()``), then calls the functions of the arenas that moved, then sleeps only
  while every word still equals the snapshot. A commit after the snapshot ends the sleep.
* **No user code under a lock.** Functions run with no arena lock and no dispatcher lock
  held; subscribers copy packets out under the arena lock, release it, then call back.
* **Fairness.** A function reads a bounded batch and returns True if more may be
  waiting; its arena is then served again next round, after the others, without sleeping.
* **Cancel is final.** After ``Watch.cancel()`` returns, the function is not running
  (unless cancel was called from inside it) and never runs again. In a forked child a
  parent's watch is cancelled at once: nothing runs it there.
* **Exit and fork.** At interpreter exit the threads are stopped and joined (briefly)
  before modules are torn down. A forked child has no dispatcher threads: watches made
  in the parent are inert there, and the child starts afresh.
"""

import atexit
import logging
import os
import threading

from .. import _core

__all__ = ["Watch", "dispatcher_threads", "shutdown", "watch"]

_log = logging.getLogger("a0py.pubsub")

_EXIT_JOIN_S = 2.0


class Watch:
    """A registration made by :func:`watch`; ``cancel()`` ends it."""

    __slots__ = ("_group", "active", "arena", "fn")

    def __init__(self, arena, fn, group):
        self.arena = arena
        self.fn = fn
        self._group = group
        self.active = True

    def cancel(self):
        """Stops calling the function; waits for a call in progress to finish (unless
        called from that call). Idempotent."""
        group = self._group
        with _cond:
            if not self.active:
                return
            self.active = False
            group.remove(self)
            if not group.watches:
                group.stopping = True
                if group in _groups:
                    _groups.remove(group)
            group.mw.wake()
            # In a forked child the group is a copy whose thread never runs: its
            # ``current`` stays whatever the parent's thread was calling at the fork.
            if threading.current_thread() is not group.thread and group.pid == os.getpid():
                while group.current is self:
                    _cond.wait()


class _Group:
    """One dispatcher thread and the arenas it sleeps on."""

    def __init__(self, mode=None):
        self.mw = _core.MultiWait(mode)
        self.watches = {}   # id(arena) -> [Watch]
        self.arenas = {}    # id(arena) -> Arena
        self.view = {}      # what the thread serves: id(arena) -> tuple of Watch
        self.new = []       # watches whose first call is due
        self.dirty = True
        self.stopping = False
        self.current = None
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._run, name="a0py-dispatcher", daemon=True)

    def has(self, arena):
        return id(arena) in self.arenas

    def room(self):
        return len(self.arenas) < self.mw.capacity

    def add(self, w):
        key = id(w.arena)
        self.arenas[key] = w.arena
        self.watches.setdefault(key, []).append(w)
        self.new.append(w)
        self.dirty = True

    def remove(self, w):
        key = id(w.arena)
        ws = self.watches.get(key)
        if ws is None or w not in ws:
            return
        ws.remove(w)
        if not ws:
            del self.watches[key]
            del self.arenas[key]
        self.dirty = True

    def _sync(self):
        # Under _cond: what changed since the last round becomes visible to the thread.
        self.mw.set_arenas(list(self.arenas.values()))
        self.view = {key: tuple(ws) for key, ws in self.watches.items()}
        self.dirty = False

    def _run(self):
        mw = self.mw
        view = {}
        new = ()
        again = []
        while True:
            # Flags read without the lock (the GIL makes each read whole); the lock is
            # taken only when another thread changed something.
            if self.stopping or self.dirty or self.new:
                with _cond:
                    if self.stopping:
                        return
                    if self.dirty:
                        self._sync()
                    view = self.view
                    new, self.new = self.new, []
            changed = mw.changed()
            if len(changed) == 1 and not again and not new:
                calls = view.get(id(changed[0]), ())
            else:
                ready = [id(a) for a in changed]
                seen = set(ready)
                ready += [key for key in again if key not in seen]
                calls = [w for key in ready for w in view.get(key, ())]
                if new:
                    called = set(map(id, calls))
                    calls += [w for w in new if id(w) not in called]
                    new = ()
            again = []
            for w in calls:
                if not w.active:
                    continue
                self.current = w
                try:
                    if w.fn():
                        again.append(id(w.arena))
                except BaseException:  # a dispatcher must outlive any subscriber's bug
                    _log.exception("a0py dispatcher: a subscriber function raised")
                finally:
                    self.current = None
                    if not w.active:  # cancelled meanwhile: its canceller may be waiting
                        with _cond:
                            _cond.notify_all()
            if not again:
                mw.wait()


_cond = threading.Condition(threading.Lock())
_groups = []
_atexit_registered = False


def watch(arena, fn, *, mode=None):
    """Calls ``fn()`` on a dispatcher thread now and after every change of `arena`,
    until the returned :class:`Watch` is cancelled. `fn` returns True when it left work
    undone (it is then called again soon, after the other arenas' functions). `mode`
    ('waitv' or 'poll') is for tests: it picks a dispatcher of that kind."""
    global _atexit_registered
    with _cond:
        if not _atexit_registered:
            atexit.register(shutdown)
            _atexit_registered = True
        group = None
        for g in _groups:
            if (mode is None or g.mw.mode == mode) and g.has(arena):
                group = g
                break
        if group is None:
            for g in _groups:
                if (mode is None or g.mw.mode == mode) and g.room():
                    group = g
                    break
        start = group is None
        if start:
            group = _Group(mode)
            _groups.append(group)
        w = Watch(arena, fn, group)
        group.add(w)
        if start:
            group.thread.start()
        else:
            group.mw.wake()
    return w


def dispatcher_threads():
    """The dispatcher threads running now (for tests and tools)."""
    with _cond:
        return [g.thread for g in _groups]


def shutdown(timeout=_EXIT_JOIN_S):
    """Stops every dispatcher thread (their watches become inert) and waits up to
    `timeout` seconds for each to finish its current call. Run at interpreter exit."""
    with _cond:
        groups = list(_groups)
        _groups.clear()
        for g in groups:
            g.stopping = True
            for ws in g.watches.values():
                for w in ws:
                    w.active = False
            g.mw.wake()
    me = threading.current_thread()
    for g in groups:
        if g.thread is not me and g.thread.is_alive():
            g.thread.join(timeout)


def _reset_after_fork():
    global _cond, _groups
    _cond = threading.Condition(threading.Lock())
    _groups = []


os.register_at_fork(after_in_child=_reset_after_fork)
