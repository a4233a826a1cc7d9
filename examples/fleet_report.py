"""The seed's fleet report, with a0py actors (seed "Reactive Programming Patterns: Scatter
Gather", the Fuse connected-car platform).

An owner asks its fleet for the weekly report. The fleet actor scatters a report request
to its vehicles (100 actors spread over several processes, each addressable by name
through its own shared-memory mailbox), gathers their trips and fuel fill-ups with a
correlation id, retries the vehicles that have not answered when its timeout fires, and
after the last retry completes with the partial result and the list of who never
answered. Vehicles register with a registrar by topic; one process is killed before the
report, and the registrar drops its vehicles at once (their liveness locks were released
by the kernel), so the fleet does not even ask them.

    python examples/fleet_report.py [--vehicles 100] [--processes 4] [--seed 7]
"""

import argparse
import os
import random
import signal
import sys
import threading
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from a0py.actor import (
    ActorSystem,
    Registrar,
    Reply,
    current,
    spawn_process,
    start_gather,
)

FUEL_PRICE = 3.89  # dollars a gallon


class Vehicle:
    """A vehicle actor: keeps its week of trips and fill-ups; answers report requests.

    ``delay``: how long it takes to compile its report (a slow vehicle answers after its
    fleet's first timeout, a stuck one never in time). It never blocks: the answer is a
    scheduled message.
    """

    def __init__(self, vin, seed, delay=0.0):
        rng = random.Random(seed)
        self.vin = vin
        self.delay = delay
        self.trips = [round(rng.uniform(2, 60), 1) for _ in range(rng.randint(3, 14))]
        self.fillups = [round(rng.uniform(8, 16), 2) for _ in range(rng.randint(0, 3))]

    def __call__(self, request):
        report = {"vin": self.vin, "trips": self.trips, "fillups": self.fillups}
        reply = Reply(request.correlation_id, request.recipient, report)
        if self.delay:
            current().send_after(self.delay, request.reply_to, reply)
        else:
            request.reply_to.send(reply)


class Fleet:
    """The fleet actor: on "periodic_report" it scatters to the vehicles the registrar
    knows are alive; the gather's result comes back to it as a message."""

    def __init__(self, registrar, owner, timeout, retries):
        self.registrar = registrar
        self.owner = owner
        self.timeout = timeout
        self.retries = retries
        self.started = None

    def __call__(self, message):
        if message == "periodic_report":
            self.started = time.monotonic()
            me = current().self
            start_gather(current().system, {"kind": "weekly"}, self.registrar.recipients("vehicle"),
                         timeout=self.timeout, retries=self.retries,
                         on_progress=show_progress, on_complete=me)
        else:  # the GatherResult
            self.owner.send(format_report(message, time.monotonic() - self.started,
                                          self.registrar.dropped))


def show_progress(answered, total, attempt):
    width = 40
    filled = width * answered // max(total, 1)
    note = f" retry {attempt}" if attempt else ""
    sys.stderr.write(f"\r  gathering [{'#' * filled}{'.' * (width - filled)}] "
                     f"{answered:3d}/{total} answered{note}   ")
    sys.stderr.flush()


def format_report(result, elapsed, offline):
    lines = ["", "", "FUSE WEEKLY REPORT", "=" * 66,
             f"{'vehicle':<14}{'trips':>6}{'miles':>10}{'fill-ups':>10}{'gallons':>10}{'cost':>12}",
             "-" * 66]
    totals = [0, 0.0, 0, 0.0, 0.0]
    for name in sorted(result.replies):
        report = result.replies[name]
        miles = sum(report["trips"])
        gallons = sum(report["fillups"])
        row = [len(report["trips"]), miles, len(report["fillups"]), gallons, gallons * FUEL_PRICE]
        totals = [t + r for t, r in zip(totals, row)]
        lines.append(f"{name:<14}{row[0]:>6}{row[1]:>10.1f}{row[2]:>10}{row[3]:>10.2f}{row[4]:>12.2f}")
    lines += ["-" * 66,
              (f"{'fleet':<14}{totals[0]:>6}{totals[1]:>10.1f}{totals[2]:>10}{totals[3]:>10.2f}"
               f"{totals[4]:>12.2f}"), "",
              (f"answered: {len(result.replies)} of {len(result.recipients)} asked, in "
               f"{result.attempts} round(s), {elapsed:.2f} s (correlation id {result.correlation_id})"),
              f"never answered: {', '.join(result.missing) or 'none'}",
              f"offline (dropped by the registrar when their process died): {offline}"]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vehicles", type=int, default=100)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=0.5, help="seconds per round")
    parser.add_argument("--retries", type=int, default=2)
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    tag = f"fleet{os.getpid()}"
    names = [f"{tag}-v{i:03d}" for i in range(args.vehicles)]
    doomed = set(names[-4:])          # hosted by one extra process, killed before the report
    healthy = [n for n in names if n not in doomed]
    slow = set(rng.sample(healthy, 8))       # answer after the first timeout: retried
    stuck = set(rng.sample(sorted(set(healthy) - slow), 2))   # never answer in time

    def spec(name):
        delay = 0.7 if name in slow else 60.0 if name in stuck else rng.uniform(0, 0.05)
        return (Vehicle, (name.split("-")[-1], rng.random(), delay))

    done = threading.Event()
    report = []

    def owner(text):
        report.append(text)
        done.set()

    nodes = []
    with ActorSystem("fleet") as system:
        try:
            sys.stderr.write(f"starting {args.vehicles} vehicles in {args.processes + 1} processes...\n")
            for k in range(args.processes):
                group = healthy[k::args.processes]
                nodes.append(spawn_process({n: spec(n) for n in group}, arena_size=1 << 16))
            doomed_node = spawn_process({n: spec(n) for n in sorted(doomed)}, arena_size=1 << 16)
            nodes.append(doomed_node)

            registrar = Registrar()
            for node in nodes:
                for ref in node.refs.values():
                    registrar.register("vehicle", ref)   # the vehicles' registration
            os.kill(doomed_node.pid, signal.SIGKILL)     # a few vehicles go offline
            doomed_node.join(5)

            owner_ref = system.spawn(owner, name=f"{tag}-owner")
            fleet = system.spawn(Fleet(registrar, owner_ref, args.timeout, args.retries),
                                 name=f"{tag}-fleet")
            system.send_after(0.05, fleet, "periodic_report")   # the periodic trigger
            if not done.wait(60):
                raise SystemExit("the report did not complete")
            print(report[0])
        finally:
            for node in nodes:
                node.close(timeout=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
