"""What `python -m bench.peers` measures: the workloads, and one case per
(workload, peer, receive mode) with its runs and medians."""

import os
import statistics
import sys
import traceback

from . import PEERS
from .harness import KiB, MiB, Missing, Unsupported, run_pingpong, run_stream, summarize

FANOUT = 4


class Workload:
    """One workload. `buffer`: the bytes every peer's buffer gets (None: the
    run's --buffer-mib); `opt_in`: run only when named in --only."""

    def __init__(self, key, title, column, size, n_rx, modes, unit, buffer=None, opt_in=False):
        self.key, self.title, self.column = key, title, column
        self.size, self.n_rx, self.modes, self.unit = size, n_rx, modes, unit
        self.buffer, self.opt_in = buffer, opt_in


WORKLOADS = {w.key: w for w in (
    Workload("pingpong", "ping-pong 64 B, p50 / p99 µs", "ping-pong 64 B p50 / p99 µs", 64, 1,
             ("copy",), "µs"),
    Workload("64b", "one-way 64 B, msgs/s", "64 B msgs/s", 64, 1, ("copy",), "msgs/s"),
    Workload("4kib", "one-way 4 KiB, MB/s", "4 KiB MB/s", 4 * KiB, 1, ("copy", "zero-copy"), "MB/s"),
    Workload("1mib", "one-way 1 MiB, MB/s", "1 MiB MB/s", MiB, 1, ("copy", "zero-copy"), "MB/s"),
    Workload("fanout", f"fan-out 1 → {FANOUT}, 64 B, msgs/s per receiver",
             f"fan-out 1→{FANOUT} msgs/s per receiver", 64, FANOUT, ("copy",), "msgs/s"),
    # A writer that laps its reader: 1 MiB messages copied out of a buffer of
    # 8 (a lossy peer's reader falls a ring behind within milliseconds).
    Workload("lapped", "lapped reader: one-way 1 MiB through an 8 MiB buffer, copy-out, MB/s",
             "lapped 1 MiB / 8 MiB MB/s", MiB, 1, ("copy",), "MB/s", buffer=8 * MiB, opt_in=True),
)}


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


class Case:
    """One (workload, peer, receive mode) cell: its status and its runs."""

    def __init__(self, workload, key, mode):
        self.workload, self.key, self.mode = workload, key, mode
        self.status = "ok"     # ok | not installed | n/a | FAILED
        self.reason = ""
        self.runs = []

    @property
    def peer(self):
        return PEERS[self.key]

    def check(self):
        w = self.workload
        try:
            self.peer.check(w.size, w.n_rx)
            if w.key == "pingpong" and not self.peer.pull:
                raise Unsupported("delivers to a callback: no ping-pong echo")
            if self.mode == "zero-copy" and not self.peer.zero_copy:
                raise Unsupported("no zero-copy receive")
        except Missing as e:
            self.status, self.reason = "not installed", str(e)
        except Unsupported as e:
            self.status, self.reason = "n/a", str(e)

    def run(self, args):
        w = self.workload
        if w.key == "pingpong":
            n = args.round_trips
            lat = run_pingpong(self.peer, n, max(50, n // 10), w.size, args.cpus)
            s = summarize([lat])
            return {"round_trips": n, "p50_us": s["p50_us"], "p99_us": s["p99_us"],
                    "mean_us": s["mean_us"]}
        r = run_stream(self.peer, w.size, w.n_rx, args.seconds, zero_copy=self.mode == "zero-copy",
                       buffer=w.buffer or args.buffer_mib * MiB)
        rates = [rx["count"] / (rx["t_stop"] - r["t0"]) for rx in r["receivers"]]
        rate = statistics.fmean(rates)
        out = {"sent": r["sent"], "send_rate": r["sent"] / (r["t1"] - r["t0"]),
               "received": [rx["count"] for rx in r["receivers"]],
               "out_of_order": [rx["disorder"] for rx in r["receivers"]],
               "rate_per_receiver": rates, "msgs_per_s": rate, "mb_per_s": rate * w.size / 1e6,
               "delivered": sum(rx["count"] for rx in r["receivers"]) / (w.n_rx * r["sent"])}
        # What a peer adds per receiver (a0py: missed; iceoryx2: empty_wakes),
        # as lists over the receivers.
        for extra in sorted({k for rx in r["receivers"] for k in rx} - {"count", "disorder", "t_stop"}):
            out[extra] = [rx.get(extra) for rx in r["receivers"]]
        return out

    def summary(self):
        if self.status != "ok" or not self.runs:
            return None
        med = statistics.median
        if self.workload.key == "pingpong":
            return {"p50_us": med(r["p50_us"] for r in self.runs),
                    "p99_us": med(r["p99_us"] for r in self.runs)}
        return {"msgs_per_s": med(r["msgs_per_s"] for r in self.runs),
                "mb_per_s": med(r["mb_per_s"] for r in self.runs),
                "delivered": med(r["delivered"] for r in self.runs),
                "delivered_min": min(r["delivered"] for r in self.runs),
                "out_of_order": max(max(r["out_of_order"]) for r in self.runs)}

    def to_json(self):
        return {"peer": self.key, "label": self.peer.label, "mode": self.mode, "status": self.status,
                "reason": self.reason, "median": self.summary(), "runs": self.runs}


def build_cases(workloads, peers):
    """{workload key: [Case]} for every mode of every workload and peer,
    each checked (not installed, n/a)."""
    cases = {}
    for wk in workloads:
        w = WORKLOADS[wk]
        cases[wk] = [Case(w, key, mode) for key in peers for mode in w.modes]
    for cs in cases.values():
        for c in cs:
            c.check()
    return cases


def load_cases(res):
    """The cases of a run written by --json (for --from-json)."""
    cases = {}
    for wk, w in res["workloads"].items():
        cases[wk] = []
        for cj in w["cases"]:
            c = Case(WORKLOADS[wk], cj["peer"], cj["mode"])
            c.status, c.reason, c.runs = cj["status"], cj["reason"], cj["runs"]
            cases[wk].append(c)
    return cases


def measure(cases, args):
    """Round-robin: every case's run 1, then every case's run 2, ...; a
    case that fails is not run again. Returns the load average before and
    after each workload of each repeat."""
    loads = {}
    for r in range(args.repeats):
        for wk, cs in cases.items():
            loads.setdefault(wk, []).append({"repeat": r + 1, "before": os.getloadavg()})
            for c in cs:
                if c.status != "ok":
                    continue
                label = f"{wk:<8} {c.key:<14} {c.mode:<9} run {r + 1}"
                try:
                    res = c.run(args)
                except Exception as e:
                    c.status = "FAILED"
                    c.reason = f"{type(e).__name__}: {e}".splitlines()[0]
                    progress(f"  {label}  FAILED\n{traceback.format_exc()}")
                    continue
                c.runs.append(res)
                if wk == "pingpong":
                    progress(f"  {label}  p50 {res['p50_us']:8.1f} µs  p99 {res['p99_us']:8.1f} µs")
                else:
                    progress(f"  {label}  {res['msgs_per_s']:12,.0f} msgs/s  {res['mb_per_s']:10,.1f} MB/s"
                             f"  delivered {res['delivered']:.1%}")
            loads[wk][-1]["after"] = os.getloadavg()
    return loads
