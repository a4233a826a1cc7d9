"""Watch a topic's configuration (pair it with cfg_set.py).

    python examples/cfg_watch.py                      # topic demo/robot, until Ctrl-C
    python examples/cfg_watch.py --count 3            # stop after 3 versions

Prints the current version at once (if there is one), then each new one, as
written by any process. Also reads one value through a typed view.
"""

import argparse
import json
import os
import sys
import threading

try:
    import a0py
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import a0py


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topic", default="demo/robot")
    ap.add_argument("--count", type=int, default=0, help="stop after this many versions (0: never)")
    args = ap.parse_args()
    cfg = a0py.Cfg(args.topic)
    max_speed = cfg.view("/motor/max_speed", float, default=None)
    seen = [0]
    done = threading.Event()

    def on_cfg(pkt):
        print(f"version seq={pkt.seq}: {json.dumps(pkt.json(), sort_keys=True)} "
              f"(max_speed={max_speed.get()})", flush=True)
        seen[0] += 1
        if seen[0] == args.count:
            done.set()

    with a0py.CfgWatcher(args.topic, on_cfg):
        print(f"watching {args.topic!r}", flush=True)
        try:
            done.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
