"""``a0py echo TOPIC``: print a topic's packets as they arrive, or one field
of each JSON payload (``--field``), as ``ros2 topic echo`` does.

Invariants: it never creates the topic (a reader that created it would fix
its arena's size before the publisher that knows the size it needs): it
waits for the topic to appear. Ended by Ctrl-C it exits 0, as ``tail``
does; a packet lost to eviction before it was read is reported on stderr,
never dropped silently.
"""

import json
import re

import click

from a0py.cli._common import (
    INITS,
    PUBSUB,
    SECONDS,
    TOPIC,
    Count,
    CountedReads,
    TopicTarget,
    errors_about_topic,
    packet_format_options,
    root_option,
)
from a0py.cli._output import counted, escape_text, print_packet, show_packet, warn
from a0py.cli.ros2 import ros2_document, show_ros2_packet
from a0py.errors import A0TimeoutError, PacketCorruptError


class FieldPath(click.ParamType):
    """A path to one field of a JSON payload: names separated by dots, list
    indexes as ``[N]`` or as a number between dots (``pose.position.x``,
    ``points[0].x``, ``points.0.x``, ``[-1]``). Converts to a tuple of steps:
    str (an object member, or a list index if it is a number) or int (``[N]``:
    a list index)."""

    name = "PATH"
    _STEP = re.compile(r"\.?([^.\[\]]+)|\[(-?\d+)\]")

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        steps, at = [], 0
        while at < len(value):
            match = self._STEP.match(value, at)
            # a name follows a dot, except the first; an index needs none
            if match is None or (match.group(1) is not None and (value[at] == ".") != (at > 0)):
                self.fail(f"{value!r} is not a field path: give names separated by dots and list "
                          "indexes in brackets, such as pose.position.x or points[0].x", param, ctx)
            steps.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
            at = match.end()
        if not steps:
            self.fail("give a field path, such as pose.position.x", param, ctx)
        return tuple(steps)


def _field_text(steps):
    text = ""
    for step in steps:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else step
    return text


_JSON_KINDS = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number",
               bool: "true or false", type(None): "null"}


def _field_of(value, steps):
    """The field of a decoded JSON ``value`` at ``steps`` (:class:`FieldPath`);
    LookupError saying where the path leaves the document."""
    seen = ()
    for step in steps:
        where = f" at {_field_text(seen)!r}" if seen else ""
        if isinstance(value, dict) and not isinstance(step, int):
            if step not in value:
                raise LookupError(f"no member {step!r} in the object{where}")
            value = value[step]
        elif isinstance(value, list) and (isinstance(step, int) or re.fullmatch(r"-?\d+", step)):
            index = int(step)
            if not -len(value) <= index < len(value):
                raise LookupError(f"no index {index} in the list{where} ({counted(len(value), 'item')})")
            value = value[index]
        else:
            kind = _JSON_KINDS.get(type(value), type(value).__name__)
            wanted = f"index [{step}]" if isinstance(step, int) else f"member {step!r}"
            raise LookupError(f"{wanted} asked of {kind}{where}")
        seen += (step,)
    return value


def _show_field(pkt, label, steps, fmt):
    """Print one field of a packet's JSON payload (``echo --field``): a string
    as its text (a JSON string with --json), anything else as one line of
    JSON. A payload that is not JSON, or has no such field, is said on stderr
    and not shown; a gap before the packet is said as ``show_packet`` says it."""
    if pkt.missed:
        click.echo(f"a0py: {label}: {pkt.missed} packets missed before seq {pkt.seq} "
                   "(evicted before they were read)", err=True)
    try:
        document = ros2_document(pkt, label)
        value = _field_of(pkt.json() if document is None else document, steps)
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        warn(f"{label}: packet seq {pkt.seq} is not JSON ({e}); not shown (leave out --field to see it)")
        return
    except LookupError as e:
        warn(f"{label}: packet seq {pkt.seq} has no field {_field_text(steps)!r}: {e}; not shown")
        return
    if isinstance(value, str) and not fmt.json:
        body = escape_text(value)
    else:
        body = json.dumps(value, ensure_ascii=False)
    if fmt.verbose:
        print_packet(pkt, body)
    else:
        click.echo(body)


@click.command()
@click.argument("topic", type=TOPIC)
@root_option
@click.option("--init", type=click.Choice(list(INITS)), default="new", show_default=True,
              help="Start with the oldest packet in the topic, the most recent one, or the first new one.")
@click.option("--newest", is_flag=True,
              help="Skip to the newest packet each time (packets in between are not shown).")
@click.option("-n", "count", type=Count(), default=None, metavar="N",
              help="Stop after N packets.")
@click.option("--once", is_flag=True, help="Stop after one packet (-n 1).")
@click.option("--timeout", type=SECONDS, default=None, metavar="SECONDS",
              help="Stop after SECONDS without a packet (an error if -n/--once wanted more).")
@click.option("--field", type=FieldPath(), default=None, metavar="PATH",
              help="Print only this field of each JSON payload (or ROS 2 message): names and "
                   "list indexes, such as pose.position.x or points[0].x.")
@packet_format_options
def echo(topic, root, init, newest, count, once, timeout, field, fmt):
    """Print a topic's packets as they arrive, one line each: the payload
    as text (bytes that are not UTF-8 and control characters escaped), or,
    on a typed topic, the decoded message (JSON and protobuf messages as
    JSON, long bytes fields as their size; arrays and images summed up;
    ROS 2 messages as `ros2 topic echo` prints them, `---` after each).

    With --field PATH, payloads are read as JSON and only that field is
    printed (a string as its text, anything else as JSON; with --json,
    strings too as JSON). Waits for the topic if it does not exist yet, and
    then prints it from its first packet. Ctrl-C ends it.
    """
    from a0py import INIT_FIRST, ITER_NEWEST, ITER_NEXT, SubscriberSync

    if once:
        if count not in (None, 1):
            raise click.UsageError("--once is -n 1: give one of them")
        count = 1
    if field is not None and (fmt.hex or fmt.raw):
        raise click.UsageError("--field prints a field of a JSON payload: leave out --hex and --raw")
    target = TopicTarget(topic, root)
    # A topic that appears after the command started holds nothing older than
    # the command: all of it is new, from its first packet on.
    start = INITS[init] if target.topic().exists(PUBSUB) else INIT_FIRST
    reads = CountedReads(target, count, timeout)
    try:
        if not reads.topic_appears(PUBSUB, "a publisher to create it",
                                   f"{target.label} did not appear within {timeout} s ({target.where}): "
                                   "start its publisher, or check the name with `a0py ls`"):
            return
        iter_ = ITER_NEWEST if newest else ITER_NEXT
        with errors_about_topic(target), \
                SubscriberSync(target.topic(), init=start, iter=iter_) as sub:

            def receive(wait):
                while True:
                    try:
                        return sub.read_blocking(timeout=wait)
                    except PacketCorruptError as e:
                        warn(f"{e} (skipped)")

            for pkt in reads.items(receive, A0TimeoutError, "packet",
                                   f"; is a publisher running? `a0py info {target.name}` shows the "
                                   "processes that have the topic open"):
                if field is None:
                    if not show_ros2_packet(pkt, target.label, fmt):
                        show_packet(pkt, target.label, fmt)
                else:
                    _show_field(pkt, target.label, field, fmt)
    except KeyboardInterrupt:
        pass

