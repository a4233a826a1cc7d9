"""a0py against its peers, in one run, across processes.

    python bench/peers.py                      # everything, ~6-9 min on 2 cores
    python bench/peers.py --quick              # smoke run, under a minute
    python bench/peers.py --repeats 3 --seconds 1 --json peers.json \\
        --markdown peers.md --chart docs/peers.png
    python bench/peers.py --only 64b,fanout --peers a0py,pyzmq,shm-ring

Workloads (a publisher and its receivers are separate processes; receivers
block the way a user of each library would; every message carries its
sequence number, and what arrived is counted):

  pingpong  64-byte round trips, p50 and p99 (µs), the bench/_peers.py
            harness (each peer's own echo child);
  64b       one-way 64 B, msgs/s received;
  4kib      one-way 4 KiB, MB/s received, copy-out and zero-copy receive
            shown separately for every peer that has both;
  1mib      one-way 1 MiB, likewise;
  fanout    one publisher, 4 receivers, 64 B, msgs/s per receiver.

Each stream workload also reports the delivered fraction (messages received
/ messages sent, per receiver). Runs are interleaved across peers (peer A
run 1, peer B run 1, ..., A run 2, ...); medians of the runs are reported,
with the machine's load average before and after. Peers whose package does
not import are listed as "not installed"; a workload a peer cannot carry is
"n/a"; a peer that fails is reported as FAILED and the script exits 1.

This is a script, not a test: it asserts nothing about speed.
"""

import argparse
import contextlib
import json
import math
import os
import shlex
import signal
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
if __package__ in (None, ""):
    sys.path.insert(1, os.path.dirname(HERE))

import _peers
import transport  # its summarize() and machine(), so both scripts report alike

KiB, MiB = 1024, 1024 * 1024
FANOUT = 4


class Workload:
    def __init__(self, key, title, size, n_rx, modes, unit):
        self.key, self.title, self.size, self.n_rx, self.modes, self.unit = key, title, size, n_rx, modes, unit


WORKLOADS = {w.key: w for w in (
    Workload("pingpong", "ping-pong 64 B, p50 / p99 µs", 64, 1, ("copy",), "µs"),
    Workload("64b", "one-way 64 B, msgs/s", 64, 1, ("copy",), "msgs/s"),
    Workload("4kib", "one-way 4 KiB, MB/s", 4 * KiB, 1, ("copy", "zero-copy"), "MB/s"),
    Workload("1mib", "one-way 1 MiB, MB/s", MiB, 1, ("copy", "zero-copy"), "MB/s"),
    Workload("fanout", f"fan-out 1 → {FANOUT}, 64 B, msgs/s per receiver", 64, FANOUT, ("copy",),
             "msgs/s"),
)}


def _zenoh_pingpong(shm):
    def pingpong(n, warmup, size, cpus):
        return _peers.pingpong_zenoh(n, warmup, size, cpus, shm=shm)
    return pingpong


def _a0py_pingpong(n, warmup, size, cpus):
    return _peers.pingpong_a0py(n, warmup, size, cpus)  # Transport.spin at its default


CH = _peers.CHANNELS
# Rows of the report, in order: (channel key, ping-pong function or None).
# Ping-pong reuses each peer's echo child from bench/_peers.py (also used by
# bench/transport.py); peers without one run it over two of their channels.
ROWS = [
    ("a0py", _a0py_pingpong),
    ("a0py-pubsub", _peers.pingpong_channel(CH["a0py-pubsub"])),
    ("a0py-callback", None),
    ("alephzero", _peers.pingpong_alephzero),
    ("iceoryx2", _peers.pingpong_iceoryx2),
    ("iceoryx2-poll", _peers.pingpong_channel(CH["iceoryx2-poll"])),
    ("zenoh", _zenoh_pingpong(False)),
    ("zenoh-shm", _zenoh_pingpong(True)),
    ("pyzmq", _peers.pingpong_pyzmq),
    ("mp-pipe", _peers.pingpong_mp_pipe),
    ("mp-queue", _peers.pingpong_mp_queue),
    ("faster-fifo", _peers.pingpong_faster_fifo),
    ("posix-mq", _peers.pingpong_posix_mq),
    ("os-pipe", _peers.pingpong_os_pipe),
    ("shm-ring", _peers.pingpong_channel(CH["shm-ring"])),
]
PINGPONG = dict(ROWS)


