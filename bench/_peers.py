"""a0py and its peers across processes, measured the same way (used by
bench/transport.py and bench/peers.py).

Ping-pong: each ``pingpong_<peer>(n, warmup, size, cpus)`` forks an echo
child, sends ``warmup + n`` messages of ``size`` bytes one at a time, waits
for each echo, and returns the n timed round trips in nanoseconds (an
``array('q')``). ``cpus`` is ``(parent_cpu, child_cpu)`` to pin each side, or
None to leave placement to the scheduler. A peer whose package is missing
raises :class:`Missing` with the reason.

Streams ("one-way channels" below): a :class:`Channel` per peer gives the
sender's and the receivers' halves; :func:`run_stream` runs one sender and n
receivers in separate processes and counts what arrived;
:func:`pingpong_channel` times round trips over two channels for peers that
have no echo child above. ``CHANNELS`` maps each peer's key to its channel.
"""

import multiprocessing as mp
import multiprocessing.connection
import os
import shutil
import struct
import threading
import time
import traceback
import uuid
from array import array

CTX = mp.get_context("fork")
JOIN_S = 30.0


class Missing(Exception):
    """The peer cannot run here (package not installed, limit hit)."""


def _pin(cpu):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


# A0BENCH_RUN tags every name this run creates, so a caller (tests/test_bench_peers.py)
# can tell its leftovers from those of another run on the machine.
_RUN_TAG = os.environ.get("A0BENCH_RUN", "")


def _unique(prefix):
    return f"{prefix}-{_RUN_TAG}{os.getpid()}-{uuid.uuid4().hex[:10]}"


def _timed(roundtrip, n, warmup):
    for _ in range(warmup):
        roundtrip()
    lat = array("q", bytes(8 * n))
    clock = time.perf_counter_ns
    for i in range(n):
        t0 = clock()
        roundtrip()
        lat[i] = clock() - t0
    return lat


def _run(child, roundtrip, n, warmup, cpus, cleanup=()):
    """Forks child(total) pinned to cpus[1], times roundtrip in this
    process pinned to cpus[0], and restores this process's affinity."""
    before = os.sched_getaffinity(0)
    p = CTX.Process(target=_child_main, args=(child, warmup + n, cpus and cpus[1]), daemon=True)
    p.start()
    try:
        _pin(cpus and cpus[0])
        lat = _timed(roundtrip, n, warmup)
        p.join(JOIN_S)
        if p.exitcode != 0:
            raise RuntimeError(f"echo child exited with {p.exitcode}")
        return lat
    finally:
        os.sched_setaffinity(0, before)
        if p.is_alive():
            p.kill()
            p.join(JOIN_S)
        for fn in cleanup:
            fn()


def _child_main(child, total, cpu):
    _pin(cpu)
    child(total)


# --------------------------------------------------------------- a0py


# Ping-pong buffers: one message is in flight, so the peers that write into a
# buffer (a0py's arenas, the shm ring, a0py pub/sub topics) get 1 MiB, and
# the warm-up passes over all of it once (PINGPONG_BUFFER_BYTES // size round
# trips): the first touch of each page (a page fault in each process) then
# falls outside the timed part, as in a long-running process and as the
# stream runs' warm-up does. Without it one round trip in ~40 paid a fault.
PINGPONG_BUFFER_BYTES = 1 << 20


