"""Cross-process mailboxes: one shared-memory arena per actor, addressable by name.

The actor ``name`` owns the POSIX shared-memory arena ``a0py-actor:<name>``. Any process
sends to it with ``ArenaRef(name).send(message)``: the message is pickled into one frame.
The actor's own thread is the only reader.

The name is outside every topic root: a topic arena in shared memory is
``/<prefix>.<topic>.<protocol>``, and a prefix holds no ``:``, so a name with a ``:``
before its first ``.`` is no root's topic arena. ``a0py ls``, discovery and the view
never take a mailbox for a topic, and no topic's arena is ever an actor's mailbox
(a name under the default root's prefix, such as ``a0py.actor.<name>``, would be topic
``actor``'s arena of protocol ``<name>``: actor ``pubsub``'s mailbox, that topic's pubsub).

Invariants:

* **No message is evicted unread.** The mailbox is a backpressured queue on the arena
  (:class:`a0py.proto.queue.ArenaQueue`), and every message goes through one send path,
  :func:`_send`, which puts its frame only where nothing would be evicted, else sleeps
  on the arena (lock released) until the reader makes room. The reader makes room by
  dropping the frames it has read: :meth:`ArenaMailbox.take` copies a batch out, then
  gives its room back (drops through the last seq it read) under one lock, after every
  batch, so nothing unread is ever removed and no sender waits for nothing. The
  mailbox is therefore a bounded queue: a full one makes senders wait (backpressure),
  up to their send timeout (:class:`MailboxFullError`). Sending to a full mailbox whose
  actor is dead drops the message (like any send to a dead actor). Only the close marker
  is written with an evicting write: closing drops what was not taken anyway.
* **Liveness.** The actor's thread takes the arena's :class:`a0py.Deadman` before its
  first message and releases it after its last. While it holds it the actor is alive;
  if its process exits or is killed, the kernel releases the robust lock at once, so
  :meth:`ArenaRef.is_alive` turns false immediately (no heartbeat, no timeout).
  A second live reader of the same name is refused (:class:`ActorNameTakenError`).
* **One Transport per thread.** A transport holds a cursor and the lock state, so each
  thread of a process sends through its own; mapped arenas are shared by the threads of
  a process. Both come from the process's arena cache (:mod:`a0py.proto.arena_cache`,
  emptied in a forked child), imported on first use.
* Messages already in the arena when the actor starts are delivered (a parent may send
  before the child process is up). Stale close markers of an earlier reader are ignored.
"""

import os
import pickle
import threading
import time

import a0py  # its core names (Arena, Transport, Deadman) load on first use

from ..errors import A0Error, A0TimeoutError, ArenaNotFoundError, FrameTooLargeError
from .errors import (
    ActorConfigError,
    ActorNameTakenError,
    ActorNotFoundError,
    MailboxFullError,
    MessageTooLargeError,
)
from .mailbox import Mailbox, Undecodable
from .ref import ActorRef
from .watch import close_death_watches

__all__ = ["ARENA_PREFIX", "DEFAULT_ARENA_SIZE", "ArenaMailbox", "ArenaRef", "arena_name",
           "list_mailboxes", "unlink_mailbox"]

ARENA_PREFIX = "a0py-actor:"
DEFAULT_ARENA_SIZE = 1 << 20
DEFAULT_SEND_TIMEOUT = 10.0
_SHM_DIR = "/dev/shm"
_WAIT_SLICE = 0.05     # how often a blocked sender re-checks the reader's liveness
_READER_SLICE = 1.0    # how often an idle reader re-checks that it was not closed


def arena_name(name):
    """The shared-memory name of actor ``name``'s mailbox. Raises
    :class:`ActorConfigError` for a name that is empty, has a ``/`` or is too long."""
    if not isinstance(name, str) or not name or "/" in name or "\0" in name:
        raise ActorConfigError(f"an arena actor name must be a non-empty str without '/', got {name!r}")
    full = ARENA_PREFIX + name
    if len(full) > 250:
        raise ActorConfigError(f"actor name too long for a shared-memory name: {name!r}")
    return full


