"""RPC round trips between two processes, beside the pub/sub ping-pong they build on.

    python bench/rpc.py             # about half a minute on 2 cores
    python bench/rpc.py --quick

Workloads (64-byte payloads, server in a forked child, repeated --repeats times,
variants interleaved within a repeat; medians of the repeats' p50 and p99):

  pubsub    the floor: Publisher.pub + SubscriberSync.read_blocking on two topics;
  blocking  RpcClient.send_blocking (the client reads replies in its own thread;
            the server's handler runs on its dispatcher thread; each call writes a
            request, an accept and a reply);
  future    RpcClient.send(...).result() one at a time (replies routed by the
            client's dispatcher thread);
  pipelined throughput of 2000 send() futures in flight, then all results (us per call).

A script, not a test: it asserts nothing about speed.
"""

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(HERE))

import a0py
from a0py.proto import topic as tp

CTX = mp.get_context("fork")
PAYLOAD = b"x" * 64


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * len(xs) + 0.5) - 1))]


def server(name, ready, stop):
    srv = a0py.RpcServer(name, lambda req: req.reply(req.pkt.payload))
    ready.set()
    stop.wait()
    srv.close()


def echo(ping, pong, ready, stop):
    sub = a0py.SubscriberSync(ping)
    pub = a0py.Publisher(pong)
    ready.set()
    while not stop.is_set():
        try:
            pkt = sub.read_blocking(timeout=0.2)
        except a0py.A0TimeoutError:
            continue
        pub.pub(pkt.payload)


def timed(fn, n):
    out = []
    for _ in range(n):
        t = time.perf_counter_ns()
        fn()
        out.append(time.perf_counter_ns() - t)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    n = 300 if args.quick else 2000
    repeats = 2 if args.quick else args.repeats
    os.environ["A0PY_ROOT"] = f"shm:a0bench-rpc-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    name, ping, pong = "bench/rpc", "bench/ping", "bench/pong"
    stop = CTX.Event()
    ready = [CTX.Event(), CTX.Event()]
    procs = [CTX.Process(target=server, args=(name, ready[0], stop)),
             CTX.Process(target=echo, args=(ping, pong, ready[1], stop))]
    try:
        for p in procs:
            p.start()
        for r in ready:
            r.wait(30)
        client = a0py.RpcClient(name)
        pub, sub = a0py.Publisher(ping), a0py.SubscriberSync(pong)

        def pubsub_rt():
            pub.pub(PAYLOAD)
            sub.read_blocking(timeout=10)

        variants = {
            "pubsub": pubsub_rt,
            "blocking": lambda: client.send_blocking(PAYLOAD, timeout=10),
            "future": lambda: client.send(PAYLOAD, timeout=10).result(10),
        }
        for fn in variants.values():  # warm up
            timed(fn, 100)
        results = {k: [] for k in variants}
        pipelined = []
        for _ in range(repeats):
            for k, fn in variants.items():
                lat = timed(fn, n)
                results[k].append((percentile(lat, 50), percentile(lat, 99)))
            t = time.perf_counter()
            futures = [client.send(PAYLOAD, timeout=60) for _ in range(n)]
            for f in futures:
                f.result(60)
            pipelined.append((time.perf_counter() - t) / n * 1e6)
        print(f"{'workload':<10} {'p50 us':>8} {'p99 us':>8}   (median of {repeats} repeats x {n} calls)")
        for k, rs in results.items():
            p50 = statistics.median(r[0] for r in rs) / 1e3
            p99 = statistics.median(r[1] for r in rs) / 1e3
            print(f"{k:<10} {p50:8.1f} {p99:8.1f}")
        print(f"{'pipelined':<10} {statistics.median(pipelined):8.1f} us per call ({n} futures in flight)")
        client.close()
    finally:
        stop.set()
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
        for topic in tp.list_topics():
            tp.unlink_topic(topic)


if __name__ == "__main__":
    main()
