"""The server side of request/reply (RPC and PRPC): :class:`RequestServer` serves a
topic's requests, :class:`ServedRequest` is a request as its handler holds it. The
packets are those of :mod:`a0py.proto.reqrep_wire`.

Invariants:

* **One live server per topic**, known by the deadman in the arena's header: a server
  holds it for its life (in the process's keeper thread, so it outlives the thread that
  made the server), and its death is seen at once by every client.
* **Start order does not matter.** A server reads the arena from its oldest packet:
  every request not yet accepted, replied or cancelled, and younger than ``max_age``,
  is served when it starts, oldest first; older ones get an ``expired`` reply.
* **Restart.** A request a server *accepted* (an ``accept`` packet through its seq,
  written before its handler is called) and did not answer before it died is never run
  again (it may have been partly done): its client fails it. A request that was waiting
  when the server died is served by the next server.
* **No user code under a lock.** Handlers and ``on_cancel`` run on the dispatcher
  thread (:mod:`a0py.proto._dispatch`) or the given executor, with no arena lock held.
"""

import logging
import os
import threading
import time

from .. import _core
from ..errors import A0Error, ArgumentError, ClosedError, LockError, PacketCorruptError
from . import _dispatch
from .deadman import keeper_call
from .errors import RpcError
from .lifetime import Closeable
from .reqrep_wire import (
    DEFAULT_MAX_AGE_S,
    READ_BATCH,
    READER_INIT_OLDEST,
    READER_ITER_NEXT,
    REQ,
    S_ERROR,
    S_EXPIRED,
    S_OK,
    T_CANCEL,
    T_REQUEST,
    T_START,
    TYPE,
    accept_headers,
    check_seconds,
    describe_topic,
    forget_taken,
    message_parts,
    past_deadline,
    reply_headers,
    request_age_s,
    start_headers,
    user_headers,
)
from .topic import Topic

__all__ = ["InlineServers", "RequestServer", "ServedRequest", "inline_servers"]

_log = logging.getLogger("a0py.rpc")


class InlineServers:
    """The servers of this process whose handlers run on the dispatcher thread, by
    (root, topic, protocol): a blocking call to one of them from that thread would wait
    for itself, so clients ask :meth:`would_wait_for_itself` before they block."""

    def __init__(self):
        self._keys = set()
        self._lock = threading.Lock()

    def add(self, key):
        with self._lock:
            self._keys.add(key)

    def discard(self, key):
        with self._lock:
            self._keys.discard(key)

    def would_wait_for_itself(self, key):
        """Whether a blocking call to the server `key` from the calling thread would
        wait for itself: that server runs its handlers on this very dispatcher thread."""
        return key in self._keys and threading.current_thread() in _dispatch.dispatcher_threads()

    def reset_after_fork(self):
        # The child has none of the parent's servers (their deadmen stayed with it), and
        # the lock may have been held by a thread that does not exist in the child.
        self._keys = set()
        self._lock = threading.Lock()


inline_servers = InlineServers()
os.register_at_fork(after_in_child=inline_servers.reset_after_fork)


class ServedRequest:
    """A request as a server's handler holds it: ``pkt`` (the request
    :class:`a0py.Packet`), ``id``, ``cancelled`` (the client gave up), ``done``
    (answered). The protocol's subclass adds the way to answer it
    (:class:`a0py.RpcRequest`, :class:`a0py.PrpcConnection`)."""

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

    @property
    def done(self):
        """Whether the request has been answered (its last message sent)."""
        return self._done

    def _answer(self, msg, headers, done):
        return self._server.answer(self, msg, headers, S_OK, done)

    def __repr__(self):
        return f"<a0py.{type(self).__name__} {self.id}{' cancelled' if self.cancelled else ''}>"


