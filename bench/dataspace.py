"""Benchmark of the dataspace skeleton index: compiled vs interpreted, one run.

Workload: 100 observers of varied shapes (constants, captures, nested
records, tuples, a root-level discard) and 100k distinct assertions of 5
kinds. Phases, each timed separately on a fresh process state:

* insert   : assert the 100k values with the 100 observers present
* send     : send the 100k values as messages (nothing is stored)
* remove   : retract the 100k values
* observe  : add the 100 observers to an index already holding the 100k values

Both builds run the same algorithm from the same source
(a0py/dataspace/_canonical.py, _skeleton.py, _trie.py, _index.py): ``compiled``
is a0py.dataspace._compiled, ``interpreted`` (a0py.dataspace._interpreted) is
those files run by CPython. Each build gets the workload built from its
own Record class; the events of the two builds are checked equal (per
observer and event kind, counts for the full run; the full multiset of
events, as text, on a 5k-value slice).

    .venv/bin/python bench/dataspace.py [--repeat 5] [--n 100000] [--json out.json]
"""

import argparse
import gc
import json
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a0py.dataspace import DISCARD, capture, format_term
from a0py.dataspace import _interpreted as interpreted

try:
    from a0py.dataspace import _compiled as compiled
except ImportError:  # pragma: no cover
    sys.exit("a0py.dataspace._compiled is not built:"
             " A0PY_ONLY=a0py.dataspace._compiled python setup.py build_ext --inplace")

BUILDS = {"compiled": compiled, "interpreted": interpreted}
KINDS = 5


def make_values(R, n, seed=1):
    """n distinct assertions of 5 kinds, deterministic."""
    rng = random.Random(seed)
    values = []
    seen = set()
    users = [f"user{i}" for i in range(200)]
    sensors = [f"s{i}" for i in range(50)]
    units = ["C", "F", "K", "Pa"]
    i = 0
    while len(values) < n:
        kind = i % KINDS
        i += 1
        if kind == 0:
            v = R("present", rng.choice(users), i)
        elif kind == 1:
            v = R("speak", rng.choice(users), f"message {i}")
        elif kind == 2:
            v = R("pos", i, (rng.randrange(10), rng.randrange(1000)))
        elif kind == 3:
            v = R("reading", rng.choice(sensors), R("unit", rng.choice(units), i * 0.5))
        else:
            v = R("edge", rng.choice(users), rng.choice(users), i)
        key = format_term(v)
        if key not in seen:
            seen.add(key)
            values.append(v)
    return values


def make_patterns(R):
    """100 observers of varied shapes."""
    C, D = capture, DISCARD
    ps = [
        D,  # root-level: is anything asserted at all?
        R("present", C(), D),
        R("speak", C(), C()),
        R("speak", C(), D),
        R("pos", C(), (C(), D)),
        R("pos", D, C()),
        R("reading", C(), R("unit", C(), C())),
        R("reading", D, R("unit", "C", C())),
        R("reading", C(), D),
        R("edge", C(), C(), D),
        R("edge", D, D, D),
        C(R("present", D, D)),
    ]
    for k in range(25):
        ps.append(R("present", f"user{k}", C()))
    for k in range(15):
        ps.append(R("speak", f"user{k}", C()))
    for k in range(10):
        ps.append(R("pos", D, (k, C())))
    for k in range(12):
        ps.append(R("reading", f"s{k}", R("unit", C(), D)))
    for k in range(13):
        ps.append(R("edge", f"user{k}", C(), D))
    for k in range(13):
        ps.append(R("edge", C(), f"user{k}", D))
    assert len(ps) == 100, len(ps)
    return ps


class Counters:
    """One callback per observer, counting its events. Each phase has one
    kind of event (insert: +, send: !, remove: -), so the counts taken after
    each phase are counts per observer and kind."""

    def __init__(self, n):
        self.counts = [[0] for _ in range(n)]

    def callback(self, i):
        c = self.counts[i]

        def cb(event, captures):
            c[0] += 1

        return cb

    def snapshot(self):
        return [c[0] for c in self.counts]


CLOCK = time.perf_counter


def timed(fn):
    gc.collect()
    t0 = CLOCK()
    fn()
    return CLOCK() - t0


