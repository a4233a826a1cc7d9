"""The harness every peer runs under: the :class:`Peer` interface, one-way
streams (:func:`run_stream`) and ping-pong (:func:`run_pingpong`), both
driven through the same peer object.

A peer is one library used one way: its sender's half sends a message, its
receivers' halves block until one arrives, the way a user of that library
would write it. The harness never sees a library; a peer never sees the
workload. Every side of a run is a child process (forked, or spawned for
peers whose runtime does not survive a fork); the parent only creates and
removes the names the run uses, and waits with deadlines, so a lost message
fails a run instead of hanging it.

Streams: one sender process writes fixed-size messages as fast as it can to
n receiver processes. Every message starts with its sequence number (8
bytes, little-endian); numbers above the data range are markers. A run: the
receivers open; the sender repeats PROBE until every receiver has acked one
(a subscription still propagating, a slow joiner, is not counted as the
library's loss); it sends up to one buffer's worth of WARM messages (so the
first touch of each page of a shared buffer falls outside the timed part,
as in a long-running process), then repeats SYNC until every receiver has
acked one (so all of them start the timed part drained); then data, seq 0,
1, ... for the given seconds, then STOP.

Invariants of a stream run:
- a receiver acks each of PROBE and SYNC once, through its own pipe to the
  sender, and counts only data messages;
- a lossy peer may drop or overwrite the end marker, so its sender repeats
  it until the parent says every receiver has finished;
- every process leaves through its halves' close(), and the parent's
  teardown() removes every name the run created (shm, sockets, folders),
  whatever happened to the children.

Ping-pong: two runs of the same peer, one per direction (ping, pong). An
echo process receives on ping and sends back on pong; a timer process sends
on ping and waits on pong, and times each round trip. Both open their
receivers first and their senders once both receivers are open, so no first
message is sent to nobody. Peers that write into a buffer get
PINGPONG_BUFFER_BYTES (one message is in flight), and every peer gets a
warm-up of at least one pass over that buffer before the timed round trips.
"""

import multiprocessing as mp
import multiprocessing.connection
import importlib
import os
import platform
import statistics
import struct
import sys
import time
import traceback
import uuid
from array import array

FORK = mp.get_context("fork")
SPAWN = mp.get_context("spawn")
JOIN_S = 30.0          # how long any one step of a run may take before it fails
KiB, MiB = 1024, 1024 * 1024

# Buffering given to every peer whose buffer has a size (a0py arena, shm
# ring, faster-fifo, iceoryx2 samples, AlephZero topic, multiprocessing
# Queue), shared among the receivers of a fan-out. A smaller one stays in
# the CPU's last-level cache (`python -m bench.peers --buffer-mib N`).
BUFFER_BYTES = 64 * MiB
# Ping-pong: one message is in flight, so 1 MiB, and the warm-up passes over
# all of it once. Without that pass one round trip in ~40 paid a first-touch
# page fault in each process (a0py's whole p99 once).
PINGPONG_BUFFER_BYTES = 1 * MiB

SEQ = struct.Struct("<Q")
PROBE = 1 << 62
SYNC = PROBE + 1
WARM = PROBE + 2
STOP = PROBE + 3
WARM_MAX = 1 << 20     # stream warm-up messages at most (and at most WARM_S of them)
WARM_S = 0.6           # enough for the fast peers to write a whole 64 MiB once at 64 B

# A0BENCH_RUN tags every name a run creates, so a caller (tests/project/test_bench_peers.py)
# can tell its leftovers from those of another run on the machine.
RUN_TAG = os.environ.get("A0BENCH_RUN", "")


class Missing(Exception):
    """The peer cannot run here (its package is not installed)."""


class Unsupported(Exception):
    """The peer runs here, but not this workload (a size over its limit,
    no pull-style receiver for a ping-pong, no zero-copy receive)."""


def unique(prefix):
    """A name no other run (nor another process of this one) uses."""
    return f"{prefix}-{RUN_TAG}{os.getpid()}-{uuid.uuid4().hex[:10]}"


