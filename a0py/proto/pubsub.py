"""Pub/sub on topics: :class:`Publisher`, :class:`SubscriberSync` (pull),
:class:`Subscriber` (callback), :func:`aio_sub` (asyncio).

A topic's packets live in its ``pubsub`` arena (:mod:`a0py.proto.topic`): a ring of
frames, each one packet. A publisher appends; every subscriber reads through a cursor of
its own, so subscribers never slow each other or the publisher down, and one that falls
behind loses the oldest packets to eviction — counted in ``missed``, never silently.

Invariants:

* A subscriber's first packet is fixed by ``init`` when it is made (oldest present, most
  recent present, or the first written after), its following ones by ``iter`` (every
  packet in order, or straight to the newest).
* User callbacks never run under an arena lock: packets are copied out (one copy of the
  payload, into the bytes object the callback gets), the lock released, then called.
* Every callback :class:`Subscriber` and :func:`aio_sub` of a process is served by the
  dispatcher (:mod:`a0py.proto._dispatch`): one thread sleeping on up to 127 arenas at
  once, not a thread per subscriber.
* A publisher whose packets fit fewer than :data:`FEW_PACKETS` times in its topic warns
  once (:class:`TopicSizeWarning`, naming the size to use): such a ring evicts a packet
  before a subscriber one or two packets behind has read it. The check is one comparison
  per publish, made in the compiled writer (``PacketWriter._watch_large``).
"""

import asyncio
import collections
import json
import logging
import warnings

from .. import _core
from ..errors import ArgumentError, PacketCorruptError
from . import _dispatch
from .topic import PUBSUB, Topic

__all__ = [
    "INIT_AWAIT_NEW", "INIT_MOST_RECENT", "INIT_OLDEST", "ITER_NEWEST", "ITER_NEXT",
    "AioSubscription", "Publisher", "Subscriber", "SubscriberSync", "TopicSizeWarning", "aio_sub",
    "packets_that_fit", "size_for_packets",
]

INIT_OLDEST = "oldest"
INIT_MOST_RECENT = "most_recent"
INIT_AWAIT_NEW = "await_new"
ITER_NEXT = "next"
ITER_NEWEST = "newest"

_INIT_CODES = {INIT_OLDEST: 0, INIT_MOST_RECENT: 1, INIT_AWAIT_NEW: 2}
_ITER_CODES = {ITER_NEXT: 0, ITER_NEWEST: 1}

# Packets a callback subscriber copies out under one lock before calling back.
_BATCH = 64
# ...and no more payload bytes than this in one batch: large packets go to the callback
# one by one as they come, instead of 64 copies of 1 MiB made before the first call.
_BATCH_BYTES = 256 * 1024

_log = logging.getLogger("a0py.pubsub")

#: A publisher warns when its packets fit fewer than this many times in the topic's ring.
FEW_PACKETS = 4
# ...and names a size that holds at least this many (rounded up to a power of two).
_ROOMY_PACKETS = 8
_MIB = 1 << 20


class TopicSizeWarning(UserWarning):
    """A publisher's packets fit only a few times in its topic: subscribers that fall a
    packet or two behind lose packets. The message names the size to give the topic."""


def _mib(n):
    return f"{n / _MIB:.1f} MiB" if n >= _MIB else f"{n / 1024:.1f} KiB"


def _size_spec(n):
    """``n`` bytes (a power of two of at least 1 MiB) as Topic(size=) and --size read it."""
    return f"{n >> 30}G" if n % (1 << 30) == 0 else f"{n >> 20}M"


def _frame_size(packet_size):
    # What one packet takes of a ring: the frame header, then the packet, padded to 16
    # bytes (docs/format.md).
    return (_core.FRAME_HEADER_SIZE + packet_size + 15) & ~15


def _whole(value, what, minimum):
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ArgumentError(f"{what} must be a whole number of at least {minimum}, not {value!r}")
    return value


