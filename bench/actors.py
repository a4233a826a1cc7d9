"""Actor benchmarks: ordered-channel throughput, reordering overhead, scatter-gather latency.

    .venv/bin/python bench/actors.py [--quick] [--repeats 5] [--only send ...]

Every figure is the median (and where it says so, p99) of ``--repeats`` runs; the machines
are noisy (see docs/performance.md, "Method"), so compare figures from one run of this script only.

1. Messages/s through an ordered channel (labeller -> reordering proxy -> delegate):
   the bare objects called directly (CPU time of the calling thread); as thread actors in one process; with the proxy in
   another process behind its arena mailbox. Plain actor hops without ordering are the
   baselines.
2. Reordering overhead: ns per message (thread CPU time) in ``OrderedProxy.handle`` when
   0, 1, 10 or 50 % of the messages arrive out of order (disjoint pairs of labels up to 8
   places apart swapped), the cases interleaved run by run.
3. Scatter-gather completion time for 100 recipients, in-process and spread over 4
   processes (median and p99 over many gathers).
4. The arena mailbox's send path: ns per ``ArenaRef.send`` of a small message into a
   mailbox with room (thread CPU time), against ``Transport.write`` of the same pickled
   bytes (the floor: one locked copy) and ``pickle.dumps`` alone, the cases interleaved
   run by run.
"""

import argparse
import os
import pickle
import random
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import a0py
from a0py.actor import (
    ActorSystem,
    ArenaMailbox,
    ArenaRef,
    Labeller,
    OrderedProxy,
    scatter_gather,
    spawn_process,
)
from a0py.actor.arena import arena_name


def median(xs):
    return statistics.median(xs)


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))]


# -- 1. ordered-channel throughput ------------------------------------------------------

def direct_ordered(n):
    count = [0]

    def delegate(_m):
        count[0] += 1

    chain = Labeller(OrderedProxy(delegate))
    t = time.thread_time()
    for i in range(n):
        chain(i)
    elapsed = time.thread_time() - t
    assert count[0] == n
    return n / elapsed


def _counting(n, done):
    count = [0]

    def delegate(_m):
        count[0] += 1
        if count[0] == n:
            done.set()
    return delegate


def inprocess(n, ordered):
    done = threading.Event()
    with ActorSystem() as system:
        delegate = _counting(n, done)
        if ordered:
            proxy = system.spawn(OrderedProxy(delegate))
            entry = system.spawn(Labeller(proxy))
        else:
            sink = system.spawn(delegate)
            entry = system.spawn(sink)  # one forwarding hop, like the labeller
        t = time.perf_counter()
        for i in range(n):
            entry.send(i)
        assert done.wait(120)
        return n / (time.perf_counter() - t)


class Sink:
    """Child-process delegate: reports to ``report_to`` once ``n`` messages arrived."""

    def __init__(self, n, report_to):
        self.n = n
        self.count = 0
        self.report_to = ArenaRef(report_to)

    def __call__(self, _message):
        self.count += 1
        if self.count == self.n:
            self.report_to.send("done")


def ordered_sink(n, report_to):
    return OrderedProxy(Sink(n, report_to))


def crossprocess(n, ordered, tag):
    done = threading.Event()
    with ActorSystem() as system:
        system.spawn(lambda _m: done.set(), name=f"{tag}-report", arena=True)
        factory = ordered_sink if ordered else Sink
        with spawn_process({f"{tag}-sink": (factory, (n, f"{tag}-report"))},
                           arena_size=1 << 22) as node:
            sink = node[f"{tag}-sink"]
            send = Labeller(sink).handle if ordered else sink.send
            t = time.perf_counter()
            for i in range(n):
                send(i)
            assert done.wait(120)
            return n / (time.perf_counter() - t)


# -- 2. reordering overhead --------------------------------------------------------------

def displaced(n, fraction, rng, max_shift=8):
    """Labels 0..n-1 with ``fraction`` of them out of place: disjoint pairs of labels at
    most ``max_shift`` apart are swapped until that fraction is reached."""
    order = list(range(n))
    touched = bytearray(n)
    target = int(n * fraction)
    moved = 0
    for i in rng.sample(range(n), n):
        if moved >= target:
            break
        j = i + rng.randint(1, max_shift)
        if j < n and not touched[i] and not touched[j]:
            order[i], order[j] = order[j], order[i]
            touched[i] = touched[j] = 1
            moved += 2
    return order


def reorder_cost(order):
    sink = []
    proxy = OrderedProxy(sink.append)
    items = [(label, label) for label in order]
    handle = proxy.handle
    t = time.thread_time()     # CPU time of this thread: robust to a loaded machine
    for item in items:
        handle(item)
    elapsed = time.thread_time() - t
    assert sink == sorted(order)
    out_of_order = sum(1 for k, label in enumerate(order) if label != k)
    return elapsed / len(order) * 1e9, out_of_order / len(order)


# -- 3. scatter-gather ----------------------------------------------------------------

class Responder:
    def __call__(self, request):
        request.reply(request.body)


def gather_times(system, refs, rounds):
    times = []
    for k in range(rounds):
        t = time.perf_counter()
        result = scatter_gather(system, k, refs, timeout=10)
        times.append(time.perf_counter() - t)
        assert result.complete, result.missing
    return times


# -- 4. the send path -------------------------------------------------------------------

