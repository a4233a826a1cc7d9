"""RPC and PRPC across the bridge: a client on one machine calls a server on another.

The request/reply protocol (:mod:`a0py.proto.reqrep_wire`) is packets in one ring per
topic — request, accept, reply, cancel, start — plus the arena's deadman, held by the
live server. The bridge mirrors exactly that, on both machines:

* **Server side** (:class:`_LocalServerTopic`, the machine whose server is alive). The bridge
  watches each local ``rpc``/``prpc`` arena matching its globs. While a server of
  another process holds the deadman it declares a Zenoh *liveliness token*
  ``<prefix>/rpc-server/<bridge>-<generation>/<protocol>/<topic>``; it writes the
  requests other bridges send into the arena as a client would (same request id,
  headers and payload, the deadline moved onto this machine's clock), and sends back
  what the server writes about them: accepts, replies, and a start (a new server: the
  accepted calls are dead). When the server dies it sends *gone* to every bridge with
  a call pending, then withdraws the token.
* **Client side** (:class:`_RemoteServerStandIn`, a machine where a remote server is announced).
  The bridge stands in for the server: it takes the topic's deadman (so local clients
  see a live server, and a local server, if one is alive, keeps the topic), writes a
  start, reads requests and cancels from the ring and sends them to the server's
  bridge, and writes the accepts and replies it gets back. When the remote server is
  gone (gone, or its token withdrawn because its bridge died or the link went down)
  it releases the deadman.

So a local client's rules hold across: its timeouts and ``wait_for_server`` are its
own; a request the remote server accepted and did not answer before it died fails with
:class:`a0py.RpcServerDiedError` (the client sees the deadman released, or a start);
a timed-out or cancelled call writes a cancel, which reaches the server's
``on_cancel``; an error reply is :class:`a0py.RpcRemoteError`, an expired one
:class:`a0py.A0TimeoutError`.

Invariants:

* A bridge announces only servers of other processes (never its own stand-in), so no
  request crosses the network twice, whatever the topology.
* A request is written on the server's machine at most once. One its server had not
  accepted when it died stays in that ring, as a local client's would: the next server
  there serves it, and both bridges keep its route (which bridge asked, which bridge
  holds it) until it is answered or cancelled, whichever server the client's machine
  stands in for meanwhile.
* Nothing received is trusted: a message whose attachment, key or packet does not
  parse, or that names a request this bridge did not forward, is counted and dropped.
* Requests waiting on the client's machine when the stand-in starts are served as a
  server would serve them: the ones older than the default ``max_age`` (10 s) get an
  ``expired`` reply (the remote server's own ``max_age`` counts from the moment its
  bridge wrote the request).
"""

import logging
import os
import threading
import time

from .. import _core
from ..errors import A0Error, A0TimeoutError, PacketCorruptError
from ..proto.deadman import keeper_call
from ..proto.reqrep_wire import (
    DEADLINE,
    DEFAULT_MAX_AGE_S,
    DONE,
    POLL_S,
    READ_BATCH,
    READER_INIT_AWAIT_NEW,
    READER_INIT_OLDEST,
    READER_ITER_NEXT,
    REQ,
    S_EXPIRED,
    S_OK,
    SERVER,
    STATUS,
    T_ACCEPT,
    T_CANCEL,
    T_REPLY,
    T_REQUEST,
    T_START,
    THROUGH,
    TYPE,
    accept_headers,
    cancel_headers,
    forget_taken,
    header_int,
    live_server_pid,
    past_deadline,
    reply_headers,
    request_age_s,
    start_headers,
)
from ..proto.topic import PRPC, Topic, topic_arena
from .wire import (
    BACK_CHUNK,
    CALL_CHUNK,
    K_ACCEPT,
    K_CANCEL,
    K_GONE,
    K_REPLY,
    K_REQUEST,
    K_START,
    SERVER_CHUNK,
    RpcAttachment,
    WireError,
    reqrep_key,
    server_token_key,
    topic_of_reqrep_key,
)

__all__ = ["BUDGET", "RpcForwarder"]

_log = logging.getLogger("a0py.bridge")

#: Header of a forwarded request: nanoseconds left before its client's deadline (the
#: deadline itself is on the client machine's monotonic clock).
BUDGET = "a0py.bridge.budget_ns"
_STANDARD = frozenset(_core.STANDARD_HEADERS)
_STOP_S = 5.0


