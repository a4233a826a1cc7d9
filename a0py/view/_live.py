"""The live source: the topics under a root, each arena (pub/sub, log,
cfg) read by a tap that feeds the hub.

A topic is found by listing the root (:func:`list_pubsub_topics`, every
:data:`SCAN_PERIOD` seconds; the one place to swap in ``a0py.Discovery``),
filtered by the view's globs. Its tap is an :func:`a0py.aio_sub` reader
started at the most recent packet, so a topic that published before the view
started shows its latest value at once (a topic made while the view runs is
read from its oldest packet, so the view sees each of its writers' first). The channel is advertised when the
first packet tells what the payloads are (JSON or bytes, see
:mod:`a0py.view._schema`); a topic whose arena is removed is unadvertised and
its mapping dropped, so a topic made again under the same name is a new
channel; a typed topic (one whose publisher declared a schema) is advertised
with its schema (:mod:`a0py.view._typed`). A topic's log and cfg arenas are channels ``T:log`` and ``T:cfg``
(see :mod:`a0py.view._logcfg`), read by a :class:`a0py.LogListener` and a
:class:`a0py.CfgWatcher` whose callbacks hand each packet to the event loop.

Invariants:

* The view never creates a topic: it opens only arenas that exist
  (``create=False``), so watching a removed topic does not bring it back.
* A tap reads in batches and never waits for clients (the hub's outboxes
  absorb or drop), so the view's pace never reaches the publishers beyond
  the short copy under the arena lock that every subscriber makes.
"""

import asyncio
import fnmatch
import logging
import time

from ..errors import A0Error
from ..proto import aio_sub
from ..proto.cfg import CfgWatcher
from ..proto.log import LogLevel, LogListener
from ..proto.packets import TIME_WALL
from ..proto.pubsub import INIT_MOST_RECENT, INIT_OLDEST, ITER_NEXT
from ..proto.schema import topic_schema
from ..proto.topic import CFG, LOG, PUBSUB, RPC, Topic, forget_arena, list_topics, topic_arena
from ._logcfg import LOG_KIND, LogMessage, channel_topic
from ._schema import kind_of
from ._typed import kind_of_schema

__all__ = ["LiveSource", "list_pubsub_topics"]

_log = logging.getLogger("a0py.view")

SCAN_PERIOD = 0.2
#: The arenas of a topic the view shows, each as a channel.
WATCHED = (PUBSUB, LOG, CFG)


def list_pubsub_topics(root=None):
    """The names of the topics under ``root`` that have a pub/sub arena."""
    return [t for t, protocols in list_topics(root).items() if PUBSUB in protocols]


def _matcher(globs):
    if not globs:
        return lambda name: True
    pats = [g[1:] if g.startswith("/") else g for g in globs]
    return lambda name: any(fnmatch.fnmatchcase(name, p) for p in pats)


class _Tap:
    __slots__ = ("channel", "label", "listener", "name", "protocol", "task", "topic")

    def __init__(self, name, topic, protocol=PUBSUB):
        self.name = name
        self.topic = topic
        self.protocol = protocol
        self.label = channel_topic(name, protocol)  # the channel's name
        self.channel = None
        self.task = None
        self.listener = None


