"""A bounded queue of frames on an arena: many writers, one reader, nothing evicted unread.

Actor mailboxes and the broker's request arenas are such queues. An :class:`ArenaQueue`
names its arena by a key of the process's arena cache (:mod:`a0py.proto.arena_cache`)
and the opener that maps it, so every writer thread uses its own cached Transport.

* **put** writes a frame without evicting anything (``Transport.write(evict=False)``).
  While there is no room it sleeps on the arena (lock and GIL released) in slices of
  :data:`WAIT_SLICE` seconds, asking between two slices whether the reader is alive
  (the arena's deadman is held): when it is not, the frame is dropped and ``put``
  returns False, for a dead reader will never make room. After `timeout` seconds it
  raises :class:`a0py.A0TimeoutError` (nothing of that frame written).
* **take** copies a batch of frames out (no lock) and **gives their room back** (drops
  them through the last seq read, under one lock, which wakes the writers that wait):
  at once when a writer waits or more than :data:`KEEP_FRAMES` frames are kept, and in
  any case before the reader waits for more. Only frames read are dropped, so nothing
  unread is ever removed.

Invariants:

* **No lost wake-up.** Before the reader may sleep it gives back every frame it read,
  so a writer that finds no room from then on finds frames the reader has not read
  yet, and the reader is awake or woken by them: it will read them and, at the latest
  before its next sleep, give their room back, which moves the notify word under the
  lock the writer sleeps on. Giving room back only when a writer is seen waiting (a
  flag read before that writer sleeps) loses exactly the writer that starts waiting
  after the check: it then waits for a reader that waits for it. The waiter flag here
  only makes room sooner. ``tests/proto/test_arena_queue.py`` steps a reader and a writer by
  hand through every interleaving of these steps.
* **One reader**, whose liveness is the arena's deadman: :meth:`ArenaQueue.open_reader`
  takes it (refused while a live reader holds it), :meth:`ArenaQueue.close_reader`
  releases it, and the kernel releases it when the reader's process dies.
* Writers never block the reader: the reader copies without the lock.
"""

import functools
import time

from .. import _core
from ..errors import A0TimeoutError, ArgumentError, ClosedError, LockError
from . import arena_cache
from .arena_cache import cached_transport

__all__ = ["KEEP_FRAMES", "WAIT_SLICE", "ArenaQueue"]

#: How often (seconds) a writer waiting for room asks whether the reader is alive.
WAIT_SLICE = 0.05
#: A reader that keeps more frames read than this gives their room back at once.
KEEP_FRAMES = 64