def packets_that_fit(arena_size, packet_size):
    """How many packets of ``packet_size`` bytes (headers included: ``len(pkt.to_bytes())``)
    a topic's arena of ``arena_size`` bytes holds at once; 0 if one does not fit.
    Raises ArgumentError for a size that is not a whole number of bytes."""
    arena_size = _whole(arena_size, "arena_size", 0)
    frame = _frame_size(_whole(packet_size, "packet_size", 0))
    return max(0, arena_size - _core.HEADER_SIZE) // frame


def size_for_packets(packet_size, count=_ROOMY_PACKETS):
    """The arena size to give a topic so that it holds ``count`` packets of
    ``packet_size`` bytes (headers included): a power of two, at least 1 MiB.
    Raises ArgumentError for a size below 0 or a count below 1."""
    frame = _frame_size(_whole(packet_size, "packet_size", 0))
    wanted = _core.HEADER_SIZE + _whole(count, "count", 1) * frame
    return max(_MIB, 1 << (wanted - 1).bit_length())


def _size_warning(topic, arena_size, packet_size):
    """The text of the :class:`TopicSizeWarning` for a packet of ``packet_size`` bytes in
    ``topic``'s pubsub arena of ``arena_size`` bytes."""
    fits = packets_that_fit(arena_size, packet_size)
    size = size_for_packets(packet_size)
    spec = _size_spec(size)
    name = topic.name
    return (f"topic {name!r}: its {_mib(arena_size)} pubsub arena holds only {fits} packet"
            f"{'' if fits == 1 else 's'} of {_mib(packet_size)}: a subscriber loses a packet it has "
            f"not read before {fits} more {'is' if fits == 1 else 'are'} published (counted in missed). "
            f"Create the topic with size {spec} (it then holds {packets_that_fit(size, packet_size)}): "
            f"Topic({name!r}, size={spec!r}), A0PY_TOPIC_SIZES='{name}={spec}' or "
            f"`a0py pub --size {spec}`; an existing topic keeps its size until removed "
            f"(`a0py rm {name}`)")


def _init_code(init):
    code = _INIT_CODES.get(init) if isinstance(init, str) else None
    if code is None:
        raise ArgumentError(f"init must be one of a0py.INIT_OLDEST, INIT_MOST_RECENT, INIT_AWAIT_NEW "
                            f"({', '.join(map(repr, _INIT_CODES))}), not {init!r}")
    return code


def _iter_code(iter):
    code = _ITER_CODES.get(iter) if isinstance(iter, str) else None
    if code is None:
        raise ArgumentError(f"iter must be a0py.ITER_NEXT or ITER_NEWEST "
                            f"({', '.join(map(repr, _ITER_CODES))}), not {iter!r}")
    return code


def _label(topic):
    return f"topic {topic.name!r}"


class Publisher(_core.PacketWriter):
    """Publishes packets to `topic` (a name or :class:`a0py.proto.Topic`), creating
    the topic if it does not exist yet.

    ``pub(data, headers=None)`` writes bytes, a bytes-like object, a str (UTF-8) or a
    :class:`a0py.Packet`, and returns the packet's transport seq. ``with
    pub.alloc(n) as buf:`` fills an n-byte payload in place (zero-copy).
    :meth:`pub_json` sends an object as JSON. Every packet carries the standard headers
    (``a0py.STANDARD_HEADERS``). Thread-safe; usable as a context manager.

    The first packet that fits fewer than :data:`FEW_PACKETS` times in the topic issues a
    :class:`TopicSizeWarning` (once per publisher, after the packet is published) naming
    the size the topic needs.

    Raises ArgumentError (bad topic name), and the errors of :meth:`pub`."""

    def __init__(self, topic):
        self.topic = Topic.of(topic)
        self._bind(self.topic.arena(PUBSUB), _label(self.topic))
        self._watch_large(FEW_PACKETS)

    def _large_packet(self, packet_size):
        # Called by the compiled writer after the publish, lock released; stacklevel 2 is
        # the caller of pub() (or the `with pub.alloc()` block).
        arena = self.arena
        if arena is None:
            return
        warnings.warn(_size_warning(self.topic, arena.size, packet_size), TopicSizeWarning, stacklevel=2)

    def pub_json(self, obj, headers=None):
        """Publishes ``json.dumps(obj)`` (UTF-8) with the header ``content-type:
        application/json``; returns the seq. TypeError if `obj` is not serializable."""
        data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        extra = [("content-type", "application/json")]
        if headers is not None:
            extra += list(headers.items() if hasattr(headers, "items") else headers)
        return self.pub(data, extra)

    def __repr__(self):
        return f"<a0py.Publisher {self.topic.name!r}>"