def _key(name):
    return ("actor", name)


_arena_cache = None


def _cache():
    """The process's arena cache (:mod:`a0py.proto.arena_cache`), imported on first use:
    actors that stay in one process need nothing of the protocols."""
    global _arena_cache
    if _arena_cache is None:
        from ..proto import arena_cache

        _arena_cache = arena_cache
    return _arena_cache


def _open(name, size):
    try:
        return a0py.Arena.shm(arena_name(name), size)
    except ArenaNotFoundError:
        raise ActorNotFoundError(f"no mailbox for actor {name!r} "
                                 f"(shared memory {arena_name(name)!r} does not exist)") from None


def _arena(name, size=None):
    """The mapped arena of actor ``name`` (created with ``size`` if given and missing),
    from the process's arena cache."""
    return _cache().arena(_key(name), _open, name, size)


def _forget(name):
    _cache().forget(_key(name))


def _deadman(name):
    return _cache().deadman(_key(name), _open, name, None)


def _queue(name):
    """The backpressured queue (:class:`a0py.proto.queue.ArenaQueue`) that is actor
    ``name``'s mailbox."""
    from ..proto.queue import ArenaQueue

    return ArenaQueue(_key(name), _open, name, None, name=f"the mailbox of actor {name!r}")


class _CloseMarker:
    __slots__ = ("token",)

    def __init__(self, token):
        self.token = token

    def __reduce__(self):
        return (_CloseMarker, (self.token,))


def _send(queue, message, timeout):
    """The one send path of arena mailboxes (:meth:`ArenaRef.send`,
    :meth:`ArenaMailbox.put`): pickle ``message`` into one frame of the mailbox
    ``queue`` without evicting anything (:meth:`a0py.proto.queue.ArenaQueue.put`: while
    it is full, wait in slices, checking between two that its reader is alive). Returns
    True once written, False if the mailbox is full and its reader dead (the message is
    dropped). Raises :class:`MailboxFullError` after ``timeout`` seconds (None: never),
    :class:`MessageTooLargeError`, :class:`ActorNotFoundError` (no such mailbox), and
    pickling errors."""
    data = pickle.dumps(message, protocol=5)
    try:
        return queue.put(data, timeout)
    except FrameTooLargeError:
        raise MessageTooLargeError(
            f"a message of {len(data)} bytes (pickled) does not fit {queue.name}: at most "
            f"{queue.max_frame_size} bytes per message; spawn it with a larger "
            "arena_size") from None
    except A0TimeoutError:
        raise MailboxFullError(f"{queue.name} stayed full for {timeout}s") from None


