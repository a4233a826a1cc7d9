"""a0py demo: one publisher, two readers, one shared-memory arena.

    python examples/transport_demo.py                      # 5 s at 1000 frames/s
    python examples/transport_demo.py --seconds 10 --rate 2000 --size 256

What happens:

  1. This process creates a POSIX shared-memory arena (a ring of frames).
  2. Two reader processes open it by name and sleep until frames arrive
     (`Transport.read_next(timeout=...)`: a futex wait, no polling).
  3. A publisher process writes frames at a fixed rate; each carries a
     counter and the time it was written (`time.monotonic_ns()`, one clock
     for every process on the machine).
  4. Each reader prints, once a second, how many frames it got and how long
     they took from `write` to arriving in the reader (p50/p99 latency).
  5. The publisher writes a last "end" frame; everyone exits; the arena is
     unlinked. The publisher also holds the arena's deadman, so readers
     would notice at once if it died instead of waiting forever.
"""

import argparse
import multiprocessing as mp
import os
import signal
import struct
import sys
import time

try:
    import a0py
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import a0py

# Frame payload: counter, monotonic write time (ns), flags; then padding.
HEADER = struct.Struct("<QQI")
END = 1
CTX = mp.get_context("fork")


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q / 100 * len(sorted_values)))]


def say(line):
    """One write per line, so lines of different processes never interleave."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def publisher(arena_name, rate, seconds, size, started):
    arena = a0py.Arena.shm(arena_name)
    tr = a0py.Transport(arena)
    a0py.Deadman(arena).take()  # held until this process ends, however it ends
    padding = b"." * max(0, size - HEADER.size)
    period_ns = int(1e9 / rate)
    count = int(rate * seconds)
    started.set()
    next_ns = time.monotonic_ns()
    for counter in range(count):
        # Sleep to the next slot of a fixed schedule (no drift), then stamp.
        delay = next_ns - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        tr.write(HEADER.pack(counter, time.monotonic_ns(), 0) + padding)
        next_ns += period_ns
    tr.write(HEADER.pack(count, time.monotonic_ns(), END))
    arena.close()


def reader(name, arena_name, ready, results):
    arena = a0py.Arena.shm(arena_name)
    tr = a0py.Transport(arena)
    tr.spin = 0  # sleep at once: two cores are shared by three processes here
    publisher_alive = a0py.Deadman(arena)
    ready.set()

    total, lost, expected = 0, 0, 0
    all_latencies = []
    window, window_start = [], time.monotonic()
    second = 0
    while True:
        got = tr.read_next(timeout=0.5)
        now_ns = time.monotonic_ns()
        if got is None:
            if total and not publisher_alive.is_taken():
                say(f"[{name}] publisher is gone (deadman released): stopping")
                break
            continue
        _seq, data = got
        counter, sent_ns, flags = HEADER.unpack_from(data)
        if flags & END:
            break
        lost += counter - expected  # counters skipped: frames we never saw
        expected = counter + 1
        total += 1
        window.append((now_ns - sent_ns) / 1e3)
        elapsed = time.monotonic() - window_start
        if elapsed >= 1.0:
            second += 1
            window.sort()
            say(f"[{name}] second {second}: {len(window) / elapsed:7.0f} frames/s   latency "
                f"p50 {percentile(window, 50):6.1f} µs   p99 {percentile(window, 99):7.1f} µs")
            all_latencies.extend(window)
            window, window_start = [], time.monotonic()
    all_latencies.extend(window)
    all_latencies.sort()
    results.put({"name": name, "frames": total, "lost": lost,
                 "p50": percentile(all_latencies, 50), "p99": percentile(all_latencies, 99),
                 "max": all_latencies[-1] if all_latencies else float("nan")})
    arena.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description="a0py demo: a publisher and two readers over shared memory")
    ap.add_argument("--seconds", type=float, default=5.0, help="how long to publish (default 5)")
    ap.add_argument("--rate", type=float, default=1000.0, help="frames per second (default 1000)")
    ap.add_argument("--size", type=int, default=64, help="frame size in bytes (default 64)")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.rate <= 0 or args.size < HEADER.size:
        ap.error(f"--seconds and --rate must be > 0 and --size >= {HEADER.size}")

    arena_name = f"a0py-demo-{os.getpid()}"
    arena = a0py.Arena.shm(arena_name, 4 * 1024 * 1024)
    say(f"arena /{arena_name}: {arena.size // 1024} KiB of shared memory "
        f"(ls /dev/shm to see it while the demo runs)")
    say(f"publishing {args.size}-byte frames at {args.rate:g}/s for {args.seconds:g} s "
        f"to two reader processes\n")
    children = []
    try:
        results = CTX.Queue()
        for name in ("reader A", "reader B"):
            ready = CTX.Event()
            p = CTX.Process(target=reader, args=(name, arena_name, ready, results), daemon=True)
            p.start()
            children.append(p)
            if not ready.wait(10):
                raise RuntimeError(f"{name} did not start")
        started = CTX.Event()
        pub = CTX.Process(target=publisher,
                          args=(arena_name, args.rate, args.seconds, args.size, started), daemon=True)
        pub.start()
        children.append(pub)
        t0 = time.monotonic()
        pub.join(args.seconds + 30)
        wall = time.monotonic() - t0
        summaries = sorted((results.get(timeout=10) for _ in range(2)), key=lambda r: r["name"])
        for p in children:
            p.join(10)

        sent = int(args.rate * args.seconds)
        say("\nsummary")
        say(f"  publisher: {sent} frames in {wall:.2f} s ({sent / wall:.0f} frames/s)")
        for r in summaries:
            say(f"  {r['name']}: {r['frames']} frames, {r['lost']} lost, latency "
                f"p50 {r['p50']:.1f} µs, p99 {r['p99']:.1f} µs, max {r['max']:.1f} µs")
        with a0py.Transport(arena).lock() as t:
            say(f"  arena: holds frames {t.seq_low}..{t.seq_high} (once full, each write "
                f"evicts the oldest), high-water mark {t.high_water_mark // 1024} KiB")
        ok = all(r["frames"] == sent and r["lost"] == 0 for r in summaries)
        say("  every frame reached both readers" if ok else "  some frames were missed")
        return 0 if ok else 1
    except KeyboardInterrupt:
        say("\ninterrupted")
        return 130
    finally:
        for p in children:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join(5)
        arena.close()
        a0py.Arena.unlink_shm(arena_name)


if __name__ == "__main__":
    sys.exit(main())
