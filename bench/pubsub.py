"""Pub/sub against the raw transport it is built on, per message, in the same run.

    python bench/pubsub.py             # about a minute on 2 cores
    python bench/pubsub.py --quick     # seconds
    python bench/pubsub.py --json out.json

Workloads (64-byte payloads; each repeated --repeats times, the variants interleaved
within a repeat; medians reported, with pub/sub's ratio to the raw path):

  write    CPU ns per call, one process, nobody waiting: Transport.write vs
           Publisher.pub (which also encodes the packet and its five standard headers);
  read     CPU ns per call, frames already there: Transport.read_next(0) vs
           SubscriberSync.read() (which also checks the packet and copies its metadata
           and payload into two bytes objects);
  stream   one-way, writer in another process writing as fast as it can, reader here:
           read_next(timeout=None) vs SubscriberSync.read_blocking() vs a callback
           Subscriber (one shared dispatcher thread); per message received: CPU time of
           both processes, wall time (the slower side sets the pace), and the fraction
           delivered (a 64 MiB arena);
  pingpong round trips between two processes: raw (write + read_next(None) on two
           arenas) vs pub/sub (pub + read_blocking on two topics) vs a callback
           Subscriber that echoes (reply published from the callback); p50 and p99.
           Before the timed round trips, WARM_FRAMES round trips of frames as large as
           the arena takes touch every page of both arenas in both processes: fresh
           64 MiB arenas otherwise fault a page in every ~21st round trip (a 4 KiB page
           holds ~21 frames of a 64 B pub/sub packet), a first-touch cost of the bench,
           not of the library, which set pub/sub's p99. Also the timing thread's
           voluntary context switches per round trip: how often its wait slept on the
           futex rather than catching the reply in its spin.

  paced    a publisher process at 1, 10 and 20 k messages a second (sleeping between),
           read_blocking here: the reader's CPU seconds per second, what its wait
           (spin, then sleep) costs at that rate.

`--only pingpong` (or write, read, stream, paced; repeatable) runs only those workloads;
`--cold` leaves the warm-up out.

A script, not a test: it asserts nothing about speed. The issue's target: pub/sub at
most 1.3x the raw path per message.
"""

import argparse
import json
import multiprocessing as mp
import os
import resource
import statistics
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(HERE))

import a0py
from a0py.proto import topic as tp

CTX = mp.get_context("fork")
PAYLOAD = b"x" * 64
ARENA = 64 << 20
# Round trips of one frame almost as large as the arena, before the timed ping-pong: each
# process copies each arena's whole ring in or out (see the module's docstring).
WARM_FRAMES = 2
WARM = b"\0" * (ARENA - (64 << 10))


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * len(xs) + 0.5) - 1))]


def fresh_topic(kind):
    return tp.Topic(f"bench/{kind}/{uuid.uuid4().hex[:8]}", size=ARENA)


def raw_arena():
    name = f"a0bench-ps-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return name, a0py.Arena.shm(name, ARENA)


def drop_raw(name, arena):
    arena.close()
    a0py.Arena.unlink_shm(name)


def drop_topic(topic):
    tp.unlink_topic(topic)
    tp.forget_arena(topic, "pubsub")


# ------------------------------------------------------------ write / read cost
#
# CPU time (this process) per call, not wall time: on a shared 2-core machine the wall
# clock also counts the time other processes held the CPU. Arenas are written through
# once before timing, so neither side pays first-touch page faults in the timed part.


def cpu_ns():
    return time.process_time_ns()


def bench_write(n):
    name, arena = raw_arena()
    write = a0py.Transport(arena).write
    for _ in range(n):
        write(PAYLOAD)
    t0 = cpu_ns()
    for _ in range(n):
        write(PAYLOAD)
    raw = (cpu_ns() - t0) / n
    drop_raw(name, arena)

    topic = fresh_topic("write")
    pub = a0py.Publisher(topic).pub
    for _ in range(n):
        pub(PAYLOAD)
    t0 = cpu_ns()
    for _ in range(n):
        pub(PAYLOAD)
    ps = (cpu_ns() - t0) / n
    drop_topic(topic)
    return raw, ps


def bench_read(n):
    name, arena = raw_arena()
    a0py.Transport(arena).write_many([PAYLOAD] * n)
    read = a0py.Transport(arena).read_next
    t0 = cpu_ns()
    for _ in range(n):
        read(0)
    raw = (cpu_ns() - t0) / n
    drop_raw(name, arena)

    topic = fresh_topic("read")
    sub = a0py.SubscriberSync(topic)
    pub = a0py.Publisher(topic)
    for _ in range(n):
        pub.pub(PAYLOAD)
    read = sub.read
    t0 = cpu_ns()
    for _ in range(n):
        read()
    ps = (cpu_ns() - t0) / n
    drop_topic(topic)
    return raw, ps