def send_costs(name, n):
    """ns per message for (pickle.dumps, Transport.write of those bytes, ArenaRef.send)
    into the mailbox ``name`` (no reader; emptied before each case, so nothing waits)."""
    message = ("reading", 12345, 2.5)
    data = pickle.dumps(message, protocol=5)
    mailbox_arena = a0py.Arena.shm(arena_name(name))
    transport = a0py.Transport(mailbox_arena)
    ref = ArenaRef(name)

    def empty():
        with transport.lock() as t:
            t.clear()

    def run(fn, arg):
        empty()
        t = time.thread_time()    # CPU time of this thread: nothing here waits
        for _ in range(n):
            fn(arg)
        return (time.thread_time() - t) / n * 1e9

    dumps = run(lambda m: pickle.dumps(m, protocol=5), message)
    write = run(transport.write, data)
    send = run(ref.send, message)
    empty()
    mailbox_arena.close()
    return dumps, write, send


def bench_ordered(n, n_cross, reps, tag):
    print("\n## ordered channel: messages/s")
    rows = [
        ("labeller+proxy objects, direct calls", lambda: direct_ordered(n)),
        ("thread actors, plain hop (baseline)", lambda: inprocess(n, ordered=False)),
        ("thread actors, labeller -> proxy", lambda: inprocess(n, ordered=True)),
        ("cross-process arena mailbox, plain (baseline)",
         lambda: crossprocess(n_cross, False, f"{tag}-p")),
        ("cross-process, labeller -> arena -> proxy",
         lambda: crossprocess(n_cross, True, f"{tag}-o")),
    ]
    for name, fn in rows:
        runs = [fn() for _ in range(reps)]
        print(f"  {name:<48} {median(runs):>12,.0f}  (min {min(runs):,.0f}, max {max(runs):,.0f})")


def bench_reorder(n, reps):
    print("\n## reordering overhead: ns per message in OrderedProxy.handle")
    rng = random.Random(1)
    orders = {f: displaced(n, f, rng) for f in (0.0, 0.01, 0.10, 0.50)}
    reorder_cost(orders[0.0])  # warm-up
    costs = {f: [] for f in orders}
    for _ in range(reps):      # interleaved, so drifting machine load hits every case alike
        for f, order in orders.items():
            costs[f].append(reorder_cost(order))
    base = median(c[0] for c in costs[0.0])
    for runs in costs.values():
        ns = median(c[0] for c in runs)
        print(f"  {runs[0][1]:4.0%} out of order: {ns:7.0f} ns/msg  ({ns / base:4.2f}x in order)")


def bench_send(n, reps, tag):
    print("\n## arena mailbox send path: ns per message (a 3-tuple, pickled to "
          f"{len(pickle.dumps(('reading', 12345, 2.5), protocol=5))} bytes)")
    mailbox = ArenaMailbox(f"{tag}-send", size=1 << 24)
    try:
        send_costs(f"{tag}-send", 2000)  # warm-up
        runs = [send_costs(f"{tag}-send", n) for _ in range(reps)]
    finally:
        mailbox.release()
    dumps, write, send = (median(r[k] for r in runs) for k in range(3))
    print(f"  pickle.dumps alone:                 {dumps:7.0f}")
    print(f"  Transport.write of the bytes:       {write:7.0f}  (1.00x)")
    print(f"  ArenaRef.send (pickle + send path): {send:7.0f}  ({send / write:4.2f}x write)")
    print(f"  ArenaRef.send less pickling:        {send - dumps:7.0f}  "
          f"({(send - dumps) / write:4.2f}x write)")


def bench_gather(rounds, reps, tag):
    print("\n## scatter-gather, 100 recipients: completion time (ms)")
    with ActorSystem() as system:
        local = [system.spawn(Responder(), name=f"{tag}-l{i}") for i in range(100)]
        gather_times(system, local, 3)
        times = [t for _ in range(reps) for t in gather_times(system, local, rounds)]
        print(f"  in-process thread actors:      median {median(times) * 1e3:7.2f}  "
              f"p99 {p99(times) * 1e3:7.2f}  ({len(times)} gathers)")
        nodes = [spawn_process({f"{tag}-r{k}-{i}": Responder for i in range(25)},
                               arena_size=1 << 16) for k in range(4)]
        try:
            remote = [ref for node in nodes for ref in node.refs.values()]
            gather_times(system, remote, 3)
            times = [t for _ in range(reps) for t in gather_times(system, remote, rounds)]
            print(f"  4 processes x 25 arena actors: median {median(times) * 1e3:7.2f}  "
                  f"p99 {p99(times) * 1e3:7.2f}  ({len(times)} gathers)")
        finally:
            for node in nodes:
                node.close()


SECTIONS = ("ordered", "reorder", "send", "gather")


def main(argv=None):
    parser = argparse.ArgumentParser(description="a0py actor benchmarks")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--only", choices=SECTIONS, action="append",
                        help="run only this section (repeatable; default: all)")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else 100_000
    n_cross = 10_000 if args.quick else 50_000
    rounds = 20 if args.quick else 100
    tag = f"bench{os.getpid()}"
    reps = args.repeats
    only = set(args.only or SECTIONS)

    print(f"# a0py actor benchmarks (pid {os.getpid()}, {os.cpu_count()} CPUs, "
          f"median of {reps} runs)")
    if "ordered" in only:
        bench_ordered(n, n_cross, reps, tag)
    if "reorder" in only:
        bench_reorder(n, reps)
    if "send" in only:
        bench_send(n, reps, tag)
    if "gather" in only:
        bench_gather(rounds, reps, tag)


if __name__ == "__main__":
    main()