def _buffer_warmup(warmup, size):
    return max(warmup, PINGPONG_BUFFER_BYTES // max(1, size) + 1)


def pingpong_a0py(n, warmup, size, cpus, spin=None):
    """Two shm arenas (ping, pong); each side sleeps in read_next(timeout=None)."""
    import a0py

    warmup = _buffer_warmup(warmup, size)

    names = (_unique("a0bench-ping"), _unique("a0bench-pong"))
    ping = a0py.Arena.shm(names[0], PINGPONG_BUFFER_BYTES)
    pong = a0py.Arena.shm(names[1], PINGPONG_BUFFER_BYTES)

    def child(total):
        rx = a0py.Transport(a0py.Arena.shm(names[0]))
        tx = a0py.Transport(a0py.Arena.shm(names[1]))
        if spin is not None:
            rx.spin = spin
        read, write = rx.read_next, tx.write
        for _ in range(total):
            write(read(None)[1])

    tx, rx = a0py.Transport(ping), a0py.Transport(pong)
    if spin is not None:
        rx.spin = spin
    msg = b"p" * size
    write, read = tx.write, rx.read_next

    def roundtrip():
        write(msg)
        read(None)

    def cleanup():
        for arena, name in ((ping, names[0]), (pong, names[1])):
            arena.close()
            a0py.Arena.unlink_shm(name)

    return _run(child, roundtrip, n, warmup, cpus, [cleanup])


# ---------------------------------------------------- standard library


def pingpong_mp_pipe(n, warmup, size, cpus):
    """multiprocessing.Pipe (duplex socketpair), send_bytes/recv_bytes."""
    here, there = CTX.Pipe()

    def child(total):
        for _ in range(total):
            there.send_bytes(there.recv_bytes())

    msg = b"p" * size

    def roundtrip():
        here.send_bytes(msg)
        here.recv_bytes()

    return _run(child, roundtrip, n, warmup, cpus, [here.close, there.close])


def pingpong_mp_queue(n, warmup, size, cpus):
    """multiprocessing.Queue (pipe + feeder thread + pickling)."""
    q1, q2 = CTX.Queue(), CTX.Queue()

    def child(total):
        for _ in range(total):
            q2.put(q1.get())

    msg = b"p" * size

    def roundtrip():
        q1.put(msg)
        q2.get()

    return _run(child, roundtrip, n, warmup, cpus, [q1.close, q2.close])


def pingpong_os_pipe(n, warmup, size, cpus):
    """Two os.pipe()s, raw os.write/os.read."""
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()

    def child(total):
        for _ in range(total):
            os.write(b_w, os.read(a_r, size))

    msg = b"p" * size

    def roundtrip():
        os.write(a_w, msg)
        os.read(b_r, size)

    def cleanup():
        for fd in (a_r, a_w, b_r, b_w):
            os.close(fd)

    return _run(child, roundtrip, n, warmup, cpus, [cleanup])


# ------------------------------------------------------ third parties


def pingpong_pyzmq(n, warmup, size, cpus):
    """pyzmq PAIR sockets over ipc:// (a Unix socket plus zmq's I/O thread)."""
    try:
        import zmq
    except ImportError as e:
        raise Missing(f"pyzmq not installed ({e})") from None
    path = f"/tmp/{_unique('a0bench')}.ipc"
    addr = f"ipc://{path}"

    def child(total):
        ctx = zmq.Context()
        s = ctx.socket(zmq.PAIR)
        s.connect(addr)
        for _ in range(total):
            s.send(s.recv(copy=True), copy=True)
        s.close(linger=1000)
        ctx.term()

    # The parent's context is created after the fork (in roundtrip's first
    # call) so the child never inherits zmq's I/O thread state.
    state = {}
    msg = b"p" * size

    def roundtrip():
        s = state.get("s")
        if s is None:
            state["ctx"] = zmq.Context()
            s = state["s"] = state["ctx"].socket(zmq.PAIR)
            s.bind(addr)
        s.send(msg, copy=True)
        s.recv(copy=True)

    def cleanup():
        if "s" in state:
            state["s"].close(linger=0)
            state["ctx"].term()
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    return _run(child, roundtrip, n, warmup, cpus, [cleanup])


def pingpong_faster_fifo(n, warmup, size, cpus):
    """faster-fifo Queues (shared-memory ring + pthread condvars, pickling)."""
    try:
        import faster_fifo
    except ImportError as e:
        raise Missing(f"faster-fifo not installed ({e})") from None
    q1, q2 = faster_fifo.Queue(1 << 20), faster_fifo.Queue(1 << 20)

    def child(total):
        for _ in range(total):
            q2.put(q1.get(timeout=JOIN_S), timeout=JOIN_S)

    msg = b"p" * size

    def roundtrip():
        q1.put(msg, timeout=JOIN_S)
        q2.get(timeout=JOIN_S)

    return _run(child, roundtrip, n, warmup, cpus)


def pingpong_posix_mq(n, warmup, size, cpus):
    """POSIX message queues via posix_ipc (limit here: 10 messages of 8 KiB)."""
    try:
        import posix_ipc
    except ImportError as e:
        raise Missing(f"posix_ipc not installed ({e})") from None
    if size > 8192:
        raise Missing("POSIX message queues here carry at most 8 KiB a message")
    names = ("/" + _unique("a0bench-mq1"), "/" + _unique("a0bench-mq2"))
    try:
        q1 = posix_ipc.MessageQueue(names[0], posix_ipc.O_CREX, max_messages=10, max_message_size=8192)
        q2 = posix_ipc.MessageQueue(names[1], posix_ipc.O_CREX, max_messages=10, max_message_size=8192)
    except (posix_ipc.Error, OSError, ValueError) as e:
        raise Missing(f"cannot create POSIX message queues: {e}") from None

    def child(total):
        for _ in range(total):
            q2.send(q1.receive()[0])

    msg = b"p" * size

    def roundtrip():
        q1.send(msg)
        q2.receive()

    def cleanup():
        for q in (q1, q2):
            q.close()
            q.unlink()

    return _run(child, roundtrip, n, warmup, cpus, [cleanup])


def pingpong_alephzero(n, warmup, size, cpus):
    """AlephZero 0.3.17's Python binding: Publisher -> SubscriberSync
    (INIT_AWAIT_NEW, ITER_NEXT) with read_blocking, one topic per direction,
    as its users write it. Its packets carry AlephZero's standard headers."""
    try:
        import a0
    except ImportError as e:
        raise Missing(f"alephzero not installed ({e}); `pip install alephzero` builds it in ~1 min") from None
    topics = (_unique("a0bench_ping"), _unique("a0bench_pong"))

    def child(total):
        sub = a0.SubscriberSync(a0.PubSubTopic(topics[0]), a0.INIT_OLDEST, a0.ITER_NEXT)
        pub = a0.Publisher(a0.PubSubTopic(topics[1]))
        for _ in range(total):
            pub.pub(a0.Packet(sub.read_blocking().payload))

    # Create both topics' files before the fork so neither side misses the other's first packet.
    ping_pub = a0.Publisher(a0.PubSubTopic(topics[0]))
    pong_sub = a0.SubscriberSync(a0.PubSubTopic(topics[1]), a0.INIT_OLDEST, a0.ITER_NEXT)
    msg = b"p" * size

    def roundtrip():
        ping_pub.pub(a0.Packet(msg))
        pong_sub.read_blocking()

    def cleanup():
        root = os.environ.get("A0_ROOT", "/dev/shm/alephzero")
        for t in topics:
            try:
                os.unlink(os.path.join(root, f"{t}.pubsub.a0"))
            except FileNotFoundError:
                pass
        try:
            os.rmdir(root)  # only if empty: other AlephZero users' topics stay
        except OSError:
            pass

    return _run(child, roundtrip, n, warmup, cpus, [cleanup])


def pingpong_iceoryx2(n, warmup, size, cpus):
    """iceoryx2 publish-subscribe (Slice[c_uint8] samples loaned in shared
    memory) plus an event service per direction, its documented event-based
    pattern: the sender notifies after send(), the receiver sleeps in
    Listener.timed_wait (no busy poll of receive()). It runs in a private
    iceoryx2 namespace (see _iceoryx2_space)."""
    try:
        import ctypes

        import iceoryx2 as iox2
    except ImportError as e:
        raise Missing(f"iceoryx2 not installed ({e})") from None
    base = _unique("a0bench")
    space = _iceoryx2_space()
    wait = iox2.Duration.from_secs(int(JOIN_S))
    cycle = iox2.Duration.from_millis(IOX2_CYCLE_MS)
    payload = iox2.Slice[ctypes.c_uint8]

    def open_side(rx_name, tx_name):
        """A node with (subscriber, listener) on rx_name and (publisher,
        notifier) on tx_name. Only the returned dict holds the node and the
        services, so clearing it drops them (Node has no delete())."""
        node = _iceoryx2_node(iox2, space)
        svc = node.service_builder
        rx_ps = svc(iox2.ServiceName.new(rx_name)).publish_subscribe(payload).open_or_create()
        rx_ev = svc(iox2.ServiceName.new(rx_name)).event().open_or_create()
        tx_ps = svc(iox2.ServiceName.new(tx_name)).publish_subscribe(payload).open_or_create()
        tx_ev = svc(iox2.ServiceName.new(tx_name)).event().open_or_create()
        ports = (rx_ps.subscriber_builder().create(), rx_ev.listener_builder().create(),
                 tx_ps.publisher_builder().initial_max_slice_len(size).create(),
                 tx_ev.notifier_builder().create())
        return {"node": node, "services": (rx_ps, rx_ev, tx_ps, tx_ev), "ports": ports}

    def close_side(side):
        for port in side.get("ports", ()):
            port.delete()
        side.clear()

    def receiver(sub, listener):
        receive, timed_wait = sub.receive, listener.timed_wait

        def recv():
            deadline = None
            while (sample := receive()) is None:
                if timed_wait(cycle):
                    deadline = None
                elif deadline is None:
                    deadline = time.monotonic() + JOIN_S
                elif time.monotonic() > deadline:
                    raise TimeoutError(f"iceoryx2: no sample within {JOIN_S} s")
            return sample
        return recv

    def child(total):
        side = open_side(f"{base}/ping", f"{base}/pong")
        sub, listener, pub, notifier = side["ports"]
        recv, loan, memmove, notify = receiver(sub, listener), pub.loan_slice_uninit, ctypes.memmove, notifier.notify
        notify()  # ready: the ping subscriber exists
        for _ in range(total):
            sample = recv()
            out = loan(size)
            memmove(out.payload_ptr, sample.payload_ptr, size)
            sample.delete()
            out.assume_init().send()
            notify()
        close_side(side)

    # The parent's ports exist before the fork, so the child's first pong
    # always has a subscriber; the child's ready notification covers the ping.
    side = open_side(f"{base}/pong", f"{base}/ping")
    sub, listener, pub, notifier = side["ports"]
    msg = b"p" * size
    ready = []
    recv, loan, memmove, notify = receiver(sub, listener), pub.loan_slice_uninit, ctypes.memmove, notifier.notify
    string_at = ctypes.string_at

    def roundtrip():
        if not ready:
            if not listener.timed_wait(wait):
                raise TimeoutError("iceoryx2 echo child never became ready")
            ready.append(True)
        out = loan(size)
        memmove(out.payload_ptr, msg, size)
        out.assume_init().send()
        notify()
        sample = recv()
        string_at(sample.payload_ptr, size)
        sample.delete()

    def cleanup():
        try:
            close_side(side)
        finally:
            _iceoryx2_remove(space)

    return _run(child, roundtrip, n, warmup, cpus, [cleanup])


# iceoryx2 listeners wait in cycles, as iceoryx2's own examples do
# (timed_wait in a loop, receive() after each return). Under load,
# Listener.timed_wait in 0.10 now and then returns no event well before its
# timeout; a receiver must treat that as "look again", never as a timeout
# (treating it as one failed about one ping-pong run in three here). Stream
# receivers count the returns without an event after which a sample was
# there ("empty_wakes").
IOX2_CYCLE_MS = 100


def _iceoryx2_space():
    """A private iceoryx2 namespace for one run: its own prefix for the
    /dev/shm segments and its own root folder (iceoryx2 keeps node and
    service records and event sockets there; /tmp/iceoryx2 by default). Runs
    then never see, or clean up, another program's iceoryx2 state, even
    when other benchmarks use iceoryx2 on the machine at the same time, and
    removing the run's state is removing its names."""
    tag = uuid.uuid4().hex[:10]
    return {"prefix": f"iox2{tag}_", "root": f"/tmp/a0bench-iox2-{tag}/"}


def _iceoryx2_node(iox2, space):
    """A node in `space` (see _iceoryx2_space), signal handling off."""
    iox2.set_log_level(iox2.LogLevel.Error)
    cfg = iox2.config.default()
    cfg.global_cfg.prefix = iox2.FileName.new(space["prefix"])
    cfg.global_cfg.root_path = iox2.Path.new(space["root"])
    return (iox2.NodeBuilder.new().config(cfg).signal_handling_mode(iox2.SignalHandlingMode.Disabled)
            .create(iox2.ServiceType.Ipc))


def _iceoryx2_remove(space):
    """Removes everything of `space`: its root folder and its segments
    (also those of a child killed before it could drop its node)."""
    shutil.rmtree(space["root"], ignore_errors=True)
    for f in os.listdir("/dev/shm"):
        if f.startswith(space["prefix"]):
            try:
                os.unlink(os.path.join("/dev/shm", f))
            except FileNotFoundError:
                pass


# zenoh runs its sessions on tokio threads that a fork() does not carry over:
# a forked process whose parent had opened a session hangs in zenoh.open().
# Both sides therefore run in spawned interpreters, and they leave through
# sys.exit (not the os._exit of a forked multiprocessing child) so zenoh's
# exit handlers unlink their /dev/shm segments. This process never opens a
# session, which keeps the forks of the other peers clean.
SPAWN = mp.get_context("spawn")
ZENOH_KEY = "a0bench"


def _zenoh_config(zenoh, endpoint, listen, lowlatency=True):
    """Peer mode on unix sockets, no scouting. `endpoint` is one endpoint or
    a list (listened on, or connected to, as `listen` says). lowlatency: the
    lowlatency transport (which requires QoS off), as zenoh's configuration
    docs advise for latency; without it, zenoh's default (batching) transport."""
    endpoints = "[" + ", ".join(f'"{e}"' for e in ([endpoint] if isinstance(endpoint, str) else endpoint)) + "]"
    conf = zenoh.Config()
    settings = [("mode", '"peer"'), ("scouting/multicast/enabled", "false"),
                ("scouting/gossip/enabled", "false"),
                ("listen/endpoints", endpoints if listen else "[]"),
                ("connect/endpoints", "[]" if listen else endpoints)]
    if lowlatency:
        settings += [("transport/unicast/lowlatency", "true"), ("transport/unicast/qos/enabled", "false")]
    for key, value in settings:
        conf.insert_json5(key, value)
    return conf


def _zenoh_side(zenoh, session, rx, tx):
    sub = session.declare_subscriber(f"{ZENOH_KEY}/{rx}")
    pub = session.declare_publisher(f"{ZENOH_KEY}/{tx}", express=True,
                                    congestion_control=zenoh.CongestionControl.BLOCK)
    return sub, pub


def _zenoh_matched(pub):
    """Waits (bounded) until the other side's subscriber is known here."""
    deadline = time.monotonic() + JOIN_S
    while not pub.matching_status.matching:
        if time.monotonic() > deadline:
            raise TimeoutError("zenoh: the other side's subscriber never appeared")
        time.sleep(0.001)


def _zenoh_sender(zenoh, pub, size, shm, pool=1 << 20):
    """put(bytes) -> None: copies into a fresh SHM buffer (from a provider
    of `pool` bytes) when shm."""
    put = pub.put
    if not shm:
        return put
    provider = zenoh.shm.ShmProvider.default_backend(pool)
    alloc, policy = provider.alloc, zenoh.shm.BlockOn(zenoh.shm.GarbageCollect())

    def send(data):
        buf = alloc(size, policy=policy)
        buf[:] = data
        put(buf)
    return send


def _zenoh_echo(endpoint, total, size, shm, cpu, ready):
    import zenoh

    _pin(cpu)
    with zenoh.open(_zenoh_config(zenoh, endpoint, listen=True)) as session:
        sub, pub = _zenoh_side(zenoh, session, "ping", "pong")
        ready.send(True)
        ready.close()
        _zenoh_matched(pub)
        send, recv = _zenoh_sender(zenoh, pub, size, shm), sub.recv
        for _ in range(total):
            send(recv().payload.to_bytes())
        sub.undeclare()
        pub.undeclare()


def _zenoh_timer(endpoint, n, warmup, size, shm, cpu, out):
    import zenoh

    _pin(cpu)
    with zenoh.open(_zenoh_config(zenoh, endpoint, listen=False)) as session:
        sub, pub = _zenoh_side(zenoh, session, "pong", "ping")
        _zenoh_matched(pub)
        send, recv = _zenoh_sender(zenoh, pub, size, shm), sub.recv
        msg = b"p" * size

        def roundtrip():
            send(msg)
            recv().payload.to_bytes()

        out.send_bytes(_timed(roundtrip, n, warmup).tobytes())
        out.close()
        sub.undeclare()
        pub.undeclare()


def pingpong_zenoh(n, warmup, size, cpus, shm=True):
    """eclipse-zenoh pub/sub between two peer-mode sessions over a unix
    socket (unixsock-stream), express publishers, blocking Subscriber.recv.
    With shm, each message is written into a buffer from zenoh.shm's
    ShmProvider (unstable API) so only a descriptor crosses the socket."""
    try:
        import zenoh  # noqa: F401  (this process only checks it imports)
    except ImportError as e:
        raise Missing(f"eclipse-zenoh not installed ({e})") from None
    sock = f"/tmp/{_unique('a0bench-zenoh')}.sock"
    endpoint = f"unixsock-stream/{sock}"
    shm_before = {f for f in os.listdir("/dev/shm") if f.endswith(".zenoh")}
    ready_rx, ready_tx = SPAWN.Pipe(duplex=False)
    lat_rx, lat_tx = SPAWN.Pipe(duplex=False)
    echo = SPAWN.Process(target=_zenoh_echo, daemon=True,
                         args=(endpoint, warmup + n, size, shm, cpus and cpus[1], ready_tx))
    timer = SPAWN.Process(target=_zenoh_timer, daemon=True,
                          args=(endpoint, n, warmup, size, shm, cpus and cpus[0], lat_tx))
    procs = [echo]
    budget = JOIN_S + (warmup + n) * 2e-3  # generous: ~10x the round trips seen here
    try:
        echo.start()
        ready_tx.close()
        if not ready_rx.poll(JOIN_S):
            raise RuntimeError(f"zenoh echo child not ready (exit code {echo.exitcode})")
        ready_rx.recv()
        timer.start()
        procs.append(timer)
        lat_tx.close()
        if not lat_rx.poll(budget):
            raise RuntimeError(f"zenoh ping-pong did not finish in {budget:.0f} s "
                               f"(exit codes {echo.exitcode}, {timer.exitcode})")
        lat = array("q")
        lat.frombytes(lat_rx.recv_bytes())
        for p in procs:
            p.join(JOIN_S)
            if p.exitcode != 0:
                raise RuntimeError(f"zenoh {p.name} exited with {p.exitcode}")
        return lat
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(JOIN_S)
        for c in (ready_rx, lat_rx):
            c.close()
        try:
            os.unlink(sock)
        except FileNotFoundError:
            pass
        _zenoh_sweep(shm_before)


def _zenoh_sweep(before):
    """zenoh 1.10 leaves its /dev/shm segments behind even on a clean exit
    (a receiver keeps the sender's segments mapped and locked until it exits,
    and nobody unlinks them afterwards). Unlinks those this run created that
    no live process holds: zenoh's own test for a dangling segment is that an
    exclusive flock on it succeeds."""
    import fcntl

    for f in os.listdir("/dev/shm"):
        if not f.endswith(".zenoh") or f in before:
            continue
        path = os.path.join("/dev/shm", f)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(path)
        except OSError:
            pass  # held by a live process, not ours to remove
        finally:
            os.close(fd)


PEERS = {
    "os.pipe": pingpong_os_pipe,
    "mp.Pipe": pingpong_mp_pipe,
    "mp.Queue": pingpong_mp_queue,
    "pyzmq ipc": pingpong_pyzmq,
    "faster-fifo": pingpong_faster_fifo,
    "posix_ipc mq": pingpong_posix_mq,
    "alephzero 0.3.17": pingpong_alephzero,
    "iceoryx2 0.10": pingpong_iceoryx2,
    "zenoh 1.10 shm": pingpong_zenoh,
    "zenoh 1.10": lambda n, w, z, c: pingpong_zenoh(n, w, z, c, shm=False),
}


# ======================================================= one-way channels
#
# bench/peers.py measures streams: one sender process writes fixed-size
# messages as fast as it can to n receiver processes, each blocking the way a
# user of that library would. Every message starts with its sequence number
# (8 bytes, little-endian); numbers above the data range are markers. A
# Channel is one peer's two halves; run_stream() runs them,
# pingpong_channel() times round trips over two of them with the harness
# above.
#
# A run: receivers open; the sender repeats PROBE until every receiver has
# acked one (so no slow-joiner loss, a subscription still propagating, is
# counted as the library's); it sends up to one buffer's worth of WARM
# messages (so first-touch page faults of shared buffers fall outside the
# timed part, as in a long-running process), then repeats SYNC until every
# receiver has acked one (so all of them start the timed part drained);
# then data, seq 0, 1, ... for the given seconds, then STOP.
#
# Invariants the harness keeps:
# - a receiver acks each of PROBE and SYNC once, through its own pipe to
#   the sender, and counts only data messages;
# - a lossy channel may drop or overwrite the end marker, so its sender
#   repeats it until the parent says every receiver has finished;
# - every process leaves through its channel's close(), and the parent's
#   teardown() removes every name the run created (shm, sockets, folders),
#   whatever happened to the children.

SEQ = struct.Struct("<Q")
PROBE = 1 << 62
SYNC = PROBE + 1
WARM = PROBE + 2
STOP = PROBE + 3
WARM_MAX = 1 << 20     # warm-up messages at most (and at most WARM_S of them)
WARM_S = 0.6           # enough for the fast peers to write their whole 64 MiB once at 64 B
# Buffering given to every peer whose buffer has a size (a0py arena, shm
# ring, faster-fifo, iceoryx2 samples, AlephZero topic), shared among the
# receivers of a fan-out. 64 MiB unless `bench/peers.py --buffer-mib N` (which
# sets A0BENCH_BUFFER_MIB, so the children it spawns see the same figure).
BUFFER_BYTES = int(os.environ.get("A0BENCH_BUFFER_MIB", "64")) * 1024 * 1024


class Unsupported(Exception):
    """The peer runs here, but not this workload (a size over its limit)."""


class Channel:
    """One peer's one-way channel. Subclasses give the sender's and the
    receivers' halves; state (from setup, in the parent) must pickle when
    `spawn` is set, since both sides then run in spawned interpreters."""

    key = ""
    label = ""
    spawn = False          # run sender and receivers in spawned interpreters
    lossy = False          # may drop or overwrite: repeat the end marker
    zero_copy = None       # how its zero-copy receive reads, or None
    pull = True            # has a pull-style receiver (recv()), not only callbacks
    notes = ""             # how it is used, for the report

    def check(self, size, n_rx):
        """Raises Missing (not installed here) or Unsupported (not this size)."""

    def drops(self, state):
        """Whether this run may lose messages (then the sender repeats the
        end marker: its send must not block once the receivers are gone)."""
        return self.lossy

    def setup(self, size, n_rx):
        """Parent side, before any child starts: creates what both halves
        open by name; returns the state passed to them."""
        return {"size": size, "n_rx": n_rx}

    def sender(self, state):
        """Sender process: returns (send(seq), close())."""
        raise NotImplementedError

    def receiver(self, state, index, zero_copy):
        """Receiver `index`: returns (recv() -> seq, close() -> dict | None),
        recv blocking until a message arrives."""
        raise NotImplementedError

    def receive(self, state, index, zero_copy, opened, ack):
        """Receiver process: opens, calls opened(), counts until the end
        marker. Callback-driven channels override this."""
        recv, close = self.receiver(state, index, zero_copy)
        extra = None
        try:
            opened()
            count, disorder, t_stop = _count(recv, ack)
        finally:
            extra = close()
        return {"count": count, "disorder": disorder, "t_stop": t_stop, **(extra or {})}

    def teardown(self, state):
        """Parent side, always: removes what setup and the children created."""


def _marker(seq, acked, ack):
    """A receiver's handling of a marker: True at STOP; acks the first
    PROBE and the first SYNC."""
    if seq == STOP:
        return True
    if seq in (PROBE, SYNC) and seq not in acked:
        acked.add(seq)
        ack.send_bytes(b"r")
    return False


def _count(recv, ack):
    """The receive loop every pull-style channel shares: counts data
    messages and those that came out of order until STOP."""
    count = disorder = 0
    last = -1
    acked = set()
    while True:
        seq = recv()
        if seq < PROBE:
            count += 1
            if seq <= last:
                disorder += 1
            last = seq
        elif _marker(seq, acked, ack):
            return count, disorder, time.monotonic()


def _message(size):
    """(buffer, send-ready writer of seq into it)."""
    buf = bytearray(size)
    buf[8:] = b"m" * (size - 8)
    return buf, SEQ.pack_into


def _stream_receiver(chan, state, index, zero_copy, conn, ack):
    try:
        result = chan.receive(state, index, zero_copy, lambda: conn.send(("open", None)), ack)
        conn.send(("result", result))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        raise SystemExit(1) from None


def _handshake(send, acks, marker, what):
    """Sends `marker` every 2 ms until every receiver has acked it."""
    pending = list(acks)
    deadline = time.monotonic() + JOIN_S
    while pending:
        send(marker)
        for c in mp.connection.wait(pending, timeout=0.002):
            c.recv_bytes()
            pending.remove(c)
        if pending and time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} receiver(s) {what} within {JOIN_S} s")


