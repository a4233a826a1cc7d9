"""RPC on topics: :class:`RpcServer` answers requests, :class:`RpcClient` sends them.

A topic's requests, replies and control packets share its ``rpc`` arena (``T.rpc``),
told apart by the header ``a0_rpc_type``:

=========  ===================================================================
request    a client's request; its packet id is the request id. Optional header
           ``a0_rpc_deadline``: CLOCK_MONOTONIC ns after which the client no
           longer waits.
accept     a server took every request up to seq ``a0_rpc_through`` (written
           before it calls the handler).
reply      the answer to request ``a0_rpc_req``, with ``a0_rpc_status`` ``ok``,
           ``error`` (the handler raised, or the server closed: the payload says
           why) or ``expired`` (older than the server's ``max_age`` when it
           started). PRPC replies also carry ``a0_rpc_done`` (``1`` on the last).
cancel     the client gave up request ``a0_rpc_req`` (cancel, timeout).
start      a server started (pid in ``a0_rpc_server``).
=========  ===================================================================

Invariants:

* **One live server per topic**, known by the deadman in the arena's header: a server
  holds it for its life (in the process's keeper thread, so it outlives the thread that
  made the server), and its death is seen at once by every client.
* **Start order does not matter.** A server reads the arena from its oldest packet:
  every request not yet accepted, replied or cancelled, and younger than ``max_age``,
  is served when it starts, oldest first; older ones get an ``expired`` reply.
* **Restart.** A request a server *accepted* and did not answer before it died is never
  run again (it may have been partly done): its client fails it with
  :class:`RpcServerDiedError` when it sees the server dead or a new one started. A
  request that was waiting when the server died is served by the next server.
* **No hang.** A waiting client checks the server's deadman at least every
  ``_POLL_S`` seconds: with no live server for ``wait_for_server`` seconds it gives up
  with :class:`a0py.A0TimeoutError` naming the topic. A client that gives up (timeout,
  cancel, Ctrl-C) writes a cancel, so no later server runs the request.
* **No user code under a lock.** Handlers and callbacks run on the dispatcher thread
  (:mod:`a0py.proto._dispatch`) or the given executor, with no arena lock held.
"""

import asyncio
import concurrent.futures
import logging
import os
import threading
import time

from .. import _core
from ..errors import (
    A0Error,
    A0TimeoutError,
    ArgumentError,
    ClosedError,
    LockError,
    PacketCorruptError,
)
from . import _dispatch
from .deadman import keeper_call, keeper_post, start_keeper
from .topic import RPC, Topic

__all__ = [
    "RpcCancelledError", "RpcClient", "RpcError", "RpcRemoteError", "RpcRequest", "RpcServer",
    "RpcServerDiedError", "server_pid",
]

_log = logging.getLogger("a0py.rpc")

TYPE = "a0_rpc_type"
REQ = "a0_rpc_req"
STATUS = "a0_rpc_status"
THROUGH = "a0_rpc_through"
DEADLINE = "a0_rpc_deadline"
DONE = "a0_rpc_done"
SERVER = "a0_rpc_server"
T_REQUEST, T_REPLY, T_CANCEL, T_ACCEPT, T_START = "request", "reply", "cancel", "accept", "start"
S_OK, S_ERROR, S_EXPIRED = "ok", "error", "expired"
_RESERVED_PREFIX = "a0_rpc_"
_STANDARD = frozenset(("a0_time_mono", "a0_time_wall", "a0_writer_id", "a0_writer_seq",
                       "a0_transport_seq"))

DEFAULT_MAX_AGE_S = 10.0
DEFAULT_WAIT_FOR_SERVER_S = 10.0
# A waiting client looks at the server's deadman at least this often (seconds).
_POLL_S = 0.1
_BATCH = 64
_INIT_OLDEST, _INIT_AWAIT_NEW, _ITER_NEXT = 0, 2, 0


class RpcError(A0Error):
    """Base class of the errors of an RPC or PRPC call."""


class RpcCancelledError(RpcError, concurrent.futures.CancelledError):
    """The request was cancelled (by :meth:`RpcClient.cancel`, from any thread or
    process) before its reply came."""


class RpcServerDiedError(RpcError):
    """The server died (or was replaced by a new one) after it accepted the request and
    before it replied. The request is not run again: it may have been partly done."""


class RpcRemoteError(RpcError):
    """The server could not answer: its handler raised, or it was closed while the
    request was in progress. The message carries the server's explanation."""


def _check_seconds(value, what, allow_none=True):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        none = " or None" if allow_none else ""
        raise ArgumentError(f"{what} must be a number of seconds >= 0{none}, not {value!r}")
    return float(value)


