"""Pub/sub on topics: :class:`Publisher`, :class:`SubscriberSync` (pull),
:class:`Subscriber` (callback), :func:`aio_sub` (asyncio).

A topic's packets live in its ``pubsub`` arena (:mod:`a0py.proto.topic`): a ring of
frames, each one packet. A publisher appends; every subscriber reads through a cursor of
its own, so subscribers never slow each other or the publisher down, and one that falls
behind loses the oldest packets to eviction — counted in ``missed``, never silently.

Invariants:

* A subscriber's first packet is fixed by ``init`` when it is made (oldest present, most
  recent present, the first written after, or the topic's first), its following ones by
  ``iter`` (every packet in order, or straight to the newest). A subscriber made while
  its topic does not exist starts at the topic's first packet whatever its ``init``:
  every packet the topic will hold comes after it, including those a publisher that
  creates the topic at the same moment writes before the subscriber attaches.
* User callbacks never run under an arena lock: packets are copied out (one copy of the
  payload, into the bytes object the callback gets), the lock released, then called.
* Every callback :class:`Subscriber` and :func:`aio_sub` of a process is served by the
  dispatcher (:mod:`a0py.proto._dispatch`): one thread sleeping on up to 127 arenas at
  once, not a thread per subscriber.
* Typed topics (:mod:`a0py.proto.typed`): a publisher turns values into payloads before
  it takes the lock, so a refused value publishes nothing; a subscriber's packets learn
  their topic's schema when asked (``pkt.schema``, ``decode()``, ``array()``). Zero-copy
  packets (``read_view``, ``Subscriber(zero_copy=True)``) lend their payload only for
  their block or callback, checked at its end.
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
from ..errors import A0TimeoutError, ArgumentError, FrameEvictedError, PacketCorruptError
from . import _dispatch, arrays
from ._subscriber import ReaderCounts, WatchedReader, iter_code, reader_start
from .schema import Schema, declare_schema
from .sizes import PACKET_OVERHEAD, power_of_two_size, size_text
from .topic import PUBSUB, Topic, topic_arena
from .typed import PublisherTyping, suggested_arena_size, typing_for

__all__ = [
    "INIT_AWAIT_NEW", "INIT_FIRST", "INIT_MOST_RECENT", "INIT_OLDEST", "ITER_NEWEST", "ITER_NEXT",
    "AioSubscription", "Publisher", "Subscriber", "SubscriberSync", "TopicSizeWarning", "aio_sub",
    "packets_that_fit", "size_for_packets",
]

INIT_OLDEST = "oldest"
INIT_MOST_RECENT = "most_recent"
INIT_AWAIT_NEW = "await_new"
INIT_FIRST = "first"
ITER_NEXT = "next"
ITER_NEWEST = "newest"


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


def _whole(value, what, minimum):
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ArgumentError(f"{what} must be a whole number of at least {minimum}, not {value!r}")
    return value


def packets_that_fit(arena_size, packet_size):
    """How many packets of ``packet_size`` bytes (headers included: ``len(pkt.to_bytes())``)
    a topic's arena of ``arena_size`` bytes holds at once; 0 if one does not fit.
    Raises ArgumentError for a size that is not a whole number of bytes."""
    arena_size = _whole(arena_size, "arena_size", 0)
    frame = _core.frame_span(_whole(packet_size, "packet_size", 0))
    return max(0, arena_size - _core.HEADER_SIZE) // frame


def size_for_packets(packet_size, count=_ROOMY_PACKETS):
    """The arena size to give a topic so that it holds ``count`` packets of
    ``packet_size`` bytes (headers included): a power of two, at least 1 MiB.
    Raises ArgumentError for a size below 0 or a count below 1."""
    wanted = _core.arena_size_for(_whole(packet_size, "packet_size", 0), _whole(count, "count", 1))
    return power_of_two_size(wanted, _MIB)


def _size_warning(topic, arena_size, packet_size):
    """The text of the :class:`TopicSizeWarning` for a packet of ``packet_size`` bytes in
    ``topic``'s pubsub arena of ``arena_size`` bytes."""
    fits = packets_that_fit(arena_size, packet_size)
    size = size_for_packets(packet_size)
    spec = size_text(size)
    name = topic.name
    return (f"topic {name!r}: its {_mib(arena_size)} pubsub arena holds only {fits} packet"
            f"{'' if fits == 1 else 's'} of {_mib(packet_size)}: a subscriber loses a packet it has "
            f"not read before {fits} more {'is' if fits == 1 else 'are'} published (counted in missed). "
            f"Create the topic with size {spec} (it then holds {packets_that_fit(size, packet_size)}): "
            f"Topic({name!r}, size={spec!r}), A0PY_TOPIC_SIZES='{name}={spec}' or "
            f"`a0py pub --size {spec}`; an existing topic keeps its size until removed "
            f"(`a0py rm {name}`)")


