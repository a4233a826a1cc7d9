"""Commands on topics, in the habits of ``ros2 topic``: ``ls``, ``echo``,
``pub``, ``hz``, ``bw``, ``info`` and ``rm`` (the last two also take
``--shm/--file`` and then work on one raw arena, as ``a0py.cli.arenas``);
``a0py topic list|echo|pub|hz|bw|info`` are the same commands under ROS 2's
names (:data:`topic_group`).

Invariants:

* Commands that read (``echo``, ``hz``, ``bw``) never create a topic: a
  reader that created it would fix its arena's size before the publisher
  that knows the size it needs. They wait for the topic to appear instead.
  ``pub`` creates it (``--size`` for the size), as a0py.Publisher does, and
  only once it has a packet that fits: a bad DATA, or one too large for the
  arena it would create, creates nothing.
* ``ls``, ``info`` and ``rm`` open arenas by name and close them before
  they return, and never take a lock for longer than one copy.
* A streaming command (``echo``, ``hz``, ``bw``, ``pub --rate``) ended by
  Ctrl-C exits 0, as ``tail`` does; a packet lost to eviction before the
  command read it is reported on stderr, never dropped silently.
"""

import itertools
import json
import math
import re
import sys
import threading
import time
from collections import deque

import click

from a0py.cli import _procs
from a0py.cli._common import (
    APPEAR_POLL_S,
    RATE,
    SECONDS,
    TOPIC,
    BoundedInt,
    ByteSize,
    CliError,
    Count,
    TopicTarget,
    errors_about_topic,
    packet_format_options,
    parse_header,
    prepare_payload,
    root_option,
    size_warnings_on_stderr,
    wait_for_topic,
)
from a0py.cli._output import (
    escape_text,
    human_bytes,
    human_seconds,
    print_fields,
    print_packet,
    print_table,
    show_packet,
    wall_time,
)
from a0py.errors import A0Error, A0TimeoutError, ArgumentError, PacketCorruptError
from a0py.proto.packets import TIME_MONO, TIME_WALL, WRITER_ID

PUBSUB = "pubsub"
SCHEMA = "schema"
_SHM_DIR = "/dev/shm"
_INITS = {"oldest": "oldest", "recent": "most_recent", "new": "await_new"}
_REPORT_PERIOD_S = 1.0
# The most packets hz and bw compute over (each report walks the whole window).
MAX_WINDOW = 1_000_000


def _warn(message):
    click.echo(f"a0py: {message}", err=True)


def _open_arena(topic, protocol):
    """The arena of ``topic``'s ``protocol``, opened by name (not created,
    not cached: the caller closes it)."""
    from a0py import Arena

    location = topic.location(protocol)
    if topic.root.kind == "shm":
        return Arena.shm(location)
    return Arena.file(location)


def _existing(topic, protocols=None):
    """The protocols of ``topic`` whose arenas exist: every one ``ls`` lists
    (a broker's too), or those of ``protocols``."""
    if protocols is None:
        return topic.protocols()
    return [p for p in protocols if topic.exists(p)]


# -- reading an arena's packets without subscribing (ls, info)


class _RingState:
    """What ``ls`` and ``info`` show of a topic arena: its ring, and the
    newest packet (or, with ``all_packets``, every packet: the writers seen)."""

    def __init__(self, arena, all_packets):
        from a0py import Packet, Transport

        transport = Transport(arena)
        with transport.lock() as t:
            self.empty = t.empty
            self.seq_low, self.seq_high = t.seq_low, t.seq_high
            self.used = t.used_space
            newest = None
            if not self.empty and not all_packets:
                t.jump_tail()
                newest = (t.seq_high, t.frame().tobytes())
        frames = transport.read_many() if all_packets else ([newest] if newest else [])
        self.count = 0 if self.empty else self.seq_high - self.seq_low + 1
        self.newest = None  # (seq, wall time ns, writer id)
        self.writers = {}   # writer id -> (last seq, wall time ns)
        self.corrupt = 0
        for seq, data in frames:
            try:
                headers = Packet.from_bytes(data).headers
                wall = int(headers.get(TIME_WALL, 0))
                writer = headers.get(WRITER_ID, "?")
            except (A0Error, ValueError):
                self.corrupt += 1
                continue
            self.writers[writer] = (seq, wall)
            if self.newest is None or seq > self.newest[0]:
                self.newest = (seq, wall, writer)


