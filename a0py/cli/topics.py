"""Commands on a topic's arenas, in the habits of ``ros2 topic``: ``ls``,
``info`` and ``rm`` (the last two also take ``--shm/--file`` and then work on
one raw arena, as ``a0py.cli.arenas``); and ``a0py topic list|echo|pub|hz|bw|info``,
the topic commands under ROS 2's names (:data:`topic_group`), whose other
commands live in ``a0py.cli.echo``, ``a0py.cli.pub`` and ``a0py.cli.rates``.

Invariants:

* ``ls``, ``info`` and ``rm`` open arenas by name and close them before
  they return, and never take a lock for longer than one copy; they create
  no topic.
"""

import click

from a0py.cli import _bridge_status, _procs
from a0py.cli._common import (
    PUBSUB,
    TOPIC,
    CliError,
    TopicTarget,
    errors_about_topic,
    root_option,
)
from a0py.cli._output import (
    ago,
    counted,
    escape_text,
    human_bytes,
    print_fields,
    print_table,
    wall_time,
    warn,
)
from a0py.cli.echo import echo
from a0py.cli.pub import pub
from a0py.cli.rates import bw, hz
from a0py.errors import A0Error
from a0py.proto.packets import TIME_WALL, WRITER_ID

SCHEMA = "schema"
_SHM_DIR = "/dev/shm"


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


class _RingSnapshot:
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
        warn(f"no topics under {root.spec()} (publish with `a0py pub TOPIC DATA`)")
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
    bridge = _bridge_status.read_status(root)
    rows = []
    for name, protocols in topics.items():
        topic = Topic(name, root=root)
        size, packets, newest = 0, "-", "-"
        for protocol in protocols:
            try:
                with _open_arena(topic, protocol) as arena:
                    size += arena.size
                    if protocol == PUBSUB:
                        state = _RingSnapshot(arena, all_packets=False)
                        packets = str(state.count)
                        if state.newest is not None:
                            newest = ago(state.newest[1])
            except A0Error as e:
                warn(f"{TopicTarget(name, root).label}: {protocol} arena: {e} (`a0py info {name}` for more)")
        row = [name, ",".join(protocols), human_bytes(size), packets, newest,
               str(len(processes.get(name, ())))]
        if bridge is not None:
            row.append(_bridge_status.undelivered(bridge, name))
        rows.append(row)
    columns = ["TOPIC", "PROTOCOLS", "SIZE", "PACKETS", "NEWEST", "PROCESSES"]
    if bridge is not None:
        columns.append("UNDELIVERED")
    print_table(columns, rows, right=("SIZE", "PACKETS", "PROCESSES", "UNDELIVERED"))
    for line in _bridge_status.gone_peer_lines(bridge):
        warn(line)


def _mailbox_table(after_topics):
    """``ls --all``'s table of the actors' mailboxes (none: a note on stderr)."""
    from a0py import Arena, Deadman, Transport
    from a0py.actor.arena import arena_name, list_mailboxes

    names = list_mailboxes()
    if not names:
        warn("no actor mailboxes on this machine")
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
            warn(f"actor mailbox {escape_text(shm[name])}: {e}")
            continue
        users = processes.get(_SHM_DIR + "/" + shm[name], ())
        rows.append([escape_text(name), human_bytes(size), str(queued),
                     f"pid {owner}" if owner else "not running", str(len(users))])
    if after_topics:
        click.echo()
    print_table(["MAILBOX", "SIZE", "QUEUED", "ACTOR", "PROCESSES"], rows,
                right=("SIZE", "QUEUED", "PROCESSES"))


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
                state = _RingSnapshot(arena, all_packets=protocol == PUBSUB)
                size = arena.size
        except A0Error as e:
            rows.append((protocol, f"{paths[protocol]}: {e}"))
            continue
        noun = "packet" if protocol == PUBSUB else "frame"
        frames = "empty" if state.empty else f"{counted(state.count, noun)} (seq {state.seq_low}..{state.seq_high})"
        rows.append((protocol, f"{paths[protocol]}, {human_bytes(size)}, {frames}, {human_bytes(state.used)} used"))
        rows.extend(_owner_rows(topic, protocol))
        if protocol != PUBSUB:
            continue
        if state.newest is not None:
            seq, wall, writer = state.newest
            rows.append(("newest", f"seq {seq} at {wall_time(wall)} ({ago(wall)}), writer {writer}"))
        if state.writers:
            rows.append(("writers", f"{len(state.writers)} in the ring"))
            for writer, (seq, wall) in sorted(state.writers.items(), key=lambda kv: -kv[1][0]):
                rows.append(("", f"{writer}: last seq {seq}, {ago(wall)}"))
        if state.corrupt:
            rows.append(("corrupt", f"{state.corrupt} frames are not a0py packets"))
    rows.extend(_bridge_status.info_rows(_bridge_status.read_status(topic.root), topic.name))
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
            warn(f"{target.label} is still open in process{'es' if len(users) > 1 else ''} "
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
