"""The client side of request/reply (RPC and PRPC): :class:`RequestClient` sends
requests and gets their replies, either in the calling thread (a blocking call) or
routed on the dispatcher thread to futures and callbacks (:class:`ReplyRouter`), with
one :class:`DeadlineTimer` thread a process for the routed calls' deadlines. The packets
are those of :mod:`a0py.proto.reqrep_wire`.

Invariants:

* **Replies to their caller.** A client takes only the replies naming its own requests;
  any number of clients, in any processes, share a topic.
* **Restart.** A request its server *accepted* and did not answer before it died is
  never run again (it may have been partly done): its client fails it with
  :class:`a0py.RpcServerDiedError` when it sees the server dead or a new one started.
* **No hang.** A waiting client checks the server's deadman at least every ``POLL_S``
  seconds: with no live server for ``wait_for_server`` seconds it gives up with
  :class:`a0py.A0TimeoutError` naming the topic. A client that gives up (timeout,
  cancel, Ctrl-C) writes a cancel, so no later server runs the request.
* **No user code under a lock.** Callbacks run on the dispatcher thread
  (:mod:`a0py.proto._dispatch`) with no arena lock held.
"""

import concurrent.futures
import logging
import os
import threading
import time

from .. import _core
from ..errors import A0Error, A0TimeoutError, ArgumentError, LockError, PacketCorruptError
from . import _dispatch
from .deadman import keeper_post, start_keeper
from .errors import RpcCancelledError, RpcError, RpcRemoteError, RpcServerDiedError
from .lifetime import Closeable
from .reqrep_server import inline_servers
from .reqrep_wire import (
    DEADLINE,
    DEFAULT_WAIT_FOR_SERVER_S,
    DONE,
    POLL_S,
    READ_BATCH,
    READER_INIT_AWAIT_NEW,
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
    cancel_headers,
    check_seconds,
    describe_topic,
    header_int,
    live_server_pid,
    message_parts,
    user_headers,
)
from .topic import Topic

__all__ = [
    "ClientEndpoint", "DeadlineTimer", "PendingCall", "ReplyRouter", "RequestClient", "RoutedCall",
]

_log = logging.getLogger("a0py.rpc")


def _seq_high(arena):
    with _core.Transport(arena).lock() as lk:
        return lk.seq_high


class PendingCall:
    """The client side of one request: what it has seen of its fate so far."""

    __slots__ = ("accepted", "dead_at", "deadline", "done", "endpoint", "id", "idle", "no_server_since",
                 "seq", "timeout")

    def __init__(self, endpoint, rid, seq, timeout, now):
        self.endpoint = endpoint
        self.id = rid
        self.seq = seq
        self.timeout = timeout
        self.deadline = None if timeout is None else now + timeout  # monotonic seconds
        self.idle = endpoint.streaming  # PRPC: the timeout restarts at each message
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
                if not self.endpoint.streaming or h.get(DONE) == "1":
                    self.done = True
                elif self.timeout is not None:
                    self.deadline = time.monotonic() + self.timeout
                return pkt
            self.done = True
            why = bytes(pkt.payload).decode("utf-8", "replace")
            if status == S_EXPIRED:
                raise A0TimeoutError(f"{self.endpoint.label}: {why}")
            raise RpcRemoteError(f"{self.endpoint.label}: {why}")
        if kind == T_CANCEL:
            if h.get(REQ) == self.id:
                self.done = True
                raise RpcCancelledError(f"{self.endpoint.label}: request {self.id} was cancelled")
        elif kind == T_ACCEPT:
            if header_int(h.get(THROUGH)) >= self.seq:
                self.accepted = True
        elif kind == T_START and self.accepted:
            self.done = True
            raise RpcServerDiedError(
                f"{self.endpoint.label}: the server that accepted request {self.id} is gone and a new "
                f"one started (pid {h.get(SERVER)}); the request was not run again, as it may have "
                "been partly done")
        return None

    def on_tick(self, now, alive, read_through):
        """Raises if the call must end now: its deadline passed, or its server died.
        `read_through`: the seq up to which the caller has handled the arena's packets.

        A server that closes answers first and releases its deadman after, so a dead
        server fails an accepted call only once every packet written before its death
        was seen was handled (the reply may be among them)."""
        endpoint = self.endpoint
        if alive is not None:
            self.no_server_since = None
            self.dead_at = None
        elif self.accepted:
            if self.dead_at is None:
                self.dead_at = _seq_high(endpoint.arena)
            if read_through >= self.dead_at:
                self.done = True
                raise RpcServerDiedError(f"{endpoint.label}: the server died while handling request "
                                         f"{self.id}; it was not run again, as it may have been partly "
                                         "done")
        elif self.no_server_since is None:
            self.no_server_since = now
        if self.deadline is not None and now >= self.deadline:
            what = "no message for" if self.idle else "no reply within"
            extra = "" if alive is not None else " (and no server is alive)"
            raise A0TimeoutError(f"{endpoint.label}: {what} {self.timeout} s to request {self.id}{extra}")
        wait = endpoint.wait_for_server
        if self.no_server_since is not None and wait is not None and now - self.no_server_since >= wait:
            raise A0TimeoutError(f"{endpoint.label}: no server alive for {wait} s, request {self.id} "
                                 "was not served; start a server on the topic (or pass a longer "
                                 "wait_for_server=)")


