"""The bridge against Zenoh's own Python pub/sub, on loopback, in the same run.

    python bench/bridge.py            # about two minutes on 2 cores
    python bench/bridge.py --quick
    python bench/bridge.py --only rate|latency|cpu|ingest

Workloads (medians of --repeats runs):

  bridge   a publisher process writes N packets into a topic under root A as fast as it
           can; two ``a0py bridge --reliable`` processes (roots A and B, TCP on
           127.0.0.1) carry them; this process reads them from root B. Rate: packets
           (or bytes) from the first packet read to the last. The 256 MiB rings are
           written over once before the bridges start, so the packets land on pages
           already touched, as in a ring in steady use (--cold: fresh rings, as the
           runs before 2026-11-26 21:20). Each process still maps the ring itself and
           takes a page fault on every page it writes first (256 per 1 MiB packet in
           the publisher and the importing bridge, most of a 1 MiB write's time);
           --warm: a warm-up pass once round both rings through the whole path first
           (published, bridged, read; not timed), so no process on the path faults.
           Beside it, the CPU time (user + system, /proc) each bridge process spent
           meanwhile, per packet: less sensitive to other jobs than the rate.
  zenoh    a sender process puts N samples of the same size on a key with the block
           policy from its own Zenoh session (peer mode, TCP on 127.0.0.1); this
           process's session receives them (a callback taking each sample's bytes, as
           the bridge side's reader gets each packet's payload as bytes: before
           2026-11-26 22:10 the callback only counted, which at 1 MiB spared Zenoh's
           side the copy the bridge side pays, about a quarter of its rate). Same clock.
           Like with like otherwise: both count messages delivered to Python, one a
           packet read, the other a sample's callback; the bridge carries each 64 B
           payload with its a0py headers (160 B a packet, more once imported).

  latency  one packet (64 B) every 2 ms, one way: across the bridge, from the
           publisher's ``a0_time_mono`` (kept by the bridge) to the moment this process's
           blocking read returns it under root B; for Zenoh, from a monotonic time put
           in the payload to the receiving callback. Same host, same clock: p50, p99.
  cpu      a publisher process writes 1 KiB packets on 20 topics at 1 kHz each; the CPU
           time (user + system, /proc) each bridge process spends over --cpu-seconds,
           as a share of one core (the exporting and the importing side), for bridges
           per topic (the default), with --bundle, and with --bundle --linger 0.0005
           (--bundle-lingers);
           beside them, the same load put on 20 keys by a Zenoh session and received by
           another (a Python callback per sample). The four alternate, --repeats rounds,
           medians; the load average before and after.
  ingest   in this process: the importer's work per sample once Zenoh gave its bytes,
           the previous Python steps (decode the attachment, split the batch, splice
           each packet, write the list) against the compiled TopicIngest.ingest.

A script, not a test: it asserts nothing about speed. The targets: 64 B msgs/s and
1 MiB MB/s across the bridge at least 80 % of Zenoh's own; added latency p50 within
Zenoh's own + 30 us; under 10 % of a core at 1 kHz x 20 topics.
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import zenoh  # noqa: E402

from a0py import INIT_AWAIT_NEW, INIT_OLDEST, Publisher, SubscriberSync, Topic, _core  # noqa: E402
from a0py.bridge.config import zenoh_config  # noqa: E402
from a0py.proto.topic import list_topics, unlink_topic  # noqa: E402

PUBLISH = """
import sys, time
from a0py import Publisher, Topic
n, size, warm = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
payload = b"x" * size
with Publisher(Topic("bench/data", size="256M")) as pub:
    if warm:
        for _ in range(warm - 1):
            pub.pub(payload)
        pub.pub(b"y" * size)  # the last of the warm-up
        sys.stdin.readline()  # the reader has it: the timed packets
    for _ in range(n):
        pub.pub(payload)
