"""The broker process: drains the request arena, runs the :class:`Engine`, answers.

Invariants:

* **One broker per name.** The running broker holds the request arena's deadman for its
  life; a second one finds it taken and raises :class:`BrokerRunningError`. Taking it
  and clearing the arena happen under the arena's lock, so a client that saw the new
  broker (the deadman taken) writes after the clear and is never cleared away.
* **One thread touches the engine** (the one in :meth:`Broker.run`). Everything else
  (a client's death, a stop) reaches it as a frame in the request arena, so events are
  ordered with requests.
* **Every request is answered or rejected.** A batch or state gets an ``ACK`` (one per
  client per drain, naming its last request processed) or an ``ERROR`` naming the bad
  item; a ping a ``PONG`` (the empty notification); facts and revokes their list. Before
  any such direct answer the pending notifications are queued first, so when a client's
  ping returns, every notification due from the requests it sent before has reached it.
* **A request from a client the broker does not know** (it restarted, or lost the
  client's hello) is refused with ``RESYNC``, never applied: the client then sends its
  whole state. Only a ``STATE`` request introduces a client.
* **A client's death is seen through its deadman** (a watcher thread blocked on the
  robust lock, woken by the kernel when the holder dies), confirmed by the main thread,
  which then retracts all the client's claims and subscriptions in one change and
  unlinks its arena.
* **A broker removes what it owns when it stops**: its request arena, unless a client
  is still connected (that client keeps writing to it, and the next broker of the name
  must find it there: clients that map an arena removed under them would never see
  that broker), and the arenas of the clients it saw die.
"""

import gc
import logging
import threading

from a0py import _core
from a0py.dataspace import DecodeError, InvalidValueError, ParseError, decode, encode, parse
from a0py.errors import A0Error, A0TimeoutError
from a0py.proto.deadman import Deadman

from . import wire
from ._build_choice import engine_build
from .errors import BatchRejectedError, BrokerError, BrokerRunningError, BrokerTypeError
from .wire import (
    FLAG_MORE,
    IT_ADD,
    IT_CLAIM,
    IT_DEL,
    IT_RETRACT,
    IT_RETRACT_PATTERN,
    IT_SUBSCRIBE,
    IT_UNSUBSCRIBE,
    REQ_BATCH,
    REQ_DIED,
    REQ_WAKE,
    notify_frames,
    parse_request,
    row_items,
)

log = logging.getLogger("a0py.broker")

Engine = engine_build.Engine
CLAIM, RETRACT, SUBSCRIBE, UNSUBSCRIBE = (engine_build.CLAIM, engine_build.RETRACT,
                                          engine_build.SUBSCRIBE, engine_build.UNSUBSCRIBE)

__all__ = ["GC_THRESHOLD", "Broker"]

# The threshold of the cyclic GC's youngest generation while a broker serves (CPython's
# default is 700). The broker allocates a few objects per claim and keeps few of them, and
# its engine holds a large, long-lived heap that the older-generation passes walk: at 700
# the collector runs every few requests and takes about a quarter of the broker's CPU, at
# this threshold about 7 %; larger gains little more (bench/broker.py --workload gc).
GC_THRESHOLD = 50_000

_BROKER_SOURCE = "broker"        # the source name of the broker's own frames
_WATCH_SLICE = 1.0               # how often an idle watcher re-checks the stop flag
_DRAIN_MAX = 4096                # frames handled per round before notifying


