"""The bridge against Zenoh's own Python pub/sub, on loopback, in the same run.

    python bench/bridge.py            # about two minutes on 2 cores
    python bench/bridge.py --quick
    python bench/bridge.py --only rate|latency|rtt|cpu|ingest
    python bench/bridge.py --only latency --stages [--ab exchange-source='"OLD.py"']

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
           Beside it, the CPU time (user + system) each process on the path spent per
           packet (the publisher and the reader measure their own; the bridges' from
           /proc): less sensitive to other jobs than the rate. Their sum bounds the
           rate when the processes share few cores (2 here); the largest bounds it
           when each has a core of its own (printed as "one core each": an estimate
           for a machine with a core per process, not a measurement).
  zenoh    a sender process puts N samples of the same size on a key with the block
           policy from its own Zenoh session (peer mode, TCP on 127.0.0.1); this
           process's session receives them (a callback taking each sample's bytes, as
           the bridge side's reader gets each packet's payload as bytes: before
           2026-11-26 22:10 the callback only counted, which at 1 MiB spared Zenoh's
           side the copy the bridge side pays, about a quarter of its rate). Same clock.
           CPU per packet: the sender's (its puts and Zenoh's threads sending them)
           and this process's (Zenoh's threads and the callback).
           Like with like otherwise: both count messages delivered to Python, one a
           packet read, the other a sample's callback; the bridge carries each 64 B
           payload with its a0py headers (160 B a packet, more once imported).

  latency  one packet (64 B) every 2 ms, one way: across the bridge, from the
           publisher's ``a0_time_mono`` (kept by the bridge) to the moment this process's
           blocking read returns it under root B; for Zenoh, from a monotonic time put
           in the payload to the receiving callback. Same host, same clock: p50, p99.
           --stages: where the time goes, in --repeats rounds, each running in turn the
           bridges untraced, the bridges traced (BRIDGE_PROC: timestamps round the
           export loop's wait, its read and its put, the importer's callback and its
           ingest), Zenoh's own (its put and its delivery timed apart) and one a0py
           hop with no bridge (a publisher process to this process's blocking read: the
           floor of each of the bridge's two extra hops); --ab adds variants of the
           bridges run in the same rounds (another revision's exporting.py or importing.py, Zenoh
           publisher options, the callback's thread, no echo on the importing side), and
           Zenoh's own with the same options.
  rtt      round trips, 8 B pings every 2 ms: across the bridges (pings published under
           root A, echoed by a process under root B, the pongs read back under root A)
           and between two Zenoh sessions (an echo process putting back each ping);
           beside them, in the same alternating rounds, the one-way latency across the
           bridges (as `latency`). The latency target reads "Zenoh's own round trip +
           30 us": this puts the one-way figure next to that round trip, and round trip
           next to round trip.
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
import json
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
    cpu = time.process_time()
    for _ in range(n):
        pub.pub(payload)
    print(time.process_time() - cpu, flush=True)  # this process's CPU for the timed packets
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
    cpu = time.process_time()
    for _ in range(n):
        pub.put(payload)
    time.sleep(1.0)
    print(time.process_time() - cpu, flush=True)  # puts and Zenoh's threads sending them
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

    def __init__(self, prepare=None, trace=None, variant=None, extra=()):
        self.prepare = prepare
        self.trace = trace  # a directory: each bridge's timestamps there (BRIDGE_PROC)
        self.variant = variant or {}  # the bridges otherwise than as built (BRIDGE_PROC)
        self.args = (*self.extra, *extra)

    def __enter__(self):
        tag = uuid.uuid4().hex[:8]
        self.a, self.b = f"shm:bbench{tag}a", f"shm:bbench{tag}b"
        if self.prepare is not None:
            self.prepare(self.a)
            self.prepare(self.b)
        ep = f"tcp/127.0.0.1:{free_port()}"
        args = ["bridge", "--reliable", "--status-interval", "3600", *self.args]

        def cmd(side):
            if self.trace is None and not self.variant:
                return [sys.executable, "-m", "a0py", *args]
            trace = None if self.trace is None else os.path.join(self.trace, f"{side}.json")
            return [sys.executable, "-c", BRIDGE_PROC, json.dumps({"trace": trace, "variant": self.variant, "side": side}),
                    *args, *self.variant.get("args", ())]

        self.procs = [
            subprocess.Popen(cmd("a") + ["--listen", ep, "bench/**"], env=env(self.a), stdout=subprocess.PIPE),
            subprocess.Popen(cmd("b") + ["--connect", ep, "bench/**"], env=env(self.b), stdout=subprocess.PIPE)]
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
    """(packets/s, missed, [CPU us per packet of the publisher, the exporting bridge, the
    importing bridge and the reader]). `warm`: a warm-up pass once round the rings
    through the whole path first (see --warm)."""
    with Bridges(prepare=None if cold else touch_ring) as br:
        a, b = br.a, br.b
        with SubscriberSync(Topic("bench/data", root=b, size="256M"), INIT_AWAIT_NEW) as sub:
            pub = subprocess.Popen([sys.executable, "-c", PUBLISH, str(n), str(size),
                                    str(warm_count(size) if warm else 0)],
                                   env=env(a), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            if warm:
                while sub.read_blocking(timeout=60).payload[:1] != b"y":
                    pass
            missed0 = sub.missed
            cpu0 = [cpu_seconds(p.pid) for p in br.procs]
            if warm:
                pub.stdin.write(b"go\n")
                pub.stdin.flush()
            reader0 = time.process_time()
            sub.read_blocking(timeout=30)
            t0 = time.perf_counter()
            got = 1
            while got < n:
                sub.read_blocking(timeout=30)
                got += 1
            elapsed = time.perf_counter() - t0
            reader = (time.process_time() - reader0) / n * 1e6
            cpu = [(cpu_seconds(p.pid) - c) / n * 1e6 for p, c in zip(br.procs, cpu0)]
            out, _ = pub.communicate(timeout=30)
            publisher = float(out.split()[-1]) / n * 1e6
            return (n - 1) / elapsed, sub.missed - missed0, [publisher, *cpu, reader]


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
        sender = subprocess.Popen([sys.executable, "-c", SEND, str(n), str(size), ep], env=env("shm:unused"),
                                  stdout=subprocess.PIPE)
        receiver0 = time.process_time()  # this process: Zenoh's threads and the callback
        done.wait(60)
        receiver = (time.process_time() - receiver0) / n * 1e6
        out, _ = sender.communicate(timeout=30)
    if len(times) < n:
        raise SystemExit(f"zenoh: {len(times)} of {n} samples arrived")
    return (n - 1) / (times[-1] - times[0]), 0, [float(out.split()[-1]) / n * 1e6, receiver]


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

# The sender prints, at the end, how long each put took (ns), for the stage breakdown.
PACED_ZENOH = """
import json, struct, sys, time, zenoh
from a0py.bridge.config import zenoh_config
n, period, ep, express = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
puts = []
with zenoh.open(zenoh_config(zenoh, connect=[ep])) as s:
    pub = s.declare_publisher("bench/zlat", congestion_control=zenoh.CongestionControl.BLOCK,
                              express=express)
    time.sleep(1.0)
    t = time.monotonic()
    for _ in range(n):
        t += period
        time.sleep(max(0.0, t - time.monotonic()))
        t0 = time.monotonic_ns()
        pub.put(struct.pack("<Q", t0) + b"x" * 56)
        puts.append(time.monotonic_ns() - t0)
    time.sleep(0.5)
