"""The hub: channels, clients, subscriptions, and the fan-out of messages from
a source (live topics or a recording) to the clients that asked for them.

Everything here runs on the server's event loop; nothing blocks it.

Invariants:

* **A slow client costs only itself.** Each client has its own bounded
  outbox (a count and a byte budget); the hub appends and never waits. When a
  client reads more slowly than messages arrive, its outbox drops its own
  oldest messages, counts them, and the client is told (a warning status
  ``a0py.dropped``, and the ``dropped`` field of the stats channel). Other
  clients and the sources never wait for it, and its memory is bounded by the
  outbox budget plus the transport's write limit.
* **Control is never dropped, and bounded.** serverInfo, advertise,
  unadvertise, status and playback state go through a separate queue that is
  never trimmed; a client that lets it grow past :data:`MAX_CONTROL` frames or
  its byte budget (``Hub(control_bytes=...)``, :data:`CONTROL_BYTES`) — by
  sending requests whose replies it does not read — is disconnected: its
  queues are dropped, and it gets one last error status (id
  ``a0py.disconnected``) and a close with code 1008 and the reason. Nothing
  it sends afterwards is looked at.
* **Channel ids are never reused** within a server's life, so a client can
  never mistake a new topic for an old one.
* **One clock.** Every timestamp the hub sends (message data, the stats
  channel) comes from :meth:`Hub.now`: the wall clock for live topics, the
  playback clock of a recording (its log time), so a client that also gets
  ``time`` messages sees one time line.
"""

import asyncio
import collections
import json
import logging
import time

from .._core import PACKET_LAYOUT
from ..proto.packets import PACKET_ENCODING, page_vocabulary
from ..recording.format import join_packet
from . import _protocol as P
from ._outbox import SPLIT_ABOVE, DataOutbox, SplitFrame
from ._schema import PayloadKind
from ._typed import IMAGE_MAX_HZ

__all__ = ["Channel", "Client", "Hub", "STATS_TOPIC"]

_log = logging.getLogger("a0py.view")

# Where an a0py packet holds its payload's offset (a u64).
_PAYLOAD_OFF_AT = PACKET_LAYOUT["payload_off_off"]
#: The channel on which the server publishes, twice a second, the rate,
#: bandwidth and missed count of every topic (JSON).
STATS_TOPIC = "/a0py/view/stats"
MAX_CONTROL = 10_000
#: Bytes of control messages a client may leave unsent before it is disconnected.
CONTROL_BYTES = 16 << 20
#: The WebSocket close code for such a client (policy violation).
CLOSE_POLICY = 1008
#: Log lines kept per log channel for new subscribers.
LOG_BACKLOG = 100
STATS_PERIOD = 0.5
RATE_WINDOW = 2.0
DROP_REPORT_PERIOD = 1.0


class Channel:
    """One advertised channel: a topic and how its messages are encoded.

    ``kind``: a :class:`a0py.view._schema.PayloadKind` (the payload's
    encoding and schema). ``packets``: whether the source has whole a0py
    packets (clients that asked for packets get them, with their headers);
    False for foreign channels of a recording, which send what they hold.
    ``protocol``: the arena the packets come from (``pubsub``, ``log``,
    ``cfg``; see :mod:`a0py.view._logcfg`)."""

    __slots__ = ("backlog", "bytes", "count", "history", "id", "kind", "last_time", "latest", "missed",
                 "packets", "protocol", "subs", "topic")

    def __init__(self, id, topic, kind, packets=True, protocol="pubsub"):
        self.id = id
        self.topic = topic
        self.kind = kind
        self.packets = packets
        self.protocol = protocol
        self.subs = {}  # Client -> subscription id
        self.latest = None  # (log time ns, message)
        # A log's last lines, all sent to a new subscriber (one line says little).
        self.backlog = collections.deque(maxlen=LOG_BACKLOG) if protocol == "log" else None
        self.count = 0
        self.bytes = 0
        self.missed = 0
        self.last_time = None
        self.history = collections.deque(maxlen=int(RATE_WINDOW / STATS_PERIOD) + 1)

    def advert(self, packets):
        """The channel as advertised to a client (``packets``: it asked for
        whole packets)."""
        k = self.kind
        if packets and self.packets:
            # A log packet's payload is its text (the JSON of foxglove.Log is made for other clients).
            payload = "text" if self.protocol == "log" else "json" if k.render else k.encoding
            out = {"id": self.id, "topic": self.topic, "encoding": PACKET_ENCODING,
                   "schemaName": k.schema_name, "schema": k.schema, "payloadEncoding": payload}
            if self.protocol != "pubsub":
                out["a0pyProtocol"] = self.protocol
        else:
            out = {"id": self.id, "topic": self.topic, "encoding": k.encoding, "schemaName": k.schema_name,
                   "schema": k.schema}
        if k.schema_encoding:
            out["schemaEncoding"] = k.schema_encoding
        if packets:  # the page: how what it is sent differs from the channel's messages
            if k.render:
                out["a0pyRendered"] = k.encoding  # the payloads are JSON of the fields of these
            if k.image:
                out["a0pyImage"] = k.image
                out["a0pyMaxHz"] = IMAGE_MAX_HZ
        return out

    def page_interval(self):
        """The least time between two messages of this channel sent to the
        page (images: see :data:`a0py.view._typed.IMAGE_MAX_HZ`)."""
        return 1.0 / IMAGE_MAX_HZ if self.kind.image else 0.0