class LiveSource:
    """Watches the topics matching ``globs`` (None: all) under ``root``
    (default ``A0PY_ROOT``) and publishes their packets into ``hub``."""

    def __init__(self, hub, globs=None, root=None):
        self.hub = hub
        self.root = root
        self.match = _matcher(globs)
        self.taps = {}
        self.scanned = False  # the first scan is done: topics found later are new
        # Told of each configuration version and of each cfg topic gone
        # (:class:`a0py.view._params.Parameters`), when the view offers parameters.
        self.parameters = None
        # Told of the topics with an rpc arena at each scan (:class:`a0py.view._services.Services`).
        self.services = None
        # Told of the pub/sub topics and, while a client watches it, of each packet's
        # writer (:class:`a0py.view._graph.ConnectionGraph`).
        self.graph = None

    async def run(self):
        graph = None
        if self.graph is not None:
            graph = asyncio.get_running_loop().create_task(self.graph.run())
        try:
            while True:
                self.scan()
                await asyncio.sleep(SCAN_PERIOD)
        finally:
            if graph is not None:
                graph.cancel()
            for tap in list(self.taps.values()):
                self._drop(tap)
            if self.services is not None:
                self.services.close()

    def scan(self):
        found = {t: protocols for t, protocols in list_topics(self.root).items() if self.match(t)}
        present = {(t, p) for t, protocols in found.items() for p in WATCHED if p in protocols}
        for key in present - self.taps.keys():
            self._start(*key)
        for key in self.taps.keys() - present:
            self._drop(self.taps[key])
        if self.services is not None:
            self.services.scan([t for t, protocols in found.items() if RPC in protocols])
        if self.graph is not None:
            self.graph.topics = {t for t, protocols in found.items() if PUBSUB in protocols}
        self.scanned = True

    def _start(self, name, protocol=PUBSUB):
        topic = Topic(name, root=self.root)
        try:
            topic_arena(topic, protocol, create=False)  # cached: the reader below uses this mapping
        except A0Error as e:
            _log.debug("view: topic %r (%s) vanished or unreadable: %s", name, protocol, e)
            return
        tap = _Tap(name, topic, protocol)
        self.taps[(name, protocol)] = tap
        self.hub.topics[tap.label] = {"channel": None, "rate": 0.0, "bandwidth": 0.0, "count": 0, "missed": 0,
                                      "last": None, "encoding": None, "protocol": protocol}
        if protocol == PUBSUB:
            # A topic made while the view runs is read from its first packet (its first
            # writers are then seen from their first packet: the graph's attribution).
            init = INIT_OLDEST if self.scanned else INIT_MOST_RECENT
            tap.task = asyncio.get_running_loop().create_task(self._read(tap, init))
        else:
            try:
                tap.listener = self._listen(tap)
            except A0Error as e:
                _log.debug("view: topic %r (%s) unreadable: %s", name, protocol, e)
                self._drop(tap)

    def _drop(self, tap):
        self.taps.pop((tap.name, tap.protocol), None)
        self.hub.topics.pop(tap.label, None)
        if tap.task is not None:
            tap.task.cancel()
        if tap.listener is not None:
            tap.listener.close()
            tap.listener = None
        if tap.channel is not None:
            self.hub.remove_channel(tap.channel)
            tap.channel = None
        if tap.protocol == CFG and self.parameters is not None:
            self.parameters.removed(tap.name)
        if tap.protocol == PUBSUB and self.graph is not None:
            self.graph.forget(tap.name)
        forget_arena(tap.topic, tap.protocol)

    def _listen(self, tap):
        """A log listener or cfg watcher for ``tap``, from its newest packet;
        its callback (on the dispatcher thread) hands each packet to the loop."""
        loop = asyncio.get_running_loop()

        def on_packet(pkt):
            try:
                loop.call_soon_threadsafe(self._deliver, tap, pkt)
            except RuntimeError:  # the loop has closed: the view is stopping
                pass

        if tap.protocol == LOG:
            return LogListener(tap.topic, LogLevel.DBG, on_packet, init=INIT_MOST_RECENT)
        return CfgWatcher(tap.topic, on_packet)

    def _deliver(self, tap, pkt):
        """One packet of a log or cfg tap, on the loop."""
        if self.taps.get((tap.name, tap.protocol)) is not tap:
            return  # dropped since the callback ran
        hub = self.hub
        log_time = _log_time(pkt)
        ch = tap.channel
        if ch is None:
            kind = LOG_KIND if tap.protocol == LOG else kind_of(f"{tap.name}.cfg", pkt.payload, pkt.headers)
            ch = tap.channel = hub.add_channel(tap.label, kind, protocol=tap.protocol)
            hub.topics.pop(tap.label, None)
        ch.missed = tap.listener.missed if tap.listener is not None else ch.missed
        msg = LogMessage(pkt, tap.name, log_time) if tap.protocol == LOG else pkt
        hub.publish(ch, log_time, msg, size=len(pkt.payload))
        if tap.protocol == CFG and self.parameters is not None:
            self.parameters.changed(tap.name, pkt)

    async def _read(self, tap, init=INIT_MOST_RECENT):
        # A corrupt frame is logged and skipped by the reader (logger
        # a0py.pubsub), the packets around it delivered.
        hub = self.hub
        graph = self.graph
        packets = aio_sub(tap.topic, init=init, iter=ITER_NEXT)
        try:
            async for pkt in packets:
                if graph is not None and graph.subscribers:
                    graph.saw(tap.name, pkt)
                ch = tap.channel
                if ch is None:
                    ch = tap.channel = hub.add_channel(tap.name, _kind(tap, pkt))
                    hub.topics.pop(tap.name, None)
                if pkt.missed:
                    ch.missed += pkt.missed
                hub.publish(ch, _log_time(pkt), pkt)
        finally:
            await packets.aclose()


def _kind(tap, pkt):
    """What ``tap``'s topic carries: its schema, when its publisher declared
    one with a message encoding (a typed topic: advertised as it is, see
    :mod:`a0py.view._typed`); else judged from its first packet ``pkt``."""
    try:
        schema = topic_schema(tap.topic)
    except A0Error as e:  # a schema arena that does not read: the topic shows as untyped
        _log.info("view: topic %r: its schema does not read (%s); judged from its packets", tap.name, e)
        schema = None
    if schema is not None and schema.message_encoding:
        return kind_of_schema(tap.name, schema.name, schema.encoding, schema.data, schema.message_encoding)
    return kind_of(tap.name, pkt.payload, pkt.headers)


def _log_time(pkt):
    """A packet's time: its ``a0_time_wall`` (the writer's clock), else now."""
    try:
        return int(pkt.headers.get(TIME_WALL, 0)) or time.time_ns()
    except ValueError:
        return time.time_ns()
