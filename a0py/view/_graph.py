"""The connection graph (the protocol's ``connectionGraph``): which
processes publish and subscribe to each topic the view watches, and which
serve its RPC.

What a0py knows for sure, and how the graph is drawn from it:

* **Who has a topic open.** A process that publishes or subscribes keeps the
  topic's pub/sub arena mapped while it runs, and the mapping goes with it
  however it ends; ``/proc/PID/maps`` tells them (this user's processes; all of
  them for root). The view itself is left out, except as the publisher of its
  clients' channels.
* **Who writes.** Every packet names its writer (``a0_writer_id``), which the
  view's tap reads; the live writers of a topic are those seen while their
  process is attached.
* **Who serves RPC.** The server's pid, from the rpc arena's deadman (exact).

A mapping does not say which side a process is on (readers map the arena
read-write too, to wait on it), and a writer id does not say its pid: a writer
is *attributed* to a process when that is the only attached process of the
topic not attributed yet, or the only one that came to the topic within
:data:`ATTRIBUTION_WINDOW` seconds before the writer's first packet was
written, as happens when a publisher process starts (a process came after
the last read of the graph that did not see it, and after it started). An
attributed process is a publisher of the topic; the other attached processes
are its subscribers; a writer that cannot be attributed is a publisher of its
own, ``writer 1a2b3c4d``. Processes are named ``COMMAND [PID]``.

The graph is read every :data:`PERIOD` seconds while a client subscribes to
it (the reading of ``/proc`` runs off the event loop); each change is sent as
one ``connectionGraphUpdate`` holding the entries that changed and the topics
and services gone, a new subscriber gets the whole graph first.
"""

import asyncio
import logging
import os
import time

from ..proto.packets import TIME_WALL, WRITER_ID
from ..proto.processes import arena_path, attached, command_line
from ..proto.topic import PUBSUB, Topic
from . import _capabilities as C

__all__ = ["ATTRIBUTION_WINDOW", "PERIOD", "ConnectionGraph", "command_of"]

_log = logging.getLogger("a0py.view")

PERIOD = 0.5
ATTRIBUTION_WINDOW = 2.0
#: How far apart two clocks compared here may be (a process's start time is in 10 ms ticks).
CLOCK_SLACK = 0.02
#: A writer not attributed to a process is dropped when silent this long (seconds).
WRITER_TTL = 5.0
_NAME_WIDTH = 34
_TICKS = os.sysconf("SC_CLK_TCK")


def command_of(pid):
    """``python3 pub.py [1234]``: a process's command line, paths as their
    base names and a ``-c`` program as ``…``, cut to fit, and its pid."""
    argv = command_line(pid)
    words = []
    for i, a in enumerate(argv):
        if i and argv[i - 1] == "-c":
            words.append("…")
        else:
            words.append(os.path.basename(a) if "/" in a and not a.startswith("-") else a)
    text = " ".join(" ".join(words).split()) or "?"
    if len(text) > _NAME_WIDTH:
        text = text[:_NAME_WIDTH - 1] + "…"
    return f"{text} [{pid}]"


