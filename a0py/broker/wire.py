"""How the broker and its clients meet in shared memory: arena names and frame layout.

Everything that depends on the transport lives here, so that moving the broker onto
topics and packets changes this module only.

Arenas (mode 0600), under the topics' root (``A0PY_ROOT``, or the ``root`` a broker or
client is given: :class:`a0py.proto.topic.Root`), named as topic arenas are, with a
protocol of their own, so ``a0py ls`` lists them for what they are and ``a0py rm``
removes them:

* ``<broker>.broker`` (shared memory ``/a0py.<broker>.broker`` by default; in a
  directory root ``DIR/<broker>.broker.a0``): the **request arena**. Every client writes
  its requests here; the broker is its only reader. Its deadman is the broker's
  liveness: the running broker holds it for its life, so clients see a crashed broker
  at once. A broker that stops with no client connected removes it.
* ``<broker>/<client>.broker_client`` (``/a0py.<broker>:<client>.broker_client``;
  ``DIR/<broker>/<client>.broker_client.a0``): one **client arena** per client. The
  broker writes replies and notifications; the client is its only reader. Its deadman
  is the client's liveness: the client's reader thread holds it, so the broker sees a
  killed client at once. The client removes it when it closes, the broker when it sees
  the client die.

Frames. Each frame is a header and a list of items; every value in an item is the
dataspace's canonical encoding (:func:`a0py.dataspace.encode`), every pattern its text
(:func:`a0py.dataspace.format_term`)::

    request:  MAGIC  kind  flags  varint req_id  varint len  client (UTF-8)  items...
    reply:    MAGIC  kind  flags  varint id                                  items...
    item:     op  varint len  payload

A varint is unsigned LEB128 of at most 9 bytes. The kinds, flags and item ops, and the
code that builds and parses frames, are in ``framing.py`` (compiled with the engine;
re-exported here). ``FLAG_MORE`` marks a frame whose request (or reply)
continues in the next frame of the same source: a request larger than a frame is cut
between items, and the broker applies it only once its last frame is in (batches stay
atomic).

Invariants:

* **No request is evicted unread.** The request arena is a backpressured queue
  (:func:`request_queue`, an :class:`a0py.proto.queue.ArenaQueue`): a writer appends only
  where nothing would be evicted; otherwise it sleeps on the arena until the broker
  makes room, which it does after every batch it reads (so no writer waits for a broker
  that waits for it), for at most the client's timeout (then
  :class:`BrokerTimeoutError` names the broker). If the broker is dead the write is
  dropped: the client re-sends its whole state when a broker takes the deadman again,
  so nothing is lost that matters.
* **A client never trusts its arena to keep every frame.** The broker never waits for a
  slow client: its arena is a ring, and an overrun shows as a gap in the frame seqs. The
  client then asks for a resync (its whole state again, every result in full).
* Frames read from shared memory are parsed with bounds checks; a malformed frame is a
  :class:`WireError`, never a crash or a hang.
"""

import re

from a0py.dataspace import decode

from ._build_choice import framing_build as _framing
from .errors import BrokerError, BrokerNameError, BrokerTypeError, WireError  # noqa: F401 - re-exported

# The frame layout and codec (a0py/broker/framing.py, compiled): re-exported, so that
# ``wire`` stays the one module the broker and its clients meet through.
MAGIC = _framing.MAGIC
FLAG_MORE = _framing.FLAG_MORE
FLAG_FULL = _framing.FLAG_FULL
FLAG_OWNERS = _framing.FLAG_OWNERS
MAX_FRAME = _framing.MAX_FRAME
MAX_VARINT = _framing.MAX_VARINT
REQ_STATE = _framing.REQ_STATE
REQ_BATCH = _framing.REQ_BATCH
REQ_PING = _framing.REQ_PING
REQ_FACTS = _framing.REQ_FACTS
REQ_BYE = _framing.REQ_BYE
REQ_DIED = _framing.REQ_DIED
REQ_REVOKE = _framing.REQ_REVOKE
REQ_WAKE = _framing.REQ_WAKE
REP_ACK = _framing.REP_ACK
REP_ERROR = _framing.REP_ERROR
REP_PONG = _framing.REP_PONG
REP_FACTS = _framing.REP_FACTS
REP_NOTIFY = _framing.REP_NOTIFY
REP_REVOKED = _framing.REP_REVOKED
REP_RESYNC = _framing.REP_RESYNC
REP_SUB_ERROR = _framing.REP_SUB_ERROR
IT_CLAIM = _framing.IT_CLAIM
IT_RETRACT = _framing.IT_RETRACT
IT_RETRACT_PATTERN = _framing.IT_RETRACT_PATTERN
IT_SUBSCRIBE = _framing.IT_SUBSCRIBE
IT_UNSUBSCRIBE = _framing.IT_UNSUBSCRIBE
IT_PATTERN = _framing.IT_PATTERN
IT_OWNER = _framing.IT_OWNER
IT_INDEX = _framing.IT_INDEX
IT_TEXT = _framing.IT_TEXT
IT_FACT = _framing.IT_FACT
IT_ADD = _framing.IT_ADD
IT_DEL = _framing.IT_DEL
IT_SIZE = _framing.IT_SIZE
varint = _framing.varint
item = _framing.item
subscribe_payload = _framing.subscribe_payload
request_frames = _framing.request_frames
request_frames_of = _framing.request_frames_of
reply_frames = _framing.reply_frames
notify_frames = _framing.notify_frames
row_items = _framing.row_items
parse_items = _framing.parse_items
parse_request = _framing.parse_request
parse_reply = _framing.parse_reply
parse_subscribe = _framing.parse_subscribe
parse_varint = _framing.parse_varint

