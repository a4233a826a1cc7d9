"""Benchmark of the fact broker across processes (docs/performance.md, "Fact broker").

    python bench/broker.py                 # every workload, medians of 3 runs
    python bench/broker.py --runs 5 --json out.json
    python bench/broker.py --workload floor

1. **Claim-to-notification latency**: a claimer process claims ``tick(i, t_sent)`` (and
   retracts the previous tick in the same batch) 1000 times a second (sleeping between); a subscriber process
   subscribed to ``tick($i, $t)`` takes ``monotonic_ns() - t_sent`` in its callback. The
   path is claimer → request arena → broker (decode, index, join, encode) → the
   subscriber's arena → its reader thread → callback: two cross-process wake-ups.
2. **Claims per second with 100 live subscriptions**: 100 subscriptions in a subscriber
   process (70 single patterns, 30 two-part joins, one per kind of reading), a claimer
   that sends N distinct readings (each adds a row to one subscription's result), in
   batches of B claims per request (B = 1 and 100), then pings; claims/s is N over the
   time until the ping returns (every claim applied, every notification written). Also
   the engine alone, in one process (no IPC, no codec), for the bound.
   ``--workload claimer`` times the claimer's own part of that path (make the tick,
   ``batch()``, retract, claim, send), paced as there and back to back.
3. **The floor** (``--workload floor``): the same three processes and the same
   transports with nothing of the broker in between: a claimer writes 16-byte frames
   (its clock and a count) to a request arena as the client writes requests (no
   eviction), a relay process drains it as the broker does (the request queue's
   ``take``, which gives each batch's room back) and copies each frame into the
   subscriber's arena (``write_many``), whose reader thread takes the clock. Latency at
   the same rate as (1), and frames/s when the claimer writes one frame a request as fast
   as it can: what the machine and the transport allow before any decoding, indexing or
   joining, so the distance from the broker's figures to these is the broker's own cost.

4. **The collector** (``--workload gc``): the broker's work on one claim a request
   (parse the frame, decode, apply, take the changes, encode the notifications), in one
   process with no IPC, with the cyclic GC's threshold at CPython's 700, at
   ``GC_THRESHOLD`` and at four times that: CPU µs a claim, and the share of it spent
   collecting (``gc.callbacks``).

Every result line ends with the load average (1 min) when it was taken; the 2-core
machines here are shared, and the figures move with it. The latency line also gives the
CPU seconds per second that the broker and the subscriber spent at 1000 ticks a second,
and the broker's with one idle client: what the waits' spin costs (``--spin 0`` turns it
off: ``Broker(spin=0)``, ``BrokerClient(spin=0)``).

Targets: p50 below 50 µs; at least 100 k claims/s.
"""

import argparse
import gc
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import a0py
from a0py.broker import Broker, BrokerClient, Engine, wire
from a0py.broker.engine import CLAIM, RETRACT, SUBSCRIBE
from a0py.dataspace import Record, decode, encode, parse
from a0py.proto.queue import ArenaQueue


_SPIN_ENV = "A0PY_BENCH_BROKER_SPIN"


def _spin():
    """``spin=`` for Broker and BrokerClient when ``--spin`` was given (it reaches the
    spawned processes through the environment); nothing otherwise, so that the bench
    also runs against a build without the argument."""
    spin = os.environ.get(_SPIN_ENV)
    return {} if spin is None else {"spin": float(spin)}


def _broker_main(name, ready, gc_threshold):
    kw = _spin() if gc_threshold is None else {**_spin(), "gc_threshold": gc_threshold}
    b = Broker(name, **kw)
    b.start()
    ready.set()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


def _start_broker(name, gc_threshold=None):
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_broker_main, args=(name, ready, gc_threshold), daemon=True)
    proc.start()
    ready.wait(30)
    return proc


def _stop(proc, name):
    proc.kill()
    proc.join()
    wire.remove_request_arena(name)


# ---------------------------------------------------------------- latency


