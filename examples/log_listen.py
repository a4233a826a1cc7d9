"""Print a topic's log messages at or above a level (pair it with log_write.py).

    python examples/log_listen.py                         # demo/node, WARN and above
    python examples/log_listen.py --level dbg --oldest    # everything, from the oldest kept
    python examples/log_listen.py --count 3               # stop after 3 messages

Levels: crit, err, warn, info, dbg (or critical, error, warning, debug).
"""

import argparse
import os
import sys
import threading

try:
    import a0py
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import a0py

from a0py.proto.log import format_line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topic", default="demo/node")
    ap.add_argument("--level", default="warn")
    ap.add_argument("--oldest", action="store_true", help="start with the oldest message kept")
    ap.add_argument("--count", type=int, default=0, help="stop after this many (0: never)")
    args = ap.parse_args()
    if args.count < 0:
        ap.error("--count must be 0 (never stop) or more")
    seen = [0]
    done = threading.Event()

    def show(pkt):
        # The listener runs until the `with` below closes it, so callbacks may come
        # after the count is reached: they print nothing.
        if done.is_set():
            return
        print(format_line(pkt), flush=True)
        seen[0] += 1
        if seen[0] == args.count:
            done.set()

    init = a0py.INIT_OLDEST if args.oldest else a0py.INIT_AWAIT_NEW
    try:
        with a0py.LogListener(args.topic, args.level, show, init=init):
            print(f"listening to {args.topic!r} at {args.level} and above", flush=True)
            done.wait()
    except a0py.ArgumentError as e:
        sys.exit(f"log_listen: {e}")
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
