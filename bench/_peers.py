"""Cross-process ping-pong for a0py and its peers, measured the same way.

Each ``pingpong_<peer>(n, warmup, size, cpus)`` forks an echo child, sends
``warmup + n`` messages of ``size`` bytes one at a time, waits for each echo,
and returns the n timed round trips in nanoseconds (an ``array('q')``).
``cpus`` is ``(parent_cpu, child_cpu)`` to pin each side, or None to leave
placement to the scheduler. A peer whose package is missing raises
:class:`Missing` with the reason.
"""

import multiprocessing as mp
import os
import time
import uuid
from array import array

CTX = mp.get_context("fork")
JOIN_S = 30.0


class Missing(Exception):
    """The peer cannot run here (package not installed, limit hit)."""


def _pin(cpu):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def _unique(prefix):
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:10]}"


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


def pingpong_a0py(n, warmup, size, cpus, spin=None):
    """Two shm arenas (ping, pong); each side sleeps in read_next(timeout=None)."""
    import a0py

    names = (_unique("a0bench-ping"), _unique("a0bench-pong"))
    ping = a0py.Arena.shm(names[0], 1 << 20)
    pong = a0py.Arena.shm(names[1], 1 << 20)

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

    return _run(child, roundtrip, n, warmup, cpus, [cleanup])


PEERS = {
    "os.pipe": pingpong_os_pipe,
    "mp.Pipe": pingpong_mp_pipe,
    "mp.Queue": pingpong_mp_queue,
    "pyzmq ipc": pingpong_pyzmq,
    "faster-fifo": pingpong_faster_fifo,
    "posix_ipc mq": pingpong_posix_mq,
    "alephzero 0.3.17": pingpong_alephzero,
}
