"""a0py against its peers, in one run, across processes.

    python -m bench.peers                      # everything, ~7-10 min on 2 cores
    python -m bench.peers --quick              # smoke run, about a minute
    python -m bench.peers --repeats 3 --seconds 1 --json peers.json \\
        --markdown peers.md --chart peers.png
    python -m bench.peers --only 64b,fanout --peers a0py,pyzmq,shm-ring
    python -m bench.peers --from-json peers.json --chart peers.png   # re-report a saved run

Run from the repository root. Workloads (a publisher and its receivers are
separate processes; receivers block the way a user of each library would;
every message carries its sequence number, and what arrived is counted):

  pingpong  64-byte round trips, p50 and p99 (µs);
  64b       one-way 64 B, msgs/s received;
  4kib      one-way 4 KiB, MB/s received, copy-out and zero-copy receive
            shown separately for every peer that has both;
  1mib      one-way 1 MiB, likewise;
  fanout    one publisher, 4 receivers, 64 B, msgs/s per receiver;
  lapped    (only when named in --only) one-way 1 MiB through an 8 MiB
            buffer, copy-out: a lossy peer's reader is lapped by the
            writer; MB/s and the delivered fraction (bench/transport.py
            --only lapped gives a0py's readers as a fraction of their own
            unlapped rate).

Every workload runs through the same peer object (bench/peers/<peer>.py).
Each stream workload also reports the delivered fraction (messages received
/ messages sent, per receiver). Runs are interleaved across peers (peer A
run 1, peer B run 1, ..., A run 2, ...); medians of the runs are reported,
with the machine's load average before and after. Peers whose package does
not import are listed as "not installed"; a workload a peer cannot carry is
"n/a"; a peer that fails is reported as FAILED and the script exits 1.

This is a benchmark, not a test: it asserts nothing about speed.
"""

import argparse
import json
import os
import shlex
import sys
import time

if not __package__:
    raise SystemExit("run it as a module from the repository root: python -m bench.peers")

from . import PEERS, machine
from .report import chart, markdown
from .workloads import WORKLOADS, build_cases, load_cases, measure, progress


def select_peers(spec):
    """Peer keys named by --peers: a key, or a family (`a0py` names every
    a0py peer, `zenoh` both zenoh peers)."""
    keys = list(PEERS)
    if not spec:
        return keys
    chosen = []
    for name in (s.strip() for s in spec.split(",") if s.strip()):
        hits = [k for k in keys if k == name or k.startswith(name + "-")]
        if not hits:
            raise SystemExit(f"--peers: unknown peer {name!r}; known: {', '.join(keys)}")
        chosen += [k for k in hits if k not in chosen]
    return [k for k in keys if k in chosen]


def select_workloads(spec):
    if not spec:
        return [k for k, w in WORKLOADS.items() if not w.opt_in]
    names = [s.strip().lower() for s in spec.split(",") if s.strip()]
    for n in names:
        if n not in WORKLOADS:
            raise SystemExit(f"--only: unknown workload {n!r}; known: {', '.join(WORKLOADS)}")
    return [k for k in WORKLOADS if k in names]


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 repeat, 0.1 s streams, 500 round trips")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved runs per case (default 3)")
    ap.add_argument("--seconds", type=float, default=None, help="seconds a stream run sends (default 1)")
    ap.add_argument("--round-trips", type=int, default=None,
                    help="timed ping-pong round trips per run (default 5000 x seconds)")
    ap.add_argument("--only", default="", help=f"comma-separated workloads: {','.join(WORKLOADS)}")
    ap.add_argument("--peers", default="",
                    help="comma-separated peers (a key, or a family such as a0py): " + ",".join(PEERS))
    ap.add_argument("--pin", choices=("none", "cross", "same"), default="none",
                    help="ping-pong placement: scheduler's choice, one core each, both on one")
    ap.add_argument("--buffer-mib", type=int, default=64,
                    help="buffer given to every peer that has one in a stream run (default 64 MiB); "
                         "a smaller one stays in the CPU's last-level cache")
    ap.add_argument("--json", metavar="PATH", help="write every run and median as JSON")
    ap.add_argument("--markdown", metavar="PATH", help="write the table as Markdown")
    ap.add_argument("--chart", metavar="PATH", help="write a PNG chart (matplotlib)")
    ap.add_argument("--from-json", metavar="PATH",
                    help="measure nothing: report (and chart) a run saved with --json")
    args = ap.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if args.seconds is None:
        args.seconds = 0.1 if args.quick else 1.0
    if args.round_trips is None:
        args.round_trips = 500 if args.quick else max(200, int(5000 * args.seconds))
    if args.repeats < 1 or args.seconds <= 0 or args.round_trips < 1:
        raise SystemExit("--repeats, --seconds and --round-trips must be positive")
    if args.buffer_mib < 1:
        raise SystemExit("--buffer-mib must be at least 1")
    if args.chart:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise SystemExit("--chart needs matplotlib (pip install -e '.[bench]')") from None
    args.cpus = {"none": None, "cross": (0, 1), "same": (0, 0)}[args.pin]
    if args.cpus and max(args.cpus) >= os.cpu_count():
        args.cpus = None
    return args


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            res = json.load(f)
        return report(load_cases(res), res, args)

    peers = select_peers(args.peers)
    workloads = select_workloads(args.only)
    started = time.monotonic()
    res = {"command": "python -m bench.peers " + " ".join(shlex.quote(a) for a in argv),
           "machine": machine(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "args": {k: v for k, v in vars(args).items() if k != "cpus"}, "peers": peers,
           "load": {"before": os.getloadavg()}}
    cases = build_cases(workloads, peers)
    for cs in cases.values():
        for c in cs:
            if c.status == "not installed":
                progress(f"  {c.workload.key:<8} {c.key:<14} not installed: {c.reason}")
    res["load_per_workload"] = measure(cases, args)
    res["load"]["after"] = os.getloadavg()
    res["elapsed_s"] = time.monotonic() - started
    res["workloads"] = {wk: {"title": WORKLOADS[wk].title, "size": WORKLOADS[wk].size,
                             "receivers": WORKLOADS[wk].n_rx, "unit": WORKLOADS[wk].unit,
                             "cases": [c.to_json() for c in cs]} for wk, cs in cases.items()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return report(cases, res, args)


def report(cases, res, args):
    """Prints the Markdown report, writes --markdown and --chart; 1 if a
    case failed."""
    text = markdown(cases, res)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    if args.chart:
        chart(cases, res, args.chart)
    failed = [c for cs in cases.values() for c in cs if c.status == "FAILED"]
    if failed:
        progress(f"{len(failed)} case(s) FAILED: " + ", ".join(f"{c.workload.key}/{c.key}/{c.mode}"
                                                             for c in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
