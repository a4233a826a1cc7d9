"""``a0py hz`` and ``a0py bw``: a topic's publishing rate and the bandwidth
its payloads use, once a second, as ``ros2 topic hz|bw`` do.

Invariants: they never create a topic; they wait for it to appear, and
count a topic that appeared after they started from its first packet.
Ended by Ctrl-C they exit 0; packets lost to eviction before they were
read are said in the report line (``N missed``), never dropped silently.
"""

import itertools
import math
import threading
import time
from collections import deque

import click

from a0py.cli._common import (
    APPEAR_POLL_S,
    PUBSUB,
    SECONDS,
    TOPIC,
    BoundedInt,
    TopicTarget,
    errors_about_topic,
    root_option,
)
from a0py.cli._output import counted, human_bytes, warn
from a0py.proto.packets import TIME_MONO

_REPORT_PERIOD_S = 1.0
# The most packets hz and bw compute over (each report walks the whole window).
MAX_WINDOW = 1_000_000


class _RecentPackets:
    """The last packets of one topic (publish time, payload size), filled by
    a callback subscriber on the dispatcher thread and read by the command's
    thread once a period."""

    def __init__(self, target, size):
        self.target = target
        self.times = deque(maxlen=size)
        self.sizes = deque(maxlen=size)
        self.new = 0
        self.missed = 0
        self.corrupt = 0
        self.subscriber = None
        self._lock = threading.Lock()

    def add(self, pkt):
        # The writer's monotonic clock (system-wide) times the publishing,
        # not this process's scheduling; receipt time only if it is missing.
        stamp = pkt.headers.get(TIME_MONO)
        t = int(stamp) / 1e9 if stamp is not None and stamp.isdigit() else time.monotonic()
        with self._lock:
            self.times.append(t)
            self.sizes.append(len(pkt.payload))
            self.new += 1
            self.missed += pkt.missed

    def take(self):
        """(times, sizes, new since the last take, missed since the last take)."""
        with self._lock:
            snapshot = (list(self.times), list(self.sizes), self.new, self.missed)
            self.new = 0
            self.missed = 0
        return snapshot


def _hz_line(times, sizes):
    if len(times) < 2:
        return "1 packet so far"
    intervals = [b - a for a, b in itertools.pairwise(times)]
    span = times[-1] - times[0]
    rate = (len(times) - 1) / span if span > 0 else math.inf
    mean = sum(intervals) / len(intervals)
    std = math.sqrt(sum((d - mean) ** 2 for d in intervals) / len(intervals))
    return (f"{rate:.3f} Hz  min {min(intervals) * 1e3:.3f} ms  max {max(intervals) * 1e3:.3f} ms  "
            f"std dev {std * 1e3:.3f} ms  window {len(times)}")


def _bw_line(times, sizes):
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    per_s = f"{human_bytes(sum(sizes[1:]) / span)}/s" if span > 0 else "-/s"
    return (f"{per_s} from {counted(len(sizes), 'packet')}  mean {human_bytes(sum(sizes) / len(sizes))}  "
            f"min {human_bytes(min(sizes))}  max {human_bytes(max(sizes))}")


def _monitor(topics, root, window, duration, line):
    """Subscribe to each topic (once it exists) and print one line per
    topic each period, made by ``line(times, sizes)``, until Ctrl-C or
    ``duration`` seconds."""
    from a0py import INIT_AWAIT_NEW, INIT_FIRST, Subscriber

    names = list(dict.fromkeys(topics))
    windows = [_RecentPackets(TopicTarget(name, root), window) for name in names]
    width = max(len(name) for name in names)
    deadline = None if duration is None else time.monotonic() + duration
    try:
        next_report = time.monotonic() + _REPORT_PERIOD_S
        appearing = set()  # topics that did not exist at the start: counted from their first packet
        for w in windows:
            if not w.target.topic().exists(PUBSUB):
                appearing.add(w.target.name)
                warn(f"{w.target.label} does not exist yet ({w.target.where}); waiting for a publisher to create it")
        while True:
            for w in windows:
                if w.subscriber is None and w.target.topic().exists(PUBSUB):
                    start = INIT_FIRST if w.target.name in appearing else INIT_AWAIT_NEW
                    with errors_about_topic(w.target):
                        w.subscriber = Subscriber(w.target.topic(), w.add, init=start)
            now = time.monotonic()
            wake = next_report if deadline is None else min(next_report, deadline)
            if now < wake:
                waiting = any(w.subscriber is None for w in windows)  # look for them again soon
                time.sleep(min(wake - now, APPEAR_POLL_S) if waiting else wake - now)
                continue
            if now >= next_report:
                # once a period; after a stall (a suspended terminal), no burst of catch-up reports
                next_report = max(next_report + _REPORT_PERIOD_S, now + _REPORT_PERIOD_S / 2)
                for w in windows:
                    times, sizes, new, missed = w.take()
                    if w.subscriber is None:
                        text = "waiting for the topic to be created"
                    elif not times:
                        text = "no packets yet"
                    elif not new:
                        text = "no new packets"
                    else:
                        text = line(times, sizes)
                    if missed:
                        text += f"  ({missed} missed)"
                    click.echo(f"{w.target.name:<{width}}  {text}" if len(names) > 1 else text)
            if deadline is not None and now >= deadline:
                return
    except KeyboardInterrupt:
        pass
    finally:
        for w in windows:
            if w.subscriber is not None:
                w.subscriber.close()


def _monitor_options(window):
    """``--root``, ``-w/--window`` (default ``window`` packets) and ``--duration``,
    the options hz and bw share, in that order."""
    def add(command):
        command = click.option("--duration", type=SECONDS, default=None, metavar="SECONDS",
                               help="Stop after SECONDS (default: run until Ctrl-C).")(command)
        command = click.option("-w", "--window", type=BoundedInt(2, MAX_WINDOW), default=window,
                               show_default=True, metavar="N", help="Compute over the last N packets.")(command)
        return root_option(command)

    return add


@click.command()
@click.argument("topics", nargs=-1, required=True, type=TOPIC)
@_monitor_options(window=10000)
def hz(topics, root, window, duration):
    """Print the publishing rate of one or more topics, once a second:
    average rate, shortest and longest interval, their standard deviation.

    Intervals are measured between the publishers' timestamps (the packets'
    a0_time_mono header), so the figures do not depend on how fast this
    command is scheduled. Waits for topics that do not exist yet.
    """
    _monitor(topics, root, window, duration, _hz_line)


@click.command()
@click.argument("topic", type=TOPIC)
@_monitor_options(window=100)
def bw(topic, root, window, duration):
    """Print the bandwidth a topic's packets use, once a second: payload
    bytes per second and the payloads' mean, smallest and largest size.

    Waits for the topic if it does not exist yet.
    """
    _monitor([topic], root, window, duration, _bw_line)

