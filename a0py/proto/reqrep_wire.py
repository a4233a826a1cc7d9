"""The request/reply wire that RPC and PRPC share (as AlephZero's ``protocol_util``):
the packets, their headers, and the checks both sides make of what users hand them.

A topic's requests, replies and control packets share one arena (``T.rpc`` or
``T.prpc``), told apart by the header ``a0_rpc_type``:

=========  ===================================================================
request    a client's request; its packet id is the request id. Optional header
           ``a0_rpc_deadline``: CLOCK_MONOTONIC ns after which the client no
           longer waits.
accept     a server took every request up to seq ``a0_rpc_through`` (written
           before it calls the handler).
reply      the answer to request ``a0_rpc_req``, with ``a0_rpc_status`` ``ok``,
           ``error`` (the handler raised, or the server closed: the payload says
           why) or ``expired`` (older than the server's ``max_age`` when it
           started). PRPC replies also carry ``a0_rpc_done`` (``1`` on the last).
cancel     the client gave up request ``a0_rpc_req`` (cancel, timeout).
start      a server started (pid in ``a0_rpc_server``).
=========  ===================================================================

The live server holds the deadman in the arena's header for its life: that lock, not a
heartbeat, is how clients know whether a server is alive (:func:`live_server_pid`).

The server side is :mod:`a0py.proto.reqrep_server`, the client side
:mod:`a0py.proto.reqrep_client`; :mod:`a0py.proto.rpc` and :mod:`a0py.proto.prpc` are
the two protocols made of them.
"""

import time

from .. import _core
from ..errors import ArgumentError
from .topic import RPC, Topic

__all__ = [
    "DEADLINE", "DEFAULT_MAX_AGE_S", "DEFAULT_WAIT_FOR_SERVER_S", "DONE", "POLL_S",
    "READER_INIT_AWAIT_NEW", "READER_INIT_OLDEST", "READER_ITER_NEXT", "READ_BATCH", "REQ",
    "RESERVED_PREFIX", "SERVER", "STATUS", "S_ERROR", "S_EXPIRED", "S_OK", "THROUGH", "TYPE",
    "T_ACCEPT", "T_CANCEL", "T_REPLY", "T_REQUEST", "T_START", "check_seconds", "describe_topic",
    "accept_headers", "cancel_headers", "forget_taken", "header_int", "json_bytes", "live_server_pid",
    "message_parts", "past_deadline", "reply_headers", "request_age_s", "server_pid", "start_headers",
    "user_headers",
]

# Header names.
TYPE = "a0_rpc_type"
REQ = "a0_rpc_req"
STATUS = "a0_rpc_status"
THROUGH = "a0_rpc_through"
DEADLINE = "a0_rpc_deadline"
DONE = "a0_rpc_done"
SERVER = "a0_rpc_server"
# Values of TYPE, then of STATUS.
T_REQUEST, T_REPLY, T_CANCEL, T_ACCEPT, T_START = "request", "reply", "cancel", "accept", "start"
S_OK, S_ERROR, S_EXPIRED = "ok", "error", "expired"
# Users may not set headers with this prefix: they would be read as the protocol's.
RESERVED_PREFIX = "a0_rpc_"
_STANDARD = frozenset(_core.STANDARD_HEADERS)

DEFAULT_MAX_AGE_S = 10.0
DEFAULT_WAIT_FOR_SERVER_S = 10.0
# A waiting client looks at the server's deadman at least this often (seconds).
POLL_S = 0.1
# Packets read from the arena in one go by a server or a reply router.
READ_BATCH = 64
# The codes of _core.PacketReader's init and iter arguments used here.
READER_INIT_OLDEST, READER_INIT_AWAIT_NEW, READER_ITER_NEXT = 0, 2, 0


