"""Write log messages to a topic two ways (pair it with log_listen.py).

    python examples/log_write.py                     # topic demo/node
    python examples/log_write.py --topic robot/arm

First with a0py.Logger (``crit``, ``err``, ``warn``, ``info``, ``dbg``), then through
Python's logging with a0py.LogHandler, so existing ``logging`` calls reach the topic
with their logger name, file and line as headers.
"""

import argparse
import logging
import os
import sys

try:
    import a0py
except ImportError:  # run from a source checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import a0py


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topic", default="demo/node")
    args = ap.parse_args()

    log = a0py.Logger(args.topic)
    log.dbg("starting up")
    log.info("sensors online")
    log.warn("battery at 20%")
    log.err("arm joint 3 did not answer")
    log.crit("emergency stop")

    logger = logging.getLogger("demo.planner")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(a0py.LogHandler(args.topic))
    logger.info("planning a path of %d waypoints", 12)
    logger.warning("path passes near an obstacle")
    print(f"wrote 7 messages to {args.topic!r}", flush=True)


if __name__ == "__main__":
    main()