def run_once(mod, values, patterns):
    """One pass of the four phases; returns seconds per phase and the counts."""
    counters = Counters(len(patterns))
    idx = mod.Index()
    for i, p in enumerate(patterns):
        idx.add_handler(p, counters.callback(i))
    add, send, rem = idx.add_assertion, idx.send_message, idx.remove_assertion

    def insert():
        for v in values:
            add(v)

    def sending():
        for v in values:
            send(v)

    def remove():
        for v in values:
            rem(v)

    t = {"insert": timed(insert)}
    counts = [counters.snapshot()]
    t["send"] = timed(sending)
    counts.append(counters.snapshot())
    t["remove"] = timed(remove)
    counts.append(counters.snapshot())
    idx2 = mod.Index()
    for v in values:
        idx2.add_assertion(v)
    late = Counters(len(patterns))

    def observe():
        for i, p in enumerate(patterns):
            idx2.add_handler(p, late.callback(i))

    t["observe"] = timed(observe)
    counts.append(late.snapshot())
    return t, counts


def full_events(mod, values, patterns):
    """Every event of every observer, as text, in a multiset (for checking)."""
    events = Counter()
    idx = mod.Index()
    for i, p in enumerate(patterns):
        idx.add_handler(p, lambda ev, caps, i=i: events.update(
            [(i, ev, tuple(format_term(c) for c in caps))]))
    for v in values:
        idx.add_assertion(v)
    for v in values:
        idx.send_message(v)
    for v in values:
        idx.remove_assertion(v)
    return events


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="assertions (default 100000)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per build (default 5)")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--cpu", action="store_true",
                    help="time with process CPU time instead of wall time (steadier on a busy box)")
    args = ap.parse_args()
    global CLOCK
    if args.cpu:
        CLOCK = time.process_time

    work = {name: (make_values(mod.Record, args.n), make_patterns(mod.Record))
            for name, mod in BUILDS.items()}

    # Same events: full multisets on a slice, counts on the whole run.
    slice_n = min(5000, args.n)
    ref = None
    for name, mod in BUILDS.items():
        values, patterns = work[name]
        ev = full_events(mod, values[:slice_n], patterns)
        if ref is None:
            ref = ev
        elif ev != ref:
            sys.exit(f"events differ between builds on the {slice_n}-value slice")

    results = {name: {"insert": [], "send": [], "remove": [], "observe": []} for name in BUILDS}
    counts = {}

    for r in range(args.repeat):
        for name, mod in BUILDS.items():
            values, patterns = work[name]
            t, c = run_once(mod, values, patterns)
            for phase, secs in t.items():
                results[name][phase].append(secs)
            counts.setdefault(name, c)
            if c != counts[name]:
                sys.exit(f"{name}: events differ between runs")
            print(f"run {r + 1}/{args.repeat} {name:12s} " + "  ".join(
                f"{p} {args.n / s / 1e3:8.1f}k/s" if p != "observe" else f"{p} {s * 1e3:7.1f}ms"
                for p, s in t.items()), flush=True)
    if counts["compiled"] != counts["interpreted"]:
        sys.exit("events differ between builds on the full run")
    total = sum(counts["compiled"][2])

    clock = "CPU time" if args.cpu else "wall time"
    print(f"\n{args.n} assertions, {len(work['compiled'][1])} observers, {total} events a run"
          f" (+ - !), medians of {args.repeat} runs ({clock}), events identical across builds")
    print(f"{'phase':10s} {'compiled':>14s} {'interpreted':>14s} {'ratio':>7s}")
    summary = {}
    for phase in ("insert", "send", "remove", "observe"):
        mc = statistics.median(results["compiled"][phase])
        mi = statistics.median(results["interpreted"][phase])
        summary[phase] = {"compiled_s": mc, "interpreted_s": mi, "ratio": mi / mc}
        if phase == "observe":
            print(f"{phase:10s} {mc * 1e3:12.1f}ms {mi * 1e3:12.1f}ms {mi / mc:6.1f}x")
        else:
            print(f"{phase:10s} {args.n / mc / 1e3:11.0f}k/s {args.n / mi / 1e3:11.0f}k/s"
                  f" {mi / mc:6.1f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"n": args.n, "repeat": args.repeat, "clock": clock,
                                               "events": total, "phases": summary,
                                               "runs": results}, indent=2))


if __name__ == "__main__":
    main()