# ------------------------------------------------------------ one-way stream
#
# Reported per message received: the wall time (the pace of the slower side), and the
# CPU time both processes spent (writer's + reader's, all threads), which is what a
# message costs the machine whatever else runs on it.


def _raw_writer(name, n, conn):
    tr = a0py.Transport(a0py.Arena.shm(name))
    conn.recv()
    t0 = cpu_ns()
    for _ in range(n):
        tr.write(PAYLOAD)
    conn.send(cpu_ns() - t0)


def _pub_writer(topic_name, n, conn):
    pub = a0py.Publisher(tp.Topic(topic_name, size=ARENA))
    conn.recv()
    t0 = cpu_ns()
    for _ in range(n):
        pub.pub(PAYLOAD)
    conn.send(cpu_ns() - t0)


def stream_raw(n):
    name, arena = raw_arena()
    reader = a0py.Transport(arena)
    parent, child = CTX.Pipe()
    p = CTX.Process(target=_raw_writer, args=(name, n, child))
    p.start()
    got = 0
    last = 0
    c0, t0 = cpu_ns(), time.perf_counter_ns()
    parent.send("go")
    while last < n:
        seq, _ = reader.read_next(timeout=None)
        got += 1
        last = seq
    wall, cpu = time.perf_counter_ns() - t0, cpu_ns() - c0 + parent.recv()
    p.join()
    drop_raw(name, arena)
    return wall / got, cpu / got, got / n


def stream_sync(n):
    topic = fresh_topic("stream")
    sub = a0py.SubscriberSync(topic)
    parent, child = CTX.Pipe()
    p = CTX.Process(target=_pub_writer, args=(topic.name, n, child))
    p.start()
    read = sub.read_blocking
    got = 0
    c0, t0 = cpu_ns(), time.perf_counter_ns()
    parent.send("go")
    while got + sub.missed < n:
        read()
        got += 1
    wall, cpu = time.perf_counter_ns() - t0, cpu_ns() - c0 + parent.recv()
    p.join()
    drop_topic(topic)
    return wall / got, cpu / got, got / n


def stream_callback(n):
    topic = fresh_topic("stream-cb")
    done = threading.Event()
    count = [0]
    holder = {}

    def cb(pkt):
        count[0] += 1
        if count[0] + holder["sub"].missed >= n:
            done.set()

    holder["sub"] = sub = a0py.Subscriber(topic, cb)
    parent, child = CTX.Pipe()
    p = CTX.Process(target=_pub_writer, args=(topic.name, n, child))
    p.start()
    time.sleep(0.05)  # the dispatcher is asleep on the topic
    c0, t0 = cpu_ns(), time.perf_counter_ns()
    parent.send("go")
    done.wait(120)
    wall, cpu = time.perf_counter_ns() - t0, cpu_ns() - c0 + parent.recv()
    sub.close()
    p.join()
    drop_topic(topic)
    return wall / count[0], cpu / count[0], count[0] / n


# ------------------------------------------------------------ ping-pong
#
# Besides the latencies, how often the timing thread slept: its voluntary context
# switches (a futex sleep is one; a spin's yields are not), per round trip.


def sleeps_so_far():
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw


def _raw_echo(ping, pong, n):
    rx = a0py.Transport(a0py.Arena.shm(ping))
    tx = a0py.Transport(a0py.Arena.shm(pong))
    for _ in range(WARM_FRAMES + n):
        _, data = rx.read_next(timeout=None)
        tx.write(data)


def pingpong_raw(n):
    ping, a = raw_arena()
    pong, b = raw_arena()
    tx, rx = a0py.Transport(a), a0py.Transport(b)
    p = CTX.Process(target=_raw_echo, args=(ping, pong, n))
    p.start()
    for _ in range(WARM_FRAMES):
        tx.write(WARM)
        rx.read_next(timeout=None)
    lat = []
    clock = time.perf_counter_ns
    sleeps = sleeps_so_far()
    for _ in range(n):
        t0 = clock()
        tx.write(PAYLOAD)
        rx.read_next(timeout=None)
        lat.append(clock() - t0)
    sleeps = sleeps_so_far() - sleeps
    p.join()
    drop_raw(ping, a)
    drop_raw(pong, b)
    return lat, sleeps


def _ps_echo(ping, pong, n, conn):
    sub = a0py.SubscriberSync(tp.Topic(ping, size=ARENA))
    pub = a0py.Publisher(tp.Topic(pong, size=ARENA))
    conn.send("ready")
    for _ in range(WARM_FRAMES + n):
        pub.pub(sub.read_blocking().payload)