def unlink_quietly(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _pin(cpu):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


class Peer:
    """One library, used one way, as a one-way channel of fixed-size
    messages. Subclasses give its halves; `state` (from setup, in the
    parent) must pickle when `spawn` is set, since every side then runs in
    a spawned interpreter.

    The halves move messages as bytes: `send(message)` must be done with
    `message` when it returns (the harness writes the next one into the same
    buffer), and a copy-out `recv()` returns a bytes-like object of its own.
    """

    key = ""               # the name on the command line (--peers)
    label = ""             # the name in reports
    notes = ""             # how it is used, for the report; {buffer} is the buffer size
    spawn = False          # run every side in spawned interpreters
    lossy = False          # may drop or overwrite: repeat the end marker
    zero_copy = None       # how its zero-copy receive reads, or None
    pull = True            # has a pull-style receiver (recv()), not only callbacks
    needs = ()             # (module, message) pairs: Missing(message, {e} the ImportError) if it fails

    def check(self, size, n_rx):
        """Raises Missing (not installed here: by default, a module of `needs`
        does not import) or Unsupported (not this size or number of receivers)."""
        for module, message in self.needs:
            try:
                importlib.import_module(module)
            except ImportError as e:
                raise Missing(message.format(e=e)) from None

    def drops(self, state):
        """Whether this run may lose messages (then the sender repeats the
        end marker: its send must not block once the receivers are gone)."""
        return self.lossy

    def setup(self, size, n_rx, buffer, pingpong=False):
        """Parent side, before any child starts: creates what both halves
        open by name; returns the state passed to them. `buffer`: the bytes
        the peer may buffer, shared by its receivers; `pingpong`: the run
        carries one message at a time (a peer may pick its low-latency
        settings)."""
        return {"size": size, "n_rx": n_rx, "buffer": buffer, "pingpong": pingpong}

    def sender(self, state):
        """Sender side: returns (send(message), close())."""
        raise NotImplementedError

    def receiver(self, state, index):
        """Receiver `index`, copy-out: returns (recv(), close()); recv()
        blocks until a message arrives and returns it, close() returns a
        dict of what the peer reports about the run, or None."""
        raise NotImplementedError

    def zero_copy_receiver(self, state, index, peek):
        """Receiver `index`, zero-copy: as receiver(), but recv() returns
        peek(buffer, offset=0) called on the message where the library keeps
        it (peek is struct.unpack_from-like), and copies nothing else."""
        raise Unsupported(f"{self.label} has no zero-copy receive")

    def receive(self, state, index, zero_copy, opened, ack):
        """Receiver process of a stream: opens, calls opened(), counts until
        the end marker. Callback-driven peers override this."""
        if zero_copy:
            recv, close = self.zero_copy_receiver(state, index, SEQ.unpack_from)
            unpack = None
        else:
            recv, close = self.receiver(state, index)
            unpack = SEQ.unpack_from
        extra = None
        try:
            opened()
            count, disorder, t_stop = _count(recv, unpack, ack)
        finally:
            extra = close()
        return {"count": count, "disorder": disorder, "t_stop": t_stop, **(extra or {})}

    def teardown(self, state):
        """Parent side, always: removes what setup and the children created."""


class Tally:
    """What a stream receiver counts: data messages, those out of order, and
    when it saw the end marker; PROBE and SYNC are acked once each."""

    def __init__(self, ack):
        self.count = self.disorder = 0
        self.last = -1
        self.t_stop = None
        self._ack, self._acked = ack, set()

    def marker(self, seq):
        """Handles a marker; True at STOP."""
        if seq == STOP:
            if self.t_stop is None:  # a lossy sender repeats it
                self.t_stop = time.monotonic()
            return True
        if seq in (PROBE, SYNC) and seq not in self._acked:
            self._acked.add(seq)
            self._ack.send_bytes(b"r")
        return False

    def add(self, seq):
        """Counts one message; True at STOP (callback receivers use this)."""
        if seq < PROBE:
            self.count += 1
            if seq <= self.last:
                self.disorder += 1
            self.last = seq
            return False
        return self.marker(seq)


def _count(recv, unpack, ack):
    """The receive loop of every pull-style receiver: counts data messages
    and those out of order until STOP. `unpack` is SEQ.unpack_from for a
    copy-out recv (which returns the message), None for a zero-copy one
    (whose recv returns unpack_from's tuple already). The loop is inlined,
    not Tally.add, to keep a call off each message."""
    tally = Tally(ack)
    count = disorder = 0
    last = -1
    while True:
        seq = (recv() if unpack is None else unpack(recv()))[0]
        if seq < PROBE:
            count += 1
            if seq <= last:
                disorder += 1
            last = seq
        elif tally.marker(seq):
            return count, disorder, tally.t_stop


# ---------------------------------------------------------------- streams


def _stream_receiver(peer, state, index, zero_copy, conn, ack):
    try:
        result = peer.receive(state, index, zero_copy, lambda: conn.send(("open", None)), ack)
        conn.send(("result", result))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        raise SystemExit(1) from None


def _handshake(emit, acks, marker, what):
    """Sends `marker` every 2 ms until every receiver has acked it."""
    pending = list(acks)
    deadline = time.monotonic() + JOIN_S
    while pending:
        emit(marker)
        for c in mp.connection.wait(pending, timeout=0.002):
            c.recv_bytes()
            pending.remove(c)
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} receiver(s) {what} within {JOIN_S} s")


