"""The report of a `python -m bench.peers` run: a Markdown table of
medians (printed, and written by --markdown) and a chart (--chart)."""

import math

from . import PEERS
from .workloads import WORKLOADS


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
    """(workload key, mode, title) of each column of the table."""
    cols = []
    for wk, cs in cases.items():
        w = WORKLOADS[wk]
        for mode in w.modes:
            if mode == "zero-copy" and not any(c.mode == mode and c.status not in ("n/a", "not installed")
                                               for c in cs):
                continue
            cols.append((wk, mode, w.column + (f", {mode}" if len(w.modes) > 1 else "")))
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
                        lines.append(f"- ping-pong {q[:3]}: {c.peer.label} {_num(v)} µs vs best peer "
                                     f"{best.peer.label} {_num(b)} µs: {b / v:.2f}× (above 1: a0py faster)")
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
                line = (f"- {w.title}{', ' + mode if len(w.modes) > 1 else ''}: {c.peer.label} "
                        f"{_num(s[key])} ({s['delivered']:.1%} delivered) vs best peer "
                        f"{best.peer.label} {_num(b[key])} ({b['delivered']:.1%}): {s[key] / b[key]:.2f}×")
                if best_whole is not None and best_whole is not best:
                    bw = best_whole.summary()
                    line += (f"; vs the best delivering ≥ 99 %, {best_whole.peer.label} "
                             f"{_num(bw[key])}: {s[key] / bw[key]:.2f}×")
                lines.append(line)
    return lines


def markdown(cases, res):
    """The report of a run: its command, machine and load, the table of
    medians, what was not installed or failed, a0py against the best other
    peer, and how each peer is used."""
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
        row = [PEERS[key].label]
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
        out += ["", "Not installed:"] + [f"- {PEERS[k].label}: {r}" for k, r in absent.items()]
    if failed:
        out += ["", "FAILED:"] + [f"- {c.workload.key} {c.peer.label} ({c.mode}): {c.reason}" for c in failed]
    lines = best_peer_lines(cases)
    if lines:
        out += ["", "a0py against the best other peer (same run):"] + lines
    out += ["", "How each peer is used:"]
    buffer = f"{res['args'].get('buffer_mib') or 64} MiB"
    for key in peers:
        peer = PEERS[key]
        zc = f" Zero-copy receive: {peer.zero_copy}." if peer.zero_copy else ""
        out.append(f"- {peer.label}: {peer.notes.format(buffer=buffer)}.{zc}")
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
    labels = {k: PEERS[k].label for k in res["peers"]}
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