class SubscriberSync(_core.PacketReader):
    """Reads `topic`'s packets when asked (pull), creating the topic if needed.

    `init`: :data:`INIT_AWAIT_NEW` (default: packets written from now on),
    :data:`INIT_MOST_RECENT` (start with the newest packet present now), or
    :data:`INIT_OLDEST` (start with the oldest still in the arena). `iter`:
    :data:`ITER_NEXT` (default: every packet, in order) or :data:`ITER_NEWEST` (skip to
    the newest each time).

    ``can_read()``, ``read()`` (a :class:`a0py.Packet` or None, never waits),
    ``read_blocking(timeout=None)`` (waits; A0TimeoutError at the timeout), ``for pkt in
    sub:`` (waits for each), ``missed`` (packets lost to eviction so far), ``corrupt``
    (frames skipped as corrupt so far). A corrupt frame (not a packet, or a damaged frame
    header) is raised once as PacketCorruptError by the read that meets it; the reader
    has then moved past it, and the next read goes on. One thread at a time (LockError
    otherwise); usable as a context manager.

    Raises ArgumentError for a bad topic, init or iter."""

    def __init__(self, topic, init=INIT_AWAIT_NEW, iter=ITER_NEXT):
        self.topic = Topic.of(topic)
        self._bind(self.topic.arena(PUBSUB), _init_code(init), _iter_code(iter), _label(self.topic))

    def __iter__(self):
        while True:
            yield self.read_blocking()

    def __repr__(self):
        return f"<a0py.SubscriberSync {self.topic.name!r}>"


class Subscriber:
    """Calls ``callback(pkt)`` for `topic`'s packets, on the process's dispatcher thread,
    until :meth:`close` (the subscriber keeps running while unreferenced, like a thread).

    `init` and `iter` as for :class:`SubscriberSync`. ``pkt.missed`` tells the callback
    how many packets were lost to eviction just before this one; ``missed`` totals them.
    Callbacks of all subscribers of the process share one thread: keep them short, or
    hand work to a thread of your own. An exception in a callback is logged (logger
    ``a0py.pubsub``) and the next packet delivered; a corrupt frame (not a packet, or a
    damaged frame header) is logged, counted in ``corrupt`` and skipped, and the packets
    around it are delivered.

    Raises ArgumentError for a bad topic, init, iter or a callback that is not callable."""

    def __init__(self, topic, callback, init=INIT_AWAIT_NEW, iter=ITER_NEXT):
        if not callable(callback):
            raise ArgumentError(f"callback must be callable, not {type(callback).__name__}")
        self.topic = Topic.of(topic)
        self._callback = callback
        self._reader = _core.PacketReader(self.topic.arena(PUBSUB), _init_code(init),
                                          _iter_code(iter), _label(self.topic))
        self._watch = _dispatch.watch(self._reader.arena, self._deliver)

    def _deliver(self):
        # On the dispatcher thread; no lock held while calling back.
        batch = self._reader.read_batch(_BATCH, _BATCH_BYTES)
        callback = self._callback
        watch = self._watch
        for item in batch:
            if not watch.active:
                return False
            if type(item) is PacketCorruptError:  # counted by the reader
                _log.warning("%s (skipped)", item)
                continue
            try:
                callback(item)
            except Exception:
                _log.exception("callback of the subscriber on topic %r raised", self.topic.name)
        return bool(batch)  # there may be more: the dispatcher calls again before it waits

    @property
    def missed(self):
        """Packets lost to eviction before this subscriber read them, in total."""
        return self._reader.missed

    @property
    def corrupt(self):
        """Frames skipped as corrupt (each logged), in total."""
        return self._reader.corrupt

    @property
    def closed(self):
        return not self._watch.active

    def close(self):
        """Stops the callbacks; returns once none is running (unless called from a
        callback). Idempotent."""
        self._watch.cancel()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return f"<a0py.Subscriber {self.topic.name!r} {state}>"


