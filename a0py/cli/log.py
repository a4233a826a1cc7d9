"""``a0py log TOPIC``: print a topic's log messages at a level or above
(a0py.LogListener, :mod:`a0py.proto.log`).

Like ``echo``, it never creates the topic's log arena (the program that logs
does): it waits for it to appear.
"""

import queue
import sys

import click

from a0py.cli._common import (
    INITS,
    SECONDS,
    TOPIC,
    CheckedValue,
    Count,
    CountedReads,
    TopicTarget,
    errors_about_topic,
    root_option,
)
from a0py.cli._output import escape_text

LOG = "log"
_COLOURS = {"CRIT": ("red", True), "ERR": ("red", False), "WARN": ("yellow", False), "DBG": ("bright_black", False)}


class _Level(CheckedValue):
    """A log level: crit, err, warn, info, dbg (or critical, error, warning, debug)."""

    name = "LEVEL"

    def check(self, value):
        from a0py.proto.log import parse_level

        return parse_level(value)


@click.command()
@click.argument("topic", type=TOPIC)
@root_option
@click.option("-l", "--level", type=_Level(), default="dbg", show_default=True,
              help="Show messages at this level or above: crit, err, warn, info, dbg.")
@click.option("--init", type=click.Choice(list(INITS)), default="new", show_default=True,
              help="Start with the oldest message still kept, the most recent one, or the first new one.")
@click.option("-n", "count", type=Count(), default=None, metavar="N",
              help="Stop after N messages.")
@click.option("--timeout", type=SECONDS, default=None, metavar="SECONDS",
              help="Stop after SECONDS without a message (an error if -n wanted more).")
def log(topic, root, level, init, count, timeout):
    """Print a topic's log messages as they are written: time, level, the
    logger's name when known, and the text.

    Waits for the topic's log if it does not exist yet, and then prints it
    from its first message. Ctrl-C ends it.
    """
    from a0py import INIT_FIRST, LogListener
    from a0py.proto.log import format_line, log_level

    target = TopicTarget(topic, root)
    reads = CountedReads(target, count, timeout)
    colour = sys.stdout.isatty()
    messages = queue.Queue()
    listener = None
    # A log that appears after the command started is all new: from its first message.
    start = INITS[init] if target.topic().exists(LOG) else INIT_FIRST
    try:
        if not reads.topic_appears(LOG, "a program to log to it",
                                   f"{target.label}: nothing logged within {timeout} s: start the "
                                   "program that logs, or check the name with `a0py ls`"):
            return
        with errors_about_topic(target, LOG):
            listener = LogListener(target.topic(), level, messages.put, init=start)
        for pkt in reads.items(lambda wait: messages.get(timeout=wait), queue.Empty, "log message"):
            if pkt.missed:
                click.echo(f"a0py: {target.label}: {pkt.missed} log messages missed before seq {pkt.seq} "
                           "(evicted before they were read)", err=True)
            # Messages keep their lines (a traceback reads as one), never escape sequences.
            line = escape_text(format_line(pkt), keep_lines=True)
            name = log_level(pkt).name
            if colour and name in _COLOURS:
                fg, bold = _COLOURS[name]
                line = click.style(line, fg=fg, bold=bold)
            click.echo(line)
    except KeyboardInterrupt:
        pass
    finally:
        if listener is not None:
            listener.close()