def progress(msg):
    print(msg, file=sys.stderr, flush=True)


def select_peers(spec):
    """Row keys named by --peers: a key, or a family (`a0py` names every
    a0py row, `zenoh` both zenoh rows)."""
    keys = [k for k, _ in ROWS]
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
        return list(WORKLOADS)
    names = [s.strip().lower() for s in spec.split(",") if s.strip()]
    for n in names:
        if n not in WORKLOADS:
            raise SystemExit(f"--only: unknown workload {n!r}; known: {', '.join(WORKLOADS)}")
    return [k for k in WORKLOADS if k in names]


# ----------------------------------------------------------------- cases


class Case:
    """One (workload, peer, receive mode) cell: its status and its runs."""

    def __init__(self, workload, key, mode):
        self.workload, self.key, self.mode = workload, key, mode
        self.status = "ok"     # ok | not installed | n/a | FAILED
        self.reason = ""
        self.runs = []

    @property
    def chan(self):
        return CH[self.key]

    def check(self):
        w = self.workload
        try:
            self.chan.check(w.size, w.n_rx)
            if w.key == "pingpong" and PINGPONG[self.key] is None:
                raise _peers.Unsupported("delivers to a callback: no ping-pong echo")
            if self.mode == "zero-copy" and not self.chan.zero_copy:
                raise _peers.Unsupported("no zero-copy receive")
        except _peers.Missing as e:
            self.status, self.reason = "not installed", str(e)
        except _peers.Unsupported as e:
            self.status, self.reason = "n/a", str(e)

    def run(self, args):
        w = self.workload
        if w.key == "pingpong":
            n = args.round_trips
            with _deadline(_peers.JOIN_S + n * 2e-3, f"{self.chan.label} ping-pong"):
                lat = PINGPONG[self.key](n, max(50, n // 10), w.size, args.cpus)
            s = transport.summarize([lat])
            return {"round_trips": n, "p50_us": s["p50_us"], "p99_us": s["p99_us"],
                    "mean_us": s["mean_us"]}
        r = _peers.run_stream(self.chan, w.size, w.n_rx, args.seconds, zero_copy=self.mode == "zero-copy")
        rates = [rx["count"] / (rx["t_stop"] - r["t0"]) for rx in r["receivers"]]
        rate = statistics.fmean(rates)
        out = {"sent": r["sent"], "send_rate": r["sent"] / (r["t1"] - r["t0"]),
               "received": [rx["count"] for rx in r["receivers"]],
               "out_of_order": [rx["disorder"] for rx in r["receivers"]],
               "rate_per_receiver": rates, "msgs_per_s": rate, "mb_per_s": rate * w.size / 1e6,
               "delivered": sum(rx["count"] for rx in r["receivers"]) / (w.n_rx * r["sent"])}
        # What a channel adds per receiver (a0py: Transport.missed; iceoryx2:
        # empty_wakes), as lists over the receivers.
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
        return {"peer": self.key, "label": self.chan.label, "mode": self.mode, "status": self.status,
                "reason": self.reason, "median": self.summary(), "runs": self.runs}


@contextlib.contextmanager
def _deadline(seconds, what):
    """Raises TimeoutError in this process after `seconds` (SIGALRM), so a
    ping-pong whose message was lost fails instead of hanging; the harness's
    finally then kills the echo child. (Stream runs have their own
    deadlines: the parent waits on pipes with timeouts.)"""
    def expire(signum, frame):
        raise TimeoutError(f"{what} did not finish within {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def build_cases(workloads, peers):
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
    case that fails is not run again."""
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


# ---------------------------------------------------------------- report


def _num(x):
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _delivered(s):
    d = s["delivered"]
    return "" if d >= 0.9995 else f" ({d:.0%})" if d < 0.995 else f" ({d:.1%})"


def cell(case):
    if case is None:
        return ""
    if case.status == "not installed":
        return "not installed"
    if case.status == "n/a":
        return "n/a"
    if case.status == "FAILED":
        return "**FAILED**"
    s = case.summary()
    if s is None:
        return ""
    if case.workload.key == "pingpong":
        return f"{_num(s['p50_us'])} / {_num(s['p99_us'])}"
    value = s["mb_per_s"] if case.workload.unit == "MB/s" else s["msgs_per_s"]
    return _num(value) + _delivered(s)


def columns(cases):
    cols = []
    for wk, cs in cases.items():
        w = WORKLOADS[wk]
        for mode in w.modes:
            if mode == "zero-copy" and not any(c.mode == mode and c.status not in ("n/a", "not installed")
                                               for c in cs):
                continue
            title = {"pingpong": "ping-pong 64 B p50 / p99 µs", "64b": "64 B msgs/s",
                     "4kib": "4 KiB MB/s", "1mib": "1 MiB MB/s",
                     "fanout": f"fan-out 1→{FANOUT} msgs/s per receiver"}[wk]
            if len(w.modes) > 1:
                title += f", {mode}"
            cols.append((wk, mode, title))
    return cols


def best_peer_lines(cases):
    """a0py's rows against the best other peer, per column."""
    lines = []
    for wk, cs in cases.items():
        w = WORKLOADS[wk]
        for mode in w.modes:
            ok = [c for c in cs if c.mode == mode and c.summary()]
            ours = [c for c in ok if c.key.startswith("a0py")]
            theirs = [c for c in ok if not c.key.startswith("a0py")]
            if not ours or not theirs:
                continue
            if wk == "pingpong":
                for q in ("p50_us", "p99_us"):
                    best = min(theirs, key=lambda c, q=q: c.summary()[q])
                    b = best.summary()[q]
                    for c in ours:
                        v = c.summary()[q]
                        lines.append(f"- ping-pong {q[:3]}: {c.chan.label} {_num(v)} µs vs best peer "
                                     f"{best.chan.label} {_num(b)} µs: {b / v:.2f}× (above 1: a0py faster)")
                continue
            key = "mb_per_s" if w.unit == "MB/s" else "msgs_per_s"
            best = max(theirs, key=lambda c: c.summary()[key])
            b = best.summary()
            # A peer that dropped much of what was sent is not the best at
            # delivering it: name the best one that delivered (nearly) all too.
            whole = [c for c in theirs if c.summary()["delivered"] >= 0.99]
            best_whole = max(whole, key=lambda c: c.summary()[key]) if whole else None
            for c in ours:
                s = c.summary()
                line = (f"- {w.title}{', ' + mode if len(w.modes) > 1 else ''}: {c.chan.label} "
                        f"{_num(s[key])} ({s['delivered']:.1%} delivered) vs best peer "
                        f"{best.chan.label} {_num(b[key])} ({b['delivered']:.1%}): {s[key] / b[key]:.2f}×")
                if best_whole is not None and best_whole is not best:
                    bw = best_whole.summary()
                    line += (f"; vs the best delivering ≥ 99 %, {best_whole.chan.label} "
                             f"{_num(bw[key])}: {s[key] / bw[key]:.2f}×")
                lines.append(line)
    return lines


def markdown(cases, res):
    peers = res["peers"]
    cols = columns(cases)
    index = {(c.workload.key, c.key, c.mode): c for cs in cases.values() for c in cs}
    m, load = res["machine"], res["load"]
    out = [f"Command: `{res['command']}`", "",
           f"Machine: {m['cpus']} CPUs ({m['cpu_model']}), Python {m['python']}, kernel {m['kernel']}, "
           f"a0py {m['a0py']}; started {res['started']}, took {res['elapsed_s']:.0f} s. "
           f"Load average (1/5/15 min) before: {'/'.join(f'{x:.2f}' for x in load['before'])}, "
           f"after: {'/'.join(f'{x:.2f}' for x in load['after'])}.",
           "",
           f"Medians of {res['args']['repeats']} interleaved runs ({res['args']['seconds']} s per "
           f"stream run, {res['args']['round_trips']} round trips per ping-pong run, ping-pong "
           f"placement: {res['args']['pin']}). MB/s is 10^6 bytes/s received. "
           "A percentage is the fraction of sent messages received, shown when under 100 %.",
           "",
           "| peer | " + " | ".join(t for _, _, t in cols) + " |",
           "|---|" + "---:|" * len(cols)]
    for key in peers:
        row = [CH[key].label]
        for wk, mode, _ in cols:
            row.append(cell(index.get((wk, key, mode))))
        out.append("| " + " | ".join(row) + " |")
    absent = {}
    for cs in cases.values():
        for c in cs:
            if c.status == "not installed":
                absent.setdefault(c.key, c.reason)
    failed = [c for cs in cases.values() for c in cs if c.status == "FAILED"]
    if absent:
        out += ["", "Not installed:"] + [f"- {CH[k].label}: {r}" for k, r in absent.items()]
    if failed:
        out += ["", "FAILED:"] + [f"- {c.workload.key} {c.chan.label} ({c.mode}): {c.reason}" for c in failed]
    lines = best_peer_lines(cases)
    if lines:
        out += ["", "a0py against the best other peer (same run):"] + lines
    out += ["", "How each peer is used:"]
    for key in peers:
        ch = CH[key]
        zc = f" Zero-copy receive: {ch.zero_copy}." if ch.zero_copy else ""
        out.append(f"- {ch.label}: {ch.notes}.{zc}")
    return "\n".join(out) + "\n"


def chart(cases, res, path):
    """A grouped bar chart, one panel per workload, log scales."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    panels = list(cases)
    ncols = min(3, len(panels))
    nrows = (len(panels) + ncols - 1) // ncols
    labels = {k: CH[k].label for k in res["peers"]}
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.2 * ncols, 0.32 * len(labels) * nrows + 1.8 * nrows),
                             squeeze=False)
    colours = {"copy": "#4C72B0", "zero-copy": "#DD8452", "p50": "#4C72B0", "p99": "#A6B8DC"}
    ticks = FuncFormatter(lambda x, _: f"{x:,.0f}" if x >= 1 else f"{x:g}")
    for ax, wk in zip(axes.flat, panels):
        w = WORKLOADS[wk]
        cs = cases[wk]
        keys = [k for k in res["peers"] if any(c.key == k and c.summary() for c in cs)]
        series = ["p50", "p99"] if wk == "pingpong" else [m for m in w.modes
                                                          if any(c.mode == m and c.summary() for c in cs)]
        height = 0.8 / max(1, len(series))
        values = []
        for j, name in enumerate(series):
            ys, xs, notes = [], [], []
            for i, k in enumerate(keys):
                c = next((c for c in cs if c.key == k and c.mode == ("copy" if wk == "pingpong" else name)), None)
                s = c.summary() if c else None
                if not s:
                    continue
                if wk == "pingpong":
                    v = s[f"{name}_us"]
                else:
                    v = s["mb_per_s"] if w.unit == "MB/s" else s["msgs_per_s"]
                ys.append(i + (j - (len(series) - 1) / 2) * height)
                xs.append(v)
                notes.append("" if wk == "pingpong" or s["delivered"] >= 0.995 else f"{s['delivered']:.0%}")
            values += xs
            bars = ax.barh(ys, xs, height=height, color=colours[name], label=name)
            for b, note in zip(bars, notes):
                if note:
                    ax.annotate(note, (b.get_width(), b.get_y() + b.get_height() / 2), xytext=(3, 0),
                                textcoords="offset points", va="center", fontsize=7, color="#B22222")
        ax.set_yticks(range(len(keys)))
        ax.set_yticklabels([labels[k] for k in keys], fontsize=8)
        for k, tick in zip(keys, ax.get_yticklabels()):
            if k.startswith("a0py"):
                tick.set_fontweight("bold")
        ax.invert_yaxis()
        ax.set_xscale("log")
        if values:
            # Bars start at the decade below the smallest value, so their
            # lengths compare as ratios; labels at 1-2-5 steps when the
            # panel spans few decades.
            lo, hi = math.floor(math.log10(min(values))), math.log10(max(values))
            if min(values) < 2 * 10 ** lo:
                lo -= 1  # else the smallest bar would be too short to see
            ax.set_xlim(left=10 ** lo)
            ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0,) if hi - lo > 2 else (1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticks)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(axis="x", labelsize=8)
        ax.set_title(w.title + (" (lower is better)" if wk == "pingpong" else ""), fontsize=10)
        ax.grid(axis="x", which="both", alpha=0.3)
    spare = list(axes.flat)[len(panels):]
    for ax in spare:
        ax.axis("off")
    handles = [Patch(color=colours[n], label=t) for n, t in (
        ("p50", "ping-pong p50"), ("p99", "ping-pong p99"), ("copy", "copy-out receive"),
        ("zero-copy", "zero-copy receive"))]
    if spare:
        spare[0].legend(handles=handles, loc="center", fontsize=9, frameon=False,
                        title="log scales; red: % delivered\nwhere under 100 %", title_fontsize=9)
    else:
        fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    load = res["load"]
    fig.suptitle(f"a0py and its peers across processes, medians of {res['args']['repeats']} runs "
                 f"({res['started'][:10]}); load average {load['before'][0]:.1f} before, "
                 f"{load['after'][0]:.1f} after, {res['machine']['cpus']} CPUs", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 repeat, 0.1 s streams, 500 round trips")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved runs per case (default 3)")
    ap.add_argument("--seconds", type=float, default=None, help="seconds a stream run sends (default 1)")
    ap.add_argument("--round-trips", type=int, default=None,
                    help="timed ping-pong round trips per run (default 5000 x seconds)")
    ap.add_argument("--only", default="", help=f"comma-separated workloads: {','.join(WORKLOADS)}")
    ap.add_argument("--peers", default="",
                    help="comma-separated peers (a key, or a family such as a0py): "
                         + ",".join(k for k, _ in ROWS))
    ap.add_argument("--pin", choices=("none", "cross", "same"), default="none",
                    help="ping-pong placement: scheduler's choice, one core each, both on one")
    ap.add_argument("--buffer-mib", type=int, default=None,
                    help="buffer given to every peer that has one (default 64 MiB); a smaller one "
                         "stays in the CPU's last-level cache")
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
    if args.chart:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise SystemExit("--chart needs matplotlib (pip install -e '.[bench]')") from None
    if args.buffer_mib is not None:
        if args.buffer_mib < 1:
            raise SystemExit("--buffer-mib must be at least 1")
        os.environ["A0BENCH_BUFFER_MIB"] = str(args.buffer_mib)
        _peers.BUFFER_BYTES = args.buffer_mib * MiB
    args.cpus = {"none": None, "cross": (0, 1), "same": (0, 0)}[args.pin]
    if args.cpus and max(args.cpus) >= os.cpu_count():
        args.cpus = None

    if args.from_json:
        with open(args.from_json) as f:
            res = json.load(f)
        cases = load_cases(res)
        return report(cases, res, args)

    peers = select_peers(args.peers)
    workloads = select_workloads(args.only)
    started = time.monotonic()
    res = {"command": "python bench/peers.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
           "machine": transport.machine(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
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
