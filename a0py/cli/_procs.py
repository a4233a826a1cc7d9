"""Which processes have a topic's arenas open now (:mod:`a0py.proto.processes`),
and how the command line names one."""

import os

from a0py.proto.processes import arena_path, attached, command_line

__all__ = ["arena_path", "attached", "describe"]


def describe(pid, width=60):
    """``1234 python3 pub.py``: the pid and its command line, cut to ``width``."""
    argv = command_line(pid)
    if argv:
        argv[0] = os.path.basename(argv[0])
    command = " ".join(" ".join(argv).split()) or "?"  # one line, whatever the arguments hold
    if len(command) > width:
        command = command[: width - 1] + "…"
    return f"{pid} {command}"