def _stream_sender(peer, state, seconds, acks, done, conn):
    try:
        send, close = peer.sender(state)
        size = state["size"]
        buf = bytearray(size)
        buf[8:] = b"m" * (size - 8)
        pack_into = SEQ.pack_into

        def emit(seq):
            pack_into(buf, 0, seq)
            send(buf)

        try:
            _handshake(emit, acks, PROBE, "saw no probe")
            batch = max(1, min(1024, 65536 // size))
            clock = time.monotonic
            warm_end = clock() + min(WARM_S, seconds)
            pack_into(buf, 0, WARM)
            for i in range(min(WARM_MAX, state["buffer"] // size)):
                send(buf)
                if i % batch == 0 and clock() > warm_end:
                    break
            _handshake(emit, acks, SYNC, "did not drain the warm-up")
            seq = 0
            t0 = clock()
            end = t0 + seconds
            while True:
                for s in range(seq, seq + batch):
                    pack_into(buf, 0, s)
                    send(buf)
                seq += batch
                if clock() >= end:
                    break
            t1 = clock()
            emit(STOP)
            # The sender's end stays open until every receiver has its STOP:
            # closing it could drop what a library still queues (zmq's
            # linger, a feeder thread). A peer that drops repeats STOP.
            repeat = peer.drops(state)
            deadline = t1 + JOIN_S
            while not done.wait(0.005) and time.monotonic() < deadline:
                if repeat:
                    emit(STOP)
        finally:
            close()
        conn.send(("result", {"sent": seq, "t0": t0, "t1": t1}))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        raise SystemExit(1) from None


def _expect(conn, proc, what, timeout):
    """The child's next message, which must be `what`; else a RuntimeError
    naming the child and its traceback or exit code."""
    if not conn.poll(timeout):
        raise RuntimeError(f"{proc.name}: no {what!r} within {timeout:.0f} s (alive: {proc.is_alive()})")
    try:
        tag, value = conn.recv()
    except EOFError:
        proc.join(JOIN_S)
        raise RuntimeError(f"{proc.name} exited with {proc.exitcode} before sending {what!r}") from None
    if tag == "error":
        raise RuntimeError(f"{proc.name} failed:\n{value}")
    if tag != what:
        raise RuntimeError(f"{proc.name}: expected {what!r}, got {tag!r}")
    return value


def _finish(procs, conns):
    """Kills what is still alive, joins everything, closes the pipes."""
    for p in procs:
        if p.is_alive():
            p.kill()
        p.join(JOIN_S)
    for c in conns:
        c.close()


def run_stream(peer, size, n_rx, seconds, zero_copy=False, buffer=BUFFER_BYTES):
    """One stream run: receivers started and open, then the sender for
    `seconds`. Returns the sender's count and times and each receiver's
    count, out-of-order count and end time (time.monotonic, which every
    process on the machine shares), plus what the peer reports per
    receiver. Raises Missing, Unsupported, or RuntimeError if any side
    fails."""
    peer.check(size, n_rx)
    if zero_copy and not peer.zero_copy:
        raise Unsupported(f"{peer.label} has no zero-copy receive")
    ctx = SPAWN if peer.spawn else FORK
    state = peer.setup(size, n_rx, buffer)
    procs, conns = [], []
    try:
        acks = []
        for i in range(n_rx):
            here, there = ctx.Pipe()
            ack_r, ack_w = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_stream_receiver, name=f"{peer.key} receiver {i}", daemon=True,
                            args=(peer, state, i, zero_copy, there, ack_w))
            p.start()
            there.close()
            ack_w.close()
            procs.append(p)
            conns += [here, ack_r]
            acks.append(ack_r)
        for i, p in enumerate(procs):
            _expect(conns[2 * i], p, "open", JOIN_S)
        done = ctx.Event()
        here, there = ctx.Pipe()
        sp = ctx.Process(target=_stream_sender, name=f"{peer.key} sender", daemon=True,
                         args=(peer, state, seconds, acks, done, there))
        sp.start()
        there.close()
        for a in acks:  # the sender holds them now
            a.close()
        procs.append(sp)
        conns.append(here)
        received = [_expect(conns[2 * i], p, "result", seconds + JOIN_S) for i, p in enumerate(procs[:n_rx])]
        done.set()
        sent = _expect(here, sp, "result", JOIN_S)
        for p in procs:
            p.join(JOIN_S)
            if p.exitcode != 0:
                raise RuntimeError(f"{p.name} exited with {p.exitcode}")
        return {"sent": sent["sent"], "t0": sent["t0"], "t1": sent["t1"], "receivers": received}
    finally:
        _finish(procs, conns)
        peer.teardown(state)


# -------------------------------------------------------------- ping-pong


def _pingpong_side(role, peer, rx_state, tx_state, n, warmup, size, cpu, conn, go):
    """The echo (role "echo") or the timer ("timer") of a ping-pong: opens
    its receiver, says so, waits for `go` (every receiver open), opens its
    sender, says so, then echoes warmup + n messages or times n round trips
    after warmup and sends the nanoseconds back as bytes."""
    recv_close = send_close = None
    try:
        _pin(cpu)
        recv, recv_close = peer.receiver(rx_state, 0)
        conn.send(("open", None))
        if not go.wait(JOIN_S):
            raise TimeoutError(f"no go within {JOIN_S} s")
        send, send_close = peer.sender(tx_state)
        conn.send(("ready", None))
        if role == "echo":
            for _ in range(warmup + n):
                send(recv())
            conn.send(("result", None))
            return
        msg = b"p" * size
        for _ in range(warmup):
            send(msg)
            recv()
        lat = array("q", bytes(8 * n))
        clock = time.perf_counter_ns
        for i in range(n):
            t0 = clock()
            send(msg)
            recv()
            lat[i] = clock() - t0
        conn.send(("result", lat.tobytes()))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        raise SystemExit(1) from None
    finally:
        # Sender first: the echo's last reply must be out before its
        # receiving end goes.
        for close in (send_close, recv_close):
            if close is not None:
                close()


def pingpong_warmup(warmup, size):
    """Round trips before the timed ones: at least `warmup`, and one pass
    over the ping-pong buffer."""
    return max(warmup, PINGPONG_BUFFER_BYTES // max(1, size) + 1)


def run_pingpong(peer, n, warmup, size, cpus=None):
    """Times n round trips of `size` bytes through `peer` (after
    pingpong_warmup(warmup, size) untimed ones); returns their nanoseconds
    as an array('q'). cpus: (timer cpu, echo cpu) to pin each side, or None
    to leave placement to the scheduler. Raises Missing, Unsupported, or
    RuntimeError (a side failed, or a message was lost: the run's deadline
    passed)."""
    peer.check(size, 1)
    if not peer.pull:
        raise Unsupported(f"{peer.label} delivers to a callback: no ping-pong echo")
    warmup = pingpong_warmup(warmup, size)
    ctx = SPAWN if peer.spawn else FORK
    ping = peer.setup(size, 1, PINGPONG_BUFFER_BYTES, pingpong=True)
    states = [ping]
    procs, conns = [], []
    try:
        pong = peer.setup(size, 1, PINGPONG_BUFFER_BYTES, pingpong=True)
        states.append(pong)
        go = ctx.Event()
        sides = (("echo", ping, pong, cpus and cpus[1]), ("timer", pong, ping, cpus and cpus[0]))
        for role, rx_state, tx_state, cpu in sides:
            here, there = ctx.Pipe()
            p = ctx.Process(target=_pingpong_side, name=f"{peer.key} ping-pong {role}", daemon=True,
                            args=(role, peer, rx_state, tx_state, n, warmup, size, cpu, there, go))
            p.start()
            there.close()
            procs.append(p)
            conns.append(here)
        for c, p in zip(conns, procs):
            _expect(c, p, "open", JOIN_S)
        go.set()
        for c, p in zip(conns, procs):
            _expect(c, p, "ready", JOIN_S)
        # Both sides report; whichever fails first is the error raised. The
        # budget is generous: about 10x the slowest peer's round trip here.
        budget = JOIN_S + (warmup + n) * 2e-3
        deadline = time.monotonic() + budget
        pending, results = dict(zip(conns, procs)), {}
        while pending:
            ready = mp.connection.wait(list(pending), timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                raise RuntimeError(f"{peer.label} ping-pong did not finish within {budget:.0f} s "
                                   "(a message lost?)")
            for c in ready:
                results[c] = _expect(c, pending.pop(c), "result", 0)
        lat = array("q")
        lat.frombytes(results[conns[1]])
        for p in procs:
            p.join(JOIN_S)
            if p.exitcode != 0:
                raise RuntimeError(f"{p.name} exited with {p.exitcode}")
        return lat
    finally:
        _finish(procs, conns)
        for state in states:
            peer.teardown(state)


# ---------------------------------------------------------------- figures


def percentile(sorted_xs, q):
    """Nearest-rank percentile of an already sorted sequence."""
    if not sorted_xs:
        return float("nan")
    k = max(0, min(len(sorted_xs) - 1, round(q / 100 * len(sorted_xs) + 0.5) - 1))
    return sorted_xs[k]


def summarize(runs):
    """Medians over runs (arrays of round trips in ns) of each run's p50,
    p99 and mean, in µs, and each run's own."""
    per = []
    for lat in runs:
        s = sorted(lat)
        per.append((percentile(s, 50) / 1e3, percentile(s, 99) / 1e3, sum(s) / len(s) / 1e3))
    med = statistics.median
    return {"p50_us": med([p[0] for p in per]), "p99_us": med([p[1] for p in per]),
            "mean_us": med([p[2] for p in per]),
            "runs": [{"p50_us": a, "p99_us": b, "mean_us": c} for a, b, c in per]}


def machine():
    """The machine a report names: CPUs, CPU model, Python, kernel, a0py."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    try:
        import a0py

        version = a0py.__version__
    except ImportError:
        version = "not built"
    return {"cpus": os.cpu_count(), "cpu_model": model, "python": sys.version.split()[0],
            "kernel": platform.release(), "a0py": version}