#: The protocol of a broker's request arena (``<broker>.broker`` under the root).
BROKER = "broker"
#: The protocol of a client's arena (``<broker>/<client>.broker_client`` under the root).
BROKER_CLIENT = "broker_client"
REQUEST_ARENA_SIZE = 8 << 20
CLIENT_ARENA_SIZE = 4 << 20
#: The longest spin (seconds) of the broker's wait for requests and of a client's wait for
#: replies, by default (``Broker(spin=)``, ``BrokerClient(spin=)``; docs/broker.md,
#: "Latency and the spin"): the transport's own 50 µs. A longer one (2 ms spans the gap
#: between the requests of a client that claims a thousand times a second) takes about
#: 36 µs off the claim -> notification p50 on an idle 2-core machine but costs close to a
#: core per spinning process (0.88 and 0.92 CPU s/s at 1000 claims/s), so it is asked
#: for, not given. Past the first 50 µs a spin goes on only if every runnable task of the
#: machine has a CPU then (:attr:`a0py.Transport.spin_max`).
SPIN = 50e-6
#: The most ``spin`` may be (the transport's limit).
SPIN_LIMIT = 1.0
# A name is one segment of a topic name (the arenas are named as topics are).
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,99}\Z")


def check_name(name, what="broker name"):
    """Return ``name`` if it is a valid broker or client name; else raise
    :class:`BrokerNameError`."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise BrokerNameError(
            f"{what} must be 1 to 100 characters of [A-Za-z0-9_.-], not starting with '.' or "
            f"'-', got {name!r}")
    return name


def check_spin(spin):
    """Return ``spin`` (seconds, a number from 0 to :data:`SPIN_LIMIT`) as a float; raise
    :class:`BrokerTypeError` for what is not a number, ``ValueError`` for one out of range."""
    if isinstance(spin, bool) or not isinstance(spin, (int, float)):
        raise BrokerTypeError(f"spin must be a number of seconds (0 turns spinning off), got "
                              f"{type(spin).__name__} {spin!r}")
    if not 0 <= spin <= SPIN_LIMIT:   # also NaN
        raise ValueError(f"spin must be from 0 (no spinning) to {SPIN_LIMIT:g} seconds, got {spin!r}")
    return float(spin)


def root_of(root=None):
    """The :class:`a0py.proto.topic.Root` a broker or client lives under: `root` (a
    :class:`Root` or its ``A0PY_ROOT`` syntax), or ``A0PY_ROOT`` now when None. Raises
    :class:`a0py.ArgumentError` for a bad root."""
    from a0py.proto.topic import Root, current_root

    return current_root() if root is None else Root.parse(root)


def request_topic(broker, root=None, size=None):
    """The :class:`a0py.proto.topic.Topic` whose :data:`BROKER` arena is broker
    ``broker``'s request arena (``size``: bytes when this process creates it, default
    :data:`REQUEST_ARENA_SIZE`)."""
    from a0py.proto.topic import Topic

    return Topic(check_name(broker), root=root_of(root), size=size or REQUEST_ARENA_SIZE)


def client_topic(broker, client, root=None, size=None):
    """The :class:`a0py.proto.topic.Topic` whose :data:`BROKER_CLIENT` arena is the arena
    of client ``client`` of broker ``broker`` (``size``: default :data:`CLIENT_ARENA_SIZE`)."""
    from a0py.proto.topic import Topic

    return Topic(f"{check_name(broker)}/{check_name(client, 'client name')}", root=root_of(root),
                 size=size or CLIENT_ARENA_SIZE)


def request_arena_name(broker, root=None):
    """Where broker ``broker``'s request arena is: its shared-memory name (as
    :meth:`a0py.Arena.shm` takes it) or, under a directory root, its file path."""
    return request_topic(broker, root).location(BROKER)


def client_arena_name(broker, client, root=None):
    """Where the arena of client ``client`` of broker ``broker`` is (see
    :func:`request_arena_name`)."""
    return client_topic(broker, client, root).location(BROKER_CLIENT)


# ---------------------------------------------------------------- values


def decode_value(data):
    """The value whose canonical encoding is ``data``: :func:`a0py.dataspace.decode`
    (compiled; it raises :class:`a0py.dataspace.DecodeError` naming the offset)."""
    return decode(data)


# ---------------------------------------------------------------- the request arena


def open_request_arena(broker, size=None, root=None):
    """Maps broker ``broker``'s request arena under `root` (default ``A0PY_ROOT``):
    creates it (``size`` bytes, default :data:`REQUEST_ARENA_SIZE`, mode 0600) or
    attaches to it at the size it has."""
    from a0py.proto.topic import map_arena

    return map_arena(request_topic(broker, root, size), BROKER)


def broker_pid(broker, root=None):
    """The pid of the process running broker ``broker`` under `root` (default
    ``A0PY_ROOT``), or None when none runs. Creates nothing: it looks for the request
    arena and, if there is one, at who holds its deadman. Raises
    :class:`BrokerNameError`, and :class:`a0py.A0Error` for an arena it may not read
    (another user's, not an arena)."""
    import a0py
    from a0py.errors import ArenaNotFoundError
    from a0py.proto.topic import map_arena

    try:
        arena = map_arena(request_topic(broker, root), BROKER, create=False)
    except ArenaNotFoundError:
        return None
    try:
        return a0py.Deadman(arena).owner_pid
    finally:
        arena.close()


def remove_request_arena(broker, root=None):
    """Removes broker ``broker``'s request arena from the root (mappings stay valid);
    returns whether it existed."""
    from a0py.proto.topic import unlink_topic

    return bool(unlink_topic(request_topic(broker, root), (BROKER,)))


def open_client_arena(broker, client, size=None, root=None):
    """Maps (creates, or attaches to) the arena of client ``client`` of broker ``broker``
    (``size`` bytes when it creates it). Under a directory root it lives in the
    directory ``<broker>/``, which whoever removes the last client arena of the broker
    removes (:func:`remove_client_arena`): a creator that loses that race tries again."""
    from a0py.errors import ArenaNotFoundError
    from a0py.proto.topic import map_arena

    topic = client_topic(broker, client, root, size)
    tries = 3
    while True:
        try:
            return map_arena(topic, BROKER_CLIENT)
        except ArenaNotFoundError:   # its directory was removed between mkdir and open
            tries -= 1
            if not tries:
                raise


def attach_client_arena(broker, client, root=None):
    """Maps the arena of client ``client`` of broker ``broker`` if it exists; raises
    :class:`a0py.ArenaNotFoundError` if it does not (nothing is created)."""
    from a0py.proto.topic import map_arena

    return map_arena(client_topic(broker, client, root), BROKER_CLIENT, create=False)


def remove_client_arena(broker, client, root=None):
    """Removes the arena of client ``client`` of broker ``broker`` (mappings stay valid),
    and under a directory root the broker's client directory if it is empty now."""
    from a0py.proto.topic import remove_empty_dirs, unlink_topic

    topic = client_topic(broker, client, root)
    unlink_topic(topic, (BROKER_CLIENT,))
    remove_empty_dirs(topic)


def request_key(broker, root=None):
    """The key of broker ``broker``'s request arena in the process's arena cache
    (:mod:`a0py.proto.arena_cache`)."""
    return ("broker", root_of(root), check_name(broker))


def hold_request_arena(broker, size=None, root=None):
    """Broker ``broker``'s request arena from the process's arena cache (mapped, or
    created with ``size``, on first use), held until :func:`release_request_arena`: the
    clients and the broker of one process share one mapping, unmapped with the last."""
    from a0py.proto import arena_cache

    root = root_of(root)
    return arena_cache.hold(request_key(broker, root), open_request_arena, broker, size, root)


def release_request_arena(broker, root=None):
    """Gives back one :func:`hold_request_arena`."""
    from a0py.proto import arena_cache

    arena_cache.release(request_key(broker, root))


def request_queue(broker, size=None, root=None):
    """The backpressured queue (:class:`a0py.proto.queue.ArenaQueue`) on broker
    ``broker``'s request arena: clients put requests, the broker takes them and gives
    their room back after every batch."""
    from a0py.proto.queue import ArenaQueue

    root = root_of(root)
    return ArenaQueue(request_key(broker, root), open_request_arena, broker, size, root,
                      name=f"the request arena of broker {broker!r}")
