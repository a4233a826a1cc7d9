"""A callback reader of any protocol's arena, served by the process's dispatcher.

:class:`a0py.Subscriber` is this for ``pubsub`` arenas; log listeners and cfg watchers
need the same on the ``log`` and ``cfg`` arenas, with a filter. Same rules: one
dispatcher thread for the whole process (:mod:`a0py.proto._dispatch`), packets copied
out and the lock released before the callback runs, a raising callback logged and the
next packet delivered, corrupt frames (not a packet, or a damaged frame header) logged,
counted and skipped, the packets around them delivered.
"""

import logging

from .. import _core
from ..errors import ArgumentError, PacketCorruptError
from . import _dispatch
from .lifetime import Closeable
from .topic import Topic

__all__ = ["ProtocolSubscriber", "ReaderCounts", "WatchedReader", "iter_code", "reader_start"]

_BATCH = 64
INIT_CODES = {"oldest": 0, "most_recent": 1, "await_new": 2, "first": 3}
ITER_CODES = {"next": 0, "newest": 1}


def _code(codes, value, what):
    """The reader's code of ``value``, a key of ``codes``; ArgumentError saying
    ``what`` it must be otherwise."""
    code = codes.get(value) if isinstance(value, str) else None
    if code is None:
        raise ArgumentError(f"{what} ({', '.join(map(repr, codes))}), not {value!r}")
    return code


def init_code(init):
    return _code(INIT_CODES, init, "init must be one of a0py.INIT_OLDEST, INIT_MOST_RECENT, "
                                   "INIT_AWAIT_NEW, INIT_FIRST")


def iter_code(iter):
    return _code(ITER_CODES, iter, "iter must be a0py.ITER_NEXT or ITER_NEWEST")


def reader_start(topic, protocol, init):
    """`topic`'s `protocol` arena (created if missing) and the init code a reader of
    it starts with: `init`'s, except for a topic whose arena did not exist when this
    was called, which is read from its first packet (``"first"``) whatever `init`
    says. Every packet such an arena will hold is written after the reader was asked
    for, and a publisher that creates it and writes at once, between this check and
    the reader's attach, must not lose its first packets.

    "Did not exist" is judged before and after opening: an arena this process still
    has mapped after someone removed it (then not there before nor after) is not
    new, and keeps `init`."""
    code = init_code(init)
    existed = topic.exists(protocol)
    arena = topic.arena(protocol)
    if not existed and topic.exists(protocol):
        code = INIT_CODES["first"]
    return arena, code


class ReaderCounts:
    """What was lost before it was read, for an object that reads through ``_reader``
    (a :class:`a0py._core.PacketReader`)."""

    @property
    def missed(self):
        """Packets lost to eviction before they were read, in total."""
        return self._reader.missed

    @property
    def corrupt(self):
        """Frames skipped as corrupt (each logged), in total."""
        return self._reader.corrupt


class WatchedReader(ReaderCounts, Closeable):
    """A reader of an arena whose callbacks the dispatcher runs: what every callback
    subscriber offers besides its callback. A subclass sets ``_reader`` and ``_watch``
    (its :func:`_dispatch.watch`)."""

    @property
    def closed(self):
        return not self._watch.active

    def close(self):
        """Stops the callbacks; returns once none is running (unless called from one).
        Idempotent."""
        self._watch.cancel()


class ProtocolSubscriber(WatchedReader):
    """Calls ``callback(pkt)`` for the packets of `topic`'s `protocol` arena for which
    ``accept(pkt)`` (if given) is true, until :meth:`close`. `init` as for
    :class:`a0py.SubscriberSync` (a topic that does not exist yet is read from its
    first packet, see :func:`reader_start`); `iter_newest` skips to the newest packet
    each time."""

    def __init__(self, topic, protocol, callback, init, iter_newest=False, accept=None, what="subscriber"):
        if not callable(callback):
            raise ArgumentError(f"callback must be callable, not {type(callback).__name__}")
        self.topic = Topic.of(topic)
        self._what = what
        self._callback = callback
        self._accept = accept
        self._log = logging.getLogger(f"a0py.{protocol}")
        label = f"{protocol} topic {self.topic.name!r}"
        arena, start = reader_start(self.topic, protocol, init)
        self._reader = _core.PacketReader(arena, start, 1 if iter_newest else 0, label)
        self._watch = _dispatch.watch(self._reader.arena, self._deliver)

    def _deliver(self):
        batch = self._reader.read_batch(_BATCH)
        for item in batch:
            if not self._watch.active:
                return False
            if type(item) is PacketCorruptError:  # counted by the reader
                self._log.warning("%s (skipped)", item)
                continue
            try:
                if self._accept is None or self._accept(item):
                    self._callback(item)
            except Exception:
                self._log.exception("callback of the %s on topic %r raised", self._what, self.topic.name)
        return len(batch) >= _BATCH