def _label(topic):
    return f"topic {topic.name!r}"


# Room left for a publisher's own headers when it sizes a frame from an example value.
_HEADER_ROOM = 256


class Publisher(_core.PacketWriter):
    """Publishes packets to `topic` (a name or :class:`a0py.proto.Topic`), creating
    the topic if it does not exist yet.

    ``pub(value, headers=None)`` writes bytes, a bytes-like object, a str (UTF-8), a
    :class:`a0py.Packet`, or a typed value — a numpy array, a protobuf message, a
    Foxglove SDK message (``foxglove.messages.RawImage(...)``) — and returns the
    packet's transport seq. :meth:`pub_json` sends an object as JSON, :meth:`pub_image`
    an image. ``with pub.alloc(n) as buf:`` fills an n-byte payload in place
    (zero-copy). Every packet carries the standard headers (``a0py.STANDARD_HEADERS``).
    Thread-safe; usable as a context manager.

    `schema`: an :class:`a0py.Schema` declared for the topic now (else the first typed
    value declares its own; docs/typed.md). A topic has one schema: a publisher
    declaring another is a SchemaConflictError, a value of another type a SchemaError.
    `like`: an example of the values to come (an array of the shape and dtype to
    publish, a message): its schema is declared now, and a topic arena too small for
    one such frame is an error now, naming the size to use (a topic this publisher
    creates is made large enough: four such frames).

    The first packet that fits fewer than :data:`FEW_PACKETS` times in the topic issues a
    :class:`TopicSizeWarning` (once per publisher, after the packet is published) naming
    the size the topic needs.

    Raises ArgumentError (bad topic name, schema or example), SchemaError,
    SchemaConflictError, FrameTooLargeError (`like` does not fit the topic's arena),
    and the errors of :meth:`pub`."""

    def __init__(self, topic, schema=None, *, like=None):
        self.topic = Topic.of(topic)
        if schema is not None:
            if not isinstance(schema, Schema):
                raise ArgumentError(f"schema must be an a0py.Schema, not {type(schema).__name__}")
            schema.check(self.topic)
        typing = PublisherTyping(self.topic)
        like_size = None if like is None else _example_size(typing, like)
        arena = self._pubsub_arena(like_size)
        self._bind(arena, _label(self.topic))
        self._watch_large(FEW_PACKETS)
        typing.max_payload = _core.Transport(arena).max_frame_size - PACKET_OVERHEAD
        if like_size is not None:
            typing.check_size(like_size)
        if schema is not None:
            typing.schema = declare_schema(self.topic, schema)
        self._typing = typing
        self._set_encoder(typing.encode)
        # Arrays of a layout encoded once are written by the compiled writer itself
        # (_remember_array): no encoder call, no dict lookup a frame.
        typing.remember = self._remember_array
        if like is not None:
            typing.encode(like)  # declares its schema, as its first publish would

    def _remember_array(self, array, prefix):
        """Lets the writer publish later arrays of `array`'s layout as `prefix` + their
        memory, with no encoder call (for the encoder, once it has checked `array`):
        through the compiled :class:`a0py.proto._ndarray.ArrayLayouts` where it is
        built, else the writer's generic cache keyed by the dtype object."""
        hook = self.layout_hook
        if hook is None:
            compiled = arrays.compiled_module()
            if compiled is None:
                return self._remember_layout(array, prefix, "dtype")
            hook = compiled.ArrayLayouts()
            self._set_layout_hook(hook)
        return hook.remember(array, prefix)

    def _pubsub_arena(self, like_size):
        topic = self.topic
        if like_size is None or topic.exists(PUBSUB):
            return topic.arena(PUBSUB)
        # Creating it: large enough for the frames announced, unless already so.
        if topic.size_for(PUBSUB) >= _core.arena_size_for(PACKET_OVERHEAD + like_size):
            return topic.arena(PUBSUB)
        sized = Topic(topic.name, root=topic.root,
                      size={PUBSUB: suggested_arena_size(like_size)})
        return topic_arena(sized, PUBSUB)

    @property
    def schema(self):
        """The topic's schema (an :class:`a0py.Schema`), or None while it has none."""
        return self._typing.topic_schema()

    def _large_packet(self, packet_size):
        # Called by the compiled writer after the publish, lock released; stacklevel 2 is
        # the caller of pub() (or the `with pub.alloc()` block).
        arena = self.arena
        if arena is None:
            return
        warnings.warn(_size_warning(self.topic, arena.size, packet_size), TopicSizeWarning, stacklevel=2)

    def pub_json(self, obj, headers=None):
        """Publishes ``json.dumps(obj)`` (UTF-8) with the header ``content-type:
        application/json``; returns the seq. The topic is a typed JSON topic (message
        encoding ``json``): the first ``pub_json`` declares a JSON Schema inferred from
        `obj` (docs/typed.md says how), unless the topic has one already.

        Raises TypeError (`obj` is not serializable), ArgumentError (`obj` is not a
        dict: a JSON topic's messages are objects), SchemaError (the topic carries
        another encoding), and the errors of :meth:`pub`."""
        data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        self._typing.prepare_json(obj, data)
        extra = [("content-type", "application/json")]
        if headers is not None:
            extra += list(headers.items() if hasattr(headers, "items") else headers)
        return self.pub(data, extra)

    def pub_image(self, image, encoding=None, *, format=None, frame_id="", timestamp=None,
                  headers=None):
        """Publishes an image; returns the seq. `image`: a numpy array of pixels, sent as
        a ``foxglove.RawImage`` (`encoding`: ``rgb8``, ``bgr8``, ``mono8``, ``mono16``...,
        inferred from the dtype and shape if left out: HxWx3 uint8 is ``rgb8``), or the
        bytes of a JPEG/PNG with ``format="jpeg"``/``"png"``, sent as a
        ``foxglove.CompressedImage``. `frame_id`: the image's frame of reference;
        `timestamp`: nanoseconds since the epoch (default: now). The pixels are copied
        once, into the frame; subscribers read them with ``pkt.array()``.

        Raises ArgumentError (an array that is not an image of `encoding`, a bad
        format), SchemaError (the topic carries something else),
        ExtraNotInstalledError (no Foxglove schemas installed), and the errors of
        :meth:`pub`."""
        payload = self._typing.image(image, encoding, frame_id, timestamp, format)
        return self.pub(payload, headers)

    def __repr__(self):
        return f"<a0py.Publisher {self.topic.name!r}>"