print(json.dumps(puts), flush=True)
"""

# A bridge process for --stages: argv[1] is a JSON object, "exchange": names of
# a0py.bridge.exporting or a0py.bridge.importing set before the bridge starts (the A/B of a change: the code as it
# was), "trace": where to write, as JSON, timestamps (CLOCK_MONOTONIC, ns) taken by
# wrappers put round the export loop's wait, its batch read and its Zenoh put, and round
# the importer's callback and its compiled ingest, when the bridge exits. The bridge's own
# code carries no trace: the wrappers cost a Python call each (the untraced bridge runs
# beside it for the total).
BRIDGE_PROC = """
import atexit, json, os, sys, threading, time, types
from a0py import _core
from a0py.bridge import exporting, importing
from a0py.cli import main

settings = json.loads(sys.argv[1])
variant = settings["variant"]
if variant.get("exchange_source"):
    # another revision's exporting.py or importing.py (or the exchange.py that held both
    # before them) in place of this one's (A/B of a change): the classes it has
    import importlib.util
    from a0py.bridge import bridge as bridge_module

    spec = importlib.util.spec_from_file_location("a0py.bridge._exchange_ab", variant["exchange_source"])
    ab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab)
    for name, before in (("LogCfgExporter", "Exporter"), ("ExportLoop", "ExportLoop"),
                         ("Importer", "Importer"), ("PubsubExporter", "PubsubExporter")):
        if hasattr(ab, name) or hasattr(ab, before):
            setattr(bridge_module, name, getattr(ab, name, None) or getattr(ab, before))
    exporting = ab if hasattr(ab, "PubsubExporter") else exporting
    importing = ab if hasattr(ab, "Importer") else importing