def _cb_echo(ping, pong, n, conn):
    pub = a0py.Publisher(tp.Topic(pong, size=ARENA))
    done = threading.Event()
    count = [0]

    def echo(pkt):
        pub.pub(pkt.payload)
        count[0] += 1
        if count[0] == WARM_FRAMES + n:
            done.set()

    sub = a0py.Subscriber(tp.Topic(ping, size=ARENA), echo)
    conn.send("ready")
    done.wait(300)
    sub.close()


def pingpong_ps(n, echo):
    ping, pong = fresh_topic("ping"), fresh_topic("pong")
    rx = a0py.SubscriberSync(pong)
    tx = a0py.Publisher(ping)
    parent, child = CTX.Pipe()
    p = CTX.Process(target=echo, args=(ping.name, pong.name, n, child))
    p.start()
    parent.recv()
    time.sleep(0.05)
    for _ in range(WARM_FRAMES):
        tx.pub(WARM)
        rx.read_blocking()
    lat = []
    clock = time.perf_counter_ns
    pub, read = tx.pub, rx.read_blocking
    sleeps = sleeps_so_far()
    for _ in range(n):
        t0 = clock()
        pub(PAYLOAD)
        read()
        lat.append(clock() - t0)
    sleeps = sleeps_so_far() - sleeps
    p.join()
    drop_topic(ping)
    drop_topic(pong)
    return lat, sleeps


# ------------------------------------------------------------ paced: the waiter's CPU
#
# A publisher in another process publishes at a fixed rate (sleeping between, on a
# deadline), the reader here takes each with read_blocking: the reader's CPU seconds per
# second is what its wait costs at that rate (spinning while the next message comes
# within the spin, sleeping otherwise).

PACED_RATES = (1_000, 10_000, 20_000)


def _paced_writer(topic_name, rate, seconds, conn):
    pub = a0py.Publisher(tp.Topic(topic_name, size=ARENA))
    conn.recv()
    period = 1.0 / rate
    n = int(rate * seconds)
    next_t = time.perf_counter()
    for _ in range(n):
        pub.pub(PAYLOAD)
        next_t += period
        while True:
            delay = next_t - time.perf_counter()
            if delay <= 0:
                break
            time.sleep(delay if delay > 2e-4 else 0)
    conn.send(n)


def paced(rate, seconds=2.0):
    """The reader's CPU seconds per second at `rate` messages a second."""
    topic = fresh_topic("paced")
    sub = a0py.SubscriberSync(topic)
    parent, child = CTX.Pipe()
    p = CTX.Process(target=_paced_writer, args=(topic.name, rate, seconds, child))
    p.start()
    read = sub.read_blocking
    c0, t0 = cpu_ns(), time.perf_counter_ns()
    parent.send("go")
    n = int(rate * seconds)
    got = 0
    while got + sub.missed < n:
        read()
        got += 1
    wall, cpu = time.perf_counter_ns() - t0, cpu_ns() - c0
    p.join()
    drop_topic(topic)
    return cpu / wall


# ------------------------------------------------------------ main


def print_stream(rows, out):
    med = statistics.median
    names = ("raw", "sync", "callback")
    wall = [med(x[i][0] for x in rows) for i in range(3)]
    cpu = [med(x[i][1] for x in rows) for i in range(3)]
    dl = [med(x[i][2] for x in rows) for i in range(3)]
    out["stream"] = {k: {"wall_ns": w, "cpu_ns": c, "delivered": d}
                     for k, w, c, d in zip(names, wall, cpu, dl)}
    for i, what in ((1, "read_blocking"), (2, "callback Subscriber")):
        print(f"| stream, {what}: CPU ns/msg, both processes (delivered {dl[0]:.0%} / {dl[i]:.0%}) "
              f"| {cpu[0]:.0f} | {cpu[i]:.0f} | {cpu[i] / cpu[0]:.2f}x |")
        print(f"| stream, {what}: wall ns/msg | {wall[0]:.0f} | {wall[i]:.0f} | {wall[i] / wall[0]:.2f}x |")