def _example_size(typing, like):
    """The frame payload an example value needs (plus room for headers); its schema is
    checked against the topic's, and declared later, by the constructor."""
    if isinstance(like, (bytes, bytearray, memoryview, str)):
        raise ArgumentError("like= is an example of the typed values to publish (an array, a "
                            "message); for bytes, size the topic: a0py.Topic(name, size=...)")
    return PublisherTyping(typing.topic, declare=False).payload_size(like) + _HEADER_ROOM


class SubscriberSync(_core.PacketReader):
    """Reads `topic`'s packets when asked (pull), creating the topic if needed.

    `init`: :data:`INIT_AWAIT_NEW` (default: packets written from now on),
    :data:`INIT_MOST_RECENT` (start with the newest packet present now),
    :data:`INIT_OLDEST` (start with the oldest still in the arena), or
    :data:`INIT_FIRST` (the topic's first packet: every packet ever published,
    those already evicted counted in ``missed``). A topic that does not exist yet is
    read from its first packet whatever `init` says. `iter`:
    :data:`ITER_NEXT` (default: every packet, in order) or :data:`ITER_NEWEST` (skip to
    the newest each time).

    ``can_read()``, ``read()`` (a :class:`a0py.Packet` or None, never waits),
    ``read_blocking(timeout=None)`` (waits; A0TimeoutError at the timeout), ``for pkt in
    sub:`` (waits for each), ``missed`` (packets lost to eviction so far), ``corrupt``
    (frames skipped as corrupt so far). A corrupt frame (not a packet, or a damaged frame
    header) is raised once as PacketCorruptError by the read that meets it; the reader
    has then moved past it, and the next read goes on. ``with
    sub.read_view(timeout=None) as pkt:`` reads without copying: ``pkt.payload`` and
    ``pkt.array()`` lie in the arena, valid inside the block, and its end raises
    FrameEvictedError if the publisher wrote over them meanwhile. One thread at a time
    (LockError otherwise); usable as a context manager.

    Raises ArgumentError for a bad topic, init or iter."""

    def __init__(self, topic, init=INIT_AWAIT_NEW, iter=ITER_NEXT):
        self.topic = Topic.of(topic)
        step = iter_code(iter)
        arena, start = reader_start(self.topic, PUBSUB, init)
        self._bind(arena, start, step, _label(self.topic))
        self._set_typing(typing_for(self.topic))

    @property
    def schema(self):
        """The topic's schema (an :class:`a0py.Schema`), or None while it has none."""
        return typing_for(self.topic).schema

    def __iter__(self):
        while True:
            yield self.read_blocking()

    def __repr__(self):
        return f"<a0py.SubscriberSync {self.topic.name!r}>"


