"""The live source: the pub/sub topics under a root, each read by a tap that
feeds the hub.

A topic is found by listing the root (:func:`list_pubsub_topics`, every
:data:`SCAN_PERIOD` seconds; the one place to swap in ``a0py.Discovery``),
filtered by the view's globs. Its tap is an :func:`a0py.aio_sub` reader
started at the most recent packet, so a topic that published before the view
started shows its latest value at once. The channel is advertised when the
first packet tells what the payloads are (JSON or bytes, see
:mod:`a0py.view._schema`); a topic whose arena is removed is unadvertised and
its mapping dropped, so a topic made again under the same name is a new
channel.

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
from ..proto.packets import TIME_WALL
from ..proto.pubsub import INIT_MOST_RECENT, ITER_NEXT
from ..proto.topic import PUBSUB, Topic, forget_arena, list_topics, topic_arena
from ._schema import kind_of

__all__ = ["LiveSource", "list_pubsub_topics"]

_log = logging.getLogger("a0py.view")

SCAN_PERIOD = 0.2


def list_pubsub_topics(root=None):
    """The names of the topics under ``root`` that have a pub/sub arena."""
    return [t for t, protocols in list_topics(root).items() if PUBSUB in protocols]


def _matcher(globs):
    if not globs:
        return lambda name: True
    pats = [g[1:] if g.startswith("/") else g for g in globs]
    return lambda name: any(fnmatch.fnmatchcase(name, p) for p in pats)


class _Tap:
    __slots__ = ("channel", "name", "task", "topic")

    def __init__(self, name, topic):
        self.name = name
        self.topic = topic
        self.channel = None
        self.task = None


class LiveSource:
    """Watches the topics matching ``globs`` (None: all) under ``root``
    (default ``A0PY_ROOT``) and publishes their packets into ``hub``."""

    def __init__(self, hub, globs=None, root=None):
        self.hub = hub
        self.root = root
        self.match = _matcher(globs)
        self.taps = {}

    async def run(self):
        try:
            while True:
                self.scan()
                await asyncio.sleep(SCAN_PERIOD)
        finally:
            for tap in list(self.taps.values()):
                self._drop(tap)

    def scan(self):
        present = {t for t in list_pubsub_topics(self.root) if self.match(t)}
        for name in present - self.taps.keys():
            self._start(name)
        for name in self.taps.keys() - present:
            self._drop(self.taps[name])

    def _start(self, name):
        topic = Topic(name, root=self.root)
        try:
            topic_arena(topic, PUBSUB, create=False)  # cached: the reader below uses this mapping
        except A0Error as e:
            _log.debug("view: topic %r vanished or unreadable: %s", name, e)
            return
        tap = _Tap(name, topic)
        self.taps[name] = tap
        self.hub.topics[name] = {"channel": None, "rate": 0.0, "bandwidth": 0.0, "count": 0, "missed": 0,
                                 "last": None, "encoding": None}
        tap.task = asyncio.get_running_loop().create_task(self._read(tap))

    def _drop(self, tap):
        self.taps.pop(tap.name, None)
        self.hub.topics.pop(tap.name, None)
        if tap.task is not None:
            tap.task.cancel()
        if tap.channel is not None:
            self.hub.remove_channel(tap.channel)
            tap.channel = None
        forget_arena(tap.topic, PUBSUB)

    async def _read(self, tap):
        # A corrupt frame is logged and skipped by the reader (logger
        # a0py.pubsub), the packets around it delivered.
        hub = self.hub
        packets = aio_sub(tap.topic, init=INIT_MOST_RECENT, iter=ITER_NEXT)
        try:
            async for pkt in packets:
                ch = tap.channel
                if ch is None:
                    ch = tap.channel = hub.add_channel(tap.name, kind_of(tap.name, pkt.payload, pkt.headers))
                    hub.topics.pop(tap.name, None)
                if pkt.missed:
                    ch.missed += pkt.missed
                try:
                    log_time = int(pkt.headers.get(TIME_WALL, 0)) or time.time_ns()
                except ValueError:
                    log_time = time.time_ns()
                hub.publish(ch, log_time, pkt)
        finally:
            await packets.aclose()