"""

# The data topic's rings (256 MiB on both machines) are written over once before the
# bridges start, so the timed packets land on pages already touched, as in a ring in
# steady use (the method of docs/performance.md: first-touch page faults are not timed;
# the bridges start after, so they carry none of it). --cold: fresh rings, as runs before.
RING = 256 << 20


def touch_ring(root):
    """Writes topic bench/data's ring under `root` over once (1 MiB frames)."""
    transport = _core.Transport(Topic("bench/data", root=root, size=RING).arena("pubsub"))
    junk = bytes(1 << 20)
    for _ in range(RING // len(junk) + 1):
        transport.write(junk)

SEND = """
import sys, time, zenoh
from a0py.bridge.config import zenoh_config
n, size, ep = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with zenoh.open(zenoh_config(zenoh, connect=[ep])) as s:
    pub = s.declare_publisher("bench/zenoh", congestion_control=zenoh.CongestionControl.BLOCK)
    payload = b"x" * size
    time.sleep(1.0)  # for the subscriber's declaration to arrive
    for _ in range(n):
        pub.put(payload)
    time.sleep(1.0)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(root):
    return dict(os.environ, A0PY_ROOT=root, PYTHONPATH=REPO)


class Bridges:
    """Two ``a0py bridge --reliable`` processes, roots ``a`` and ``b``, linked (a probe
    crossed); stopped and their topics removed on exit. `prepare(root)` runs on each
    root before the bridges start. ``Bridges.extra``: more arguments for both
    (``--bridge-arg``)."""

    extra = ()

    def __init__(self, prepare=None, extra=()):
        self.prepare = prepare
        self.args = (*self.extra, *extra)

    def __enter__(self):
        tag = uuid.uuid4().hex[:8]
        self.a, self.b = f"shm:bbench{tag}a", f"shm:bbench{tag}b"
        if self.prepare is not None:
            self.prepare(self.a)
            self.prepare(self.b)
        ep = f"tcp/127.0.0.1:{free_port()}"
        cmd = [sys.executable, "-m", "a0py", "bridge", "--reliable", "--status-interval", "3600", *self.args]
        self.procs = [
            subprocess.Popen(cmd + ["--listen", ep, "bench/**"], env=env(self.a), stdout=subprocess.PIPE),
            subprocess.Popen(cmd + ["--connect", ep, "bench/**"], env=env(self.b), stdout=subprocess.PIPE)]
        for p in self.procs:
            p.stdout.readline()
        # the route: a probe until it crosses
        with Publisher(Topic("bench/probe", root=self.a)) as probe, \
                SubscriberSync(Topic("bench/probe", root=self.b), INIT_OLDEST) as seen:
            deadline = time.monotonic() + 20
            while seen.read() is None:
                probe.pub(b"p")
                if time.monotonic() > deadline:
                    raise SystemExit("the bridges did not link within 20 s")
                time.sleep(0.1)
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.terminate()
            p.communicate(timeout=20)
        for root in (self.a, self.b):
            for name in list_topics(root):
                unlink_topic(Topic(name, root=root))


def warm_count(size):
    """Packets of `size` that go once round the data topic's ring, and a few more."""
    return RING // (size + 96) + 16


def bridge_rate(n, size, cold=False, warm=False):
    """(packets/s, missed, [CPU us per packet of the exporting and the importing bridge]).
    `warm`: a warm-up pass once round the rings through the whole path first (see
    --warm)."""
    with Bridges(prepare=None if cold else touch_ring) as br:
        a, b = br.a, br.b
        with SubscriberSync(Topic("bench/data", root=b, size="256M"), INIT_AWAIT_NEW) as sub:
            pub = subprocess.Popen([sys.executable, "-c", PUBLISH, str(n), str(size),
                                    str(warm_count(size) if warm else 0)],
                                   env=env(a), stdin=subprocess.PIPE)
            if warm:
                while sub.read_blocking(timeout=60).payload[:1] != b"y":
                    pass
            missed0 = sub.missed
            cpu0 = [cpu_seconds(p.pid) for p in br.procs]
            if warm:
                pub.stdin.write(b"go\n")
                pub.stdin.flush()
            sub.read_blocking(timeout=30)
            t0 = time.perf_counter()
            got = 1
            while got < n:
                sub.read_blocking(timeout=30)
                got += 1
            elapsed = time.perf_counter() - t0
            cpu = [(cpu_seconds(p.pid) - c) / n * 1e6 for p, c in zip(br.procs, cpu0)]
            pub.communicate(timeout=30)
            return (n - 1) / elapsed, sub.missed - missed0, cpu


def zenoh_rate(n, size):
    ep = f"tcp/127.0.0.1:{free_port()}"
    done = threading.Event()
    times = []

    def on_sample(sample):
        sample.payload.to_bytes()  # the payload in Python, as the bridge side's reader has it
        times.append(time.perf_counter())
        if len(times) == n:
            done.set()

    with zenoh.open(zenoh_config(zenoh, listen=[ep])) as s:
        s.declare_subscriber("bench/zenoh", on_sample)
        sender = subprocess.Popen([sys.executable, "-c", SEND, str(n), str(size), ep], env=env("shm:unused"))
        done.wait(60)
        sender.wait(timeout=30)
    if len(times) < n:
        raise SystemExit(f"zenoh: {len(times)} of {n} samples arrived")
    return (n - 1) / (times[-1] - times[0]), 0, None


PACED = """
import sys, time
from a0py import Publisher, Topic
n, period = int(sys.argv[1]), float(sys.argv[2])
with Publisher(Topic("bench/lat", size="16M")) as pub:
    t = time.monotonic()
    for _ in range(n):
        t += period
        time.sleep(max(0.0, t - time.monotonic()))
        pub.pub(b"x" * 64)
"""

PACED_ZENOH = """
import struct, sys, time, zenoh
from a0py.bridge.config import zenoh_config
n, period, ep = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
with zenoh.open(zenoh_config(zenoh, connect=[ep])) as s:
    pub = s.declare_publisher("bench/zlat", congestion_control=zenoh.CongestionControl.BLOCK)
    time.sleep(1.0)
    t = time.monotonic()
    for _ in range(n):
        t += period
        time.sleep(max(0.0, t - time.monotonic()))
        pub.put(struct.pack("<Q", time.monotonic_ns()) + b"x" * 56)
    time.sleep(0.5)
"""

LOAD = """
import sys, time
from a0py import Publisher, Topic
topics, rate, seconds = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
pubs = [Publisher(Topic(f"bench/load/{i}", size="4M")) for i in range(topics)]
payload = b"x" * 1024
t = time.monotonic()
end = t + seconds
while t < end:
    t += 1.0 / rate
    time.sleep(max(0.0, t - time.monotonic()))
    for p in pubs:
        p.pub(payload)
"""


ZENOH_LOAD = """
import sys, time, zenoh
from a0py.bridge.config import zenoh_config
topics, rate, seconds, ep = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
with zenoh.open(zenoh_config(zenoh, connect=[ep])) as s:
    pubs = [s.declare_publisher(f"bench/zload/{i}", congestion_control=zenoh.CongestionControl.BLOCK)
            for i in range(topics)]
    payload = b"x" * 1024
    t = time.monotonic()
    end = t + seconds
    while t < end:
        t += 1.0 / rate
        time.sleep(max(0.0, t - time.monotonic()))
        for p in pubs:
            p.put(payload)
"""

ZENOH_SINK = """
import sys, threading, zenoh
from a0py.bridge.config import zenoh_config
with zenoh.open(zenoh_config(zenoh, listen=[sys.argv[1]])) as s:
    count = [0]
    def on_sample(sample):
        sample.payload.to_bytes()
        count[0] += 1
    s.declare_subscriber("bench/zload/**", on_sample)
    print("ready", flush=True)
    sys.stdin.readline()
    print(count[0], flush=True)
"""


def percentiles(samples_ns):
    s = sorted(samples_ns)
    return s[len(s) // 2] / 1e3, s[min(len(s) - 1, int(len(s) * 0.99))] / 1e3


def bridge_latency(n, period):
    with Bridges() as br, SubscriberSync(Topic("bench/lat", root=br.b, size="16M"), INIT_OLDEST) as sub:
        pub = subprocess.Popen([sys.executable, "-c", PACED, str(n), str(period)], env=env(br.a))
        lat = []
        for _ in range(n):
            pkt = sub.read_blocking(timeout=30)
            lat.append(time.monotonic_ns() - int(pkt.headers["a0_time_mono"]))
        pub.wait(timeout=30)
    return percentiles(lat[n // 10:])  # the first ones cross while routes warm up


def zenoh_latency(n, period):
    import struct

    ep = f"tcp/127.0.0.1:{free_port()}"
    lat = []
    done = threading.Event()

    def on_sample(sample):
        lat.append(time.monotonic_ns() - struct.unpack_from("<Q", sample.payload.to_bytes())[0])
        if len(lat) == n:
            done.set()

    with zenoh.open(zenoh_config(zenoh, listen=[ep])) as s:
        s.declare_subscriber("bench/zlat", on_sample)
        sender = subprocess.Popen([sys.executable, "-c", PACED_ZENOH, str(n), str(period), ep],
                                  env=env("shm:unused"))
        done.wait(60 + n * period)
        sender.wait(timeout=30)
    return percentiles(lat[n // 10:])


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bridge_cpu(topics, rate, seconds, extra=()):
    """The exporting and the importing bridge's CPU (% of a core) under the load;
    `extra`: more arguments for both bridges (``--bundle``, ``--linger``)."""
    with Bridges(extra=extra) as br:
        load = subprocess.Popen([sys.executable, "-c", LOAD, str(topics), str(rate), str(seconds + 3)],
                                env=env(br.a))
        time.sleep(2.0)  # every topic discovered and flowing
        before = [cpu_seconds(p.pid) for p in br.procs]
        t0 = time.monotonic()
        time.sleep(seconds)
        after = [cpu_seconds(p.pid) for p in br.procs]
        elapsed = time.monotonic() - t0
        load.wait(timeout=60)
        with SubscriberSync(Topic("bench/load/0", root=br.b), INIT_OLDEST) as sub:
            arrived = sub.read() is not None
    if not arrived:
        raise SystemExit("cpu: nothing crossed")
    return [(x - y) / elapsed * 100 for x, y in zip(after, before)]


def zenoh_cpu(topics, rate, seconds):
    """The same load between two Zenoh sessions of their own: the sending process's CPU
    (it also paces the load) and the receiving one's (a Python callback taking each
    sample's bytes)."""
    ep = f"tcp/127.0.0.1:{free_port()}"
    sink = subprocess.Popen([sys.executable, "-c", ZENOH_SINK, ep], env=env("shm:unused"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        sink.stdout.readline()
        load = subprocess.Popen([sys.executable, "-c", ZENOH_LOAD, str(topics), str(rate),
                                 str(seconds + 3), ep], env=env("shm:unused"))
        time.sleep(2.0)
        before = [cpu_seconds(p.pid) for p in (load, sink)]
        t0 = time.monotonic()
        time.sleep(seconds)
        after = [cpu_seconds(p.pid) for p in (load, sink)]
        elapsed = time.monotonic() - t0
        load.wait(timeout=60)
        out, _ = sink.communicate("\n", timeout=30)
        if int(out.split()[-1]) == 0:
            raise SystemExit("cpu: no Zenoh sample arrived")
    finally:
        if sink.poll() is None:
            sink.kill()
    return [(x - y) / elapsed * 100 for x, y in zip(after, before)]


def python_ingest(transport, payload, raw_att):
    """The importer's per-sample steps as they were in Python before the compiled
    TopicIngest (dedupe left out): the reference the ingest workload compares with."""
    from a0py import _core
    from a0py.bridge.wire import ORIGIN, SEQ, batch_frames, bridge_headers, decode_attachment

    att = decode_attachment(raw_att)
    frames = batch_frames(payload, att.count)
    headers = bridge_headers(att)[:2]
    transport.write_many([_core.packet_append_headers(f, headers + [(SEQ, str(att.seq + i))], ORIGIN)
                          for i, f in enumerate(frames)])


def ingest_costs(repeats):
    """us per sample of the importer's work once Zenoh handed it the sample (its bytes):
    the previous Python steps against TopicIngest.ingest, alternating, medians. In this
    process, on a heap arena of 64 MiB (so 1 MiB frames go to pages already touched)."""
    import a0py
    from a0py import Packet, _core
    from a0py.bridge._ingest import TopicIngest
    from a0py.bridge.counts import TopicCounts
    from a0py.bridge.wire import FRAME_PREFIX, BatchAttachment

    origin = uuid.uuid4().bytes
    rows = []
    for label, size, per_sample, reps in (("1 KiB x 1", 1024, 1, 20000), ("64 B x 256", 64, 256, 400),
                                          ("1 MiB x 1", 1 << 20, 1, 300)):
        packet = Packet([("k", "v")], b"x" * size).to_bytes()
        payload = b"".join(FRAME_PREFIX.pack(i, len(packet)) + packet for i in range(per_sample))
        arena = a0py.Arena.heap(64 << 20)
        transport = _core.Transport(arena)
        ingest = TopicIngest(uuid.uuid4().bytes, TopicCounts,
                             lambda _size, arena=arena: (_core.Transport(arena), None))
        number = [1]

        def attachments(reps=reps, per_sample=per_sample, number=number):
            out = []
            for _ in range(reps):
                out.append(BatchAttachment(origin, number[0], per_sample, "host").encode())
                number[0] += per_sample
            return out

        times = {"python": [], "compiled": []}
        for _ in range(repeats):
            atts = attachments()
            t0 = time.perf_counter()
            for att in atts:
                python_ingest(transport, payload, att)
            times["python"].append((time.perf_counter() - t0) / reps * 1e6)
            atts = attachments()
            t0 = time.perf_counter()
            for att in atts:
                ingest.ingest(payload, att)
            times["compiled"].append((time.perf_counter() - t0) / reps * 1e6)
        rows.append((label, statistics.median(times["python"]), statistics.median(times["compiled"])))
        arena.close()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=("rate", "latency", "cpu", "ingest"))
    ap.add_argument("--cpu-seconds", type=float, default=10.0)
    ap.add_argument("--bridge-arg", action="append", default=[],
                    help="an argument for both bridge processes (repeatable), e.g. --bridge-arg=--linger=0.0002")
    ap.add_argument("--bundle-lingers", default="0,0.0005", metavar="SECONDS,...",
                    help="cpu: the lingers of the --bundle rows (default 0,0.0005)")
    ap.add_argument("--size", choices=("64B", "1MiB"), help="rate: only this size")
    ap.add_argument("--cold", action="store_true", help="rate: fresh rings (first-touch page faults timed)")
    ap.add_argument("--warm", action="store_true",
                    help="rate: a warm-up pass once round both rings through the publisher, the bridges "
                         "and the reader before the timed packets, so no process on the path takes "
                         "first-write page faults in its own mapping (as in a ring in steady use)")
    args = ap.parse_args()
    Bridges.extra = args.bridge_arg
    repeats = 1 if args.quick else args.repeats
    if args.only in (None, "rate"):
        cases = [("64 B", 64, 5000 if args.quick else 50000), ("1 MiB", 1 << 20, 20 if args.quick else 200)]
        cases = [c for c in cases if args.size in (None, c[0].replace(" ", ""))]
        print(f"{'size':>6} {'path':>7} {'msgs/s':>10} {'MB/s':>9} {'missed':>7}   bridge CPU us/packet "
              "(exporting, importing)")
        for label, size, n in cases:
            for path, fn in (("bridge", lambda n, size: bridge_rate(n, size, args.cold, args.warm)), ("zenoh", zenoh_rate)):
                runs = [fn(n, size) for _ in range(repeats)]
                rate = statistics.median(r for r, _, _ in runs)
                missed = max(m for _, m, _ in runs)
                cpu = ""
                if runs[0][2] is not None:
                    cpu = "   " + ", ".join(f"{statistics.median(r[2][i] for r in runs):.1f}" for i in (0, 1))
                print(f"{label:>6} {path:>7} {rate:>10.0f} {rate * size / 1e6:>9.1f} {missed:>7}{cpu}",
                      flush=True)
    if args.only in (None, "ingest"):
        print("importer, us per sample once Zenoh gave its bytes (previous Python steps / TopicIngest):")
        for label, py, compiled in ingest_costs(max(repeats, 3)):
            print(f" {label:>11}  python {py:9.2f}  compiled {compiled:8.2f}  ({py / compiled:.1f}x)", flush=True)
    if args.only in (None, "latency"):
        n = 500 if args.quick else 2500
        print(f"latency, 64 B every 2 ms, one way ({n} packets, the first tenth left out)")
        for path, fn in (("bridge", bridge_latency), ("zenoh", zenoh_latency)):
            p50, p99 = fn(n, 0.002)
            print(f"{path:>7}  p50 {p50:8.1f} us  p99 {p99:8.1f} us", flush=True)
    if args.only in (None, "cpu"):
        seconds = 3.0 if args.quick else args.cpu_seconds
        variants = [("bridge, per topic", lambda: bridge_cpu(20, 1000.0, seconds))]
        for linger in args.bundle_lingers.split(","):
            extra = ["--bundle"] + (["--linger", linger] if float(linger) else [])
            variants.append((" ".join(extra), lambda extra=extra: bridge_cpu(20, 1000.0, seconds, extra)))
        variants.append(("zenoh", lambda: zenoh_cpu(20, 1000.0, seconds)))
        load0 = os.getloadavg()
        runs = {label: [] for label, _ in variants}
        for _ in range(repeats):  # alternating: the machine's load hits every variant alike
            for label, fn in variants:
                runs[label].append(fn())
        load1 = os.getloadavg()
        print(f"cpu, 1 KiB x 20 topics x 1 kHz over {seconds:.0f} s, % of one core, median of {repeats} "
              f"(load average {load0[0]:.2f} before, {load1[0]:.2f} after):")
        for label, _ in variants:
            first = statistics.median(r[0] for r in runs[label])
            second = statistics.median(r[1] for r in runs[label])
            each = "  ".join(f"{r[0]:.1f}/{r[1]:.1f}" for r in runs[label])
            sides = ("sending  ", "receiving") if label == "zenoh" else ("exporting", "importing")
            print(f" {label:>24}  {sides[0]} {first:5.1f}  {sides[1]} {second:5.1f}   (runs: {each})",
                  flush=True)
        print(" (zenoh: the sender also paces the load)")


if __name__ == "__main__":
    main()
