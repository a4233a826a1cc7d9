"""The bridge against Zenoh's own Python pub/sub, on loopback, in the same run.

    python bench/bridge.py            # about half a minute on 2 cores
    python bench/bridge.py --quick

Workloads (medians of --repeats runs):

  bridge   a publisher process writes N packets into a topic under root A as fast as it
           can; two ``a0py bridge --reliable`` processes (roots A and B, TCP on
           127.0.0.1) carry them; this process reads them from root B. Rate: packets
           (or bytes) from the first packet read to the last.
  zenoh    a sender process puts N samples of the same size on a key with the block
           policy from its own Zenoh session (peer mode, TCP on 127.0.0.1); this
           process's session receives them (a callback counting). Same clock.

A script, not a test: it asserts nothing about speed. The targets: 64 B msgs/s and
1 MiB MB/s across the bridge at least 80 % of Zenoh's own.
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

from a0py import INIT_OLDEST, Publisher, SubscriberSync, Topic  # noqa: E402
from a0py.bridge.config import zenoh_config  # noqa: E402
from a0py.proto.topic import list_topics, unlink_topic  # noqa: E402

PUBLISH = """
import sys, time
from a0py import Publisher, Topic
n, size = int(sys.argv[1]), int(sys.argv[2])
payload = b"x" * size
with Publisher(Topic("bench/data", size="256M")) as pub:
    for _ in range(n):
        pub.pub(payload)
"""

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


def bridge_rate(n, size):
    tag = uuid.uuid4().hex[:8]
    a, b = f"shm:bbench{tag}a", f"shm:bbench{tag}b"
    ep = f"tcp/127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "a0py", "bridge", "--reliable", "--status-interval", "3600"]
    procs = [subprocess.Popen(cmd + ["--listen", ep, "bench/**"], env=env(a), stdout=subprocess.PIPE),
             subprocess.Popen(cmd + ["--connect", ep, "bench/**"], env=env(b), stdout=subprocess.PIPE)]
    try:
        for p in procs:
            p.stdout.readline()
        # the route: a probe until it crosses
        with Publisher(Topic("bench/probe", root=a)) as probe, \
                SubscriberSync(Topic("bench/probe", root=b), INIT_OLDEST) as seen:
            deadline = time.monotonic() + 20
            while seen.read() is None:
                probe.pub(b"p")
                if time.monotonic() > deadline:
                    raise SystemExit("the bridges did not link within 20 s")
                time.sleep(0.1)
        with SubscriberSync(Topic("bench/data", root=b, size="256M"), INIT_OLDEST) as sub:
            pub = subprocess.Popen([sys.executable, "-c", PUBLISH, str(n), str(size)], env=env(a))
            sub.read_blocking(timeout=30)
            t0 = time.perf_counter()
            got = 1
            while got < n:
                sub.read_blocking(timeout=30)
                got += 1
            elapsed = time.perf_counter() - t0
            pub.wait(timeout=30)
            return (n - 1) / elapsed, sub.missed
    finally:
        for p in procs:
            p.terminate()
            p.communicate(timeout=20)
        for root in (a, b):
            for name in list_topics(root):
                unlink_topic(Topic(name, root=root))


def zenoh_rate(n, size):
    ep = f"tcp/127.0.0.1:{free_port()}"
    done = threading.Event()
    times = []

    def on_sample(sample):
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
    return (n - 1) / (times[-1] - times[0]), 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    repeats = 1 if args.quick else args.repeats
    cases = [("64 B", 64, 5000 if args.quick else 50000), ("1 MiB", 1 << 20, 20 if args.quick else 200)]
    print(f"{'size':>6} {'path':>7} {'msgs/s':>10} {'MB/s':>9} {'missed':>7}")
    for label, size, n in cases:
        for path, fn in (("bridge", bridge_rate), ("zenoh", zenoh_rate)):
            runs = [fn(n, size) for _ in range(repeats)]
            rate = statistics.median(r for r, _ in runs)
            missed = max(m for _, m in runs)
            print(f"{label:>6} {path:>7} {rate:>10.0f} {rate * size / 1e6:>9.1f} {missed:>7}", flush=True)


if __name__ == "__main__":
    main()