def _ends(protocol, h):
    """Whether a reply with headers `h` is its request's last message."""
    return protocol != PRPC or h.get(DONE) == "1" or h.get(STATUS, S_OK) != S_OK


class _BridgedRpcTopic:
    """What the two sides share: the topic's arena, a reader thread, a writer."""

    def __init__(self, forwarder, protocol, name, init, create):
        self.forwarder = forwarder
        self.protocol = protocol
        self.name = name
        self.key = (protocol, name)
        self.label = f"bridged {protocol} topic {name!r}"
        self.counts = forwarder.bridge.counts_of(protocol, name)
        self.arena = topic_arena(Topic(name, root=forwarder.bridge.root), protocol, create=create)
        self.deadman = _core.Deadman(self.arena)
        self.lock = threading.RLock()
        self.writer = _core.PacketWriter(self.arena, self.label)
        # What the bridge writes here stands for a process on another machine (its
        # requests, or its server's accepts and replies): relayed, as the importer's.
        self.writer.relayed = True
        self.reader = _core.PacketReader(self.arena, init, READER_ITER_NEXT, self.label)
        self.closed = False
        self.thread = threading.Thread(target=self._run, name=f"a0py-bridge-{protocol}", daemon=True)

    def _run(self):
        while not self.closed:
            try:
                try:
                    first = self.reader.read_blocking(POLL_S)
                except A0TimeoutError:
                    batch = []
                else:
                    batch = [first, *self.reader.read_batch(READ_BATCH)]
                with self.lock:
                    if self.closed:
                        return
                    for pkt in batch:
                        if type(pkt) is not PacketCorruptError:
                            self.on_packet(pkt, pkt.headers)
                    self.tick()
            except Exception:
                if self.closed:
                    return
                _log.exception("bridge: %s", self.label)
                time.sleep(POLL_S)

    def send(self, chunk, to_hex, kind, data=b"", generation=0):
        self.forwarder.send(reqrep_key(self.forwarder.prefix, chunk, to_hex, self.protocol, self.name),
                     kind, data, generation)

    def close(self):
        with self.lock:
            self.closed = True
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(_STOP_S)
        self.finish()
        self.reader.close()
        self.writer.close()


class _LocalServerTopic(_BridgedRpcTopic):
    """A local topic whose server may be alive: announced while it is, requests from
    other bridges written into it, what the server answers sent back."""

    def __init__(self, forwarder, protocol, name):
        super().__init__(forwarder, protocol, name, READER_INIT_AWAIT_NEW, create=False)
        self.token = None
        self.generation = 0
        self.calls = {}  # request id -> [client bridge hex, seq here, accepted]
        self.thread.start()

    def on_request(self, sender, pkt):
        """A request from the bridge `sender` (hex); on a Zenoh thread."""
        with self.lock:
            if self.closed or pkt.id in self.calls:
                self.counts.duplicates += pkt.id in self.calls
                return
            headers = [(k, v) for k, v in pkt.headers if k not in _STANDARD and k != BUDGET
                       and k != DEADLINE]
            budget = pkt.headers.get(BUDGET)
            if budget is not None:
                headers.append((DEADLINE, str(time.monotonic_ns() + max(0, header_int(budget)))))
            try:
                seq = self.writer.pub(_core.Packet(headers, pkt.payload, id=pkt.id))
            except A0Error as e:
                self.counts.write_errors += 1
                _log.warning("bridge: cannot write a request into %s: %s", self.label, e)
                return
            self.calls[pkt.id] = [sender, seq, False]
            self.counts.imported += 1

    def on_cancel(self, rid):
        with self.lock:
            if self.calls.pop(rid, None) is not None:
                self.writer.pub(b"", cancel_headers(rid))

    def on_packet(self, pkt, h):
        kind = h.get(TYPE)
        if kind == T_REPLY:
            rid = h.get(REQ)
            call = self.calls.get(rid)
            if call is None:
                return
            if _ends(self.protocol, h):
                del self.calls[rid]
            self.send(BACK_CHUNK, call[0], K_REPLY, pkt.to_bytes(), self.generation)
            self.counts.exported += 1
        elif kind == T_ACCEPT:
            through = header_int(h.get(THROUGH))
            by_client = {}
            for rid, call in self.calls.items():
                if not call[2] and call[1] <= through:
                    call[2] = True
                    by_client.setdefault(call[0], []).append((REQ, rid))
            for client, reqs in by_client.items():
                self.send(BACK_CHUNK, client, K_ACCEPT, _core.Packet(reqs, b"").to_bytes(), self.generation)
        elif kind == T_START:
            # A new server: the calls the last one accepted are dead (their clients are
            # told by the start); the others wait for the new one, which serves them.
            dead = {}
            for rid, call in list(self.calls.items()):
                if call[2]:
                    del self.calls[rid]
                    dead.setdefault(call[0], True)
            start = _core.Packet([(SERVER, h.get(SERVER, "?"))], b"").to_bytes()
            for client in dead:
                self.send(BACK_CHUNK, client, K_START, start, self.generation)
            # A server that started after the last one died: announced before anything
            # it writes is sent (its accepts and replies carry its generation).
            self._announce()

    def _announce(self):
        """Declares the token of a server found alive: a new generation, so that what
        this bridge sends for it is told from what it sent for the one before."""
        forwarder = self.forwarder
        if self.token is None and not forwarder.proxied(self.key):
            self.generation += 1
            self.token = forwarder.declare_token(server_token_key(
                forwarder.prefix, forwarder.id_hex, self.generation, self.protocol, self.name))

    def tick(self):
        alive = live_server_pid(self.deadman) is not None and not self.forwarder.proxied(self.key)
        if alive and self.token is None:
            self._announce()
        elif not alive and self.token is not None:
            # Whatever the server wrote before it died was sent above (this runs after
            # each read); the clients' bridges hear of the death after it.
            self._gone()

    def _gone(self):
        clients = {call[0] for call in self.calls.values()}
        # the accepted calls died with the server; the others wait in the ring for the next
        self.calls = {rid: call for rid, call in self.calls.items() if not call[2]}
        for client in clients:
            self.send(BACK_CHUNK, client, K_GONE, b"", self.generation)
        token, self.token = self.token, None
        if token is not None:
            self.forwarder.undeclare(token)

    def finish(self):
        with self.lock:
            if self.token is not None:
                self._gone()


