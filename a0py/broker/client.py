"""A client of the fact broker: claims, retracts, subscriptions with joins.

Invariants:

* **The client keeps its own state** (its claims and subscriptions), changed in the order
  of the requests it sends, under one lock. Whenever the broker may have lost track of
  it (a new broker took the deadman, the broker answered ``RESYNC``, or replies were
  overrun in the client's arena) the client sends it whole (``STATE``): the broker
  replaces what it holds by it, changing only what differs, and sends every result in
  full; the client calls a subscription's callback only if its result really changed.
* **Callbacks run on the client's reader thread**, one at a time, in the order of the
  notifications; never under a lock of the transport or of the client. A callback may
  claim, retract, subscribe and unsubscribe (they do not wait for the broker); it must
  not call :meth:`BrokerClient.ping` or :meth:`BrokerClient.facts`, which wait for
  replies that only the reader thread can deliver (they raise instead of deadlocking).
* **The reader thread holds the client's deadman** for its whole life, and the client's
  first request is sent only after it took it: the broker sees the client alive for as
  long as it can be sent anything, and dead the moment its process dies.
* **Replies are handled by kind** (:data:`_REPLY_HANDLERS`), on the reader thread:
  notifications update their subscription (:mod:`a0py.broker.subscription`, which keeps
  a result in a deterministic order); answers and errors end the call waiting for them
  (:mod:`a0py.broker.client_requests`); revocations drop the claims they name; a resync
  request sends the client's whole state.
"""

import logging
import os
import secrets
import threading
import time

from a0py import _core
from a0py.errors import A0Error, A0TimeoutError, ArenaFormatError
from a0py.proto.deadman import Deadman
from a0py.proto.lifetime import Closeable

from . import wire
from .client_requests import (
    DEFAULT_TIMEOUT,
    BatchBlock,
    PendingCall,
    facts_reply,
    op_items,
    record_encoding,
    subscribe_payload,
)
from .errors import (
    BatchRejectedError,
    BrokerClosedError,
    BrokerError,
    BrokerNameError,
    BrokerTimeoutError,
    BrokerTypeError,
    ResultTooLargeError,
    UnknownSubscriptionError,
)
from .subscription import Subscription
from .terms import (
    encode_value,
    has_pattern,
    match,
    pattern_text,
    to_pattern,
    to_value,
)
from .wire import (
    IT_CLAIM,
    IT_RETRACT,
    REP_NOTIFY,
    REQ_BATCH,
    parse_reply,
    request_frames,
    request_frames_of,
)

log = logging.getLogger("a0py.broker")

__all__ = ["BrokerClient", "Subscription"]

_SLICE = 0.25            # how often idle threads re-check the closed flag