def _user_headers(headers):
    """`headers` as a list of pairs, refusing the protocol's reserved keys."""
    if headers is None:
        return []
    if isinstance(headers, (str, bytes, bytearray, memoryview)):
        raise ArgumentError(f"headers must be a mapping or an iterable of (key, value) pairs, "
                            f"not {type(headers).__name__}")
    items = list(headers.items() if hasattr(headers, "items") else headers)
    for item in items:
        key = item[0] if isinstance(item, (tuple, list)) and item else None
        if isinstance(key, str) and key.startswith(_RESERVED_PREFIX):
            raise ArgumentError(f"header {key!r} is reserved for the RPC protocol "
                                f"(keys starting with {_RESERVED_PREFIX!r} cannot be set)")
    return items


def _message(msg, extra):
    """(payload, headers) of a message given as bytes-like, str or Packet; a Packet
    keeps its own headers except the standard and protocol ones."""
    if isinstance(msg, _core.Packet):
        own = [(k, v) for k, v in msg.headers.items()
               if k not in _STANDARD and not k.startswith(_RESERVED_PREFIX)]
        return msg.payload, own + extra
    if not isinstance(msg, (bytes, bytearray, memoryview, str)):
        try:
            memoryview(msg)
        except TypeError:
            raise ArgumentError(f"a message must be bytes, a bytes-like object, str or an a0py.Packet, "
                                f"not {type(msg).__name__}") from None
    return msg, extra


def _seq_high(arena):
    with _core.Transport(arena).lock() as lk:
        return lk.seq_high


def _alive_pid(deadman):
    taken, _mine, pid = deadman._state()
    return (pid or -1) if taken else None


def server_pid(topic, protocol=RPC):
    """The pid of the live server of `topic` (``protocol`` ``"rpc"`` or ``"prpc"``),
    or None if none is alive. Does not create the topic."""
    topic = Topic.of(topic)
    if not topic.exists(protocol):
        return None
    pid = _alive_pid(_core.Deadman(topic.arena(protocol)))
    return None if pid is None else (pid if pid > 0 else None)


def _describe(protocol, topic):
    return f"{protocol} topic {topic.name!r}"


# --------------------------------------------------------------------------- server

# Servers of this process whose handlers run on the dispatcher thread: a blocking call
# to one of them from that thread would wait for itself.
_inline_servers = set()
_inline_lock = threading.Lock()


class RpcRequest:
    """A request as a server's handler gets it: ``pkt`` (the request
    :class:`a0py.Packet`), ``id``, ``cancelled`` (the client gave up), and
    :meth:`reply`. Reply once, from any thread, now or later."""

    __slots__ = ("_done", "_server", "cancelled", "pkt")

    def __init__(self, server, pkt):
        self._server = server
        self.pkt = pkt
        self._done = False
        self.cancelled = False

    @property
    def id(self):
        """The request id (the request packet's id)."""
        return self.pkt.id

    def reply(self, msg, headers=None):
        """Sends the reply: bytes, a bytes-like object, str or an :class:`a0py.Packet`
        (its headers are kept), plus `headers`. Returns the reply's seq, or None if the
        client cancelled the request or the server was closed (nothing is written then).

        Raises RpcError if the request was answered already, ArgumentError for a bad
        message or a reserved header (``a0_rpc_*``)."""
        return self._server._answer(self, msg, headers, S_OK, True)

    def reply_json(self, obj, headers=None):
        """Replies with ``json.dumps(obj)`` (UTF-8); see :meth:`reply`."""
        return self.reply(_json_bytes(obj), [("content-type", "application/json"),
                                             *_user_headers(headers)])

    @property
    def done(self):
        """Whether the request has been answered."""
        return self._done

    def __repr__(self):
        return f"<a0py.RpcRequest {self.id}{' cancelled' if self.cancelled else ''}>"