class _RemoteServerStandIn(_BridgedRpcTopic):
    """A local stand-in for a remote server of `name`: holds the topic's deadman while a
    remote server is alive, forwards requests and cancels, writes back what comes."""

    def __init__(self, forwarder, protocol, name):
        super().__init__(forwarder, protocol, name, READER_INIT_OLDEST, create=True)
        self.servers = {}     # (bridge hex, generation) -> True: remote servers announced
        self.server = None    # the one we stand in for, while we hold the deadman
        self.taking = False   # the deadman is ours or about to be: this machine's bridge
        #                       must not announce it as a local server
        self.scanning = True  # reading what was in the ring before our first look
        self.pending = {}     # request id -> packet: waiting for a server
        self.forwarded = {}   # request id -> [seq here, packet, accepted, the server's bridge hex]
        self.thread.start()

    @property
    def held(self):
        return self.server is not None

    def on_announce(self, who, alive):
        with self.lock:
            if alive:
                self.servers[who] = True
            else:
                self.servers.pop(who, None)
                if who == self.server:
                    self._release()

    def on_packet(self, pkt, h):
        kind = h.get(TYPE)
        if kind == T_REQUEST:
            if self.held and not self.scanning:
                self._forward(pkt)
            else:
                self.pending[pkt.id] = pkt
        elif kind == T_CANCEL:
            rid = h.get(REQ)
            self.pending.pop(rid, None)
            call = self.forwarded.pop(rid, None)
            if call is not None:
                self.send(CALL_CHUNK, call[3], K_CANCEL, _core.Packet([(REQ, rid)], b"").to_bytes())
        else:
            forget_taken(self.pending, kind, h)  # another server took them

    def tick(self):
        if self.scanning and not self.reader.can_read():
            self.scanning = False
        if self.held or not self.servers or self.scanning:
            return
        self._take(next(iter(self.servers)))

    def _take(self, server):
        """Stands in for `server` ((bridge hex, generation)) if no local server holds the
        deadman: takes it, writes a start (as a server does before it accepts anything),
        sends the requests waiting here."""
        self.taking = True
        if not keeper_call(self.deadman.try_take):
            self.taking = False
            return  # a local server (or another stand-in) serves the topic
        self.server = server
        self.writer.pub(b"", start_headers(f"bridge {self.forwarder.id_hex} pid {os.getpid()}"))
        now = time.monotonic_ns()
        pending, self.pending = self.pending, {}
        for rid, pkt in pending.items():
            h = pkt.headers
            if past_deadline(h, now):
                continue
            age_s = request_age_s(h, now)
            if age_s > DEFAULT_MAX_AGE_S:
                reply = reply_headers(rid, S_EXPIRED, True if self.protocol == PRPC else None)
                self.writer.pub(f"request {rid} was {age_s:.1f} s old when the bridge found a server "
                                f"for it (at most {DEFAULT_MAX_AGE_S} s)", reply)
                continue
            self._forward(pkt)

    def _forward(self, pkt):
        h = pkt.headers
        now = time.monotonic_ns()
        if past_deadline(h, now):
            return
        headers = [(k, v) for k, v in h.items() if k not in _STANDARD and k != DEADLINE]
        deadline = h.get(DEADLINE)
        if deadline is not None:
            headers.append((BUDGET, str(header_int(deadline, now) - now)))
        self.forwarded[pkt.id] = [pkt.seq, pkt, False, self.server[0]]
        self.send(CALL_CHUNK, self.server[0], K_REQUEST,
                  _core.Packet(headers, pkt.payload, id=pkt.id).to_bytes())
        self.counts.exported += 1

    def _release(self):
        """The remote server is gone: the local clients see the deadman released (the
        calls it accepted fail). The requests it had not accepted wait in its ring for
        the next server there, whose answers still come back here."""
        self.server = None
        self.forwarded = {rid: c for rid, c in self.forwarded.items() if not c[2]}
        try:
            keeper_call(self.deadman.release)
        except A0Error as e:
            _log.debug("bridge: releasing %s: %s", self.label, e)
        self.taking = False

    def on_back(self, kind, generation, sender_hex, pkt):
        """A message from the server's bridge; on a Zenoh thread."""
        with self.lock:
            who = (sender_hex, generation)
            current = self.server == who
            if self.closed or (kind in (K_START, K_GONE) and not current):
                return  # news of a server this bridge no longer stands in for
            if not self.held and not self.scanning and kind in (K_ACCEPT, K_REPLY):
                # A new server there answers a request it found waiting in its ring,
                # before its token reached us: stand in for it first, so that our start
                # comes before its accept, as a server's own start does.
                self.servers[who] = True
                self._take(who)
            h = pkt.headers
            if kind == K_REPLY:
                rid = h.get(REQ)
                call = self.forwarded.get(rid)
                if call is None or call[3] != sender_hex:
                    return  # cancelled here meanwhile, or not sent there
                if _ends(self.protocol, h):
                    del self.forwarded[rid]
                self.writer.pub(pkt)
                self.counts.imported += 1
            elif kind == K_ACCEPT:
                through = 0
                for rid in h.getall(REQ):
                    call = self.forwarded.get(rid)
                    if call is not None and call[3] == sender_hex:
                        call[2] = True
                        through = max(through, call[0])
                if through:
                    self.writer.pub(b"", accept_headers(through))
            elif kind == K_START:
                self.forwarded = {rid: c for rid, c in self.forwarded.items()
                                  if not (c[2] and c[3] == sender_hex)}
                self.writer.pub(b"", start_headers(h.get(SERVER, "?")))
            elif kind == K_GONE:
                self.servers.pop(self.server, None)
                self._release()

    def finish(self):
        with self.lock:
            if self.held:
                self.server = None
                try:
                    keeper_call(self.deadman.release)
                except A0Error:
                    pass
            self.taking = False