def check_seconds(value, what, allow_none=True):
    """`value` as float seconds (None passes if `allow_none`); ArgumentError naming
    `what` for anything else than a number >= 0."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        none = " or None" if allow_none else ""
        raise ArgumentError(f"{what} must be a number of seconds >= 0{none}, not {value!r}")
    return float(value)


def user_headers(headers):
    """`headers` as a list of pairs, refusing the protocol's reserved keys
    (ArgumentError)."""
    if headers is None:
        return []
    if isinstance(headers, (str, bytes, bytearray, memoryview)):
        raise ArgumentError(f"headers must be a mapping or an iterable of (key, value) pairs, "
                            f"not {type(headers).__name__}")
    items = list(headers.items() if hasattr(headers, "items") else headers)
    for item in items:
        key = item[0] if isinstance(item, (tuple, list)) and item else None
        if isinstance(key, str) and key.startswith(RESERVED_PREFIX):
            raise ArgumentError(f"header {key!r} is reserved for the RPC protocol "
                                f"(keys starting with {RESERVED_PREFIX!r} cannot be set)")
    return items


def message_parts(msg, extra):
    """(payload, headers) of a message given as bytes-like, str or Packet; a Packet
    keeps its own headers except the standard and protocol ones. `extra`: headers
    to add (already checked by :func:`user_headers`)."""
    if isinstance(msg, _core.Packet):
        own = [(k, v) for k, v in msg.headers.items()
               if k not in _STANDARD and not k.startswith(RESERVED_PREFIX)]
        return msg.payload, own + extra
    if not isinstance(msg, (bytes, bytearray, memoryview, str)):
        try:
            memoryview(msg)
        except TypeError:
            raise ArgumentError(f"a message must be bytes, a bytes-like object, str or an a0py.Packet, "
                                f"not {type(msg).__name__}") from None
    return msg, extra


def json_bytes(obj):
    """``json.dumps(obj)`` as compact UTF-8."""
    import json

    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def header_int(text, default=0):
    """A header's value as an int; `default` if it is missing or not a number (a
    header is read from shared memory: never trusted)."""
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def past_deadline(headers, now=None):
    """Whether the request with these headers has a deadline that has passed (`now`:
    CLOCK_MONOTONIC ns, read if None)."""
    deadline = headers.get(DEADLINE)
    if deadline is None:
        return False
    return (time.monotonic_ns() if now is None else now) >= header_int(deadline, 1 << 63)


def start_headers(server):
    """The headers of a start packet: a server (``server``: its pid, or who stands in) started."""
    return [(TYPE, T_START), (SERVER, server)]


def accept_headers(through):
    """The headers of an accept packet: every request up to seq ``through`` is taken."""
    return [(TYPE, T_ACCEPT), (THROUGH, str(through))]


def cancel_headers(rid):
    """The headers of a cancel packet: the client gave up request ``rid``."""
    return [(TYPE, T_CANCEL), (REQ, rid)]


def reply_headers(rid, status, done=None):
    """The protocol's headers of a reply to request ``rid``; ``done`` (PRPC only:
    whether it is the last reply) adds ``a0_rpc_done``."""
    headers = [(TYPE, T_REPLY), (REQ, rid), (STATUS, status)]
    if done is not None:
        headers.append((DONE, "1" if done else "0"))
    return headers


def request_age_s(headers, now):
    """How old the request with these headers is at ``now`` (CLOCK_MONOTONIC ns), in
    seconds; 0 if its write time is missing or not a number."""
    return (now - header_int(headers.get("a0_time_mono"), now)) / 1e9


def forget_taken(pending, kind, headers):
    """Drop from ``pending`` (request id -> request packet: the requests no server has
    taken) those that the control packet of type ``kind`` says another server took: a
    reply answers its request, an accept takes every request up to its seq."""
    if kind == T_REPLY:
        pending.pop(headers.get(REQ), None)
    elif kind == T_ACCEPT:
        through = header_int(headers.get(THROUGH))
        for rid in [rid for rid, p in pending.items() if p.seq <= through]:
            del pending[rid]


def live_server_pid(deadman):
    """The pid of the live server holding `deadman` (a :class:`a0py._core.Deadman`),
    -1 if one is alive but its pid is unknown, None if none is."""
    taken, _mine, pid = deadman._state()
    return (pid or -1) if taken else None


def server_pid(topic, protocol=RPC):
    """The pid of the live server of `topic` (``protocol`` ``"rpc"`` or ``"prpc"``),
    or None if none is alive. Does not create the topic."""
    topic = Topic.of(topic)
    if not topic.exists(protocol):
        return None
    pid = live_server_pid(_core.Deadman(topic.arena(protocol)))
    return None if pid is None else (pid if pid > 0 else None)


def describe_topic(protocol, topic):
    """How errors and logs name a topic: ``rpc topic 'name'``."""
    return f"{protocol} topic {topic.name!r}"