if variant.get("echo") is False and settings["side"] == "b":
    # the importing bridge exports nothing: no export loop woken by its own imports
    exporting.ExportLoop.add = lambda self, exporter: None
for name, value in variant.get("exchange", {}).items():
    module = exporting if hasattr(exporting, name) else importing
    getattr(module, name)  # a name that does not exist is an error, not a silent no-op
    setattr(module, name, value)
if variant.get("publisher"):
    # options added to the pub/sub exporters' declare_publisher (priority by its name)
    import zenoh
    from a0py.bridge import bridge as bridge_module

    options = {k: getattr(zenoh.Priority, v) if k == "priority" else v for k, v in variant["publisher"].items()}

    class Session:
        def __init__(self, session):
            self._session = session

        def __getattr__(self, name):
            return getattr(self._session, name)

        def declare_publisher(self, key, **kwargs):
            if "/pubsub/" in str(key):
                kwargs.update(options)
            return self._session.declare_publisher(key, **kwargs)

    proxy = types.SimpleNamespace(**{k: getattr(zenoh, k) for k in dir(zenoh) if not k.startswith("__")})
    proxy.open = lambda config: Session(zenoh.open(config))
    bridge_module._import_zenoh = lambda: proxy
if variant.get("callback_indirect") is not None:
    # the importer's callback on Zenoh's receiving thread (False) or a Python thread (True)
    import zenoh
    from a0py.bridge import bridge as bridge_module

    real = bridge_module._import_zenoh()

    def open_session(config):
        session = real.open(config)

        class Session:
            def __getattr__(self, name):
                return getattr(session, name)

            def declare_subscriber(self, key, handler, **kwargs):
                if "/pubsub/" in str(key) and callable(handler):
                    handler = zenoh.handlers.Callback(handler, indirect=variant["callback_indirect"])
                return session.declare_subscriber(key, handler, **kwargs)

        return Session()

    proxy = types.SimpleNamespace(**{k: getattr(real, k) for k in dir(real) if not k.startswith("__")})
    proxy.open = open_session
    bridge_module._import_zenoh = lambda: proxy
if settings["trace"] is None:
    sys.exit(main(sys.argv[2:]))

now = time.monotonic_ns
events = {k: [] for k in ("awake", "read", "put0", "put1", "put_cpu", "cb0", "ingest")}
awake, read, put0, put1, put_cpu, cb0, ingest = events.values()
tids = events["export_tid"] = []
callback_thread = events["callback_thread"] = []
events["pid"] = [os.getpid()]


class TracedWait:
    def __init__(self, *args):
        self._wait = _core.MultiWait(*args)
        self.capacity = self._wait.capacity
        self.set_arenas, self.changed, self.wake = self._wait.set_arenas, self._wait.changed, self._wait.wake

    def wait(self, timeout=None):
        woken = self._wait.wait(timeout)
        awake.append(now())
        if not tids:
            tids.append(threading.get_native_id())  # for perf sched: the export thread
        return woken


def read_packets_into(*args, **kwargs):
    out = _core.read_packets_into(*args, **kwargs)
    if out[1]:
        read.append(now())
    return out


class TracedPublisher:
    def __init__(self, publisher):
        self._publisher = publisher

    def put(self, *args, **kwargs):
        c = time.thread_time_ns()
        put0.append(now())
        self._publisher.put(*args, **kwargs)
        put1.append(now())
        put_cpu.append(time.thread_time_ns() - c)

    def undeclare(self):
        self._publisher.undeclare()