class BrokerClient(Closeable):
    """A client of the broker ``name`` (a name of ``[A-Za-z0-9_.-]``).

    ``client``: this client's name, unique among the broker's live clients (default:
    ``<pid>-<random>``); it names the client's arena and appears in its subscription
    facts. ``on_revoked(values)``: called (on the reader thread) when an administrator
    retracted some of this client's claims (``a0py retract``). ``root``: where the
    broker's arenas live (:class:`a0py.proto.topic.Root` or the ``A0PY_ROOT`` syntax;
    default ``A0PY_ROOT`` now), as for topics.

    Values and patterns are dataspace terms (``Record``, tuples, atoms, ``capture``,
    ``_``) or their text: a ``str`` argument is read with :func:`a0py.dataspace.parse`
    (``claim('temp("kitchen", 21.5)')``), never claimed as a string by accident; the
    string itself is written quoted (``claim('"hello"')``).

    The broker need not be running: the client's claims and subscriptions are sent when
    one starts, and again after any restart. (Such a client creates the broker's request
    arena, to wait on it; :func:`a0py.broker.broker_pid` asks whether a broker runs, creating
    nothing.)

    ``timeout``: how long (seconds) a request may wait for room in the broker's request
    arena. A running broker that does not take it in time (stuck, or far behind) makes
    the call raise :class:`BrokerTimeoutError` naming the broker; what the request
    changed stays in this client's state, which goes whole to the broker with the next
    request (or within a fraction of a second, once it drains).

    ``spin``: the longest spin, in seconds, of the reader thread's wait for the broker's
    next reply or notification before it sleeps (default :data:`a0py.broker.wire.SPIN`,
    50 µs; ``0``: never spin), as ``Broker(spin=)`` for the broker's side (docs/broker.md,
    "Latency and the spin").

    Raises :class:`BrokerNameError` (bad or taken names), :class:`BrokerTypeError` (a
    timeout that is not a positive number, a spin that is not a number),
    :class:`ValueError` (a spin out of 0 to 1 s) and :class:`a0py.A0Error` from the
    shared memory.
    """

    def __init__(self, name, *, client=None, arena_size=None, on_revoked=None,
                 timeout=DEFAULT_TIMEOUT, root=None, spin=wire.SPIN):
        wire.check_name(name)
        self.spin = wire.check_spin(spin)
        self.root = wire.root_of(root)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise BrokerTypeError(f"timeout must be a number of seconds > 0, got {timeout!r}")
        self.broker = name
        self.timeout = timeout
        self.name = wire.check_name(client, "client name") if client is not None else \
            f"{os.getpid()}-{secrets.token_hex(4)}"
        self.on_revoked = on_revoked
        self._lock = threading.RLock()
        self._claims = {}         # encoding -> [value, id of the request that claimed it]
        self._subs = {}           # sub id -> Subscription
        self._pending = {}        # req id -> PendingCall (ping, facts, revoke)
        self._errors = []         # rejections of requests nobody waits for
        self._next_req = 1
        self._next_sub = 1
        self._local = threading.local()
        # Threads inside a batch() block: while there are none, claim and retract need not
        # look at the thread-local batch (a thread-local lookup costs half a microsecond).
        self._batching = 0
        self._closed = False
        # A request that timed out: the broker may hold less than this client's state,
        # so the next write sends the whole state instead (the watcher retries it too).
        self._resync_due = False
        self.resyncs = 0
        self.gaps = 0
        self._reply_transport = None   # the reader thread's (its spins and sleeps count)
        self._requests = wire.hold_request_arena(name, root=self.root)
        self._queue = wire.request_queue(name, root=self.root)
        try:
            self._broker_deadman = Deadman(self._requests)
            self._arena = self._create_arena(arena_size or wire.CLIENT_ARENA_SIZE)
            # The most the broker sends in one answer: half of what the arena takes.
            self._result_limit = _core.Transport(self._arena).max_frame_size // 2
        except BaseException:
            wire.release_request_arena(name, self.root)
            raise
        self._ready = threading.Event()
        self._reader_error = None
        self._reader = threading.Thread(target=self._read_loop, daemon=True,
                                        name=f"a0py-broker-client-{self.name}")
        self._reader.start()
        self._ready.wait()
        if self._reader_error is not None:
            self._arena.close()
            wire.release_request_arena(name, self.root)
            raise self._reader_error
        self._broker_pid = self._broker_deadman.owner_pid
        self._resync(background=True)   # the hello: an empty state introduces this client
        self._watcher = threading.Thread(target=self._watch_broker, daemon=True,
                                         name=f"a0py-broker-watch-{self.name}")
        self._watcher.start()

    def _create_arena(self, size):
        try:
            arena = wire.open_client_arena(self.broker, self.name, size, self.root)
        except ArenaFormatError:   # not an arena of this version: a leftover
            wire.remove_client_arena(self.broker, self.name, self.root)
            arena = wire.open_client_arena(self.broker, self.name, size, self.root)
        if Deadman(arena).is_taken():
            arena.close()
            raise BrokerNameError(f"client name {self.name!r} is in use by a live client of "
                                  f"broker {self.broker!r}")
        with _core.Transport(arena).lock() as t:
            if not t.empty:
                t.clear()      # left by a dead client of the same name
        return arena

    # ---------------------------------------------------------------- public API

    @property
    def connected(self):
        """Whether a broker is running (its deadman is held)."""
        try:
            return self._broker_deadman.is_taken()
        except A0Error:
            return False

    def claim(self, *values):
        """Claim each value (idempotent: claiming a value this client holds changes
        nothing). Returns at once; the claims hold until retracted, or until this client
        closes or dies.

        Raises (nothing sent) :class:`a0py.dataspace.ParseError` for a str that does not
        parse, :class:`BrokerTypeError` for a pattern,
        :class:`a0py.dataspace.InvalidValueError` for a non-value, naming the argument;
        :class:`BrokerError` for a value too large for a frame."""
        keys = []
        kept = []
        for i, v in enumerate(values):
            key = record_encoding(v)     # the usual case: a Record, checked at no cost
            if key is None:
                key, v = to_value(v, f"claim argument {i}", "BrokerClient.claim")
            keys.append(key)
            kept.append(v)
        if not self._batching or getattr(self._local, "batch", None) is None:
            self._send_values(IT_CLAIM, keys, kept)
        else:
            self._submit([("claim", k, v) for k, v in zip(keys, kept)])

    def retract(self, *values_or_patterns):
        """Retract each value, or with a pattern (``_``, ``capture``) every claim of this
        client that matches it. Retracting what this client does not hold changes
        nothing. Returns at once.

        Raises (nothing sent) :class:`a0py.dataspace.ParseError` for a str that does not
        parse, :class:`a0py.dataspace.InvalidValueError` for a non-pattern."""
        ops = []
        plain = True                      # only values, given as Records: one fast request
        for i, p in enumerate(values_or_patterns):
            key = record_encoding(p)     # the usual case: a Record value
            if key is not None:
                ops.append(("retract", key, p))
                continue
            pattern = to_pattern(p, f"retract argument {i}", "BrokerClient.retract")
            plain = False
            if has_pattern(pattern):
                ops.append(("retract_pattern", pattern_text(pattern), pattern))
            else:
                ops.append(("retract", encode_value(pattern), pattern))
        if plain and (not self._batching or getattr(self._local, "batch", None) is None):
            self._send_values(IT_RETRACT, [op[1] for op in ops], None)
        else:
            self._submit(ops)

    def subscribe(self, *patterns, callback):
        """Subscribe to the join of ``patterns`` (their shared ``$names`` must bind equal
        values). ``callback(result)`` gets the full current result, a list of dicts
        variable → value, first at once (the current result, possibly empty), then each
        time the result set changes. Returns a :class:`Subscription`.

        Raises :class:`BrokerTypeError` for no pattern or a callback that is not callable;
        :class:`a0py.dataspace.ParseError` for a str that does not parse,
        :class:`a0py.dataspace.InvalidValueError` for a non-pattern."""
        if not patterns:
            raise BrokerTypeError("subscribe needs at least one pattern")
        if not callable(callback):
            raise BrokerTypeError(f"callback must be callable, got {type(callback).__name__}")
        checked = tuple(to_pattern(p, f"subscribe pattern {i}", "BrokerClient.subscribe")
                        for i, p in enumerate(patterns))
        with self._lock:
            sub = Subscription(self, self._next_sub, checked, callback)
            self._next_sub += 1
        self._submit([("subscribe", sub)])
        return sub

    def unsubscribe(self, subscription):
        """End a subscription (a :class:`Subscription` or its id). Raises
        :class:`UnknownSubscriptionError` if this client has no such subscription."""
        sub_id = subscription.id if isinstance(subscription, Subscription) else subscription
        with self._lock:
            if sub_id not in self._subs and not self._in_batch_subscribed(sub_id):
                raise UnknownSubscriptionError(f"no subscription {sub_id!r} of this client")
        self._submit([("unsubscribe", sub_id)])

    def batch(self):
        """``with client.batch():`` gathers the claims, retracts, subscribes and
        unsubscribes made in the block (on this thread) into one atomic request, sent
        when the block ends; nothing is sent if it ends with an exception. Blocks nest
        (the outermost sends)."""
        return BatchBlock(self)

    def ping(self, timeout=DEFAULT_TIMEOUT):
        """Round trip to the broker; returns the seconds it took. When it returns, every
        request this client sent before was applied and the notifications they caused to
        this client were delivered (callbacks run). Raises
        :class:`BrokerTimeoutError` if no broker answers in ``timeout`` seconds, and
        :class:`BatchRejectedError` for a request the broker rejected since the last
        ping."""
        t0 = time.perf_counter()
        self._call(wire.REQ_PING, [], timeout)
        elapsed = time.perf_counter() - t0
        with self._lock:
            errors, self._errors = self._errors, []
        if errors:
            raise errors[0]
        return elapsed

    def facts(self, pattern=None, timeout=DEFAULT_TIMEOUT, *, owners=False):
        """The facts in the broker matching ``pattern`` (all when None), sorted by their
        canonical encoding. With ``owners=True``, a list of ``(fact, [client names])``.
        Raises :class:`BrokerTimeoutError`, :class:`a0py.dataspace.ParseError`, and
        :class:`ResultTooLargeError` when the answer is larger than this client's arena
        takes at once (half of ``arena_size``): ask for less with a narrower pattern,
        or use a client with a larger ``arena_size``."""
        items = []
        if pattern is not None:
            items.append(wire.item(wire.IT_PATTERN, pattern_text(to_pattern(pattern, "pattern", "BrokerClient.facts")).encode()))
        reply = self._call(wire.REQ_FACTS, items, timeout,
                           flags=wire.FLAG_OWNERS if owners else 0)
        return facts_reply(reply, owners)

    def revoke(self, *patterns, owner=None, timeout=DEFAULT_TIMEOUT):
        """Administrator's retract: retract, on behalf of their owners, every claim that
        matches one of ``patterns``, of every client or only of client ``owner``. The
        owners are told (their ``on_revoked``) and stop re-asserting them. Returns the
        ``(fact, [owner])`` pairs retracted. Raises :class:`BrokerTimeoutError`,
        :class:`BrokerTypeError`, and :class:`ResultTooLargeError` when the list is
        larger than this client's arena takes at once (the claims were revoked)."""
        if not patterns:
            raise BrokerTypeError("revoke needs at least one pattern")
        items = [wire.item(wire.IT_PATTERN, pattern_text(to_pattern(p, "pattern", "BrokerClient.revoke")).encode()) for p in patterns]
        if owner is not None:
            items.append(wire.item(wire.IT_OWNER, wire.check_name(owner, "owner").encode()))
        return facts_reply(self._call(wire.REQ_REVOKE, items, timeout), True)

    def claims(self):
        """The values this client claims (as it knows them), sorted by encoding."""
        with self._lock:
            return [v for _k, (v, _r) in sorted(self._claims.items())]

    def subscriptions(self):
        """This client's live subscriptions."""
        with self._lock:
            return list(self._subs.values())

    def close(self):
        """Leave: the broker retracts this client's claims and subscriptions; the client's
        threads end and its arena is removed. Idempotent. A forked child's copy closes
        only itself: the client, its claims and its arena stay the parent's."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for p in self._pending.values():
                p.error = BrokerClosedError("the client was closed")
                p.done.set()
        if self._forked_copy():
            return
        try:
            if self.connected:
                frames = wire.request_frames(wire.REQ_BYE, self._take_id(), self.name, [])
                self._queue.put_many(frames, timeout=min(self.timeout, 1.0),
                                     alive=lambda: self.connected)
        except A0Error:
            pass
        for thread in (self._reader, self._watcher):
            if thread is not threading.current_thread():
                thread.join(2 * _SLICE + 1)
        try:
            wire.remove_client_arena(self.broker, self.name, self.root)
        finally:
            self._arena.close()
            wire.release_request_arena(self.broker, self.root)

    def __repr__(self):
        return f"BrokerClient({self.broker!r}, client={self.name!r})"

    # ---------------------------------------------------------------- sending

    def _take_id(self):
        with self._lock:
            n = self._next_req
            self._next_req += 1
            return n

    def _in_batch_subscribed(self, sub_id):
        b = getattr(self._local, "batch", None)
        return b is not None and any(op[0] == "subscribe" and op[1].id == sub_id for op in b.ops)

    def _submit(self, ops):
        if self._closed:
            raise BrokerClosedError(f"the client {self.name!r} was closed")
        b = getattr(self._local, "batch", None)
        if b is not None:
            b.ops.extend(ops)
        else:
            self._send_ops(ops)

    def _send_values(self, op, keys, values):
        """The fast path of claim and retract outside a batch: apply to this client's own
        state and send one request of ``op`` items (``keys``, the encodings), with no
        intermediate ops or item bytes. ``values``: the claimed values (None: retract)."""
        with self._lock:
            if self._closed:
                raise BrokerClosedError(f"the client {self.name!r} was closed")
            req_id = self._next_req
            # First the frames (a value too large for one raises here, nothing changed).
            frames = request_frames_of(REQ_BATCH, req_id, self.name, op, keys)
            claims = self._claims
            if values is None:
                for key in keys:
                    claims.pop(key, None)
            else:
                for key, value in zip(keys, values):
                    claims[key] = [value, req_id]
            self._next_req += 1
            self._write(frames)

    def _send_ops(self, ops):
        """Apply ``ops`` to this client's own state and send them as one batch, both
        under the lock (so the broker sees requests in the order the state changed).
        The frames are made first: a value too large for one raises, nothing changed."""
        with self._lock:
            if self._closed:
                raise BrokerClosedError(f"the client {self.name!r} was closed")
            req_id = self._next_req
            frames = request_frames(REQ_BATCH, req_id, self.name, op_items(ops))
            claims = self._claims
            for op in ops:
                kind = op[0]
                if kind == "claim":
                    claims[op[1]] = [op[2], req_id]
                elif kind == "retract":
                    claims.pop(op[1], None)
                elif kind == "retract_pattern":
                    pattern = op[2]
                    for key in [k for k, (v, _r) in claims.items() if match(pattern, v)]:
                        del claims[key]
                elif kind == "subscribe":
                    self._subs[op[1].id] = op[1]
                else:
                    sub = self._subs.pop(op[1], None)
                    if sub is not None:
                        sub.active = False
            self._next_req += 1
            self._write(frames)

    def _write(self, frames, timeout=None):
        """Puts ``frames`` into the request queue (with the client's lock held), waiting at
        most ``timeout`` seconds (None: the client's timeout) for room. Dropped when no
        broker runs: the state goes whole to the next one. Raises
        :class:`BrokerTimeoutError` when a running broker does not take them in time."""
        if self._resync_due:
            # The broker may miss an earlier request: the whole state (which holds what
            # these frames change, and the calls still waiting) replaces them.
            self._resync_due = False
            self._resync(timeout=timeout)
            return
        if timeout is None:
            timeout = self.timeout
        try:
            if len(frames) == 1:       # the usual case: put's fast path, one lock round trip
                self._queue.put(frames[0], timeout, self._broker_alive)
            else:
                self._queue.put_many(frames, timeout, self._broker_alive)
        except A0TimeoutError:
            self._resync_due = True
            raise BrokerTimeoutError(
                f"broker {self.broker!r} (pid {self._queue.reader_pid}) did not take a request of "
                f"client {self.name!r} within {timeout}s: its request arena stayed full (the broker "
                "is stuck or far behind). The change is kept in this client's state, which goes "
                "to the broker whole with the next request") from None

    def _broker_alive(self):
        return not self._closed and self.connected

    def _call(self, kind, items, timeout, flags=0):
        if threading.current_thread() is self._reader:
            raise BrokerError("ping, facts and revoke cannot be called from a subscription "
                              "callback (the reply would be delivered by this same thread)")
        if self._closed:
            raise BrokerClosedError(f"the client {self.name!r} was closed")
        pending = PendingCall(kind, items, flags)
        deadline = time.monotonic() + timeout
        with self._lock:
            req_id = self._next_req
            self._next_req += 1
            self._pending[req_id] = pending
            try:
                self._write(wire.request_frames(kind, req_id, self.name, items, flags), timeout)
            except BaseException:
                self._forget_pending(pending)
                raise
        if not pending.done.wait(max(deadline - time.monotonic(), 0.0)):
            self._forget_pending(pending)
            raise BrokerTimeoutError(
                f"no answer from broker {self.broker!r} within {timeout}s "
                f"(is `a0py broker {self.broker}` running?)")
        if pending.error is not None:
            raise pending.error
        return pending.reply

    def _forget_pending(self, pending):
        with self._lock:
            for k, p in list(self._pending.items()):
                if p is pending:
                    del self._pending[k]

    def _resync(self, timeout=None, background=False):
        """Send this client's whole state (replaces what the broker holds for it), then
        the requests still waiting for an answer, with new ids. ``background``: on a
        thread of the client's own (the hello, the reader, the watcher), where a broker
        that does not drain in time leaves the resync due (the watcher retries it) instead
        of raising."""
        if background:
            try:
                self._resync(timeout)
            except BrokerTimeoutError as exc:
                log.warning("client %s: %s; retrying", self.name, exc)
            return
        with self._lock:
            self._resync_due = False
            if self._closed:
                return
            self.resyncs += 1
            items = [wire.item(wire.IT_CLAIM, k) for k in self._claims]
            items += [wire.item(wire.IT_SUBSCRIBE, subscribe_payload(s)) for s in self._subs.values()]
            for sub in self._subs.values():
                sub._reset = True      # drop deltas until the full result comes
            req_id = self._next_req
            self._next_req += 1
            frames = wire.request_frames(wire.REQ_STATE, req_id, self.name, items)
            waiting = sorted(self._pending.items())
            self._pending = {}
            for _old, p in waiting:
                new_id = self._next_req
                self._next_req += 1
                self._pending[new_id] = p
                p.reply = []
                frames += wire.request_frames(p.kind, new_id, self.name, p.items, p.flags)
            self._write(frames, timeout)

    # ---------------------------------------------------------------- threads

    def _watch_broker(self):
        """Resync whenever a broker other than the one last seen holds the deadman."""
        dm = self._broker_deadman
        while not self._closed:
            if self._resync_due and self.connected:
                self._resync(background=True)
            try:
                dm.wait_taken(_SLICE)
            except A0TimeoutError:
                continue
            except A0Error:
                return
            try:
                pid = dm.owner_pid
            except A0Error:
                return
            if pid is not None and pid != self._broker_pid:
                self._broker_pid = pid
                log.info("client %s: broker %r (pid %s) is up; re-asserting", self.name,
                         self.broker, pid)
                try:
                    self._resync(background=True)
                except A0Error:
                    log.warning("client %s: resync failed", self.name, exc_info=True)
            try:
                dm.wait_released(_SLICE)
                self._broker_pid = None
            except A0TimeoutError:
                continue
            except A0Error:
                return

    def _read_loop(self):
        deadman = Deadman(self._arena)
        try:
            if not deadman.try_take():
                raise BrokerNameError(f"client name {self.name!r} is in use")
        except BaseException as exc:
            self._reader_error = exc
            self._ready.set()
            return
        tr = self._reply_transport = _core.Transport(self._arena)
        tr.spin_max = self.spin
        self._ready.set()
        last = None
        try:
            while not self._closed:
                first = tr.read_next(timeout=_SLICE)
                if first is None:
                    continue
                frames = tr.read_many(1024)
                frames.insert(0, first)
                for seq, data in frames:
                    if last is not None and seq != last + 1:
                        self.gaps += 1
                        log.info("client %s: notifications overrun; resyncing", self.name)
                        self._resync(background=True)
                    last = seq
                    try:
                        self._on_frame(data)
                    except Exception:
                        log.exception("client %s: bad frame from the broker", self.name)
        except A0Error:
            if not self._closed:
                log.exception("client %s: reader stopped", self.name)
        finally:
            try:
                deadman.release()
            except A0Error:
                pass


    # ---------------------------------------------------------------- replies

    def _on_frame(self, data):
        kind, flags, ident, items = parse_reply(data)
        handler = _REPLY_HANDLERS.get(kind)
        if handler is not None:
            handler(self, flags, ident, items)

    def _on_notify(self, flags, ident, items):
        """A frame of subscription ``ident``'s result: its callback runs if the result
        changed."""
        sub = self._subs.get(ident)
        if sub is None:
            return
        result = sub._apply(flags, items)
        if result is not None and sub.active:
            try:
                sub.callback(result)
            except Exception:
                log.exception("client %s: subscription %d callback raised", self.name, ident)
            if not sub._delivered.is_set():   # set() takes a lock: only the first time
                sub._delivered.set()

    def _on_answer(self, flags, ident, items):
        """A frame of the answer to call ``ident`` (a pong, facts): the call ends with
        the last one."""
        with self._lock:
            pending = self._pending.get(ident)
            if pending is None:
                return
            pending.reply.extend(items)
            if flags & wire.FLAG_MORE:
                return
            del self._pending[ident]
        pending.done.set()

    def _on_error(self, flags, ident, items):
        """Request ``ident`` was rejected, or its answer is too large: the call waiting
        for it raises, or the next ping does."""
        index = None
        size = None
        text = "rejected"
        for op, payload in items:
            if op == wire.IT_INDEX:
                index = wire.parse_varint(payload)
            elif op == wire.IT_SIZE:
                size = wire.parse_varint(payload)
            elif op == wire.IT_TEXT:
                text = payload.decode("utf-8", "replace")
        if size is not None:
            error = ResultTooLargeError(
                f"broker {self.broker!r} cannot answer request {ident}: {text}", size,
                self._result_limit)
        else:
            error = BatchRejectedError(
                f"broker {self.broker!r} rejected request {ident}: {text}", index)
        with self._lock:
            pending = self._pending.pop(ident, None)
            if pending is None:
                self._errors.append(error)
        if pending is not None:
            pending.error = error
            pending.done.set()
        else:
            log.warning("client %s: %s", self.name, error)

    def _on_revocation(self, flags, ident, items):
        """An administrator revoked these claims: those claimed before request ``ident``
        are dropped from this client's state and handed to ``on_revoked``."""
        gone = []
        with self._lock:
            for op, payload in items:
                entry = self._claims.get(payload)
                if op == wire.IT_FACT and entry is not None and entry[1] <= ident:
                    del self._claims[payload]
                    gone.append(entry[0])
        if gone and self.on_revoked is not None:
            try:
                self.on_revoked(gone)
            except Exception:
                log.exception("client %s: on_revoked raised", self.name)

    def _on_resync_request(self, flags, ident, items):
        """The broker lost track of this client: it gets the whole state."""
        self._resync(background=True)

    def _on_subscription_error(self, flags, ident, items):
        """The broker cannot deliver subscription ``ident``'s result: its ``wait``
        raises the error."""
        sub = self._subs.get(ident)
        text = b"".join(p for op, p in items if op == wire.IT_TEXT).decode("utf-8", "replace")
        if sub is not None:
            sub.error = BrokerError(f"subscription {ident}: {text}")
            sub._delivered.set()
        log.warning("client %s: subscription %d: %s", self.name, ident, text)


# reply kind -> its handler, called on the reader thread as handler(client, flags, id,
# items). A kind not here is dropped: REP_ACK (it only says a request was taken), and
# any kind a newer broker may send.
_REPLY_HANDLERS = {
    REP_NOTIFY: BrokerClient._on_notify,
    wire.REP_PONG: BrokerClient._on_answer,
    wire.REP_FACTS: BrokerClient._on_answer,
    wire.REP_ERROR: BrokerClient._on_error,
    wire.REP_REVOKED: BrokerClient._on_revocation,
    wire.REP_RESYNC: BrokerClient._on_resync_request,
    wire.REP_SUB_ERROR: BrokerClient._on_subscription_error,
}
