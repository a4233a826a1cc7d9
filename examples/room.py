"""A room of processes sharing facts through the a0py fact broker.

    python examples/room.py                 # a few seconds
    python examples/room.py --seconds 10

What happens:

  1. This process runs a broker (``a0py.broker.Broker``) named ``room-demo``.
  2. Two **sensor** processes (kitchen, hall) each claim the room's setpoint once and a
     temperature reading ``temp(room, t)`` every 100 ms, replacing the previous reading
     in one atomic batch (retract the old, claim the new), so nobody ever sees the room
     without a reading. The kitchen warms up; the hall stays put.
  3. A **rule** process subscribes to the join ``temp($room, $t), setpoint($room, $s)``:
     on every change it gets the whole result, one row per room, and claims
     ``alert(room, "too warm", t)`` for each room more than 2 degrees above its
     setpoint, retracting the alerts that no longer hold.
  4. A **display** process subscribes to ``alert($room, $what, $t)`` and prints each
     change. It also prints the ``subscription(...)`` facts: who listens to what.
  5. At the end the sensors exit; the broker sees them go (their deadmen are released),
     retracts their readings, the rule's join empties and it retracts its alerts, and
     the display prints the empty result. Then everyone exits.
"""

import argparse
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from a0py.broker import Broker, BrokerClient  # noqa: E402
from a0py.broker.wire import remove_request_arena  # noqa: E402
from a0py.dataspace import Record, format_term  # noqa: E402

BROKER = "room-demo"


def sensor(room, start, slope, setpoint, seconds):
    with BrokerClient(BROKER, client=f"sensor-{room}") as c:
        c.claim(Record("setpoint", room, setpoint))
        reading = None
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            t = round(start + slope * (time.monotonic() - t0), 1)
            new = Record("temp", room, t)
            if new != reading:
                with c.batch():          # one atomic change: never a room without reading
                    if reading is not None:
                        c.retract(reading)
                    c.claim(new)
                reading = new
            time.sleep(0.1)
    # leaving the with block (or dying) retracts the claims


def rule(ready, stop):
    with BrokerClient(BROKER, client="rule") as c:
        alerts = {}

        def on_rooms(rows):
            # rows: [{"room": ..., "s": ..., "t": ...}], sorted; the whole current join.
            want = {r["room"]: Record("alert", r["room"], "too warm", r["t"])
                    for r in rows if r["t"] > r["s"] + 2}
            with c.batch():
                for room, old in list(alerts.items()):
                    if want.get(room) != old:
                        c.retract(old)
                        del alerts[room]
                for room, new in want.items():
                    if room not in alerts:
                        c.claim(new)
                        alerts[room] = new

        c.subscribe('temp($room, $t)', 'setpoint($room, $s)', callback=on_rooms).wait()
        ready.set()
        stop.wait(60)


def display(ready, timeout):
    """Prints each change of the alerts; ends once alerts came and all went again."""
    import threading

    seen_alert, finished = threading.Event(), threading.Event()
    with BrokerClient(BROKER, client="display") as c:
        def show(rows):
            text = ", ".join(f"{r['room']} {r['t']}" for r in rows) or "none"
            print(f"  display: alerts now: {text}", flush=True)
            if rows:
                seen_alert.set()
            elif seen_alert.is_set():
                finished.set()

        c.subscribe('alert($room, $what, $t)', callback=show).wait()
        for fact in c.facts('subscription(_, _, _)'):
            print(f"  display: {format_term(fact)}", flush=True)
        ready.set()
        finished.wait(timeout)


def main():
    ap = argparse.ArgumentParser(description="a multi-process room on the a0py fact broker")
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    with Broker(BROKER):
        print(f"broker {BROKER!r} running in pid {os.getpid()}", flush=True)
        rule_ready, display_ready, stop = ctx.Event(), ctx.Event(), ctx.Event()
        rule_proc = ctx.Process(target=rule, args=(rule_ready, stop))
        rule_proc.start()
        rule_ready.wait(60)
        display_proc = ctx.Process(target=display, args=(display_ready, args.seconds + 30))
        display_proc.start()
        display_ready.wait(60)
        sensors = [ctx.Process(target=sensor, args=("kitchen", 22.0, 2.0, 21.0, args.seconds)),
                   ctx.Process(target=sensor, args=("hall", 19.0, 0.0, 20.0, args.seconds))]
        for p in sensors:
            p.start()
        print("sensors started: the kitchen warms 2 degrees a second, the hall stays", flush=True)
        for p in sensors:
            p.join(args.seconds + 60)
        display_proc.join(60)    # it ends once the kitchen's alert has come and gone
        stop.set()
        rule_proc.join(60)
    # The broker removed its request arena when it stopped, unless a client was still
    # connected (one that did not close in time): then it is removed here.
    remove_request_arena(BROKER)
    print("done", flush=True)


if __name__ == "__main__":
    main()