class Client:
    """One connection: its subscriptions and its bounded outbox."""

    def __init__(self, hub, connection, packets, name, max_hz=None, farewell=None):
        self.hub = hub
        # farewell(status, reason): a coroutine that sends the last status and
        # closes the connection with CLOSE_POLICY (the server's, which knows the
        # transport); by default a plain close.
        self.farewell = farewell
        # Conflation (asked for by the page with ?max_hz=N): at most N messages a
        # second per channel, the newest kept while waiting; 0 sends everything.
        self.min_interval = 1.0 / max_hz if max_hz else 0.0
        self.last_sent = {}  # channel id -> loop time
        self.pending = {}  # channel id -> (subscription id, log time, message)
        self.conflated = 0
        self.connection = connection
        self.packets = packets
        self.name = name
        self.subs = {}  # subscription id -> Channel
        self.control = collections.deque()
        self.control_bytes = 0
        self.max_control_bytes = hub.control_bytes
        # The send budget: per topic the newest messages win (see _outbox).
        self.data = DataOutbox(hub.queue_messages, hub.queue_bytes)
        self.max_messages = hub.queue_messages
        self.max_bytes = hub.queue_bytes
        # Per-topic rate limits the client asked for (subscribe's "maxHz"): channel id -> seconds.
        self.rates = {}
        self.dropped = 0
        self.unreported = 0
        self.sent = 0
        self._last_report = 0.0
        self.wake = asyncio.Event()
        self.closed = False

    # -- the outbox (called by the hub, never waits) --

    def put_control(self, frame):
        if self.closed:
            return
        self.control.append(frame)
        self.control_bytes += len(frame)
        # A single frame (the first advertise of a large view) always goes.
        if len(self.control) > MAX_CONTROL or (self.control_bytes > self.max_control_bytes
                                               and len(self.control) > 1):
            self._disconnect()
            return
        self.wake.set()

    def pop_control(self):
        """The next control frame to send (the sender, in _server, calls this)."""
        frame = self.control.popleft()
        self.control_bytes -= len(frame)
        return frame

    def _disconnect(self):
        n, size = len(self.control), self.control_bytes
        _log.warning("view client %s: %d control messages (%d bytes) unsent: disconnecting it",
                     self.name, n, size)
        limit = (f"{MAX_CONTROL} messages" if n > MAX_CONTROL
                 else f"{self.max_control_bytes / (1 << 20):g} MiB")
        reason = f"over {limit} of replies unsent: read what the server sends"
        status = P.status(P.STATUS_ERROR, (
            f"disconnected: {n} control messages ({size} bytes) were waiting to be sent to this client, "
            f"more than its limit ({limit}): it sends requests faster than it reads the replies"),
            id="a0py.disconnected")
        self.closed = True
        self.control.clear()
        self.control_bytes = 0
        self.data.clear()
        self.pending.clear()
        self.wake.set()  # the sender sees `closed` and stops
        if self.farewell is not None:
            self.hub.loop.create_task(self.farewell(status, reason))
        else:
            self.hub.loop.create_task(self.connection.close(CLOSE_POLICY, reason))

    def put_data(self, frame, ch=None):
        """Queues a data frame of channel ``ch`` (None: the server's own)."""
        if self.closed:  # being disconnected: nothing more is sent
            return
        n = self.data.put(frame, ch)
        if n:
            self.dropped += n
            self.unreported += n
        self.wake.set()

    def pop_data(self):
        """The next data frame to send (the sender, in _server, calls this)."""
        frame = self.data.pop()
        self.sent += 1
        return frame

    def dropped_by_topic(self):
        """{topic: messages dropped} of this client's channels."""
        return {ch.topic: n for ch, n in self.data.dropped.items() if ch is not None}

    def queued(self):
        return len(self.control) + len(self.data)

    def interval(self, ch):
        """The least time between two messages of ``ch`` sent to this client:
        its own ``max_hz``; for the page (a client of packets), at least the
        channel's (images)."""
        interval = max(self.min_interval, self.rates.get(ch.id, 0.0))
        if self.packets:
            return max(interval, ch.page_interval())
        return interval

    def may_send(self, ch, sub_id, log_time, msg, now):
        """Whether a message of ``ch`` goes out now; if not, it is kept as the
        one to send when the channel's interval ends (replacing any older)."""
        interval = self.interval(ch)
        last = self.last_sent.get(ch.id)
        if last is None or now - last >= interval:
            if self.pending.pop(ch.id, None) is not None:
                self.conflated += 1  # older than this one: never sent, never after it
            self.last_sent[ch.id] = now
            return True
        if ch.id in self.pending:
            self.conflated += 1
        else:
            self.hub.loop.call_at(last + interval, self._flush, ch)
        self.pending[ch.id] = (sub_id, log_time, msg)
        return False

    def _flush(self, ch):
        item = self.pending.pop(ch.id, None)
        if item is None or self.closed or self.subs.get(item[0]) is not ch:
            return
        self.last_sent[ch.id] = self.hub.loop.time()
        self.put_data(self.hub._frame(self, ch, *item), ch)

    # -- drop reports (the sender, in _server, calls these) --

    def before_batch(self):
        """Queues the drop report when one is due (at most once a period)."""
        if self.unreported and time.monotonic() - self._last_report >= DROP_REPORT_PERIOD:
            self._report_drops()

    def after_drain(self):
        """The outbox is empty: report the drops now, or when a period has passed."""
        if self.unreported and not self.closed:
            delay = DROP_REPORT_PERIOD - (time.monotonic() - self._last_report)
            if delay <= 0:
                self._report_drops()
                self.wake.set()
            else:
                self.hub.loop.call_later(delay, self.wake.set)

    def _report_drops(self):
        n, self.unreported = self.unreported, 0
        self._last_report = time.monotonic()
        self.put_control(P.status(
            P.STATUS_WARNING,
            f"dropped {n} messages ({self.dropped} in all): this client reads more slowly than its "
            f"subscriptions publish (its queue holds {self.max_messages} messages, "
            f"{self.max_bytes >> 10} KiB)", id="a0py.dropped"))