class ArenaQueue:
    """A bounded queue on the arena cached under `key` (opened by ``open_arena(*args)``
    when this process has not mapped it yet). `name` names it in error messages.

    Any thread of any process may :meth:`put`; one thread reads, after
    :meth:`open_reader`, with :meth:`take`.
    """

    __slots__ = ("_deadman", "_kept", "_kept_seq", "_open", "_opener", "_reader", "key", "name")

    def __init__(self, key, open_arena, *args, name=None):
        if not callable(open_arena):
            raise ArgumentError(f"ArenaQueue needs a callable that opens the arena, got {open_arena!r}")
        self.key = key
        self._open = (open_arena, *args)
        self._opener = functools.partial(open_arena, *args)
        self.name = name if name is not None else f"the queue {key!r}"
        self._reader = None
        self._deadman = None
        self._kept = 0          # frames read and not given back yet
        self._kept_seq = 0      # the last of them

    @property
    def arena(self):
        """The queue's arena (mapped on first use, cached per process)."""
        return arena_cache.arena(self.key, *self._open)

    def reader_alive(self):
        """Whether a live thread (of any process) reads the queue: the arena's deadman is
        held."""
        return arena_cache.deadman(self.key, *self._open).is_taken()

    @property
    def max_frame_size(self):
        """The largest frame the queue takes (bytes)."""
        return arena_cache.transport(self.key, *self._open).max_frame_size

    @property
    def reader_pid(self):
        """The pid of the process reading the queue, or None when nobody does."""
        return arena_cache.deadman(self.key, *self._open).owner_pid

    # ---------------------------------------------------------------- writers

    def put(self, data, timeout=None, alive=None):
        """Appends `data` (bytes-like) as one frame, waiting for room as long as it
        takes, at most `timeout` seconds (None: no limit; 0: do not wait).

        Returns True once written; False when there is no room and the reader is dead
        (``alive()`` says False, by default :meth:`reader_alive`): the frame is dropped.
        Raises :class:`a0py.A0TimeoutError` (no room within `timeout`; nothing written),
        :class:`a0py.FrameTooLargeError` (can never fit), and the arena's errors."""
        tr = cached_transport(self.key)
        if tr is not None:
            try:
                tr.write(data, evict=False, timeout=0)   # room now: the usual case, one lock round trip
                return True
            except (A0TimeoutError, ClosedError):
                pass
        return self.put_many((data,), timeout, alive)

    def put_many(self, frames, timeout=None, alive=None):
        """:meth:`put` of each frame of `frames` in order (frames of other writers may
        come between them), all within `timeout` seconds. Returns False when the
        reader died while it waited: that frame and the rest are dropped. Raises as
        :meth:`put` (the frames before the one that raised are written)."""
        tr = arena_cache.transport(self.key, self._opener)
        first = WAIT_SLICE if timeout is None or timeout >= WAIT_SLICE else max(timeout, 0.0)
        deadline = None
        remapped = False
        for data in frames:
            step = first if deadline is None else min(WAIT_SLICE, max(deadline - time.monotonic(), 0.0))
            while True:
                try:
                    # One lock round trip when there is room (the usual case); otherwise
                    # the core sleeps on the arena, without the GIL, until there is.
                    tr.write(data, evict=False, timeout=step)
                    break
                except A0TimeoutError:
                    pass
                except ClosedError:
                    if remapped:
                        raise
                    # This process closed that mapping (arena_cache.close): map it again, once.
                    tr = arena_cache.transport(self.key, self._opener)
                    remapped = True
                    continue
                if not (alive() if alive is not None else self.reader_alive()):
                    return False
                if timeout is not None:
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + timeout - step   # the first slice is already spent
                    if now >= deadline:
                        raise A0TimeoutError(
                            f"{self.name}: no room for a frame of {len(data)} bytes within "
                            f"{timeout} s (its reader, pid {self.reader_pid}, does not take "
                            "frames out)")
                    step = min(WAIT_SLICE, deadline - now)
        return True

    # ---------------------------------------------------------------- the reader

    def open_reader(self, *, discard=False):
        """Makes the calling thread the queue's reader: takes the arena's deadman (the
        reader's liveness), under the arena's lock, and with ``discard=True`` clears
        the frames already there in the same lock (a writer that saw this reader alive
        writes after the clear). Returns False, changing nothing, when a live reader
        holds the deadman. Raises :class:`a0py.LockError` if this queue object already
        has a reader."""
        if self._reader is not None:
            raise LockError(f"{self.name} already has a reader (close_reader() first)")
        arena = self.arena
        reader = _core.Transport(arena)
        deadman = _core.Deadman(arena)
        with reader.lock() as t:
            if not deadman.try_take():
                return False
            if discard and not t.empty:
                t.clear()
        self._reader, self._deadman = reader, deadman
        self._kept = 0
        return True

    def close_reader(self):
        """Releases the reader's deadman (on the reader's thread): writers now see the
        queue unread, and drop what does not fit. Idempotent."""
        deadman, self._deadman, self._reader = self._deadman, None, None
        if deadman is not None and deadman.is_mine:
            deadman.release()

    @property
    def reader(self):
        """The reader's Transport (None before :meth:`open_reader`)."""
        return self._reader

    def take(self, max_frames=None, timeout=None):
        """Waits until a frame is there (at most `timeout` seconds; None: no limit; 0:
        do not wait) and returns the frames waiting, at most `max_frames`, as a list of
        ``(seq, bytes)`` (empty at the timeout). Their room goes back to the writers
        (:meth:`give_back`) at once when a writer waits or many frames are kept, else
        before this reader next waits. Reader only. Raises :class:`a0py.LockError`
        before :meth:`open_reader`, and the arena's errors."""
        frames = self.read_batch(max_frames)
        if frames:
            self.give_back_if_wanted()
            return frames
        # Nothing to read: before it may sleep, the reader keeps no frame it has read,
        # so whoever finds no room from now on finds frames this reader will read.
        self.give_back()
        if timeout == 0:
            return frames
        first = self._reader.read_next(timeout=timeout)
        if first is None:
            return frames
        frames = [first]
        if max_frames is None or max_frames > 1:
            frames += self._reader.read_many(None if max_frames is None else max_frames - 1)
        self._kept_seq = frames[-1][0]
        self._kept += len(frames)
        self.give_back_if_wanted()
        return frames

    # The steps of take(), public so that a test can drive them in every order.

    def read_batch(self, max_frames=None):
        """Copies the frames after the reader's cursor (at most `max_frames`) without the
        lock and without waiting; they are kept in the arena until :meth:`give_back`."""
        if self._reader is None:
            raise LockError(f"{self.name}: open_reader() first")
        frames = self._reader.read_many(max_frames)
        if frames:
            self._kept_seq = frames[-1][0]
            self._kept += len(frames)
        return frames

    def give_back_if_wanted(self):
        """Gives the room of the frames read back now if a writer waits for room (the
        arena's waiter flag) or more than :data:`KEEP_FRAMES` are kept; otherwise
        :meth:`take` gives it back before the reader next waits, which alone rules out
        a lost wake-up (this is only sooner)."""
        if self._kept > KEEP_FRAMES or (self._kept and self._reader.waiter_count):
            self.give_back()

    def give_back(self):
        """Drops the frames read so far (through the last seq read) under one lock, which
        wakes the writers waiting for room. Nothing when every frame read was given back."""
        if self._kept:
            with self._reader.lock() as t:
                t.drop_through(self._kept_seq)
            self._kept = 0

    def __repr__(self):
        return f"<ArenaQueue {self.name}>"