def _age(wall_ns):
    return human_seconds(max(0.0, time.time() - wall_ns / 1e9)) + " ago"


def _arena_paths(topic, protocols):
    return {p: _procs.arena_path(topic.root, topic.location(p)) for p in protocols}


# -- ls


@click.command()
@root_option
@click.option("-q", "--quiet", is_flag=True, help="Print only the topic names, one a line.")
@click.option("-a", "--all", "every", is_flag=True,
              help="Also list the actors' mailboxes on this machine, in a table of their own.")
def ls(root, quiet, every):
    """List the topics: protocols, arena sizes, packets, newest packet's age,
    and the processes that have the topic open now.

    PROCESSES counts the live processes (yours, or everyone's for root)
    that have one of the topic's arenas mapped: its publishers,
    subscribers and servers. PACKETS and NEWEST are the pubsub arena's.
    When a bridge (`a0py bridge`) runs or ran on this root, UNDELIVERED is
    what it could not deliver of each topic it carried, all protocols
    together (`a0py info TOPIC` for the details; - for a topic it did not
    carry).

    With --all, then the mailboxes of arena actors (a0py.actor), which
    belong to no root: QUEUED frames not yet taken, the ACTOR's pid if it
    is alive, PROCESSES as above. -q prints topic names only.
    """
    from a0py.proto.topic import Root, list_topics

    root = root or Root.parse(None)
    topics = list_topics(root)
    if quiet:
        for name in topics:
            click.echo(name)
        return
    if topics:
        _topic_table(root, topics)
    else:
        _warn(f"no topics under {root.spec()} (publish with `a0py pub TOPIC DATA`)")
    if every:
        _mailbox_table(bool(topics))


def _topic_table(root, topics):
    from a0py.proto.topic import Topic

    wanted = {}
    for name, protocols in topics.items():
        for protocol, path in _arena_paths(Topic(name, root=root), protocols).items():
            wanted[path] = (name, protocol)
    processes = {}
    for path, pids in _procs.attached(wanted).items():
        processes.setdefault(wanted[path][0], set()).update(pids)
    bridge = _bridge_status(root)
    rows = []
    for name, protocols in topics.items():
        topic = Topic(name, root=root)
        size, packets, newest = 0, "-", "-"
        for protocol in protocols:
            try:
                with _open_arena(topic, protocol) as arena:
                    size += arena.size
                    if protocol == PUBSUB:
                        state = _RingState(arena, all_packets=False)
                        packets = str(state.count)
                        if state.newest is not None:
                            newest = _age(state.newest[1])
            except A0Error as e:
                _warn(f"{TopicTarget(name, root).label}: {protocol} arena: {e} (`a0py info {name}` for more)")
        row = [name, ",".join(protocols), human_bytes(size), packets, newest,
               str(len(processes.get(name, ())))]
        if bridge is not None:
            row.append(_undelivered(bridge, name))
        rows.append(row)
    columns = ["TOPIC", "PROTOCOLS", "SIZE", "PACKETS", "NEWEST", "PROCESSES"]
    if bridge is not None:
        columns.append("UNDELIVERED")
    print_table(columns, rows, right=("SIZE", "PACKETS", "PROCESSES", "UNDELIVERED"))
    for line in _gone_lines(bridge):
        _warn(line)