class ArenaRef(ActorRef):
    """A ref to the arena actor ``name``, in this process or any other.

    ``send_timeout``: how long :meth:`send` waits for room in a full mailbox (None: for
    ever). Refs pickle as their name, so they can be put in messages (e.g. a reply-to).

    Raises :class:`ActorConfigError` for a bad name or timeout.
    """

    __slots__ = ("_name", "_queue", "send_timeout")

    def __init__(self, name, send_timeout=DEFAULT_SEND_TIMEOUT):
        arena_name(name)
        if send_timeout is not None and (not isinstance(send_timeout, (int, float)) or send_timeout < 0):
            raise ActorConfigError(f"send_timeout must be a number >= 0 or None, got {send_timeout!r}")
        self._name = name
        self._queue = None
        self.send_timeout = send_timeout

    @property
    def name(self):
        return self._name

    @property
    def address(self):
        """The actor's name, which is also its address."""
        return self._name

    @property
    def _watch_key(self):
        return ("blocking", self._name)

    def send(self, message, timeout=...):
        """Pickle ``message`` into the actor's mailbox. Returns True if written, False if
        the mailbox was full and its actor is dead (the message is dropped). ``timeout``
        overrides :attr:`send_timeout` for this call.

        Raises :class:`ActorNotFoundError` (no mailbox of that name),
        :class:`MailboxFullError` (still full at the timeout), :class:`MessageTooLargeError`,
        :class:`pickle.PicklingError` or :class:`TypeError` for an unpicklable message."""
        queue = self._queue
        if queue is None:
            queue = self._queue = _queue(self._name)
        return _send(queue, message, self.send_timeout if timeout is ... else timeout)

    def is_alive(self):
        """Whether a live thread holds the actor's liveness lock (False if its mailbox does
        not exist)."""
        try:
            return _deadman(self._name).is_taken()
        except (ActorNotFoundError, A0Error):
            return False

    @property
    def owner_pid(self):
        """The pid of the process running the actor, or None if it is not alive."""
        try:
            return _deadman(self._name).owner_pid
        except (ActorNotFoundError, A0Error):
            return None

    def wait_alive(self, timeout=None):
        """Block until the actor is alive: until its mailbox exists (it may not have been
        created yet; checked every few milliseconds, at most every ``_WAIT_SLICE``
        seconds) and a live thread reads it (a blocking wait on its liveness lock). True
        if it is, False after ``timeout`` seconds (None: wait for ever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.001
        while True:
            try:
                deadman = _deadman(self._name)
                break
            except ActorNotFoundError:
                if deadline is None:
                    time.sleep(pause)
                else:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    time.sleep(min(pause, left))
                pause = min(2 * pause, _WAIT_SLICE)
        try:
            deadman.wait_taken(None if deadline is None else max(0.0, deadline - time.monotonic()))
            return True
        except A0TimeoutError:
            return False

    def wait_dead(self, timeout=None):
        """Block until the actor is dead (released its liveness lock, or its process
        died); True if dead, False at the timeout. A missing mailbox counts as dead."""
        try:
            _deadman(self._name).wait_released(timeout)
            return True
        except A0TimeoutError:
            return False
        except ActorNotFoundError:
            return True

    def __eq__(self, other):
        if isinstance(other, ArenaRef):
            return other._name == self._name
        return getattr(other, "address", None) == self._name

    def __hash__(self):
        return hash(self._name)

    def __reduce__(self):
        return (ArenaRef, (self._name, self.send_timeout))


class ArenaMailbox(Mailbox):
    """The mailbox of arena actor ``name``: the shared-memory arena ``a0py-actor:<name>``.

    ``create=True`` creates it (``size`` bytes, default 1 MiB) or attaches to an existing
    one; ``create=False`` attaches only. ``batch`` bounds the messages one :meth:`take`
    returns. The creator calls :meth:`release` to unlink it.

    :attr:`undecodable` counts the frames that did not unpickle (each was also returned by
    :meth:`take` as an :class:`~a0py.actor.mailbox.Undecodable`, which its actor reports
    to the supervisor).

    Raises :class:`ActorConfigError` (bad name, size or batch), :class:`ActorNotFoundError`
    (``create=False`` and it does not exist), and :class:`a0py.A0Error` from the arena.
    """

    def __init__(self, name, size=None, *, create=True, batch=1024):
        if size is None:
            size = DEFAULT_ARENA_SIZE
        if not isinstance(size, int) or size < 4096:
            raise ActorConfigError(f"an arena mailbox needs size >= 4096 bytes, got {size!r}")
        if not isinstance(batch, int) or batch < 1:
            raise ActorConfigError(f"batch must be an int >= 1, got {batch!r}")
        self.address = name
        self._name = name
        self._arena = _arena(name, size if create else None)
        self._queue = _queue(name)
        self._batch = batch
        self._reader_thread = None
        self._closed = False
        self._token = os.urandom(8)
        self.undecodable = 0

    @property
    def name(self):
        """The actor name this mailbox belongs to."""
        return self._name

    @property
    def closed(self):
        """True once closed."""
        return self._closed

    def put(self, message):
        """Send ``message`` to this mailbox: :meth:`ArenaRef.send` with the default send
        timeout (the same errors); nothing once the mailbox is closed."""
        if not self._closed:
            return _send(self._queue, message, DEFAULT_SEND_TIMEOUT)
        return False

    def open_reader(self):
        """Take the liveness lock and place the reader. Raises :class:`ActorNameTakenError`
        if a live actor already reads this mailbox."""
        if not self._queue.open_reader():
            raise ActorNameTakenError(f"actor {self._name!r} is already alive (pid {self._queue.reader_pid})")
        self._reader_thread = threading.get_ident()

    def close_reader(self):
        """Release the liveness lock (the actor is now seen dead)."""
        self._queue.close_reader()

    def take(self, timeout=None):
        """Block until at least one frame is there (or ``timeout`` seconds passed, or the
        mailbox was closed) and return the messages waiting, at most ``batch`` of them.
        The frames are copied out without the lock, their room is given back to the
        senders under one lock per call (:meth:`a0py.proto.queue.ArenaQueue.give_back`),
        and they are unpickled after it. A frame that does not unpickle is returned as
        an :class:`Undecodable` in its place and counted in :attr:`undecodable`."""
        if self._closed or self._queue.reader is None:
            return []
        queue = self._queue
        deadline = None
        while True:
            step = _READER_SLICE
            if timeout is not None:
                if deadline is None:
                    deadline = time.monotonic() + timeout
                step = max(min(step, deadline - time.monotonic()), 0.0)
            frames = queue.take(self._batch, timeout=step)
            if frames:
                # Every batch's room at once (the queue alone would wait for a sender
                # seen waiting, or for the reader's next wait): a mailbox's senders
                # find room as soon as their messages were taken.
                queue.give_back()
                return self._decode([data for _, data in frames])
            if self._closed or (deadline is not None and time.monotonic() >= deadline):
                return []

    def _decode(self, frames):
        messages = []
        loads = pickle.loads
        for data in frames:
            try:
                message = loads(data)
            except Exception as exc:
                self.undecodable += 1
                messages.append(Undecodable(self._name, data, exc))
                continue
            if type(message) is _CloseMarker:
                if message.token == self._token:
                    self._closed = True
                    break
                continue  # an earlier reader's marker
            messages.append(message)
        return messages

    def close(self):
        """Stop the reader: it returns the messages before this point, then ``[]``."""
        if self._closed:
            return
        if self._queue.reader is not None and threading.get_ident() == self._reader_thread:
            # On the reader's own thread: no marker needed, take() sees the flag.
            self._closed = True
            return
        try:
            # A transport of its own: close() may run on any thread, at any time. An
            # evicting write: a full mailbox must not block its close.
            a0py.Transport(self._arena).write(pickle.dumps(_CloseMarker(self._token), protocol=5))
        except A0Error:
            pass
        self._closed = True

    def release(self):
        """Unlink the arena (other processes' mappings stay valid until they close), unless
        a live actor that is not ours reads it (a spawn that lost a name race must not
        unlink the winner's mailbox)."""
        if self._queue.reader is None:
            try:
                if a0py.Deadman(self._arena).is_taken():
                    return
            except A0Error:
                pass
        _forget(self._name)
        try:
            self._arena.unlink()
        except (A0Error, OSError):
            pass

    def remote_ref(self):
        """An :class:`ArenaRef` to this mailbox."""
        return ArenaRef(self._name)

    def __repr__(self):
        return f"<ArenaMailbox {self._name!r}>"


def close_cached_arenas():
    """Unmap every arena this process opened for actor mailboxes and refs. Only call it
    once no thread of this process uses them (a node process does, on its way out, so
    the arenas are not left to interpreter finalization). The gathers' death-watch
    threads, which block on these arenas, are ended first."""
    close_death_watches()
    if _arena_cache is not None:
        _arena_cache.close("actor")


def unlink_mailbox(name):
    """Unlink the shared-memory arena of actor ``name`` if it exists; True if it did."""
    _forget(name)
    return bool(a0py.Arena.unlink_shm(arena_name(name)))


def list_mailboxes():
    """The names of the actors whose mailboxes exist on this machine now, sorted: live
    actors' and those a dead process left (:meth:`ArenaRef.is_alive` tells them apart;
    :func:`unlink_mailbox` removes one). Mailboxes belong to no topic root."""
    try:
        names = os.listdir(_SHM_DIR)
    except OSError:
        return []
    return sorted(n[len(ARENA_PREFIX):] for n in names if n.startswith(ARENA_PREFIX) and len(n) > len(ARENA_PREFIX))