def _stream_sender(chan, state, seconds, acks, done, conn):
    try:
        send, close = chan.sender(state)
        try:
            _handshake(send, acks, PROBE, "saw no probe")
            batch = max(1, min(1024, 65536 // state["size"]))
            clock = time.monotonic
            warm_end = clock() + min(WARM_S, seconds)
            for i in range(min(WARM_MAX, BUFFER_BYTES // state["size"])):
                send(WARM)
                if i % batch == 0 and clock() > warm_end:
                    break
            _handshake(send, acks, SYNC, "did not drain the warm-up")
            seq = 0
            t0 = clock()
            end = t0 + seconds
            while True:
                for s in range(seq, seq + batch):
                    send(s)
                seq += batch
                if clock() >= end:
                    break
            t1 = clock()
            send(STOP)
            # The sender's end stays open until every receiver has its STOP:
            # closing it could drop what a library still queues (zmq's
            # linger, a feeder thread). A channel that drops repeats STOP.
            repeat = chan.drops(state)
            deadline = t1 + JOIN_S
            while not done.wait(0.005) and time.monotonic() < deadline:
                if repeat:
                    send(STOP)
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


def run_stream(chan, size, n_rx, seconds, zero_copy=False):
    """One run: receivers started and open, then the sender for `seconds`.
    Returns the sender's count and times and each receiver's count,
    out-of-order count and end time (time.monotonic, which every process on
    the machine shares). Raises Missing, Unsupported, or RuntimeError if
    any side fails."""
    chan.check(size, n_rx)
    if zero_copy and not chan.zero_copy:
        raise Unsupported(f"{chan.label} has no zero-copy receive")
    ctx = SPAWN if chan.spawn else CTX
    state = chan.setup(size, n_rx)
    procs, conns, acks = [], [], []
    try:
        for i in range(n_rx):
            here, there = ctx.Pipe()
            ack_r, ack_w = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_stream_receiver, name=f"{chan.key} receiver {i}", daemon=True,
                            args=(chan, state, i, zero_copy, there, ack_w))
            p.start()
            there.close()
            ack_w.close()
            procs.append(p)
            conns.append(here)
            acks.append(ack_r)
        for c, p in zip(conns, procs):
            _expect(c, p, "open", JOIN_S)
        done = ctx.Event()
        here, there = ctx.Pipe()
        sp = ctx.Process(target=_stream_sender, name=f"{chan.key} sender", daemon=True,
                         args=(chan, state, seconds, acks, done, there))
        sp.start()
        there.close()
        for a in acks:
            a.close()
        acks.clear()
        procs.append(sp)
        conns.append(here)
        received = [_expect(c, p, "result", seconds + JOIN_S)
                    for c, p in zip(conns[:n_rx], procs[:n_rx])]
        done.set()
        sent = _expect(here, sp, "result", JOIN_S)
        for p in procs:
            p.join(JOIN_S)
            if p.exitcode != 0:
                raise RuntimeError(f"{p.name} exited with {p.exitcode}")
        return {"sent": sent["sent"], "t0": sent["t0"], "t1": sent["t1"], "receivers": received}
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(JOIN_S)
        for c in conns + acks:
            c.close()
        chan.teardown(state)


def pingpong_channel(chan, zero_copy=False):
    """A ping-pong function (same signature and harness as the pingpong_*
    above) over two of `chan`'s channels: the echo child receives on ping
    and sends on pong. Both ends open after the fork, the parent's when the
    child says its receiver is open."""

    def pingpong(n, warmup, size, cpus):
        global BUFFER_BYTES
        saved = BUFFER_BYTES
        BUFFER_BYTES = PINGPONG_BUFFER_BYTES  # read by setup and, after the fork, by the child
        try:
            return _pingpong(n, _buffer_warmup(warmup, size), size, cpus)
        finally:
            BUFFER_BYTES = saved

    def _pingpong(n, warmup, size, cpus):
        chan.check(size, 1)
        if chan.spawn or not chan.pull:
            raise Unsupported(f"{chan.label}: ping-pong over channels needs forked children "
                              "and a pull-style receiver")
        ping, pong = chan.setup(size, 1), chan.setup(size, 1)
        ready_r, ready_w = CTX.Pipe(duplex=False)

        def child(total):
            recv, close_rx = chan.receiver(ping, 0, zero_copy)
            send, close_tx = chan.sender(pong)
            ready_w.send_bytes(b"r")
            for _ in range(total):
                send(recv())
            close_tx()
            close_rx()

        ends = {}

        def roundtrip():
            if not ends:
                ends["rx"] = chan.receiver(pong, 0, zero_copy)
                ends["tx"] = chan.sender(ping)
                if not ready_r.poll(JOIN_S):
                    raise RuntimeError(f"{chan.label}: echo child not ready within {JOIN_S} s")
                ends["send"], ends["recv"] = ends["tx"][0], ends["rx"][0]
            ends["send"](0)
            ends["recv"]()

        def cleanup():
            try:
                for end in ("tx", "rx"):
                    if end in ends:
                        ends[end][1]()
            finally:
                ready_r.close()
                ready_w.close()
                chan.teardown(ping)
                chan.teardown(pong)

        return _run(child, roundtrip, n, warmup, cpus, [cleanup])

    return pingpong


# ----------------------------------------------------------- a0py

class A0pyChannel(Channel):
    """One shm arena of BUFFER_BYTES; Transport.write, read_next(None)."""

    key = "a0py"
    label = "a0py Transport"
    lossy = True
    notes = ("one shm arena of 64 MiB shared by every receiver; `Transport.write` → "
             "`read_next(timeout=None)`")

    @property
    def zero_copy(self):
        try:
            import a0py
        except ImportError:
            return None
        if hasattr(a0py.Transport, "read_view"):
            return "read_view"
        return "lock + frame().data"

    def check(self, size, n_rx):
        try:
            import a0py  # noqa: F401
            from a0py import _core  # noqa: F401
        except ImportError as e:
            raise Missing(f"a0py not built ({e}); run `make build`") from None

    def setup(self, size, n_rx):
        import a0py

        name = _unique("a0bench-stream")
        a0py.Arena.shm(name, BUFFER_BYTES).close()
        return {"size": size, "n_rx": n_rx, "name": name}

    def sender(self, state):
        import a0py

        tr = a0py.Transport(a0py.Arena.shm(state["name"]))
        buf, pack_into = _message(state["size"])
        write = tr.write

        def send(seq):
            pack_into(buf, 0, seq)
            write(buf)
        return send, tr.arena.close

    def receiver(self, state, index, zero_copy):
        import a0py

        tr = a0py.Transport(a0py.Arena.shm(state["name"]))
        unpack_from = SEQ.unpack_from
        if not zero_copy:
            read = tr.read_next

            def recv():
                return unpack_from(read(None)[1])[0]
        elif hasattr(tr, "read_view"):
            view, evicted = tr.read_view, a0py.FrameEvictedError

            def recv():
                while True:
                    try:
                        with view(timeout=None) as frame:
                            seq = unpack_from(frame.data)[0]
                        return seq
                    except evicted:
                        continue  # overwritten while read: not delivered
        else:
            lock = tr.lock()

            def recv():
                with lock as t:
                    t.wait()
                    t.next()
                    return unpack_from(t.frame().data)[0]

        def close():
            missed = getattr(tr, "missed", None)
            tr.arena.close()
            return {} if missed is None else {"missed": missed}
        return recv, close

    def teardown(self, state):
        import a0py

        a0py.Arena.unlink_shm(state["name"])


class A0pyPubSubChannel(Channel):
    """a0py.Publisher → SubscriberSync.read_blocking (issue 9) on one topic of
    BUFFER_BYTES, in a shared-memory root of its own (`shm:a0bench-...`), so
    the run never touches the user's topics and removing the run's names is
    removing that prefix."""

    key = "a0py-pubsub"
    label = "a0py Publisher → SubscriberSync"
    lossy = True
    notes = ("one topic of 64 MiB (its own `shm:` root); `Publisher.pub` → "
             "`SubscriberSync(init=INIT_OLDEST, iter=ITER_NEXT).read_blocking().payload`")

    def check(self, size, n_rx):
        try:
            import a0py
        except ImportError as e:
            raise Missing(f"a0py not built ({e})") from None
        for name in ("Publisher", "SubscriberSync", "Subscriber", "Topic", "INIT_OLDEST", "ITER_NEXT"):
            try:
                getattr(a0py, name)
            except (AttributeError, ImportError):
                raise Missing(f"a0py.{name} not in this a0py build (pub/sub, issue 9)") from None

    def setup(self, size, n_rx):
        return {"size": size, "n_rx": n_rx, "prefix": _unique("a0bench-ps"), "topic": "bench"}

    @staticmethod
    def _topic(state):
        import a0py

        return a0py, a0py.Topic(state["topic"], root=f"shm:{state['prefix']}", size=BUFFER_BYTES)

    @staticmethod
    def _release(topic):
        """Drops the process's cached mapping of the topic (the harness's
        parent maps one per ping-pong run)."""
        from a0py.proto import topic as topics

        topics.forget_arena(topic, "pubsub")

    def sender(self, state):
        a0py, topic = self._topic(state)
        pub = a0py.Publisher(topic)
        buf, pack_into = _message(state["size"])
        publish = pub.pub

        def send(seq):
            pack_into(buf, 0, seq)
            publish(buf)

        def close():
            pub.close()
            self._release(topic)
        return send, close

    def receiver(self, state, index, zero_copy):
        a0py, topic = self._topic(state)
        sub = a0py.SubscriberSync(topic, init=a0py.INIT_OLDEST, iter=a0py.ITER_NEXT)
        read, unpack_from = sub.read_blocking, SEQ.unpack_from

        def recv():
            return unpack_from(read().payload)[0]

        def close():
            missed = sub.missed
            sub.close()
            self._release(topic)
            return {"missed": missed}
        return recv, close

    def teardown(self, state):
        for f in os.listdir("/dev/shm"):
            if f.startswith(state["prefix"] + "."):
                try:
                    os.unlink(os.path.join("/dev/shm", f))
                except FileNotFoundError:
                    pass


class A0pyCallbackChannel(A0pyPubSubChannel):
    """a0py.Publisher → Subscriber(callback) (issue 9): the callback runs on
    the process's dispatcher thread; the receiver's main thread waits for
    the end marker."""

    key = "a0py-callback"
    label = "a0py Publisher → Subscriber(callback)"
    pull = False
    notes = ("as a0py pub/sub, received by `Subscriber(topic, callback, init=INIT_OLDEST, "
             "iter=ITER_NEXT)`")

    def receive(self, state, index, zero_copy, opened, ack):
        a0py, topic = self._topic(state)
        unpack_from = SEQ.unpack_from
        stopped = threading.Event()
        tally = {"count": 0, "disorder": 0, "last": -1, "t_stop": None}
        acked = set()

        def callback(pkt):
            seq = unpack_from(pkt.payload)[0]
            if seq < PROBE:
                tally["count"] += 1
                if seq <= tally["last"]:
                    tally["disorder"] += 1
                tally["last"] = seq
            elif _marker(seq, acked, ack) and tally["t_stop"] is None:
                tally["t_stop"] = time.monotonic()
                stopped.set()

        sub = a0py.Subscriber(topic, callback, init=a0py.INIT_OLDEST, iter=a0py.ITER_NEXT)
        try:
            opened()
            while not stopped.wait(1.0):
                pass
        finally:
            missed = sub.missed
            sub.close()
            self._release(topic)
        return {"count": tally["count"], "disorder": tally["disorder"], "t_stop": tally["t_stop"],
                "missed": missed}

    def receiver(self, state, index, zero_copy):
        raise Unsupported(f"{self.label} delivers to a callback: no pull-style receiver")


# ------------------------------------------------------ standard library

class MpPipeChannel(Channel):
    """multiprocessing.Pipe(duplex=False) per receiver; send_bytes/recv_bytes."""

    key = "mp-pipe"
    label = "multiprocessing.Pipe"
    notes = "one `Pipe(duplex=False)` per receiver; `send_bytes` → `recv_bytes`"

    def setup(self, size, n_rx):
        return {"size": size, "n_rx": n_rx, "pipes": [CTX.Pipe(duplex=False) for _ in range(n_rx)]}

    def sender(self, state):
        buf, pack_into = _message(state["size"])
        sends = [w.send_bytes for _, w in state["pipes"]]

        def send(seq):
            pack_into(buf, 0, seq)
            for s in sends:
                s(buf)
        return send, lambda: None

    def receiver(self, state, index, zero_copy):
        read, unpack_from = state["pipes"][index][0].recv_bytes, SEQ.unpack_from

        def recv():
            return unpack_from(read())[0]
        return recv, lambda: None

    def teardown(self, state):
        for r, w in state["pipes"]:
            r.close()
            w.close()


class MpQueueChannel(Channel):
    """multiprocessing.Queue per receiver, bounded to BUFFER_BYTES."""

    key = "mp-queue"
    label = "multiprocessing.Queue"
    notes = "one `Queue(maxsize=64 MiB / size)` per receiver; `put(bytes)` → `get()`"

    def setup(self, size, n_rx):
        cap = max(2, BUFFER_BYTES // n_rx // size)
        return {"size": size, "n_rx": n_rx, "queues": [CTX.Queue(cap) for _ in range(n_rx)]}

    def sender(self, state):
        buf, pack_into = _message(state["size"])
        puts = [q.put for q in state["queues"]]

        def send(seq):
            pack_into(buf, 0, seq)
            msg = bytes(buf)  # put() pickles later, in its feeder thread
            for put in puts:
                put(msg)

        def close():
            for q in state["queues"]:
                q.close()
                q.join_thread()
        return send, close

    def receiver(self, state, index, zero_copy):
        get, unpack_from = state["queues"][index].get, SEQ.unpack_from

        def recv():
            return unpack_from(get())[0]
        return recv, lambda: None

    def teardown(self, state):
        for q in state["queues"]:
            q.close()


class OsPipeChannel(Channel):
    """An os.pipe() per receiver; os.write, os.read of exactly `size` bytes."""

    key = "os-pipe"
    label = "os.pipe"
    notes = "one `os.pipe()` per receiver; `os.write` → `os.read` (looping until a whole message)"

    def setup(self, size, n_rx):
        return {"size": size, "n_rx": n_rx, "fds": [os.pipe() for _ in range(n_rx)]}

    def sender(self, state):
        buf, pack_into = _message(state["size"])
        fds = [w for _, w in state["fds"]]
        write = os.write

        def send(seq):
            pack_into(buf, 0, seq)
            for fd in fds:
                write(fd, buf)  # blocking pipe: writes all of it
        return send, lambda: None

    def receiver(self, state, index, zero_copy):
        fd, size = state["fds"][index][0], state["size"]
        read, unpack_from = os.read, SEQ.unpack_from

        def recv():
            data = read(fd, size)
            if len(data) < size:
                parts = [data]
                got = len(data)
                while got < size:
                    part = read(fd, size - got)
                    if not part:
                        raise EOFError("os.pipe: writer closed mid-message")
                    parts.append(part)
                    got += len(part)
                data = b"".join(parts)
            return unpack_from(data)[0]
        return recv, lambda: None

    def teardown(self, state):
        for r, w in state["fds"]:
            os.close(r)
            os.close(w)


class PosixMqChannel(Channel):
    """A POSIX message queue per receiver (posix_ipc; 10 x 8 KiB here)."""

    key = "posix-mq"
    label = "POSIX mq (posix_ipc)"
    notes = "one queue per receiver (at most 10 messages of 8 KiB here); `send` → `receive`"

    def check(self, size, n_rx):
        try:
            import posix_ipc  # noqa: F401
        except ImportError as e:
            raise Missing(f"posix_ipc not installed ({e})") from None
        if size > 8192:
            raise Unsupported("POSIX message queues here carry at most 8 KiB a message")

    def setup(self, size, n_rx):
        import posix_ipc

        names = ["/" + _unique(f"a0bench-mq{i}") for i in range(n_rx)]
        for name in names:
            posix_ipc.MessageQueue(name, posix_ipc.O_CREX, max_messages=10,
                                   max_message_size=8192).close()
        return {"size": size, "n_rx": n_rx, "names": names}

    def sender(self, state):
        import posix_ipc

        queues = [posix_ipc.MessageQueue(n) for n in state["names"]]
        sends = [q.send for q in queues]
        buf, pack_into = _message(state["size"])

        def send(seq):
            pack_into(buf, 0, seq)
            for s in sends:
                s(buf)

        def close():
            for q in queues:
                q.close()
        return send, close

    def receiver(self, state, index, zero_copy):
        import posix_ipc

        q = posix_ipc.MessageQueue(state["names"][index])
        receive, unpack_from = q.receive, SEQ.unpack_from

        def recv():
            return unpack_from(receive()[0])[0]
        return recv, q.close

    def teardown(self, state):
        import posix_ipc

        for name in state["names"]:
            try:
                posix_ipc.unlink_message_queue(name)
            except posix_ipc.ExistentialError:
                pass


class ShmRingChannel(Channel):
    """The baseline: a ring of fixed-size slots in POSIX shared memory per
    receiver, and two POSIX semaphores (free slots, filled slots) as the
    classic bounded buffer. Lossless; the writer waits when the ring is full.
    glibc semaphores make no system call unless someone must sleep."""

    key = "shm-ring"
    label = "shm ring + semaphore"
    zero_copy = "struct.unpack_from on the mmap, in place"
    notes = ("one ring of fixed-size slots (64 MiB / receivers) and two POSIX semaphores per "
             "receiver; the reader copies a slot out with `mmap[a:b]` (zero-copy: reads in place)")

    def check(self, size, n_rx):
        try:
            import posix_ipc  # noqa: F401
        except ImportError as e:
            raise Missing(f"posix_ipc not installed ({e})") from None

    def setup(self, size, n_rx):
        import posix_ipc

        slots = max(4, BUFFER_BYTES // n_rx // size)
        rings = []
        for i in range(n_rx):
            base = "/" + _unique(f"a0bench-ring{i}")
            mem = posix_ipc.SharedMemory(base, posix_ipc.O_CREX, size=slots * size)
            mem.close_fd()
            posix_ipc.Semaphore(base + "-free", posix_ipc.O_CREX, initial_value=slots).close()
            posix_ipc.Semaphore(base + "-full", posix_ipc.O_CREX, initial_value=0).close()
            rings.append(base)
        return {"size": size, "n_rx": n_rx, "slots": slots, "rings": rings}

    @staticmethod
    def _open(state, base):
        import mmap

        import posix_ipc

        mem = posix_ipc.SharedMemory(base)
        mm = mmap.mmap(mem.fd, mem.size)
        mem.close_fd()
        return (mm, posix_ipc.Semaphore(base + "-free"), posix_ipc.Semaphore(base + "-full"))

    def sender(self, state):
        size, total = state["size"], state["size"] * state["slots"]
        rings = [self._open(state, b) for b in state["rings"]]
        buf, pack_into = _message(size)
        ends = [(mm, free.acquire, full.release) for mm, free, full in rings]
        pos = [0]

        def send(seq):
            pack_into(buf, 0, seq)
            off = pos[0]
            for mm, wait_free, post_full in ends:
                wait_free()
                mm[off:off + size] = buf
                post_full()
            off += size
            pos[0] = 0 if off == total else off

        def close():
            for mm, free, full in rings:
                mm.close()
                free.close()
                full.close()
        return send, close

    def receiver(self, state, index, zero_copy):
        size, total = state["size"], state["size"] * state["slots"]
        mm, free, full = self._open(state, state["rings"][index])
        wait_full, post_free, unpack_from = full.acquire, free.release, SEQ.unpack_from
        pos = [0]

        if zero_copy:
            def recv():
                off = pos[0]
                wait_full()
                seq = unpack_from(mm, off)[0]
                post_free()
                off += size
                pos[0] = 0 if off == total else off
                return seq
        else:
            def recv():
                off = pos[0]
                wait_full()
                data = mm[off:off + size]
                post_free()
                off += size
                pos[0] = 0 if off == total else off
                return unpack_from(data)[0]

        def close():
            mm.close()
            free.close()
            full.close()
        return recv, close

    def teardown(self, state):
        import posix_ipc

        for base in state["rings"]:
            for unlink, name in ((posix_ipc.unlink_shared_memory, base),
                                 (posix_ipc.unlink_semaphore, base + "-free"),
                                 (posix_ipc.unlink_semaphore, base + "-full")):
                try:
                    unlink(name)
                except posix_ipc.ExistentialError:
                    pass


# ------------------------------------------------------ third parties

class PyzmqChannel(Channel):
    """pyzmq over ipc://: PUSH → PULL for one receiver (blocking, lossless),
    PUB → SUB for a fan-out (drops past the high-water mark)."""

    key = "pyzmq"
    label = "pyzmq ipc"
    lossy = True
    zero_copy = "recv(copy=False) Frame.buffer"
    notes = ("ipc://, PUSH → PULL for one receiver, PUB → SUB for a fan-out, default "
             "high-water marks; `send(copy=True)` → `recv()` (zero-copy: `recv(copy=False)`)")

    def check(self, size, n_rx):
        try:
            import zmq  # noqa: F401
        except ImportError as e:
            raise Missing(f"pyzmq not installed ({e})") from None

    def setup(self, size, n_rx):
        return {"size": size, "n_rx": n_rx, "path": f"/tmp/{_unique('a0bench')}.ipc"}

    def drops(self, state):
        return state["n_rx"] > 1  # PUSH blocks (and keeps every message); PUB drops

    def sender(self, state):
        import zmq

        ctx = zmq.Context()
        s = ctx.socket(zmq.PUSH if state["n_rx"] == 1 else zmq.PUB)
        s.bind(f"ipc://{state['path']}")
        buf, pack_into = _message(state["size"])
        put = s.send

        def send(seq):
            pack_into(buf, 0, seq)
            put(buf, copy=True)

        def close():
            s.close(linger=1000)
            ctx.term()
        return send, close

    def receiver(self, state, index, zero_copy):
        import zmq

        ctx = zmq.Context()
        if state["n_rx"] == 1:
            s = ctx.socket(zmq.PULL)
        else:
            s = ctx.socket(zmq.SUB)
            s.setsockopt(zmq.SUBSCRIBE, b"")
        s.connect(f"ipc://{state['path']}")
        get, unpack_from = s.recv, SEQ.unpack_from
        if zero_copy:
            def recv():
                return unpack_from(get(copy=False).buffer)[0]
        else:
            def recv():
                return unpack_from(get())[0]

        def close():
            s.close(linger=0)
            ctx.term()
        return recv, close

    def teardown(self, state):
        try:
            os.unlink(state["path"])
        except FileNotFoundError:
            pass


class FasterFifoChannel(Channel):
    """faster-fifo Queue (shm ring + pthread condvars) per receiver."""

    key = "faster-fifo"
    label = "faster-fifo"
    notes = "one `Queue(max_size_bytes=64 MiB / receivers)` per receiver; `put` → `get`"

    def check(self, size, n_rx):
        try:
            import faster_fifo  # noqa: F401
        except ImportError as e:
            raise Missing(f"faster-fifo not installed ({e})") from None

    def setup(self, size, n_rx):
        import faster_fifo

        cap = max(4 * (size + 64), BUFFER_BYTES // n_rx)
        return {"size": size, "n_rx": n_rx,
                "queues": [faster_fifo.Queue(max_size_bytes=cap) for _ in range(n_rx)]}

    def sender(self, state):
        buf, pack_into = _message(state["size"])
        puts = [q.put for q in state["queues"]]

        def send(seq):
            pack_into(buf, 0, seq)
            for put in puts:
                put(buf, timeout=JOIN_S)  # pickles now: buf may change after
        return send, lambda: None

    def receiver(self, state, index, zero_copy):
        get, unpack_from = state["queues"][index].get, SEQ.unpack_from

        def recv():
            return unpack_from(get(timeout=JOIN_S))[0]
        return recv, lambda: None

    def teardown(self, state):
        for q in state["queues"]:
            q.close()


class AlephZeroChannel(Channel):
    """AlephZero 0.3.17: Publisher → SubscriberSync.read_blocking on one
    topic created with a 64 MiB file (zero-copy: ReaderSyncZeroCopy on the
    topic's file, reading FlatPacket.payload_view under its lock)."""

    key = "alephzero"
    label = "AlephZero 0.3.17"
    lossy = True
    zero_copy = "ReaderSyncZeroCopy + FlatPacket.payload_view"
    notes = ("one topic of 64 MiB; `Publisher.pub(Packet(bytes))` → "
             "`SubscriberSync(INIT_OLDEST, ITER_NEXT).read_blocking().payload` "
             "(zero-copy: `ReaderSyncZeroCopy.read_blocking(fn)` on the topic's file)")

    def check(self, size, n_rx):
        try:
            import a0  # noqa: F401
        except ImportError as e:
            raise Missing(f"alephzero not installed ({e}); `pip install alephzero` builds it "
                          "in ~1 min") from None

    @staticmethod
    def _topic(state):
        import a0

        opts = a0.File.Options()
        opts.create_options.size = BUFFER_BYTES
        opts.create_options.mode = a0.File.Options.DEFAULT.create_options.mode
        opts.create_options.dir_mode = a0.File.Options.DEFAULT.create_options.dir_mode
        return a0.PubSubTopic(state["topic"], opts), opts

    def setup(self, size, n_rx):
        import a0

        state = {"size": size, "n_rx": n_rx, "topic": _unique("a0bench_stream"),
                 "root": os.environ.get("A0_ROOT", "/dev/shm/alephzero")}
        state["path"] = os.path.join(state["root"], f"{state['topic']}.pubsub.a0")
        _, opts = self._topic(state)
        a0.File(state["path"], opts)  # created here, at its size, before either side opens it
        return state

    def sender(self, state):
        import a0

        pub = a0.Publisher(self._topic(state)[0])
        buf, pack_into = _message(state["size"])
        publish, packet = pub.pub, a0.Packet

        def send(seq):
            pack_into(buf, 0, seq)
            publish(packet(bytes(buf)))
        return send, lambda: None

    def receiver(self, state, index, zero_copy):
        import a0

        unpack_from = SEQ.unpack_from
        if zero_copy:
            reader = a0.ReaderSyncZeroCopy(a0.File(state["path"]).arena, a0.INIT_OLDEST, a0.ITER_NEXT)
            got = [0]

            def take(_tlk, fpkt):
                got[0] = unpack_from(fpkt.payload_view)[0]
            read = reader.read_blocking

            def recv():
                read(take)
                return got[0]
        else:
            sub = a0.SubscriberSync(self._topic(state)[0], a0.INIT_OLDEST, a0.ITER_NEXT)
            read = sub.read_blocking

            def recv():
                return unpack_from(read().payload)[0]
        return recv, lambda: None

    def teardown(self, state):
        try:
            os.unlink(state["path"])
        except FileNotFoundError:
            pass
        try:
            os.rmdir(state["root"])  # only if empty: other AlephZero users' topics stay
        except OSError:
            pass


class Iceoryx2Channel(Channel):
    """iceoryx2 publish-subscribe on Slice[c_uint8] samples loaned in shared
    memory, a subscriber buffer of about 64 MiB / receivers (safe overflow:
    the oldest sample is overwritten, as iceoryx2 does by default). Event
    mode adds an event service: the sender notifies after every send, the
    receiver sleeps in Listener.timed_wait when it finds no sample. Polling
    mode spins on Subscriber.receive()."""

    key = "iceoryx2"
    label = "iceoryx2 0.10 (event)"
    lossy = True
    polling = False
    zero_copy = "Sample.payload_ptr, read in place"
    notes = ("publish-subscribe on loaned `Slice[c_uint8]` samples, subscriber buffer ≈ 64 MiB "
             "/ receivers; the sender `notify()`s an event service after each `send()`, the "
             "receiver sleeps in `Listener.timed_wait` when `receive()` finds nothing "
             "(copy: `ctypes.string_at`; zero-copy: reads the sample in place)")

    def check(self, size, n_rx):
        try:
            import iceoryx2  # noqa: F401
        except ImportError as e:
            raise Missing(f"iceoryx2 not installed ({e})") from None

    def setup(self, size, n_rx):
        buffer = max(2, min(4096, BUFFER_BYTES // n_rx // size))
        return {"size": size, "n_rx": n_rx, "service": _unique("a0bench/stream"), "buffer": buffer,
                "space": _iceoryx2_space()}

    def _open(self, state):
        import ctypes

        import iceoryx2 as iox2

        node = _iceoryx2_node(iox2, state["space"])
        name = iox2.ServiceName.new(state["service"])
        ps = (node.service_builder(name).publish_subscribe(iox2.Slice[ctypes.c_uint8])
              .max_subscribers(state["n_rx"]).subscriber_max_buffer_size(state["buffer"])
              .open_or_create())
        ev = None if self.polling else node.service_builder(name).event().open_or_create()
        return {"node": node, "services": (ps, ev), "ports": []}

    @staticmethod
    def _close(side):
        for port in reversed(side["ports"]):
            port.delete()
        side.clear()

    def sender(self, state):
        import ctypes

        side = self._open(state)
        ps, ev = side["services"]
        pub = ps.publisher_builder().initial_max_slice_len(state["size"]).create()
        side["ports"].append(pub)
        notify = None
        if ev is not None:
            notifier = ev.notifier_builder().create()
            side["ports"].append(notifier)
            notify = notifier.notify
        size = state["size"]
        buf, pack_into = _message(size)
        src = (ctypes.c_char * size).from_buffer(buf)  # shares buf's memory
        loan, memmove = pub.loan_slice_uninit, ctypes.memmove

        if notify is None:
            def send(seq):
                pack_into(buf, 0, seq)
                out = loan(size)
                memmove(out.payload_ptr, src, size)
                out.assume_init().send()
        else:
            def send(seq):
                pack_into(buf, 0, seq)
                out = loan(size)
                memmove(out.payload_ptr, src, size)
                out.assume_init().send()
                notify()
        return send, lambda: self._close(side)

    def receiver(self, state, index, zero_copy):
        import ctypes

        import iceoryx2 as iox2

        side = self._open(state)
        ps, ev = side["services"]
        sub = ps.subscriber_builder().buffer_size(state["buffer"]).create()
        side["ports"].append(sub)
        size = state["size"]
        receive, string_at, unpack_from = sub.receive, ctypes.string_at, SEQ.unpack_from
        take = 8 if zero_copy else size  # zero-copy reads the seq in place; copy takes all
        if ev is None:
            def recv():
                while (sample := receive()) is None:
                    pass
                seq = unpack_from(string_at(sample.payload_ptr, take))[0]
                sample.delete()
                return seq
        else:
            listener = ev.listener_builder().create()
            side["ports"].append(listener)
            wait, timed_wait = iox2.Duration.from_millis(IOX2_CYCLE_MS), listener.timed_wait
            empty_wakes = [0]

            def recv():
                while (sample := receive()) is None:
                    if not timed_wait(wait) and (sample := receive()) is not None:
                        empty_wakes[0] += 1  # no event, yet a sample
                        break
                seq = unpack_from(string_at(sample.payload_ptr, take))[0]
                sample.delete()
                return seq

            def close():
                self._close(side)
                return {"empty_wakes": empty_wakes[0]}
            return recv, close
        return recv, lambda: self._close(side)

    def teardown(self, state):
        _iceoryx2_remove(state["space"])


class Iceoryx2PollChannel(Iceoryx2Channel):
    key = "iceoryx2-poll"
    label = "iceoryx2 0.10 (polling)"
    polling = True
    notes = ("as iceoryx2 (event) but no event service: the receiver spins on `receive()` "
             "(burns a core while it waits)")


class ZenohChannel(Channel):
    """eclipse-zenoh pub/sub between peer-mode sessions over unix sockets
    (each receiver listens on its own; the sender connects to all), zenoh's
    default transport (batching on), CongestionControl.BLOCK, blocking
    Subscriber.recv(). Both sides run in spawned interpreters (see above).
    With shm, each message is written into a zenoh.shm buffer."""

    key = "zenoh"
    label = "zenoh 1.10"
    spawn = True
    lossy = True
    shm = False
    notes = ("peer-mode sessions over unix sockets, default transport, "
             "`CongestionControl.BLOCK`; `put(bytes)` → `Subscriber.recv().payload.to_bytes()`")

    def check(self, size, n_rx):
        try:
            import zenoh  # noqa: F401  (this process only checks it imports)
        except ImportError as e:
            raise Missing(f"eclipse-zenoh not installed ({e})") from None

    def setup(self, size, n_rx):
        socks = [f"/tmp/{_unique(f'a0bench-zenoh{i}')}.sock" for i in range(n_rx)]
        return {"size": size, "n_rx": n_rx, "socks": socks, "key": f"{ZENOH_KEY}/{uuid.uuid4().hex[:8]}",
                "shm_before": sorted(f for f in os.listdir("/dev/shm") if f.endswith(".zenoh"))}

    def sender(self, state):
        import zenoh

        session = zenoh.open(_zenoh_config(zenoh, [f"unixsock-stream/{s}" for s in state["socks"]],
                                           listen=False, lowlatency=False))
        pub = session.declare_publisher(state["key"], congestion_control=zenoh.CongestionControl.BLOCK)
        size = state["size"]
        put = _zenoh_sender(zenoh, pub, size, self.shm, pool=BUFFER_BYTES)
        buf, pack_into = _message(size)

        def send(seq):
            pack_into(buf, 0, seq)
            put(buf)

        def close():
            pub.undeclare()
            session.close()
        return send, close

    def receiver(self, state, index, zero_copy):
        import zenoh

        session = zenoh.open(_zenoh_config(zenoh, f"unixsock-stream/{state['socks'][index]}",
                                           listen=True, lowlatency=False))
        sub = session.declare_subscriber(state["key"])
        get, unpack_from = sub.recv, SEQ.unpack_from

        def recv():
            return unpack_from(get().payload.to_bytes())[0]

        def close():
            sub.undeclare()
            session.close()
        return recv, close

    def teardown(self, state):
        for s in state["socks"]:
            try:
                os.unlink(s)
            except FileNotFoundError:
                pass
        _zenoh_sweep(set(state["shm_before"]))


class ZenohShmChannel(ZenohChannel):
    key = "zenoh-shm"
    label = "zenoh 1.10 shm"
    shm = True
    notes = ("as zenoh, each message written into a `zenoh.shm.ShmProvider` buffer (a 64 MiB "
             "pool; unstable API). No zero-copy receive from Python: `ZShm` exposes no buffer")


CHANNELS = {c.key: c for c in (
    A0pyChannel(), A0pyPubSubChannel(), A0pyCallbackChannel(), AlephZeroChannel(),
    Iceoryx2Channel(), Iceoryx2PollChannel(), ZenohChannel(), ZenohShmChannel(), PyzmqChannel(),
    MpPipeChannel(), MpQueueChannel(), FasterFifoChannel(), PosixMqChannel(), OsPipeChannel(),
    ShmRingChannel())}