def _latency_subscriber(name, n, out, ready):
    import threading

    samples = []
    finished = threading.Event()

    def callback(result):
        now = time.monotonic_ns()
        for row in result:
            samples.append(now - row["t"])
            if row["i"] == n - 1:
                finished.set()

    with BrokerClient(name, **_spin()) as c:
        c.subscribe(parse("tick($i, $t)"), callback=callback).wait(30)
        samples.clear()
        cpu0 = time.process_time()
        ready.set()
        finished.wait(300)
        cpu = time.process_time() - cpu0
    out.put((samples, cpu))


def latency(name, broker_pid, n=5000, rate=1000.0):
    """Ticks the subscriber never saw (two in one drain of the broker: the retract of the
    first undoes its claim, so nobody is notified) are not samples; the count says how
    many were. Also the CPU seconds per second of the broker and of the subscriber
    (all its threads) while the ticks flow: what their waits' spinning costs."""
    ctx = mp.get_context("spawn")
    out, ready = ctx.Queue(), ctx.Event()
    sub = ctx.Process(target=_latency_subscriber, args=(name, n, out, ready))
    sub.start()
    ready.wait(60)
    period = 1.0 / rate
    broker_cpu0, t0 = _cpu_seconds(broker_pid), time.perf_counter()
    with BrokerClient(name, **_spin()) as c:
        prev = None
        next_t = time.perf_counter()
        for i in range(n):
            tick = Record("tick", i, time.monotonic_ns())
            with c.batch():
                if prev is not None:
                    c.retract(prev)
                c.claim(tick)
            prev = tick
            next_t += period
            delay = next_t - time.perf_counter()
            if delay > 0:
                time.sleep(delay)     # not a spin: on 2 cores it would starve the others
        samples, sub_cpu = out.get(timeout=300)
        wall = time.perf_counter() - t0
        broker_cpu = _cpu_seconds(broker_pid) - broker_cpu0
        c.retract(prev)
    sub.join(30)
    samples.sort()
    return {
        "p50_us": samples[len(samples) // 2] / 1e3,
        "p99_us": samples[int(len(samples) * 0.99)] / 1e3,
        "samples": len(samples),
        "sent": n,
        "broker_cpu_per_s": broker_cpu / wall,
        "subscriber_cpu_per_s": sub_cpu / wall,
    }


def idle_cpu(broker_pid, seconds=3.0):
    """CPU seconds per second of a broker with one idle client (nothing sent)."""
    c0, t0 = _cpu_seconds(broker_pid), time.perf_counter()
    time.sleep(seconds)
    return (_cpu_seconds(broker_pid) - c0) / (time.perf_counter() - t0)


def claimer_part(name, n=3000, rate=1000.0):
    """The claimer's own share of the latency: p50 µs of the latency workload's batch
    block (make the tick, retract the previous one, claim, send), timed in pieces, at
    ``rate`` a second (sleeping between, as the latency workload does) and back to back;
    the broker runs in its own process and answers nobody."""
    out = {}
    with BrokerClient(name, **_spin()) as c:
        for label, period in (("paced", 1.0 / rate), ("back_to_back", None)):
            pieces = [[] for _ in range(4)]
            prev = None
            for i in range(n):
                t0 = time.monotonic_ns()
                tick = Record("tick", i, t0)
                block = c.batch()
                block.__enter__()
                t1 = time.monotonic_ns()
                if prev is not None:
                    c.retract(prev)
                c.claim(tick)
                t2 = time.monotonic_ns()
                block.__exit__(None, None, None)
                t3 = time.monotonic_ns()
                for k, d in enumerate((t1 - t0, t2 - t1, t3 - t2, t3 - t0)):
                    pieces[k].append(d)
                prev = tick
                if period is not None:
                    time.sleep(period)
            out[label] = {k: statistics.median(xs) / 1e3 for k, xs in
                          zip(("tick_and_enter_us", "retract_claim_us", "send_us", "total_us"),
                              pieces)}
        c.retract(parse("_"))
    return out


# ---------------------------------------------------------------- throughput

KINDS = 100


def subscription_patterns():
    """100 subscriptions, one per kind of reading: 70 single patterns
    ``sensor<k>($room, $v)`` and 30 two-part joins
    ``sensor<k>($room, $v), setpoint<k>($room, $s)``."""
    subs = []
    for k in range(KINDS):
        if k < 70:
            subs.append((parse(f'sensor{k}($room, $v)'),))
        else:
            subs.append((parse(f'sensor{k}($room, $v)'), parse(f'setpoint{k}($room, $s)')))
    return subs


def facts(n, run):
    """``n`` distinct readings ``sensor<k>(room, v)`` spread over the 100 kinds and 500
    rooms; each one adds one row to exactly one subscription's result (a join's, for 30
    of the kinds, through the room's setpoint: :func:`setpoints`)."""
    return [Record(f"sensor{i % KINDS}", f"room{i % 500}", float(run * n + i)) for i in range(n)]


def setpoints():
    return [Record(f"setpoint{r % KINDS}", f"room{r}", 20) for r in range(500)]


def _throughput_subscriber(name, ready, stop):
    counts = [0]

    def callback(result):
        counts[0] += 1

    with BrokerClient(name, **_spin()) as c:
        subs = [c.subscribe(*ps, callback=callback) for ps in subscription_patterns()]
        for s in subs:
            s.wait(60)
        ready.set()
        stop.wait(600)


def _cpu_seconds(pid):
    """User + system CPU seconds of process ``pid`` so far (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def throughput(name, n, batch, run, broker_pid, subscriber_pid):
    """Claims/s of wall time, and the CPU microseconds per claim of the claimer (this
    process), the broker and the subscriber."""
    values = facts(n, run)
    pids = (os.getpid(), broker_pid, subscriber_pid)
    with BrokerClient(name, **_spin()) as c:
        c.claim(*setpoints())
        c.ping(30)
        time.sleep(0.2)                       # the subscriber is done with the setpoints
        cpu0 = [_cpu_seconds(p) for p in pids]
        t0 = time.perf_counter()
        for i in range(0, n, batch):
            c.claim(*values[i:i + batch])
        c.ping(120)
        elapsed = time.perf_counter() - t0
        time.sleep(0.2)                       # the subscriber's last callbacks
        cpu = [_cpu_seconds(p) - c0 for p, c0 in zip(pids, cpu0)]
        c.retract(parse("_"))
        c.ping(120)
    return {"claims_per_s": n / elapsed,
            **{f"{who}_cpu_us": 1e6 * t / n
               for who, t in zip(("claimer", "broker", "subscriber"), cpu)}}


def engine_throughput(n, batch):
    """The engine alone (no IPC, no codec): claims/s with the same 100 subscriptions."""
    e = Engine()
    for i, ps in enumerate(subscription_patterns()):
        e.apply("sub", [(SUBSCRIBE, i, ps)])
    e.apply("c", [(CLAIM, encode(v), v) for v in setpoints()])
    e.take_changes()
    values = facts(n, 0)
    items = [(CLAIM, encode(v), v) for v in values]
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        e.apply("c", items[i:i + batch])
        e.take_changes()
    return n / (time.perf_counter() - t0)


# ---------------------------------------------------------------- gc


def broker_work(threshold, n, rounds=3):
    """(CPU µs a claim, % of it in the collector) of the broker's work on one claim a
    request, in this process, with the GC's youngest threshold at ``threshold``."""
    spent = [0.0, 0.0, False]        # collector CPU, start of the current pass, timing

    def on_gc(phase, _info):
        if spent[2]:
            if phase == "start":
                spent[1] = time.process_time()
            else:
                spent[0] += time.process_time() - spent[1]

    saved = gc.get_threshold()
    gc.callbacks.append(on_gc)
    try:
        gc.collect()                 # engines of earlier runs (they hold cycles)
        gc.set_threshold(threshold, *saved[1:])
        e = Engine()
        for i, ps in enumerate(subscription_patterns()):
            e.apply("sub", [(SUBSCRIBE, i, ps)])
        e.apply("c", [(CLAIM, encode(v), v) for v in setpoints()])
        e.take_changes()
        total = 0.0
        for r in range(rounds):
            frames = [wire.request_frames_of(wire.REQ_BATCH, i + 1, "claimer", wire.IT_CLAIM,
                                             [encode(v)])[0]
                      for i, v in enumerate(facts(n, r))]
            spent[2] = True
            t0 = time.process_time()
            for f in frames:
                _kind, _flags, _req, source, items = wire.parse_request(f)
                e.apply(source, [(CLAIM, p, decode(p)) for _op, p in items])
                for change in e.take_changes():
                    rows, _size = wire.row_items(wire.IT_ADD, change.added)
                    wire.notify_frames(change.sub_id, change.full, rows)
            total += time.process_time() - t0
            spent[2] = False
            e.apply("c", [(RETRACT, parse(f"sensor{k}(_, _)")) for k in range(KINDS)])
            e.take_changes()
    finally:
        gc.callbacks.remove(on_gc)
        gc.set_threshold(*saved)
    return 1e6 * total / (n * rounds), 100 * spent[0] / total


# ---------------------------------------------------------------- floor

FLOOR_END = b"end"


def _floor_queue(requests, size=None):
    """The request arena as the broker and its clients use it: a backpressured queue."""
    return ArenaQueue(("bench-floor", requests), a0py.Arena.shm, requests, size)


def _floor_relay(requests, subscriber):
    """The broker's loop with nothing in it: take batches from the request queue (which
    gives their room back, as the broker's does) and copy every frame to the
    subscriber's arena."""
    queue = _floor_queue(requests)
    queue.open_reader()
    out = a0py.Transport(a0py.Arena.shm(subscriber))
    while True:
        frames = queue.take(4096, timeout=None)
        out.write_many([data for _seq, data in frames])
        if frames[-1][1] == FLOOR_END:
            return


def _floor_subscriber(arena_name, out, ready):
    """Reads on a thread, as the client's reader does: one sample per frame (the claimer's
    clock in the first 8 bytes), and the clock when the end marker came."""
    import threading

    result = {}

    def reader():
        tr = a0py.Transport(a0py.Arena.shm(arena_name))
        samples = []
        while True:
            frame = tr.read_next(timeout=None)
            now = time.monotonic_ns()
            data = frame[1]
            if data == FLOOR_END:
                break
            samples.append(now - int.from_bytes(data[:8], "little"))
        result["samples"] = samples
        result["end_ns"] = now

    t = threading.Thread(target=reader)
    t.start()
    ready.set()
    t.join()
    out.put((result["samples"], result["end_ns"]))


def floor(n, rate):
    """One floor run: ``n`` frames at ``rate`` a second (latency), or as fast as the
    claimer writes them when ``rate`` is None (throughput)."""
    tag = f"a0py.benchfloor.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    requests, subscriber = tag + ".req", tag + ".sub"
    queue = _floor_queue(requests, wire.REQUEST_ARENA_SIZE)
    queue.arena  # noqa: B018 - creates the request arena before the relay attaches
    a0py.Arena.shm(subscriber, wire.CLIENT_ARENA_SIZE).close()
    ctx = mp.get_context("spawn")
    out, ready = ctx.Queue(), ctx.Event()
    sub = ctx.Process(target=_floor_subscriber, args=(subscriber, out, ready))
    relay = ctx.Process(target=_floor_relay, args=(requests, subscriber))
    try:
        sub.start()
        relay.start()
        ready.wait(60)
        while not queue.reader_alive():
            time.sleep(0.01)
        time.sleep(0.2)                      # both are asleep on their arenas
        period = None if rate is None else 1.0 / rate
        next_t = time.perf_counter()
        t0 = time.monotonic_ns()
        for i in range(n):
            data = time.monotonic_ns().to_bytes(8, "little") + i.to_bytes(8, "little")
            queue.put(data)
            if period is not None:
                next_t += period
                delay = next_t - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
        queue.put(FLOOR_END)
        samples, end_ns = out.get(timeout=300)
        elapsed = (end_ns - t0) / 1e9         # first write to the end marker's arrival
        count = len(samples)
        relay.join(30)
        sub.join(30)
    finally:
        for p in (relay, sub):
            if p.is_alive():
                p.kill()
        a0py.Arena.unlink_shm(requests)
        a0py.Arena.unlink_shm(subscriber)
    samples.sort()
    return {
        "p50_us": samples[len(samples) // 2] / 1e3,
        "p99_us": samples[int(len(samples) * 0.99)] / 1e3,
        "frames_per_s": count / elapsed,
        "seen": count,
        "sent": n,
    }


def load():
    """The 1-minute load average, as the result lines show it."""
    return os.getloadavg()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=50000, help="claims per throughput run")
    ap.add_argument("--samples", type=int, default=5000, help="latency samples per run")
    ap.add_argument("--workload", choices=["all", "latency", "claimer", "throughput", "engine", "floor",
                                           "gc"],
                    default="all")
    ap.add_argument("--gc-threshold", type=int, default=None,
                    help="the broker's gc_threshold (default: Broker's own, GC_THRESHOLD; "
                         "700 is CPython's)")
    ap.add_argument("--spin", type=float, default=None,
                    help="Broker(spin=) and BrokerClient(spin=) in seconds (default: theirs; "
                         "0 never spins)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.spin is not None:
        os.environ[_SPIN_ENV] = repr(args.spin)
    todo = {"latency", "throughput", "engine", "floor"} if args.workload == "all" else {args.workload}
    # (gc runs only when asked: it measures one setting, not the broker as it is)

    name = f"bench-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    report = {"machine": f"{os.cpu_count()} cpus", "runs": args.runs, "load_before": os.getloadavg()}
    print(f"{os.cpu_count()} cpus, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
          flush=True)
    if todo & {"latency", "throughput", "claimer"}:
        proc = _start_broker(name, args.gc_threshold)
        try:
            if "latency" in todo:
                lat = [latency(name, proc.pid, args.samples) for _ in range(args.runs)]
                med = statistics.median
                report["latency"] = {
                    "p50_us": med(r["p50_us"] for r in lat),
                    "p99_us": med(r["p99_us"] for r in lat),
                    "broker_cpu_per_s": med(r["broker_cpu_per_s"] for r in lat),
                    "subscriber_cpu_per_s": med(r["subscriber_cpu_per_s"] for r in lat),
                    "runs": lat,
                }
                with BrokerClient(name, **_spin()) as idle:
                    idle.ping()
                    report["broker_idle_cpu_per_s"] = idle_cpu(proc.pid)
                L = report["latency"]
                p50s = ", ".join(f"{r['p50_us']:.1f}" for r in lat)
                print(f"claim -> notification: p50 {L['p50_us']:.1f} us "
                      f"(runs {p50s}), "
                      f"p99 {L['p99_us']:.1f} us (median of {args.runs} runs; "
                      f"{sum(r['samples'] for r in lat)} of {sum(r['sent'] for r in lat)} ticks "
                      f"seen); CPU s per s at 1000 ticks/s: broker {L['broker_cpu_per_s']:.2f}, "
                      f"subscriber {L['subscriber_cpu_per_s']:.2f}; broker idle "
                      f"{report['broker_idle_cpu_per_s']:.3f}; spin "
                      f"{_spin().get('spin', 'default')}; load {load():.2f}", flush=True)
            if "claimer" in todo:
                runs = [claimer_part(name) for _ in range(args.runs)]
                report["claimer"] = runs
                for label in ("paced", "back_to_back"):
                    m = {k: statistics.median(r[label][k] for r in runs) for k in runs[0][label]}
                    print(f"claimer's part, {label.replace('_', ' ')}: {m['total_us']:.1f} us p50 "
                          f"(tick + batch() {m['tick_and_enter_us']:.1f}, retract + claim "
                          f"{m['retract_claim_us']:.1f}, send {m['send_us']:.1f}); "
                          f"load {load():.2f}", flush=True)
            if "throughput" in todo:
                ctx = mp.get_context("spawn")
                ready, stop = ctx.Event(), ctx.Event()
                sub = ctx.Process(target=_throughput_subscriber, args=(name, ready, stop))
                sub.start()
                ready.wait(120)
                for batch in (1, 100):
                    runs = [throughput(name, args.n, batch, r, proc.pid, sub.pid)
                            for r in range(args.runs)]
                    rates = [r["claims_per_s"] for r in runs]
                    cpu = {who: statistics.median(r[f"{who}_cpu_us"] for r in runs)
                           for who in ("claimer", "broker", "subscriber")}
                    report[f"claims_per_s_batch{batch}"] = statistics.median(rates)
                    report[f"claims_per_broker_cpu_s_batch{batch}"] = 1e6 / max(cpu["broker"], 1e-3)
                    report[f"cpu_us_per_claim_batch{batch}"] = cpu
                    report[f"throughput_runs_batch{batch}"] = runs
                    print(f"claims/s, 100 subscriptions, {batch} claim(s) a request: "
                          f"{statistics.median(rates):,.0f} (runs: {', '.join(f'{r:,.0f}' for r in rates)}); "
                          f"CPU us a claim: claimer {cpu['claimer']:.1f}, broker {cpu['broker']:.1f}, "
                          f"subscriber {cpu['subscriber']:.1f} (broker: "
                          f"{1e6 / max(cpu['broker'], 1e-3):,.0f} claims per CPU second); "
                          f"load {load():.2f}", flush=True)
                stop.set()
                sub.join(30)
        finally:
            _stop(proc, name)
    if "engine" in todo:
        for batch in (1, 100):
            rates = [engine_throughput(args.n, batch) for _ in range(args.runs)]
            report[f"engine_claims_per_s_batch{batch}"] = statistics.median(rates)
            print(f"engine alone (no IPC, no codec), batch {batch}: "
                  f"{statistics.median(rates):,.0f} claims/s; load {load():.2f}", flush=True)
    if "floor" in todo:
        lat = [floor(args.samples, 1000.0) for _ in range(args.runs)]
        thr = [floor(args.n, None) for _ in range(args.runs)]
        report["floor"] = {
            "p50_us": statistics.median(r["p50_us"] for r in lat),
            "p99_us": statistics.median(r["p99_us"] for r in lat),
            "frames_per_s": statistics.median(r["frames_per_s"] for r in thr),
            "latency_runs": lat,
            "throughput_runs": thr,
        }
        f = report["floor"]
        runs = ", ".join(f"{r['frames_per_s']:,.0f}" for r in thr)
        print(f"floor (claimer -> relay -> subscriber, same transports, no broker): "
              f"p50 {f['p50_us']:.1f} us, p99 {f['p99_us']:.1f} us; "
              f"{f['frames_per_s']:,.0f} frames/s one a request "
              f"(runs: {runs}); load {load():.2f}",
              flush=True)
    if "gc" in todo:
        from a0py.broker.server import GC_THRESHOLD

        report["gc"] = {}
        for threshold in (700, GC_THRESHOLD, 4 * GC_THRESHOLD):
            runs = [broker_work(threshold, args.n) for _ in range(args.runs)]
            us = statistics.median(r[0] for r in runs)
            share = statistics.median(r[1] for r in runs)
            report["gc"][threshold] = {"us_per_claim": us, "gc_percent": share, "runs": runs}
            print(f"broker's work in one process, 1 claim a request, gc threshold {threshold}: "
                  f"{us:.2f} us a claim, {share:.1f} % of it collecting; load {load():.2f}",
                  flush=True)
    report["load_after"] = os.getloadavg()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in report['load_after'])}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)


if __name__ == "__main__":
    main()