def _json_bytes(obj):
    import json

    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class _Server:
    """What RPC and PRPC servers share: the deadman, the start scan, accepting,
    dispatching to the handler, answering and cancelling."""

    protocol = RPC
    kind = "RPC"
    request_class = RpcRequest
    streaming = False

    def __init__(self, topic, handler, on_cancel=None, *, max_age=DEFAULT_MAX_AGE_S, executor=None):
        if not callable(handler):
            raise ArgumentError(f"the request handler must be callable, not {type(handler).__name__}")
        if on_cancel is not None and not callable(on_cancel):
            raise ArgumentError(f"on_cancel must be callable or None, not {type(on_cancel).__name__}")
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise ArgumentError(f"executor must have a submit() method (a concurrent.futures.Executor), "
                                f"not {type(executor).__name__}")
        self.max_age = _check_seconds(max_age, "max_age")
        self.topic = Topic.of(topic)
        self._label = _describe(self.protocol, self.topic)
        self._handler = handler
        self._on_cancel = on_cancel
        self._executor = executor
        self.arena = self.topic.arena(self.protocol)
        self._deadman = _core.Deadman(self.arena)
        if not keeper_call(self._deadman.try_take):
            pid = self._deadman.owner_pid
            raise LockError(f"{self._label} already has a live server (pid {pid}); close it, or "
                            "serve another topic")
        self._lock = threading.Lock()
        self._active = {}    # request id -> request object, until answered (or cancelled)
        self._pending = {}   # during the start scan: request id -> packet not yet handled
        self._scanning = True
        self._closed = False
        self._watch = None
        self._pid = os.getpid()
        try:
            self._writer = _core.PacketWriter(self.arena, self._label)
            self._reader = _core.PacketReader(self.arena, _INIT_OLDEST, _ITER_NEXT, self._label)
            self._start_seq = self._writer.pub(b"", [(TYPE, T_START), (SERVER, str(os.getpid()))])
        except BaseException:
            keeper_call(self._deadman.release)
            raise
        self._key = (self.topic.root, self.topic.name, self.protocol)
        if executor is None:
            with _inline_lock:
                _inline_servers.add(self._key)
        self._watch = _dispatch.watch(self.arena, self._serve)

    # --- reading the arena (dispatcher thread)

    def _serve(self):
        batch = self._reader.read_batch(_BATCH)
        serve = {}
        for pkt in batch:
            if type(pkt) is PacketCorruptError:
                _log.warning("%s: %s (skipped)", self._label, pkt)
                continue
            h = pkt.headers
            kind = h.get(TYPE)
            if kind == T_REQUEST:
                if self._scanning:
                    self._pending[pkt.id] = pkt
                elif not _past_deadline(h):
                    serve[pkt.id] = pkt
            elif kind == T_CANCEL:
                rid = h.get(REQ)
                self._pending.pop(rid, None)
                if serve.pop(rid, None) is None:
                    self._cancelled(rid)
            elif not self._scanning:
                continue
            elif kind == T_REPLY:
                self._pending.pop(h.get(REQ), None)
            elif kind == T_ACCEPT:
                through = _int(h.get(THROUGH))
                for rid in [rid for rid, p in self._pending.items() if p.seq <= through]:
                    del self._pending[rid]
            elif kind == T_START and pkt.seq == self._start_seq:
                self._scanning = False
                serve.update(self._decide_pending())
        if serve and not self._closed:
            if self._executor is None:
                # One at a time: a request is accepted only when its handler is about to
                # run, so those queued behind a slow handler stay unaccepted (a next
                # server serves them if this one dies).
                for pkt in serve.values():
                    if self._closed:
                        break
                    if _past_deadline(pkt.headers):
                        continue  # its client gave up while an earlier handler ran
                    self._accept(pkt.seq)
                    self._dispatch_request(pkt)
            else:
                self._accept(max(p.seq for p in serve.values()))
                for pkt in serve.values():
                    self._dispatch_request(pkt)
        return len(batch) >= _BATCH

    def _accept(self, through):
        self._writer.pub(b"", [(TYPE, T_ACCEPT), (THROUGH, str(through))])

    def _decide_pending(self):
        """The requests waiting when this server started that it serves; replies
        ``expired`` to those older than max_age."""
        now = time.monotonic_ns()
        pending, self._pending = self._pending, {}
        serve = {}
        for rid, pkt in pending.items():
            h = pkt.headers
            if _past_deadline(h, now):
                continue  # its client has given up
            age_s = (now - _int(h.get("a0_time_mono"), now)) / 1e9
            if self.max_age is not None and age_s > self.max_age:
                self._write_reply(rid, f"request {rid} was {age_s:.1f} s old when the server started "
                                       f"(its max_age is {self.max_age} s)", S_EXPIRED, [])
                continue
            serve[rid] = pkt
        return serve

    def _dispatch_request(self, pkt):
        req = self.request_class(self, pkt)
        with self._lock:
            self._active[pkt.id] = req
        if self._executor is None:
            self._call_handler(req)
        else:
            try:
                self._executor.submit(self._call_handler, req)
            except RuntimeError as e:  # the executor was shut down
                self._fail(req, f"the server's executor refused the request: {e}")

    def _call_handler(self, req):
        try:
            self._handler(req)
        except Exception as e:
            _log.exception("%s: the handler raised on request %s", self._label, req.pkt.id)
            self._fail(req, f"the handler raised {type(e).__name__}: {e}")

    def _fail(self, req, why):
        with self._lock:
            if req._done:
                return
            req._done = True
            self._active.pop(req.pkt.id, None)
            cancelled = req.cancelled
        if not cancelled:
            self._write_reply(req.pkt.id, why, S_ERROR, [])

    def _cancelled(self, rid):
        with self._lock:
            req = self._active.pop(rid, None)
            if req is None:
                return
            req.cancelled = True
        if self._on_cancel is not None:
            try:
                self._on_cancel(rid)
            except Exception:
                _log.exception("%s: on_cancel raised for request %s", self._label, rid)

    # --- answering (any thread)

    def _answer(self, req, msg, headers, status, done):
        extra = _user_headers(headers)
        payload, hdrs = _message(msg, extra)
        with self._lock:
            if self._closed:
                return None  # a late answer after close(): its client was told already
            if req._done:
                raise RpcError(f"{self._label}: request {req.pkt.id} was answered already"
                               + (" (its last message was sent)" if self.streaming else ""))
            if req.cancelled:
                if done:
                    req._done = True
                return None
            if done:
                req._done = True
                self._active.pop(req.pkt.id, None)
        try:
            return self._write_reply(req.pkt.id, payload, status, hdrs, done)
        except ClosedError:
            if self._closed:  # closed while we wrote
                return None
            raise

    def _write_reply(self, rid, payload, status, headers, done=True):
        proto = [(TYPE, T_REPLY), (REQ, rid), (STATUS, status)]
        if self.streaming:
            proto.append((DONE, "1" if done else "0"))
        return self._writer.pub(payload, proto + headers)

    # --- lifetime

    @property
    def closed(self):
        return self._closed

    def close(self):
        """Stops serving: no handler is called after this returns (unless called from
        a handler); requests in progress get an error reply ("server closed"); the
        topic's server deadman is released, so a new server may start. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if os.getpid() != self._pid:
            return  # a forked child's copy: the server, its requests and deadman are the parent's
        if self._watch is not None:
            self._watch.cancel()
        with _inline_lock:
            _inline_servers.discard(self._key)
        with self._lock:
            active, self._active = list(self._active.values()), {}
            for req in active:
                req._done = True
        for req in active:
            if not req.cancelled:
                try:
                    self._write_reply(req.pkt.id, f"the server on {self._label} was closed before "
                                                  "answering", S_ERROR, [])
                except A0Error:
                    _log.exception("%s: could not tell a client the server closed", self._label)
        try:
            keeper_call(self._deadman.release)
        except A0Error:
            pass  # a forked child holds nothing to release
        self._reader.close()
        self._writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return f"<a0py.{type(self).__name__} {self.topic.name!r} {'closed' if self._closed else 'serving'}>"


def _int(text, default=0):
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def _past_deadline(h, now=None):
    deadline = h.get(DEADLINE)
    if deadline is None:
        return False
    return (time.monotonic_ns() if now is None else now) >= _int(deadline, 1 << 63)


class RpcServer(_Server):
    """Serves `topic`'s requests: ``on_request(req)`` is called for each, with
    ``req.pkt`` the request packet; it answers with ``req.reply(msg)``, then or later,
    from any thread.

    ``on_cancel(request_id)`` (optional) is told when a client gives up a request in
    progress (its reply is then dropped). Requests that were waiting when the server
    started are served, oldest first, if younger than `max_age` seconds (None: any age);
    older ones get an "expired" error reply. Handlers run on the process's dispatcher
    thread (keep them short, or reply later from a thread of yours), or in `executor`
    (a :class:`concurrent.futures.Executor`) if given. A handler that raises before
    replying sends the client an error (:class:`RpcRemoteError`).

    Only one live server per topic: LockError if another process or object serves it.
    Raises ArgumentError for a bad topic, handler, max_age or executor."""

    def __init__(self, topic, on_request, on_cancel=None, *, max_age=DEFAULT_MAX_AGE_S, executor=None):
        super().__init__(topic, on_request, on_cancel, max_age=max_age, executor=executor)


# --------------------------------------------------------------------------- client


class _Call:
    """The client side of one request: what it has seen of its fate so far."""

    __slots__ = ("accepted", "dead_at", "deadline", "done", "id", "idle", "link", "no_server_since",
                 "seq", "timeout")

    def __init__(self, link, rid, seq, timeout, now):
        self.link = link
        self.id = rid
        self.seq = seq
        self.timeout = timeout
        self.deadline = None if timeout is None else now + timeout  # monotonic seconds
        self.idle = link.streaming  # PRPC: the timeout restarts at each message
        self.accepted = False
        self.no_server_since = None
        self.dead_at = None  # the arena's newest seq when the server was first seen dead
        self.done = False

    def on_packet(self, pkt, h):
        """The reply `pkt` if it is one of ours (raising for an error reply), else None."""
        kind = h.get(TYPE)
        if kind == T_REPLY:
            if h.get(REQ) != self.id:
                return None
            status = h.get(STATUS, S_OK)
            if status == S_OK:
                if not self.link.streaming or h.get(DONE) == "1":
                    self.done = True
                elif self.timeout is not None:
                    self.deadline = time.monotonic() + self.timeout
                return pkt
            self.done = True
            why = bytes(pkt.payload).decode("utf-8", "replace")
            if status == S_EXPIRED:
                raise A0TimeoutError(f"{self.link.label}: {why}")
            raise RpcRemoteError(f"{self.link.label}: {why}")
        if kind == T_CANCEL:
            if h.get(REQ) == self.id:
                self.done = True
                raise RpcCancelledError(f"{self.link.label}: request {self.id} was cancelled")
        elif kind == T_ACCEPT:
            if _int(h.get(THROUGH)) >= self.seq:
                self.accepted = True
        elif kind == T_START and self.accepted:
            self.done = True
            raise RpcServerDiedError(
                f"{self.link.label}: the server that accepted request {self.id} is gone and a new "
                f"one started (pid {h.get(SERVER)}); the request was not run again, as it may have "
                "been partly done")
        return None

    def on_tick(self, now, alive, read_through):
        """Raises if the call must end now: its deadline passed, or its server died.
        `read_through`: the seq up to which the caller has handled the arena's packets.

        A server that closes answers first and releases its deadman after, so a dead
        server fails an accepted call only once every packet written before its death
        was seen was handled (the reply may be among them)."""
        link = self.link
        if alive is not None:
            self.no_server_since = None
            self.dead_at = None
        elif self.accepted:
            if self.dead_at is None:
                self.dead_at = _seq_high(link.arena)
            if read_through >= self.dead_at:
                self.done = True
                raise RpcServerDiedError(f"{link.label}: the server died while handling request "
                                         f"{self.id}; it was not run again, as it may have been partly "
                                         "done")
        elif self.no_server_since is None:
            self.no_server_since = now
        if self.deadline is not None and now >= self.deadline:
            what = "no message for" if self.idle else "no reply within"
            extra = "" if alive is not None else " (and no server is alive)"
            raise A0TimeoutError(f"{link.label}: {what} {self.timeout} s to request {self.id}{extra}")
        wait = link.wait_for_server
        if self.no_server_since is not None and wait is not None and now - self.no_server_since >= wait:
            raise A0TimeoutError(f"{link.label}: no server alive for {wait} s, request {self.id} "
                                 "was not served; start a server on the topic (or pass a longer "
                                 "wait_for_server=)")


class _Link:
    """What a client's calls and router need of it (not the client itself: an
    unreferenced client is collected while its router finishes the pending calls)."""

    __slots__ = ("arena", "label", "server", "streaming", "wait_for_server", "writer")

    def __init__(self, arena, label, streaming, wait_for_server):
        self.arena = arena
        self.label = label
        self.streaming = streaming
        self.wait_for_server = wait_for_server
        self.writer = _core.PacketWriter(arena, label)
        self.server = _core.Deadman(arena)  # the live server holds it

    def write_cancel(self, rid):
        try:
            self.writer.pub(b"", [(TYPE, T_CANCEL), (REQ, rid)])
        except A0Error:
            _log.exception("%s: could not write the cancel of request %s", self.label, rid)


class _Client:
    """What RPC and PRPC clients share: requests, the blocking wait, the dispatcher
    route for callbacks and futures, cancel."""

    protocol = RPC
    streaming = False

    def __init__(self, topic, *, wait_for_server=DEFAULT_WAIT_FOR_SERVER_S):
        wait = _check_seconds(wait_for_server, "wait_for_server")
        self.topic = Topic.of(topic)
        self._label = _describe(self.protocol, self.topic)
        self.arena = self.topic.arena(self.protocol)
        self._link = _Link(self.arena, self._label, self.streaming, wait)
        self._key = (self.topic.root, self.topic.name, self.protocol)
        self._router = None
        self._router_lock = threading.Lock()

    @property
    def wait_for_server(self):
        """Seconds a call waits while no server is alive (None: only its timeout)."""
        return self._link.wait_for_server

    @wait_for_server.setter
    def wait_for_server(self, value):
        self._link.wait_for_server = _check_seconds(value, "wait_for_server")

    def _request(self, msg, headers, timeout):
        payload, hdrs = _message(msg, _user_headers(headers))
        proto = [(TYPE, T_REQUEST)]
        if timeout is not None:
            proto.append((DEADLINE, str(time.monotonic_ns() + int(timeout * 1e9))))
        rid = msg.id if isinstance(msg, _core.Packet) else None
        pkt = _core.Packet(proto + hdrs, payload, id=rid) if rid else _core.Packet(proto + hdrs, payload)
        return pkt

    def _send(self, msg, headers, timeout):
        """Writes a request; returns its call state (deadline from now)."""
        pkt = self._request(msg, headers, None if self.streaming else timeout)
        seq = self._link.writer.pub(pkt)
        now = time.monotonic()
        call = _Call(self._link, pkt.id, seq, timeout, now)
        if _alive_pid(self._link.server) is None:
            call.no_server_since = now
        return call

    def _check_not_self_wait(self):
        if self._key in _inline_servers and threading.current_thread() in _dispatch.dispatcher_threads():
            raise LockError(f"{self._label}: a blocking call from a subscriber callback or handler to a "
                            "server of this same process would wait for itself (its handler runs on "
                            "this dispatcher thread); give that server an executor=, or use send() "
                            "with a callback")

    def _blocking(self, msg, timeout, headers):
        """Sends a request and yields its replies as they come (one for RPC), reading
        the arena in the calling thread: no dispatcher involved."""
        self._check_not_self_wait()
        reader = _core.PacketReader(self.arena, _INIT_AWAIT_NEW, _ITER_NEXT, self._label)
        call = None
        try:
            call = self._send(msg, headers, timeout)
            last_tick = time.monotonic()
            while True:
                now = time.monotonic()
                if now - last_tick >= _POLL_S or (call.deadline is not None and now >= call.deadline):
                    call.on_tick(now, _alive_pid(self._link.server), reader.last_seq)
                    last_tick = now
                    if call.dead_at is not None:
                        last_tick -= _POLL_S  # look again as soon as the arena is read through
                wait = _POLL_S if call.deadline is None else max(0.0, min(_POLL_S, call.deadline - now))
                if call.dead_at is not None:
                    wait = 0.0
                try:
                    pkt = reader.read_blocking(wait)
                except A0TimeoutError:
                    continue
                except PacketCorruptError as e:
                    _log.warning("%s: %s (skipped)", self._label, e)
                    continue
                reply = call.on_packet(pkt, pkt.headers)
                if reply is not None:
                    yield reply
                    if call.done:
                        return
        finally:
            if call is not None and not call.done:
                call.done = True
                self._link.write_cancel(call.id)
            reader.close()

    def cancel(self, request_id):
        """Cancels request `request_id` (its packet id) wherever it waits: a blocking
        call raises :class:`RpcCancelledError`, a future is cancelled, the server's
        ``on_cancel`` is told and a server that has not started it never does."""
        if not isinstance(request_id, str):
            raise ArgumentError(f"request_id must be the request packet's id (str), not {request_id!r}")
        router = self._router
        if router is not None:
            entry = router.calls.get(request_id)
            if entry is not None and entry.future.cancel():
                return  # its done-callback wrote the cancel
        self._link.write_cancel(request_id)

    def _route(self):
        with self._router_lock:
            if self._router is None:
                self._router = _Router(self._link)
            return self._router

    def _submit(self, msg, timeout, headers, on_message):
        router = self._route()
        future = concurrent.futures.Future()
        with router.lock:  # a reply cannot be routed before the call is registered
            call = self._send(msg, headers, timeout)
            future.request_id = call.id
            entry = _Entry(call, future, on_message)
            router.calls[call.id] = entry
        future.add_done_callback(lambda f, e=entry: router.done(e))
        _ticker.add(router, call.deadline)
        return future

    def close(self):
        """Stops routing replies to callbacks and futures; pending ones are cancelled.
        Idempotent. Blocking calls in other threads are unaffected."""
        with self._router_lock:
            router, self._router = self._router, None
        if router is not None:
            router.close()

    def __del__(self):
        # A collector may run this anywhere, even inside a lock that closing takes: so
        # only a flag and a post to the keeper thread, which closes the router if idle
        # (else the router closes itself after its last pending call).
        router = self.__dict__.get("_router")
        if router is not None:
            router.orphaned = True
            keeper_post(router.close_if_idle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return f"<a0py.{type(self).__name__} {self.topic.name!r}>"


class _Entry:
    __slots__ = ("call", "future", "on_message")

    def __init__(self, call, future, on_message):
        self.call = call
        self.future = future
        self.on_message = on_message


class _Router:
    """Routes a client's replies to its futures, on the dispatcher thread."""

    def __init__(self, link):
        self.link = link
        self.lock = threading.Lock()
        self.calls = {}
        self.reader = _core.PacketReader(link.arena, _INIT_AWAIT_NEW, _ITER_NEXT, link.label)
        self.handled_through = self.reader.last_seq  # every packet up to it has been routed
        # The highest seq a server accepted through: a call is accepted iff its seq is
        # at most this (kept here, not per call, so an accept costs O(1) however many
        # calls are pending).
        self.accepted_through = 0
        self.closed = False
        self.orphaned = False  # its client is gone: close once no call is pending
        self.pid = os.getpid()
        start_keeper()  # the client's finalizer posts its close there
        self.watch = _dispatch.watch(link.arena, self._route)

    def _route(self):
        batch = self.reader.read_batch(_BATCH)
        for pkt in batch:
            if type(pkt) is PacketCorruptError:
                continue
            h = pkt.headers
            kind = h.get(TYPE)
            if kind == T_ACCEPT:
                self.accepted_through = max(self.accepted_through, _int(h.get(THROUGH)))
                continue
            with self.lock:  # held by send() from its write until the call is registered
                if kind in (T_REPLY, T_CANCEL):
                    entry = self.calls.get(h.get(REQ))
                    entries = () if entry is None else (entry,)
                elif kind == T_START:
                    entries = list(self.calls.values())
                    self.mark_accepted(entries)
                else:
                    continue
            for entry in entries:
                try:
                    reply = entry.call.on_packet(pkt, h)
                except RpcError as e:
                    self.finish(entry, error=e)
                    continue
                except A0TimeoutError as e:
                    self.finish(entry, error=e)
                    continue
                if reply is not None:
                    self.deliver(entry, reply)
        if batch:
            self.handled_through = self.reader.last_seq
        if self.orphaned and not self.calls:
            self.close()  # its client is gone and nothing is pending
            return False
        return len(batch) >= _BATCH

    def mark_accepted(self, entries):
        through = self.accepted_through
        for entry in entries:
            if entry.call.seq <= through:
                entry.call.accepted = True

    def deliver(self, entry, reply):
        call = entry.call
        if entry.on_message is not None:
            try:
                entry.on_message(reply, call.done)
            except Exception:
                _log.exception("%s: the callback raised on a reply to request %s",
                               self.link.label, call.id)
        if call.done:
            self.finish(entry, result=reply)

    def finish(self, entry, result=None, error=None):
        entry.call.done = True
        with self.lock:
            self.calls.pop(entry.call.id, None)
        future = entry.future
        if future.done():
            return
        try:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)
        except concurrent.futures.InvalidStateError:
            pass  # cancelled meanwhile

    def done(self, entry):
        """Done-callback of every future: a future cancelled by its user cancels the
        request."""
        with self.lock:
            self.calls.pop(entry.call.id, None)
        if entry.future.cancelled() and not entry.call.done:
            entry.call.done = True
            self.link.write_cancel(entry.call.id)
        if self.orphaned and not self.calls and self.pid == os.getpid():
            self.close()

    def close_if_idle(self):
        if self.pid != os.getpid():
            return  # a forked child's copy: the parent's dispatcher owns it
        with self.lock:
            idle = not self.calls
        if idle:
            self.close()

    def tick(self, now):
        """Deadlines and server liveness of the pending calls; returns the earliest
        deadline left (or None)."""
        with self.lock:
            entries = list(self.calls.values())
        if not entries:
            return None
        alive = _alive_pid(self.link.server)
        self.mark_accepted(entries)
        earliest = None
        for entry in entries:
            try:
                entry.call.on_tick(now, alive, self.handled_through)
            except A0TimeoutError as e:
                self.finish(entry, error=e)
                self.link.write_cancel(entry.call.id)
                continue
            except RpcError as e:
                self.finish(entry, error=e)
                continue
            d = entry.call.deadline
            if d is not None and (earliest is None or d < earliest):
                earliest = d
        return earliest

    @property
    def pending(self):
        return bool(self.calls)

    def close(self):
        if self.closed:
            return
        self.closed = True
        self.watch.cancel()
        with self.lock:
            entries = list(self.calls.values())
        for entry in entries:
            entry.future.cancel()
        try:
            self.reader.close()
        except LockError:
            pass  # closed from a collector run inside a read: the reader goes with the router


