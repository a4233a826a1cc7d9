"""The arenas this process has open: one mapping per arena, one Transport per thread.

Topics, actor mailboxes and the broker's request arenas all open their arenas here, so a
process maps each arena once however many publishers, refs or clients use it.

An arena is cached under a *key*: a tuple whose first item says whose it is (``"topic"``,
``"actor"``, ``"broker"``) and whose other items name it. Whoever asks first for a key
passes an opener (a function and its arguments) that maps the arena; later callers get
the same mapping. The opener runs under the cache's lock, so two threads asking at once
open it once.

Invariants:

* **One mapping per arena per process**, shared by every thread. It stays mapped until
  :func:`close` (for a kind of key, or all), until :func:`forget` drops it from the
  cache (its users keep it), until the last :func:`hold` on it is released, or until
  process exit. An arena found closed (someone closed that mapping) is mapped again by
  the next caller.
* **One Transport per thread per arena** (:func:`transport`): a Transport holds a cursor
  and lock state, so threads never share one.
* **Fork safety.** A forked child starts with an empty cache and a fresh lock: the
  parent's lock may have been held by a thread that does not exist in the child, and the
  parent's transports may have been mid-lock.
"""

import os
import threading

from .. import _core
from ..errors import A0Error

__all__ = ["arena", "cached_transport", "close", "deadman", "forget", "hold", "release", "transport"]


class _Cache(threading.local):
    def __init__(self):
        self.transports = {}   # key -> this thread's Transport


_lock = threading.Lock()
_arenas = {}        # key -> Arena
_holds = {}         # key -> how many hold() calls are not released yet
_deadmen = {}       # key -> Deadman of the arena mapped now (to watch, not to take)
_local = _Cache()


def _reset_after_fork():
    global _lock, _local
    _lock = threading.Lock()
    _arenas.clear()
    _holds.clear()
    _deadmen.clear()
    _local = _Cache()


os.register_at_fork(after_in_child=_reset_after_fork)


def _mapped(key, open_arena, args):
    """The arena of `key`, mapped by ``open_arena(*args)`` if it is not mapped (or was
    closed). Called with the cache's lock held."""
    found = _arenas.get(key)
    if found is None or found.closed:
        found = open_arena(*args)
        _arenas[key] = found
        _deadmen.pop(key, None)
    return found


def arena(key, open_arena, *args):
    """The arena cached under `key`; if there is none (or it was closed), the one
    ``open_arena(*args)`` returns, cached from now on. Raises what the opener raises."""
    found = _arenas.get(key)
    if found is not None and not found.closed:
        return found
    with _lock:
        return _mapped(key, open_arena, args)


def hold(key, open_arena, *args):
    """:func:`arena`, and one more hold on it: an arena that is held stays mapped until
    every hold is released (:func:`release`), then it is closed. For users that come and
    go in a long-lived process (a broker client), so that the mapping goes with the last
    of them."""
    with _lock:
        found = _mapped(key, open_arena, args)
        _holds[key] = _holds.get(key, 0) + 1
    return found


def release(key):
    """Gives back one :func:`hold` on `key`; the last one closes the arena and drops it
    from the cache (errors closing it, such as a lock still held by this process, leave
    it to process exit). A key that is not held is ignored."""
    with _lock:
        count = _holds.get(key, 0) - 1
        if count > 0:
            _holds[key] = count
            return
        _holds.pop(key, None)
        if count < 0:
            return
        found = _arenas.pop(key, None)
        _deadmen.pop(key, None)
    _local.transports.pop(key, None)
    if found is not None:
        try:
            found.close()
        except A0Error:
            pass


def transport(key, open_arena, *args):
    """The calling thread's :class:`a0py.Transport` on the arena of `key` (see
    :func:`arena`), made on first use and kept for this thread."""
    tr = _local.transports.get(key)
    if tr is None or tr.arena.closed:
        tr = _core.Transport(arena(key, open_arena, *args))
        _local.transports[key] = tr
    return tr


def cached_transport(key):
    """The calling thread's Transport on the arena of `key` if it has one, else None,
    without checking that its arena is still open: for a hot path that retries through
    :func:`transport` when the Transport says it is closed."""
    return _local.transports.get(key)


def deadman(key, open_arena, *args):
    """A :class:`a0py.Deadman` of the arena of `key`, shared by the threads of this
    process, for watching its holder (``is_taken``, ``owner_pid``, the waits); a thread
    that takes a deadman makes its own."""
    found = _deadmen.get(key)
    if found is not None and not found.arena.closed:
        return found
    with _lock:
        mapped = _mapped(key, open_arena, args)
        found = _deadmen.get(key)
        if found is None or found.arena is not mapped:
            found = _deadmen[key] = _core.Deadman(mapped)
    return found


def forget(key):
    """Drops `key` from the cache without closing its arena (whoever uses it keeps it);
    returns the arena, or None. The next caller maps it afresh."""
    with _lock:
        found = _arenas.pop(key, None)
        _holds.pop(key, None)
        _deadmen.pop(key, None)
    _local.transports.pop(key, None)
    return found


def close(kind=None):
    """Unmaps every cached arena whose key starts with `kind` (None: every one), held or
    not. Only once nothing of this process uses them any more: a node on its way out, or
    a test. Errors closing one (a lock still held) leave it to process exit."""
    with _lock:
        keys = [k for k in _arenas if kind is None or k[0] == kind]
        closing = [_arenas.pop(k) for k in keys]
        for k in keys:
            _holds.pop(k, None)
            _deadmen.pop(k, None)
    for k in keys:
        _local.transports.pop(k, None)
    for found in closing:
        try:
            found.close()
        except A0Error:
            pass
