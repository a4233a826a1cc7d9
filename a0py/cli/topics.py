"""Commands on topics, in the habits of ``ros2 topic``: ``ls``, ``echo``,
``pub``, ``hz``, ``bw``, ``info`` and ``rm`` (the last two also take
``--shm/--file`` and then work on one raw arena, as ``a0py.cli.arenas``).

Invariants:

* Commands that read (``echo``, ``hz``, ``bw``) never create a topic: a
  reader that created it would fix its arena's size before the publisher
  that knows the size it needs. They wait for the topic to appear instead.
  ``pub`` creates it (``--size`` for the size), as a0py.Publisher does.
* ``ls``, ``info`` and ``rm`` open arenas by name and close them before
  they return, and never take a lock for longer than one copy.
* A streaming command (``echo``, ``hz``, ``bw``, ``pub --rate``) ended by
  Ctrl-C exits 0, as ``tail`` does; a packet lost to eviction before the
  command read it is reported on stderr, never dropped silently.
"""

import itertools
import math
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
    wait_for_topic,
)
from a0py.cli._output import (
    human_bytes,
    human_seconds,
    print_fields,
    print_table,
    show_packet,
    wall_time,
)
from a0py.errors import A0Error, A0TimeoutError, PacketCorruptError
from a0py.proto.packets import TIME_MONO, TIME_WALL, WRITER_ID

PUBSUB = "pubsub"
SCHEMA = "schema"
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
def ls(root, quiet):
    """List the topics: protocols, arena sizes, packets, newest packet's age,
    and the processes that have the topic open now.

    PROCESSES counts the live processes (yours, or everyone's for root)
    that have one of the topic's arenas mapped: its publishers,
    subscribers and servers. PACKETS and NEWEST are the pubsub arena's.
    """
    from a0py.proto.topic import Root, Topic, list_topics

    root = root or Root.parse(None)
    topics = list_topics(root)
    if quiet:
        for name in topics:
            click.echo(name)
        return
    if not topics:
        _warn(f"no topics under {root.spec()} (publish with `a0py pub TOPIC DATA`)")
        return
    wanted = {}
    for name, protocols in topics.items():
        for protocol, path in _arena_paths(Topic(name, root=root), protocols).items():
            wanted[path] = (name, protocol)
    processes = {}
    for path, pids in _procs.attached(wanted).items():
        processes.setdefault(wanted[path][0], set()).update(pids)
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
        rows.append([name, ",".join(protocols), human_bytes(size), packets, newest,
                     str(len(processes.get(name, ())))])
    print_table(["TOPIC", "PROTOCOLS", "SIZE", "PACKETS", "NEWEST", "PROCESSES"], rows,
                right=("SIZE", "PACKETS", "PROCESSES"))


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
@packet_format_options
def echo(topic, root, init, newest, count, once, timeout, fmt):
    """Print a topic's packets as they arrive, one line each: the payload
    as text (bytes that are not UTF-8 and control characters escaped), or,
    on a typed topic, the decoded message (JSON and protobuf messages as
    JSON, long bytes fields as their size; arrays and images summed up).

    Waits for the topic if it does not exist yet, and then prints it from
    its first packet. Ctrl-C ends it.
    """
    from a0py import INIT_FIRST, ITER_NEWEST, ITER_NEXT, SubscriberSync

    if once:
        if count not in (None, 1):
            raise click.UsageError("--once is -n 1: give one of them")
        count = 1
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
                show_packet(pkt, target.label, fmt)
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


@click.command()
@click.argument("topic", type=TOPIC)
@click.argument("data")
@root_option
@click.option("--rate", type=RATE, default=None, metavar="HZ",
              help="Publish HZ times a second (until --times or Ctrl-C).")
@click.option("--times", type=Count(), default=None, metavar="N",
              help="Publish N times (default 1, or until Ctrl-C with --rate).")
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
def pub(topic, data, root, rate, times, lines, as_json, as_hex, headers, size, verbose):
    """Publish DATA to a topic (creating the topic if it does not exist).

    DATA is text (sent as its UTF-8 bytes), hex digits with --hex, JSON with
    --json, or - for standard input (all of it as one packet, or each line
    as one with --lines). Without --rate or --times it publishes once.
    """
    from a0py import Publisher

    if as_json and as_hex:
        raise click.UsageError("choose one of --json and --hex")
    if lines and data != "-":
        raise click.UsageError("--lines reads standard input: give DATA as -")
    if lines and times is not None:
        raise click.UsageError("--lines publishes each line once: leave out --times")
    extra = [parse_header(item) for item in headers]
    if as_json:
        extra.append(("content-type", "application/json"))
    target = TopicTarget(topic, root)
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
    try:
        with errors_about_topic(target), Publisher(target.topic(size=size)) as publisher:
            for payload in _paced(payloads(), rate):
                seq = publisher.pub(payload, extra)
                if verbose:
                    click.echo(seq)
    except KeyboardInterrupt:
        pass


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
@click.option("--window", type=BoundedInt(2, MAX_WINDOW), default=10000, show_default=True, metavar="N",
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
@click.option("--window", type=BoundedInt(2, MAX_WINDOW), default=100, show_default=True, metavar="N",
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
@click.option("--all", "every", is_flag=True, help="Remove every topic under the root.")
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
    NAME or --file PATH instead of topics: remove one raw arena.
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
