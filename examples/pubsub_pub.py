"""Publish JSON messages on a topic at a fixed rate (pair it with pubsub_sub.py).

    python examples/pubsub_pub.py                          # topic demo/counter, 10 Hz, forever
    python examples/pubsub_pub.py --topic robot/odom --rate 100 --count 500

Each message is ``{"n": N, "sent_ns": <CLOCK_MONOTONIC ns>}`` with a header
``source: pubsub_pub``; every packet also carries the standard headers (times, writer
id, writer seq, transport seq). Start it before or after the subscriber, stop and
restart it (even with kill -9): the topic and its subscribers carry on.

The topic lives under ``A0PY_ROOT`` (shared memory ``/dev/shm/a0py.*`` by default);
``--cleanup`` removes it when done.
"""

import argparse
import os
import sys
import time

try:
    import a0py
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import a0py


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topic", default="demo/counter")
    ap.add_argument("--rate", type=float, default=10.0, help="messages per second")
    ap.add_argument("--count", type=int, default=0, help="stop after this many (0: never)")
    ap.add_argument("--cleanup", action="store_true", help="remove the topic at the end")
    args = ap.parse_args()

    pub = a0py.Publisher(args.topic)
    print(f"publishing on {args.topic!r} ({pub.arena.name}) as writer {pub.writer_id}", flush=True)
    period = 1.0 / args.rate
    next_t = time.monotonic()
    n = 0
    try:
        while args.count == 0 or n < args.count:
            seq = pub.pub_json({"n": n, "sent_ns": time.monotonic_ns()}, headers={"source": "pubsub_pub"})
            if n % max(1, int(args.rate)) == 0:
                print(f"sent n={n} (seq {seq})", flush=True)
            n += 1
            next_t += period
            time.sleep(max(0.0, next_t - time.monotonic()))
    except KeyboardInterrupt:
        pass
    finally:
        print(f"sent {n} messages", flush=True)
        if args.cleanup:
            a0py.Topic(args.topic).unlink()


if __name__ == "__main__":
    main()