class Hub:
    """Channels and clients of one server. ``capabilities``, ``data_range``
    go into serverInfo; ``controller`` (a recording's player) gets playback
    control requests and series requests, gives the clock (``now()``) and
    greets each new client (``greeting()``: frames after the advertise)."""

    def __init__(self, name, *, queue_messages=10_000, queue_bytes=8 << 20, control_bytes=CONTROL_BYTES,
                 capabilities=(), data_range=None, metadata=None, controller=None):
        self.name = name
        # Request class -> handler(client, request): the capabilities a source offers
        # (see offer()); a request of a class not here gets an error status.
        self.handlers = {}
        # Why this server offers no more than it does, for those error statuses.
        self.offers_why = "this view shows a recording" if controller is not None else ""
        self.supported_encodings = []
        self.detach_hooks = []  # functions of a client, called when it leaves
        self.greeters = []  # functions of a client, called when it comes (after the advertise)
        self.queue_messages = queue_messages
        self.queue_bytes = queue_bytes
        self.control_bytes = control_bytes
        self.capabilities = list(capabilities)
        self.data_range = data_range
        self.metadata = dict(metadata or {})
        # The page decodes packets itself: it learns their names and their layout
        # (sizes and offsets, from the C header: a0py._core.PACKET_LAYOUT) here, not by heart.
        vocabulary = page_vocabulary()
        self.metadata["a0py.packetEncoding"] = vocabulary["packetEncoding"]
        self.metadata["a0py.standardHeaders"] = ",".join(vocabulary["standardHeaders"])
        self.metadata["a0py.packetLayout"] = json.dumps(PACKET_LAYOUT, separators=(",", ":"), sort_keys=True)
        self.controller = controller
        self.session_id = f"{time.time_ns()}"
        self.channels = {}  # id -> Channel
        self.clients = set()
        self.topics = {}  # name -> stats dict of topics without a channel yet
        self._next_id = 1
        self.loop = None
        stats_kind = PayloadKind("json", "a0py.view.Stats", json.dumps({
            "title": "a0py.view.Stats", "type": "object",
            "properties": {"time": {"type": "integer"}, "dropped": {"type": "integer"},
                           "topics": {"type": "object"}}}), "jsonschema")
        self.stats_channel = self._new_channel(STATS_TOPIC, stats_kind, packets=False)

    # -- channels --

    def _new_channel(self, topic, kind, packets=True, protocol="pubsub"):
        ch = Channel(self._next_id, topic, kind, packets, protocol)
        self._next_id += 1
        self.channels[ch.id] = ch
        return ch

    def add_channel(self, topic, kind, packets=True, protocol="pubsub"):
        """Advertises a new channel to every client; returns it."""
        ch = self._new_channel(topic, kind, packets, protocol)
        for client in self.clients:
            client.put_control(P.advertise([ch.advert(client.packets)]))
        return ch

    def remove_channel(self, ch):
        """Unadvertises ``ch``; its subscriptions end."""
        if self.channels.pop(ch.id, None) is None:
            return
        frame = P.unadvertise([ch.id])
        for client, sub_id in list(ch.subs.items()):
            client.subs.pop(sub_id, None)
        ch.subs.clear()
        for client in self.clients:
            client.put_control(frame)

    def publish(self, ch, log_time, msg, size=None):
        """One message of ``ch``: ``msg`` has ``.payload`` and ``.to_bytes()``
        (the whole a0py packet). Counted, kept as the channel's latest, and
        queued for each subscriber; never waits."""
        ch.count += 1
        ch.bytes += len(msg.payload) if size is None else size
        ch.last_time = log_time
        ch.latest = (log_time, msg)
        if ch.backlog is not None:
            ch.backlog.append(ch.latest)
        if ch.subs:
            payload = page = None
            head = P.message_head
            now = None
            for client, sub_id in ch.subs.items():
                # Log lines and configuration versions are never conflated: each one counts.
                if ch.protocol == "pubsub" and (client.min_interval or ch.id in client.rates
                                                or (client.packets and ch.kind.image)):
                    if now is None:
                        now = self.loop.time()
                    if not client.may_send(ch, sub_id, log_time, msg, now):
                        continue
                if client.packets:
                    if page is None:
                        page = _page_data(ch, msg)
                    data = page
                else:
                    if payload is None:
                        payload = msg.payload
                    data = payload
                if len(data) > SPLIT_ABOVE:
                    client.put_data(SplitFrame(head(sub_id, log_time), data), ch)
                else:
                    client.put_data(head(sub_id, log_time) + data, ch)

    def _frame(self, client, ch, sub_id, log_time, msg):
        data = _page_data(ch, msg) if client.packets else msg.payload
        return P.message_data(sub_id, log_time, data)

    def offer(self, capability, handlers, encodings=()):
        """Offers ``capability`` (advertised in serverInfo): ``handlers`` maps
        request classes (of :mod:`a0py.view._capabilities`) to functions of
        (client, request) that raise :class:`ProtocolError` for a request they
        refuse; ``encodings`` join serverInfo's ``supportedEncodings``."""
        if capability and capability not in self.capabilities:
            self.capabilities.append(capability)
        self.handlers.update(handlers)
        for e in encodings:
            if e not in self.supported_encodings:
                self.supported_encodings.append(e)

    def broadcast_control(self, frame):
        for client in self.clients:
            client.put_control(frame)

    # -- clients --

    def now(self):
        """The time of the hub's clock, ns (see the invariants)."""
        return time.time_ns() if self.controller is None else self.controller.now()

    def attach(self, connection, packets, name, max_hz=None, farewell=None):
        """A new client on ``connection``; ``farewell`` as for :class:`Client`."""
        client = Client(self, connection, packets, name, max_hz, farewell)
        client.put_control(P.server_info(
            self.name, self.capabilities, session_id=self.session_id, metadata=self.metadata,
            data_range=self.data_range, supported_encodings=self.supported_encodings))
        client.put_control(P.advertise([ch.advert(packets) for ch in self.channels.values()]))
        if self.controller is not None:
            for frame in self.controller.greeting():
                client.put_control(frame)
        for greet in self.greeters:
            greet(client)
        self.clients.add(client)
        return client

    def detach(self, client):
        for hook in self.detach_hooks:
            try:
                hook(client)
            except Exception:  # noqa: BLE001 - one feature's cleanup must not stop the others'
                _log.exception("view: cleaning up after client %s", client.name)
        client.closed = True
        client.wake.set()
        self.clients.discard(client)
        for ch in client.subs.values():
            ch.subs.pop(client, None)
        client.subs.clear()
        client.control.clear()
        client.control_bytes = 0
        client.data.clear()
        client.rates.clear()

    def handle(self, client, message):
        """Applies one client message; a bad one gets an error status back.
        Messages of a client being disconnected are ignored."""
        if client.closed:
            return
        try:
            if isinstance(message, str):
                req = P.parse_client_text(message)
            else:
                req = P.parse_client_binary(message)
            if isinstance(req, P.Subscribe):
                self._subscribe(client, req.pairs, req.rates)
            elif isinstance(req, P.Unsubscribe):
                self._unsubscribe(client, req.ids)
            elif isinstance(req, P.PlaybackControl):
                if self.controller is None:
                    raise P.ProtocolError("playback control: this server shows live topics, not a "
                                          "recording (it does not offer 'playbackControl')")
                self.controller.control(req)
            elif isinstance(req, P.FetchSeries):
                if self.controller is None:
                    raise P.ProtocolError("a0py.fetchSeries: this server shows live topics, not a recording "
                                          "(a series over time exists only for recordings)")
                ch = self.channels.get(req.channel_id)
                if ch is None or ch is self.stats_channel:
                    raise P.ProtocolError(f"a0py.fetchSeries: unknown channel id {req.channel_id} (request "
                                          f"{req.request_id})")
                self.controller.fetch_series(client, ch, req)
            else:
                handler = self.handlers.get(type(req))
                if handler is None:
                    raise P.ProtocolError(_not_offered(req, self.offers_why))
                handler(client, req)
        except P.ProtocolError as e:
            client.put_control(P.status(P.STATUS_ERROR, str(e)))

    def _subscribe(self, client, pairs, rates=None):
        errors = []
        for sub_id, channel_id in pairs:
            ch = self.channels.get(channel_id)
            if sub_id in client.subs:
                errors.append(f"subscription id {sub_id} is already in use (unsubscribe it first)")
            elif ch is None:
                errors.append(f"unknown channel id {channel_id} (not advertised, or unadvertised since)")
            elif client in ch.subs:
                errors.append(f"channel {channel_id} ({ch.topic}) is already subscribed by subscription "
                              f"{ch.subs[client]}")
            else:
                client.subs[sub_id] = ch
                ch.subs[client] = sub_id
                if rates and rates.get(sub_id):
                    client.rates[ch.id] = 1.0 / rates[sub_id]
                if ch is self.stats_channel:
                    client.put_data(P.message_data(sub_id, self.now(), self._stats_payload(client)))
                elif ch.backlog:
                    for item in ch.backlog:
                        client.put_data(self._frame(client, ch, sub_id, *item), ch)
                elif ch.latest is not None:
                    # The newest message at once, so a slow topic shows something.
                    client.put_data(self._frame(client, ch, sub_id, *ch.latest), ch)
        if errors:
            raise P.ProtocolError("subscribe: " + "; ".join(errors))

    def _unsubscribe(self, client, ids):
        unknown = []
        for sub_id in ids:
            ch = client.subs.pop(sub_id, None)
            if ch is None:
                unknown.append(sub_id)
            else:
                ch.subs.pop(client, None)
                client.rates.pop(ch.id, None)
        if unknown:
            raise P.ProtocolError(f"unsubscribe: unknown subscription ids {unknown}")

    # -- stats --

    def topic_stats(self):
        """{topic: {rate, bandwidth, count, missed, last, channel}} over the
        last :data:`RATE_WINDOW` seconds."""
        now = time.monotonic()
        out = {}
        for ch in self.channels.values():
            if ch is self.stats_channel:
                continue
            t0, c0, b0 = ch.history[0] if ch.history else (now, ch.count + ch.missed, ch.bytes)
            dt = now - t0
            rate = (ch.count + ch.missed - c0) / dt if dt > 0 else 0.0
            bw = (ch.bytes - b0) / dt if dt > 0 else 0.0
            out[ch.topic] = {"channel": ch.id, "rate": round(rate, 2), "bandwidth": round(bw, 1),
                             "count": ch.count, "missed": ch.missed, "last": ch.last_time,
                             "encoding": ch.kind.encoding, "protocol": ch.protocol}
        for name, st in self.topics.items():
            out.setdefault(name, st)
        return out

    def _stats_payload(self, client, topics=None):
        if topics is None:
            topics = self.topic_stats()
        return json.dumps({"time": self.now(), "dropped": client.dropped, "conflated": client.conflated,
                           "queued": client.queued(), "droppedByTopic": client.dropped_by_topic(),
                           "topics": topics}, separators=(",", ":")).encode()

    async def run_stats(self):
        """Publishes the stats channel every :data:`STATS_PERIOD` seconds."""
        ch = self.stats_channel
        while True:
            now = time.monotonic()
            for c in self.channels.values():
                c.history.append((now, c.count + c.missed, c.bytes))
            topics = self.topic_stats()
            now = self.now()
            for client, sub_id in list(ch.subs.items()):
                client.put_data(P.message_data(sub_id, now, self._stats_payload(client, topics)))
            await asyncio.sleep(STATS_PERIOD)


