"""What the bridge of a root (``a0py bridge``, :mod:`a0py.bridge.counts`)
last counted, as ``ls`` and ``info`` show it: the UNDELIVERED cell of a
topic, the rows of ``info TOPIC``, and a line per peer bridge it lost."""

import datetime
import os

from a0py.cli._output import ago


def read_status(root):
    """The status the root's bridge last wrote (a0py.bridge.counts), or None."""
    from a0py.bridge.counts import read_status

    return read_status(root)


def undelivered(status, name):
    """ls's UNDELIVERED cell: the sum of a topic's losses, or - if not carried."""
    from a0py.bridge.counts import LOSS_FIELDS, topic_counts

    counts = topic_counts(status, name)
    if not counts:
        return "-"
    return str(sum(c[f] for c in counts.values() for f in LOSS_FIELDS))


def gone_peer_lines(status):
    """One line per peer bridge the root's bridge has lost (ls, info)."""
    from a0py.bridge.counts import gone_peers

    return [f"bridge: peer bridge {p['id']} on {p['host']} (root {p['root']}) gone since "
            f"{_clock(p['since'])} ({ago(p['since'])}): nothing crosses to or from it"
            for p in gone_peers(status)]


def _clock(wall_ns):
    return datetime.datetime.fromtimestamp(wall_ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")


def info_rows(status, name):
    """info's rows of what the root's bridge counted of topic `name`."""
    from a0py.bridge.counts import LOSS_FIELDS, topic_counts

    counts = topic_counts(status, name)
    if not counts:
        return []
    pid = status.get("pid")
    alive = status.get("running") is True and isinstance(pid, int) and pid > 0 and _pid_alive(pid)
    wall = status.get("time_wall")
    when = f", counted {ago(wall)}" if isinstance(wall, int) else ""
    rows = [("bridge", f"{status['id']} on {status.get('host', '?')}, pid {pid} "
                       f"({'running' if alive else 'stopped'}{when})")]
    for protocol, c in sorted(counts.items()):
        lost = ", ".join(f"{f} {c[f]}" for f in LOSS_FIELDS if c[f]) or "none"
        dup = f", {c['duplicates']} duplicates dropped" if c["duplicates"] else ""
        rows.append(("", f"{protocol}: exported {c['exported']}, imported {c['imported']}{dup}; "
                         f"undelivered: {lost}"))
    for p in status.get("peers", []):
        state = {"up": "up", "stopped": "stopped"}.get(p["state"], "GONE")
        rows.append(("", f"peer {p['id']} on {p['host']} (root {p['root']}): {state} since "
                         f"{_clock(p['since'])}"))
    return rows


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

