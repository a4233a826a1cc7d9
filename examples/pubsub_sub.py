"""Receive a topic's messages three ways (pair it with pubsub_pub.py).

    python examples/pubsub_sub.py                           # callback subscriber, new messages
    python examples/pubsub_sub.py --mode sync --init most_recent
    python examples/pubsub_sub.py --mode aio --count 20
    python examples/pubsub_sub.py --latest                  # "latest only": newest now, then skip ahead

Modes:
  callback  a0py.Subscriber(topic, callback): called on the process's one dispatcher
            thread (shared by every subscriber of the process), never under a lock;
  sync      a0py.SubscriberSync(topic): pull with read_blocking() / `for pkt in sub`;
  aio       `async for pkt in a0py.aio_sub(topic)`: the same packets in an event loop.

For each message it prints its number, the transport seq, how long it took from the
publisher's pub() to here (both read CLOCK_MONOTONIC) and how many packets were lost
to eviction before it (``pkt.missed``; 0 unless this reader falls behind).
"""

import argparse
import asyncio
import os
import sys
import threading
import time

try:
    import a0py
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import a0py


def show(pkt):
    msg = pkt.json()
    latency_us = (time.monotonic_ns() - msg["sent_ns"]) / 1000
    print(f"got n={msg['n']} seq={pkt.seq} latency={latency_us:.0f}us missed={pkt.missed} "
          f"from={pkt.headers.get('source')}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topic", default="demo/counter")
    ap.add_argument("--mode", choices=("callback", "sync", "aio"), default="callback")
    ap.add_argument("--init", choices=("oldest", "most_recent", "await_new"), default="await_new")
    ap.add_argument("--latest", action="store_true",
                    help="start with the newest message and always skip to the newest "
                         "(init most_recent, iter newest)")
    ap.add_argument("--count", type=int, default=0, help="stop after this many (0: never)")
    args = ap.parse_args()
    init, it = args.init, a0py.ITER_NEXT
    if args.latest:
        init, it = a0py.INIT_MOST_RECENT, a0py.ITER_NEWEST
    ready = f"subscribed to {args.topic!r} ({args.mode}, init={init}, iter={it})"

    try:
        if args.mode == "callback":
            done = threading.Event()
            seen = [0]

            def callback(pkt):
                show(pkt)
                seen[0] += 1
                if seen[0] == args.count:
                    done.set()

            with a0py.Subscriber(args.topic, callback, init=init, iter=it):
                print(ready, flush=True)
                done.wait()
        elif args.mode == "sync":
            with a0py.SubscriberSync(args.topic, init=init, iter=it) as sub:
                print(ready, flush=True)
                for n, pkt in enumerate(sub, 1):
                    show(pkt)
                    if n == args.count:
                        break
        else:
            async def run():
                n = 0
                packets = a0py.aio_sub(args.topic, init=init, iter=it)  # subscribed from here on
                print(ready, flush=True)
                async for pkt in packets:
                    show(pkt)
                    n += 1
                    if n == args.count:
                        break

            asyncio.run(run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