class _Ticker:
    """One thread per process checks deadlines and server liveness of every pending
    callback/future call: at least every _POLL_S seconds while any is pending, and at
    the earliest deadline. Woken early only by a call whose deadline comes before its
    planned wake, so a burst of sends costs no tick each."""

    def __init__(self):
        self.cond = threading.Condition(threading.Lock())
        self.routers = set()
        self.thread = None
        self.wake_at = None  # monotonic time of the planned wake while asleep

    def add(self, router, deadline):
        with self.cond:
            new = router not in self.routers
            self.routers.add(router)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="a0py-rpc-ticker", daemon=True)
                self.thread.start()
            elif new or (deadline is not None and self.wake_at is not None and deadline < self.wake_at):
                self.cond.notify()

    def _run(self):
        while True:
            with self.cond:
                routers = [r for r in self.routers if r.pending and not r.closed]
                self.routers = set(routers)
                if not routers:
                    self.thread = None
                    return
            now = time.monotonic()
            earliest = None
            for r in routers:
                d = r.tick(now)
                if d is not None and (earliest is None or d < earliest):
                    earliest = d
            wait = _POLL_S
            if earliest is not None:
                wait = max(0.0, min(wait, earliest - time.monotonic()))
            with self.cond:
                self.wake_at = time.monotonic() + wait
                self.cond.wait(wait)
                self.wake_at = None