class _Conn:
    """What the broker holds for one client: its arena (replies go there), its deadman
    and the frames queued for it in this round."""

    __slots__ = ("acked", "arena", "deadman", "frame_limit", "last_req", "name", "outbox",
                 "pending", "result_limit", "transport", "watcher")

    def __init__(self, name, arena):
        self.name = name
        self.arena = arena
        self.transport = _core.Transport(arena)
        self.deadman = Deadman(arena)
        # Replies are cut into frames of a quarter of the arena at most, and a whole result
        # must fit in half of it: a bigger one could never be read before being overrun.
        self.frame_limit = min(wire.MAX_FRAME, self.transport.max_frame_size // 4)
        self.result_limit = self.transport.max_frame_size // 2
        self.outbox = []
        self.last_req = 0
        self.acked = 0
        self.pending = None      # (kind, req_id, items) of a request cut into frames
        self.watcher = None


class Broker:
    """The fact broker named ``name`` (``a0py broker NAME`` runs one).

    ``Broker(name).run()`` serves until :meth:`stop` or Ctrl-C; ``with Broker(name):``
    (or :meth:`start`) serves from a thread of this process. ``arena_size``: bytes of
    the request arena when this broker creates it. ``root``: where its arenas live
    (:class:`a0py.proto.topic.Root` or the ``A0PY_ROOT`` syntax; default ``A0PY_ROOT``
    now), as for topics; its clients must name the same root.

    Raises :class:`BrokerNameError` for a bad name (at once), and from :meth:`run` /
    :meth:`start`: :class:`BrokerRunningError` when a broker of this name is alive,
    :class:`a0py.A0Error` from the shared memory.

    ``gc_threshold``: the threshold of the cyclic garbage collector's youngest
    generation while :meth:`run` serves (default :data:`GC_THRESHOLD`; ``None`` leaves
    the collector as it is). The collector's settings belong to the whole process: the
    broker sets the threshold when it starts serving and puts back the thresholds it
    found when :meth:`run` returns. Raises (at once) :class:`BrokerTypeError` for a
    threshold that is not an int, :class:`ValueError` for one below 1 (0 would turn
    automatic collection off, and reference cycles would pile up while the broker runs).

    ``spin``: the longest spin, in seconds, of the broker's wait for the next request
    before it sleeps (default :data:`a0py.broker.wire.SPIN`, 50 µs; ``0``: never spin).
    The wait is the transport's adaptive one (:attr:`a0py.Transport.spin_max`): it spins
    only while requests have been coming within that time, and past 50 µs only if every
    runnable task of the machine has a CPU then. Raises (at once)
    :class:`BrokerTypeError` for a spin that is not a number, :class:`ValueError` for
    one out of 0 to 1 s.
    """

    def __init__(self, name, *, arena_size=None, gc_threshold=GC_THRESHOLD, root=None,
                 spin=wire.SPIN):
        wire.check_name(name)
        self.spin = wire.check_spin(spin)
        self.root = wire.root_of(root)
        if gc_threshold is not None:
            if type(gc_threshold) is not int:
                raise BrokerTypeError(f"gc_threshold must be an int or None, got "
                                      f"{type(gc_threshold).__name__} {gc_threshold!r}")
            if gc_threshold < 1:
                raise ValueError(f"gc_threshold must be at least 1 (or None to leave the "
                                 f"collector alone), got {gc_threshold}")
        self.gc_threshold = gc_threshold
        self.name = name
        self.arena_size = arena_size or wire.REQUEST_ARENA_SIZE
        self.engine = Engine()
        self._conns = {}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = None
        self._error = None
        self._arena = None
        self._queue = None
        self._last_seq = None
        self.stats = {"requests": 0, "notifications": 0, "rounds": 0, "gaps": 0}

    # ---------------------------------------------------------------- lifecycle

    def run(self):
        """Serve in this thread until :meth:`stop` (or Ctrl-C, which raises
        KeyboardInterrupt after cleaning up). The deadman is held by this thread."""
        arena = wire.hold_request_arena(self.name, self.arena_size, self.root)
        self._arena = arena
        queue = self._queue = wire.request_queue(self.name, self.arena_size, self.root)
        serving = False
        gc_saved = gc.get_threshold()
        if self.gc_threshold is not None:
            gc.set_threshold(self.gc_threshold, *gc_saved[1:])
        try:
            # Requests to the previous broker are cleared (their clients resync) in the
            # lock that takes the deadman.
            if not queue.open_reader(discard=True):
                raise BrokerRunningError(
                    f"a broker named {self.name!r} is already running (pid {queue.reader_pid})")
            serving = True
            queue.reader.spin_max = self.spin
            self._ready.set()
            log.info("broker %r serving (request arena %s)", self.name, arena.name)
            self._serve(queue)
        finally:
            self._stop.set()
            self._ready.set()
            try:
                queue.close_reader()
            finally:
                try:
                    self._shutdown(remove=serving)
                finally:
                    gc.set_threshold(*gc_saved)

    def start(self, timeout=10.0):
        """Serve from a new thread of this process; returns once serving. Raises what
        :meth:`run` raises at start (e.g. :class:`BrokerRunningError`)."""

        def main():
            try:
                self.run()
            except BaseException as exc:  # reported to start() or kept for stop()
                self._error = exc

        self._thread = threading.Thread(target=main, name=f"a0py-broker-{self.name}", daemon=True)
        self._thread.start()
        self._ready.wait(timeout)
        if self._error is not None:
            raise self._error
        return self

    def stop(self, timeout=10.0):
        """Stop serving (from any thread); joins the thread :meth:`start` made."""
        self._stop.set()
        queue = self._queue
        if queue is not None and self._arena is not None:
            try:
                frames = wire.request_frames(wire.REQ_WAKE, 0, _BROKER_SOURCE, [])
                queue.put_many(frames, timeout=1.0)
            except Exception:  # the loop also wakes on its own within a second
                pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def _shutdown(self, remove):
        """Closes what the broker holds; with `remove` (it served: the deadman was its
        own) removes the request arena too when no client is connected."""
        connected = 0
        for conn in list(self._conns.values()):
            try:
                # A client that closed (its BYE not read yet) or died is no longer one.
                connected += conn.deadman.is_taken()
            except A0Error:
                pass
            self._close_conn(conn, unlink=False)
        self._conns.clear()
        if self._arena is not None:
            self._arena = None
            wire.release_request_arena(self.name, self.root)
            if remove and not connected:
                try:
                    wire.remove_request_arena(self.name, self.root)
                except A0Error as exc:
                    log.warning("broker %r: could not remove its request arena: %s",
                                self.name, exc)

    # ---------------------------------------------------------------- the loop

    def _serve(self, queue):
        handle = self._handle
        stats = self.stats
        while not self._stop.is_set():
            # Copies a batch out; its room goes back at once to a writer seen waiting,
            # and in any case before the broker waits for more: a writer that starts
            # waiting after a check of ours would otherwise wait for a broker that
            # waits for it (docs/broker.md, "Requests are never evicted unread").
            frames = queue.take(_DRAIN_MAX, timeout=_WATCH_SLICE)
            if not frames:
                continue
            stats["rounds"] += 1
            stats["requests"] += len(frames)
            last_seq = self._last_seq
            for seq, data in frames:
                if last_seq is not None and seq != last_seq + 1:
                    self._on_gap(seq)
                last_seq = seq
                try:
                    handle(data)
                except BrokerError as exc:
                    log.warning("broker %r: dropped a malformed frame: %s", self.name, exc)
            self._last_seq = last_seq
            self._flush()

    def _on_gap(self, seq):
        # Requests were evicted unread (a writer that did not wait for room): whose is
        # unknown, so every client sends its state again.
        self.stats["gaps"] += 1
        log.warning("broker %r: requests lost before seq %d; asking every client to resync",
                    self.name, seq)
        for conn in self._conns.values():
            conn.outbox.extend(wire.reply_frames(wire.REP_RESYNC, 0, []))

    def _handle(self, data):
        kind, flags, req_id, source, items = parse_request(data)
        if kind == REQ_WAKE:
            return
        if kind == REQ_DIED:
            self._client_died(source)
            return
        conn = self._conns.get(source)
        if conn is None:
            conn = self._attach(source, kind)
            if conn is None:
                return
        if flags & FLAG_MORE or conn.pending is not None:
            if conn.pending is not None and conn.pending[1] != req_id:
                conn.pending = None    # the rest of an older request never came
            if conn.pending is None:
                conn.pending = (kind, req_id, [])
            conn.pending[2].extend(items)
            if flags & FLAG_MORE:
                return
            items = conn.pending[2]
            conn.pending = None
        conn.last_req = req_id
        if kind == REQ_BATCH:
            self._batch(conn, req_id, items)
        elif kind == wire.REQ_STATE:
            self._state(conn, req_id, items)
        elif kind == wire.REQ_PING:
            self._collect_changes()
            conn.outbox.extend(wire.reply_frames(wire.REP_PONG, req_id, []))
        elif kind == wire.REQ_FACTS:
            self._facts(conn, req_id, flags, items)
        elif kind == wire.REQ_REVOKE:
            self._revoke(conn, req_id, items)
        elif kind == wire.REQ_BYE:
            self._collect_changes()
            self.engine.drop(conn.name)
            self._send(conn)
            self._close_conn(conn, unlink=False)
        else:
            self._reject(conn, req_id, f"unknown request kind {kind}")

    def _attach(self, source, kind):
        """Open the arena of a client met for the first time; None if it is dead or gone.
        A request other than STATE from it is answered RESYNC."""
        try:
            arena = wire.attach_client_arena(self.name, source, self.root)
        except A0Error as exc:
            log.info("broker %r: request from %r, which has no arena (%s)", self.name, source, exc)
            return None
        conn = _Conn(source, arena)
        if not conn.deadman.is_taken():
            log.info("broker %r: request from %r, which is not alive", self.name, source)
            self._close_conn(conn, unlink=True)
            return None
        if kind != wire.REQ_STATE:
            # Not introduced by a state: the broker restarted under it or lost its hello.
            conn.outbox.extend(wire.reply_frames(wire.REP_RESYNC, 0, []))
            self._send(conn)
            self._close_conn(conn, unlink=False)
            return None
        self._conns[source] = conn
        self.engine.client(source)
        conn.watcher = threading.Thread(target=self._watch, args=(conn,), daemon=True,
                                        name=f"a0py-broker-watch-{source}")
        conn.watcher.start()
        return conn

    def _watch(self, conn):
        """A client's death watch: blocks on its deadman; when it is released (the client
        ended or was killed) tells the main loop through the request arena."""
        while not self._stop.is_set():
            try:
                conn.deadman.wait_released(_WATCH_SLICE)
            except A0TimeoutError:
                continue
            except A0Error:
                return     # the arena was closed: the client is being dropped
            if self._stop.is_set():
                return
            try:
                frames = wire.request_frames(wire.REQ_DIED, 0, conn.name, [])
                self._queue.put_many(frames, alive=lambda: not self._stop.is_set())
            except A0Error:
                pass
            return

    def _client_died(self, name):
        conn = self._conns.get(name)
        if conn is None:
            return
        try:
            if conn.deadman.is_taken():
                return   # not a death (a forged or stale notice)
        except A0Error:
            pass
        log.info("broker %r: client %r died; retracting what it held", self.name, name)
        self.engine.drop(name)
        del self._conns[name]
        self._close_conn(conn, unlink=True)

    def _close_conn(self, conn, unlink):
        self._conns.pop(conn.name, None)
        try:
            if unlink:
                wire.remove_client_arena(self.name, conn.name, self.root)
        except (A0Error, OSError):
            pass
        try:
            conn.arena.close()
        except A0Error:
            pass

    # ---------------------------------------------------------------- requests

    def _reject(self, conn, req_id, message, index=None, size=None):
        items = [] if index is None else [wire.item(wire.IT_INDEX, wire.varint(index))]
        if size is not None:
            items.append(wire.item(wire.IT_SIZE, wire.varint(size)))
        items.append(wire.item(wire.IT_TEXT, message.encode("utf-8")))
        conn.outbox.extend(wire.reply_frames(wire.REP_ERROR, req_id, items))

    def _too_large(self, conn, out, what):
        """Whether the answer ``out`` (items) is too large to reach ``conn`` (then it is
        refused with ``IT_SIZE``, saying how to ask for less or take more): a reply
        larger than half the client's arena would be overrun before it is read, and the
        client would ask for it again and again."""
        size = sum(map(len, out))
        if size <= conn.result_limit:
            return None
        overhead = conn.arena.size - conn.transport.max_frame_size
        return size, (
            f"{what} come to {size} bytes, more than client {conn.name!r} takes in one answer "
            f"({conn.result_limit} bytes, half its arena): ask for less with a narrower "
            f"pattern (one label, or constants in place of '_'), or make the client with "
            f"arena_size={2 * size + overhead} or more")

    def _batch(self, conn, req_id, items):
        ops = []
        append = ops.append
        n = 0
        try:
            for op, payload in items:
                if op == IT_CLAIM:
                    append((CLAIM, payload, decode(payload)))
                elif op == IT_RETRACT:
                    append((RETRACT, decode(payload), payload))
                elif op == IT_RETRACT_PATTERN:
                    append((RETRACT, parse(payload.decode("utf-8"))))
                elif op == IT_SUBSCRIBE:
                    sub_id, texts = wire.parse_subscribe(payload)
                    append((SUBSCRIBE, sub_id, tuple(parse(t) for t in texts)))
                elif op == IT_UNSUBSCRIBE:
                    append((UNSUBSCRIBE, wire.parse_varint(payload)))
                else:
                    raise wire.WireError(f"unknown item op {op}")
                n += 1
        except (DecodeError, ParseError, InvalidValueError, UnicodeDecodeError,
                wire.WireError) as exc:
            self._reject(conn, req_id, f"item {n}: {exc}", n)
            return
        try:
            self.engine.apply(conn.name, ops)
        except BatchRejectedError as exc:
            self._reject(conn, req_id, str(exc), exc.item)

    def _state(self, conn, req_id, items):
        claims = {}
        subs = {}
        for n, (op, payload) in enumerate(items):
            try:
                if op == wire.IT_CLAIM:
                    claims[payload] = wire.decode_value(payload)
                elif op == wire.IT_SUBSCRIBE:
                    sub_id, texts = wire.parse_subscribe(payload)
                    subs[sub_id] = tuple(parse(t) for t in texts)
                else:
                    raise wire.WireError(f"item op {op} does not belong in a state")
            except (DecodeError, ParseError, InvalidValueError, UnicodeDecodeError,
                    wire.WireError) as exc:
                self._reject(conn, req_id, f"item {n}: {exc}", n)
                return
        try:
            self.engine.replace(conn.name, claims, subs)
        except BatchRejectedError as exc:
            self._reject(conn, req_id, str(exc), exc.item)

    def _facts(self, conn, req_id, flags, items):
        pattern = None
        text = None
        for op, payload in items:
            if op == wire.IT_PATTERN:
                try:
                    text = payload.decode("utf-8")
                    pattern = parse(text)
                except (ParseError, UnicodeDecodeError) as exc:
                    self._reject(conn, req_id, f"pattern: {exc}", 0)
                    return
        self._collect_changes()
        out = []
        facts = self.engine.facts(pattern)
        for fact in facts:
            out.append(wire.item(wire.IT_FACT, encode(fact)))
            if flags & wire.FLAG_OWNERS:
                out.extend(wire.item(wire.IT_OWNER, o.encode("utf-8"))
                           for o in self.engine.owners(fact))
        what = "the facts" if text is None else f"the facts matching {text}"
        too_large = self._too_large(conn, out, f"{what} ({len(facts)} of them)")
        if too_large is not None:
            self._reject(conn, req_id, too_large[1], size=too_large[0])
            return
        conn.outbox.extend(wire.reply_frames(wire.REP_FACTS, req_id, out, limit=conn.frame_limit))

    def _revoke(self, conn, req_id, items):
        patterns = []
        owner = None
        for n, (op, payload) in enumerate(items):
            try:
                if op == wire.IT_PATTERN:
                    patterns.append(parse(payload.decode("utf-8")))
                elif op == wire.IT_OWNER:
                    owner = payload.decode("utf-8")
            except (ParseError, UnicodeDecodeError) as exc:
                self._reject(conn, req_id, f"item {n}: {exc}", n)
                return
        revoked = self.engine.revoke(patterns, owner)
        out = []
        for name, values in sorted(revoked.items()):
            target = self._conns.get(name)
            encoded = [wire.item(wire.IT_FACT, encode(v)) for v in values]
            if target is not None:
                target.outbox.extend(wire.reply_frames(wire.REP_REVOKED, target.last_req, encoded,
                                                             limit=target.frame_limit))
            for it in encoded:
                out.append(it)
                out.append(wire.item(wire.IT_OWNER, name.encode("utf-8")))
        self._collect_changes()
        too_large = self._too_large(conn, out, f"the list of the {len(out) // 2} claims revoked "
                                               "(they were revoked)")
        if too_large is not None:
            self._reject(conn, req_id, too_large[1], size=too_large[0])
            return
        conn.outbox.extend(wire.reply_frames(wire.REP_FACTS, req_id, out, limit=conn.frame_limit))

    # ---------------------------------------------------------------- answers

    def _collect_changes(self):
        """Queue the pending notifications in their clients' outboxes."""
        if not self.engine.has_changes():
            return
        conns = self._conns
        for change in self.engine.take_changes():
            conn = conns.get(change.client)
            if conn is None:
                continue
            items, size = row_items(IT_ADD, change.added)
            if change.removed:
                removed, removed_size = row_items(IT_DEL, change.removed)
                items += removed
                size += removed_size
            if size > conn.result_limit:
                message = (f"a notification of {size} bytes cannot reach client {conn.name!r}, "
                           f"whose arena takes {conn.result_limit} at once: give it a bigger "
                           "arena_size")
                log.warning("broker %r: %s", self.name, message)
                conn.outbox.extend(wire.reply_frames(
                    wire.REP_SUB_ERROR, change.sub_id, [wire.item(wire.IT_TEXT, message.encode())]))
                continue
            frames = notify_frames(change.sub_id, change.full, items, conn.frame_limit)
            conn.outbox.extend(frames)
            self.stats["notifications"] += 1

    def _flush(self):
        self._collect_changes()
        for conn in list(self._conns.values()):
            if not conn.outbox:
                continue
            # The ACK rides with frames that go anyway: acknowledging a batch never costs
            # the client a wake-up of its own (a ping's PONG acknowledges all before it).
            if conn.last_req != conn.acked:
                conn.acked = conn.last_req
                conn.outbox.extend(wire.reply_frames(wire.REP_ACK, conn.last_req, []))
            self._send(conn)

    def _send(self, conn):
        if not conn.outbox:
            return
        frames, conn.outbox = conn.outbox, []
        try:
            conn.transport.write_many(frames)
        except A0Error as exc:
            log.warning("broker %r: could not write to client %r: %s", self.name, conn.name, exc)