class _Wakeup:
    """Bridges the dispatcher thread to one event loop: sets an asyncio.Event there,
    only when the consumer is about to wait (``armed``), so a busy topic costs no
    cross-thread call per packet."""

    __slots__ = ("armed", "event", "loop")

    def __init__(self, loop):
        self.loop = loop
        self.event = asyncio.Event()
        self.armed = False

    def __call__(self):
        if self.armed:
            self.armed = False
            try:
                self.loop.call_soon_threadsafe(self.event.set)
            except RuntimeError:
                pass  # the loop is closed: nobody waits any more
        return False


def aio_sub(topic, init=INIT_AWAIT_NEW, iter=ITER_NEXT):
    """``async for pkt in aio_sub(topic, init=..., iter=...)``: `topic`'s packets in
    an event loop, woken by the same dispatcher as callback subscribers (no thread of
    its own, and the loop never blocks waiting). `init` and `iter` as for
    :class:`SubscriberSync`, taking effect when aio_sub is called (so packets
    published between the call and the first iteration are not missed);
    ``pkt.missed`` as for :class:`Subscriber`. Returns an :class:`AioSubscription`
    (``missed``, ``corrupt``, ``aclose()``); leaving the loop (break, an exception,
    cancellation) releases it. A corrupt frame is logged, counted in ``corrupt`` and
    skipped, as by :class:`Subscriber`.

    Raises ArgumentError for a bad topic, init or iter (at the call)."""
    return AioSubscription(SubscriberSync(topic, init=init, iter=iter))


class AioSubscription:
    """The packets of a :class:`SubscriberSync` as an asynchronous iterator (what
    :func:`aio_sub` returns). ``missed`` and ``corrupt`` as for :class:`Subscriber`;
    ``aclose()`` (or dropping it) releases the reader and its dispatcher watch."""

    def __init__(self, reader):
        self._reader = reader
        self._pending = collections.deque()
        self._wakeup = None
        self._watch = None
        self._closed = False

    def __aiter__(self):
        return self

    async def __anext__(self):
        pending = self._pending
        while True:
            while pending:
                item = pending.popleft()
                if type(item) is PacketCorruptError:  # counted by the reader
                    _log.warning("%s (skipped)", item)
                    continue
                return item
            if self._closed:
                raise StopAsyncIteration
            wakeup = self._wakeup
            if wakeup is None:
                wakeup = self._wakeup = _Wakeup(asyncio.get_running_loop())
                self._watch = _dispatch.watch(self._reader.arena, wakeup)
            wakeup.armed = True   # before the read: a commit after it will set the event
            wakeup.event.clear()
            batch = self._reader.read_batch(_BATCH, _BATCH_BYTES)
            if not batch:
                await wakeup.event.wait()
                continue
            wakeup.armed = False
            pending.extend(batch)

    @property
    def missed(self):
        """Packets lost to eviction before they were read, in total."""
        return self._reader.missed

    @property
    def corrupt(self):
        """Frames skipped as corrupt (each logged), in total."""
        return self._reader.corrupt

    def close(self):
        """Releases the reader and its dispatcher watch (idempotent); iterating then
        ends."""
        self._closed = True
        self._pending.clear()
        if self._watch is not None:
            self._watch.cancel()
        if not self._reader.closed:
            self._reader.close()

    async def aclose(self):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # at interpreter exit, or a reader busy in another thread
            pass

    def __repr__(self):
        return f"<a0py.AioSubscription {self._reader.topic.name!r}>"