class ClientEndpoint:
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
            self.writer.pub(b"", cancel_headers(rid))
        except A0Error:
            _log.exception("%s: could not write the cancel of request %s", self.label, rid)


class RequestClient(Closeable):
    """What RPC and PRPC clients share: requests, the blocking wait, the dispatcher
    route for callbacks and futures, cancel.

    A subclass names its ``protocol`` (the arena it sends to) and whether it is
    ``streaming`` (PRPC); it offers ``_iter_replies`` (blocking, in the calling thread)
    and ``_submit`` (a future, replies routed on the dispatcher) to its users under the
    protocol's own names."""

    protocol = None
    streaming = False

    def __init__(self, topic, *, wait_for_server=DEFAULT_WAIT_FOR_SERVER_S):
        wait = check_seconds(wait_for_server, "wait_for_server")
        self.topic = Topic.of(topic)
        self._label = describe_topic(self.protocol, self.topic)
        self.arena = self.topic.arena(self.protocol)
        self._endpoint = ClientEndpoint(self.arena, self._label, self.streaming, wait)
        self._key = (self.topic.root, self.topic.name, self.protocol)
        self._router = None
        self._router_lock = threading.Lock()

    @property
    def wait_for_server(self):
        """Seconds a call waits while no server is alive (None: only its timeout)."""
        return self._endpoint.wait_for_server

    @wait_for_server.setter
    def wait_for_server(self, value):
        self._endpoint.wait_for_server = check_seconds(value, "wait_for_server")

    def _request(self, msg, headers, timeout):
        payload, hdrs = message_parts(msg, user_headers(headers))
        proto = [(TYPE, T_REQUEST)]
        if timeout is not None:
            proto.append((DEADLINE, str(time.monotonic_ns() + int(timeout * 1e9))))
        rid = msg.id if isinstance(msg, _core.Packet) else None
        pkt = _core.Packet(proto + hdrs, payload, id=rid) if rid else _core.Packet(proto + hdrs, payload)
        return pkt

    def _send(self, msg, headers, timeout):
        """Writes a request; returns its call state (deadline from now)."""
        pkt = self._request(msg, headers, None if self.streaming else timeout)
        seq = self._endpoint.writer.pub(pkt)
        now = time.monotonic()
        call = PendingCall(self._endpoint, pkt.id, seq, timeout, now)
        if live_server_pid(self._endpoint.server) is None:
            call.no_server_since = now
        return call

    def _check_not_self_wait(self):
        if inline_servers.would_wait_for_itself(self._key):
            raise LockError(f"{self._label}: a blocking call from a subscriber callback or handler to a "
                            "server of this same process would wait for itself (its handler runs on "
                            "this dispatcher thread); give that server an executor=, or use send() "
                            "with a callback")

    def _iter_replies(self, msg, timeout, headers):
        """Sends a request and yields its replies as they come (one for RPC), reading
        the arena in the calling thread: no dispatcher involved."""
        self._check_not_self_wait()
        reader = _core.PacketReader(self.arena, READER_INIT_AWAIT_NEW, READER_ITER_NEXT, self._label)
        call = None
        try:
            call = self._send(msg, headers, timeout)
            last_tick = time.monotonic()
            while True:
                now = time.monotonic()
                if now - last_tick >= POLL_S or (call.deadline is not None and now >= call.deadline):
                    call.on_tick(now, live_server_pid(self._endpoint.server), reader.last_seq)
                    last_tick = now
                    if call.dead_at is not None:
                        last_tick -= POLL_S  # look again as soon as the arena is read through
                wait = POLL_S if call.deadline is None else max(0.0, min(POLL_S, call.deadline - now))
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
                self._endpoint.write_cancel(call.id)
            reader.close()

    def cancel(self, request_id):
        """Cancels request `request_id` (its packet id) wherever it waits: a blocking
        call raises :class:`RpcCancelledError`, a future is cancelled, the server's
        ``on_cancel`` is told and a server that has not started it never does."""
        if not isinstance(request_id, str):
            raise ArgumentError(f"request_id must be the request packet's id (str), not {request_id!r}")
        router = self._router
        if router is not None:
            routed = router.calls.get(request_id)
            if routed is not None and routed.future.cancel():
                return  # its done-callback wrote the cancel
        self._endpoint.write_cancel(request_id)

    def _route(self):
        with self._router_lock:
            if self._router is None or self._router.pid != os.getpid():
                # None yet, or the parent's, inherited through fork: its watch is inert here.
                self._router = ReplyRouter(self._endpoint)
            return self._router

    def _submit(self, msg, timeout, headers, on_message):
        router = self._route()
        future = concurrent.futures.Future()
        with router.lock:  # a reply cannot be routed before the call is registered
            call = self._send(msg, headers, timeout)
            future.request_id = call.id
            routed = RoutedCall(call, future, on_message)
            router.calls[call.id] = routed
        future.add_done_callback(lambda f, r=routed: router.done(r))
        _deadline_timer.add(router, call.deadline)
        return future

    def close(self):
        """Stops routing replies to callbacks and futures; pending ones are cancelled.
        Idempotent. Blocking calls in other threads are unaffected. In a forked child,
        the calls the parent made before the fork are left alone (cancelling them would
        write their cancels into the parent's requests); the child's own are cancelled."""
        with self._router_lock:
            router, self._router = self._router, None
        if router is not None and router.pid == os.getpid():
            router.close()

    def __del__(self):
        # A collector may run this anywhere, even inside a lock that closing takes: so
        # only a flag and a post to the keeper thread, which closes the router if idle
        # (else the router closes itself after its last pending call).
        router = self.__dict__.get("_router")
        if router is not None:
            router.orphaned = True
            keeper_post(router.close_if_idle)

    def __repr__(self):
        return f"<a0py.{type(self).__name__} {self.topic.name!r}>"