class TracedIngest:
    # The time the compiled ingest is called: the commit inside it wakes the reader, which
    # may run before the callback returns (a timestamp after it would come too late).
    def __init__(self, state):
        self._state = state

    def ingest(self, payload, attachment):
        ingest.append(now())
        return self._state.ingest(payload, attachment)

    def __getattr__(self, name):
        return getattr(self._state, name)


core = types.SimpleNamespace(**{k: getattr(_core, k) for k in dir(_core) if not k.startswith("__")})
core.MultiWait, core.read_packets_into = TracedWait, read_packets_into
exporting._core = importing._core = core
exporter_init, on_sample = exporting.PubsubExporter.__init__, importing.Importer._on_sample
new_state = importing.Importer._new_state


def traced_init(self, *args, **kwargs):
    exporter_init(self, *args, **kwargs)
    self._publisher = TracedPublisher(self._publisher)


def traced_on_sample(self, sample):
    cb0.append(now())
    if not callback_thread:  # the thread's name: Zenoh's receiving thread (rx-N) or Python's
        with open(f"/proc/self/task/{threading.get_native_id()}/comm") as f:
            callback_thread.append(f.read().strip())
    on_sample(self, sample)


exporting.PubsubExporter.__init__, importing.Importer._on_sample = traced_init, traced_on_sample
importing.Importer._new_state = lambda self, *args: TracedIngest(new_state(self, *args))
atexit.register(lambda: json.dump(events, open(settings["trace"], "w")))
sys.exit(main(sys.argv[2:]))
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