def _mailbox_table(after_topics):
    """``ls --all``'s table of the actors' mailboxes (none: a note on stderr)."""
    from a0py import Arena, Deadman, Transport
    from a0py.actor.arena import arena_name, list_mailboxes

    names = list_mailboxes()
    if not names:
        _warn("no actor mailboxes on this machine")
        return
    shm = {name: arena_name(name) for name in names}
    processes = _procs.attached(_SHM_DIR + "/" + n for n in shm.values())
    rows = []
    for name in names:
        try:
            with Arena.shm(shm[name]) as arena:
                size = arena.size
                with Transport(arena).lock() as t:
                    queued = 0 if t.empty else t.seq_high - t.seq_low + 1
                owner = Deadman(arena).owner_pid
        except A0Error as e:
            _warn(f"actor mailbox {escape_text(shm[name])}: {e}")
            continue
        users = processes.get(_SHM_DIR + "/" + shm[name], ())
        rows.append([escape_text(name), human_bytes(size), str(queued),
                     f"pid {owner}" if owner else "not running", str(len(users))])
    if after_topics:
        click.echo()
    print_table(["MAILBOX", "SIZE", "QUEUED", "ACTOR", "PROCESSES"], rows,
                right=("SIZE", "QUEUED", "PROCESSES"))


# -- what the bridge of the root counted (ls, info)


def _bridge_status(root):
    """The status the root's bridge last wrote (a0py.bridge.counts), or None."""
    from a0py.bridge.counts import read_status

    return read_status(root)


def _undelivered(status, name):
    """ls's UNDELIVERED cell: the sum of a topic's losses, or - if not carried."""
    from a0py.bridge.counts import LOSS_FIELDS, topic_counts

    counts = topic_counts(status, name)
    if not counts:
        return "-"
    return str(sum(c[f] for c in counts.values() for f in LOSS_FIELDS))


def _gone_lines(status):
    """One line per peer bridge the root's bridge has lost (ls, info)."""
    from a0py.bridge.counts import gone_peers

    return [f"bridge: peer bridge {p['id']} on {p['host']} (root {p['root']}) gone since "
            f"{_clock(p['since'])} ({_age(p['since'])}): nothing crosses to or from it"
            for p in gone_peers(status)]


