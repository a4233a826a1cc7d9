"""CPU used by a process holding idle subscribers (target: < 1 % of a CPU for 100).

    python bench/pubsub_idle.py                 # 100 subscribers, 10 s, both dispatchers
    python bench/pubsub_idle.py --subs 200 --topics 50 --seconds 20

A fresh interpreter (one per dispatcher kind: futex_waitv, and the polling fallback
forced with A0PY_MULTIWAIT=poll) makes the subscribers (callback ones, plus the same
number of asyncio ones in one event loop when --aio), lets them settle, then measures
its own CPU time (user + system, every thread) over --seconds of idleness and reports
it as a percentage of one CPU, with its thread count. Nothing is published meanwhile.

A script, not a test: it asserts nothing.
"""

import argparse
import os
import subprocess
import sys
import textwrap
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

CHILD = """
import asyncio, os, resource, sys, threading, time
import a0py
from a0py.proto import topic as tp

subs_n, topics_n, seconds, aio = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
topics = [f"idle/t{i}" for i in range(topics_n)]
subs = [a0py.Subscriber(topics[i % topics_n], lambda pkt: None) for i in range(subs_n)]

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

async def idle_aio():
    async def one(t):
        async for _ in a0py.aio_sub(t):
            pass
    tasks = [asyncio.ensure_future(one(topics[i % topics_n])) for i in range(subs_n)]
    await asyncio.sleep(0.5)
    c0, t0 = cpu(), time.monotonic()
    await asyncio.sleep(seconds)
    result = (cpu() - c0, time.monotonic() - t0)
    for t in tasks:
        t.cancel()
    return result

time.sleep(0.5)  # let the dispatcher settle
if aio:
    used, wall = asyncio.run(idle_aio())
else:
    c0, t0 = cpu(), time.monotonic()
    time.sleep(seconds)
    used, wall = cpu() - c0, time.monotonic() - t0
print(f"{100 * used / wall:.3f} {threading.active_count()} {a0py._core.multiwait_mode()}")
for s in subs:
    s.close()
for t in topics:
    tp.unlink_topic(t)
"""


def run(subs, topics, seconds, aio, mode):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               A0PY_ROOT=f"shm:a0bench-idle-{uuid.uuid4().hex[:8]}", A0PY_ARENA_SIZE="64k",
               A0PY_MULTIWAIT=mode)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), str(subs), str(topics),
                          str(seconds), "1" if aio else "0"],
                         env=env, capture_output=True, text=True, check=True)
    pct, threads, used_mode = out.stdout.split()
    return float(pct), int(threads), used_mode


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--subs", type=int, default=100)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--aio", action="store_true", help="also asyncio subscribers (aio_sub)")
    args = ap.parse_args()
    print(f"# idle process: {args.subs} subscribers on {args.topics} topics, {args.seconds:g} s, "
          f"load {os.getloadavg()[0]:.2f}\n")
    print("| dispatcher | subscribers | CPU (% of one core) | threads in the process |")
    print("|---|---|---|---|")
    kinds = [(False, "callback")] + ([(True, "callback + asyncio")] if args.aio else [])
    for mode in ("waitv", "poll"):
        for aio, what in kinds:
            pct, threads, used = run(args.subs, args.topics, args.seconds, aio, mode)
            print(f"| {used} | {args.subs} {what} | {pct:.3f} % | {threads} |")


if __name__ == "__main__":
    main()