_ticker = _Ticker()


def _reset_after_fork():
    global _ticker, _inline_lock
    _ticker = _Ticker()
    _inline_lock = threading.Lock()
    _inline_servers.clear()


os.register_at_fork(after_in_child=_reset_after_fork)


class RpcClient(_Client):
    """Sends requests to `topic`'s :class:`RpcServer` and gets the replies meant for
    it (each request has an id; replies name it).

    ``send_blocking(msg, timeout=None)`` waits for the reply; ``send(msg, callback=None,
    timeout=None)`` returns a :class:`concurrent.futures.Future` (``future.request_id``)
    and calls ``callback(reply)`` on the dispatcher thread; ``await
    send_async(msg, timeout=None)`` in asyncio; ``cancel(request_id)``.

    A request sent before the server starts waits for it: with no live server for
    `wait_for_server` seconds (None: no limit but the call's timeout) the call fails
    with A0TimeoutError naming the topic. Raises ArgumentError for a bad topic."""

    def send_blocking(self, msg, timeout=None, headers=None):
        """Sends `msg` (bytes, bytes-like, str or an :class:`a0py.Packet`, whose id then
        is the request id) and returns the reply packet.

        Raises A0TimeoutError (no reply within `timeout` seconds, or no live server for
        `wait_for_server` seconds), RpcServerDiedError (the server died handling it),
        RpcRemoteError (the handler raised; the server closed), RpcCancelledError
        (cancelled from elsewhere), LockError (called from a handler of a server of this
        process that runs on the dispatcher), ArgumentError (bad message, header or
        timeout). Ctrl-C interrupts it (and cancels the request)."""
        timeout = _check_seconds(timeout, "timeout")
        for reply in self._blocking(msg, timeout, headers):
            return reply
        raise AssertionError("unreachable: the reply loop ended without a reply")

    def send_json(self, obj, timeout=None, headers=None):
        """``send_blocking`` of ``json.dumps(obj)``; returns the reply's payload parsed
        as JSON (ValueError if it is not JSON)."""
        hdrs = [("content-type", "application/json"), *_user_headers(headers)]
        return self.send_blocking(_json_bytes(obj), timeout, hdrs).json()

    def send(self, msg, callback=None, timeout=None, headers=None):
        """Sends `msg` and returns a Future of the reply packet at once. ``callback(reply)``
        (optional) is called on the dispatcher thread when it comes. The future fails as
        :meth:`send_blocking` would raise; cancelling it cancels the request."""
        timeout = _check_seconds(timeout, "timeout")
        if callback is not None and not callable(callback):
            raise ArgumentError(f"callback must be callable, not {type(callback).__name__}")
        on_message = None if callback is None else (lambda pkt, done: callback(pkt))
        return self._submit(msg, timeout, headers, on_message)

    async def send_async(self, msg, timeout=None, headers=None):
        """``reply = await client.send_async(msg)``: as :meth:`send_blocking`, without
        blocking the event loop. Cancelling the awaiting task cancels the request."""
        return await asyncio.wrap_future(self.send(msg, timeout=timeout, headers=headers))