def _clock(wall_ns):
    import datetime

    return datetime.datetime.fromtimestamp(wall_ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")


def _bridge_rows(status, name):
    """info's rows of what the root's bridge counted of topic `name`."""

    from a0py.bridge.counts import LOSS_FIELDS, topic_counts

    counts = topic_counts(status, name)
    if not counts:
        return []
    pid = status.get("pid")
    alive = status.get("running") is True and isinstance(pid, int) and pid > 0 and _pid_alive(pid)
    wall = status.get("time_wall")
    when = f", counted {_age(wall)}" if isinstance(wall, int) else ""
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
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- info (a topic; an arena with --shm/--file)


@click.command()
@click.argument("topic", type=TOPIC, required=False)
@root_option
@click.option("--shm", metavar="NAME", help="Show this shared memory arena instead (as in /dev/shm).")
@click.option("--file", "path", metavar="PATH", help="Show this file arena instead.")
def info(topic, root, shm, path):
    """Show a topic: its schema (name and encoding, for a typed topic), its
    arenas, its packets, the writers seen in its ring, and the processes that
    have it open.

    With --shm NAME or --file PATH instead of TOPIC: an arena's header and
    ring state.
    """
    if topic is None:
        if shm is None and path is None:
            raise click.UsageError("name a topic (a0py info TOPIC) or an arena (--shm NAME or --file PATH)")
        from a0py.cli import arenas

        return click.get_current_context().invoke(arenas.info, shm=shm, path=path)
    if shm is not None or path is not None:
        raise click.UsageError("give a TOPIC or an arena (--shm NAME or --file PATH), not both")
    target = TopicTarget(topic, root)
    topic = target.topic()
    protocols = _existing(topic)
    if not protocols:
        raise CliError(f"{target.label} does not exist: no arenas under {topic.root.spec()}; "
                       "`a0py ls` lists the topics")
    paths = _arena_paths(topic, protocols)
    attached = _procs.attached(paths.values())
    rows = [("topic", topic.name), ("root", topic.root.spec())]
    if SCHEMA in protocols:
        rows.append(("schema", _schema_text(topic)))
    for protocol in protocols:
        if protocol == SCHEMA:
            continue
        try:
            with _open_arena(topic, protocol) as arena:
                state = _RingState(arena, all_packets=protocol == PUBSUB)
                size = arena.size
        except A0Error as e:
            rows.append((protocol, f"{paths[protocol]}: {e}"))
            continue
        noun = "packet" if protocol == PUBSUB else "frame"
        frames = "empty" if state.empty else f"{_count(state.count, noun)} (seq {state.seq_low}..{state.seq_high})"
        rows.append((protocol, f"{paths[protocol]}, {human_bytes(size)}, {frames}, {human_bytes(state.used)} used"))
        rows.extend(_owner_rows(topic, protocol))
        if protocol != PUBSUB:
            continue
        if state.newest is not None:
            seq, wall, writer = state.newest
            rows.append(("newest", f"seq {seq} at {wall_time(wall)} ({_age(wall)}), writer {writer}"))
        if state.writers:
            rows.append(("writers", f"{len(state.writers)} in the ring"))
            for writer, (seq, wall) in sorted(state.writers.items(), key=lambda kv: -kv[1][0]):
                rows.append(("", f"{writer}: last seq {seq}, {_age(wall)}"))
        if state.corrupt:
            rows.append(("corrupt", f"{state.corrupt} frames are not a0py packets"))
    rows.extend(_bridge_rows(_bridge_status(topic.root), topic.name))
    pids = sorted({pid for found in attached.values() for pid in found})
    if not pids:
        rows.append(("processes", "none has it open"))
    for i, pid in enumerate(pids):
        uses = ",".join(p for p in protocols if pid in attached.get(paths[p], ()))
        rows.append(("processes" if i == 0 else "", f"{_procs.describe(pid)} ({uses})"))
    print_fields(rows)


def _schema_text(topic):
    """The ``schema`` row of ``info``: name, encodings, size; or what is wrong."""
    from a0py.proto.errors import SchemaError
    from a0py.proto.schema import read_schema_arena

    try:
        with _open_arena(topic, SCHEMA) as arena:
            found = read_schema_arena(arena, topic)
    except (A0Error, SchemaError) as e:
        return f"unreadable: {e}"
    if found is None:
        return "none yet (its record is being written)"
    schema, inferred = found
    if not schema.encoding:
        return f"raw bytes{f' ({schema.name})' if schema.name else ''}"
    origin = ", inferred by pub_json" if inferred else ""
    return (f"{schema.name}, encoding {schema.encoding} ({human_bytes(len(schema.data))}{origin}); "
            f"messages {schema.message_encoding}")


def _count(n, noun):
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _owner_rows(topic, protocol):
    """The live server of an rpc/prpc arena, the owner of a deadman, the
    broker running on a broker's request arena, the client reading a broker's
    client arena."""
    try:
        if protocol in ("broker", "broker_client"):
            from a0py import Deadman

            with _open_arena(topic, protocol) as arena:
                pid = Deadman(arena).owner_pid
            what = "the broker" if protocol == "broker" else "the client"
            return [("owner", f"pid {pid} ({what})" if pid else f"none alive ({what} does not run)")]
        if protocol in ("rpc", "prpc"):
            from a0py.proto.rpc import server_pid

            pid = server_pid(topic, protocol)
            return [("server", f"pid {pid}" if pid else "none alive")]
        if protocol == "deadman":
            from a0py import Deadman

            pid = Deadman(topic).state().owner_pid
            return [("owner", f"pid {pid}" if pid else "free")]
    except A0Error as e:
        return [("", f"{protocol}: {e}")]
    return []


# -- echo


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
                raise LookupError(f"no index {index} in the list{where} ({_count(len(value), 'item')})")
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
        value = _field_of(pkt.json(), steps)
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
        _warn(f"{label}: packet seq {pkt.seq} is not JSON ({e}); not shown (leave out --field to see it)")
        return
    except LookupError as e:
        _warn(f"{label}: packet seq {pkt.seq} has no field {_field_text(steps)!r}: {e}; not shown")
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
@click.option("--init", type=click.Choice(list(_INITS)), default="new", show_default=True,
              help="Start with the oldest packet in the topic, the most recent one, or the first new one.")
@click.option("--newest", is_flag=True,
              help="Skip to the newest packet each time (packets in between are not shown).")
@click.option("-n", "count", type=Count(), default=None, metavar="N",
              help="Stop after N packets.")
@click.option("--once", is_flag=True, help="Stop after one packet (-n 1).")
@click.option("--timeout", type=SECONDS, default=None, metavar="SECONDS",
              help="Stop after SECONDS without a packet (an error if -n/--once wanted more).")
@click.option("--field", type=FieldPath(), default=None, metavar="PATH",
              help="Print only this field of each JSON payload: names and list indexes, "
                   "such as pose.position.x or points[0].x.")
@packet_format_options
def echo(topic, root, init, newest, count, once, timeout, field, fmt):
    """Print a topic's packets as they arrive, one line each: the payload
    as text (bytes that are not UTF-8 and control characters escaped), or,
    on a typed topic, the decoded message (JSON and protobuf messages as
    JSON, long bytes fields as their size; arrays and images summed up).

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
    start = _INITS[init] if target.topic().exists(PUBSUB) else INIT_FIRST
    try:
        if not wait_for_topic(target, PUBSUB, timeout, "a publisher to create it"):
            if count is not None:
                raise CliError(f"{target.label} did not appear within {timeout} s ({target.where}): start its publisher, "
                               "or check the name with `a0py ls`")
            return
        iter_ = ITER_NEWEST if newest else ITER_NEXT
        with errors_about_topic(target), \
                SubscriberSync(target.topic(), init=start, iter=iter_) as sub:
            got = 0
            while count is None or got < count:
                try:
                    pkt = sub.read_blocking(timeout=timeout)
                except A0TimeoutError:
                    if count is not None:
                        raise CliError(f"{target.label}: no packet within {timeout} s (got {got} of {count}); "
                                       f"is a publisher running? `a0py info {target.name}` shows the "
                                       "processes that have the topic open") from None
                    return
                except PacketCorruptError as e:
                    _warn(f"{e} (skipped)")
                    continue
                got += 1
                if field is None:
                    show_packet(pkt, target.label, fmt)
                else:
                    _show_field(pkt, target.label, field, fmt)
    except KeyboardInterrupt:
        pass


# -- pub


def _paced(payloads, rate):
    """``payloads`` (an iterable), the n-th no earlier than n / ``rate``
    seconds after the first (a schedule, so delays do not add up)."""
    start = time.monotonic()
    for n, payload in enumerate(payloads):
        if rate is not None and n:
            delay = start + n / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        yield payload


def _size_option(n):
    """A size in bytes as ``--size`` reads it, in the largest whole unit."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _open_publisher(target, topic, packet_size):
    """The publisher of ``topic``, creating the topic only if a packet of
    ``packet_size`` bytes (headers included) fits the arena it would get:
    CliError (nothing created) if not."""
    from a0py import Publisher
    from a0py.proto.pubsub import packets_that_fit, size_for_packets

    if not topic.exists(PUBSUB):
        size = topic.size_for(PUBSUB)
        if not packets_that_fit(size, packet_size):
            raise CliError(f"{target.label}: a packet of {packet_size} bytes (headers included) does not fit "
                           f"the {human_bytes(size)} pubsub arena this would create; nothing created: give "
                           f"--size {_size_option(size_for_packets(packet_size))} (holds 8 of them)")
    return Publisher(topic)


@click.command()
@click.argument("topic", type=TOPIC)
@click.argument("data")
@root_option
@click.option("-r", "--rate", type=RATE, default=None, metavar="HZ",
              help="Publish HZ times a second (until --times or Ctrl-C).")
@click.option("-t", "--times", type=Count(), default=None, metavar="N",
              help="Publish N times (default 1, or until Ctrl-C with --rate).")
@click.option("--once", is_flag=True, help="Publish once and exit (--times 1).")
@click.option("--lines", is_flag=True,
              help="With DATA -: each line of standard input is one packet, published as it is read.")
@click.option("--json", "as_json", is_flag=True,
              help="DATA is JSON: checked, and sent with the header content-type: application/json.")
@click.option("--hex", "as_hex", is_flag=True, help="DATA is hex digits (00ff10), not text.")
@click.option("-H", "--header", "headers", multiple=True, metavar="KEY=VALUE",
              help="Add a header to each packet (repeatable).")
@click.option("--size", type=ByteSize(), default=None,
              help="The topic's arena size if this creates the topic (bytes, or 64K, 16M); default 4M.")
@click.option("-v", "--verbose", is_flag=True, help="Print the seq of each packet published.")
def pub(topic, data, root, rate, times, once, lines, as_json, as_hex, headers, size, verbose):
    """Publish DATA to a topic (creating the topic if it does not exist).

    DATA is text (sent as its UTF-8 bytes), hex digits with --hex, JSON with
    --json, or - for standard input (all of it as one packet, or each line
    as one with --lines). Without --rate or --times it publishes once.

    The topic is created with the first packet, and only if that packet fits
    it: a DATA too large for --size creates nothing. Packets that fit the
    topic only a few times get a warning naming the size to give it.
    """
    from a0py import Packet

    if as_json and as_hex:
        raise click.UsageError("choose one of --json and --hex")
    if lines and data != "-":
        raise click.UsageError("--lines reads standard input: give DATA as -")
    if once:
        if times not in (None, 1):
            raise click.UsageError("--once is --times 1: give one of them")
        if lines:
            raise click.UsageError("--once publishes DATA once: leave out --lines")
        times = 1
    if lines and times is not None:
        raise click.UsageError("--lines publishes each line once: leave out --times")
    extra = [parse_header(item) for item in headers]
    if as_json:
        extra.append(("content-type", "application/json"))
    target = TopicTarget(topic, root)
    try:
        topic = target.topic(size=size)
    except ArgumentError as e:  # the size (the name and root are checked already)
        raise click.BadParameter(str(e), param_hint="'--size'") from None
    if lines:
        def payloads():
            for number, line in enumerate(sys.stdin.buffer, 1):
                try:
                    yield prepare_payload(line.rstrip(b"\r\n"), f"line {number} of standard input", as_hex, as_json)
                except click.BadParameter as e:
                    raise CliError(f"{target.label}: {e.format_message()}; the {number - 1} lines "
                                   "before it were published") from None
    else:
        # Read and checked before the topic is touched: a bad DATA creates nothing.
        raw = sys.stdin.buffer.read() if data == "-" else data.encode("utf-8", "surrogateescape")
        one = prepare_payload(raw, "standard input" if data == "-" else repr(data), as_hex, as_json)
        count = times if times is not None or rate is not None else 1

        def payloads():
            n = 0
            while count is None or n < count:
                yield one
                n += 1
    publisher = None
    try:
        with errors_about_topic(target), size_warnings_on_stderr():
            for payload in _paced(payloads(), rate):
                if publisher is None:
                    # headers included: the fixed part, these headers, padding
                    size = len(Packet(extra, b"").to_bytes()) + len(payload)
                    publisher = _open_publisher(target, topic, size)
                seq = publisher.pub(payload, extra)
                if verbose:
                    click.echo(seq)
    except KeyboardInterrupt:
        pass
    finally:
        if publisher is not None:
            publisher.close()


# -- hz and bw


class _Window:
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
    return (f"{per_s} from {_count(len(sizes), 'packet')}  mean {human_bytes(sum(sizes) / len(sizes))}  "
            f"min {human_bytes(min(sizes))}  max {human_bytes(max(sizes))}")


def _monitor(topics, root, window, duration, line):
    """Subscribe to each topic (once it exists) and print one line per
    topic each period, made by ``line(times, sizes)``, until Ctrl-C or
    ``duration`` seconds."""
    from a0py import INIT_AWAIT_NEW, INIT_FIRST, Subscriber

    names = list(dict.fromkeys(topics))
    windows = [_Window(TopicTarget(name, root), window) for name in names]
    width = max(len(name) for name in names)
    deadline = None if duration is None else time.monotonic() + duration
    try:
        next_report = time.monotonic() + _REPORT_PERIOD_S
        appearing = set()  # topics that did not exist at the start: counted from their first packet
        for w in windows:
            if not w.target.topic().exists(PUBSUB):
                appearing.add(w.target.name)
                _warn(f"{w.target.label} does not exist yet ({w.target.where}); waiting for a publisher to create it")
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


@click.command()
@click.argument("topics", nargs=-1, required=True, type=TOPIC)
@root_option
@click.option("-w", "--window", type=BoundedInt(2, MAX_WINDOW), default=10000, show_default=True, metavar="N",
              help="Compute over the last N packets.")
@click.option("--duration", type=SECONDS, default=None, metavar="SECONDS",
              help="Stop after SECONDS (default: run until Ctrl-C).")
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
@root_option
@click.option("-w", "--window", type=BoundedInt(2, MAX_WINDOW), default=100, show_default=True, metavar="N",
              help="Compute over the last N packets.")
@click.option("--duration", type=SECONDS, default=None, metavar="SECONDS",
              help="Stop after SECONDS (default: run until Ctrl-C).")
def bw(topic, root, window, duration):
    """Print the bandwidth a topic's packets use, once a second: payload
    bytes per second and the payloads' mean, smallest and largest size.

    Waits for the topic if it does not exist yet.
    """
    _monitor([topic], root, window, duration, _bw_line)


# -- rm (topics; an arena with --shm/--file)


@click.command()
@click.argument("topics", nargs=-1, type=TOPIC)
@click.option("--all", "every", is_flag=True,
              help="Remove every topic under the root (what `ls` lists; actor mailboxes stay).")
@root_option
@click.option("--shm", metavar="NAME", help="Remove this shared memory arena instead (as in /dev/shm).")
@click.option("--file", "path", metavar="PATH", help="Remove this file arena instead.")
@click.option("-f", "--force", is_flag=True,
              help="No error if it does not exist (with --shm/--file: remove it even if it is not an a0py arena).")
@click.option("-v", "--verbose", is_flag=True, help="Print each topic removed, with its protocols.")
def rm(topics, every, root, shm, path, force, verbose):
    """Remove topics: all their arenas (pubsub, rpc, cfg, ..., and a fact
    broker's, as `ls` lists them), and under a directory root the
    directories that leaves empty.

    Processes that have a topic open keep using its removed arenas until
    they close them; programs started later create fresh ones. With --shm
    NAME or --file PATH instead of topics: remove one raw arena (a dead
    actor's mailbox: --shm a0py-actor:NAME; `ls --all` lists them).
    """
    from a0py.proto.topic import Root, Topic, list_topics, remove_empty_dirs

    if shm is not None or path is not None:
        if topics or every:
            raise click.UsageError("give topics (or --all) or an arena (--shm NAME or --file PATH), not both")
        from a0py.cli import arenas

        return click.get_current_context().invoke(arenas.rm, shm=shm, path=path, force=force)
    if every == bool(topics):
        raise click.UsageError("name the topics to remove, or --all (or an arena: --shm NAME or --file PATH)")
    root = root or Root.parse(None)
    names = list(list_topics(root)) if every else list(dict.fromkeys(topics))
    missing = []
    for name in names:
        target = TopicTarget(name, root)
        topic = Topic(name, root=root)
        protocols = _existing(topic)
        if not protocols:
            missing.append(target)
            continue
        paths = _arena_paths(topic, protocols)
        users = sorted({pid for pids in _procs.attached(paths.values()).values() for pid in pids})
        with errors_about_topic(target):
            try:
                removed = topic.unlink(protocols)
            except OSError as e:
                raise CliError(f"cannot remove {target.label}: {e}") from None
        remove_empty_dirs(topic)
        if users:
            _warn(f"{target.label} is still open in process{'es' if len(users) > 1 else ''} "
                  f"{', '.join(map(str, users))}: they keep using the removed arenas until they close them")
        if verbose:
            click.echo(f"{name} ({', '.join(removed)})")
    if missing and not force:
        shown = ", ".join(t.label for t in missing)
        raise CliError(f"{shown} {'does' if len(missing) == 1 else 'do'} not exist under "
                       f"{root.spec()}: nothing to remove (`a0py ls` lists the topics)")


# -- a0py topic ...: the commands under ROS 2's names


@click.group("topic")
def topic_group():
    """The topic commands under the names `ros2 topic` uses: list (ls),
    echo, pub, hz, bw and info, with the same options."""


for _name, _command in (("list", ls), ("echo", echo), ("pub", pub), ("hz", hz), ("bw", bw), ("info", info)):
    topic_group.add_command(_command, _name)