class RpcForwarder:
    """The bridge's RPC and PRPC forwarding (see the module doc): the local topics whose
    servers it announces, its stand-ins for remote servers, and their Zenoh traffic."""

    def __init__(self, bridge):
        self.bridge = bridge
        self.prefix = bridge.prefix
        self.id_hex = bridge.id
        self._lock = threading.Lock()
        self._served = {}   # (protocol, name) -> _LocalServerTopic
        self._proxies = {}  # (protocol, name) -> _RemoteServerStandIn
        self._closed = False
        session = bridge.session
        zenoh = bridge.zenoh
        self._reliable = dict(congestion_control=zenoh.CongestionControl.BLOCK)
        self._subs = [
            session.declare_subscriber(f"{self.prefix}/{CALL_CHUNK}/{self.id_hex}/**", self._on_call),
            session.declare_subscriber(f"{self.prefix}/{BACK_CHUNK}/{self.id_hex}/**", self._on_back),
        ]
        self._live = session.liveliness().declare_subscriber(
            f"{self.prefix}/{SERVER_CHUNK}/**", self._on_token, history=True)

    # --- what the endpoints use

    def proxied(self, key):
        proxy = self._proxies.get(key)
        return proxy is not None and proxy.taking

    def declare_token(self, key):
        return self.bridge.session.liveliness().declare_token(key)

    def undeclare(self, token):
        try:
            token.undeclare()
        except Exception as e:  # the session closed first
            _log.debug("bridge: withdrawing a server token: %s", e)

    def send(self, key, kind, data, generation):
        att = RpcAttachment(kind, self.bridge.id_bytes, generation).encode()
        try:
            self.bridge.session.put(key, data, attachment=att, **self._reliable)
        except Exception as e:  # zenoh's ZError: the session is closing
            _log.debug("bridge: sending on %s: %s", key, e)

    # --- local topics

    def on_local(self, protocol, name):
        """A local ``rpc``/``prpc`` arena of a matching topic exists (discovery)."""
        key = (protocol, name)
        with self._lock:
            if self._closed or key in self._served:
                return
            self._served[key] = None
        try:
            served = _LocalServerTopic(self, protocol, name)
        except Exception:
            with self._lock:
                del self._served[key]
            raise
        with self._lock:
            self._served[key] = served
            closed = self._closed
        if closed:
            served.close()

    # --- Zenoh callbacks (nothing in a sample is trusted)

    def _parse(self, chunk, sample):
        try:
            who, protocol, name = topic_of_reqrep_key(self.prefix, chunk, str(sample.key_expr))
            raw = sample.attachment
            att = RpcAttachment.decode(None if raw is None else raw.to_bytes())
            pkt = _core.Packet.from_bytes(sample.payload.to_bytes())
        except (WireError, PacketCorruptError) as e:
            self.bridge.bad_samples += 1
            _log.debug("bridge: refused a request/reply sample: %s", e)
            return None
        if not self.bridge.matches(name):
            return None
        return who, protocol, name, att, pkt

    def _on_call(self, sample):
        parsed = self._parse(CALL_CHUNK, sample)
        if parsed is None:
            return
        _who, protocol, name, att, pkt = parsed
        served = self._served.get((protocol, name))
        if served is None:
            self.bridge.counts_of(protocol, name).write_errors += 1
            return
        if att.kind == K_REQUEST:
            served.on_request(att.sender_hex, pkt)
        elif att.kind == K_CANCEL:
            rid = pkt.headers.get(REQ)
            if rid is not None:
                served.on_cancel(rid)
        else:
            served.counts.corrupt += 1

    def _on_back(self, sample):
        parsed = self._parse(BACK_CHUNK, sample)
        if parsed is None:
            return
        _who, protocol, name, att, pkt = parsed
        proxy = self._proxies.get((protocol, name))
        if proxy is None or att.kind not in (K_REPLY, K_ACCEPT, K_START, K_GONE):
            self.bridge.counts_of(protocol, name).corrupt += 1
            return
        proxy.on_back(att.kind, att.generation, att.sender_hex, pkt)

    def _on_token(self, sample):
        try:
            who, protocol, name = topic_of_reqrep_key(self.prefix, SERVER_CHUNK, str(sample.key_expr))
            bridge_hex, _, gen = who.rpartition("-")
            server = (bridge_hex, int(gen))
        except (WireError, ValueError) as e:
            self.bridge.bad_samples += 1
            _log.debug("bridge: refused a server token: %s", e)
            return
        if bridge_hex == self.id_hex or not self.bridge.matches(name):
            return
        alive = sample.kind == self.bridge.zenoh.SampleKind.PUT
        key = (protocol, name)
        with self._lock:
            if self._closed:
                return
            proxy = self._proxies.get(key)
        if proxy is None:
            if not alive:
                return
            try:
                proxy = _RemoteServerStandIn(self, protocol, name)
            except A0Error as e:
                self.bridge.counts_of(protocol, name).write_errors += 1
                _log.warning("bridge: cannot stand in for the remote server of %s %r: %s",
                             protocol, name, e)
                return
            with self._lock:
                if self._closed or key in self._proxies:
                    other = self._proxies.get(key)
                else:
                    self._proxies[key] = proxy
                    other = None
            if other is not None or self._closed:
                proxy.close()
                proxy = other
                if proxy is None:
                    return
        proxy.on_announce(server, alive)

    def close(self):
        with self._lock:
            self._closed = True
            ends = [e for e in (*self._served.values(), *self._proxies.values()) if e is not None]
            self._served, self._proxies = {}, {}
        for sub in (*self._subs, self._live):
            try:
                sub.undeclare()
            except Exception:  # the session closed first
                pass
        for e in ends:
            e.close()