class Subscriber(WatchedReader):
    """Calls ``callback(pkt)`` for `topic`'s packets, on the process's dispatcher thread,
    until :meth:`close` (the subscriber keeps running while unreferenced, like a thread).

    `init` and `iter` as for :class:`SubscriberSync`. ``pkt.missed`` tells the callback
    how many packets were lost to eviction just before this one; ``missed`` totals them.
    Callbacks of all subscribers of the process share one thread: keep them short, or
    hand work to a thread of your own. An exception in a callback is logged (logger
    ``a0py.pubsub``) and the next packet delivered; a corrupt frame (not a packet, or a
    damaged frame header) is logged, counted in ``corrupt`` and skipped, and the packets
    around it are delivered.

    `zero_copy=True`: each packet's payload (and ``pkt.array()``) is lent from the
    arena for the callback's duration instead of copied; after the callback the frame
    is checked, and if the publisher wrote over it meanwhile the callback's packet is
    counted in ``evicted`` and logged (a callback that acts on what it read before
    returning calls ``pkt.check_intact()`` first, which raises FrameEvictedError).

    Raises ArgumentError for a bad topic, init, iter or a callback that is not callable."""

    def __init__(self, topic, callback, init=INIT_AWAIT_NEW, iter=ITER_NEXT, *, zero_copy=False):
        if not callable(callback):
            raise ArgumentError(f"callback must be callable, not {type(callback).__name__}")
        self.topic = Topic.of(topic)
        self.evicted = 0
        self._callback = callback
        step = iter_code(iter)
        arena, start = reader_start(self.topic, PUBSUB, init)
        self._reader = _core.PacketReader(arena, start, step, _label(self.topic))
        self._reader._set_typing(typing_for(self.topic))
        self._watch = _dispatch.watch(self._reader.arena,
                                      self._deliver_views if zero_copy else self._deliver)

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

    def _deliver_views(self):
        # As _deliver, one packet at a time, its payload lent for the callback's duration.
        reader = self._reader
        watch = self._watch
        for _ in range(_BATCH):
            if not watch.active or not reader.can_read():
                return False
            try:
                with reader.read_view(0) as pkt:
                    try:
                        self._callback(pkt)
                    except Exception:
                        _log.exception("callback of the subscriber on topic %r raised", self.topic.name)
            except A0TimeoutError:
                return False  # the topic was cleared since can_read()
            except PacketCorruptError as e:  # counted by the reader
                _log.warning("%s (skipped)", e)
            except FrameEvictedError as e:
                self.evicted += 1
                _log.warning("%s", e)
        return True

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


class AioSubscription(ReaderCounts):
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