def print_pingpong(rows, out):
    """Medians over the repeats of each repeat's p50 and p99, with their ranges."""
    med = statistics.median

    def stat(i, q):
        xs = [percentile(x[i][0], q) / 1000 for x in rows]
        return med(xs), min(xs), max(xs)

    def sleeps(i):
        return med(x[i][1] / len(x[i][0]) for x in rows)

    for i, what in ((1, "read_blocking"), (2, "callback echo")):
        p50r, p99r = stat(0, 50), stat(0, 99)
        p50, p99 = stat(i, 50), stat(i, 99)
        ratios = [percentile(x[i][0], 99) / percentile(x[0][0], 99) for x in rows]
        out[f"pingpong_{what}"] = {"raw_p50_us": p50r[0], "raw_p99_us": p99r[0], "p50_us": p50[0],
                                   "p99_us": p99[0], "raw_p99_range_us": p99r[1:],
                                   "p99_range_us": p99[1:], "p99_ratio_per_repeat": ratios,
                                   "raw_sleeps_per_rt": sleeps(0), "sleeps_per_rt": sleeps(i)}
        print(f"| ping-pong p50, {what} (µs) | {p50r[0]:.1f} | {p50[0]:.1f} | {p50[0] / p50r[0]:.2f}x |")
        print(f"| ping-pong p99, {what} (µs; range over repeats) | {p99r[0]:.1f} "
              f"({p99r[1]:.1f}–{p99r[2]:.1f}) | {p99[0]:.1f} ({p99[1]:.1f}–{p99[2]:.1f}) "
              f"| {p99[0] / p99r[0]:.2f}x (per repeat {min(ratios):.2f}–{max(ratios):.2f}x) |")
        print(f"| ping-pong, {what}: the timing thread's sleeps per round trip | {sleeps(0):.4f} "
              f"| {sleeps(i):.4f} | |")



def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--only", action="append",
                    choices=["write", "read", "stream", "pingpong", "paced"],
                    help="run only this workload (repeatable; default: all)")
    ap.add_argument("--cold", action="store_true",
                    help="no warm-up round trips before the ping-pong (as this bench was: it "
                         "then measures first-touch page faults too)")
    args = ap.parse_args()
    if args.cold:
        global WARM_FRAMES
        WARM_FRAMES = 0
    only = set(args.only or ("write", "read", "stream", "pingpong"))
    repeats = args.repeats or (1 if args.quick else 5)
    n_call = 20_000 if args.quick else 200_000
    n_stream = 20_000 if args.quick else 200_000
    n_pp = 2_000 if args.quick else 20_000
    os.environ.setdefault("A0PY_ROOT", f"shm:a0bench-{os.getpid()}")

    rows = {k: [] for k in ("write", "read", "stream", "pingpong", "paced")}
    for r in range(repeats):
        if "write" in only:
            rows["write"].append(bench_write(n_call))
        if "read" in only:
            rows["read"].append(bench_read(n_call))
        if "stream" in only:
            rows["stream"].append((stream_raw(n_stream), stream_sync(n_stream),
                                   stream_callback(n_stream)))
        if "pingpong" in only:
            rows["pingpong"].append((pingpong_raw(n_pp), pingpong_ps(n_pp, _ps_echo),
                                     pingpong_ps(n_pp, _cb_echo)))
        if "paced" in only:
            rows["paced"].append([paced(rate) for rate in PACED_RATES])
        print(f"repeat {r + 1}/{repeats} done", file=sys.stderr, flush=True)

    med = statistics.median
    out = {"repeats": repeats, "loadavg": os.getloadavg(), "multiwait": a0py._core.multiwait_mode(),
           "a0py": os.path.dirname(a0py.__file__), "warm_frames": WARM_FRAMES}
    print(f"# pub/sub vs raw transport, 64 B payloads, medians of {repeats} "
          f"(load {os.getloadavg()[0]:.2f}, dispatcher: {out['multiwait']}, a0py from "
          f"{out['a0py']}, {WARM_FRAMES} warm-up round trips)\n")
    print("| workload | raw transport | pub/sub | ratio |")
    print("|---|---|---|---|")
    for name in ("write", "read"):
        if not rows[name]:
            continue
        raw = med(x[0] for x in rows[name])
        ps = med(x[1] for x in rows[name])
        out[name] = {"raw_ns": raw, "pubsub_ns": ps, "ratio": ps / raw}
        what = {"write": "write vs pub (CPU ns/call)", "read": "read_next(0) vs read() (CPU ns/call)"}[name]
        print(f"| {what} | {raw:.0f} | {ps:.0f} | {ps / raw:.2f}x |")
    if rows["stream"]:
        print_stream(rows["stream"], out)
    if rows["pingpong"]:
        print_pingpong(rows["pingpong"], out)
    if rows["paced"]:
        out["paced_cpu_per_s"] = {}
        for i, rate in enumerate(PACED_RATES):
            xs = [x[i] for x in rows["paced"]]
            out["paced_cpu_per_s"][rate] = med(xs)
            print(f"| read_blocking's CPU s per s, {rate} messages/s (range) | | "
                  f"{med(xs):.3f} ({min(xs):.3f}–{max(xs):.3f}) | |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