class RoutedCall:
    """A pending call of a client's futures and callbacks: its :class:`PendingCall`,
    its future and the callback each reply goes to."""

    __slots__ = ("call", "future", "on_message")

    def __init__(self, call, future, on_message):
        self.call = call
        self.future = future
        self.on_message = on_message


class ReplyRouter:
    """Routes a client's replies to its futures and callbacks, on the dispatcher
    thread; one a client, made at its first future."""

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.lock = threading.Lock()
        self.calls = {}
        self.reader = _core.PacketReader(endpoint.arena, READER_INIT_AWAIT_NEW, READER_ITER_NEXT,
                                         endpoint.label)
        self.handled_through = self.reader.last_seq  # every packet up to it has been routed
        # The highest seq a server accepted through: a call is accepted iff its seq is
        # at most this (kept here, not per call, so an accept costs O(1) however many
        # calls are pending).
        self.accepted_through = 0
        self.closed = False
        self.orphaned = False  # its client is gone: close once no call is pending
        self.pid = os.getpid()
        start_keeper()  # the client's finalizer posts its close there
        self.watch = _dispatch.watch(endpoint.arena, self._route)

    def _route(self):
        batch = self.reader.read_batch(READ_BATCH)
        for pkt in batch:
            if type(pkt) is PacketCorruptError:
                continue
            h = pkt.headers
            kind = h.get(TYPE)
            if kind == T_ACCEPT:
                self.accepted_through = max(self.accepted_through, header_int(h.get(THROUGH)))
                continue
            with self.lock:  # held by send() from its write until the call is registered
                if kind in (T_REPLY, T_CANCEL):
                    routed = self.calls.get(h.get(REQ))
                    routed_calls = () if routed is None else (routed,)
                elif kind == T_START:
                    routed_calls = list(self.calls.values())
                    self.mark_accepted(routed_calls)
                else:
                    continue
            for routed in routed_calls:
                try:
                    reply = routed.call.on_packet(pkt, h)
                except RpcError as e:
                    self.finish(routed, error=e)
                    continue
                except A0TimeoutError as e:
                    self.finish(routed, error=e)
                    continue
                if reply is not None:
                    self.deliver(routed, reply)
        if batch:
            self.handled_through = self.reader.last_seq
        if self.orphaned and not self.calls:
            self.close()  # its client is gone and nothing is pending
            return False
        return len(batch) >= READ_BATCH

    def mark_accepted(self, routed_calls):
        through = self.accepted_through
        for routed in routed_calls:
            if routed.call.seq <= through:
                routed.call.accepted = True

    def deliver(self, routed, reply):
        call = routed.call
        if routed.on_message is not None:
            try:
                routed.on_message(reply, call.done)
            except Exception:
                _log.exception("%s: the callback raised on a reply to request %s",
                               self.endpoint.label, call.id)
        if call.done:
            self.finish(routed, result=reply)

    def finish(self, routed, result=None, error=None):
        routed.call.done = True
        with self.lock:
            self.calls.pop(routed.call.id, None)
        future = routed.future
        if future.done():
            return
        try:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)
        except concurrent.futures.InvalidStateError:
            pass  # cancelled meanwhile

    def done(self, routed):
        """Done-callback of every future: a future cancelled by its user cancels the
        request."""
        with self.lock:
            self.calls.pop(routed.call.id, None)
        if routed.future.cancelled() and not routed.call.done:
            routed.call.done = True
            self.endpoint.write_cancel(routed.call.id)
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
            routed_calls = list(self.calls.values())
        if not routed_calls:
            return None
        alive = live_server_pid(self.endpoint.server)
        self.mark_accepted(routed_calls)
        earliest = None
        for routed in routed_calls:
            try:
                routed.call.on_tick(now, alive, self.handled_through)
            except A0TimeoutError as e:
                self.finish(routed, error=e)
                self.endpoint.write_cancel(routed.call.id)
                continue
            except RpcError as e:
                self.finish(routed, error=e)
                continue
            d = routed.call.deadline
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
            routed_calls = list(self.calls.values())
        for routed in routed_calls:
            routed.future.cancel()
        try:
            self.reader.close()
        except LockError:
            pass  # closed from a collector run inside a read: the reader goes with the router


class DeadlineTimer:
    """One thread a process checks deadlines and server liveness of every pending
    callback/future call: at least every POLL_S seconds while any is pending, and at
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
            wait = POLL_S
            if earliest is not None:
                wait = max(0.0, min(wait, earliest - time.monotonic()))
            with self.cond:
                self.wake_at = time.monotonic() + wait
                self.cond.wait(wait)
                self.wake_at = None


_deadline_timer = DeadlineTimer()


def _reset_after_fork():
    global _deadline_timer
    _deadline_timer = DeadlineTimer()  # its thread did not survive the fork


os.register_at_fork(after_in_child=_reset_after_fork)