class RequestServer(Closeable):
    """What RPC and PRPC servers share: the deadman, the start scan, accepting,
    dispatching to the handler, answering and cancelling.

    A subclass names its ``protocol`` (the arena it serves), its ``request_class`` (a
    :class:`ServedRequest` the handler gets) and whether it is ``streaming`` (PRPC:
    many replies a request, the last marked done)."""

    protocol = None
    request_class = None
    streaming = False

    def __init__(self, topic, handler, on_cancel=None, *, max_age=DEFAULT_MAX_AGE_S, executor=None):
        if not callable(handler):
            raise ArgumentError(f"the request handler must be callable, not {type(handler).__name__}")
        if on_cancel is not None and not callable(on_cancel):
            raise ArgumentError(f"on_cancel must be callable or None, not {type(on_cancel).__name__}")
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise ArgumentError(f"executor must have a submit() method (a concurrent.futures.Executor), "
                                f"not {type(executor).__name__}")
        self.max_age = check_seconds(max_age, "max_age")
        self.topic = Topic.of(topic)
        self._label = describe_topic(self.protocol, self.topic)
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
        try:
            self._writer = _core.PacketWriter(self.arena, self._label)
            self._reader = _core.PacketReader(self.arena, READER_INIT_OLDEST, READER_ITER_NEXT,
                                              self._label)
            self._start_seq = self._writer.pub(b"", start_headers(str(os.getpid())))
        except BaseException:
            keeper_call(self._deadman.release)
            raise
        self._key = (self.topic.root, self.topic.name, self.protocol)
        if executor is None:
            inline_servers.add(self._key)
        self._watch = _dispatch.watch(self.arena, self._serve)

    # --- reading the arena (dispatcher thread)

    def _serve(self):
        batch = self._reader.read_batch(READ_BATCH)
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
                elif not past_deadline(h):
                    serve[pkt.id] = pkt
            elif kind == T_CANCEL:
                rid = h.get(REQ)
                self._pending.pop(rid, None)
                if serve.pop(rid, None) is None:
                    self._cancelled(rid)
            elif not self._scanning:
                continue
            elif kind == T_START and pkt.seq == self._start_seq:
                self._scanning = False
                serve.update(self._decide_pending())
            else:
                forget_taken(self._pending, kind, h)
        if serve and not self._closed:
            if self._executor is None:
                # One at a time: a request is accepted only when its handler is about to
                # run, so those queued behind a slow handler stay unaccepted (a next
                # server serves them if this one dies).
                for pkt in serve.values():
                    if self._closed:
                        break
                    if past_deadline(pkt.headers):
                        continue  # its client gave up while an earlier handler ran
                    self._accept(pkt.seq)
                    self._dispatch_request(pkt)
            else:
                self._accept(max(p.seq for p in serve.values()))
                for pkt in serve.values():
                    self._dispatch_request(pkt)
        return len(batch) >= READ_BATCH

    def _accept(self, through):
        self._writer.pub(b"", accept_headers(through))

    def _decide_pending(self):
        """The requests waiting when this server started that it serves; replies
        ``expired`` to those older than max_age."""
        now = time.monotonic_ns()
        pending, self._pending = self._pending, {}
        serve = {}
        for rid, pkt in pending.items():
            h = pkt.headers
            if past_deadline(h, now):
                continue  # its client has given up
            age_s = request_age_s(h, now)
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

    def answer(self, req, msg, headers, status, done):
        """Writes an answer to `req` (one of this server's requests): the reply, or
        with ``done=False`` one message of a PRPC stream. Returns its seq, or None when
        nothing is written (the client cancelled, the server closed). RpcError if `req`
        was answered already; ArgumentError for a bad message or header."""
        extra = user_headers(headers)
        payload, hdrs = message_parts(msg, extra)
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
        proto = reply_headers(rid, status, done if self.streaming else None)
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
        if self._forked_copy():
            return  # a forked child's copy: the server, its requests and deadman are the parent's
        if self._watch is not None:
            self._watch.cancel()
        inline_servers.discard(self._key)
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

    def __repr__(self):
        return f"<a0py.{type(self).__name__} {self.topic.name!r} {'closed' if self._closed else 'serving'}>"