# What each capability's requests are called, for the error a server without it sends.
_REQUEST_CAPABILITY = {
    "ClientAdvertise": ("advertise", "clientPublish"), "ClientUnadvertise": ("unadvertise", "clientPublish"),
    "ClientMessage": ("client message data", "clientPublish"),
    "GetParameters": ("getParameters", "parameters"), "SetParameters": ("setParameters", "parameters"),
    "ParameterSubscription": ("parameter subscriptions", "parametersSubscribe"),
    "ServiceCall": ("service calls", "services"),
    "GraphSubscription": ("connection graph subscriptions", "connectionGraph"),
}


def _not_offered(req, why):
    what, capability = _REQUEST_CAPABILITY.get(type(req).__name__, (type(req).__name__, "?"))
    return (f"{what}: not supported by this server (it does not offer the {capability!r} capability"
            f"{': ' + why if why else ''})")


def _page_data(ch, msg):
    """What the page (a client of packets) is sent for ``msg`` of ``ch``: the
    whole packet when the source has packets, else the message; with its
    payload replaced by the JSON of its fields when the channel's kind
    renders it (:mod:`a0py.view._typed`)."""
    render = ch.kind.render
    if ch.packets:
        packet = msg.to_bytes()
        if render is None:
            return packet
        # The packet up to its payload (the payload is its last part), then the rendered payload.
        off = int.from_bytes(packet[_PAYLOAD_OFF_AT:_PAYLOAD_OFF_AT + 8], "little")
        return join_packet(memoryview(packet)[:off], render(msg.payload))
    return msg.payload if render is None else render(msg.payload)