def _started(pid):
    """When ``pid`` started, in seconds of CLOCK_BOOTTIME (None if unknown)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2:].split()[19]) / _TICKS
    except (OSError, ValueError, IndexError):
        return None


class _Writer:
    __slots__ = ("first", "last", "pid")

    def __init__(self, now):
        self.first = now
        self.last = now
        self.pid = None


class ConnectionGraph:
    """The graph of the pub/sub topics and RPC servers the live source
    watches, for the clients of ``hub`` that subscribe to it.
    ``publishing`` (:class:`a0py.view._publish.ClientPublishing`) and
    ``services`` (:class:`a0py.view._services.Services`) tell the view's own
    publishers and the live servers."""

    def __init__(self, hub, root, publishing=None, services=None):
        self.hub = hub
        self.root = root
        self.publishing = publishing
        self.services = services
        self.topics = set()  # pub/sub topics watched (the source keeps it)
        self.subscribers = set()
        self.writers = {}  # topic -> {writer id: _Writer}
        self.came = {}  # (topic, pid) -> boot-time seconds it was first seen mapping the topic
        self.names = {}  # pid -> its name
        self.started = {}  # pid -> boot-time seconds it started
        self._fresh = True  # the next read is the first since a client subscribed
        self._last_read = None  # boot-time seconds of the last read
        self.graph = None  # (published, subscribed, services) last sent
        self._wake = None
        self.me = f"a0py view [{os.getpid()}]"

    def install(self):
        self.hub.offer("connectionGraph", {C.GraphSubscription: self.subscription})
        self.hub.detach_hooks.append(self.subscribers.discard)

    @property
    def active(self):
        return bool(self.subscribers)

    # -- what the source tells (on the loop)

    def saw(self, topic, pkt):
        """A packet of ``topic`` read by the view (while :attr:`active`): its writer is live."""
        headers = pkt.headers
        wid = headers.get(WRITER_ID)
        if wid is None:
            return
        now = time.clock_gettime(time.CLOCK_BOOTTIME)
        known = self.writers.setdefault(topic, {})
        w = known.get(wid)
        if w is None:
            # When it was written (its writer's wall clock, on the boot clock), not when the view read it.
            try:
                age = max(0.0, (time.time_ns() - int(headers.get(TIME_WALL, 0))) / 1e9)
            except ValueError:
                age = 0.0
            known[wid] = _Writer(now - age if age < ATTRIBUTION_WINDOW else now)

        else:
            w.last = now

    def forget(self, topic):
        self.writers.pop(topic, None)

    # -- requests

    def subscription(self, client, req):
        if not req.subscribe:
            self.subscribers.discard(client)
            return
        first = not self.subscribers
        self.subscribers.add(client)
        if first:  # what was learnt while nobody watched is stale
            self.writers.clear()
            self.came.clear()
            self._fresh = True
            self._last_read = None
        if self.graph is not None and not first:
            client.put_control(C.connection_graph_update(*self.graph))
        else:
            self.graph = None  # read it now and send it whole to everyone
            if self._wake is not None:
                self._wake.set()

    # -- reading it

    async def run(self):
        """Reads the graph every :data:`PERIOD` seconds while a client subscribes."""
        self._wake = asyncio.Event()
        while True:
            if self.subscribers:
                try:
                    await self.refresh()
                except Exception:  # noqa: BLE001 - a bad read must not end the graph for good
                    _log.exception("view: reading the connection graph")
            try:
                await asyncio.wait_for(self._wake.wait(), PERIOD if self.subscribers else None)
            except TimeoutError:
                pass
            self._wake.clear()

    async def refresh(self):
        topics = sorted(self.topics)
        paths = {arena_path(self.root, Topic(t, root=self.root).location(PUBSUB)): t for t in topics}
        found = await asyncio.to_thread(attached, paths)
        holders = {t: set() for t in topics}
        for path, pids in found.items():
            holders[paths[path]].update(pids)
        servers = self.services.servers() if self.services is not None else {}
        await asyncio.to_thread(self._name, {p for ps in holders.values() for p in ps} | set(servers.values()))
        self._send(self._draw(holders, servers))

    def _name(self, pids):
        for pid in pids:
            if pid not in self.names:
                self.names[pid] = command_of(pid)
                self.started[pid] = _started(pid)
        for pid in set(self.names) - pids:
            self.names.pop(pid, None)
            self.started.pop(pid, None)

    def _draw(self, attached, servers):
        now = time.clock_gettime(time.CLOCK_BOOTTIME)
        fresh, self._fresh = self._fresh, False
        own = self.publishing.writer_ids() if self.publishing is not None else {}
        published, subscribed = {}, {}
        # When a process came to a topic, at the earliest: after the read that did not see it yet
        # (when it started, for one there already at the first read).
        since = now if fresh or self._last_read is None else self._last_read
        self._last_read = now
        for topic, pids in attached.items():
            for pid in pids:
                started = self.started.get(pid)
                came = (started or since) if fresh else max(since, started or since)
                self.came.setdefault((topic, pid), came)
            writers = self.writers.get(topic, {})
            pubs = set()
            for wid, w in list(writers.items()):
                if wid in own.get(topic, ()):
                    continue
                if (w.pid is not None and w.pid not in pids) or (w.pid is None and now - w.last > WRITER_TTL):
                    del writers[wid]  # its process is gone, or it has been silent for long
                    continue
                if w.pid is None:
                    w.pid = self._attribute(topic, w, pids, writers)
                pubs.add(self.names.get(w.pid, f"[{w.pid}]") if w.pid is not None else f"writer {wid[:8]}")
            if own.get(topic):
                pubs.add(self.me)
            subs = {self.names.get(p, f"[{p}]") for p in pids
                    if not any(w.pid == p for w in writers.values())}
            if pubs:
                published[topic] = sorted(pubs)
            if subs:
                subscribed[topic] = sorted(subs)
        for key in [k for k in self.came if k[1] not in attached.get(k[0], ())]:
            del self.came[key]
        provided = {topic: [self.names.get(pid, f"[{pid}]")] for topic, pid in servers.items()}
        return published, subscribed, provided

    def _attribute(self, topic, writer, pids, writers):
        """The pid ``writer`` of ``topic`` is attributed to, or None (see the module doc)."""
        taken = {w.pid for w in writers.values() if w.pid is not None}
        free = [p for p in pids if p not in taken]
        if len(free) == 1:
            return free[0]
        # Its writer came before its first packet (by more than the clocks' slack), and not long before.
        recent = [p for p in free
                  if writer.first - ATTRIBUTION_WINDOW <= self.came[(topic, p)] < writer.first - CLOCK_SLACK]
        return recent[0] if len(recent) == 1 else None

    def _send(self, graph):
        old = self.graph
        self.graph = graph
        if old is None:
            frame = C.connection_graph_update(*graph)
        elif old == graph:
            return
        else:
            frame = C.connection_graph_update(*_diff(old, graph))
        for client in self.subscribers:
            client.put_control(frame)


def _diff(old, new):
    """The update from graph ``old`` to ``new`` (each: published, subscribed, services)."""
    (op, os_, osv), (np, ns, nsv) = old, new
    published = {t: ids for t, ids in np.items() if op.get(t) != ids}
    subscribed = {t: ids for t, ids in ns.items() if os_.get(t) != ids}
    topics = set(np) | set(ns)
    # A topic still in the graph that lost all its publishers (or subscribers): an empty list says so.
    published.update({t: [] for t in op if t not in np and t in topics})
    subscribed.update({t: [] for t in os_ if t not in ns and t in topics})
    services = {s: ids for s, ids in nsv.items() if osv.get(s) != ids}
    removed_topics = sorted((set(op) | set(os_)) - topics)
    removed_services = sorted(set(osv) - set(nsv))
    return published, subscribed, services, removed_topics, removed_services
