"""Which processes have a topic's arenas open now, read from ``/proc/PID/maps``.

A publisher or subscriber keeps its topic's arena mapped while it runs (the
per-process arena cache, :mod:`a0py.proto.topic`), and the mapping goes away
with the process, whatever killed it; so the mappings are the one record of
who is attached that cannot go stale. They do not say which side a process
is on (both map the arena read-write, since readers take its lock), and the
maps of another user's processes cannot be read: what this finds is "the
processes of this user (all of them, for root) that have it open".

Used by ``a0py info`` and ``a0py doctor`` (through :mod:`a0py.cli._procs`)
and by the view's connection graph.
"""

import os

__all__ = ["arena_path", "attached", "command_line"]

_SHM_DIR = "/dev/shm"


def arena_path(root, location):
    """The path ``/proc/PID/maps`` shows for a topic arena at ``location``
    (a shm name under a shm root, else a file path)."""
    if root.kind == "shm":
        return _SHM_DIR + location
    return os.path.realpath(location)


def attached(paths):
    """``{path: [pid, ...]}`` for the paths (as :func:`arena_path` gives them)
    that some other live process has mapped; this process is left out."""
    wanted = set(paths)
    found = {}
    me = os.getpid()
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        if pid == me:
            continue
        try:
            with open(f"/proc/{pid}/maps", "rb") as maps:
                data = maps.read()
        except OSError:  # gone meanwhile, or another user's
            continue
        seen = set()
        for line in data.splitlines():
            parts = line.split(None, 5)
            # address perms offset dev inode path; a removed arena reads "path (deleted)"
            if len(parts) < 6 or b"s" not in parts[1]:
                continue
            path = os.fsdecode(parts[5])
            if path in wanted and path not in seen:
                seen.add(path)
                found.setdefault(path, []).append(pid)
    return found


def command_line(pid):
    """``pid``'s command line (a list of str; empty when it is gone or not ours to read)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [os.fsdecode(a) for a in f.read().split(b"\0") if a]
    except OSError:
        return []