def bridge_latency(n, period, trace=None, variant=None):
    """[(publisher's a0_time_mono, read return)] ns per packet across two bridges, the
    first tenth left out (they cross while routes warm up). `trace`, `variant`: see
    BRIDGE_PROC (--stages)."""
    with Bridges(trace=trace, variant=variant) as br, \
            SubscriberSync(Topic("bench/lat", root=br.b, size="16M"), INIT_OLDEST) as sub:
        pub = subprocess.Popen([sys.executable, "-c", PACED, str(n), str(period)], env=env(br.a))
        out = []
        for _ in range(n):
            pkt = sub.read_blocking(timeout=30)
            out.append((int(pkt.headers["a0_time_mono"]), time.monotonic_ns()))
        pub.wait(timeout=30)
    return out[n // 10:]


def local_latency(n, period):
    """The same packets through one a0py topic, no bridge: a publisher process, this
    process's blocking read (the floor of each of the bridge's two extra hops)."""
    root = f"shm:blat{uuid.uuid4().hex[:8]}"
    try:
        with SubscriberSync(Topic("bench/lat", root=root, size="16M"), INIT_OLDEST) as sub:
            pub = subprocess.Popen([sys.executable, "-c", PACED, str(n), str(period)], env=env(root))
            out = []
            for _ in range(n):
                pkt = sub.read_blocking(timeout=30)
                out.append((int(pkt.headers["a0_time_mono"]), time.monotonic_ns()))
            pub.wait(timeout=30)
    finally:
        for name in list_topics(root):
            unlink_topic(Topic(name, root=root))
    return out[n // 10:]


def zenoh_latency(n, period, express=False, indirect=True):
    """[(put start, put end, callback entry)] ns per sample between two Zenoh sessions,
    the first tenth left out. `express`: the sender's publisher option; `indirect`: the
    receiver's callback on a Python thread of its own (Zenoh's default) or on Zenoh's
    receiving thread (False, as the bridge's importer)."""
    import struct

    ep = f"tcp/127.0.0.1:{free_port()}"
    got = []
    done = threading.Event()

    def on_sample(sample):
        t = time.monotonic_ns()
        got.append((struct.unpack_from("<Q", sample.payload.to_bytes())[0], t))
        if len(got) == n:
            done.set()

    with zenoh.open(zenoh_config(zenoh, listen=[ep])) as s:
        s.declare_subscriber("bench/zlat", zenoh.handlers.Callback(on_sample, indirect=indirect))
        sender = subprocess.Popen([sys.executable, "-c", PACED_ZENOH, str(n), str(period), ep,
                                   "1" if express else "0"], env=env("shm:unused"), stdout=subprocess.PIPE)
        done.wait(60 + n * period)
        puts = json.loads(sender.communicate(timeout=30)[0])
    if len(got) != n:
        raise SystemExit(f"zenoh latency: {len(got)} of {n} samples arrived")
    return [(t0, t0 + d, t1) for (t0, t1), d in zip(got, puts)][n // 10:]


# Round trips: this process sends a ping every `period` and times the pong that an
# echo process on the other side sends back for it.
PONG_A0 = """
import sys
from a0py import INIT_AWAIT_NEW, Publisher, SubscriberSync, Topic
n = int(sys.argv[1])
with SubscriberSync(Topic("bench/ping", size="16M"), INIT_AWAIT_NEW) as sub, \\
        Publisher(Topic("bench/pong", size="16M")) as pub:
    print("ready", flush=True)
    for _ in range(n):
        pub.pub(sub.read_blocking(timeout=60).payload)
"""

PONG_ZENOH = """
import sys, threading, zenoh
from a0py.bridge.config import zenoh_config
n, ep = int(sys.argv[1]), sys.argv[2]
done = threading.Event()
count = [0]
with zenoh.open(zenoh_config(zenoh, connect=[ep])) as s:
    pub = s.declare_publisher("bench/zpong", congestion_control=zenoh.CongestionControl.BLOCK)

    def on_ping(sample):
        pub.put(sample.payload.to_bytes())
        count[0] += 1
        if count[0] == n:
            done.set()

    s.declare_subscriber("bench/zping", on_ping)
    print("ready", flush=True)
    done.wait(120)
"""


def bridge_rtt(n, period):
    """Round trips (ns) across two bridges: pings published under root A, echoed by a
    process under root B, the pongs read back under root A; the first tenth left out."""
    with Bridges() as br, SubscriberSync(Topic("bench/pong", root=br.a, size="16M"), INIT_AWAIT_NEW) as pongs, \
            Publisher(Topic("bench/ping", root=br.a, size="16M")) as ping:
        echo = subprocess.Popen([sys.executable, "-c", PONG_A0, str(n)], env=env(br.b), stdout=subprocess.PIPE,
                                text=True)
        echo.stdout.readline()
        time.sleep(1.0)  # both topics discovered by both bridges
        out = []
        t = time.monotonic()
        for i in range(n):
            t += period
            time.sleep(max(0.0, t - time.monotonic()))
            t0 = time.monotonic_ns()
            ping.pub(i.to_bytes(8, "little"))
            pong = pongs.read_blocking(timeout=30)
            out.append(time.monotonic_ns() - t0)
            assert int.from_bytes(pong.payload, "little") == i
        echo.wait(timeout=30)
    return out[n // 10:]


def zenoh_rtt(n, period):
    """Round trips (ns) between this process's Zenoh session and an echo process's, the
    ping's put to the pong's callback; the first tenth left out."""
    ep = f"tcp/127.0.0.1:{free_port()}"
    pongs = []
    got = threading.Event()

    def on_pong(sample):
        pongs.append((time.monotonic_ns(), sample.payload.to_bytes()))
        got.set()

    with zenoh.open(zenoh_config(zenoh, listen=[ep])) as s:
        s.declare_subscriber("bench/zpong", on_pong)
        pub = s.declare_publisher("bench/zping", congestion_control=zenoh.CongestionControl.BLOCK)
        echo = subprocess.Popen([sys.executable, "-c", PONG_ZENOH, str(n), ep], env=env("shm:unused"),
                                stdout=subprocess.PIPE, text=True)
        echo.stdout.readline()
        time.sleep(1.0)  # the declarations crossed
        out = []
        t = time.monotonic()
        for i in range(n):
            t += period
            time.sleep(max(0.0, t - time.monotonic()))
            got.clear()
            t0 = time.monotonic_ns()
            pub.put(i.to_bytes(8, "little"))
            if not got.wait(30):
                raise SystemExit(f"zenoh rtt: no pong for ping {i}")
            t1, body = pongs[-1]
            assert int.from_bytes(body, "little") == i
            out.append(t1 - t0)
        echo.wait(timeout=30)
    return out[n // 10:]


def bridge_stages(pairs, trace):
    """Each packet's path through the traced bridges, in ns: the first event of each
    kind after the previous one (packets 2 ms apart, each a sample of its own).
    Packets whose events do not line up are left out; returns (rows, left out, put
    CPU times of the exporting bridge)."""
    import bisect

    with open(os.path.join(trace, "a.json")) as f:
        a = json.load(f)
    with open(os.path.join(trace, "b.json")) as f:
        b = json.load(f)
    chain = [a["awake"], a["read"], a["put0"], a["put1"], b["cb0"], b["ingest"]]
    rows, skipped = [], 0
    for t0, t_end in pairs:
        times, t = [t0], t0
        for i, ev in enumerate(chain):
            # the callback follows the put's start, not its end (it may come first)
            after = times[3] if i == 4 else t
            j = bisect.bisect_left(ev, after)
            if j == len(ev):
                break
            t = ev[j]
            times.append(t)
        if len(times) != 7 or t > t_end:
            skipped += 1
            continue
        times.append(t_end)
        rows.append(times)
    return rows, skipped, a["put_cpu"]


STAGES = (
    ("publish -> export loop awake", 0, 1),
    ("awake -> batch read", 1, 2),
    ("read -> put called", 2, 3),
    ("put (Zenoh, exporting side)", 3, 4),
    ("put called -> importer callback", 3, 5),
    ("callback -> ingest called", 5, 6),
    ("ingest called -> reader has it", 6, 7),
    ("total, traced", 0, 7),
)


def parse_variant(text):
    """--ab ``KIND.NAME=JSON``: ``exchange.NAME`` (a name of a0py.bridge.exporting or importing set to the
    value), ``publisher.NAME`` (an option of the pub/sub exporters' Zenoh publishers, e.g.
    ``publisher.express=true``, ``publisher.priority="REAL_TIME"``), ``callback.indirect``
    (the importer's callback on a Python thread of Zenoh's, true, or on its receiving
    thread, false), ``args=[...]`` (more command-line arguments for both bridges),
    ``exchange-source="PATH"`` (another revision's a0py/bridge/exporting.py or
    importing.py, e.g. from ``git show main:a0py/bridge/exporting.py``; or the
    exchange.py that held both before them), ``echo=false`` (the importing bridge
    exports nothing, so its own imports wake no export loop)."""
    name, sep, value = text.partition("=")
    kind, _, attr = name.partition(".")
    try:
        value = json.loads(value)
    except ValueError:
        raise SystemExit(f"--ab {text!r}: the value is not JSON") from None
    if sep and kind in ("exchange", "publisher") and attr:
        return {kind: {attr: value}}
    if sep and name == "callback.indirect":
        return {"callback_indirect": bool(value)}
    if sep and name == "args" and isinstance(value, list):
        return {"args": [str(v) for v in value]}
    if sep and name == "exchange-source" and isinstance(value, str) and os.path.isfile(value):
        return {"exchange_source": os.path.abspath(value)}
    if sep and name == "echo" and value is False:
        return {"echo": False}
    raise SystemExit(f"--ab {text!r}: write exchange.NAME=JSON, publisher.NAME=JSON, "
                     "callback.indirect=true|false, args=[...], exchange-source=\"FILE\" or echo=false")


def latency_stages(n, period, repeats, variants, zenohs):
    """The breakdown (--stages), in rounds (`repeats`), each running in turn: for each
    bridge variant (label, exchange settings) the untraced and the traced bridge; Zenoh's
    own for each (label, express, indirect); a local a0py hop. Prints each stage's p50
    and p99 over all rounds' packets, and each round's p50 of the totals."""
    import tempfile

    def pct(xs):
        return percentiles(xs) if xs else (float("nan"), float("nan"))

    plain = {label: [] for label, _ in variants}
    rows = {label: [] for label, _ in variants}
    skipped = {label: 0 for label, _ in variants}
    put_cpu = {label: [] for label, _ in variants}
    zen = {label: [] for label, _, _ in zenohs}
    local, per_round, loads = [], [], []
    for _ in range(repeats):
        this = []
        for label, variant in variants:
            lat = [t1 - t0 for t0, t1 in bridge_latency(n, period, variant=variant)]
            plain[label] += lat
            with tempfile.TemporaryDirectory() as trace:
                r, k, c = bridge_stages(bridge_latency(n, period, trace=trace, variant=variant), trace)
            rows[label] += r
            skipped[label] += k
            put_cpu[label] += c[n // 10:]
            this += [pct(lat)[0], pct([x[7] - x[0] for x in r])[0]]
        for label, express, indirect in zenohs:
            z = zenoh_latency(n, period, express, indirect)
            zen[label] += z
            this.append(pct([c - a for a, _, c in z])[0])
        loc = [t1 - t0 for t0, t1 in local_latency(n, period)]
        local += loc
        this.append(pct(loc)[0])
        per_round.append(this)
        loads.append(os.getloadavg()[0])
    print(f"latency stages, 64 B every {period * 1e3:g} ms, one way, {repeats} rounds of {n} packets "
          f"(the first tenth of each left out); load average after each round: "
          + ", ".join(f"{x:.2f}" for x in loads))
    heads = [h for label, _ in variants for h in (f"bridge[{label}]", "traced")]
    heads += [f"zenoh[{label}]" for label, _, _ in zenohs] + ["local hop"]
    print("  p50 per round (us): " + ", ".join(heads))
    for row in per_round:
        print("   " + "  ".join(f"{x:8.1f}" for x in row))
    width = 40
    print(f"  {'p50 / p99 us, all rounds':<{width}}" + "".join(f"{label:>22}" for label, _ in variants))

    def line(name, values):
        print(f"  {name:<{width}}" + "".join(f"{a:>11.1f}{b:>11.1f}" for a, b in values))

    line("bridge, untraced: total", [pct(plain[label]) for label, _ in variants])
    for name, i, j in STAGES:
        line("bridge: " + name, [pct([x[j] - x[i] for x in rows[label]]) for label, _ in variants])
    line("bridge: put's CPU time (thread)", [pct(put_cpu[label]) for label, _ in variants])
    print("  (traced packets left out, events not in line: "
          + ", ".join(f"{label} {skipped[label]} of {skipped[label] + len(rows[label])}" for label, _ in variants)
          + ")")
    for label, _, _ in zenohs:
        line(f"zenoh[{label}]: put", [pct([b - a for a, b, _ in zen[label]])])
        line(f"zenoh[{label}]: put called -> callback", [pct([c - a for a, _, c in zen[label]])])
    line("a0py local hop: publish -> read", [pct(local)])
    sys.stdout.flush()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bridge_cpu(topics, rate, seconds, variant=None, extra=()):
    """The exporting and the importing bridge's CPU (% of a core) under the load;
    `variant` as --ab gives it, `extra`: more arguments for both bridges (``--bundle``,
    ``--linger``)."""
    with Bridges(variant=variant, extra=extra) as br:
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
    ap.add_argument("--only", choices=("rate", "latency", "rtt", "cpu", "ingest"))
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
    ap.add_argument("--stages", action="store_true",
                    help="latency: where the time goes (traced bridges beside untraced ones, Zenoh's "
                         "put and delivery, a local a0py hop; alternating --repeats rounds)")
    ap.add_argument("--ab", action="append", default=[], metavar="KIND.NAME=JSON",
                    help="latency --stages and cpu: also run bridges otherwise than as built (repeatable): "
                         "exchange.NAME=JSON, publisher.NAME=JSON (e.g. publisher.express=true), "
                         "callback.indirect=false, args=[...], exchange-source=\"FILE\", echo=false "
                         "(see parse_variant)")
    args = ap.parse_args()
    Bridges.extra = args.bridge_arg
    repeats = 1 if args.quick else args.repeats
    if args.only in (None, "rate"):
        cases = [("64 B", 64, 5000 if args.quick else 50000), ("1 MiB", 1 << 20, 20 if args.quick else 200)]
        cases = [c for c in cases if args.size in (None, c[0].replace(" ", ""))]
        print(f"{'size':>6} {'path':>7} {'msgs/s':>10} {'MB/s':>9} {'missed':>7}   CPU us/packet of each "
              "process on the path (bridge: publisher, exporting bridge, importing bridge, reader; "
              "zenoh: sender, receiver), their sum, and the rate one core per process would allow")
        for label, size, n in cases:
            for path, fn in (("bridge", lambda n, size: bridge_rate(n, size, args.cold, args.warm)), ("zenoh", zenoh_rate)):
                runs = [fn(n, size) for _ in range(repeats)]
                rate = statistics.median(r for r, _, _ in runs)
                missed = max(m for _, m, _ in runs)
                each = [statistics.median(r[2][i] for r in runs) for i in range(len(runs[0][2]))]
                cpu = ("   " + ", ".join(f"{c:.3g}" for c in each) + f"  sum {sum(each):.3g}"
                       f"  (one core each: {1e6 / max(each):.0f} msgs/s)")
                print(f"{label:>6} {path:>7} {rate:>10.0f} {rate * size / 1e6:>9.1f} {missed:>7}{cpu}",
                      flush=True)
    if args.only in (None, "ingest"):
        print("importer, us per sample once Zenoh gave its bytes (previous Python steps / TopicIngest):")
        for label, py, compiled in ingest_costs(max(repeats, 3)):
            print(f" {label:>11}  python {py:9.2f}  compiled {compiled:8.2f}  ({py / compiled:.1f}x)", flush=True)
    if args.only in (None, "latency"):
        n = 500 if args.quick else 2500
        print(f"latency, 64 B every 2 ms, one way ({n} packets, the first tenth left out)")
        if args.stages:
            variants = [("as built", {})] + [(text, parse_variant(text)) for text in args.ab]
            # Zenoh's own with the same options as a variant (like with like)
            zenohs = [("default", False, True)]
            if any(v.get("publisher", {}).get("express") for _, v in variants):
                zenohs.append(("express", True, True))
            if any(v.get("callback_indirect") is False for _, v in variants):
                zenohs.append(("direct", False, False))
            latency_stages(n, 0.002, repeats, variants, zenohs)
        else:
            for path, fn in (("bridge", bridge_latency), ("zenoh", zenoh_latency)):
                pairs = fn(n, 0.002)
                p50, p99 = percentiles([p[-1] - p[0] for p in pairs])
                print(f"{path:>7}  p50 {p50:8.1f} us  p99 {p99:8.1f} us", flush=True)
    if args.only in (None, "rtt"):
        n = 300 if args.quick else 1500
        print(f"round trips, 8 B every 2 ms ({n} pings, the first tenth left out), {repeats} alternating "
              "rounds; beside them the one-way latency across the bridges in the same rounds:")
        runs = {"bridge": [], "zenoh": [], "bridge one way": []}
        for _ in range(repeats):
            runs["bridge"].append(percentiles(bridge_rtt(n, 0.002)))
            runs["zenoh"].append(percentiles(zenoh_rtt(n, 0.002)))
            runs["bridge one way"].append(percentiles([p[-1] - p[0] for p in bridge_latency(n, 0.002)]))
        for label, rs in runs.items():
            p50 = statistics.median(r[0] for r in rs)
            p99 = statistics.median(r[1] for r in rs)
            each = ", ".join(f"{r[0]:.0f}" for r in rs)
            print(f" {label:>15}  p50 {p50:8.1f} us  p99 {p99:8.1f} us   (p50 of each round: {each})", flush=True)
        print(f" load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.only in (None, "cpu"):
        seconds = 3.0 if args.quick else args.cpu_seconds
        if args.ab:
            print(f"cpu, 1 KiB x 20 topics x 1 kHz over {seconds:.0f} s, % of one core:")
            # the variants in turn, --repeats rounds: medians, and the load average
            variants = [("as built", {})] + [(text, parse_variant(text)) for text in args.ab]
            runs = {label: [] for label, _ in variants}
            for _ in range(repeats):
                for label, variant in variants:
                    runs[label].append(bridge_cpu(20, 1000.0, seconds, variant))
            for label, _ in variants:
                exporting = statistics.median(r[0] for r in runs[label])
                importing = statistics.median(r[1] for r in runs[label])
                print(f" bridge[{label}]  exporting {exporting:5.1f}  importing {importing:5.1f}  "
                      f"(medians of {repeats}; load average {os.getloadavg()[0]:.2f})", flush=True)
            return
        variants = [("bridge, per topic", lambda: bridge_cpu(20, 1000.0, seconds))]
        for linger in args.bundle_lingers.split(","):
            extra = ["--bundle"] + (["--linger", linger] if float(linger) else [])
            variants.append((" ".join(extra), lambda extra=extra: bridge_cpu(20, 1000.0, seconds, extra=extra)))
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
